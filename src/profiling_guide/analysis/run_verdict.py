"""The verdict across ranks: the rank whose delay, removed, saves the most, and what holds it up.

A collective ends on every rank when the last one arrives, so counting who
arrived last finds the rank that was late, not why: a rank delayed by another's
extra work arrives last in turn. Instead each rank is re-timed on its own:

1. :func:`rank_timing` (once per rank, as its trace is read) re-times each
   step of the rank with the profiler's cost taken out, twice: with its
   collectives as the trace shows them (waits included: ``base``), and with
   them taking no time (``own``: its own work alone). It keeps the
   collective calls that the own-work critical path runs through.
2. :func:`find_culprit` (once the calls are matched across ranks, which gives
   each call's transfer time: its shortest kernel on any rank) puts each
   call's transfer time back on the path of each rank: that rank's step
   *standalone*, with no rank to wait for. The culprit is the rank whose
   standalone step is longest, when its lateness is more than noise
   (:func:`find_culprit` states the rule: longer than every other rank's by
   :data:`~.verdict.MIN_SAVING` of the run's step and by more than the run's
   step varies from step to step, and a rank the others do wait for); fixing
   it would bring the run to the next rank's standalone step.
3. :func:`run_verdict` names what holds the culprit up: **load_imbalance**
   when its extra time is GPU work the other ranks do not have (the op and
   label where its compute exceeds theirs most), else its own verdict (read
   from its trace: a host gap, a sync...). Every other rank waits for it
   (**waiting_for_rank**). With no culprit, the run's verdict is the largest of
   hiding the communication (**exposed_communication**: every rank at its
   own-work step) and the causes every rank shares, read from one rank's trace.

Memory stays linear in the ranks: a rank keeps a few numbers per step and the
keys of the calls on its path, never its graph.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field, replace

from profiling_guide.analysis.causes import FIXES, Cause, Where
from profiling_guide.analysis.critical_path import by_cause, critical_path, observed_timing, simulate
from profiling_guide.analysis.step_graph import step_graph
from profiling_guide.analysis.verdict import (
    MIN_SAVING,
    ProfilerCost,
    Verdict,
    WhatIf,
    host_speed,
    hidden_collectives,
    no_collectives,
    without_profiler,
)
from profiling_guide.trace.model import Trace

#: The culprit's delay is load imbalance when the GPU compute it runs beyond the other ranks' is at least this
#: share of its excess (and of the run's step, MIN_SAVING): the others' work is the same program, so what
#: the culprit alone runs is the root, and a sync that exposes it is the same on every rank.
IMBALANCE_SHARE = 0.25


@dataclass(frozen=True)
class RankStepTiming:
    """One step of one rank, re-timed (µs): with its collectives as traced, with them taking no time, and with
    them hidden behind compute (each keeping the share of the GPU its kernels hold: :func:`~.verdict.hidden_collectives`)."""

    base_us: float
    own_us: float
    path_calls: tuple  # keys (group, step, index) of the collectives on the own-work critical path
    hidden_us: float


@dataclass
class RankTiming:
    """What the run's verdict needs of one rank (see the module docstring)."""

    steps: dict[int, RankStepTiming]
    compute_us: dict[tuple, float]  # GPU compute µs per step, per (op, label, kernel kind)
    #: µs per step of its own-work critical path (collectives taking no time), per cause
    path_us: dict[Cause, float] = field(default_factory=dict)
    scale: float = 1.0  # the profiler's per-op cost factor its steps were re-timed at
    gauge: float | None = None  # its own trace's factor (:func:`~.verdict.host_speed`), None where it has none


#: A rank re-timed at a profiler-cost factor this close (share) to the run's keeps its timing.
SCALE_CLOSE = 0.05


def run_scale(timings: dict[int, RankTiming]) -> float | None:
    """The run's profiler-cost factor: the median of its ranks' gauges (None where none has one).

    The profiler's cost of recording an op is the machine's and the
    profiler's, the same on every rank of one job. A rank's own gauge, the
    median of a few dozen nested ops, varies from rank to rank with no cause
    (1.1 to 3.0 over the ranks of one run in the corpus's H200 runs): each rank
    re-timed at its own would turn that noise into lateness, a rank slow on its
    own only because less of the profiler's cost was taken out of it.
    """
    gauges = [t.gauge for t in timings.values() if t.gauge is not None]
    return statistics.median(gauges) if gauges else None


