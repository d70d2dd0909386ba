"""A profiled step as a graph of dependencies, built from the trace alone.

The verdict re-times a step with one cause removed (:mod:`.critical_path`), so it
needs what each piece of the step waited for, not only when it ran. From the
trace, :func:`step_graph` builds:

* **the host chain**: the thread that ran the step (the one with its
  ``ProfilerStep``), cut into stretches in time order: runtime calls
  (``cudaLaunchKernel``, ``cudaStreamSynchronize``, ``cudaMalloc``...), time
  inside recorded ops between those calls, and *untraced* time, where the
  thread ran no recorded op (Python, a data pipeline, a sleep). Where the step's
  thread waits while another thread works (the autograd engine runs the
  backward on its own thread), that thread's stretches take the place of the
  wait. Each stretch follows the one before it: the host does one thing at a
  time.
* **the device work**: every kernel, memset and memcpy the chain launched,
  each after its launch (plus the launch latency the trace shows) and after the
  work before it on its stream. A device event that started later than both
  waited for something else: another stream's work that ended last before it started, after it was ready
  (``cudaStreamWaitEvent``, NCCL's streams) is taken as what it waited for.
* **blocking calls**: a synchronizing call (``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, ``.item()``'s copy, a
  blocking ``cudaMemcpy``, a pageable ``cudaMemcpyAsync``, ``cudaFree``)
  returns when the device work before it is done: the graph records which
  stream (or the whole device) it waits for, and how long after that work's end
  it returned.

Everything is linear in the step's events. Times are µs from the step's start.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from profiling_guide.analysis.align import ENGINE_PREFIX
from profiling_guide.analysis.causes import Cause, Where
from profiling_guide.analysis.overlap import merged
from profiling_guide.trace.model import CpuOp, DeviceEvent, RuntimeCall, Step, Trace
from profiling_guide.trace.python_context import frame_words, source_of_frame

#: The label torch.optim records around ``Optimizer.step`` (``Optimizer.step#AdamW.step``).
OPTIMIZER_LABEL = "Optimizer.step#"
#: Calls that wait for one stream's work: the stream of the work they are seen waiting for.
STREAM_SYNC = re.compile(r"^(cudaStreamSynchronize|cudaEventSynchronize|cuStreamSynchronize|cuEventSynchronize"
                         r"|cudaMemcpy|cudaMemcpy2D|cudaMemset|cuMemcpyDtoH(_v2)?|cuMemcpyHtoD(_v2)?)$")
#: Calls that wait for the whole device.
DEVICE_SYNC = re.compile(r"^(cudaDeviceSynchronize|cuCtxSynchronize|cudaFree|cuMemFree(_v2)?|cudaFreeHost"
                         r"|cuMemFreeHost)$")
ALLOCATOR_CALLS = re.compile(r"^(cudaMalloc|cudaFree|cuMemAlloc(_v2)?|cuMemFree(_v2)?|cudaMallocHost|cudaHostAlloc"
                             r"|cudaFreeHost|cuMemAllocHost(_v2)?|cuMemFreeHost|cudaMallocAsync|cudaFreeAsync"
                             r"|cuMemCreate|cuMemMap|cuMemUnmap|cuMemRelease|cuMemSetAccess|cuMemAddressReserve"
                             r"|cuMemAddressFree)$")
MEMCPY_CALLS = re.compile(r"^(cudaMemcpy\w*|cuMemcpy\w*)$")
LAUNCH_CALLS = re.compile(r"Launch|^cu(da)?Memset|^cu(da)?Memcpy")
#: The ops that read a device value back to the host (``.item()``, ``if tensor:``): their sync is theirs.
SCALAR_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero")
#: Ops whose output's shape depends on the data: the host waits for the GPU to learn it (boolean-mask indexing
#: runs aten::nonzero, forward and backward). A sync inside one is named for it.
DATA_SHAPE_OPS = ("aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_dim",
                  "aten::unique_consecutive")
COLLECTIVE = re.compile(r"^nccl|^rccl", re.IGNORECASE)
#: A run of untraced stretches and recorded ops that launched no device work, in a row with no runtime call
#: between them, at least this long is host work of its own (a data pipeline, a sleep, Python work, CPU ops),
#: not the framework stepping between two ops. (The framework's own
#: Python between two ops, a wrapper's argument checks, an optimizer's or the autograd engine's, stays well under
#: it in the guide's recordings: 430 µs at most.)
HOST_GAP_US = 1000.0
#: Host and device timestamps come from different clocks, aligned to about a microsecond.
SLACK_US = 2.0
#: A blocking call that returned within this long (µs) of some device work's end was waiting for it.
RETURN_US = 30.0
#: A device event that starts this much later than its launch and its stream allow waited for something else.
WAIT_SLACK_US = 5.0
#: The speed of a kernel that fills the GPU while another such kernel runs on another stream, as a share of its
#: speed alone: in an H200 trace of 4096³ bf16 GEMMs on a side stream beside a training step's
#: (tests/data/streams), the side GEMMs took 171 µs alone and up to 269 µs beside the others (0.64), the
#: step's own 155 µs alone and 222 µs beside them (0.70). Two such kernels together get about 1.3 times the
#: work of one done, not twice.
SHARED_SPEED = 2 / 3


@dataclass(slots=True, eq=False)
class HostSeg:
    """A stretch of the host chain: ``"call"``, ``"op"`` (inside a recorded op) or ``"untraced"``."""

    kind: str
    dur_us: float
    cause: Cause  # what this stretch is, on the critical path
    where: Where
    call: RuntimeCall | None = None
    #: "stream", "device" or None: what a blocking call waits for
    sync: str | None = None
    sync_stream: object = None  # the stream a "stream" sync waits for
    wait_lag_us: float = 0.0  # from the end of the awaited work to the call's return
    waited: bool = False  # seen waiting in the trace
    #: an event sync waits for the work before its event, not the stream's last: the node it was seen waiting
    #: for, and 0 (this step) or -1 (the step before)
    await_node: tuple | None = None
    launches: list = field(default_factory=list)  # indices of the device nodes it launched
    pageable: bool = False  # a copy from or to pageable host memory
    owner: int = 0  # id() of the top-level op the stretch belongs to (0: none)
    host_only: bool = False  # an op stretch of an op that launched no device work
    #: the recorded ops and runtime calls whose profiler cost falls in this stretch (see :func:`profiler_units`)
    prof_ops: float = 0.0
    prof_calls: float = 0.0
    prof_py: float = 0.0  # the traced Python calls (with_stack=True) whose profiler cost falls in this stretch
    prof_triton: float = 0.0  # the Triton launches of torch.compile's code among its recorded ops (see there)
    #: a stretch of one of torch's ops (``aten::``) that launches device work, but spent a millisecond or more on the
    #: host without a runtime call: setup of its own (a cuDNN plan, a cuBLAS heuristic), a host gap
    setup: bool = False
    #: such a stretch that ran Python (the trace's Python calls cover most of it): something hooked into the op
    python_in_op: bool = False
    #: a sync that reads back whether a backward node's outputs hold a NaN (:func:`_nan_check`)
    nan_check: bool = False
    inner_op: str | None = None  # a long op stretch's innermost op of torch's (``aten::``) open over its middle
    #: an untraced or op stretch's thread and start (the trace's clock): where to look for the Python that ran in it
    tid: object = None
    start_us: float = 0.0
    #: a ``cudaStreamWaitEvent`` whose streams the trace shows (:func:`_stream_waits`): (the stream whose work
    #: up to its event the other waits for, the waiting stream)
    waits: tuple | None = None


@dataclass(slots=True, eq=False)
class DevNode:
    """A kernel, memset or memcpy, with what it waits for."""

    event: DeviceEvent
    dur_us: float
    stream: object
    cause: Cause
    where: Where
    host: int  # index of the launching host stretch, or -1 (launched off the chain: ready at ``ready_us``)
    lag_us: float  # launch start → earliest start
    ready_us: float = 0.0  # for work launched off the chain: its launch's time in the step
    dep: int = -1  # another stream's device node it waits for (same step)
    dep_lag_us: float = 0.0
    extra_us: float = 0.0  # a wait of unknown origin the trace shows (kept as it is)
    nbytes: float = 0.0
    pageable: bool = False
    direction: str | None = None  # "h2d", "d2h", "d2d" for copies
    #: a kernel with a block for every multiprocessor or more: two such on different streams share the GPU
    fills: bool = False
    solo_us: float = 0.0  # its time with the GPU to itself (:func:`_share_the_gpu`); dur_us where it ran alone


@dataclass
class StepGraph:
    """A step's host chain and device work (see the module docstring)."""

    number: int
    observed_us: float  # the ProfilerStep's length on the host
    host: list[HostSeg]
    dev: list[DevNode]
    stream_gap_us: float  # median gap between back-to-back work on a stream
    launch_lag_us: float  # median launch → start when the stream was idle
    ops: int  # recorded CPU ops in the step
    calls: int  # runtime calls in the step
    threads: list = field(default_factory=list)  # the host threads the chain runs on
    sm_count: int | None = None  # the GPU's multiprocessors, where the trace's deviceProperties say
    #: the trace's Python calls by thread (``with_stack=True``; :attr:`Trace.python_frames_by_thread`)
    python_frames: dict = field(default_factory=dict)
    #: id() of a backward op's outermost op (the autograd engine's node) → id() of its forward op's outermost op,
    #: where the trace links them (:attr:`CpuOp.forward_op`): the ops a host stretch's ``owner`` names
    backward_of: dict = field(default_factory=dict)


