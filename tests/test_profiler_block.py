"""The profiler block chapter 8 shows is the one ``profile_callable`` runs: both write the same kind of trace.

Chapter 8 shows the plain ``torch.profiler`` block and says that
:func:`~profiling_guide.report.profile_own.profile_callable` runs it
(:func:`~profiling_guide.measure.capture.profile_to_trace`). Here both profile
the same CPU step: their traces must hold the same profiled steps, the same
labels around the step and the same recorded shapes.
"""

import ast
import gzip
import json
from pathlib import Path

import torch

from profiling_guide.measure.capture import profile_to_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plot_08_own_model.py"


def page_block():
    """``profile_steps`` as chapter 8 defines it, with the imports it names."""
    source = EXAMPLE.read_text()
    tree = ast.parse(source)
    wanted = [n for n in tree.body
              if (isinstance(n, ast.FunctionDef) and n.name == "profile_steps")
              or (isinstance(n, ast.ImportFrom) and n.module == "torch.profiler")]
    assert len(wanted) == 2, "chapter 8 no longer shows its profiler block"
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(EXAMPLE), "exec"), namespace)
    return namespace["profile_steps"]


def summary(path: Path, label: str) -> dict:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
    labels = [e for e in events if e.get("name") == label and e.get("cat") == "user_annotation"]
    shapes = {tuple(map(tuple, e["args"]["Input Dims"])) for e in events
              if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm"
              and "Input Dims" in e.get("args", {})}
    return {"steps": steps, "labels": len(labels), "mm shapes": shapes}


def test_chapter_8s_block_writes_the_steps_labels_and_shapes_profile_callable_does(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)  # a CPU machine: nothing to wait for
    a, b = torch.randn(64, 32), torch.randn(32, 16)

    def step():
        return a @ b

    page = tmp_path / "page.trace.json.gz"
    with _quiet():
        page_block()(step, "my_step", str(page))
    helper = profile_to_trace(step, tmp_path / "helper.trace.json.gz", label="my_step")
    seen, expected = summary(page, "my_step"), summary(helper, "my_step")
    assert seen == expected
    assert len(seen["steps"]) == 3 and seen["labels"] == 3 and seen["mm shapes"] == {((64, 32), (32, 16))}


class _quiet:
    """The profiler warns that CUDA is unavailable on a CPU machine: expected here."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        return self._catch.__exit__(*exc)
