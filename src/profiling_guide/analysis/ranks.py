"""A run across its ranks: each rank's time, the collectives, and who keeps the others waiting.

The analysis has two passes, so that a run of hundreds of ranks never holds
more than one trace:

1. :func:`summarize_rank` reduces each rank's trace to a :class:`RankSummary`
   (the pace numbers and the time breakdown of each step, the collective
   calls; a few kilobytes), and the trace is dropped.
2. :func:`analyse_run` matches the calls across ranks
   (:func:`~profiling_guide.analysis.collectives.match_calls`) and returns a
   :class:`RunAnalysis`: per rank and step, compute, communication, their
   overlap, exposed communication, idle time and the time spent waiting for
   other ranks; the collectives by kind and size, with their transfer time
   and bus bandwidth against a measured sweep; the rank that arrived last,
   how often and by how much; and each rank's pace verdict, which says so
   when a rank mostly waits in collectives, and for whom.

Then :func:`straggler_activity`, given the trace of the rank the others
waited for (loaded again: one trace), says what that rank was doing while
they waited: the ops whose device work ran in those gaps, with the
``record_function`` label around them, or, where its GPU sat idle, the CPU
ops that issued the late collective.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from profiling_guide.analysis.bandwidth import Sweep, algbw_gbps, busbw_gbps
from profiling_guide.analysis.collectives import (
    DTYPE_WORDS,
    CollectiveCall,
    MatchedCall,
    clock_offsets,
    collective_calls,
    match_calls,
    unmatched_kernels,
)
from profiling_guide.analysis.overlap import TimeBreakdown, time_breakdown
from profiling_guide.analysis.pace import COMM_BOUND, WORDS, Pace, StepSummary, pace, summarize_step
from profiling_guide.analysis.run_verdict import (
    SCALE_CLOSE,
    CulpritFinding,
    RankTiming,
    RunVerdict,
    find_culprit,
    rank_timing,
    run_scale,
)
from profiling_guide.errors import GuideError
from profiling_guide.trace.model import CpuOp, DeviceEvent, Trace

#: A rank is named as the one the others wait for when they waited this share of a step or more for it.
STRAGGLER_SHARE = 0.05
#: Clocks further apart than this (µs) are from different hosts: the timeline shifts them by a collective's end.
ALIGN_US = 1000.0


@dataclass
class RankSummary:
    """What :func:`analyse_run` needs of one rank's trace."""

    rank: int
    source: str
    steps: list[StepSummary]
    breakdown: dict[int, TimeBreakdown]  # step number → its device time
    calls: list[CollectiveCall]
    unmatched_kernels: int  # NCCL kernels of the steps that no record_param_comms op launched
    before_window: int  # device events launched before the profiler began recording
    gpu: str | None = None
    step_starts_us: dict[int, float] = field(default_factory=dict)  # step number → its CPU start, own clock
    #: step number → when its GPU began the step's work (its first device event's start), own clock
    device_starts_us: dict[int, float] = field(default_factory=dict)
    #: when the device work launched before the profiler began recording ended, own clock (None: there was none)
    before_window_end_us: float | None = None
    #: each step re-timed, for the run's verdict (:func:`~profiling_guide.analysis.run_verdict.rank_timing`)
    timing: RankTiming | None = None


def rank_gpu(trace: Trace) -> str | None:
    """The name of the GPU a rank's work ran on, from the trace's ``deviceProperties``.

    A trace lists every GPU its process could see (all of the machine's, in
    the usual ``torchrun`` launch), so the first is not the rank's own: its
    GPU is the one its kernels ran on (their ``device``), else the only or
    first listed.
    """
    devices = [d for d in trace.metadata.get("deviceProperties") or [] if isinstance(d, dict)]
    if not devices:
        return None
    used = Counter(ev.args.get("device") for ev in trace.device_events if type(ev.args.get("device")) is int)
    by_id = {d.get("id"): d for d in devices if type(d.get("id")) is int}
    device = by_id.get(used.most_common(1)[0][0]) if used else None
    name = (device or devices[0]).get("name")
    return str(name) if name else None