def sm_count(trace: Trace) -> int | None:
    """The GPU's multiprocessors as the trace's ``deviceProperties`` record them (None where it does not)."""
    devices = [d for d in trace.metadata.get("deviceProperties") or [] if isinstance(d, dict)]
    n = devices[0].get("numSms") if devices else None
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 1 << 20 else None


def blocks(ev: DeviceEvent) -> int | None:
    """How many blocks a kernel's grid holds, from its launch arguments (None where the trace lacks them)."""
    grid = ev.grid
    if not grid or not all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid):
        return None
    return math.prod(grid)


# --------------------------------------------------------------- where
def _label_of(op: CpuOp | None) -> str | None:
    """The innermost ``record_function`` label around ``op`` (not a ProfilerStep, nor a collective's own
    ``nccl:*`` annotation)."""
    while op is not None:
        if op.annotation and not op.name.startswith(("ProfilerStep#", "nccl:")):
            return op.name
        op = op.parent
    return None


def _collective_name(op: CpuOp | None) -> str | None:
    """The ``nccl:all_reduce``-style annotation (or ``record_param_comms``) a collective's kernel was launched in."""
    found = None
    while op is not None:
        if op.name.startswith("nccl:"):
            return op.name
        if op.name == "record_param_comms" and found is None:
            found = op.name
        op = op.parent
    return found


def _outermost_op(op: CpuOp | None) -> CpuOp | None:
    """The outermost op above ``op`` that is not an annotation (``aten::linear`` for its ``aten::addmm``)."""
    top = None
    while op is not None:
        if not op.annotation:
            top = op
        op = op.parent
    return top


def _readback_op(op: CpuOp | None) -> str | None:
    """The op around ``op`` that reads a device value back (:data:`SCALAR_OPS`) or learns a shape
    (:data:`DATA_SHAPE_OPS`): a sync inside it is that op's, not a copy's."""
    while op is not None:
        if op.name in SCALAR_OPS:
            return "aten::item" if op.name != "aten::is_nonzero" else op.name
        if op.name in DATA_SHAPE_OPS:
            return op.name
        op = op.parent
    return None


#: What autograd's anomaly detection (``check_nan``) runs inside each backward node, after the node's function:
#: ``aten::isnan``, ``aten::_is_any_true`` and the read of the answer (``aten::item``).
NAN_CHECK_OPS = ("aten::isnan", "aten::_is_any_true")


