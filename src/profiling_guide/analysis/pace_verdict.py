"""The pace verdict a chapter states: profiler off first, then what the trace's idle time waited for.

The profiler slows the CPU and not the GPU, so who sets the pace is decided
from measurements taken with it off: the host's time to issue one call
against the device's time to run it, each a median with its spread
(:mod:`profiling_guide.spread`). A variant is measured on several pages of
one GPU; its verdict there pools them all (:func:`pooled_bound`), so every
page says the same thing about the same variant. The trace, profiler on, then
says where the GPU sat idle and what it waited for (:mod:`.gaps`).

Everything here is data; the sentences are composed in
:mod:`profiling_guide.pages.verdicts`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from profiling_guide.analysis.gaps import Gaps, gaps_of
from profiling_guide.errors import GuideError
from profiling_guide.spread import Spread, compare
from profiling_guide.trace.model import Trace


class Bound(enum.Enum):
    """Who sets the pace with the profiler off."""

    DEVICE = "device-bound"  # the host issues faster than the device runs: the GPU sets the pace
    OVERHEAD = "overhead-bound"  # the host takes longer to issue than the device to run: the CPU sets it
    TIE = "tie"  # inside the spreads, or the measurements disagree: neither clearly does


@dataclass(frozen=True)
class Measurement:
    """One profiler-off measurement of a variant: host µs to issue a call, device µs to run it."""

    source: str  # where it was taken, e.g. the recording "03_mlp_compile.compiled"
    cpu_issue: Spread
    device: Spread
    device_from_trace: bool = False  # device time read from the profiled steps' busy time, not timed apart

    @property
    def bound(self) -> Bound:
        return {"faster": Bound.DEVICE, "slower": Bound.OVERHEAD, "tie": Bound.TIE}[compare(self.cpu_issue,
                                                                                            self.device)]


def pooled_bound(measurements: Sequence[Measurement]) -> Bound:
    """The verdict every measurement gives, or :attr:`Bound.TIE` when they disagree (or there are none)."""
    bounds = {m.bound for m in measurements}
    return bounds.pop() if len(bounds) == 1 else Bound.TIE


@dataclass(frozen=True)
class PaceVerdict:
    """A variant's pace on one GPU (profiler off, pooled), and its trace's idle time (profiler on)."""

    bound: Bound
    measurements: tuple[Measurement, ...]
    gaps: Gaps  # of the trace the page shows

    @property
    def agree(self) -> bool:
        """Whether every measurement gives the same verdict."""
        return len({m.bound for m in self.measurements}) <= 1


def pace_verdict(measurements: Sequence[Measurement], trace: Trace) -> PaceVerdict:
    """The verdict of ``measurements`` (one variant on one GPU) with the idle time of ``trace``."""
    if not measurements:
        raise GuideError("a pace verdict needs at least one profiler-off measurement: record the timings")
    return PaceVerdict(pooled_bound(measurements), tuple(measurements), gaps_of(trace))