def summarize_rank(trace: Trace, rank: int) -> RankSummary:
    """Reduce one rank's trace to its :class:`RankSummary` (linear in its events)."""
    gpu = rank_gpu(trace)
    calls = collective_calls(trace, rank)
    before = [ev.end_us for ev in trace.device_events if ev.before_window]
    return RankSummary(
        rank=rank, source=trace.source, steps=[summarize_step(s) for s in trace.steps],
        breakdown={s.number: time_breakdown(s.device_events) for s in trace.steps},
        calls=calls, unmatched_kernels=len(unmatched_kernels(trace)),
        before_window=sum(1 for ev in trace.device_events if ev.before_window), gpu=gpu,
        step_starts_us={s.number: s.start_us for s in trace.steps},
        device_starts_us={s.number: min(ev.start_us for ev in s.device_events) for s in trace.steps
                          if s.device_events},
        before_window_end_us=max(before) if before else None, timing=rank_timing(trace, rank, calls))


@dataclass
class RankPace:
    """One rank's pace in a run: its own work's (:attr:`pace`), or ``"collectives"`` when it mostly waited."""

    rank: int
    verdict: str  # as Pace.verdict
    pace: Pace  # of its own steps
    comm_us: float  # per step, with a collective kernel running (the run's time breakdown)
    busy_us: float  # per step, with any kernel running
    waited_us: float  # per step, in collectives for the last rank to arrive
    waited_for: int | None  # the rank it waited for most
    late_us: float  # per step, how long it kept the others waiting
    #: where the others waited for this rank: the collectives it arrived last at, of how many
    arrived_last: int | None = None
    calls: int | None = None

    @property
    def bound(self) -> str:
        return WORDS[self.verdict]


@dataclass
class RunAnalysis:
    """Everything the run's report shows, as data."""

    ranks: list[int]
    missing: list[int]  # ranks of the world whose traces were not given
    steps: list[int]  # step numbers every rank has
    #: one row per rank and step, with compute_us, comm_us, overlap_us, exposed_us, idle_us, span_us, wait_us,
    #: waited_for (the rank it waited for most), arrived_last (the step's calls it arrived last at, of calls) and
    #: gpu_lag_us (how much later than the earliest rank its GPU began the step, clocks aligned) and cpu_lead_us
    #: (how long before its GPU its CPU began the step)
    per_rank: pd.DataFrame
    calls: list[MatchedCall]
    #: one row per kind of call (by collective, dtype, bytes, group size, algorithm and protocol), with its calls
    #: per step, transfer time, bus bandwidth against the sweep, the bytes each rank sends per call (sent_bytes)
    #: and per step (sent_per_step), and the median share of the transfer that ran beside compute (transfer_hidden)
    collectives: pd.DataFrame
    #: one row per rank, with arrived_last, calls, late_us (per step, how long it kept the others waiting),
    #: wait_us, start_lag_us (mean per step, how much later than the earliest rank its CPU began the step),
    #: gpu_lag_us (the same for its GPU's first work of the step) and before_lag_us (how much later than the
    #: earliest rank its GPU finished the work launched before the profiler began recording; NaN where a rank
    #: had none)
    stragglers: pd.DataFrame
    straggler: int | None  # the rank the others waited for, when they waited enough to matter
    offsets_us: dict[int, float]  # each rank's clock minus the lowest rank's (:func:`clock_offsets`)
    aligned: bool  # True when the clocks differ enough for the timeline to align them
    verdicts: dict[int, RankPace]
    exposed_unexplained_us: float  # mean exposed communication per rank and step that no waiting explains
    unmatched_kernels: int = 0  # NCCL kernels of the steps that no record_param_comms op launched
    untimed_calls: int = 0  # collective calls that launched no NCCL kernel the traces show
    sweep: Sweep | None = None
    #: each rank's re-timed steps, and the culprit they point at (:mod:`~profiling_guide.analysis.run_verdict`)
    timings: dict[int, RankTiming] = field(default_factory=dict)
    culprit: CulpritFinding | None = None
    #: the run's verdict, once one rank's trace has been read again for its causes (see write_run_report)
    verdict: RunVerdict | None = None
    #: each rank's GPU, by name (:func:`rank_gpu`; None where its trace names none)
    gpus: dict[int, str | None] = field(default_factory=dict)

    def gpu_ranks(self) -> dict[str, list[int]]:
        """Each GPU the ranks ran on → the ranks on it, in rank order (more than one entry: mixed GPUs)."""
        found: dict[str, list[int]] = {}
        for rank in sorted(self.gpus):
            if self.gpus[rank]:
                found.setdefault(self.gpus[rank], []).append(rank)
        return found


