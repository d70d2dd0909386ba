"""``scripts/record_report_samples.py`` on a machine without a GPU: what can be checked, is.

The samples themselves are recorded on a GPU; here the script must build what
the CPU can run, skip what it cannot in one line, and refuse to record.
"""

import os
import subprocess
from pathlib import Path

import pytest
import torch

from quick_python import quick_python
import profiling_guide

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "record_report_samples.py"
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")


def run(args, cwd, extra_path=()):
    src = str(Path(profiling_guide.__file__).resolve().parents[1])
    path = [*map(str, extra_path), src, os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    return subprocess.run([quick_python(), str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_the_dry_run_builds_what_the_cpu_can_run(tmp_path):
    result = run([str(tmp_path / "samples"), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for name in ("llama_train_step", "llama_forward.compiled", "cuda_graph_replay", "two_streams"):
        assert any(line.strip().startswith(name + ":") for line in lines), result.stdout
    assert "cuda_graph_replay: builds and runs one step on the CPU" in result.stdout


def test_the_llama_samples_are_skipped_in_one_line_each_without_transformers(tmp_path):
    fake = tmp_path / "fake"
    (fake / "transformers").mkdir(parents=True)
    (fake / "transformers" / "__init__.py").write_text("raise ImportError('transformers is broken here')\n")
    result = run([str(tmp_path / "out"), "--dry-run"], cwd=tmp_path, extra_path=[fake])
    assert result.returncode == 0 and "Traceback" not in result.stdout + result.stderr
    skipped = [line for line in result.stdout.splitlines() if "transformers is not importable" in line]
    assert len(skipped) == 2


@NO_GPU
def test_recording_needs_a_gpu_and_says_so_in_one_line(tmp_path):
    result = run([str(tmp_path / "samples")], cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "needs a CUDA GPU" in result.stderr


def test_an_output_that_is_a_file_is_one_line(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    result = run([str(a_file), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and "it is a file" in result.stderr
