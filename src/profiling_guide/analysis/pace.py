"""Who sets the pace: the CPU issuing work, or the GPU doing it? Decided from a trace.

When the GPU sets the pace, the CPU runs ahead: launches queue up, each kernel
waits longer after its launch than the one before (the launch→start delay
grows along the step), and the GPU runs its work back to back. When the CPU
sets it (*overhead-bound*), each kernel starts soon after its launch, the
delays stay flat, and the GPU sits idle between kernels waiting for the next.

:func:`summarize_step` reduces one step to those numbers, :func:`verdict`
decides, and :func:`pace` says it with the evidence, for ``profiling-guide
report`` and for every chapter (:func:`pace_of`, a trace's profiled steps).
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
    """Who sets the pace over the trace's steps, and why the report says so."""

    verdict: str  # "GPU", "CPU", "mixed", "collectives" or "no GPU work"
    headline: str
    evidence: list[str]

    @property
    def bound(self) -> str:
        """``"device-bound"``, ``"overhead-bound"``, ``"mixed"``, ``"communication-bound"`` or ``"no GPU work"``."""
        return WORDS[self.verdict]

    def __str__(self) -> str:
        return " ".join([self.headline, *self.evidence])


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


def fmt_us(us: float) -> str:
    """A duration for prose: ``"253.0 µs"``, ``"273.8 ms"``, ``"43.4 s"``."""
    if abs(us) >= 1e6:
        return f"{us / 1e6:,.1f} s"
    if abs(us) >= 1e4:
        return f"{us / 1e3:,.1f} ms"
    return f"{us:,.1f} µs"