def _common_steps(summaries: list[RankSummary]) -> list[int]:
    sets = [{s.number for s in r.steps} for r in summaries]
    common = set.intersection(*sets) if sets else set()
    return sorted(common)


def _per_rank_table(summaries, calls, steps, gpu_lags) -> pd.DataFrame:
    wait: dict[tuple[int, int], float] = defaultdict(float)
    waited_for: dict[tuple[int, int], Counter] = defaultdict(Counter)
    last_at, calls_at = Counter(), Counter()
    for m in calls:
        if len(m.kernels) < 2:
            continue
        last = m.last_rank
        last_at[last, m.step] += 1
        for r in m.kernels:
            calls_at[r, m.step] += 1
            w = m.wait_us(r)
            wait[r, m.step] += w
            if r != last:
                waited_for[r, m.step][last] += w
    rows = []
    for rs in summaries:
        for number in steps:
            b = rs.breakdown[number]
            who = waited_for[rs.rank, number].most_common(1)
            rows.append({"rank": rs.rank, "step": number, "span_us": b.span_us, "compute_us": b.compute_us,
                         "comm_us": b.comm_us, "overlap_us": b.overlap_us, "exposed_us": b.exposed_comm_us,
                         "idle_us": b.idle_us, "busy_us": b.busy_us, "wait_us": wait[rs.rank, number],
                         "waited_for": who[0][0] if who and who[0][1] > 0 else None,
                         "arrived_last": last_at[rs.rank, number], "calls": calls_at[rs.rank, number],
                         "gpu_lag_us": gpu_lags.get((rs.rank, number), float("nan")),
                         "cpu_lead_us": rs.device_starts_us[number] - rs.step_starts_us[number]
                         if number in rs.device_starts_us and number in rs.step_starts_us else float("nan")})
    return pd.DataFrame(rows, columns=["rank", "step", "span_us", "compute_us", "comm_us", "overlap_us", "exposed_us",
                                       "idle_us", "busy_us", "wait_us", "waited_for", "arrived_last", "calls",
                                       "gpu_lag_us", "cpu_lead_us"])


def _stragglers(calls, ranks, n_steps) -> pd.DataFrame:
    last, late, total, wait = Counter(), defaultdict(float), Counter(), defaultdict(float)
    for m in calls:
        if len(m.kernels) < 2:
            continue
        last[m.last_rank] += 1
        late[m.last_rank] += m.max_wait_us
        for r in m.kernels:
            total[r] += 1
            wait[r] += m.wait_us(r)
    n = max(n_steps, 1)
    rows = [{"rank": r, "arrived_last": last[r], "calls": total[r], "late_us": late[r] / n, "wait_us": wait[r] / n}
            for r in ranks]
    df = pd.DataFrame(rows, columns=["rank", "arrived_last", "calls", "late_us", "wait_us"])
    return df.sort_values(["late_us", "rank"], ascending=[False, True], ignore_index=True)


def _start_lags(summaries, steps, offsets) -> dict[int, float]:
    """Per rank, how much later than the earliest rank it began each step (mean), on clocks aligned by ``offsets``."""
    lags: dict[int, list[float]] = defaultdict(list)
    for number in steps:
        starts = {s.rank: s.step_starts_us[number] - offsets.get(s.rank, 0.0) for s in summaries}
        first = min(starts.values())
        for rank, start in starts.items():
            lags[rank].append(start - first)
    return {rank: statistics.mean(values) for rank, values in lags.items()}


