"""Collective calls, read from each rank's trace and matched across ranks.

A collective leaves two things in a ``torch.profiler`` trace. On the CPU, a
``record_param_comms`` op with what was asked: ``Collective name``,
``dtype``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
``Process Group Name`` and ``Process Group Ranks``. On the GPU, the NCCL
kernel that did it (``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``), whose name
says how (:mod:`profiling_guide.trace.kernel_names.nccl`) but not how much.
:func:`collective_calls` joins the two through the kernel's launch, which the
op (or the ``nccl:*`` annotation nested in it) made.

:func:`match_calls` then finds the same call on every rank of its group.
*What it matches on*: the process group's name, the profiler step, and the
call's place among that group's calls of that step on its rank (ordered by
the op's start on the CPU). Every member of a process group issues its
collectives in the same order, NCCL requires it, and the profiler numbers
steps the same on every rank, so these three name one call. *What it does
not match on, and why*: the k-th NCCL kernel of a trace is not the k-th call
on every rank, because a trace also holds kernels launched before the
profiler began recording, still running when it did (the CPU runs ahead of
the GPU; their number differs from rank to rank); and the op's ``Ev Idx`` is
an index among the profiler's own records, not a count of the group's calls.

Each matched call then says, per rank, how long its kernel ran. A
collective's kernel cannot finish before every rank of the group has
arrived, so its duration is the transfer plus the wait for the last rank:
the **transfer time** is the shortest duration across the ranks (the rank
that arrived last waited for no one), and every other rank's **wait** is its
duration minus that (TraceLens's NCCL analyser uses the same transfer time).
Durations need no shared clock, so this holds for ranks on different hosts.

A call also says how many bytes each rank **sent** for it
(:attr:`MatchedCall.sent_bytes`): the buffer times nccl-tests' bus factor,
``2(n−1)/n`` for an all-reduce and ``(n−1)/n`` for an all-gather or a
reduce-scatter of ``n`` ranks (:mod:`~profiling_guide.analysis.bandwidth`),
read from the op's ``Collective name``, ``In msg nelems`` or ``Out msg
nelems``, ``dtype`` and ``Group size``; and how much of each rank's kernel
ran with compute beside it on that rank's GPU (``hidden_us``).
"""

from __future__ import annotations

import functools
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from profiling_guide.analysis.bandwidth import sent_bytes
from profiling_guide.analysis.overlap import collective_exposure
from profiling_guide.errors import GuideError
from profiling_guide.trace.model import CpuOp, DeviceEvent, Trace

COMMS_OP = "record_param_comms"

#: Bytes per element of the ``dtype`` names ``record_param_comms`` writes (c10's ScalarType names).
ELEMENT_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2, "Char": 1,
                 "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "Float8_e4m3fn": 1,
                 "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt16": 2, "UInt32": 4,
                 "UInt64": 8}
#: Short names of those types, as the guide writes dtypes elsewhere.
DTYPE_WORDS = {"Float": "fp32", "Double": "fp64", "Half": "fp16", "BFloat16": "bf16", "Int": "int32",
               "Long": "int64", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
               "Float8_e4m3fn": "fp8_e4m3", "Float8_e5m2": "fp8_e5m2"}
#: The collectives that end together on every rank: no rank's kernel can finish before all arrived.
SYNCHRONIZING = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
#: Collectives whose every rank moves the same buffer: ranks that disagree on its size are not of one run.
SAME_SIZE = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"}
#: Point-to-point calls: a send on one rank and a recv on another, not one call of the whole group.
POINT_TO_POINT = {"send", "recv"}


def collective_kind(name: str) -> str:
    """``record_param_comms``'s ``Collective name`` in one spelling: ``_allgather_base`` → ``all_gather``."""
    text = name.lower().strip("_")
    for words, kind in ((("allreduce", "all_reduce"), "all_reduce"),
                        (("allgather", "all_gather"), "all_gather"),
                        (("reduce_scatter", "reducescatter"), "reduce_scatter"),
                        (("alltoall", "all_to_all"), "all_to_all"),
                        (("broadcast",), "broadcast"), (("barrier",), "barrier"),
                        (("send",), "send"), (("recv",), "recv"), (("gather",), "gather"),
                        (("scatter",), "scatter"), (("reduce",), "reduce")):
        if any(w in text for w in words):
            return kind
    return text or "?"