def pace(summaries: list[StepSummary], *, unprofiled_cpu_us: float | None = None,
         ranks: tuple[int, int] | None = None, comm_rule: bool = True) -> Pace:
    """Who sets the pace over all ``summaries`` (:func:`verdict` on their pooled numbers), with the evidence.

    The profiler slows the CPU, never the GPU: given the CPU time of a step
    measured without it (``unprofiled_cpu_us``), a CPU verdict that the
    unprofiled run would not share says so. ``ranks`` is ``(rank, world
    size)`` of a trace of one rank of a distributed job, read alone: where it
    spent time in collectives, the verdict says that only the other ranks'
    traces can tell which rank it waited for. ``comm_rule=False`` leaves out
    the "collectives" verdict (for a rank known not to be waiting in them):
    the verdict is then of its own work, exposed communication counted as idle.
    """
    window = sum(s.window_us for s in summaries)
    busy = sum(s.device_busy_us for s in summaries)
    span = sum(s.gpu_span_us for s in summaries)
    n = len(summaries)
    if not busy:
        return Pace("no GPU work", "No GPU work was recorded: the trace is CPU only, so the CPU sets the pace.",
                    [f"{n} step(s), {sum(s.cpu_ops for s in summaries)} CPU ops, no device events."])
    share = busy / window if window else 0.0
    idle = sum(s.gpu_idle_fraction * s.gpu_span_us for s in summaries) / span if span else 0.0
    evidence = [
        f"The GPU was busy {share:.0%} of the steps' time ({fmt_us(busy / n)} of {fmt_us(window / n)} per step, "
        "from the step's start to its last device work).",
        f"Between its first and last device event of a step the GPU sat idle {idle:.0%} of the time.",
    ]
    delays = [s.delay_us for s in summaries if s.delay_us is not None]
    delay = statistics.median(delays) if delays else None
    starts = [s.delay_start_us for s in summaries if s.delay_start_us is not None]
    ends = [s.delay_end_us for s in summaries if s.delay_end_us is not None]
    grows = bool(starts) and _grows(statistics.median(starts), statistics.median(ends))
    if delay is not None:
        line = f"Work waited {fmt_us(delay)} (median) between its launch and its start on the GPU"
        if starts:
            first, last = fmt_us(statistics.median(starts)), fmt_us(statistics.median(ends))
            line += (f"; the wait {'grows' if grows else 'does not grow'} along the step (it grows when the "
                     f"last third's exceeds 1.5× the first third's plus 2 µs): {first} for the first third of "
                     f"launches, {last} for the last")
        evidence.append(line + ".")
    sync = sum(s.sync_us for s in summaries) / n
    if sync:
        evidence.append(f"The CPU waited {fmt_us(sync)} per step in synchronizing calls "
                        "(cudaDeviceSynchronize, cudaStreamSynchronize, blocking copies).")
    comm = sum(s.comm_us for s in summaries)
    exposed = sum(s.exposed_comm_us for s in summaries)
    if comm:
        line = (f"Collective (NCCL) kernels ran {fmt_us(comm / n)} per step, during {comm / busy:.0%} of the GPU's "
                f"busy time; {fmt_us(exposed / n)} of it with no compute kernel beside it (exposed)")
        if ranks is not None:
            line += (f". Part of it is waiting for other ranks: this is rank {ranks[0]} of {ranks[1]}, and only the "
                     "other ranks' traces can say how much, and for whom")
        evidence.append(line + ".")
    work_share, work_idle = _without_exposed_comm(busy, window, idle, span, exposed)
    who = verdict(work_share, work_idle, delay, grows, comm_share=comm / busy if comm_rule else 0.0)
    if who == "GPU":
        headline = ("The GPU sets the pace: it ran its work back to back while more waited in its queue; the CPU "
                    "issued work faster than the GPU ran it. Faster kernels, or fewer, would help.")
    elif who == "collectives":
        headline = (f"Collectives set the pace: NCCL kernels ran during {comm / busy:.0%} of the time this GPU was "
                    f"busy ({fmt_us(comm / n)} of {fmt_us(busy / n)} per step), {fmt_us(exposed / n)} of it with no "
                    "compute beside it. A collective's kernel runs until every rank of its group has arrived, so "
                    "that time is the transfer plus waiting for the other ranks: faster kernels here would not "
                    "shorten it.")
        if ranks is not None:
            headline += (f" This trace is rank {ranks[0]} of {ranks[1]}: the other ranks' traces say which rank it "
                         "waited for (profiling-guide report with all of them).")
    elif who == "CPU":
        headline = (f"The CPU sets the pace: the GPU was idle {1 - share:.0%} of the time, waiting for work. Less "
                    "Python and fewer launches per step (torch.compile, CUDA graphs, larger batches) would help "
                    "more than faster kernels.")
    elif delay is not None and delay > QUEUED_US and idle >= BACK_TO_BACK:
        headline = (f"Neither side clearly sets the pace: work waited {fmt_us(delay)} in the queue although the GPU "
                    f"sat idle {idle:.0%} of its span, so it waited on something else: another stream, a "
                    "collective, a synchronizing copy. Look at the timeline for the gaps.")
    else:
        headline = (f"Neither side clearly sets the pace: the GPU was busy {share:.0%} of the time. Look at the "
                    "timeline for the gaps.")
    if who != "GPU" and unprofiled_cpu_us and unprofiled_cpu_us < busy / n:
        headline += (f" Without the profiler, though, the CPU issued a step in {fmt_us(unprofiled_cpu_us)} (run "
                     f"record), less than the {fmt_us(busy / n)} of GPU work: unprofiled, the GPU sets the pace.")
    return Pace(who, headline, evidence)


def pace_of(trace: Trace) -> Pace:
    """:func:`pace` over the profiled steps of ``trace`` (a chapter's recording)."""
    return pace([summarize_step(step) for step in trace.steps])


def unprofiled_bound(cpu_issue, device) -> str:
    """Who sets the pace of calls issued one at a time, profiler off: from CPU issue time against device time.

    ``"device-bound"`` when issuing is shorter than running (the CPU runs ahead),
    ``"overhead-bound"`` when it is longer, ``"tie"`` inside the spreads.
    """
    from profiling_guide.spread import compare

    return {"faster": WORDS["GPU"], "slower": WORDS["CPU"], "tie": "tie"}[compare(cpu_issue, device)]