def _nan_check(op: CpuOp | None) -> bool:
    """Whether ``op`` is inside an ``aten::item`` that a backward node runs right after ``aten::isnan`` and
    ``aten::_is_any_true`` on its outputs: the node checking them for NaN and reading the answer on the host."""
    while op is not None and op.name != "aten::item":
        op = op.parent
    parent = op.parent if op is not None else None
    if parent is None or not parent.name.startswith(ENGINE_PREFIX):
        return False
    before = [c.name for c in parent.children if c.end_us <= op.start_us]
    return tuple(before[-2:]) == NAN_CHECK_OPS


def _where_of_op(op: CpuOp | None, rank) -> Where:
    top = _outermost_op(op)
    return Where(op=top.name if top is not None else None, label=_label_of(op), rank=rank)


# ----------------------------------------------------------- host chain
class _Thread:
    """One thread's events within a window, for cutting into stretches."""

    def __init__(self, tid, ops: list[CpuOp], calls: list[RuntimeCall]):
        self.tid = tid
        self.calls = sorted(calls, key=lambda c: c.start_us)
        self.call_starts = [c.start_us for c in self.calls]
        self.tops = [op for op in ops if not op.annotation and _outermost_op(op) is op]
        self.tops.sort(key=lambda o: o.start_us)
        self.annotations = sorted((op for op in ops if op.annotation and not op.name.startswith("ProfilerStep#")),
                                  key=lambda o: o.start_us)
        # what starts next (an op or a label), for naming untraced stretches
        self.starts = sorted(self.tops + self.annotations, key=lambda o: o.start_us)
        self.start_times = [o.start_us for o in self.starts]
        self.top_starts = [o.start_us for o in self.tops]


def _label_at(thread: _Thread, t: float) -> str | None:
    """The innermost label open at ``t`` on the thread (labels are few: a scan)."""
    best = None
    for ann in thread.annotations:
        if ann.start_us > t:
            break
        if ann.end_us >= t and (best is None or ann.dur_us <= best.dur_us):
            best = ann
    return best.name if best is not None else None


def _next_start(thread: _Thread, lo: float, hi: float) -> str | None:
    """What the host stretch [lo, hi] leads to: the first label opened inside it, else the next op."""
    i = bisect.bisect_left(thread.start_times, lo + SLACK_US)  # not the label the stretch opens inside
    for item in thread.starts[i:]:
        if item.start_us > hi + SLACK_US:
            break
        if item.annotation:
            return item.name
    i = bisect.bisect_left(thread.start_times, hi - SLACK_US)
    return thread.starts[i].name if i < len(thread.starts) else None


def _untraced(thread: _Thread, lo: float, hi: float, rank) -> HostSeg:
    return HostSeg("untraced", hi - lo, Cause.LAUNCH_OVERHEAD, Where(label=_label_at(thread, (lo + hi) / 2), rank=rank,
                                                                      before=_next_start(thread, lo, hi)),
                   tid=thread.tid, start_us=lo)


#: A Python function named as what ran in an untraced host gap must have been running for at least this share of it.
PYTHON_SHARE = 0.5


def _name_python(trace: Trace, run: list[HostSeg]) -> None:
    """Name, in the stretches of a host gap (untraced time, ops that launch nothing), the program's Python function
    that ran there, where the trace recorded Python calls (``with_stack=True``): the innermost of the program's own
    (not torch's, nor Python's library: :func:`~profiling_guide.trace.python_context.source_of_frame`) open for at
    least :data:`PYTHON_SHARE` of the run, on the thread that holds most of its time (a backward hook's Python
    runs on the autograd engine's)."""
    untraced = [seg for seg in run if seg.kind in ("untraced", "op") and seg.dur_us > 0 and seg.tid is not None]
    frames = trace.python_frames_by_thread
    if not untraced or not frames:
        return
    time_on: dict = defaultdict(float)
    for seg in untraced:
        time_on[seg.tid] += seg.dur_us
    tid = max(time_on, key=time_on.get)
    if tid not in frames:
        return
    mine = [seg for seg in untraced if seg.tid == tid]
    lo, hi = mine[0].start_us, mine[-1].start_us + mine[-1].dur_us
    starts, found = frames[tid]
    best = None
    for frame in found[:bisect.bisect_right(starts, hi)]:
        overlap = min(frame.end_us, hi) - max(frame.start_us, lo)
        if overlap >= PYTHON_SHARE * (hi - lo) and (best is None or frame.dur_us <= best.dur_us) \
                and source_of_frame(frame.name) is not None:
            best = frame
    if best is None:
        return
    source = str(source_of_frame(best.name))
    for seg in mine:
        w = seg.where
        seg.where = Where(op=w.op, label=w.label, kind=w.kind, rank=w.rank, before=w.before, source=source)


def host_work(run: list[HostSeg]) -> bool:
    """Whether a run of untraced stretches and host-only ops is host work of its own (see :data:`HOST_GAP_US`)."""
    return sum(seg.dur_us for seg in run) >= HOST_GAP_US


#: The autograd engine's own ops: its bookkeeping between a backward's kernels (AccumulateGrad setting a compiled
#: backward's gradients launches nothing), the framework's pace, not host work of the program's own.
AUTOGRAD_OPS = re.compile(r"^autograd::engine::|^torch::autograd::")


def _host_only_runs(host: list[HostSeg]) -> list[list[HostSeg]]:
    """The maximal runs of consecutive host stretches that issue no device work and call nothing: untraced time
    and ops that launched nothing (not the autograd engine's, :data:`AUTOGRAD_OPS`). Many short CPU ops in a row
    (a DataLoader's transforms on the training thread, each well under a millisecond) are one such run, as long
    as a sleep."""
    runs, run = [], []
    for seg in host:
        if seg.kind == "op" and seg.host_only and AUTOGRAD_OPS.match(seg.where.op or ""):
            runs += [run, [seg]]  # alone, it is host work of its own only if it is long itself (a hook's work)
            run = []
        elif seg.kind == "untraced" or (seg.kind == "op" and seg.host_only):
            run.append(seg)
        elif run:
            runs.append(run)
            run = []
    return [r for r in runs + [run] if r]