def _gpu_lags(summaries, steps, offsets) -> dict[tuple[int, int], float]:
    """(rank, step) → how much later than the earliest rank its GPU began the step's work, clocks aligned."""
    lags = {}
    for number in steps:
        starts = {s.rank: s.device_starts_us[number] - offsets.get(s.rank, 0.0) for s in summaries
                  if number in s.device_starts_us}
        if len(starts) < 2:
            continue
        first = min(starts.values())
        for rank, start in starts.items():
            lags[rank, number] = start - first
    return lags


def _before_lags(summaries, offsets) -> dict[int, float]:
    """Per rank, how much later than the earliest rank its GPU finished the work launched before the recording."""
    ends = {s.rank: s.before_window_end_us - offsets.get(s.rank, 0.0) for s in summaries
            if s.before_window_end_us is not None}
    if len(ends) < 2:
        return {}
    first = min(ends.values())
    return {rank: end - first for rank, end in ends.items()}


def _collectives_table(calls, steps, sweep: Sweep | None) -> pd.DataFrame:
    groups: dict[tuple, list[MatchedCall]] = defaultdict(list)
    for m in calls:
        if m.kernels and m.step in steps:
            groups[(m.collective, m.dtype, m.buffer_bytes, m.group_size, m.algorithm, m.protocol)].append(m)
    n = max(len(steps), 1)
    rows = []
    for (collective, dtype, nbytes, size, algorithm, protocol), same in groups.items():
        transfers = sorted(m.transfer_us for m in same)
        median = statistics.median(transfers)
        sent = same[0].sent_bytes
        hidden = [h for h in (m.transfer_hidden_share for m in same) if h is not None]
        row = {"collective": collective, "dtype": DTYPE_WORDS.get(dtype, dtype), "bytes": nbytes,
               "sent_bytes": sent if sent is not None else float("nan"),
               "group_size": size, "algorithm": algorithm, "protocol": protocol, "per_step": len(same) / n,
               "complete": sum(m.complete for m in same), "transfer_us": median, "transfer_min_us": transfers[0],
               "transfer_max_us": transfers[-1], "wait_us": sum(m.max_wait_us for m in same) / n,
               "algbw_gbps": algbw_gbps(nbytes, median) if nbytes else float("nan"),
               "busbw_gbps": busbw_gbps(collective, size, nbytes, median) if nbytes else float("nan"),
               "transfer_hidden": statistics.median(hidden) if hidden else float("nan"),
               "sweep_gbps": float("nan"), "of_sweep": float("nan"), "regime": None, "in_sweep_range": False}
        if sweep is not None and nbytes and collective in sweep.ops():
            at = sweep.busbw_at(collective, nbytes)
            row.update(sweep_gbps=at, of_sweep=row["busbw_gbps"] / at if at else float("nan"),
                       regime=sweep.regime(collective, nbytes), in_sweep_range=sweep.in_range(collective, nbytes))
        rows.append(row)
    columns = ["collective", "dtype", "bytes", "sent_bytes", "group_size", "algorithm", "protocol", "per_step",
               "complete", "transfer_us", "transfer_min_us", "transfer_max_us", "wait_us", "algbw_gbps", "busbw_gbps",
               "transfer_hidden", "sweep_gbps", "of_sweep", "regime", "in_sweep_range"]
    df = pd.DataFrame(rows, columns=columns)
    df["total_us"] = df["per_step"] * df["transfer_us"]
    df["sent_per_step"] = df["per_step"] * df["sent_bytes"]
    return df.sort_values("total_us", ascending=False, ignore_index=True)


def at_the_runs_scale(summaries: list[RankSummary]) -> dict[int, RankTiming]:
    """Each rank's timing with the profiler's cost taken out at the run's factor (:func:`run_scale`): a rank
    re-timed at its own gauge, not close to the run's, is read again from its trace (where that is a file) and
    re-timed."""
    timings = {s.rank: s.timing for s in summaries if s.timing is not None}
    scale = run_scale(timings)
    for s in summaries:
        t = timings.get(s.rank)
        if scale is None or t is None or abs(t.scale - scale) <= SCALE_CLOSE * scale or not Path(s.source).is_file():
            continue
        timings[s.rank] = rank_timing(Trace.load(s.source), s.rank, s.calls, scale=scale)
    return timings


