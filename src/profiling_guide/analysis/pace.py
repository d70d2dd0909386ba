"""Who sets the pace: the CPU issuing work, or the GPU doing it? Decided from a trace.

When the GPU sets the pace, the CPU runs ahead: launches queue up, each kernel
waits longer after its launch than the one before (the launch→start delay
grows along the step), and the GPU runs its work back to back. When the CPU
sets it (*overhead-bound*), each kernel starts soon after its launch, the
delays stay flat, and the GPU sits idle between kernels waiting for the next.

:func:`summarize_step` reduces one step to those numbers, :func:`verdict`
decides, and :func:`pace` pools the steps into a :class:`Pace`: the verdict
and the numbers behind it, for ``profiling-guide report`` and for every
chapter (:func:`pace_of`, a trace's profiled steps). The sentences that state
it are :mod:`profiling_guide.pages.pace_sentences`'.
Under the profiler the CPU is slower than without it, so
:func:`unprofiled_bound` gives the verdict of the profiler-off measurements (CPU
issue time against device time); the chapters state that one, pooled over
their pages (:mod:`profiling_guide.analysis.pace_verdict`).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from profiling_guide.analysis.overlap import time_breakdown
from profiling_guide.spread import compare
from profiling_guide.trace.model import DeviceEvent, Step, Trace

_SYNC_CALLS = re.compile(r"Synchronize|^cudaMemcpy$|^cuMemcpy[DH]to[DH]")
# The pace verdict's thresholds (see :func:`verdict`).
GPU_BOUND_BUSY, CPU_BOUND_BUSY = 0.8, 0.5  # device busy share of the step's window
BACK_TO_BACK = 0.1  # idle share of the GPU's span below which it ran its work back to back
QUEUED_US = 50.0  # a median launch→start delay above this is work waiting in a queue, not launch latency
COMM_BOUND = 0.5  # share of the GPU's busy time in collective kernels from which a rank is said to wait in them

# What the chapters call each verdict.
WORDS = {"GPU": "device-bound", "CPU": "overhead-bound", "mixed": "mixed", "no GPU work": "no GPU work",
         "collectives": "communication-bound"}


@dataclass
class StepSummary:
    """One step of the trace, reduced to the numbers the pace verdict reads."""

    number: int
    cpu_us: float  # the ProfilerStep's duration on the CPU
    device_busy_us: float  # union of all device work launched in the step, over every stream
    window_us: float  # step start to the later of its CPU end and its last device event's end
    gpu_span_us: float  # first device event's start to last device event's end
    gpu_idle_fraction: float  # idle share of gpu_span_us
    kernels: int
    launches: int
    cpu_ops: int
    sync_us: float  # CPU time spent in synchronizing runtime calls
    delay_us: float | None  # median launch→start delay (first device event of each launch)
    delay_start_us: float | None  # ... of the first third of launches
    delay_end_us: float | None  # ... and of the last third
    verdict: str  # "GPU", "CPU", "mixed", "collectives" or "no GPU work"
    comm_us: float = 0.0  # time with a collective (NCCL) kernel running
    exposed_comm_us: float = 0.0  # ... and no compute kernel beside it

    @property
    def busy_share(self) -> float:
        """Share of the step's window the device was busy."""
        return self.device_busy_us / self.window_us if self.window_us > 0 else 0.0


@dataclass
class Pace:
    """Who sets the pace over the trace's steps, and the numbers that decide it.

    Times are means per step; ``idle`` is the share of the GPU's span (first to
    last device event of a step) it sat idle.
    """

    verdict: str  # "GPU", "CPU", "mixed", "collectives" or "no GPU work"
    steps: int
    cpu_ops: int  # recorded CPU ops, over all the steps
    busy_us: float = 0.0  # the device busy, from the step's start to its last device work
    window_us: float = 0.0  # the step's start to the later of its CPU end and its last device work's end
    idle: float = 0.0
    delay_us: float | None = None  # median launch→start delay
    delay_first_us: float | None = None  # ... of the first third of launches
    delay_last_us: float | None = None  # ... and of the last third
    delay_grows: bool = False  # the last third's exceeds 1.5× the first third's plus 2 µs
    sync_us: float = 0.0  # CPU time in synchronizing calls
    comm_us: float = 0.0  # time with a collective (NCCL) kernel running
    exposed_comm_us: float = 0.0  # ... and no compute kernel beside it
    #: ``(rank, world size)`` of a trace of one rank of a distributed job, read alone
    rank: tuple[int, int] | None = None
    unprofiled_cpu_us: float | None = None  # the CPU's time to issue a step without the profiler (run record)

    @property
    def bound(self) -> str:
        """``"device-bound"``, ``"overhead-bound"``, ``"mixed"``, ``"communication-bound"`` or ``"no GPU work"``."""
        return WORDS[self.verdict]

    @property
    def share(self) -> float:
        """Share of the steps' window the device was busy."""
        return self.busy_us / self.window_us if self.window_us else 0.0

    @property
    def comm_share(self) -> float:
        """Share of the device's busy time with a collective kernel running."""
        return self.comm_us / self.busy_us if self.busy_us else 0.0

    @property
    def queued_while_idle(self) -> bool:
        """Work waited in the queue while the GPU sat idle: it waited on something else than the GPU."""
        return self.delay_us is not None and self.delay_us > QUEUED_US and self.idle >= BACK_TO_BACK

    @property
    def gpu_bound_unprofiled(self) -> bool:
        """Not GPU-bound under the profiler, yet without it the CPU issued a step faster than the GPU ran it."""
        return self.verdict != "GPU" and bool(self.unprofiled_cpu_us) and self.unprofiled_cpu_us < self.busy_us