def _kernel_keys(trace: Trace, calls: list) -> dict[int, tuple]:
    """id(NCCL kernel) → the key of the collective call that launched it.

    ``calls`` are :func:`~profiling_guide.analysis.collectives.collective_calls` of ``trace``: one per
    ``record_param_comms`` op, in the order of their start, as the ops are taken here.
    """
    from profiling_guide.analysis.collectives import COMMS_OP

    keys = {}
    ops = sorted((op for op in trace.ops if op.name == COMMS_OP and not op.annotation), key=lambda op: op.start_us)
    for op, call in zip(ops, calls, strict=True):
        for ev in op.device_events:
            if ev.kind == "kernel" and ev.decoded.kind == "collective":
                keys[id(ev)] = call.key
    return keys


def rank_timing(trace: Trace, rank: int, calls: list, *, scale: float | None = None) -> RankTiming:
    """Re-time each profiled step of one rank (see the module docstring, step 1); ``calls`` are its collective
    calls. The profiler's cost is taken out at ``scale`` (:func:`run_scale`), else at the rank's own gauge."""
    keys = _kernel_keys(trace, calls)
    steps, compute, path_us = {}, defaultdict(float), defaultdict(float)
    gauge = host_speed(trace.steps)
    cost = ProfilerCost(scale=scale if scale is not None else gauge or 1.0)
    for step in trace.steps:
        g = step_graph(trace, step, rank=rank)
        base_timing = without_profiler(g, observed_timing(g), cost)
        base = simulate(g, base_timing)
        own = simulate(g, no_collectives(g, base_timing))
        hidden = simulate(g, hidden_collectives(g, base_timing)).period_us
        for cause, us in by_cause(critical_path(own)).items():
            path_us[cause] += us
        on_path = {keys[id(g.dev[i].event)] for i in own.path_devices if id(g.dev[i].event) in keys}
        steps[step.number] = RankStepTiming(base.period_us, own.period_us, tuple(sorted(on_path, key=repr)), hidden)
        for node in g.dev:
            if node.cause is Cause.GPU_COMPUTE:
                compute[node.where.op, node.where.label, node.where.kind] += node.dur_us
    n = max(len(trace.steps), 1)
    return RankTiming(steps, {k: v / n for k, v in compute.items()}, {k: v / n for k, v in path_us.items()},
                      cost.scale, gauge)


#: Why :func:`find_culprit` named no rank (:attr:`CulpritFinding.reason`), in words that follow "no rank is named:".
REASONS = {
    "one_rank": "one rank alone has no one to wait for",
    "small": "the slowest rank on its own is longer than the next by less than 5 % of the run's step",
    "noise": "the slowest rank on its own is longer than the next by no more than the run's step varies from "
             "step to step, or is not the slowest in every profiled step",
    "not_waited_for": "the others do not wait for the slowest rank on its own (less than 5 % of the run's step)",
}


@dataclass
class CulpritFinding:
    """Each rank's standalone step, the run's, and the culprit if one rank's is clearly the longest (ms)."""

    run_step_ms: float  # the run's step, profiler's cost out: the slowest rank's re-timed step, median over steps
    standalone_ms: dict[int, float]  # each rank's step with its calls at their transfer time, no waiting
    own_ms: dict[int, float]  # each rank's step with its collectives taking no time
    culprit: int | None
    predicted_ms: float | None  # the run's step with the culprit on time
    excess_ms: float = 0.0  # how much longer the culprit's standalone step is than the next rank's
    #: every rank as slow as the culprit (within MIN_SAVING / 2 of the run's step): they all need the fix
    slow: list[int] = field(default_factory=list)
    #: the rank whose standalone step is longest, named or not, and how much longer it is than the next
    #: rank's (not counting ranks as slow as it, within half the threshold, unless every rank is)
    slowest: int | None = None
    margin_ms: float = 0.0
    #: the run's noise: the IQR of its re-timed step over the profiled steps (0 with one step)
    noise_ms: float = 0.0
    #: per rank, how long per step the others waited for it in the collectives it arrived last at (where given)
    waited_for_ms: dict[int, float] = field(default_factory=dict)
    #: why no rank is named (a key of :data:`REASONS`); None when one is
    reason: str | None = None
    #: each rank's step with its collectives hidden behind compute (they keep the GPU share their kernels hold)
    hidden_ms: dict[int, float] = field(default_factory=dict)

    @property
    def threshold_ms(self) -> float:
        """The least margin that names a rank: :data:`~.verdict.MIN_SAVING` of the run's step, or the noise."""
        return max(MIN_SAVING * self.run_step_ms, self.noise_ms)


