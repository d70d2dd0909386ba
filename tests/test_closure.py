"""The closure fingerprint: what a recording's code reaches in profiling_guide, and when it goes stale.

A kernel edit must make chapter 6's recording of our fused MLP stale, though the
page lists only ``FusedGeGLUMLP`` and ``fused_mlp.geglu``; editing a comment or a
docstring, or the layout, must not. The recording is read back as the chapter
reads it (``Chapter.profile`` in replay, with what the page lists), without
running the page: the docs build runs it.
"""

import ast
import json
from pathlib import Path

import pytest

from profiling_guide.kernels import fused_mlp, geglu_common
from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.pages import closure, recordings
from profiling_guide.pages.chapter import Chapter

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


def edited(monkeypatch, *edits, file: Path = COMMON) -> None:
    """Make the closure read ``file`` (geglu_common.py) with ``edits`` applied (the file itself is left alone)."""
    text = file.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) >= 1, old
        text = text.replace(old, new)
    real = closure._source
    monkeypatch.setattr(closure, "_source", lambda path: text if Path(path).resolve() == file else real(path))


FUSED = Path(fused_mlp.__file__).resolve()
# Edits of geglu()'s argument checks in fused_mlp.py: a message reworded, a condition widened, a check added (an
# ``if ...: raise`` and an ``assert``), one moved into a marked helper; none changes what the GPU runs.
CHECK_EDITS = (
    ('raise GuideError(f"geglu needs a 2-D {name}, got {got}")', 'raise GuideError(f"{name} must be 2-D, not {got}")'),
    ("if x2d.dtype not in SUPPORTED_DTYPES:", "if x2d.dtype not in SUPPORTED_DTYPES or x2d.is_sparse:"),
    ("    hidden, dim = w_gate.shape\n    M = x2d.shape[0]\n",
     "    hidden, dim = w_gate.shape\n    assert hidden >= 0\n    M = x2d.shape[0]\n"
     "    if M < 0:\n        raise GuideError('negative rows')\n"),
    ("    _check_device(x2d, w_gate, w_up)\n", "    _check_device(x2d, w_gate, w_up)\n    _check_rows(x2d)\n"),
    ("@argument_check\ndef _check_device(", "@argument_check\ndef _check_rows(x):\n    if x.shape[0] < 0:\n"
     "        raise GuideError('negative rows')\n\n\n@argument_check\ndef _check_device("),
)
# ... and an edit of what it runs: the packed designs' choice
RUN_EDIT = ("    packed = design in PACKED_DESIGNS\n", "    packed = design in TMA_DESIGNS\n")


def test_argument_checks_are_not_what_runs_and_their_edits_keep_both_fingerprints(monkeypatch):
    code, args = [FusedGeGLUMLP, fused_mlp.geglu], {"batch": 64}
    before = recordings.fingerprint(code, args), recordings.closure_fingerprint(code, args)
    with monkeypatch.context() as m:
        edited(m, *CHECK_EDITS, file=FUSED)
        assert (recordings.fingerprint(code, args), recordings.closure_fingerprint(code, args)) == before
    with monkeypatch.context() as m:
        edited(m, RUN_EDIT, file=FUSED)
        listed, reached = recordings.fingerprint(code, args), recordings.closure_fingerprint(code, args)
        assert listed != before[0] and reached != before[1]


def test_without_checks_keeps_what_runs_around_the_checks():
    source = (
        "def f(x, w=None):\n"
        "    assert x.dim() == 2\n"
        "    if x.dim() != 2:\n"
        "        why = 'shape'\n"
        "        raise ValueError(why)\n"
        "    elif x.dtype is None:\n"
        "        raise ValueError('dtype')\n"
        "    else:\n"
        "        y = x + 1\n"
        "    if w is None:\n"
        "        w = x\n"
        "    elif w.shape != x.shape:\n"
        "        raise ValueError('w')\n"
        "    for t in (x, w):\n"
        "        if t.numel() > 2**31:\n"
        "            raise ValueError('big')\n"
        "    check(x)\n"
        "    other(x)\n"
        "    try:\n"
        "        z = int(y)\n"
        "    except TypeError:\n"
        "        raise ValueError('y') from None\n"
        "    return y, w, z\n"
    )
    body = closure.without_checks(ast.parse(source).body, frozenset({"check"}))
    assert ast.unparse(ast.Module(body=body, type_ignores=[])) == (
        "def f(x, w=None):\n"
        "    y = x + 1\n"
        "    if w is None:\n"
        "        w = x\n"
        "    other(x)\n"
        "    try:\n"
        "        z = int(y)\n"
        "    except TypeError:\n"
        "        raise ValueError('y') from None\n"
        "    return (y, w, z)")


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


def listed_code(page: Path, name: str) -> list[str]:
    """What ``page`` lists in ``code=`` for its recording ``name`` (``chapter.profile("fused", ..., code=[...])``)."""
    for node in ast.walk(ast.parse(page.read_text())):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "chapter.profile"
                and ast.literal_eval(node.args[0]) == name):
            return [ast.unparse(e) for k in node.keywords if k.arg == "code" for e in k.value.elts]
    raise AssertionError(f"{page.name} profiles no {name!r}")


