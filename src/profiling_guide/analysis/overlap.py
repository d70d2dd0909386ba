"""Where a GPU's time went: computing, communicating, both at once, or idle.

:func:`time_breakdown` sweeps the device events of a step (or of any set of
them) once, in time order, and measures the time covered by

* **compute**: at least one kernel that is not communication (GEMMs,
  pointwise, reductions, attention ...), on any stream;
* **communication**: at least one collective kernel (NCCL's; decoded as kind
  ``"collective"``);
* **overlap**: both at once: communication hidden behind compute;
* **exposed communication**: communication with no compute beside it, the
  part of it a step waits for;
* **idle**: nothing at all, between the first event's start and the last
  event's end (the *span*).

These are HolisticTraceAnalysis's definitions (its temporal breakdown:
compute and idle time; its comm/comp overlap: overlap over communication
time), with memsets and memcpys counted as neither compute nor
communication, as HTA counts them. One difference, on purpose: the report
measures each profiler step over its own span (the work launched in that
step), where HTA measures one span from the first kernel of the trace to the
last, so the gaps between steps count as idle there and not here.
:func:`time_breakdown` over all steps' events at once gives HTA's numbers;
the tests check that it does.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from profiling_guide.trace.model import DeviceEvent

_COMPUTE, _COMM, _MEMORY = 0, 1, 2


@dataclass(frozen=True)
class TimeBreakdown:
    """A device's time over one span, µs (see the module docstring)."""

    span_us: float
    busy_us: float
    compute_us: float
    comm_us: float
    overlap_us: float
    comm_kernels_us: float  # summed durations of the collective kernels (they may overlap each other)

    @property
    def exposed_comm_us(self) -> float:
        return self.comm_us - self.overlap_us

    @property
    def idle_us(self) -> float:
        return self.span_us - self.busy_us

    @property
    def other_us(self) -> float:
        """Busy with neither compute nor communication: memsets and memcpys alone."""
        return self.busy_us - self.compute_us - self.exposed_comm_us

    @property
    def overlap_share(self) -> float:
        """The share of communication time hidden behind compute (HTA's comm/comp overlap)."""
        return self.overlap_us / self.comm_us if self.comm_us else 0.0

    @property
    def comm_share(self) -> float:
        """The share of the device's busy time with a collective kernel running."""
        return self.comm_us / self.busy_us if self.busy_us else 0.0


def event_class(ev: DeviceEvent) -> int:
    if ev.kind != "kernel":
        return _MEMORY
    return _COMM if ev.decoded.kind == "collective" else _COMPUTE


def time_breakdown(events: list[DeviceEvent]) -> TimeBreakdown:
    """Compute, communication, their overlap and idle time over ``events``' span (one sort, one sweep)."""
    edges = []
    comm_kernels = 0.0
    for ev in events:
        if ev.dur_us <= 0:
            continue
        cls = event_class(ev)
        if cls == _COMM:
            comm_kernels += ev.dur_us
        edges.append((ev.start_us, 1, cls))
        edges.append((ev.end_us, -1, cls))
    if not edges:
        return TimeBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    edges.sort(key=lambda e: (e[0], e[1]))  # at one instant, ends before starts
    open_ = [0, 0, 0]
    busy = compute = comm = overlap = 0.0
    last = edges[0][0]
    for t, delta, cls in edges:
        dt = t - last
        if dt > 0:
            if open_[_COMPUTE]:
                compute += dt
            if open_[_COMM]:
                comm += dt
                if open_[_COMPUTE]:
                    overlap += dt
            if open_[0] or open_[1] or open_[2]:
                busy += dt
        open_[cls] += delta
        last = t
    span = edges[-1][0] - edges[0][0]
    return TimeBreakdown(span, busy, compute, comm, overlap, comm_kernels)


def merged(intervals) -> list[tuple[float, float]]:
    """Intervals merged where they overlap, in order."""
    out: list[list[float]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def collective_exposure(events: list[DeviceEvent]) -> list[tuple[DeviceEvent, float]]:
    """Each collective kernel of ``events`` in start order, with the µs of it that compute ran beside (hidden).

    The rest of its duration is exposed: no compute kernel ran on any stream
    meanwhile. Summed over a step's kernels, the exposed parts can exceed the
    step's exposed communication where collectives overlap one another.
    """
    compute = merged([(ev.start_us, ev.end_us) for ev in events if ev.dur_us > 0 and event_class(ev) == _COMPUTE])
    starts = [lo for lo, _ in compute]
    out = []
    for ev in sorted((e for e in events if event_class(e) == _COMM), key=lambda e: e.start_us):
        hidden = 0.0
        i = max(bisect.bisect_right(starts, ev.start_us) - 1, 0)
        while i < len(compute) and compute[i][0] < ev.end_us:
            hidden += max(0.0, min(ev.end_us, compute[i][1]) - max(ev.start_us, compute[i][0]))
            i += 1
        out.append((ev, hidden))
    return out