def _union_us(events: list[DeviceEvent], lo: float, hi: float) -> float:
    """Time in [lo, hi] covered by at least one event (events overlap across streams)."""
    total, cur_start, cur_end = 0.0, None, None
    for ev in sorted(events, key=lambda e: e.start_us):
        s, e = max(ev.start_us, lo), min(ev.end_us, hi)
        if e <= s:
            continue
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def _first_event_per_launch(step: Step) -> list[DeviceEvent]:
    # A CUDA-graph launch starts many kernels with one call; only its first says how long work queued.
    seen, firsts = set(), []
    for ev in step.device_events:
        if ev.launch is not None and id(ev.launch) not in seen:
            seen.add(id(ev.launch))
            firsts.append(ev)
    return sorted(firsts, key=lambda e: e.launch.start_us)


def summarize_step(step: Step) -> StepSummary:
    """The pace numbers of one step (see :class:`StepSummary`)."""
    events = step.device_events
    firsts = _first_event_per_launch(step)
    delays = [ev.start_us - ev.launch.start_us for ev in firsts]
    third = len(delays) // 3
    sync_us = sum(c.dur_us for c in step.runtime_calls if _SYNC_CALLS.search(c.name))
    if events:
        first, last = min(e.start_us for e in events), max(e.end_us for e in events)
        window_end = max(step.end_us, last)
        busy = _union_us(events, step.start_us, window_end)
        span = last - first
        idle = 1 - _union_us(events, first, last) / span if span > 0 else 0.0
        parts = time_breakdown(events)
        comm, exposed = parts.comm_us, parts.exposed_comm_us
    else:
        window_end, busy, span, idle, comm, exposed = step.end_us, 0.0, 0.0, 0.0, 0.0, 0.0
    window = window_end - step.start_us
    summary = StepSummary(
        number=step.number, cpu_us=step.dur_us, device_busy_us=busy, window_us=window, gpu_span_us=span,
        gpu_idle_fraction=idle, kernels=sum(1 for e in events if e.kind == "kernel"), launches=len(firsts),
        cpu_ops=sum(1 for op in step.ops if not op.annotation), sync_us=sync_us,
        delay_us=statistics.median(delays) if delays else None,
        delay_start_us=statistics.median(delays[:third]) if third else None,
        delay_end_us=statistics.median(delays[-third:]) if third else None, verdict="", comm_us=comm,
        exposed_comm_us=exposed,
    )
    work_share, work_idle = _without_exposed_comm(busy, window, idle, span, exposed)
    summary.verdict = verdict(work_share, work_idle, summary.delay_us,
                              _grows(summary.delay_start_us, summary.delay_end_us), bool(events),
                              comm_share=comm / busy if busy else 0.0)
    return summary


def _without_exposed_comm(busy: float, window: float, idle: float, span: float, exposed: float) -> tuple:
    """The busy share of the window and the idle share of the span, counting exposed communication as idle.

    A collective's kernel with no compute beside it keeps the GPU "busy" while
    it waits for other ranks or for the links: for who sets the pace, that
    time is waiting, not work.
    """
    share = (busy - exposed) / window if window > 0 else 0.0
    idle_share = idle + exposed / span if span > 0 else idle
    return share, min(idle_share, 1.0)


def _grows(start: float | None, end: float | None) -> bool:
    return start is not None and end is not None and end > 1.5 * start + 2