def fused_forward():
    """Stands in for the page's step: the fingerprint covers the step too, and here it is this one."""


def replay_fused(root: Path):
    """Chapter 6's recording ``fused`` read back as the page reads it (the chapter's replay, without its page)."""
    chapter = Chapter("06_fused", ARGS, mode="replay", root=root)
    return chapter.profile("fused", fused_forward, profiler=None, label="mlp_fwd", warm_up=True,
                           code=[FusedGeGLUMLP, fused_mlp.geglu], variant="fused")


ARGS = json.loads((recordings.default_root() / H100 / "06_fused.fused.run.json").read_text())["args"]


def _stamped_copy(tmp_path) -> Path:
    """The H100 recordings in ``tmp_path`` (links), chapter 6's ``fused`` run record stamped with its closure
    fingerprint as this checkout computes it, as a live run on a GPU would write it."""
    source = recordings.default_root() / H100
    folder = tmp_path / H100
    folder.mkdir()
    for path in source.iterdir():
        (folder / path.name).symlink_to(path)
    run_json = folder / "06_fused.fused.run.json"
    record = json.loads(run_json.read_text())
    run_json.unlink()
    fp = recordings.Fingerprints([fused_forward, FusedGeGLUMLP, fused_mlp.geglu], ARGS)
    recordings.write_json_atomic(run_json, {**record, "closure_fingerprint": fp.closure})
    return run_json


def test_chapter_6_lists_the_fused_mlp_for_its_recording():
    assert listed_code(CHAPTER_6, "fused") == ["FusedGeGLUMLP", "fused_mlp.geglu"]


def test_editing_a_kernel_of_the_fused_mlp_makes_chapter_6s_recording_stale(tmp_path, monkeypatch):
    _stamped_copy(tmp_path)
    monkeypatch.setenv("PROFILING_GUIDE_STALE", "error")
    monkeypatch.setenv("PROFILING_GUIDE_GPU", H100)
    assert not replay_fused(tmp_path).stale
    with monkeypatch.context() as m:
        edited(m, KERNEL_EDIT)
        with pytest.raises(recordings.StaleRecordingError, match="recording 06_fused.fused is stale") as err:
            replay_fused(tmp_path)
    assert "re-record on a GPU" in str(err.value)
    with monkeypatch.context() as m:
        edited(m, COMMENT_EDIT, DOCSTRING_EDIT, LAYOUT_EDIT)
        assert not replay_fused(tmp_path).stale
    with monkeypatch.context() as m:  # geglu()'s argument checks reworded, added to, moved: still fresh
        edited(m, *CHECK_EDITS, file=FUSED)
        assert not replay_fused(tmp_path).stale


def test_a_class_defined_on_a_page_run_without_a_file_keeps_its_text(tmp_path):
    """sphinx-gallery runs a page in a module without ``__file__``: a class listed in ``code=`` is found through its
    methods' code and normalizes as it does when the page runs as a script (the recording stays fresh both ways)."""
    import sys
    import types

    from profiling_guide.pages.closure import _own_file, _own_text

    page = tmp_path / "plot_page.py"
    page.write_text("class Net:\n    '''A model.'''\n\n    def forward(self, x):\n        return x + 1\n")
    as_script = types.ModuleType("page_as_script")
    as_script.__file__ = str(page)
    no_file = types.ModuleType("page_without_file")
    for module in (as_script, no_file):
        sys.modules[module.__name__] = module
        exec(compile(page.read_text(), str(page), "exec"), module.__dict__)
    try:
        assert _own_text(no_file.Net) == _own_text(as_script.Net) is not None
        assert _own_file(no_file.Net) == _own_file(as_script.Net) == page.resolve()
    finally:
        del sys.modules["page_as_script"], sys.modules["page_without_file"]


def test_an_edit_to_the_analysis_leaves_a_profile_of_your_own_fresh_and_one_to_its_capture_does_not(monkeypatch):
    # chapter 8 records what profile_callable runs: the capture (its schedule, its warm-up) decides what the trace
    # holds; the HTML report it writes beside the trace reads what ran and decides nothing a recording keeps, so
    # the closure stops there (closure.AFTER_THE_RUN), and an edit to the verdict does not make chapter 8 stale
    from profiling_guide.analysis import verdict
    from profiling_guide.measure import capture
    from profiling_guide.report.profile_own import profile_callable

    reached = closure.reach([profile_callable])
    assert "profiling_guide.measure.capture:profile_to_trace" in reached.texts
    assert not any(key.startswith(("profiling_guide.analysis.verdict", "profiling_guide.report.html:"))
                   for key in reached.texts)
    before = recordings.closure_fingerprint([profile_callable])
    verdict_file, capture_file = Path(verdict.__file__).resolve(), Path(capture.__file__).resolve()
    with monkeypatch.context() as m:
        edited(m, ("    best = counted[0]\n", "    best = counted[-1]\n"), file=verdict_file)
        assert recordings.closure_fingerprint([profile_callable]) == before
    with monkeypatch.context() as m:
        edited(m, ("WAIT, WARMUP, ACTIVE = 1, 1, 3", "WAIT, WARMUP, ACTIVE = 1, 2, 3"), file=capture_file)
        assert recordings.closure_fingerprint([profile_callable]) != before