def _fill(thread: _Thread, lo: float, hi: float, rank, out: list[HostSeg], busy: dict) -> None:
    """Stretches of [lo, hi] between runtime calls: inside a top-level op, or untraced."""
    if hi - lo <= 0:
        return
    i = max(bisect.bisect_right(thread.top_starts, lo) - 1, 0)
    t = lo
    while i < len(thread.tops) and thread.tops[i].start_us < hi:
        op = thread.tops[i]
        i += 1
        s, e = max(op.start_us, t), min(op.end_us, hi)
        if e <= s:
            continue
        if s > t:
            out.append(_untraced(thread, t, s, rank))
        seg = HostSeg("op", e - s, Cause.LAUNCH_OVERHEAD, Where(op=op.name, label=_label_of(op), rank=rank),
                      owner=id(op), tid=thread.tid, start_us=s)
        if e - s >= HOST_GAP_US:  # a long stretch: which of torch's ops ran it (the innermost open over its middle)
            seg.inner_op = _inner_aten(op, (s + e) / 2)
        seg.host_only = not busy.get(id(op))
        out.append(seg)
        t = e
    if hi > t:
        out.append(_untraced(thread, t, hi, rank))


def _host_gaps(trace: Trace, host: list[HostSeg]) -> None:
    """Mark the host's work of its own (:attr:`Cause.HOST_GAP`): runs of stretches that issue no device work long
    enough to count (:func:`host_work`), named for the Python that ran in them where the trace says
    (:func:`_name_python`); and a long stretch between one op's launches while one of torch's ops is open in it
    (setup, named at that op)."""
    for run in _host_only_runs(host):
        if host_work(run):
            for seg in run:
                seg.cause = Cause.HOST_GAP
            _name_python(trace, run)
    for seg in host:
        if seg.kind == "op" and not seg.host_only and seg.dur_us >= HOST_GAP_US and seg.inner_op:
            python = _python_inside(trace, seg)
            seg.cause = Cause.HOST_GAP
            seg.setup, seg.python_in_op = python is None, python is not None
            w = seg.where
            seg.where = Where(op=seg.inner_op, label=w.label, kind=w.kind, rank=w.rank, before=w.before,
                              source=python or w.source)


def _python_inside(trace: Trace, seg: HostSeg) -> str | None:
    """The Python call that took most of an op's stretch, where the trace's Python calls (``with_stack=True``)
    cover at least :data:`PYTHON_SHARE` of it: not the op's own setup but Python hooked into it (anomaly
    detection formatting a stack trace, a TorchFunctionMode). None where they do not, or the trace has none."""
    frames = trace.python_frames_by_thread.get(seg.tid) if seg.tid is not None else None
    if not frames:
        return None
    starts, found = frames
    lo, hi = seg.start_us, seg.start_us + seg.dur_us
    inside = [f for f in found[bisect.bisect_left(starts, lo):bisect.bisect_right(starts, hi)] if f.end_us <= hi]
    outermost, reach = [], lo
    for frame in inside:  # by start: a frame that starts before the last outermost one ends is nested in it
        if frame.start_us >= reach:
            outermost.append(frame)
            reach = frame.end_us
    if sum(f.dur_us for f in outermost) < PYTHON_SHARE * seg.dur_us:
        return None
    return frame_words(max(outermost, key=lambda f: f.dur_us).name)


def _inner_aten(op: CpuOp, t: float) -> str | None:
    """The innermost of torch's ops (``aten::``) among ``op`` and its descendants open at ``t``, if any."""
    found = op.name if op.name.startswith("aten::") else None
    while True:
        child = next((c for c in op.children if c.start_us <= t <= c.end_us and not c.annotation), None)
        if child is None:
            return found
        op = child
        if op.name.startswith("aten::"):
            found = op.name


def _call_seg(call: RuntimeCall, rank) -> HostSeg:
    name = call.name
    where = _where_of_op(call.op, rank)
    top = _outermost_op(call.op)
    seg = HostSeg("call", call.dur_us, Cause.LAUNCH_OVERHEAD, where, call=call, owner=id(top) if top else 0)
    copies = [ev for ev in call.device_events if ev.kind == "memcpy"]
    pageable = any("Pageable" in ev.name for ev in copies)
    readback = _readback_op(call.op)
    if ALLOCATOR_CALLS.match(name):
        seg.cause = Cause.ALLOCATOR
        seg.where = Where(op=where.op or name, label=where.label, rank=rank)
        if DEVICE_SYNC.match(name):
            seg.sync = "device"
    elif DEVICE_SYNC.match(name):
        seg.cause, seg.sync = Cause.HOST_SYNC, "device"
    elif STREAM_SYNC.match(name) or (MEMCPY_CALLS.match(name) and pageable):
        seg.sync = "stream"
        copy = MEMCPY_CALLS.match(name) and not readback and not _small_readback(copies)
        seg.cause = Cause.MEMCPY if copy else Cause.HOST_SYNC
        seg.pageable = pageable
    if seg.cause is Cause.HOST_SYNC and readback:
        seg.where = Where(op=readback, label=where.label, rank=rank)
        seg.nan_check = _nan_check(call.op)
    elif seg.cause is Cause.HOST_SYNC and where.op is None:
        seg.where = Where(op=name, label=where.label, rank=rank)
    return seg


#: A device→host copy to pageable memory smaller than this (bytes) is a sync, not a transfer: it takes
#: microseconds at any bandwidth, so its call's time is the wait for the GPU's work before it (``.cpu()`` of a
#: metric, ``.tolist()``), and its fix is not reading it every step, not pinned memory.
SMALL_READBACK_BYTES = 1 << 20


def _small_readback(copies: list) -> bool:
    """Whether the call's copies are device→host reads of under :data:`SMALL_READBACK_BYTES` in all."""
    d2h = [ev for ev in copies if _direction(ev) == "d2h"]
    total = sum(ev.args.get("bytes") or 0 for ev in d2h if isinstance(ev.args.get("bytes"), (int, float)))
    return bool(d2h) and len(d2h) == len(copies) and 0 < total < SMALL_READBACK_BYTES