@dataclass(slots=True)
class CollectiveCall:
    """One collective call on one rank: what the CPU asked for, and the NCCL kernel that did it.

    ``kernel_us`` and the rest of the kernel's fields are None when the call
    launched no NCCL kernel inside its op (a barrier, a call coalesced with
    others, a launch the profiler did not record).
    """

    rank: int
    group: str  # the process group's name ("0" for the default group)
    group_ranks: tuple[int, ...]
    step: int | None
    index: int  # its place among the group's calls of its step on this rank (sends and recvs counted apart)
    collective: str  # all_reduce, all_gather, reduce_scatter ... (:func:`collective_kind`)
    dtype: str  # as recorded: "BFloat16"
    in_elements: int
    out_elements: int
    cpu_start_us: float
    kernel: str | None = None
    algorithm: str | None = None  # NCCL's, from the kernel's decoded name
    protocol: str | None = None
    kernel_start_us: float | None = None
    kernel_us: float | None = None
    kernels: int = 0  # NCCL kernels the call launched
    #: µs of its kernels with a compute kernel running beside them on this rank's GPU (None: no kernel in a step)
    hidden_us: float | None = None

    @property
    def buffer_bytes(self) -> int | None:
        """The full buffer, as nccl-tests counts it: the gathered output of an all-gather, else the input."""
        size = ELEMENT_BYTES.get(self.dtype)
        if size is None:
            return None
        return size * (self.out_elements if self.collective == "all_gather" else self.in_elements)

    @property
    def kernel_end_us(self) -> float | None:
        return None if self.kernel_start_us is None else self.kernel_start_us + self.kernel_us

    @property
    def key(self) -> tuple:
        """What names this call on every rank of its group (see the module docstring)."""
        return self.group, self.step, self.index


def _int(value, default: int = 0) -> int:
    return value if type(value) is int else default


@functools.lru_cache(maxsize=4096)
def _parse_ranks(text: str) -> tuple[int, ...] | None:
    # One tuple per distinct group, shared by every call of every rank: a run of n ranks making
    # k calls each would otherwise hold k·n tuples of n ranks.
    try:
        return tuple(int(part) for part in text.strip("[] ").split(",") if part.strip())
    except ValueError:
        return None


def _group_ranks(op: CpuOp, rank: int) -> tuple[int, ...]:
    text = op.args.get("Process Group Ranks")
    if isinstance(text, list):
        text = repr([r for r in text if type(r) is int])
    ranks = _parse_ranks(text) if isinstance(text, str) else None
    return ranks if ranks is not None else (rank,)


def _nccl_kernels(op: CpuOp) -> list[DeviceEvent]:
    return [ev for ev in op.device_events if ev.kind == "kernel" and ev.decoded.kind == "collective"]


def collective_calls(trace: Trace, rank: int) -> list[CollectiveCall]:
    """Every ``record_param_comms`` op of ``trace``'s steps, with the NCCL kernel it launched, in CPU order.

    ``index`` counts each process group's calls within a step from 0. A
    call that launched several NCCL kernels is timed from the first one's
    start to the last one's end.
    """
    calls, counters = [], defaultdict(int)
    hidden = {id(ev): us for step in trace.steps for ev, us in collective_exposure(step.device_events)}
    ops = sorted((op for op in trace.ops if op.name == COMMS_OP and not op.annotation),
                 key=lambda op: op.start_us)
    for op in ops:
        args = op.args
        group = str(args.get("Process Group Name", "?"))
        collective = collective_kind(str(args.get("Collective name", "?")))
        counter = (group, op.step, collective in POINT_TO_POINT)
        index = counters[counter]
        counters[counter] += 1
        call = CollectiveCall(
            rank=rank, group=group, group_ranks=_group_ranks(op, rank), step=op.step, index=index,
            collective=collective, dtype=str(args.get("dtype", "?")),
            in_elements=_int(args.get("In msg nelems")), out_elements=_int(args.get("Out msg nelems")),
            cpu_start_us=op.start_us)
        kernels = _nccl_kernels(op)
        if kernels:
            start = min(k.start_us for k in kernels)
            call.kernel, call.kernel_start_us = kernels[0].name, start
            call.algorithm, call.protocol = kernels[0].decoded.algorithm, kernels[0].decoded.protocol
            call.kernel_us, call.kernels = max(k.end_us for k in kernels) - start, len(kernels)
            beside = [hidden[id(k)] for k in kernels if id(k) in hidden]
            call.hidden_us = sum(beside) if beside else None
        calls.append(call)
    return calls


