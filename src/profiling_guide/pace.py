"""Who sets the pace: the CPU issuing work, or the GPU doing it? Decided from a trace.

When the GPU sets the pace, the CPU runs ahead: launches queue up, each kernel
waits longer after its launch than the one before (the launch→start delay
grows along the step), and the GPU is busy from its first kernel to its last.
When the CPU sets it (*overhead-bound*), each kernel starts soon after its
launch, the delays stay flat, and the GPU sits idle between kernels waiting
for the next one.

:func:`pace` measures both in every profiled step and calls the step
device-bound when the GPU was busy for at least :data:`BUSY_DEVICE_BOUND` of
the window from the step's first launch to its last device event. Under the
profiler the CPU is slower than without it, so :func:`pace_unprofiled` adds
the verdict of the profiler-off measurements (CPU issue time against device
time) beside it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .errors import GuideError

BUSY_DEVICE_BOUND = 0.9  # GPU busy this much of the window from the first launch: the GPU sets the pace


@dataclass(frozen=True)
class Pace:
    """The evidence of one trace, as medians over its steps."""

    verdict: str  # "device-bound" | "overhead-bound"
    busy_fraction: float  # GPU busy / (first launch → last device end)
    idle_us: float  # GPU idle between its first and last device event
    first_delay_us: float  # launch → start of the step's first device event
    last_delay_us: float  # launch → start of its last
    steps: int

    @property
    def delay_growth_us(self) -> float:
        return self.last_delay_us - self.first_delay_us

    def evidence(self) -> str:
        grows = "grows" if self.delay_growth_us > 1.0 else "stays flat"
        return (f"{self.verdict} under the profiler: the launch→start delay {grows} along the step "
                f"({self.first_delay_us:.1f} µs for the first kernel, {self.last_delay_us:.1f} µs for the last), "
                f"the GPU is busy {100 * self.busy_fraction:.0f}% of the time from the first launch to the last "
                f"kernel's end and idle {self.idle_us:.1f} µs between kernels (medians over {self.steps} steps)")

    def __str__(self) -> str:
        return self.evidence()


def _busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``intervals`` (several streams may overlap)."""
    busy, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        busy += stop - max(start, end)
        end = stop
    return busy


def pace(trace) -> Pace:
    """The pace of the profiled steps of ``trace`` (a :class:`~profiling_guide.trace.Trace`)."""
    busy_fractions, idles, firsts, lasts = [], [], [], []
    for step in trace.steps:
        work = sorted((ev for ev in step.device_events if ev.launch is not None), key=lambda ev: ev.start_us)
        if not work:
            continue
        intervals = [(ev.start_us, ev.end_us) for ev in work]
        busy = _busy_us(intervals)
        window = max(ev.end_us for ev in work) - min(ev.launch.start_us for ev in work)
        span = max(ev.end_us for ev in work) - work[0].start_us
        busy_fractions.append(busy / window if window > 0 else 1.0)
        idles.append(max(span - busy, 0.0))
        firsts.append(work[0].start_us - work[0].launch.start_us)
        lasts.append(work[-1].start_us - work[-1].launch.start_us)
    if not busy_fractions:
        raise GuideError(f"{trace.source}: no profiled step launched device work: nothing to pace")
    busy = statistics.median(busy_fractions)
    return Pace("device-bound" if busy >= BUSY_DEVICE_BOUND else "overhead-bound", busy,
                statistics.median(idles), statistics.median(firsts), statistics.median(lasts), len(busy_fractions))


def pace_unprofiled(cpu_issue, device) -> str:
    """One sentence from profiler-off spreads: CPU issue time against device time per call."""
    from .measure import compare

    verdict = compare(cpu_issue, device)
    if verdict == "slower":
        return (f"Without the profiler, issuing one call costs the CPU {cpu_issue:.1f} µs and the GPU needs "
                f"{device:.1f} µs: called one at a time, the CPU sets the pace (overhead-bound).")
    if verdict == "faster":
        return (f"Without the profiler, issuing one call costs the CPU {cpu_issue:.1f} µs and the GPU needs "
                f"{device:.1f} µs: the CPU runs ahead and the GPU sets the pace (device-bound).")
    return (f"Without the profiler, issuing one call costs the CPU {cpu_issue:.1f} µs and the GPU needs "
            f"{device:.1f} µs: the two are within each other's spread, so neither clearly sets the pace.")