def _chain(thread: _Thread, lo: float, hi: float, rank, busy: dict) -> list[tuple[HostSeg, RuntimeCall | None]]:
    """The thread's stretches over [lo, hi], in order, each with its runtime call (or None)."""
    out: list[tuple[HostSeg, RuntimeCall | None]] = []
    t = lo
    i = bisect.bisect_left(thread.call_starts, lo - SLACK_US)
    for call in thread.calls[i:]:
        if call.start_us >= hi:
            break
        s = max(call.start_us, t)
        e = min(max(call.end_us, s), hi)
        pieces: list[HostSeg] = []
        _fill(thread, t, s, rank, pieces, busy)
        out.extend((p, None) for p in pieces)
        seg = _call_seg(call, rank)
        seg.dur_us = e - s
        out.append((seg, call))
        t = e
    pieces = []
    _fill(thread, t, hi, rank, pieces, busy)
    out.extend((p, None) for p in pieces)
    return out


def _device_busy_ops(ops: list[CpuOp]) -> dict:
    """id(op) → True for ops that launched device work, themselves or through what they contain."""
    busy: dict = {}
    for op in ops:
        if any(call.device_events for call in op.runtime_calls):
            node = op
            while node is not None and not busy.get(id(node)):
                busy[id(node)] = True
                node = node.parent
    return busy


def _host_chain(trace: Trace, step: Step, rank) -> tuple[list[tuple[HostSeg, RuntimeCall | None]], list]:
    ops_by: dict = {}
    for op in step.ops:
        ops_by.setdefault(op.tid, []).append(op)
    calls_by: dict = {}
    for call in step.runtime_calls:
        calls_by.setdefault(call.tid, []).append(call)
    tids = set(ops_by) | set(calls_by)
    if not tids:
        return [], []
    driver = _driver(trace, step, calls_by, tids)
    tids.add(driver)  # the step's thread may have recorded nothing of its own in it
    busy = _device_busy_ops(step.ops)
    threads = {tid: _Thread(tid, ops_by.get(tid, []), calls_by.get(tid, [])) for tid in tids}
    chain = _chain(threads[driver], step.start_us, step.end_us, rank, busy)
    # Where the step's thread ran nothing recorded while another thread worked (the autograd engine's
    # backward), that thread's stretches stand in for the wait.
    used = [driver]
    merged: list[tuple[HostSeg, RuntimeCall | None]] = []
    t = step.start_us
    for seg, call in chain:
        lo, hi = t, t + seg.dur_us
        t = hi
        other = None if seg.kind != "untraced" or seg.dur_us < 20 * SLACK_US else _busiest_other(threads, driver, lo, hi)
        if other is None:
            merged.append((seg, call))
            continue
        merged += _stand_in(threads, driver, other, (lo, hi), rank, busy)
        used.append(other[0])
    return [(s, c) for s, c in merged if s.dur_us > 0], list(dict.fromkeys(used))


def _driver(trace: Trace, step: Step, calls_by: dict, tids: set):
    """The step's thread: its ProfilerStep marker's; with no marker, the thread that started the step's work
    (Python's, which runs the loop), not the autograd engine's, which may launch more but only once the step's
    thread has started the backward."""
    marker = next((op for op in trace.ops if op.annotation and op.name == f"ProfilerStep#{step.number}"
                   and abs(op.start_us - step.start_us) < SLACK_US), None)
    if marker is not None:
        return marker.tid
    first = min((x for x in (*step.ops, *step.runtime_calls) if not getattr(x, "annotation", False)),
                key=lambda x: x.start_us, default=None)
    return first.tid if first is not None else max(tids, key=lambda t: len(calls_by.get(t, ())))


def _stand_in(threads: dict, driver, other: tuple, span: tuple[float, float], rank, busy
              ) -> list[tuple[HostSeg, RuntimeCall | None]]:
    """An untraced stretch ``span`` of the step's thread, with the stretches of the ``other`` thread that worked
    through it (tid, first, last) in its place, inside the step thread's label there."""
    lo, hi = span
    tid, first, last = other
    out = [(_untraced(threads[driver], lo, first, rank), None)]
    for piece, piece_call in _chain(threads[tid], first, last, rank, busy):
        if piece.where.label is None:  # the other thread works inside the step thread's label ('backward')
            w = piece.where
            piece.where = Where(op=w.op, label=_label_at(threads[driver], (lo + hi) / 2), kind=w.kind,
                                rank=w.rank, before=w.before)
        out.append((piece, piece_call))
    out.append((_untraced(threads[driver], last, hi, rank), None))
    return out


def _activity(thread: _Thread, lo: float, hi: float) -> tuple[float, float, float]:
    """Time inside the thread's top-level ops and calls within [lo, hi], and the first and last such moment."""
    covered, first, last = 0.0, None, None
    for seq in (thread.tops, thread.calls):
        for item in seq:
            s, e = max(item.start_us, lo), min(item.end_us, hi)
            if e > s:
                if seq is thread.tops or item.op is None:
                    covered += e - s
                first = s if first is None else min(first, s)
                last = e if last is None else max(last, e)
    return covered, first, last


def _busiest_other(threads: dict, driver, lo: float, hi: float):
    """(tid, first, last) of the other thread that worked most of [lo, hi], if one worked at least 30 % of it."""
    best = None
    for tid, thread in threads.items():
        if tid == driver:
            continue
        covered, first, last = _activity(thread, lo, hi)
        if first is not None and covered >= 0.3 * (hi - lo) and (best is None or covered > best[0]):
            best = (covered, tid, first, last)
    return best[1:] if best is not None else None


# ---------------------------------------------------------- device work
def _direction(ev: DeviceEvent) -> str | None:
    name = ev.name
    for key, words in (("h2d", "HtoD"), ("d2h", "DtoH"), ("d2d", "DtoD"), ("p2p", "PtoP")):
        if words in name:
            return key
    return None


