"""The closure fingerprint: what a recording's code reaches in profiling_guide, and when it goes stale.

A kernel edit must make chapter 6's recording of our fused MLP stale, though the
page lists only ``FusedGeGLUMLP`` and ``fused_mlp.geglu``; editing a comment or a
docstring, or the layout, must not.
"""

import ast
import json
import os
import sys
from pathlib import Path

import pytest

from profiling_guide.kernels import fused_mlp, geglu_common
from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.pages import closure, recordings
from profiling_guide.pages.chapter import Chapter
from quick_python import run_here

ROOT = Path(__file__).resolve().parents[1]
COMMON = Path(geglu_common.__file__).resolve()
CHAPTER_6 = ROOT / "examples" / "plot_06_fused.py"
H100 = "nvidia-h100-80gb-hbm3"

# Edits of geglu_common.py: the first two change what runs, the others only how it reads.
KERNEL_EDIT = ("        half_g = 0.5 * g\n", "        half_g = 0.49 * g\n")  # inside @triton.jit gelu_tanh_times
CONSTANT_EDIT = ("GELU_CUBIC = tl.constexpr(0.044715)", "GELU_CUBIC = tl.constexpr(0.0447)")
COMMENT_EDIT = ("  # √(2/π)·(g + 0.044715·g³)\n", "  # z, as the docstring says\n")
DOCSTRING_EDIT = ('    """``gelu_tanh(g) * u`` on fp32 values: the GeGLU epilogue.',
                  '    """The GeGLU epilogue, ``gelu_tanh(g) * u``, on fp32 values.\n\n    Reworded.')
LAYOUT_EDIT = ("        half_g = 0.5 * g\n        return (half_g + half_g * t) * u\n",
               "        half_g = (0.5\n                  * g)\n\n"
               "        return ((half_g + half_g * t)\n                * u)\n")


def edited(monkeypatch, *edits) -> None:
    """Make the closure read geglu_common.py with ``edits`` applied (the file itself is left alone)."""
    text = COMMON.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) >= 1, old
        text = text.replace(old, new)
    real = closure._source
    monkeypatch.setattr(closure, "_source", lambda path: text if Path(path).resolve() == COMMON else real(path))


def test_the_fused_mlp_reaches_its_kernels_their_helpers_and_constants():
    reached = recordings.reached([FusedGeGLUMLP, fused_mlp.geglu]).definitions()
    for key in ("profiling_guide.kernels.fused_mlp:LAUNCHERS",  # geglu picks a launcher from this dict
                "profiling_guide.kernels.geglu_kernels:geglu_packed_tma",
                "profiling_guide.kernels.geglu_kernels:_geglu_packed_tma_gemm_kernel",  # @triton.jit
                "profiling_guide.kernels.geglu_kernels:GPU_CONFIGS",  # its @triton.autotune's configs
                "profiling_guide.kernels.geglu_pingpong:_geglu_pingpong_gemm_kernel",  # @gluon.jit
                "profiling_guide.kernels.geglu_common:gelu_tanh_times",  # a device helper of another module
                "profiling_guide.kernels.geglu_common:GELU_CUBIC",  # a constant the helper reads
                "profiling_guide.kernels.geglu_backward:geglu_backward"):  # through GeGLUFunction
        assert key in reached, key
    assert all(k.startswith("profiling_guide") for k in reached)  # torch and triton are not followed
    assert "profiling_guide.kernels.fused_mlp:main" not in reached  # nor what the code does not name


def test_a_kernel_edit_changes_the_closure_fingerprint_and_prose_or_layout_does_not(monkeypatch):
    code, args = [FusedGeGLUMLP, fused_mlp.geglu], {"batch": 64}
    before = recordings.closure_fingerprint(code, args)
    for edits, changes in (([KERNEL_EDIT], True), ([CONSTANT_EDIT], True),
                           ([COMMENT_EDIT, DOCSTRING_EDIT, LAYOUT_EDIT], False)):
        with monkeypatch.context() as m:
            edited(m, *edits)
            assert (recordings.closure_fingerprint(code, args) != before) is changes, edits
    assert recordings.closure_fingerprint(code, args) == before


def test_the_normalized_tree_is_the_same_on_every_python():
    # Python 3.12.1 gives a format spec an empty text part that 3.11 and 3.13 do not
    plain = ast.parse('f"{x:{spec}}"')
    padded = ast.parse('f"{x:{spec}}"')
    padded.body[0].value.values[0].format_spec.values.append(ast.Constant(""))
    assert closure.normalized(plain) == closure.normalized(padded)
    # and fields a later Python adds empty (a function's type_params) are not written
    tree = ast.parse("def f(a):\n    '''Doc.'''\n    return a\n")
    tree.body[0].type_params = []
    assert closure.normalized(tree) == closure.normalized(ast.parse("def f(a):\n    return a\n"))


