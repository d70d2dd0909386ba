"""Re-time a step's graph, find its critical path, and say what each stretch of the path was spent on.

:func:`simulate` runs the :class:`~profiling_guide.analysis.step_graph.StepGraph`
forward in time: each host stretch starts when the one before it ends (a
blocking call ends when the work it waits for does, plus its return lag); each
piece of device work starts when its launch, the work before it on its stream
and the other stream's work it waited for allow. Durations come from a
:class:`Timing` (the trace's, or a what-if's), so the same graph answers "what
if this call did not block" by running again, not by subtracting.

One profiled step is run three times back to back, the way a training loop
repeats it: the host may run ahead of the GPU across steps, so the **period**
(the time one step adds, from the second run to the third) is the step time of
the loop, whichever side sets the pace. :func:`critical_path` walks back one
period from the last run's end along what bound each start, and gives every
microsecond of it one :class:`~profiling_guide.analysis.causes.Cause`; the
host stretches that refill the GPU after a blocking call are the blocking
call's, for as long as it waited.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from profiling_guide.analysis.causes import Cause, Where
from profiling_guide.analysis.step_graph import SHARED_SPEED, StepGraph

REPLICAS = 3
#: The speed of a kernel that fills the GPU placed beside another (:class:`Sharing`): the first of two that the trace
#: shows side by side for a time T needed ``SHARED_SPEED × T`` alone and keeps full speed, so the second, which
#: needed as much, ends at T when it gets ``2 − 1 / SHARED_SPEED`` (1/2) of its speed beside the first.
BESIDE = 2 - 1 / SHARED_SPEED


@dataclass
class Timing:
    """The durations a simulation uses (µs), one per host stretch and device node, and what blocks."""

    host_us: list[float]
    blocking: list[bool]
    dev_us: list[float]
    lag_us: list[float]  # launch → earliest start, per device node
    gap_us: float  # between back-to-back work on a stream

    def copy(self) -> Timing:
        return Timing(list(self.host_us), list(self.blocking), list(self.dev_us), list(self.lag_us), self.gap_us)


def observed_timing(g: StepGraph) -> Timing:
    """The durations the trace shows; a blocking call seen waiting lasts its return lag (the wait is the work's)."""
    return Timing([min(s.dur_us, s.wait_lag_us) if s.waited else s.dur_us for s in g.host],
                  [s.sync is not None for s in g.host], [n.solo_us for n in g.dev], [n.lag_us for n in g.dev],
                  g.stream_gap_us)


@dataclass
class Run:
    """A simulation's result: start, end and binding predecessor of every host stretch and device node, per replica.

    Index ``r * n + i`` is stretch (or node) ``i`` of replica ``r``; a
    predecessor is ``("h", index)`` or ``("d", index)``, and ``kind`` says which
    edge bound it: ``"host"`` (the stretch before), ``"launch"``, ``"stream"``,
    ``"wait"`` (another stream), ``"sync"`` (a blocking call's awaited work). A kernel that shared the GPU with
    kernels on other streams (:class:`Sharing`) ran longer than alone: ``stretch`` holds, per index, how much
    longer and the kernel it lost the most time to.
    """

    graph: StepGraph
    timing: Timing
    hs: list[float]
    he: list[float]
    hpred: list
    ds: list[float]
    de: list[float]
    dpred: list
    ends: list[float]  # per replica: the later of its host end and its last device end
    period_us: float
    #: the device nodes (indices within a step) on the critical path, once :func:`critical_path` has walked it
    path_devices: set = None
    stretch: dict = None


def simulate(g: StepGraph, timing: Timing, replicas: int = REPLICAS) -> Run:
    """Run ``replicas`` copies of the step back to back with ``timing`` (see the module docstring)."""
    nh = len(g.host)
    hs, he, hpred = [0.0] * (nh * replicas), [0.0] * (nh * replicas), [None] * (nh * replicas)
    gpu = _Device(g, timing, replicas)
    off_chain = sorted((i for i, n in enumerate(g.dev) if n.host < 0), key=lambda i: g.dev[i].ready_us)
    ends = []
    t = 0.0
    prev = None
    for r in range(replicas):
        step_start = t
        j = 0
        for i, seg in enumerate(g.host):
            k = r * nh + i
            while j < len(off_chain) and g.dev[off_chain[j]].ready_us <= t - step_start:
                gpu.place(r, off_chain[j], step_start + g.dev[off_chain[j]].ready_us, None)
                j += 1
            start = t
            gpu.pass_wait(seg)
            for d in seg.launches:
                gpu.place(r, d, start + timing.lag_us[d], ("launch", ("h", k)))
            end, why = start + timing.host_us[i], ("host", prev)
            awaited = gpu.awaited(seg, r) if timing.blocking[i] else None
            if awaited is not None and gpu.de[awaited] + seg.wait_lag_us > end:
                end, why = gpu.de[awaited] + seg.wait_lag_us, ("sync", ("d", awaited))
            hs[k], he[k], hpred[k] = start, end, why
            prev = ("h", k)
            t = end
        while j < len(off_chain):
            gpu.place(r, off_chain[j], step_start + g.dev[off_chain[j]].ready_us, None)
            j += 1
        ends.append(max(t, gpu.last_end(r, default=t)))
    period = (ends[-1] - ends[0]) / (replicas - 1) if replicas > 1 else ends[0]
    return Run(g, timing, hs, he, hpred, gpu.ds, gpu.de, gpu.dpred, ends, period,
               stretch=gpu.sharing.stretch if gpu.sharing is not None else {})


class _Device:
    """The device side of a simulation: when each piece of device work of each replica starts and ends, and what
    bound its start (its launch, its stream, another stream's work it waits for, a kernel it shares the GPU
    with)."""

    def __init__(self, g: StepGraph, timing: Timing, replicas: int):
        self.g, self.timing, self.nd = g, timing, len(g.dev)
        n = self.nd * replicas
        self.ds, self.de, self.dpred = [0.0] * n, [0.0] * n, [None] * n
        self.scheduled = [False] * n
        self.tail: dict = {}  # stream → global index of its last scheduled node
        self.waiting: dict = {}  # stream → the global index of the work it waits for (a cudaStreamWaitEvent passed)
        self.sharing = Sharing() if len({node.stream for node in g.dev if node.fills}) > 1 else None

    def pass_wait(self, seg) -> None:
        """A ``cudaStreamWaitEvent`` the host passes: its stream's next work waits for the other's work so far."""
        if seg.waits is not None and seg.waits[0] in self.tail:
            self.waiting[seg.waits[1]] = self.tail[seg.waits[0]]

    def place(self, r: int, i: int, ready: float, pred) -> None:
        node, de = self.g.dev[i], self.de
        k = r * self.nd + i
        start, why = ready, pred
        last = self.tail.get(node.stream)
        if last is not None and de[last] + self.timing.gap_us > start:
            start, why = de[last] + self.timing.gap_us, ("stream", ("d", last))
        dk = r * self.nd + node.dep
        if node.dep >= 0 and self.scheduled[dk] and de[dk] + node.dep_lag_us > start:
            start, why = de[dk] + node.dep_lag_us, ("wait", ("d", dk))
        awaited = self.waiting.pop(node.stream, None)
        if awaited is not None and de[awaited] > start:
            start, why = de[awaited], ("wait", ("d", awaited))
        start += node.extra_us
        dur = self.timing.dev_us[i]
        end = self.sharing.place(k, node.stream, start, dur) if self.sharing and node.fills and dur > 0 else start + dur
        self.ds[k], de[k], self.dpred[k] = start, end, why
        self.scheduled[k] = True
        self.tail[node.stream] = k

    def awaited(self, seg, r: int) -> int | None:
        """The device work a blocking call of replica ``r`` waits for (global index), if it is scheduled."""
        if seg.await_node is not None:  # an event sync: the work before its event
            node, back = seg.await_node
            k = (r + back) * self.nd + node
            return k if r + back >= 0 and self.scheduled[k] else None
        if seg.sync == "device":
            return max(self.tail.values(), key=lambda x: self.de[x], default=None)
        return self.tail.get(seg.sync_stream)

    def last_end(self, r: int, default: float) -> float:
        return max((self.de[r * self.nd + i] for i in range(self.nd)), default=default)


class Sharing:
    """Kernels that fill the GPU on different streams (:func:`~.step_graph._share_the_gpu`) share it when they run
    at once. The kernels placed first keep their times; one placed beside them progresses at :data:`BESIDE` of
    its speed alone for each it runs beside, so that two kernels the trace shows side by side for their whole
    length, each at :data:`~.step_graph.SHARED_SPEED`, take as long together re-timed as the trace shows."""

    def __init__(self):
        self.starts: list[float] = []  # placed kernels, by start
        self.items: list[tuple[float, float, object, int]] = []  # (start, end, stream, global index)
        self.longest = 0.0
        #: global index → (µs it ran longer than alone, the global index of the kernel it lost most of them to)
        self.stretch: dict[int, tuple[float, int]] = {}

    def place(self, k: int, stream, start: float, dur: float) -> float:
        """Place kernel ``k`` of ``stream`` from ``start``, needing ``dur`` alone: its end."""
        lo = bisect.bisect_left(self.starts, start - self.longest)
        others = [it for it in self.items[lo:] if it[2] != stream and it[1] > start]
        t, left, lost = start, dur, defaultdict(float)
        while left > 1e-9:
            running = [it for it in others if it[0] <= t < it[1]]
            nxt = min([it[0] for it in others if it[0] > t] + [it[1] for it in running], default=float("inf"))
            rate = BESIDE ** len(running)
            span = min(left / rate, nxt - t)
            for it in running:
                lost[it[3]] += span * (1 - rate) / len(running)
            t, left = t + span, left - span * rate
        at = bisect.bisect_right(self.starts, start)
        self.starts.insert(at, start)
        self.items.insert(at, (start, t, stream, k))
        self.longest = max(self.longest, t - start)
        if lost:
            self.stretch[k] = (t - start - dur, max(lost, key=lost.get))
        return t


@dataclass(frozen=True)
class PathShare:
    """Time of the critical path spent on one cause at one place (µs per step)."""

    cause: Cause
    where: Where
    us: float


def critical_path(run: Run) -> list[PathShare]:
    """One period of the last replica's critical path, as time per (cause, where), largest first.

    Walks back from the later of the last replica's host end and device end,
    following what bound each start, until one period is covered. Lags between
    a launch and its work are the launch's (``launch_overhead``); the wait from
    awaited work to a blocking call's return is the call's; host stretches after
    a blocking call, until the path reaches device work again, refill the queue
    the call emptied and count as the call's cause, for as long as the call
    waited (:func:`_refills`).
    """
    g = run.graph
    nh, nd = len(g.host), len(g.dev)
    end = run.ends[-1]
    lo = end - run.period_us
    node = _last_node(run)
    path = []  # (cause, where, µs, is_host, index of a blocking call that waited, or None), end first
    visited = set()  # the device nodes the path runs through (indices within a step)
    t = end
    while node is not None and t > lo:
        kind, k = node
        if kind == "d":
            visited.add(k % nd)
        s, e, cause, where = _span(run, node)
        edge, nxt = _binding(run, node, t)
        pend = None if nxt is None else (run.he[nxt[1]] if nxt[0] == "h" else run.de[nxt[1]])
        # a blocking call bound by the work it waited for starts, on the path, when that work ends
        eff = max(s, pend) if edge == "sync" else s
        e = min(e, t)
        if e > max(eff, lo):
            # a blocking call bound by the work it awaited: which call, and how long it waited for that work
            blocked = (k % nh, max(pend - s, 0.0)) if kind == "h" and edge == "sync" else None
            span = e - max(eff, lo)
            if kind == "d" and k in run.stretch:  # the time it lost to a kernel of another stream is that kernel's
                lost, other = run.stretch[k]
                lost = min(lost, span)
                path.append((g.dev[other % nd].cause, g.dev[other % nd].where, lost, False, None))
                span -= lost
            path.append((cause, where, span, kind == "h", blocked))
        t = min(t, max(eff, lo))
        if nxt is None or t <= lo:
            break
        if pend < t:  # the lag between the predecessor's end and this start
            lag = t - max(pend, lo)
            if edge == "launch":
                path.append((Cause.LAUNCH_OVERHEAD, g.host[nxt[1] % nh].where, lag, True, None))
            else:
                path.append((cause, where, lag, kind == "h", None))
            t = max(pend, lo)
        node = nxt
    run.path_devices = visited
    return _shares(_refills(path[::-1], g))


def _last_node(run: Run) -> tuple | None:
    """Where the last replica ends: its last device work, or its last host stretch if that ends later."""
    g = run.graph
    nh, nd = len(g.host), len(g.dev)
    r = len(run.ends) - 1
    host_end = run.he[r * nh + nh - 1] if nh else float("-inf")
    last_dev = max(range(r * nd, r * nd + nd), key=lambda k: run.de[k], default=None)
    if last_dev is not None and run.de[last_dev] >= host_end:
        return ("d", last_dev)
    return ("h", r * nh + nh - 1) if nh else None


def _span(run: Run, node: tuple) -> tuple[float, float, Cause, Where]:
    """A host stretch's or device node's start and end in ``run``, and its cause and place."""
    kind, k = node
    if kind == "h":
        seg = run.graph.host[k % len(run.graph.host)]
        return run.hs[k], run.he[k], seg.cause, seg.where
    dn = run.graph.dev[k % len(run.graph.dev)]
    return run.ds[k], run.de[k], dn.cause, dn.where


def _binding(run: Run, node: tuple, t: float) -> tuple[str | None, tuple | None]:
    """The edge and the node that bound ``node``'s start. A blocking call reached before the work it awaited ended
    (through a launch it made) was bound by the host stretch before it."""
    kind, k = node
    pred = run.hpred[k] if kind == "h" else run.dpred[k]
    edge, nxt = pred if pred is not None else (None, None)
    if kind == "h" and (edge != "sync" or run.de[nxt[1]] > t):
        edge, nxt = "host", (("h", k - 1) if k > 0 else None)
    return edge, nxt


def _refills(path: list, g: StepGraph) -> list:
    """Host stretches after a blocking call that waited, until the path reaches device work: the call's cause,
    for as long as the call waited.

    Without the call, the host would have issued that work while it waited; the GPU, busy with what the call
    awaited, would not have gone idle. So a refill up to the wait is the call's cost, and a refill longer than
    the wait is, beyond it, the host's own pace (a host that sets the pace would have kept the GPU waiting
    with or without the call): that part keeps its cause.
    """
    out, refill, budget = [], None, 0.0
    for cause, where, us, is_host, blocked in path:
        if blocked is not None:
            call, waited = blocked
            refill, budget = (g.host[call].cause, g.host[call].where), waited
        elif not is_host:
            refill = None
        elif refill is not None and cause is Cause.LAUNCH_OVERHEAD and budget > 0:
            moved = min(us, budget)
            budget -= moved
            out.append((refill[0], refill[1], moved))
            if us > moved:
                out.append((cause, where, us - moved))
            continue
        out.append((cause, where, us))
    return out


def _shares(path: list) -> list[PathShare]:
    totals: dict = defaultdict(float)
    for cause, where, us in path:
        totals[cause, where] += us
    shares = [PathShare(c, w, us) for (c, w), us in totals.items() if us > 0]
    return sorted(shares, key=lambda p: -p.us)


def by_cause(shares: list[PathShare]) -> dict[Cause, float]:
    """The path's µs per cause."""
    out: dict[Cause, float] = defaultdict(float)
    for p in shares:
        out[p.cause] += p.us
    return dict(out)


def top_where(shares: list[PathShare], cause: Cause) -> Where | None:
    """Where on the path ``cause`` took the most time, named as coarsely as the fix needs (:func:`coarse`)."""
    best: dict = defaultdict(float)
    for p in shares:
        if p.cause is cause:
            best[coarse(p.where, cause)] += p.us
    return max(best, key=best.get) if best else None


def coarse(where: Where, cause: Cause) -> Where:
    """A place as the verdict names it for ``cause``.

    Launch overhead is spread over every op of a region: its label names it. A
    host gap is named by its label and what it leads to ("before 'forward'"),
    or its op for a host-only op; device work by op, label and kernel kind;
    the rest by op and label.
    """
    if cause is Cause.LAUNCH_OVERHEAD:
        return Where(label=where.label, rank=where.rank)
    if cause is Cause.HOST_GAP:
        return Where(op=where.op, label=where.label, rank=where.rank, before=None if where.op else where.before,
                     source=where.source)
    if cause in (Cause.GPU_COMPUTE, Cause.EXPOSED_COMMUNICATION, Cause.MEMCPY):
        return Where(op=where.op, label=where.label, kind=where.kind, rank=where.rank)
    return Where(op=where.op, label=where.label, rank=where.rank)