def _device_where(ev: DeviceEvent, rank) -> Where:
    op = ev.launch.op if ev.launch is not None else None
    if COLLECTIVE.search(ev.name):
        name = _collective_name(op)
        return Where(op=name or ev.decoded.short, label=_label_of(op), kind=ev.decoded.kind, rank=rank)
    top = _outermost_op(op)
    return Where(op=top.name if top is not None else None, label=_label_of(op), kind=ev.decoded.kind, rank=rank)


def _device_cause(ev: DeviceEvent) -> Cause:
    if ev.kind == "memcpy":
        return Cause.MEMCPY
    if COLLECTIVE.search(ev.name):
        return Cause.EXPOSED_COMMUNICATION
    return Cause.GPU_COMPUTE


# --------------------------------------------------------------- the graph
def step_graph(trace: Trace, step: Step, *, rank=None) -> StepGraph:
    """The dependency graph of one profiled step (see the module docstring)."""
    chain, threads = _host_chain(trace, step, rank)
    host: list[HostSeg] = []
    dev: list[DevNode] = []
    index_of: dict[int, int] = {}
    launched_at: dict[int, float] = {}
    t = 0.0
    # the step's own device work (a trace without step markers is one step holding all of it)
    mine = {id(ev) for ev in step.device_events}
    for seg, call in chain:
        host.append(seg)
        if call is not None:
            for ev in sorted(call.device_events, key=lambda e: e.start_us):
                if id(ev) not in mine:
                    continue
                index_of[id(ev)] = len(dev)
                seg.launches.append(len(dev))
                launched_at[id(ev)] = t
                dev.append(_node(ev, len(host) - 1, rank))
        t += seg.dur_us
    for node in dev:  # work launched from another thread inside the step thread's label ('backward')
        if node.host >= 0 and node.where.label is None and host[node.host].where.label is not None:
            w = node.where
            node.where = Where(op=w.op, label=host[node.host].where.label, kind=w.kind, rank=w.rank)
    # device work of the step launched off the chain (another thread): ready when its launch was
    for ev in step.device_events:
        if id(ev) not in index_of and ev.launch is not None and not ev.before_window:
            index_of[id(ev)] = len(dev)
            node = _node(ev, -1, rank)
            node.ready_us = ev.launch.start_us - step.start_us
            dev.append(node)
    _host_gaps(trace, host)
    gap, lag = _stream_timing(dev)
    _dependencies(dev, trace, gap, lag)
    sms = sm_count(trace)
    _share_the_gpu(dev, sms)
    _stream_waits(host, dev, trace)
    _blocking(host, dev, chain, trace, step, index_of)
    profiler_units(host, step, trace)
    ops = sum(1 for op in step.ops if not op.annotation)
    backward_of = {id(_outermost_op(op)): id(_outermost_op(op.forward_op)) for op in step.ops
                   if op.forward_op is not None}
    return StepGraph(step.number, step.dur_us, host, dev, gap, lag, ops, len(step.runtime_calls), threads,
                     sms, trace.python_frames_by_thread, backward_of)


def _node(ev: DeviceEvent, host: int, rank) -> DevNode:
    nbytes = ev.args.get("bytes")
    return DevNode(ev, ev.dur_us, ev.stream, _device_cause(ev), _device_where(ev, rank), host, solo_us=ev.dur_us,
                   lag_us=max(ev.start_us - ev.launch.start_us, 0.0) if ev.launch is not None else 0.0,
                   nbytes=float(nbytes) if isinstance(nbytes, (int, float)) else 0.0,
                   pageable="Pageable" in ev.name, direction=_direction(ev) if ev.kind == "memcpy" else None)


def _stream_timing(dev: list[DevNode]) -> tuple[float, float]:
    """The median gap between back-to-back work on a stream, and the median launch latency on an idle stream."""
    gaps, lags = [], []
    last_end: dict = {}
    for node in sorted(dev, key=lambda n: n.event.start_us):
        ev = node.event
        prev = last_end.get(node.stream)
        launch = ev.launch
        if prev is not None and launch is not None:
            if launch.end_us < prev:  # queued behind the work before it: the gap is the stream's own
                gaps.append(max(ev.start_us - prev, 0.0))
            elif launch.start_us > prev + WAIT_SLACK_US:  # the stream was idle when it was launched
                lags.append(ev.start_us - launch.start_us)
        last_end[node.stream] = max(prev or 0.0, ev.end_us)
    gap = statistics.median(gaps) if gaps else 1.0
    lag = statistics.median(lags) if lags else 5.0
    return min(max(gap, 0.0), 20.0), min(max(lag, 0.5), 100.0)


def _share_the_gpu(dev: list[DevNode], sms: int | None) -> None:
    """Mark the kernels that fill the GPU (as many blocks as it has multiprocessors, or more; not a collective's,
    whose few blocks leave the rest to compute) and give each its time alone.

    Two such kernels on different streams that overlap do not both run at full speed: each holds the
    multiprocessors the other wants, so the trace shows both longer than either alone. Each is taken to have
    run at :data:`SHARED_SPEED` while it overlapped another (``solo_us``: its length less that share of the
    overlap), and the re-timing gives them that speed when they meet again
    (:class:`~profiling_guide.analysis.critical_path.Sharing`): a side stream whose work seems hidden behind the
    main stream's still costs the main stream time. Where the trace lacks the GPU's multiprocessor count or the
    kernels' grids, nothing is marked.
    """
    if not sms:
        return
    for node in dev:
        n = blocks(node.event) if node.event.kind == "kernel" else None
        node.fills = n is not None and n >= sms and node.cause is Cause.GPU_COMPUTE
    by_stream: dict = defaultdict(list)
    for node in dev:
        if node.fills:
            by_stream[node.stream].append((node.event.start_us, node.event.end_us))
    if len(by_stream) < 2:
        return
    for stream in by_stream:
        others = merged(iv for s, ivs in by_stream.items() if s != stream for iv in ivs)
        starts = [a for a, _ in others]
        for node in dev:
            if node.fills and node.stream == stream:
                a, b = node.event.start_us, node.event.end_us
                overlap, i = 0.0, max(bisect.bisect_right(starts, a) - 1, 0)
                while i < len(others) and others[i][0] < b:
                    overlap += max(0.0, min(b, others[i][1]) - max(a, others[i][0]))
                    i += 1
                node.solo_us = max(node.dur_us - overlap * (1 - SHARED_SPEED), 0.0)


