"""A Chrome trace from ``torch.profiler``, loaded into typed events.

Everything the guide shows is computed from the trace file, never from the live
profiler object, so a page built from a recording and a page built from a live
run go through this same code.

The trace holds four kinds of timed event that matter here:

* **CPU ops** (``cat: cpu_op``) and **annotations** (``user_annotation``: the
  ``ProfilerStep#N`` markers and our ``record_function`` labels). They nest:
  ``aten::linear`` contains ``aten::addmm``.
* **Runtime calls** (``cuda_runtime`` / ``cuda_driver``): ``cudaLaunchKernel``,
  ``cuLaunchKernelEx``, ``cudaMemsetAsync``... made by the innermost CPU op
  around them.
* **Device events** (``kernel``, ``gpu_memset``, ``gpu_memcpy``) on a GPU stream.
  A launch and the work it started share a ``correlation`` id: that is how a
  kernel is traced back to the Python line that caused it.
* Steps: the ``ProfilerStep#N`` intervals of the profiler's *active* phase.
* **Python frames** (``python_function``, recorded with ``with_stack=True``):
  each call of a Python function on a thread, with the frame that called it
  (``Python id`` / ``Python parent id``); with ``with_modules=True`` each
  ``nn.Module`` call is a frame too, ``nn.Module: Linear_3`` (its class and
  the order in which the profiler first saw that instance).

In a training step the profiler also links each backward op to the forward op
it differentiates: a ``fwdbwd`` flow (``ph`` ``s`` at the forward op's start,
``f`` at the backward op's, one ``id``). :attr:`Trace.backward_links` holds
those pairs, and the backward op's :attr:`CpuOp.forward_op` its forward op.
"""

from __future__ import annotations

import gc
import marshal
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from pathlib import Path

from profiling_guide.errors import GuideError, quoted
from profiling_guide.trace.kernel_names import KernelName, decode
from profiling_guide.trace.reader import TraceStream

# At most 18 digits: a step number, not a number too long for int() to read.
_STEP_NAME = re.compile(r"ProfilerStep#(\d{1,18})")
# Timestamps are floats in µs; a child may overhang its parent by rounding.
_EPS_US = 0.002
_MAX_US = 1e18