def analyse_run(summaries: list[RankSummary], *, sweep: Sweep | None = None,
                missing: list[int] | None = None) -> RunAnalysis:
    """The run's analysis from every rank's :class:`RankSummary` (see the module docstring)."""
    if not summaries:
        raise GuideError("no ranks to analyse")
    ranks = [s.rank for s in summaries]
    steps = _common_steps(summaries)
    if not steps:
        raise GuideError("the ranks' traces share no ProfilerStep number: profile the same steps on every rank "
                         "(one torch.profiler schedule, prof.step() once per step)")
    calls = match_calls([c for s in summaries for c in s.calls])
    offsets = clock_offsets(calls)
    gpu_lags = _gpu_lags(summaries, steps, offsets)
    per_rank = _per_rank_table(summaries, calls, steps, gpu_lags)
    stragglers = _straggler_table(summaries, calls, ranks, steps, offsets, per_rank)
    span = statistics.median(per_rank["span_us"]) if len(per_rank) else 0.0
    top = stragglers.iloc[0] if len(stragglers) else None
    straggler = int(top["rank"]) if top is not None and top["late_us"] >= STRAGGLER_SHARE * span > 0 else None
    timings = at_the_runs_scale(summaries)
    culprit = _culprit(timings, calls, steps, stragglers)
    if culprit is not None:
        # the rank the others wait for is the one whose delay, removed, saves the most: the last to arrive may
        # be late only because of another rank's delay (run_verdict's module docstring)
        straggler = culprit.culprit
    unexplained = (per_rank["exposed_us"] - per_rank["wait_us"]).clip(lower=0).mean() if len(per_rank) else 0.0
    by_rank = {s.rank: s for s in summaries}
    verdicts = {r: rank_pace(by_rank[r], per_rank[per_rank["rank"] == r], stragglers, straggler) for r in ranks}
    aligned = any(abs(v) > ALIGN_US for v in offsets.values())
    return RunAnalysis(ranks=ranks, missing=list(missing or []), steps=steps, per_rank=per_rank, calls=calls,
                       collectives=_collectives_table(calls, steps, sweep), stragglers=stragglers,
                       straggler=straggler, offsets_us=offsets, aligned=aligned, verdicts=verdicts,
                       exposed_unexplained_us=float(unexplained),
                       unmatched_kernels=sum(s.unmatched_kernels for s in summaries),
                       untimed_calls=sum(1 for m in calls if not m.kernels), sweep=sweep, timings=timings,
                       culprit=culprit, gpus={s.rank: s.gpu for s in summaries})


def _straggler_table(summaries: list[RankSummary], calls, ranks: list[int], steps, offsets: dict,
                     per_rank: pd.DataFrame) -> pd.DataFrame:
    """Who arrived last at the collectives, with each rank's lags: its steps' start, its GPU's behind its host,
    and its host's before its first collective."""
    stragglers = _stragglers(calls, ranks, len(steps))
    lags = _start_lags(summaries, steps, offsets)
    stragglers["start_lag_us"] = [lags.get(int(r), 0.0) for r in stragglers["rank"]]
    mean_gpu_lag = per_rank.groupby("rank")["gpu_lag_us"].mean()
    stragglers["gpu_lag_us"] = [float(mean_gpu_lag.get(int(r), float("nan"))) for r in stragglers["rank"]]
    before = _before_lags(summaries, offsets)
    stragglers["before_lag_us"] = [before.get(int(r), float("nan")) for r in stragglers["rank"]]
    return stragglers


def _culprit(timings, calls, steps, stragglers: pd.DataFrame):
    """The rank whose delay, removed, saves the most (:func:`find_culprit`), where the ranks' timings allow."""
    if not timings:
        return None
    transfers = {(m.group, m.step, m.index): m.transfer_us for m in calls if m.kernels}
    late = {int(r): float(us) for r, us in zip(stragglers["rank"], stragglers["late_us"], strict=True)}
    return find_culprit(timings, transfers, steps, late)