def _stream_before(trace: Trace, dev: list[DevNode]) -> dict:
    """Per stream, when the work before this step's first work on it ended (work of an earlier step, still queued)."""
    cached = getattr(trace, "_by_stream", None)
    if cached is None:
        cached = {}
        for ev in sorted(trace.device_events, key=lambda e: e.start_us):
            cached.setdefault(ev.stream, ([], []))
            cached[ev.stream][0].append(ev.start_us)
            cached[ev.stream][1].append(ev.end_us)
        trace._by_stream = cached
    first: dict = {}
    for n in dev:
        if n.stream not in first or n.event.start_us < first[n.stream]:
            first[n.stream] = n.event.start_us
    before = {}
    for stream, start in first.items():
        starts, ends = cached.get(stream, ([], []))
        i = bisect.bisect_left(starts, start) - 1
        if i >= 0:
            before[stream] = max(ends[max(i - 63, 0): i + 1])  # the latest of the few before it
    return before


def _dependencies(dev: list[DevNode], trace: Trace, gap: float, lag: float) -> None:
    """Each node's launch latency, and for work that started later than launch and stream allow, what it waited for."""
    ends = sorted(((n.event.end_us, i) for i, n in enumerate(dev)))
    end_times = [e for e, _ in ends]
    last_end: dict = _stream_before(trace, dev)
    for i in sorted(range(len(dev)), key=lambda k: dev[k].event.start_us):
        node = dev[i]
        ev = node.event
        prev = last_end.get(node.stream)
        launch = ev.launch
        stream_ready = prev + gap if prev is not None else float("-inf")
        if launch is None:
            ready = max(ev.start_us, stream_ready)
        elif node.lag_us <= 2 * lag + WAIT_SLACK_US and (prev is None or launch.start_us + node.lag_us >= prev):
            ready = ev.start_us  # its own launch latency bound it: keep it as the trace shows it
        else:
            node.lag_us = lag
            ready = max(launch.start_us + lag, stream_ready)
        if ev.start_us > ready + WAIT_SLACK_US:
            # waited for something else: the latest work of another stream that ended after it was ready and
            # before it started (an event a wait is recorded on may be released a while before the waiting work
            # starts: its stream's scheduler, a copy engine)
            j = bisect.bisect_right(end_times, ev.start_us + SLACK_US) - 1
            found = -1
            while j >= 0 and end_times[j] >= min(ready, ev.start_us - 50 * SLACK_US):
                k = ends[j][1]
                if dev[k].stream != node.stream:
                    found = k
                    break
                j -= 1
            if found >= 0:
                node.dep = found
                node.dep_lag_us = max(ev.start_us - dev[found].event.end_us, 0.0)
            else:
                node.extra_us = ev.start_us - ready
        last_end[node.stream] = max(prev or float("-inf"), ev.end_us)


STREAM_WAIT = re.compile(r"^cu(da)?StreamWaitEvent$")
EVENT_RECORD = re.compile(r"^cu(da)?EventRecord(WithFlags)?$")
#: How many host stretches after a ``cudaStreamWaitEvent`` to look for the work of the stream that waits.
WAIT_LOOKAHEAD = 64


def _stream_waits(host: list[HostSeg], dev: list[DevNode], trace: Trace) -> None:
    """The streams of each ``cudaStreamWaitEvent`` (``a.wait_stream(b)``), which the trace does not record: the
    stream that waits is the one that gets work first after the wait, and the event was recorded on the other
    stream that got work last before its ``cudaEventRecord`` (in this step or the one before). Kept only where
    the trace agrees: that work started after the recorded stream's work before the event had ended. The
    re-timing then holds that work back, however much faster the host runs, as the GPU did (and across steps: a
    side stream that waits for the work the step before left on the main stream)."""
    # NCCL's streams wait on and are waited for by events the collectives' own code records: what they wait for
    # is read from when their work starts (:func:`_dependencies`), not from the order of the calls
    talking = {n.stream for n in dev if n.cause is Cause.EXPOSED_COMMUNICATION}
    streams = {n.stream for n in dev}
    recorded = None
    for i, seg in enumerate(host):
        name = seg.call.name if seg.kind == "call" and seg.call is not None else ""
        if EVENT_RECORD.match(name):
            recorded = seg.call.start_us
        elif STREAM_WAIT.match(name) and recorded is not None:
            first = next((dev[d] for later in host[i + 1: i + 1 + WAIT_LOOKAHEAD] for d in later.launches), None)
            before = _recorded_work(trace, streams, first, recorded) if first is not None else None
            if before is not None and not {before.stream, first.stream} & talking \
                    and first.event.start_us >= before.end_us - SLACK_US:
                seg.waits = (before.stream, first.stream)
                # its start, late for its launch, is explained by the wait now, up to when that work ended
                first.extra_us = min(first.extra_us, max(first.event.start_us - before.end_us - WAIT_SLACK_US, 0.0))


def _recorded_work(trace: Trace, streams: set, first: DevNode, recorded: float) -> DeviceEvent | None:
    """The work an event recorded at ``recorded`` stands for: of the streams other than the waiting one's
    (``first``'s), the work launched last before it."""
    candidates = (_last_launched(trace, stream, recorded) for stream in streams - {first.stream})
    return max((ev for ev in candidates if ev is not None), key=lambda ev: ev.launch.start_us, default=None)


