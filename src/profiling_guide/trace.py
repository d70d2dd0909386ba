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
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .errors import GuideError

_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
# Timestamps are floats in µs; a child may overhang its parent by rounding.
_EPS_US = 0.002


@dataclass(eq=False)
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


@dataclass(eq=False)
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


@dataclass(eq=False)
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


@dataclass(eq=False)
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


_DEVICE_KINDS = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}


class Trace:
    """The typed events of one Chrome trace.

    Build one with :meth:`Trace.load`. ``steps`` are the profiler steps in
    order; ``ops``, ``runtime_calls`` and ``device_events`` are every event of
    that type, sorted by start time.
    """

    def __init__(self, raw: dict, source: str = "<memory>"):
        self.source = source
        self.metadata = {k: v for k, v in raw.items() if k != "traceEvents"}
        self.ops: list[CpuOp] = []
        self.runtime_calls: list[RuntimeCall] = []
        self.device_events: list[DeviceEvent] = []
        for ev in raw["traceEvents"]:
            if ev.get("ph") != "X" or "dur" not in ev:
                continue
            cat = ev.get("cat", "")
            ts, dur = float(ev["ts"]), float(ev["dur"])
            args = ev.get("args") or {}
            if cat in ("cpu_op", "user_annotation"):
                self.ops.append(CpuOp(ev["name"], ts, dur, ev.get("tid"), cat == "user_annotation", args))
            elif cat in _RUNTIME_CATS:
                self.runtime_calls.append(RuntimeCall(ev["name"], ts, dur, ev.get("tid"), cat, args.get("correlation")))
            elif cat in _DEVICE_KINDS:
                stream = args.get("stream", ev.get("tid"))
                self.device_events.append(
                    DeviceEvent(ev["name"], ts, dur, stream, _DEVICE_KINDS[cat], args.get("correlation"), args)
                )
        for events in (self.ops, self.runtime_calls, self.device_events):
            events.sort(key=lambda e: (e.start_us, -e.dur_us))
        self._nest()
        self._link_launches()
        self.steps = self._find_steps()

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a ``.json`` or ``.json.gz`` Chrome trace; bad files raise a one-line GuideError."""
        path = Path(path)
        if not path.is_file():
            raise GuideError(f"no trace file at {path}: give the path of a .json or .json.gz trace")
        try:
            opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
            with opener(path, "rt", encoding="utf-8") as f:
                raw = json.load(f)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise GuideError(f"{path} is not a complete gzip file ({exc}): re-export or re-record it") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise GuideError(f"{path} is not a JSON trace ({exc}): is the file truncated?") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("traceEvents"), list):
            raise GuideError(f"{path} is not a Chrome trace (no 'traceEvents' list): give a torch.profiler export")
        return cls(raw, str(path))

    # ---------------------------------------------------------------- building
    def _nest(self) -> None:
        """Give each op its parent and depth, and each runtime call its innermost op."""
        by_thread: dict = {}
        for op in self.ops:
            by_thread.setdefault(op.tid, []).append(op)
        for ops in by_thread.values():
            stack: list[CpuOp] = []
            for op in ops:  # sorted by start, longest first
                while stack and stack[-1].end_us < op.end_us - _EPS_US:
                    stack.pop()
                if stack:
                    op.parent = stack[-1]
                    op.depth = stack[-1].depth + 1
                    stack[-1].children.append(op)
                stack.append(op)
        for call in self.runtime_calls:
            call.op = self._innermost_op(by_thread.get(call.tid, []), call)
            if call.op is not None:
                call.op.runtime_calls.append(call)

    @staticmethod
    def _innermost_op(ops: list[CpuOp], call: RuntimeCall) -> CpuOp | None:
        # Ops on a thread form a tree; walk down from the roots that contain the call.
        candidates = [op for op in ops if op.parent is None]
        found = None
        while candidates:
            inside = [
                op for op in candidates
                if op.start_us - _EPS_US <= call.start_us and call.end_us <= op.end_us + _EPS_US
            ]
            if not inside:
                break
            found = inside[0]
            candidates = found.children
        return found

    def _link_launches(self) -> None:
        by_correlation = {c.correlation: c for c in self.runtime_calls if c.correlation is not None}
        for ev in self.device_events:
            call = by_correlation.get(ev.correlation)
            if call is not None:
                ev.launch = call
                call.device_events.append(ev)

    def _find_steps(self) -> list[Step]:
        steps = []
        for op in self.ops:
            m = _STEP_NAME.match(op.name) if op.annotation else None
            if m:
                steps.append(Step(int(m.group(1)), op.start_us, op.end_us))
        steps.sort(key=lambda s: s.number)

        def step_at(t: float) -> Step | None:
            for s in steps:
                if s.start_us - _EPS_US <= t <= s.end_us + _EPS_US:
                    return s
            return None

        for op in self.ops:
            s = step_at(op.start_us)
            if s is not None and not _STEP_NAME.match(op.name):
                op.step = s.number
                s.ops.append(op)
        for call in self.runtime_calls:
            s = step_at(call.start_us)
            if s is not None:
                call.step = s.number
                s.runtime_calls.append(call)
        by_number = {s.number: s for s in steps}
        for ev in self.device_events:
            # A kernel belongs to the step that launched it, even if it ran later.
            s = by_number.get(ev.launch.step) if ev.launch is not None else step_at(ev.start_us)
            if s is not None:
                ev.step = s.number
                s.device_events.append(ev)
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