@dataclass(eq=False, slots=True)
class CpuOp:
    """An operator or annotation on a CPU thread, with its place in the nesting."""

    name: str
    start_us: float
    dur_us: float
    tid: int | str
    annotation: bool  # True for record_function labels and ProfilerStep markers
    args: dict = field(repr=False)
    parent: CpuOp | None = field(default=None, repr=False)
    children: list[CpuOp] = field(default_factory=list, repr=False)
    runtime_calls: list[RuntimeCall] = field(default_factory=list, repr=False)
    depth: int = 0
    step: int | None = None
    #: For an op of the backward pass (an autograd node such as ``AddmmBackward0``): the forward
    #: op whose output it differentiates, from the trace's ``fwdbwd`` flow; else None.
    forward_op: CpuOp | None = field(default=None, repr=False)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def input_dims(self) -> list:
        return self.args.get("Input Dims", [])

    @property
    def input_strides(self) -> list:
        return self.args.get("Input Strides", [])

    def walk(self):
        """This op and everything nested under it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    @property
    def device_events(self) -> list[DeviceEvent]:
        """The device work launched from this op or from anything nested in it."""
        return [ev for op in self.walk() for call in op.runtime_calls for ev in call.device_events]

    @property
    def self_device_events(self) -> list[DeviceEvent]:
        """Device work launched by this op's own runtime calls, not its children's."""
        return [ev for call in self.runtime_calls for ev in call.device_events]

    def ancestors(self):
        op = self.parent
        while op is not None:
            yield op
            op = op.parent


@dataclass(eq=False, slots=True)
class RuntimeCall:
    """A CUDA runtime or driver API call, e.g. ``cudaLaunchKernel``."""

    name: str
    start_us: float
    dur_us: float
    tid: int | str
    category: str  # "cuda_runtime" | "cuda_driver"
    correlation: int | None
    op: CpuOp | None = field(default=None, repr=False)  # innermost CPU op around the call
    device_events: list[DeviceEvent] = field(default_factory=list, repr=False)
    step: int | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(eq=False, slots=True)
class DeviceEvent:
    """Work on a GPU stream: a kernel, a memset or a memcpy."""

    name: str
    start_us: float
    dur_us: float
    stream: int | str
    kind: str  # "kernel" | "memset" | "memcpy"
    correlation: int | None
    args: dict = field(repr=False)
    launch: RuntimeCall | None = field(default=None, repr=False)
    step: int | None = None
    #: True when its launch came before the profiler began recording (see :meth:`Trace._find_steps`).
    before_window: bool = False
    #: its name's fields (kind, library, dtype, tile...), decoded once as the trace is read
    decoded: KernelName = field(default=None, repr=False)

    def __post_init__(self):
        if self.decoded is None:
            self.decoded = decode(self.name)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def grid(self) -> tuple | None:
        g = self.args.get("grid")
        return tuple(g) if g else None

    @property
    def block(self) -> tuple | None:
        b = self.args.get("block")
        return tuple(b) if b else None


@dataclass(eq=False, slots=True)
class PythonFrame:
    """One call of a Python function (``with_stack=True``), or of an ``nn.Module`` (``with_modules=True``).

    ``name`` is as the profiler writes it: ``path/to/file.py(42): forward``,
    where 42 is the line the function starts at (the line running, for a frame
    already open when the profiler started), ``<built-in method ...>``, or
    ``nn.Module: Linear_3``.
    """

    name: str
    start_us: float
    dur_us: float
    tid: int | str
    #: the frame that called this one (resolved from ``Python parent id``), or None
    parent: PythonFrame | None = field(default=None, repr=False)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def module(self) -> str | None:
        """``Linear_3`` for an ``nn.Module: Linear_3`` frame, else None."""
        return self.name[11:] if self.name.startswith("nn.Module: ") else None

    def ancestors(self):
        frame = self.parent
        while frame is not None:
            yield frame
            frame = frame.parent


def frame_open_at(frames: tuple, t: float, slack: float = 0.0) -> PythonFrame | None:
    """The innermost Python call open at ``t`` (to within ``slack`` µs), from one thread's ``(starts, frames)``
    (:attr:`Trace.python_frames_by_thread`): calls nest, so the one that started last before ``t`` is inside every
    call open at ``t``, and the innermost open is it or the first of its callers still open."""
    starts, found = frames
    i = bisect_right(starts, t + slack) - 1
    frame = found[i] if i >= 0 else None
    while frame is not None and frame.end_us + slack < t:
        frame = frame.parent
    return frame


@dataclass(eq=False, slots=True)
class Step:
    """One ``ProfilerStep#N`` of the active phase and what happened in it."""

    number: int
    start_us: float
    end_us: float
    ops: list[CpuOp] = field(default_factory=list, repr=False)
    runtime_calls: list[RuntimeCall] = field(default_factory=list, repr=False)
    device_events: list[DeviceEvent] = field(default_factory=list, repr=False)

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us

    @property
    def kernels(self) -> list[DeviceEvent]:
        return [ev for ev in self.device_events if ev.kind == "kernel"]

    @property
    def device_end_us(self) -> float:
        """When the last device event of the step ended (or the CPU step's end)."""
        return max([self.end_us] + [ev.end_us for ev in self.device_events])


@dataclass(eq=False, slots=True)
class MemoryEvent:
    """One allocation (``bytes`` > 0) or free (< 0) by a device's caching allocator (``profile_memory=True``)."""

    start_us: float
    bytes: int
    total_allocated: int  # the allocator's total after this event
    device_type: int  # as the profiler numbers them: 0 the CPU, 1 CUDA
    device: int


_DEVICE_KINDS = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
_OP_CATS = {"cpu_op", "user_annotation"}
_USED_CATS = _OP_CATS | _RUNTIME_CATS | set(_DEVICE_KINDS)
# List-valued args that repeat from step to step (shapes, launch geometry). Equal
# values are kept once and shared between events, which more than halves the
# memory a long trace takes: treat an event's ``args`` as read-only.
_SHARED_OP_ARGS = ("Input Dims", "Input Strides", "Input type", "Concrete Inputs")
_SHARED_DEVICE_ARGS = ("grid", "block")