def rank_pace(summary: RankSummary, rows: pd.DataFrame, stragglers: pd.DataFrame, straggler: int | None) -> RankPace:
    """One rank's pace verdict, knowing what it waited for in its collectives and who waited for it.

    A rank whose collective kernels take most of its busy time, that spent
    most of that waiting for another rank, and that waited longer than the
    others waited for it, is "collectives", pointed at the rank it waited for.
    A rank whose collectives took most of its time without waiting (the
    transfers themselves, or the rank everyone waits for) gets the verdict of
    its own work, with exposed communication counted as idle: never
    "GPU-bound" on the strength of communication.
    """
    steps = [s for s in summary.steps if s.number in set(rows["step"])]
    n = max(len(steps), 1)
    comm = float(rows["comm_us"].sum()) / n
    busy = float(rows["busy_us"].sum()) / n
    waited = float(rows["wait_us"].sum()) / n
    waited_for = Counter()
    for r, w in zip(rows["waited_for"], rows["wait_us"], strict=True):
        if r is not None and not pd.isna(r):
            waited_for[int(r)] += w
    whom = waited_for.most_common(1)[0][0] if waited_for else None
    row = stragglers[stragglers["rank"] == summary.rank]
    late = float(row["late_us"].iloc[0]) if len(row) else 0.0
    found = RankPace(summary.rank, "", pace(steps, comm_rule=False), comm, busy, waited, whom, late)
    if straggler == summary.rank:
        found.arrived_last, found.calls = int(row["arrived_last"].iloc[0]), int(row["calls"].iloc[0])
    if busy and comm / busy >= COMM_BOUND and waited >= 0.5 * comm and waited > late and whom is not None:
        found.verdict, found.pace = "collectives", pace(steps)
    else:
        found.verdict = found.pace.verdict
    return found


# ------------------------------------------------- what the straggler did
def _label(op: CpuOp | None) -> tuple[str, str | None]:
    """The outermost op above ``op`` that is not an annotation, and the innermost ``record_function`` label."""
    label = None
    top = op
    walker = op
    while walker is not None:
        if walker.annotation:
            if label is None and not walker.name.startswith("ProfilerStep#"):
                label = walker.name
        else:
            top = walker
        walker = walker.parent
    return (top.name if top is not None else "no launch in the trace"), label


def _clip(ev, lo: float, hi: float) -> float:
    return max(0.0, min(ev.end_us, hi) - max(ev.start_us, lo))


def straggler_activity(trace: Trace, rank: int, calls: list[MatchedCall], steps: list[int] | None = None,
                       *, top: int = 6) -> pd.DataFrame:
    """What ``rank`` was doing while the others waited for it, from its own trace.

    For each call at which ``rank`` arrived last, the gap is the time between
    the first rank's arrival and its own: the ``max_wait_us`` before its
    kernel started, on its own clock. Its device work in those gaps (not
    collectives) is summed by the op that launched it (the outermost op, e.g.
    ``aten::matmul``, ``autograd::engine::evaluate_function: MmBackward0``)
    and the ``record_function`` label around it (``extra_work``). Where its
    GPU sat idle for most of a gap, the kernel started late because the CPU
    issued it late: the CPU ops of the issuing thread in the gap before the
    call's op are counted instead (``where`` is ``"cpu"``), beside one row
    (``where`` ``"idle"``) with the GPU's idle time in the gaps.

    Returns one row per (where, op, label): ``ops`` (distinct ops), ``us``
    (time inside the gaps), ``share`` of the gaps' total; largest first. The
    ``"gpu"`` and ``"idle"`` rows add up to the gaps; the ``"cpu"`` rows say
    what the CPU did during the ``"idle"`` part.
    """
    device = sorted((ev for ev in trace.device_events if ev.decoded.kind != "collective"),
                    key=lambda ev: ev.start_us)
    ops_by_thread: dict = defaultdict(list)
    for op in trace.ops:
        ops_by_thread[op.tid].append(op)
    comms_ops = {}
    for op in trace.ops:
        if op.name == "record_param_comms":
            comms_ops[op.start_us] = op
    totals: dict[tuple, list] = defaultdict(lambda: [set(), 0.0])
    gaps_us = 0.0
    in_gap = _DeviceInGaps(device)
    for call, lo, hi in _gaps_waited_for(trace, rank, calls, steps):
        gaps_us += hi - lo
        gpu_us = in_gap.add(lo, hi, totals)
        idle = totals["idle", "no device work", None]
        idle[1] += (hi - lo) - gpu_us
        if gpu_us < 0.5 * (hi - lo):
            # The GPU idled: the CPU issued the call late. Its thread's ops before the call, over as long a gap.
            cpu_op = comms_ops.get(call.cpu_start_us)
            if cpu_op is not None:
                _add_cpu_before(cpu_op, ops_by_thread[cpu_op.tid], hi - lo - gpu_us, totals)
    return _activity_table(totals, gaps_us, top)