def _iqr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def find_culprit(timings: dict[int, RankTiming], transfer_us: dict[tuple, float], steps: list[int],
                 late_us: dict[int, float] | None = None) -> CulpritFinding:
    """The culprit rank, if any (see the module docstring, step 2).

    The rule: the rank whose standalone step is longest (median over the
    profiled steps) is named when its lateness is more than noise:

    * its standalone step is longer than every other rank's (ranks within
      half the threshold of it count as alike: all of them are named) by at
      least :data:`~.verdict.MIN_SAVING` of the run's step, and by more than
      the run's re-timed step varies from step to step, the IQR over the
      profiled steps (the *noise*: a lateness that small could be any step's);
    * and the others do wait for it: ``late_us`` (rank → µs per step the others
      waited for it, in the collectives it arrived last at) is at least
      MIN_SAVING of the run's step for it (for the alike ranks together). A
      rank that is slowest on its own only because its compute shared the GPU
      with collectives waiting for another rank keeps no one waiting, and is not
      named. Without ``late_us`` this part is not checked.

    Otherwise no rank is named, and :attr:`CulpritFinding.reason` says which
    part failed.
    """
    ranks = sorted(timings)
    standalone, own, hidden, run_steps, alone_in = _standalone_steps(timings, transfer_us, steps)
    med = {r: statistics.median(v) / 1e3 for r, v in standalone.items()}
    found = CulpritFinding(statistics.median(run_steps) / 1e3 if run_steps else 0.0, med,
                           {r: statistics.median(v) / 1e3 for r, v in own.items()}, None, None,
                           hidden_ms={r: statistics.median(v) / 1e3 for r, v in hidden.items()},
                           noise_ms=_iqr(run_steps) / 1e3,
                           waited_for_ms={r: late_us.get(r, 0.0) / 1e3 for r in ranks} if late_us is not None else {})
    if len(med) < 2:
        found.reason = "one_rank"
        return found
    _judge(found, med, alone_in, checked_waits=late_us is not None)
    return found


def _standalone_steps(timings: dict[int, RankTiming], transfer_us: dict[tuple, float], steps: list[int]):
    """Per rank, per step: its standalone step (its own work and its collectives' transfers, µs), its own work,
    its hidden communication; the run's re-timed step per step (the slowest rank's); and per step, each rank's
    standalone step."""
    standalone: dict[int, list[float]] = defaultdict(list)
    own: dict[int, list[float]] = defaultdict(list)
    hidden: dict[int, list[float]] = defaultdict(list)
    run_steps: list[float] = []
    alone_in: list[dict[int, float]] = []
    ranks = sorted(timings)
    for number in steps:
        alone = {}
        for r in ranks:
            t = timings[r].steps.get(number)
            if t is None:
                continue
            alone[r] = t.own_us + sum(transfer_us.get(k, 0.0) for k in t.path_calls)
            standalone[r].append(alone[r])
            own[r].append(t.own_us)
            hidden[r].append(t.hidden_us)
        if alone:
            alone_in.append(alone)
            run_steps.append(max(timings[r].steps[number].base_us for r in alone))
    return standalone, own, hidden, run_steps, alone_in


