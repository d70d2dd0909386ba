"""A chapter run as a plain script with a bad flag, or live without a GPU, stops in one line.

Each check stops before the chapter reads a recording. That every chapter
replays its recordings on both GPUs, none stale, is the docs build's: it runs
every chapter once per GPU (``nox -s docs``, which stops at a stale recording),
and ``tests/browser/test_banners.py`` reads each page's replay banner. The
chapters run in this process (:func:`quick_python.run_here`: a fresh
``__main__``, their own arguments and environment, an uncaught error shown by
``sys.excepthook``).
"""

import os
from pathlib import Path

import pytest

from quick_python import run_here

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").rglob("plot_*.py"))
CHAPTER_1 = Path(__file__).resolve().parents[1] / "examples" / "plot_01_linear.py"


def run_example(path, *args, **env):
    return run_here(path, *args, env={**os.environ, "MPLBACKEND": "Agg", "PROFILING_GUIDE_MODE": "replay", **env})


@pytest.mark.parametrize("flag", ["--batch=0", "--batch=-4", "--dtype=int3"])
def test_bad_flags_are_one_line_errors(flag):
    result = run_example(CHAPTER_1, flag)
    assert result.returncode == 2
    error_lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and "Traceback" not in result.stderr


def test_live_mode_without_a_gpu_is_a_one_line_error():
    result = run_example(CHAPTER_1, "--mode", "live")
    assert result.returncode == 1
    assert result.stderr.startswith("error: PROFILING_GUIDE_MODE=live but no CUDA GPU is visible")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("example", [p for p in EXAMPLES if p.stem in ("plot_05_compare", "plot_06_fused", "plot_08_own_model")],
                         ids=lambda p: p.stem)
def test_the_bf16_chapters_refuse_another_dtype_in_one_line(example):
    result = run_example(example, "--dtype", "float16")
    assert result.returncode == 1
    assert result.stderr.startswith("error: --dtype float16 is not supported here")
    assert result.stderr.count("\n") == 1