def _last_launched(trace: Trace, stream, at: float) -> DeviceEvent | None:
    """The device work on ``stream`` launched last before ``at`` (the trace's clock)."""
    cached = getattr(trace, "_device_by_launch", None)
    if cached is None:
        cached = defaultdict(list)
        for ev in sorted((e for e in trace.device_events if e.launch is not None), key=lambda e: e.launch.start_us):
            cached[ev.stream].append(ev)
        cached = trace._device_by_launch = {k: (v, [e.launch.start_us for e in v]) for k, v in cached.items()}
    events, starts = cached.get(stream, ([], []))
    i = bisect.bisect_left(starts, at) - 1
    return events[i] if i >= 0 else None


def _by_end(trace: Trace) -> tuple[list[DeviceEvent], list[float]]:
    """The trace's device events by end time (kept on the trace: every step's graph asks)."""
    cached = getattr(trace, "_device_by_end", None)
    if cached is None:
        events = sorted(trace.device_events, key=lambda e: e.end_us)
        cached = trace._device_by_end = (events, [e.end_us for e in events])
    return cached


EVENT_SYNC = re.compile(r"^cu(da)?EventSynchronize$")


def _same_work(ev: DeviceEvent, trace: Trace, step: Step, dev: list[DevNode], index_of: dict) -> tuple | None:
    """The node of this step that ``ev`` is, or that stands for it in the step before (same stream, same place)."""
    if id(ev) in index_of:
        return index_of[id(ev)], 0
    before = next((s for s in trace.steps if s.number == ev.step), None) if ev.step is not None else None
    if before is None or before.number >= step.number:
        return None
    # the same program each step: the k-th work on its stream in its step is the k-th in this one
    theirs = sorted((e for e in before.device_events if e.stream == ev.stream), key=lambda e: e.start_us)
    mine = sorted((i for i, n in enumerate(dev) if n.stream == ev.stream), key=lambda i: dev[i].event.start_us)
    k = next((j for j, e in enumerate(theirs) if e is ev), -1)
    return (mine[k], -1) if 0 <= k < len(mine) and len(mine) == len(theirs) else None


def _blocking(host: list[HostSeg], dev: list[DevNode], chain, trace: Trace, step: Step, index_of: dict) -> None:
    """For each blocking call: which stream it waits for, whether it was seen waiting, and its return lag.

    The work it waited for may be of the step before (DDP's forward waits for the last step's all-reduce):
    every device event of the trace is looked at, and the re-timing's repeated steps stand in for it.
    """
    by_end, end_times = _by_end(trace)
    last_stream = None
    for seg, call in chain:
        if call is not None and call.device_events:
            last_stream = call.device_events[-1].stream
        if seg.sync is None or call is None:
            continue
        # the work it was seen waiting for: the last device work to end inside the call, shortly before it returned
        j = bisect.bisect_right(end_times, call.end_us + SLACK_US) - 1
        awaited = by_end[j] if j >= 0 and end_times[j] >= call.start_us - SLACK_US else None
        if awaited is not None and call.end_us - awaited.end_us <= max(RETURN_US, 0.01 * call.dur_us):
            seg.waited = True
            seg.wait_lag_us = max(call.end_us - awaited.end_us, 0.0)
            if seg.sync == "stream":
                seg.sync_stream = awaited.stream
            if EVENT_SYNC.match(call.name):
                seg.await_node = _same_work(awaited, trace, step, dev, index_of)
        else:
            seg.wait_lag_us = 5.0
        if seg.sync == "stream" and seg.sync_stream is None:
            own = [ev.stream for ev in call.device_events]
            seg.sync_stream = own[-1] if own else last_stream


def profiler_units(host: list[HostSeg], step: Step, trace: Trace | None = None) -> None:
    """Share each recorded op's and runtime call's profiler cost among the stretches of its top-level op.

    The profiler pays for every op and runtime call it records, inside the op
    that holds it: a top-level op's recorded ops and calls are spread over its
    own stretches (its time between calls, and its calls), in proportion to
    their length, and so are its Triton launches of torch.compile's code
    (:func:`is_compiled_triton_launch`). A call outside any op carries its own. The Python calls it
    traces (``with_stack=True``) run between ops and inside their Python
    wrappers: the step's count of them is spread over its stretches that are
    not runtime calls, in proportion to their length.
    """
    if trace is not None and trace.python_starts:
        _share_python_calls(host, step, trace)
    ops = Counter(id(_outermost_op(op)) for op in step.ops if not op.annotation)
    triton = Counter(id(_outermost_op(op)) for op in step.ops if not op.annotation and is_compiled_triton_launch(op))
    calls = Counter(seg.owner for seg in host if seg.kind == "call")
    length: dict[int, float] = defaultdict(float)
    for seg in host:
        if seg.owner and seg.kind != "untraced":
            length[seg.owner] += seg.dur_us
    for seg in host:
        if seg.kind == "untraced":
            continue
        if not seg.owner:
            seg.prof_calls = 1.0
            continue
        share = seg.dur_us / length[seg.owner] if length.get(seg.owner) else 0.0
        seg.prof_ops = ops.get(seg.owner, 0) * share
        seg.prof_calls = calls.get(seg.owner, 0) * share
        seg.prof_triton = triton.get(seg.owner, 0) * share


def _share_python_calls(host: list[HostSeg], step: Step, trace: Trace) -> None:
    """The step's traced Python calls (``with_stack=True``) spread over its stretches that are not runtime calls,
    in proportion to their length."""
    calls_in_step = sum(bisect.bisect_right(starts, step.end_us) - bisect.bisect_left(starts, step.start_us)
                        for starts in trace.python_starts.values())
    python_time = sum(seg.dur_us for seg in host if seg.kind != "call")
    for seg in host:
        if seg.kind != "call" and python_time > 0:
            seg.prof_py = calls_in_step * seg.dur_us / python_time


def is_compiled_triton_launch(op: CpuOp) -> bool:
    """An op that torch.compile's code records around a Triton launch while the profiler runs (its arguments name
    ``kernel_backend: triton``). Only under the profiler does that launch leave inductor's fast path and build
    the op's arguments in Python, so each costs the profiled host more than an aten op does."""
    return (op.args or {}).get("kernel_backend") == "triton"