def _judge(found: CulpritFinding, med: dict[int, float], alone_in: list[dict[int, float]], *,
           checked_waits: bool) -> None:
    """Name the culprit in ``found``, or say why none (:attr:`CulpritFinding.reason`): the rule of
    :func:`find_culprit`."""
    # the slowest ranks, alike within half the threshold: where several run the same extra work, all of them
    # must be fixed, and the run then goes at the pace of the rest
    top = max(med.values())
    slow = sorted(r for r, v in med.items() if v >= top - MIN_SAVING * found.run_step_ms / 2)
    rest = [v for r, v in med.items() if r not in slow]
    found.slowest = max(med, key=lambda r: (med[r], -r))
    found.margin_ms = top - max(rest if rest else [v for r, v in med.items() if r != found.slowest])
    waited = sum(found.waited_for_ms.get(r, 0.0) for r in slow)
    # a rank late by its own work is late in every step; one slowest in the median only is noise
    alike_us = 1e3 * MIN_SAVING * found.run_step_ms / 2
    late_each_step = all(any(alone.get(r, 0.0) >= max(alone.values()) - alike_us for r in slow) for alone in alone_in)
    if not rest or found.margin_ms < MIN_SAVING * found.run_step_ms:
        found.reason = "small"
    elif found.margin_ms <= found.noise_ms or not late_each_step:
        found.reason = "noise"
    elif checked_waits and waited < MIN_SAVING * found.run_step_ms:
        found.reason = "not_waited_for"
    else:
        found.culprit, found.slow, found.excess_ms = slow[0], slow, found.margin_ms
        found.predicted_ms = max(rest)


@dataclass
class RunVerdict:
    """The run's verdict, each rank's, and the numbers behind them."""

    verdict: WhatIf | None
    what_if: list[WhatIf]
    ranks: dict[int, WhatIf]
    finding: CulpritFinding
    #: the single-rank verdict read from one rank's trace: the culprit's, or (no culprit) the lowest rank's
    rank_verdict: Verdict | None = None
    rank_read: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
            "what_if": [w.to_dict() for w in self.what_if],
            "culprit": self.finding.culprit,
            "slow_ranks": self.finding.slow,
            "run_step_ms": round(self.finding.run_step_ms, 4),
            "standalone_step_ms": {str(r): round(v, 4) for r, v in self.finding.standalone_ms.items()},
            "ranks": [{"rank": r, "verdict": w.to_dict()} for r, w in sorted(self.ranks.items())],
            "notes": self.notes,
        }


def _imbalance(timings: dict[int, RankTiming], culprit: int, slow: list[int]) -> tuple[float, Where | None]:
    """GPU compute the culprit runs beyond the median of the other ranks (ms per step), and where most of it is."""
    mine = timings[culprit].compute_us
    others = [timings[r].compute_us for r in timings if r != culprit and r not in slow]
    if not others:
        return 0.0, None
    keys = set(mine) | {k for o in others for k in o}
    extra = {k: mine.get(k, 0.0) - statistics.median(o.get(k, 0.0) for o in others) for k in keys}
    total = sum(mine.values()) - statistics.median(sum(o.values()) for o in others)
    (op, label, kind), _ = max(extra.items(), key=lambda kv: kv[1], default=((None, None, None), 0.0))
    return total / 1e3, Where(op=op, label=label, kind=kind, rank=culprit)


def run_verdict(finding: CulpritFinding, timings: dict[int, RankTiming], rank_verdict: Verdict | None,
                rank_read: int | None) -> RunVerdict:
    """The run's verdict (see the module docstring, step 3)."""
    run_step = finding.run_step_ms
    what_if: list[WhatIf] = []
    ranks: dict[int, WhatIf] = {}
    c = finding.culprit
    if c is not None:
        culprit = _culprit_what_if(finding, timings, rank_verdict)
        what_if.append(culprit)
        ranks = _each_rank(finding, timings, culprit)
    if c is None:  # hiding the communication: every rank at its step with its collectives hidden
        hidden = max(finding.hidden_ms.values(), default=run_step)
    else:  # the culprit still sets the pace: only the transfers on its own path are hidden
        hidden = run_step - max(finding.standalone_ms[c] - finding.hidden_ms[c], 0.0)
    exposed = WhatIf(Cause.EXPOSED_COMMUNICATION, Where(op="collectives", rank=c), run_step, hidden,
                     run_step - hidden, FIXES[Cause.EXPOSED_COMMUNICATION])
    if exposed.saving_ms >= MIN_SAVING * run_step:
        what_if.append(exposed)
    if rank_verdict is not None and c is None:
        for w in rank_verdict.what_if:
            if w.cause not in (Cause.EXPOSED_COMMUNICATION, Cause.GPU_COMPUTE):
                what_if.append(_every_rank(w))
    what_if.sort(key=lambda w: -w.saving_ms)
    if not what_if and rank_verdict is not None:
        what_if = [_every_rank(w) if c is None else w for w in rank_verdict.what_if if w.cause is Cause.GPU_COMPUTE]
    verdict = what_if[0] if what_if else None
    if c is None:
        for r in timings:
            ranks[r] = verdict
    notes = []
    if rank_read is not None:
        notes.append(f"rank {rank_read}'s trace was read again for {'its' if c is not None else 'the ranks shared'}"
                     " causes")
    return RunVerdict(verdict, what_if, ranks, finding, rank_verdict, rank_read, notes)


