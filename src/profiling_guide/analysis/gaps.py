"""Where the GPU sat idle in a profiled step, and what it waited for. Decided from the trace.

Each idle interval of a step's window (from the step's start to its last
device work, every stream counted) ends when the next device event starts.
The launch of that event says what the GPU waited for:

* **host**: the launch call was still running (or had not begun) when the
  GPU went idle, and no synchronizing call emptied the queue just before:
  the host was still issuing (Python, dispatch, the launch itself). Includes
  the wait from the step's start to its first device work.
* **sync**: the launch came after the GPU had gone idle, and the host had
  just returned from a synchronizing call (``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, a blocking copy): the queue was emptied on
  purpose and the host had to fill it again.
* **queued**: the work was launched before the GPU went idle and still
  waited: on another stream, an event, or a collective's peer.

Device time in collective (NCCL) kernels that no other kernel overlaps is
counted apart as **collective**: such a kernel's duration includes the time
it waits for its peers, so the GPU is not computing then either.

:func:`step_gaps` reduces one step; :func:`gaps_of` a trace's profiled steps.
"""

from __future__ import annotations

import bisect
import enum
import re
from dataclasses import dataclass

from profiling_guide.trace.model import DeviceEvent, Step, Trace

SYNC_CALLS = re.compile(r"Synchronize|^cudaMemcpy$|^cuMemcpy[DH]to[DH]")  # as the pace verdict reads them
COLLECTIVE_KERNEL = re.compile(r"^nccl")  # NCCL's collectives: ncclDevKernel_..., ncclKernel_...
# A launch that starts this close after the GPU went idle counts as late: timestamps of the host and the
# device come from different clocks, aligned to about a microsecond.
CLOCK_SLACK_US = 1.0


class Cause(enum.Enum):
    """What the GPU waited for while idle."""

    HOST = "host"
    SYNC = "sync"
    QUEUED = "queued"
    COLLECTIVE = "collective"


@dataclass(frozen=True)
class Gaps:
    """The GPU's idle time per step, split by what it waited for (µs per step, means over the steps)."""

    steps: int
    step_us: float  # the profiler step's length (its CPU span)
    last_device_us: float  # from the step's start to the end of its last device work
    window_us: float  # step start to the later of the step's end and its last device work
    busy_us: float  # time the device ran something other than a collective, every stream counted once
    idle_us: dict[Cause, float]  # per cause; sums to window_us - busy_us, plus collective time
    sync_call_us: float  # host time inside synchronizing calls (the GPU may be busy meanwhile)
    end_sync_us: float  # of which the step's last synchronizing call (a loop's torch.cuda.synchronize())

    @property
    def main(self) -> Cause | None:
        """The cause with the most idle time, or None when the GPU never idled."""
        cause, us = max(self.idle_us.items(), key=lambda kv: kv[1], default=(None, 0.0))
        return cause if us > 0 else None

    @property
    def total_idle_us(self) -> float:
        return sum(self.idle_us.values())


def _merged(events: list[DeviceEvent], lo: float, hi: float) -> list[tuple[float, float]]:
    """The busy intervals of ``events`` clipped to [lo, hi], overlaps merged."""
    out: list[list[float]] = []
    for ev in sorted(events, key=lambda e: e.start_us):
        s, e = max(ev.start_us, lo), min(ev.end_us, hi)
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def step_gaps(step: Step) -> Gaps:
    """The idle time of one step's window, attributed (see the module docstring)."""
    events = step.device_events
    syncs = sorted((c for c in step.runtime_calls if SYNC_CALLS.search(c.name)), key=lambda c: c.start_us)
    sync_us = sum(c.dur_us for c in syncs)
    end_sync = syncs[-1].dur_us if syncs else 0.0
    idle = dict.fromkeys(Cause, 0.0)
    if not events:
        return Gaps(1, step.dur_us, 0.0, step.dur_us, 0.0, idle, sync_us, end_sync)
    lo, hi = step.start_us, max(step.end_us, max(e.end_us for e in events))
    compute = [e for e in events if not COLLECTIVE_KERNEL.search(e.name)]
    busy = _merged(events, lo, hi)
    compute_busy = _merged(compute, lo, hi)
    idle[Cause.COLLECTIVE] = _length(busy) - _length(compute_busy)
    starts = sorted(events, key=lambda e: e.start_us)
    start_times = [e.start_us for e in starts]
    last_device_end = max(e.end_us for e in events)
    gap_start = lo
    for s, e in busy + [(hi, hi)]:
        if s > gap_start:
            if gap_start >= last_device_end:  # after the last device work: the host's own tail
                idle[Cause.HOST] += s - gap_start
            else:
                nxt = starts[min(bisect.bisect_left(start_times, s - 1e-6), len(starts) - 1)]
                idle[_cause(gap_start, nxt, syncs)] += s - gap_start
        gap_start = max(gap_start, e)
    return Gaps(1, step.dur_us, last_device_end - lo, hi - lo, _length(compute_busy), idle, sync_us, end_sync)


def _cause(gap_start: float, nxt: DeviceEvent, syncs) -> Cause:
    """What the GPU, idle from ``gap_start``, waited for: the launch of ``nxt``, the work that ended the gap."""
    launch = nxt.launch
    if launch is None:
        return Cause.HOST
    if launch.end_us < gap_start - CLOCK_SLACK_US:  # issued before the GPU went idle, and still it waited
        return Cause.QUEUED
    # launched late: did a synchronizing call empty the queue just before the GPU went idle?
    emptied = any(c.start_us <= gap_start + CLOCK_SLACK_US and c.end_us >= gap_start - CLOCK_SLACK_US
                  and c.end_us <= launch.start_us for c in syncs)
    return Cause.SYNC if emptied else Cause.HOST


def gaps_of(trace: Trace) -> Gaps:
    """:func:`step_gaps` averaged over the trace's profiled steps."""
    per_step = [step_gaps(s) for s in trace.steps]
    n = len(per_step)
    if not n:
        return Gaps(0, 0.0, 0.0, 0.0, 0.0, dict.fromkeys(Cause, 0.0), 0.0, 0.0)
    return Gaps(
        n,
        sum(g.step_us for g in per_step) / n,
        sum(g.last_device_us for g in per_step) / n,
        sum(g.window_us for g in per_step) / n,
        sum(g.busy_us for g in per_step) / n,
        {c: sum(g.idle_us[c] for g in per_step) / n for c in Cause},
        sum(g.sync_call_us for g in per_step) / n,
        sum(g.end_sync_us for g in per_step) / n,
    )