class _EventReader:
    """Reads a trace's events one at a time into typed events, checking the fields the guide reads.

    Each problem is one GuideError line naming the event. Names and repeating
    list-valued args are kept once and shared (see ``_SHARED_OP_ARGS``), and
    the ``fwdbwd`` flows' ends are kept for :meth:`Trace._link_backward`.
    """

    def __init__(self, source: str):
        self.source = source
        self.ops: list[CpuOp] = []
        self.runtime_calls: list[RuntimeCall] = []
        self.device_events: list[DeviceEvent] = []
        self.memory_events: list[MemoryEvent] = []
        self.flows: dict = {}  # fwdbwd flow id -> {"s": (tid, ts), "f": (tid, ts)}
        #: thread -> the start of every Python call traced there (``with_stack=True``): the profiler pays for each
        self.python_starts: dict = {}
        self.python_frames: list[PythonFrame] = []
        self._python_ids: dict = {}  # (pid, Python id) -> its frame
        self._python_parents: list[tuple[PythonFrame, object]] = []  # each frame and its (pid, Python parent id)
        self._names: dict[str, str] = {}  # one string object per distinct name: traces repeat a few names a lot
        self._shared: dict[bytes, list] = {}  # one list object per distinct list-valued arg (see _share)

    def read(self, index: int, ev) -> None:
        """One event of the trace: kept as a typed event if the guide reads its kind, else skipped."""
        if type(ev) is not dict:
            self.fail(index, f"expected an object, got {quoted(ev)}")
        if ev.get("ph") != "X":
            self._instant(index, ev)
            return
        cat = ev.get("cat")
        if type(cat) is not str:
            if cat is None:
                return
            self.fail(index, f"'cat' must be a string, got {quoted(cat)}")
        if cat == "python_function":  # the profiler's cost, the diff's places, attribution: a malformed one is skipped
            self._python_frame(ev)
            return
        if cat not in _USED_CATS:
            return
        name = ev.get("name")
        if type(name) is not str:
            self.fail(index, f"'name' must be a string, got {'missing' if 'name' not in ev else quoted(name)}")
        name = self._names.setdefault(name, name)
        ts, dur = self.number(ev, "ts", index), self.number(ev, "dur", index)
        if dur < 0:
            self.fail(index, f"'dur' must not be negative, got {quoted(ev['dur'])}")
        tid = self.key(ev.get("tid"), "'tid'", index)
        args = ev.get("args")
        if args is None:
            args = {}
        elif type(args) is not dict:
            self.fail(index, f"'args' must be an object, got {quoted(args)}")
        if cat in _OP_CATS:
            self._cpu_op(index, name, ts, dur, tid, cat, args)
        else:
            self._launch_or_work(index, name, ts, dur, tid, cat, args)

    def _instant(self, index: int, ev: dict) -> None:
        """A ``[memory]`` event of the caching allocator, or one end of a ``fwdbwd`` flow; others are skipped."""
        if ev.get("name") == "[memory]" and ev.get("ph") == "i":
            margs = ev.get("args")
            if type(margs) is not dict:
                self.fail(index, f"a [memory] event needs 'args', got {quoted(margs)}")
            self.memory_events.append(MemoryEvent(
                self.number(ev, "ts", index), int(self.number(margs, "Bytes", index)),
                int(self.number(margs, "Total Allocated", index)),
                int(self.number(margs, "Device Type", index)), int(self.number(margs, "Device Id", index))))
        elif ev.get("cat") == "fwdbwd" and ev.get("ph") in ("s", "f"):
            flow = self.key(ev.get("id"), "'id'", index)
            point = (self.key(ev.get("tid"), "'tid'", index), self.number(ev, "ts", index))
            self.flows.setdefault(flow, {})[ev["ph"]] = point

    def _python_frame(self, ev: dict) -> None:
        """A ``python_function`` event: its start counted (the profiler's cost), and kept as a frame."""
        ts, tid, dur, name = ev.get("ts"), ev.get("tid"), ev.get("dur"), ev.get("name")
        if not (type(ts) in (int, float) and -_MAX_US < ts < _MAX_US and (tid is None or type(tid) in (int, str))):
            return
        self.python_starts.setdefault(tid, []).append(float(ts))
        if type(dur) not in (int, float) or not 0 <= dur < _MAX_US or type(name) is not str:
            return
        frame = PythonFrame(self._names.setdefault(name, name), float(ts), float(dur), tid)
        self.python_frames.append(frame)
        args = ev.get("args")
        if type(args) is dict:
            pid = ev.get("pid") if type(ev.get("pid")) in (int, str) else None
            own, parent = args.get("Python id"), args.get("Python parent id")
            if type(own) is int:
                self._python_ids[(pid, own)] = frame
            if type(parent) is int:
                self._python_parents.append((frame, (pid, parent)))

    def link_python_frames(self) -> None:
        """Give each Python frame its caller: from the ids the profiler wrote, else the frame that holds it in time.

        Either way a caller comes first in (start, longest first), a strict order, so a frame is never its own
        ancestor.
        """
        order = {id(frame): i for i, frame in enumerate(self.python_frames)}
        for frame, parent_key in self._python_parents:
            parent = self._python_ids.get(parent_key)
            if parent is None:
                continue
            # A caller holds its callee and comes first in (start, longest, file order), a strict order:
            # ids that say otherwise (a hand-made or damaged trace) are left out, so every chain of
            # callers ends.
            holds = parent.start_us <= frame.start_us + _EPS_US and frame.end_us <= parent.end_us + _EPS_US
            first = (parent.start_us, -parent.dur_us, order[id(parent)]) < (frame.start_us, -frame.dur_us,
                                                                          order[id(frame)])
            if holds and first:
                frame.parent = parent
        self._python_ids, self._python_parents = {}, []
        # A trace without the ids (or with ones left out above): the innermost frame that holds it, on its thread.
        open_frames: dict = {}
        for frame in sorted(self.python_frames, key=lambda f: (f.start_us, -f.dur_us)):
            stack = open_frames.setdefault(frame.tid, [])
            while stack and stack[-1].end_us + _EPS_US < frame.end_us:
                stack.pop()
            if frame.parent is None and stack:
                frame.parent = stack[-1]
            stack.append(frame)

    def _cpu_op(self, index: int, name: str, ts: float, dur: float, tid, cat: str, args: dict) -> None:
        for key in ("Input Dims", "Input Strides"):
            if type(args.get(key, [])) is not list:
                self.fail(index, f"'args.{key}' must be a list, got {quoted(args[key])}")
        for key in _SHARED_OP_ARGS:
            value = args.get(key)
            if type(value) is list:
                args[key] = self._share(value)
        self.ops.append(CpuOp(name, ts, dur, tid, cat == "user_annotation", args))

    def _launch_or_work(self, index: int, name: str, ts: float, dur: float, tid, cat: str, args: dict) -> None:
        """A runtime call, or device work on a stream: both carry the correlation id that links them."""
        correlation = args.get("correlation")
        if correlation is not None and type(correlation) is not int:
            self.fail(index, f"'args.correlation' must be a whole number, got {quoted(correlation)}")
        if cat in _RUNTIME_CATS:
            self.runtime_calls.append(RuntimeCall(name, ts, dur, tid, cat, correlation))
            return
        stream = self.key(args.get("stream", tid), "'args.stream'", index)
        for key in _SHARED_DEVICE_ARGS:
            self.int_list(args, key, index)
            if key in args:
                args[key] = self._share(args[key])
        self.device_events.append(DeviceEvent(name, ts, dur, stream, _DEVICE_KINDS[cat], correlation, args))

    def _share(self, value: list) -> list:
        """``value``, or the equal list read before it, which is kept once and shared (see ``_SHARED_OP_ARGS``)."""
        # The key is marshal's bytes of the list: exact (1, 1.0 and True differ), the same for equal
        # lists in format 2 (no back-references), and half the time of its repr.
        return self._shared.setdefault(marshal.dumps(value, 2), value)

    # ------------------------------------------------------------ the checks
    def fail(self, index: int, message: str):
        raise GuideError(f"{self.source}: event {index}: {message}")

    def number(self, ev: dict, key: str, index: int) -> float:
        """A time in µs: a number of magnitude below 1e18 (30,000 years), so sums of them stay finite."""
        value = ev.get(key)
        if type(value) in (int, float) and -_MAX_US < value < _MAX_US:  # NaN fails both comparisons
            return float(value)
        what = "missing" if key not in ev else quoted(value)
        self.fail(index, f"{key!r} must be a number of µs (less than 1e18 in size), got {what}")

    def key(self, value, what: str, index: int):
        """A thread, stream or correlation id: a whole number or a string (or absent)."""
        if value is None or type(value) in (int, str):
            return value
        self.fail(index, f"{what} must be a number or a string, got {quoted(value)}")

    def int_list(self, args: dict, key: str, index: int) -> None:
        value = args.get(key)
        if value is not None and not (type(value) is list and all(type(v) is int for v in value)):
            self.fail(index, f"'args.{key}' must be a list of whole numbers, got {quoted(value)}")