def _culprit_what_if(finding: CulpritFinding, timings: dict[int, RankTiming], rank_verdict: Verdict | None) -> WhatIf:
    """The culprit on time: load imbalance where it runs GPU work the others do not, else its own cause (its
    trace's verdict, the cause it spends more on than the others), with its place's fix."""
    c, run_step = finding.culprit, finding.run_step_ms
    extra_ms, where = _imbalance(timings, c, finding.slow)
    if where is not None and extra_ms >= max(IMBALANCE_SHARE * finding.excess_ms, MIN_SAVING * run_step):
        cause, fix = Cause.LOAD_IMBALANCE, FIXES[Cause.LOAD_IMBALANCE]
    else:
        own = _own_cause(rank_verdict, _excess_cause(timings, c, finding.slow))
        cause, where = (own.cause, own.where) if own is not None else (Cause.HOST_GAP, Where(rank=c))
        fix = own.fix if own is not None and own.fix else FIXES[cause]  # its place's fix (a fused optimizer...)
        where = replace(where, rank=c)
    return WhatIf(cause, where, run_step, finding.predicted_ms, finding.excess_ms, fix)


def _each_rank(finding: CulpritFinding, timings: dict[int, RankTiming], culprit: WhatIf) -> dict[int, WhatIf]:
    """Each rank's verdict where there is a culprit: the slow ranks its cause, at their own place; the others
    waiting for it, by as much as their standalone step is shorter than its."""
    c, run_step = finding.culprit, finding.run_step_ms
    waiting = f"rank {c} arrives late to the collectives: {culprit.cause.value} at {culprit.where.words()}"
    ranks = {}
    for r in timings:
        if r in finding.slow:
            ranks[r] = replace(culprit, where=replace(culprit.where, rank=r))
        else:
            late = max(finding.standalone_ms.get(c, 0.0) - finding.standalone_ms.get(r, 0.0), 0.0)
            ranks[r] = WhatIf(Cause.WAITING_FOR_RANK, Where(op="collectives", rank=r), run_step,
                              finding.predicted_ms, late, waiting)
    return ranks


def _every_rank(w: WhatIf) -> WhatIf:
    """A cause the ranks share, read from one rank's trace: where it is, on no rank in particular."""
    return replace(w, where=replace(w.where, rank=None))


def _excess_cause(timings: dict[int, RankTiming], culprit: int, slow: list[int]) -> Cause | None:
    """The cause whose time on the culprit's own critical path exceeds the other ranks' (their median) the most.

    The ranks run one program: a cause they all share (the launch overhead of the same Python) does not make one
    of them late; what the culprit alone spends more on does (a stall on its host, a sync only it makes).
    """
    mine = timings[culprit].path_us
    others = [timings[r].path_us for r in timings if r != culprit and r not in slow]
    if not others:
        return None
    excess = {cause: us - statistics.median(o.get(cause, 0.0) for o in others) for cause, us in mine.items()
              if cause not in (Cause.EXPOSED_COMMUNICATION, Cause.GPU_COMPUTE)}
    best = max(excess, key=excess.get, default=None)
    return best if best is not None and excess[best] > 0 else None


def _own_cause(v: Verdict | None, prefer: Cause | None = None) -> WhatIf | None:
    """The culprit's own removable cause, communication aside (it waits for no one): ``prefer`` (what it spends
    more on than the other ranks) where its verdict has that cause, else its largest."""
    if v is None:
        return None
    causes = [w for w in v.what_if if w.cause is not Cause.EXPOSED_COMMUNICATION]
    return next((w for w in causes if w.cause is prefer), causes[0] if causes else None)