def unmatched_kernels(trace: Trace) -> list[DeviceEvent]:
    """NCCL kernels of the trace's steps launched by no ``record_param_comms`` op (nor anything nested in one)."""
    found = []
    for step in trace.steps:
        for ev in step.kernels:
            if ev.decoded.kind != "collective":
                continue
            op = ev.launch.op if ev.launch is not None else None
            while op is not None and op.name != COMMS_OP:
                op = op.parent
            if op is None:
                found.append(ev)
    return found


# ------------------------------------------------------------ across ranks
@dataclass
class MatchedCall:
    """One collective call, seen on the ranks of its group whose traces were given.

    Fill ``kernels`` before reading the times: they are computed once, then kept.
    """

    group: str
    step: int | None
    index: int
    collective: str
    dtype: str
    buffer_bytes: int | None
    group_size: int
    algorithm: str | None
    protocol: str | None
    #: rank → (kernel start µs, kernel duration µs) on that rank's own clock
    kernels: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: ranks of the group whose traces hold no kernel for this call
    missing: tuple[int, ...] = ()
    #: rank → µs of its kernel with compute beside it on its GPU (ranks whose trace says)
    hidden: dict[int, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.missing and len(self.kernels) == self.group_size

    @cached_property
    def transfer_us(self) -> float:
        """The shortest kernel duration across the ranks: the time the data took, no rank waiting."""
        return min(dur for _, dur in self.kernels.values())

    @cached_property
    def last_rank(self) -> int:
        """The rank that arrived last: the one whose kernel waited least (ties: the lowest rank)."""
        return min(self.kernels, key=lambda r: (self.kernels[r][1], r))

    def wait_us(self, rank: int) -> float:
        """How long ``rank``'s kernel waited for the last rank: its duration minus the transfer time."""
        return self.kernels[rank][1] - self.transfer_us

    @cached_property
    def max_wait_us(self) -> float:
        return max(dur for _, dur in self.kernels.values()) - self.transfer_us

    @property
    def sent_bytes(self) -> float | None:
        """The bytes each rank sends for this call: the buffer × nccl-tests' bus factor (2(n−1)/n, (n−1)/n...)."""
        return None if self.buffer_bytes is None else sent_bytes(self.collective, self.group_size, self.buffer_bytes)

    @property
    def transfer_hidden_share(self) -> float | None:
        """The share of the transfer (the last rank's kernel) that ran with compute beside it on that rank's GPU."""
        us = self.hidden.get(self.last_rank)
        dur = self.kernels[self.last_rank][1]
        return None if us is None or dur <= 0 else min(us / dur, 1.0)


def match_calls(calls: list[CollectiveCall]) -> list[MatchedCall]:
    """The calls of every given rank, grouped into one :class:`MatchedCall` per call (see the module docstring).

    Sends and receives are left out: each pairs two ranks, not the group.
    Raises a one-line GuideError when ranks disagree on what one call was (a
    different collective or type, or a different size where every rank
    moves the same buffer): their traces are not of one run.
    """
    by_key: dict[tuple, list[CollectiveCall]] = defaultdict(list)
    for call in calls:
        if call.collective not in POINT_TO_POINT:
            by_key[call.key].append(call)
    matched = []
    for (group, step, index), same in by_key.items():
        first = same[0]
        for other in same[1:]:
            sized = first.collective in SAME_SIZE
            if (other.collective, other.dtype) != (first.collective, first.dtype) or sized and (
                    other.in_elements, other.out_elements) != (first.in_elements, first.out_elements):
                raise GuideError(
                    f"rank {first.rank} and rank {other.rank} are not of one run: call {index + 1} of process "
                    f"group {group} in step {step} is {_what(first)} on one and {_what(other)} on the other; "
                    "give the traces of one job")
        timed = [c for c in same if c.kernel_us is not None]
        ranks = set(first.group_ranks)
        m = MatchedCall(group=group, step=step, index=index, collective=first.collective, dtype=first.dtype,
                        buffer_bytes=first.buffer_bytes, group_size=max(len(ranks), 1),
                        algorithm=timed[0].algorithm if timed else None,
                        protocol=timed[0].protocol if timed else None,
                        kernels={c.rank: (c.kernel_start_us, c.kernel_us) for c in timed},
                        hidden={c.rank: c.hidden_us for c in timed if c.hidden_us is not None})
        m.missing = tuple(sorted(ranks - set(m.kernels)))
        matched.append(m)
    matched.sort(key=lambda m: (m.step is None, m.step or 0, m.group, m.index))
    return matched


def _what(call: CollectiveCall) -> str:
    return f"{call.collective} of {call.in_elements:,}→{call.out_elements:,} {call.dtype}"


# ------------------------------------------------------------------ clocks
#: Spread of one rank's clock offset across calls above which the traces cannot be one run.
OFFSET_SPREAD_US = 1000.0


def clock_offsets(matched: list[MatchedCall]) -> dict[int, float]:
    """Each rank's clock minus the lowest rank's, from when their synchronizing collectives ended.

    Kernels of one all-reduce (all-gather, reduce-scatter, all-to-all) end
    together on every rank, within tens of µs, whatever each rank's clock
    says: the end is the meeting point. The median of ``end(rank) −
    end(reference)`` over the calls both ranks ran is the offset between
    their clocks: about 0 for ranks of one host, which share one clock; the
    difference of two hosts' clocks otherwise. Raises a one-line GuideError
    when that difference wanders by more than :data:`OFFSET_SPREAD_US` from
    call to call: no two clocks drift that fast, so the traces are of
    different runs.
    """
    ranks = sorted({r for m in matched for r in m.kernels})
    if not ranks:
        return {}
    ref = ranks[0]
    diffs: dict[int, list[float]] = defaultdict(list)
    for m in matched:
        if m.collective not in SYNCHRONIZING or ref not in m.kernels:
            continue
        start, dur = m.kernels[ref]
        for r, (s, d) in m.kernels.items():
            diffs[r].append((s + d) - (start + dur))
    offsets = {ref: 0.0}
    for r in ranks[1:]:
        values = diffs.get(r)
        if not values:
            offsets[r] = 0.0
            continue
        median = statistics.median(values)
        spread = statistics.median(abs(v - median) for v in values)
        if len(values) >= 3 and spread > OFFSET_SPREAD_US:
            raise GuideError(
                f"rank {r} and rank {ref} are not of one run: their collectives' kernels, which end together "
                f"within microseconds in one run, end {spread / 1000:,.1f} ms apart from call to call "
                f"(median absolute deviation over {len(values)} calls); give the traces of one job")
        offsets[r] = median
    return offsets


# ------------------------------------------------------------ one rank alone
def calls_table(calls: list[CollectiveCall], n_steps: int) -> pd.DataFrame:
    """One rank's collective calls by kind: calls and kernel time per step, mean kernel µs, the full buffer.

    From one rank alone a kernel's duration is its transfer plus its wait
    for the other ranks, which only their traces can tell apart.
    """
    groups: dict[tuple, list[CollectiveCall]] = defaultdict(list)
    for c in calls:
        if c.kernel_us is not None and c.step is not None:
            groups[(c.collective, DTYPE_WORDS.get(c.dtype, c.dtype), c.buffer_bytes, c.algorithm, c.protocol)].append(c)
    n = max(n_steps, 1)
    rows = [{"collective": coll, "dtype": dtype, "bytes": nbytes, "algorithm": algorithm, "protocol": protocol,
             "per_step": len(same) / n, "us_per_step": sum(c.kernel_us for c in same) / n,
             "mean_us": sum(c.kernel_us for c in same) / len(same)}
            for (coll, dtype, nbytes, algorithm, protocol), same in groups.items()]
    columns = ["collective", "dtype", "bytes", "algorithm", "protocol", "per_step", "us_per_step", "mean_us"]
    return pd.DataFrame(rows, columns=columns).sort_values("us_per_step", ascending=False, ignore_index=True)
