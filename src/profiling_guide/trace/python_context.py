"""Which module and which line of the program each CPU op ran under, where the trace recorded them.

A trace recorded with ``with_modules=True`` holds a Python call per module
call (``nn.Module: GPTBlock_1``: the class, and how many of that class were
called before it in the step); one recorded with ``with_stack=True`` holds a
call per Python frame (``model.py(104): forward``). Both lie on the thread
that ran the ops, around them in time. :func:`op_contexts` sweeps each thread
once and gives every op its module path and its *source*: the innermost frame
outside ``torch``, Python's own library and the code ``torch.compile``
generated (the function of the program that called into PyTorch). The
profiler names a frame by its function's first line (``model.py(99): forward``),
not by the line running in it.

The autograd engine runs the backward on a thread of its own, with no Python
on it: a backward op takes the context of the forward op it differentiates
(the trace's ``fwdbwd`` link, :attr:`~profiling_guide.trace.model.CpuOp.forward_op`).
Load the trace with ``Trace.load(path, python_calls=True)``; without Python
calls every context is empty.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass

from profiling_guide.trace.model import CpuOp, Trace

MODULE_PREFIX = "nn.Module: "
#: A traced frame: ``path/to/file.py(123): function``.
FRAME = re.compile(r"^(?P<file>[^()]+?)\((?P<line>\d+)\): (?P<function>.*)$")
#: Frames of these top-level packages are not the program's own lines (besides Python's own library).
LIBRARY_PACKAGES = frozenset({"torch", "triton", "functorch", "site-packages", "dist-packages"})
#: Code that torch.compile generated, in files named by the hash of their code: not the program's lines.
GENERATED = re.compile(r"^[a-z0-9]{40,}\.py$")


@dataclass(frozen=True)
class Frame:
    """A function of the program: its file's name, its first line, its name."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.function}"


@dataclass(frozen=True)
class Context:
    """Where an op ran: its module path (outermost first) and its source (the program's function), if recorded."""

    modules: tuple[str, ...] = ()
    source: Frame | None = None


EMPTY = Context()


def frame_words(name: str) -> str:
    """A traced call's name as the report writes a place in code (``torch/fx/traceback.py:415 format_stack``),
    a library's as much as the program's; a builtin's as it is."""
    m = FRAME.match(name)
    return f"{m.group('file')}:{m.group('line')} {m.group('function')}" if m else name


@functools.lru_cache(maxsize=4096)
def source_of_frame(name: str) -> Frame | None:
    """The :class:`Frame` of a traced call of the program's own code, None for a library's or a builtin."""
    m = FRAME.match(name)
    if m is None:
        return None
    path = m.group("file").replace("\\", "/")
    top = path.split("/", 1)[0]
    base = path.rsplit("/", 1)[-1]
    if (top in LIBRARY_PACKAGES or "/site-packages/" in path or top.removesuffix(".py") in sys.stdlib_module_names
            or GENERATED.match(base)):
        return None
    return Frame(base, int(m.group("line")), m.group("function"))


def op_contexts(trace: Trace) -> dict[CpuOp, Context]:
    """Every op's :class:`Context` (see the module docstring); empty where the trace has no Python calls."""
    if not getattr(trace, "python_calls", None):
        return {}
    ops_by_thread: dict = {}
    for op in trace.ops:
        ops_by_thread.setdefault(op.tid, []).append(op)
    out: dict[CpuOp, Context] = {}
    for tid, ops in ops_by_thread.items():
        calls = trace.python_calls.get(tid)
        if calls:
            _sweep(calls, ops, out)
    for op in trace.ops:
        if op not in out:
            linked = _forward_of(op)
            if linked is not None and linked in out:
                out[op] = out[linked]
    return out


def _forward_of(op: CpuOp) -> CpuOp | None:
    """The forward op that ``op``'s backward work differentiates: linked to the autograd node it runs in, or to
    the node beside it (the engine's ``evaluate_function`` also runs the gradient's accumulation, outside it)."""
    for o in (op, *op.ancestors()):
        if o.forward_op is not None:
            return o.forward_op
        if o.name.startswith("autograd::engine::evaluate_function"):
            return next((c.forward_op for c in o.children if c.forward_op is not None), None)
    return None


def _sweep(calls: list[tuple[float, float, str]], ops: list[CpuOp], out: dict) -> None:
    """Give each op of one thread the Python calls open around it: ``calls`` and ``ops`` are sorted by start."""
    stack: list[tuple[float, float, str]] = []
    i = 0
    for op in ops:
        while i < len(calls) and calls[i][0] <= op.start_us:
            while stack and stack[-1][1] < calls[i][0]:
                stack.pop()
            stack.append(calls[i])
            i += 1
        while stack and stack[-1][1] < op.start_us:
            stack.pop()
        if not stack:
            continue
        open_now = [c for c in stack if c[1] >= op.start_us]
        modules = tuple(c[2][len(MODULE_PREFIX):] for c in open_now if c[2].startswith(MODULE_PREFIX))
        source = next((s for c in reversed(open_now) if (s := source_of_frame(c[2])) is not None), None)
        if modules or source:
            out[op] = Context(modules, source)