class Trace:
    """The typed events of one Chrome trace.

    Build one with :meth:`Trace.load`. ``steps`` are the profiler steps in
    order; ``ops``, ``runtime_calls`` and ``device_events`` are every event of
    that type, sorted by start time.

    Loading takes time proportional to the number of events (and a sort), and
    checks every event it uses: a malformed one is a one-line GuideError naming
    the event, so the typed events can be trusted by everything downstream.
    """

    def __init__(self, raw: dict | list, source: str = "<memory>", *, python_calls: bool = False):
        if isinstance(raw, list):  # Chrome's array format: the events alone
            raw = {"traceEvents": raw}
        if not isinstance(raw, dict) or not isinstance(raw.get("traceEvents"), list):
            raise GuideError(f"{source} is not a Chrome trace (no 'traceEvents' list): give a torch.profiler export")
        self._build(enumerate(raw["traceEvents"]), source, python_calls)
        self.metadata = {k: v for k, v in raw.items() if k != "traceEvents"}

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int | None = None, python_calls: bool = False) -> Trace:
        """Read a ``.json`` or ``.json.gz`` Chrome trace; bad files raise a one-line GuideError.

        The events are read as a stream, and the file may hold at most
        ``max_bytes`` of JSON once decompressed (default
        ``$PROFILING_GUIDE_MAX_TRACE_BYTES``, else 2 GiB). ``python_calls``
        keeps the Python calls a trace recorded with ``with_stack=True`` or
        ``with_modules=True`` holds (:attr:`python_calls`), which only the
        attribution to modules and source lines reads.
        """
        stream = TraceStream(path, max_bytes)
        trace = cls.__new__(cls)
        trace._build(stream.events(), str(path), python_calls)
        trace.metadata = stream.metadata
        return trace

    # ---------------------------------------------------------------- building
    def _build(self, events, source: str, python_calls: bool = False) -> None:
        # Loading makes millions of objects and frees none: the cycle collector
        # would walk them again and again for nothing, so it waits until the end.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._build_events(events, source, python_calls)
        finally:
            if collecting:
                gc.enable()

    def _build_events(self, events, source: str, python_calls: bool) -> None:
        self.source = source
        reader = _EventReader(source)
        for index, ev in events:
            reader.read(index, ev)
        self.ops, self.runtime_calls, self.device_events = reader.ops, reader.runtime_calls, reader.device_events
        self.python_starts = {tid: sorted(starts) for tid, starts in reader.python_starts.items()}
        reader.link_python_frames()
        #: every Python call recorded (``with_stack=True``), by start, longest first
        self.python_frames = reader.python_frames
        self.python_frames.sort(key=attrgetter("dur_us"), reverse=True)
        self.python_frames.sort(key=attrgetter("start_us"))
        #: thread -> ``(start, end, name)`` of its Python calls that are not builtins, by start, outermost first
        #: (the same frames as tuples); empty unless loaded with ``python_calls=True``
        self.python_calls: dict = {}
        if python_calls:
            for frame in self.python_frames:
                if not frame.name.startswith("<"):
                    self.python_calls.setdefault(frame.tid, []).append((frame.start_us, frame.end_us, frame.name))
        # the caching allocators' events, by time (a trace profiled with profile_memory=True)
        self.memory_events = sorted(reader.memory_events, key=attrgetter("start_us"))
        for found in (self.ops, self.runtime_calls, self.device_events):
            # by start, longest first (two stable sorts are faster than one on tuples)
            found.sort(key=attrgetter("dur_us"), reverse=True)
            found.sort(key=attrgetter("start_us"))
        self._nest()
        self._link_launches()
        self.backward_links = self._link_backward(reader.flows)
        self.steps = self._find_steps()

    def _nest(self) -> None:
        """Give each op its parent and depth, and each runtime call its innermost op.

        One sweep per thread over its ops (by start, longest first) and its
        runtime calls (by start): the stack holds the ops that are open at the
        current time, outermost first.
        """
        ops_by_thread: dict = {}
        for op in self.ops:
            ops_by_thread.setdefault(op.tid, []).append(op)
        calls_by_thread: dict = {}
        for call in self.runtime_calls:
            calls_by_thread.setdefault(call.tid, []).append(call)
        for tid, ops in ops_by_thread.items():
            calls = calls_by_thread.get(tid, [])
            stack: list[CpuOp] = []
            i = 0
            for op in ops:
                while i < len(calls) and calls[i].start_us < op.start_us - _EPS_US:
                    self._place(calls[i], stack)
                    i += 1
                while stack and stack[-1].end_us < op.end_us - _EPS_US:
                    stack.pop()
                if stack:
                    op.parent = stack[-1]
                    op.depth = stack[-1].depth + 1
                    stack[-1].children.append(op)
                stack.append(op)
            for call in calls[i:]:
                self._place(call, stack)

    @staticmethod
    def _place(call: RuntimeCall, stack: list[CpuOp]) -> None:
        """Attach ``call`` to the innermost op of ``stack`` that contains it."""
        # Ops that ended before the call began contain neither it nor any later call.
        while stack and stack[-1].end_us + _EPS_US < call.start_us:
            stack.pop()
        # Every op on the stack began before the call, and nested ops end no
        # later than their parents: bisect for the deepest one that ends after it.
        lo, hi = 0, len(stack)
        while lo < hi:
            mid = (lo + hi) // 2
            if call.end_us <= stack[mid].end_us + _EPS_US:
                lo = mid + 1
            else:
                hi = mid
        if lo:
            call.op = stack[lo - 1]
            call.op.runtime_calls.append(call)

    def _link_launches(self) -> None:
        by_correlation = {c.correlation: c for c in self.runtime_calls if c.correlation is not None}
        for ev in self.device_events:
            call = by_correlation.get(ev.correlation)
            if call is not None:
                ev.launch = call
                call.device_events.append(ev)

    def _link_backward(self, flows: dict) -> list[tuple[CpuOp, CpuOp]]:
        """``(forward op, backward op)`` for each ``fwdbwd`` flow whose two ends start an op.

        A flow's end lies at the start of its op, on its thread; where ops nest
        and start together there, the end is the op that carries the sequence
        number the backward op was given (else the innermost one).
        """
        wanted = {point for ends in flows.values() for point in ends.values()}
        starting: dict = {}
        for op in self.ops:  # by start, outermost first: the last one at a time is the innermost
            if (op.tid, op.start_us) in wanted:
                starting.setdefault((op.tid, op.start_us), []).append(op)
        links = []
        for ends in flows.values():
            forward_ops, backward_ops = starting.get(ends.get("s")), starting.get(ends.get("f"))
            if not forward_ops or not backward_ops:
                continue
            backward = next((op for op in reversed(backward_ops) if "Sequence number" in op.args), backward_ops[-1])
            number = backward.args.get("Sequence number")
            forward = next((op for op in reversed(forward_ops) if number is not None
                            and op.args.get("Sequence number") == number), forward_ops[-1])
            backward.forward_op = forward
            links.append((forward, backward))
        links.sort(key=lambda pair: pair[1].start_us)
        return links

    def _find_steps(self) -> list[Step]:
        steps = []
        for op in self.ops:
            m = _STEP_NAME.fullmatch(op.name) if op.annotation else None
            if m:
                steps.append(Step(int(m.group(1)), op.start_us, op.end_us))
        by_start = sorted(steps, key=attrgetter("start_us"))
        starts = [s.start_us for s in by_start]

        def step_at(t: float) -> Step | None:
            i = bisect_right(starts, t + _EPS_US) - 1
            return by_start[i] if i >= 0 and t <= by_start[i].end_us + _EPS_US else None

        for op in self.ops:
            s = step_at(op.start_us)
            if s is not None and not _STEP_NAME.fullmatch(op.name):
                op.step = s.number
                s.ops.append(op)
        for call in self.runtime_calls:
            s = step_at(call.start_us)
            if s is not None:
                call.step = s.number
                s.runtime_calls.append(call)
        by_number = {s.number: s for s in steps}
        # Correlation ids count the process's runtime calls in order. Device work whose id is
        # below the first recorded call's was launched before the profiler began recording:
        # when the CPU runs steps ahead of the GPU, the previous step's kernels still run in
        # the first profiled step's time, and they belong to no profiled step.
        first = min((c.correlation for c in self.runtime_calls if c.correlation is not None), default=None)
        for ev in self.device_events:
            if ev.launch is None and first is not None and ev.correlation is not None and ev.correlation < first:
                ev.before_window = True
                continue
            # A kernel belongs to the step that launched it, even if it ran later.
            s = by_number.get(ev.launch.step) if ev.launch is not None else step_at(ev.start_us)
            if s is not None:
                ev.step = s.number
                s.device_events.append(ev)
        steps.sort(key=attrgetter("number"))
        return steps

    # ----------------------------------------------------------------- queries
    @property
    def kernels(self) -> list[DeviceEvent]:
        return [ev for ev in self.device_events if ev.kind == "kernel"]

    @property
    def step_ops(self) -> list[CpuOp]:
        """CPU ops (not annotations) inside the profiler's active steps."""
        return [op for s in self.steps for op in s.ops if not op.annotation]

    def ops_named(self, name: str) -> list[CpuOp]:
        return [op for op in self.step_ops if op.name == name]

    def annotations_named(self, name: str) -> list[CpuOp]:
        return [op for s in self.steps for op in s.ops if op.annotation and op.name == name]

    @cached_property
    def python_frames_by_thread(self) -> dict:
        """:attr:`python_frames` by thread: ``tid -> (their starts, the frames)``, each sorted by start (the longest
        first among those that start together), as :func:`frame_open_at` reads them."""
        by: dict = {}
        for frame in self.python_frames:
            by.setdefault(frame.tid, []).append(frame)
        return {tid: ([f.start_us for f in frames], frames) for tid, frames in by.items()}

    @cached_property
    def no_device_ops(self) -> list[str]:
        """Names of CPU ops that, in every active step, launched no device work.

        These are the metadata-only ops (``aten::t``, ``aten::view``...): they
        rewrite a tensor's shape and strides and cost the GPU nothing.
        """
        launched: dict[str, bool] = {}
        for op in self.step_ops:
            launched[op.name] = launched.get(op.name, False) or bool(op.device_events)
        return sorted(name for name, did in launched.items() if not did)

    def kernels_per_step(self) -> float:
        return sum(len(s.kernels) for s in self.steps) / max(len(self.steps), 1)

    def runtime_calls_per_step(self) -> dict[str, float]:
        counts = Counter(call.name for s in self.steps for call in s.runtime_calls)
        n = max(len(self.steps), 1)
        return {name: count / n for name, count in counts.most_common()}

    def cpu_us_per_step(self, label: str | None = None) -> float:
        """Mean CPU time per step: of the ``label`` annotation if given, else of the step."""
        if label is None:
            durations = [s.dur_us for s in self.steps]
        else:
            durations = [op.dur_us for op in self.annotations_named(label)]
        if not durations:
            raise GuideError(f"{self.source}: no {'steps' if label is None else repr(label)} in this trace")
        return sum(durations) / len(durations)

    def device_us_per_step(self) -> float:
        """Mean busy time of the GPU per step: the summed duration of its device events."""
        n = max(len(self.steps), 1)
        return sum(ev.dur_us for s in self.steps for ev in s.device_events) / n

    def __repr__(self) -> str:
        return (
            f"Trace({self.source!r}: {len(self.steps)} steps, {len(self.ops)} CPU ops, "
            f"{len(self.runtime_calls)} runtime calls, {len(self.device_events)} device events)"
        )
