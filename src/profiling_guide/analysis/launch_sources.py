"""Where a step's launches come from in the program: a loop that calls one op at a time, Python that torch calls
around each call.

A launch-bound step's fix depends on what issues its launches. Two shapes are
found from the trace alone:

* **a loop of the program's** (:func:`called_in_a_loop`): one op called at the
  step's top level :data:`LOOP_CALLS` times or more (a loop over parameters,
  chunks, samples or layers), each call launching its own kernels;
* **Python that torch calls around each call** (:func:`launch_python`), where
  the trace records Python calls (``with_stack=True``): one function of the
  program's, called from torch's code or a builtin (a ``TorchFunctionMode``'s
  ``__torch_function__``, a hook), inside which most of the launch overhead ran.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from profiling_guide.analysis.causes import Cause
from profiling_guide.analysis.step_graph import OPTIMIZER_LABEL, StepGraph
from profiling_guide.trace.model import frame_open_at
from profiling_guide.trace.python_context import source_of_frame

#: An op the program itself calls (not the autograd engine's, nor an optimizer's) at least this many times a step,
#: one launch or a few each, is a loop of the program's: its launches are the fix's first target.
LOOP_CALLS = 64


@dataclass(frozen=True)
class Loop:
    """An op the program calls one at a time many times a step: how often, its launches, where."""

    op: str
    label: str | None
    calls: int
    launches: int
    source: str | None = None  # the program's line that calls it, where the trace recorded Python calls
    owners: frozenset = field(default=frozenset(), compare=False, repr=False)  # id() of each of its calls

    def place(self) -> str:
        """Its label (or none) and, where known, the program's line: ``in 'loss', train.py:42 step``."""
        return (f"in '{self.label}'" if self.label else "outside any label") + (f", {self.source}" if self.source else "")

    def words(self) -> str:
        return f"{self.op} called {self.calls} times a step ({self.launches} launches, {self.place()})"


def loops_words(loops: list[Loop]) -> str:
    """Loops as the fix names them; ops called as often from one place are named together
    (``aten::mul_ and aten::add_, each called 200 times a step (400 launches, outside any label)``)."""
    if len(loops) > 1 and len({(lp.label, lp.source, lp.calls) for lp in loops}) == 1:
        ops = " and ".join(lp.op for lp in loops)
        return (f"{ops}, each called {loops[0].calls} times a step ({sum(lp.launches for lp in loops)} launches, "
                f"{loops[0].place()})")
    return " and ".join(lp.words() for lp in loops)


def called_in_a_loop(g: StepGraph) -> list[Loop]:
    """The ops the step's own thread calls at its top level (not nested in another op; not the autograd engine's
    nodes, nor inside an optimizer's step, which has its own fix) :data:`LOOP_CALLS` times or more, most launches
    first: a Python loop over parameters, chunks or samples, each pass launching its own kernels."""
    calls: dict = defaultdict(set)
    launches: Counter = Counter()
    first: dict = {}
    for seg in g.host:
        w = seg.where
        if (seg.cause is not Cause.LAUNCH_OVERHEAD or not seg.launches or not seg.owner or w.op is None
                or w.op.startswith(("autograd::", "torch::autograd::")) or (w.label or "").startswith(OPTIMIZER_LABEL)):
            continue
        calls[w.op, w.label].add(seg.owner)
        launches[w.op, w.label] += len(seg.launches)
        first.setdefault((w.op, w.label), seg)
    loops = [Loop(op, label, len(owners), launches[op, label], _source_of(g, first[op, label]), frozenset(owners))
             for (op, label), owners in calls.items() if len(owners) >= LOOP_CALLS]
    return sorted(loops, key=lambda lp: -lp.launches)


def _source_of(g: StepGraph, seg) -> str | None:
    """The program's innermost Python function open at ``seg``'s call (where the trace recorded Python calls)."""
    call = seg.call
    frames = g.python_frames.get(call.tid) if call is not None and g.python_frames else None
    frame = program_frame_at(frames, call.start_us) if frames else None
    return str(source_of_frame(frame.name)) if frame is not None else None


def program_frame_at(frames: tuple, t: float):
    """The program's own innermost Python call open at ``t`` (not torch's, nor Python's library:
    :func:`~profiling_guide.trace.python_context.source_of_frame`), from one thread's ``(starts, frames)``: the
    innermost call open there (:func:`~profiling_guide.trace.model.frame_open_at`), or the first of its callers
    that is the program's."""
    frame = frame_open_at(frames, t)
    while frame is not None and source_of_frame(frame.name) is None:
        frame = frame.parent
    return frame


#: A function of the program's that holds at least this share of the step's launch overhead is named in its fix.
PYTHON_LAUNCH_SHARE = 0.5


def launch_python(g: StepGraph) -> tuple[str, float] | None:
    """The program's own function, called by torch (:func:`called_by_torch`), inside which most of the step's
    launch overhead ran (the innermost of the program's frames open in each stretch, on the threads that ran
    Python), and its share, where one holds :data:`PYTHON_LAUNCH_SHARE` or more (a TorchFunctionMode's
    ``__torch_function__`` around every call); None where the trace has no Python calls or none does."""
    if not g.python_frames:
        return None
    total, inside = 0.0, defaultdict(float)
    for seg in g.host:
        if seg.cause is not Cause.LAUNCH_OVERHEAD or seg.dur_us <= 0:
            continue
        tid, start = (seg.call.tid, seg.call.start_us) if seg.call is not None else (seg.tid, seg.start_us)
        frames = g.python_frames.get(tid)
        if not frames:  # a thread that runs no Python (the autograd engine's, without hooks)
            continue
        total += seg.dur_us
        frame = program_frame_at(frames, start + seg.dur_us / 2)
        if frame is not None and called_by_torch(frame):
            inside[str(source_of_frame(frame.name))] += seg.dur_us
    if not inside or total <= 0:
        return None
    top = max(inside, key=inside.get)
    share = inside[top] / total
    return (top, share) if share >= PYTHON_LAUNCH_SHARE else None


def called_by_torch(frame) -> bool:
    """Whether torch called this function of the program's, from its own code or a builtin of its: a hook, a
    mode's ``__torch_function__``, a tensor subclass's method; not the program's own calls, nor a harness's, nor
    a module's ``forward``, which ``nn.Module.__call__`` calls as the program asked."""
    caller = frame.parent  # a mode's __torch_function__ is called from the builtin the program called
    if caller is None or not caller.name.startswith(("<built-in", "torch/")):
        return False
    # a module's forward is the program's own code, though nn.Module's __call__ calls it
    return not (caller.name.startswith("torch/nn/modules/module.py") and frame.name.endswith(": forward"))