def _stamped_copy(tmp_path, monkeypatch) -> Path:
    """The H100 recordings in ``tmp_path`` (links), chapter 6's ``fused`` run record stamped with its closure
    fingerprint as this checkout computes it, as a live run on a GPU would write it."""
    source = recordings.default_root() / H100
    folder = tmp_path / H100
    folder.mkdir()
    for path in source.iterdir():
        (folder / path.name).symlink_to(path)
    seen = {}
    replay = Chapter._replay

    def noting(self, full, fp, *, needs_trace):
        seen.setdefault(full, fp.closure)
        return replay(self, full, fp, needs_trace=needs_trace)

    with monkeypatch.context() as m:
        m.setattr(Chapter, "_replay", noting)
        assert run_chapter_6(tmp_path).returncode == 0
    run_json = folder / "06_fused.fused.run.json"
    record = json.loads(run_json.read_text())
    run_json.unlink()
    recordings.write_json_atomic(run_json, {**record, "closure_fingerprint": seen["06_fused.fused"]})
    return run_json


def run_chapter_6(root: Path):
    return run_here(CHAPTER_6, env={**os.environ, "MPLBACKEND": "Agg", "PROFILING_GUIDE_MODE": "replay",
                                    "PROFILING_GUIDE_STALE": "error", "PROFILING_GUIDE_GPU": H100,
                                    "PROFILING_GUIDE_RECORDINGS": str(root)})


def test_editing_a_kernel_of_the_fused_mlp_makes_chapter_6s_recording_stale(tmp_path, monkeypatch):
    _stamped_copy(tmp_path, monkeypatch)
    with monkeypatch.context() as m:
        edited(m, KERNEL_EDIT)
        result = run_chapter_6(tmp_path)
    assert result.returncode == 1
    assert "recording 06_fused.fused is stale" in result.stderr and "re-record on a GPU" in result.stderr
    with monkeypatch.context() as m:
        edited(m, COMMENT_EDIT, DOCSTRING_EDIT, LAYOUT_EDIT)
        result = run_chapter_6(tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "stale" not in result.stdout


def _synthetic_recording(tmp_path, **fields) -> Chapter:
    folder = tmp_path / "some-gpu"
    folder.mkdir(exist_ok=True)
    recordings.write_json_atomic(folder / "00_synthetic.numbers.run.json",
                                 {"name": "00_synthetic.numbers", "args": {"batch": 1}, "date": "2026-01-01",
                                  "values": {"x": 1}, **fields})
    return Chapter("00_synthetic", {"batch": 1}, mode="replay", root=tmp_path)


def _step():
    return geglu_common.gelu_tanh_times


def test_a_record_without_a_closure_fingerprint_is_checked_by_its_listed_code_and_says_so_on_the_console_only(
        tmp_path, monkeypatch, capsys):
    fp = recordings.Fingerprints([_step], {"batch": 1})
    console = tmp_path / "console.txt"
    chapter = _synthetic_recording(tmp_path, fingerprint=fp.listed)
    with open(console, "w") as stream:
        monkeypatch.setattr(sys, "__stderr__", stream)
        rec = chapter.measure("numbers", _step)
    assert not rec.stale and rec.listed_only
    assert "00_synthetic.numbers (some-gpu) is checked by its listed code only" in console.read_text()
    assert "listed code only" not in capsys.readouterr().out  # stdout is what a gallery page shows
    assert "listed code" not in chapter.banner().text() and "stale" not in chapter.banner().text()


def test_a_closure_fingerprint_when_present_is_what_decides(tmp_path, monkeypatch):
    fp = recordings.Fingerprints([_step], {"batch": 1})
    fresh = _synthetic_recording(tmp_path, fingerprint="0" * 16, closure_fingerprint=fp.closure)
    rec = fresh.measure("numbers", _step)
    assert not rec.stale and not rec.listed_only  # a listed fingerprint of other text: reformatted, say
    changed = _synthetic_recording(tmp_path, fingerprint=fp.listed, closure_fingerprint="0" * 16)
    with pytest.warns(UserWarning, match="00_synthetic.numbers is stale: its code .or code of profiling_guide"):
        assert changed.measure("numbers", _step).stale
    edited(monkeypatch, KERNEL_EDIT)  # _step names gelu_tanh_times: the closure reaches its body
    again = _synthetic_recording(tmp_path, fingerprint=fp.listed, closure_fingerprint=fp.closure)
    with pytest.warns(UserWarning, match="is stale"):
        assert again.measure("numbers", _step).stale