def verdict(busy_share: float, idle_in_span: float, delay_us: float | None, delay_grows: bool,
            any_work: bool = True, comm_share: float = 0.0) -> str:
    """``"GPU"``, ``"CPU"``, ``"mixed"``, ``"collectives"`` or ``"no GPU work"``: who sets the pace.

    * **collectives**: collective (NCCL) kernels ran during at least
      ``COMM_BOUND`` of the GPU's busy time (``comm_share``). Such a kernel
      runs until every rank of its group arrives: that time is transfers and
      waiting for other ranks, and faster kernels on this rank would not
      shorten it. This is decided first, so a rank is never called
      GPU-bound on the strength of time spent in communication.

    * **GPU**: the GPU ran its work back to back (idle less than
      ``BACK_TO_BACK`` of its span) while work waited in its queue (median
      launch→start delay over ``QUEUED_US``, or growing along the step); or it
      was busy ``GPU_BOUND_BUSY`` of the step. The CPU is ahead: faster or
      fewer kernels would help.
    * **CPU**: otherwise, a GPU busy less than ``CPU_BOUND_BUSY`` of the step
      whose work did not queue waited for work: Python, dispatch, launches or
      synchronization. (Work that queued while the GPU idled waited on
      something else, another stream or a collective: that is "mixed", unless
      the GPU was almost never busy.)

    The busy share alone misleads when the CPU runs a whole step ahead: the
    GPU is then still busy with the previous step's work as the step starts,
    which is why the queue is asked first.

    Pass ``busy_share`` and ``idle_in_span`` with exposed communication (a
    collective kernel with no compute beside it) counted as idle, as
    :func:`summarize_step` does: it is waiting, not work.
    """
    if not any_work:
        return "no GPU work"
    if comm_share >= COMM_BOUND:
        return "collectives"
    queued = delay_us is not None and (delay_us > QUEUED_US or delay_grows)
    if (idle_in_span < BACK_TO_BACK and queued) or busy_share >= GPU_BOUND_BUSY:
        return "GPU"
    if busy_share < CPU_BOUND_BUSY and (not queued or busy_share < CPU_BOUND_BUSY / 2.5):
        return "CPU"
    return "mixed"


def pace(summaries: list[StepSummary], *, unprofiled_cpu_us: float | None = None,
         ranks: tuple[int, int] | None = None, comm_rule: bool = True) -> Pace:
    """Who sets the pace over all ``summaries`` (:func:`verdict` on their pooled numbers), with those numbers.

    The profiler slows the CPU, never the GPU: ``unprofiled_cpu_us`` is the
    CPU time of a step measured without it, kept for the sentence that says
    whether the unprofiled run shares a CPU verdict. ``ranks`` is ``(rank,
    world size)`` of a trace of one rank of a distributed job, read alone.
    ``comm_rule=False`` leaves out the "collectives" verdict (for a rank known
    not to be waiting in them): the verdict is then of its own work, exposed
    communication counted as idle.
    """
    n = len(summaries)
    window = sum(s.window_us for s in summaries)
    busy = sum(s.device_busy_us for s in summaries)
    span = sum(s.gpu_span_us for s in summaries)
    cpu_ops = sum(s.cpu_ops for s in summaries)
    if not busy:
        return Pace("no GPU work", n, cpu_ops, rank=ranks, unprofiled_cpu_us=unprofiled_cpu_us)
    idle = sum(s.gpu_idle_fraction * s.gpu_span_us for s in summaries) / span if span else 0.0
    delay, first, last, grows = _pooled_delays(summaries)
    comm = sum(s.comm_us for s in summaries)
    exposed = sum(s.exposed_comm_us for s in summaries)
    found = Pace("", n, cpu_ops, busy_us=busy / n, window_us=window / n, idle=idle,
                 delay_us=delay, delay_first_us=first, delay_last_us=last,
                 delay_grows=grows, sync_us=sum(s.sync_us for s in summaries) / n,
                 comm_us=comm / n, exposed_comm_us=exposed / n, rank=ranks, unprofiled_cpu_us=unprofiled_cpu_us)
    work_share, work_idle = _without_exposed_comm(busy, window, idle, span, exposed)
    found.verdict = verdict(work_share, work_idle, found.delay_us, found.delay_grows,
                            comm_share=found.comm_share if comm_rule else 0.0)
    return found


def _pooled_delays(summaries: list[StepSummary]) -> tuple[float | None, float | None, float | None, bool]:
    """The median launch→start delay over the steps, the medians of its first and last, and whether it grows."""
    delays = [s.delay_us for s in summaries if s.delay_us is not None]
    starts = [s.delay_start_us for s in summaries if s.delay_start_us is not None]
    ends = [s.delay_end_us for s in summaries if s.delay_end_us is not None]
    first, last = (statistics.median(starts), statistics.median(ends)) if starts else (None, None)
    return (statistics.median(delays) if delays else None), first, last, bool(starts) and _grows(first, last)


def pace_of(trace: Trace) -> Pace:
    """:func:`pace` over the profiled steps of ``trace`` (a chapter's recording)."""
    return pace([summarize_step(step) for step in trace.steps])


def unprofiled_bound(cpu_issue, device) -> str:
    """Who sets the pace of calls issued one at a time, profiler off: from CPU issue time against device time.

    ``"device-bound"`` when issuing is shorter than running (the CPU runs ahead),
    ``"overhead-bound"`` when it is longer, ``"tie"`` inside the spreads.
    """
    return {"faster": WORDS["GPU"], "slower": WORDS["CPU"], "tie": "tie"}[compare(cpu_issue, device)]