def _gaps_waited_for(trace: Trace, rank: int, calls: list[MatchedCall], steps: list[int] | None):
    """Each of ``rank``'s own calls at which it arrived last, with the gap before its kernel (lo, hi) on its clock."""
    mine = {c.key: c for c in collective_calls(trace, rank)}
    for m in calls:
        if len(m.kernels) < 2 or m.last_rank != rank or (steps is not None and m.step not in steps):
            continue
        call = mine.get((m.group, m.step, m.index))
        if call is None or call.kernel_start_us is None or m.max_wait_us <= 0:
            continue
        hi = call.kernel_start_us
        yield call, hi - m.max_wait_us, hi


class _DeviceInGaps:
    """The device work (not collectives) of a rank inside a gap, found by bisection on start times."""

    def __init__(self, device: list[DeviceEvent]):
        self.device = device
        self.starts = [ev.start_us for ev in device]
        self.longest = max((ev.dur_us for ev in device), default=0.0)

    def add(self, lo: float, hi: float, totals: dict) -> float:
        """Add each event's time in [lo, hi) to ``totals`` by its launching op and label; the GPU's busy time."""
        device = self.device
        i = bisect.bisect_left(self.starts, lo - self.longest)
        busy = []
        while i < len(device) and device[i].start_us < hi:
            ev = device[i]
            i += 1
            us = _clip(ev, lo, hi)
            if us <= 0:
                continue
            busy.append(ev)
            op, label = _label(ev.launch.op if ev.launch is not None else None)
            entry = totals["gpu", op, label]
            entry[0].add(id(ev.launch.op) if ev.launch is not None and ev.launch.op is not None else id(ev))
            entry[1] += us
        return _union(busy, lo, hi)


def _add_cpu_before(cpu_op: CpuOp, thread_ops: list[CpuOp], span_us: float, totals: dict) -> None:
    """Add the time of the thread's outermost ops in the ``span_us`` before ``cpu_op`` to ``totals``."""
    cpu_hi, cpu_lo = cpu_op.start_us, cpu_op.start_us - span_us
    for op in thread_ops:
        if op.annotation or op.parent is not None and not op.parent.annotation:
            continue  # outermost ops only: their time contains their children's
        us = max(0.0, min(op.end_us, cpu_hi) - max(op.start_us, cpu_lo))
        if us > 0 and op is not cpu_op and cpu_op not in op.walk():
            name, label = _label(op)
            entry = totals["cpu", name, label]
            entry[0].add(id(op))
            entry[1] += us


def _activity_table(totals: dict, gaps_us: float, top: int) -> pd.DataFrame:
    """One row per (where, op, label) with time in the gaps, largest first; the gaps' total in ``attrs``."""
    rows = [{"where": where, "op": op, "label": label, "ops": len(ids), "us": us,
             "share": us / gaps_us if gaps_us else 0.0}
            for (where, op, label), (ids, us) in totals.items() if us > 0]
    df = pd.DataFrame(rows, columns=["where", "op", "label", "ops", "us", "share"])
    df = df.sort_values("us", ascending=False, ignore_index=True)
    df.attrs["gaps_us"] = gaps_us
    return df.head(top)


def _union(events: list[DeviceEvent], lo: float, hi: float) -> float:
    spans = sorted((max(ev.start_us, lo), min(ev.end_us, hi)) for ev in events)
    total, end = 0.0, lo
    for s, e in spans:
        s = max(s, end)
        if e > s:
            total += e - s
            end = e
    return total
