"""DDP against FSDP2, read from every rank's trace: what chapter 10 shows and predicts.

Built on the run analysis (:func:`~profiling_guide.analysis.ranks.analyse_run`):
:func:`rank_table` is one strategy's time per rank and step;
:func:`collectives_table` the collectives of several strategies side by
side, with the bytes each rank sends and their bus bandwidth against the
measured sweep; :func:`arrivals_table`, :func:`named_table` and
:func:`step_lags` who arrived last, why, and whether the run analysis names
a rank the others wait for;
:func:`step_times` the profiler-off step time of each job. The predicates read
single collective kernels (:func:`~profiling_guide.analysis.overlap.collective_exposure`):
which of them ran with compute beside them, and which alone.
"""

from __future__ import annotations

import statistics

import pandas as pd

from profiling_guide.analysis.overlap import collective_exposure
from profiling_guide.spread import Spread, compare
from profiling_guide.trace.model import Trace


def rank_table(run) -> pd.DataFrame:
    """Per rank, means per profiled step, all in ms: compute, communication, the part of it hidden behind compute
    and the part exposed (the two add up to communication), and the time it waited for another rank."""
    rows = {}
    for rank, df in run.per_rank.groupby("rank"):
        rows[f"rank {rank}"] = {
            "compute ms": df["compute_us"].mean() / 1e3,
            "communication ms": df["comm_us"].mean() / 1e3,
            "hidden behind compute ms": df["overlap_us"].mean() / 1e3,
            "exposed ms": df["exposed_us"].mean() / 1e3,
            "waited for another rank ms": df["wait_us"].mean() / 1e3,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def collectives_table(runs: dict) -> pd.DataFrame:
    """One row per strategy and kind of call: MB per call, calls per step, MB each rank sends per step, bus
    bandwidth beside the sweep's at that size, and how much of the transfer ran beside compute."""
    rows = []
    for name, run in runs.items():
        for r in run.collectives.itertuples():
            rows.append({"job": name, "collective": r.collective, "MB per call": r.bytes / 1e6,
                         "calls / step": r.per_step, "MB sent per rank / step": r.sent_per_step / 1e6,
                         "bus GB/s": r.busbw_gbps, "% of the sweep": 100 * r.of_sweep,
                         "% of the transfer beside compute": 100 * r.transfer_hidden})
    return pd.DataFrame(rows).set_index(["job", "collective"])


def sent_per_step(run) -> float:
    """The bytes each rank sends per step: over its collectives, the buffer × nccl-tests' bus factor (the
    :mod:`~profiling_guide.analysis.bandwidth` docstring), summed over calls and averaged over steps."""
    return float(run.collectives["sent_per_step"].sum())


def buffers_per_step(run) -> float:
    """The collectives' buffers per step, summed as nccl-tests counts a buffer (not what a rank sends)."""
    return float((run.collectives["bytes"] * run.collectives["per_step"]).sum())


# ------------------------------------------------------------------ who waits for whom
def _calls(arrived: float, calls: float) -> str:
    return f"{arrived:.0f} of {calls:.0f}"


def arrivals_table(runs: dict) -> pd.DataFrame:
    """Per job and rank: the collectives it arrived last at, how long the others waited for it, how much later
    than the first rank its CPU and its GPU began each step (mean, clocks aligned), its GPU's idle time, and its
    step re-timed on its own (ms)."""
    rows = []
    for name, run in runs.items():
        idle = run.per_rank.groupby("rank")["idle_us"].mean()
        alone = run.culprit.standalone_ms if run.culprit is not None else {}
        for r in sorted(run.stragglers.itertuples(), key=lambda r: r.rank):
            rows.append({"job": name, "rank": f"rank {r.rank}", "arrived last at": _calls(r.arrived_last, r.calls),
                         "the others waited for it, ms / step": r.late_us / 1e3,
                         "its CPU began each step later by, ms": r.start_lag_us / 1e3,
                         "its GPU began each step later by, ms": r.gpu_lag_us / 1e3,
                         "its GPU idle, ms / step": idle[r.rank] / 1e3,
                         "on its own, ms / step": alone.get(r.rank, float("nan"))})
    return pd.DataFrame(rows).set_index(["job", "rank"])


#: The rule's part that failed, in a table's cell (run_verdict.REASONS in full).
_WHY_NONE = {"one_rank": "one rank", "small": "under 5 % of the step",
             "noise": "within the noise", "not_waited_for": "no one waits for it"}


def named_table(runs: dict) -> pd.DataFrame:
    """Per job, the rule that names the rank the others wait for (:func:`~.run_verdict.find_culprit`), in ms:
    the slowest rank on its own, by how much, the two thresholds, the others' wait for it, and whom it names."""
    rows = []
    for name, run in runs.items():
        f = run.culprit
        rows.append({"job": name, "slowest on its own": f"rank {f.slowest}",
                     "longer than the next by, ms": f.margin_ms,
                     "5 % of the step, ms": 0.05 * f.run_step_ms,
                     "noise (IQR of the step), ms": f.noise_ms,
                     "the others waited for it, ms / step": f.waited_for_ms.get(f.slowest, float("nan")),
                     "named": "none" if f.culprit is None else f"rank {f.culprit}",
                     "why none": _WHY_NONE.get(f.reason, "–")})
    return pd.DataFrame(rows).set_index("job")


def activity_table(activity: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    """:func:`~profiling_guide.analysis.ranks.straggler_activity`'s rows per profiled step: where, op, label, ops
    and ms per step, and each row's share of the gaps the others waited in."""
    n = max(n_steps, 1)
    return pd.DataFrame({"where": activity["where"], "op": activity["op"], "label": activity["label"],
                         "ops / step": activity["ops"] / n, "ms / step": activity["us"] / n / 1e3,
                         "% of the gaps": 100 * activity["share"]})


def _latest_gpus(run) -> list[tuple[int, int, float, int, int]]:
    """Per profiled step: (step, the rank whose GPU began it last, by how many µs, calls it arrived last at, calls)."""
    out = []
    for step, df in run.per_rank.groupby("step"):
        late = df.loc[df["gpu_lag_us"].idxmax()]
        out.append((int(step), int(late["rank"]), float(late["gpu_lag_us"]), int(late["arrived_last"]),
                    int(late["calls"])))
    return out


def step_lags(run) -> pd.DataFrame:
    """Per profiled step: the rank whose GPU began it last, by how much (ms, clocks aligned), the step's
    collectives that rank arrived last at, and the wait at the step's collectives (ms per call: median, first,
    last), which grows or shrinks through the step as one GPU computes a little faster than the other."""
    rows = []
    for step, rank, lag, arrived, calls in _latest_gpus(run):
        waits = [m.max_wait_us / 1e3 for m in run.calls if m.step == step and len(m.kernels) > 1]
        rows.append({"step": f"#{step}", "its GPU began last": f"rank {rank}", "by, ms": lag / 1e3,
                     "it arrived last at": _calls(arrived, calls),
                     "wait per call, median, ms": statistics.median(waits) if waits else float("nan"),
                     "at the first call, ms": waits[0] if waits else float("nan"),
                     "at the last, ms": waits[-1] if waits else float("nan")})
    return pd.DataFrame(rows).set_index("step")


def step_times(records: dict) -> dict[str, Spread]:
    """Each job's profiler-off wall time per step (ms): rank 0's ten steps, one at a time, as a spread.

    The ranks of a job finish each step together (the last collective joins
    them), so rank 0's times stand for the job's.
    """
    return {name: Spread.of(rec.run["job"]["ranks"][0]["step_ms"]) for name, rec in records.items()}


def peak_memory_mb(records: dict) -> dict[str, float]:
    """Each job's largest peak of allocated GPU memory over its ranks (MB)."""
    return {name: max(r["peak_memory_mb"] for r in rec.run["job"]["ranks"]) for name, rec in records.items()}


def _exposure(trace: Trace) -> list[list[tuple]]:
    """Per profiled step: ``(collective, duration µs, exposed µs)`` of each collective kernel, in start order."""
    return [[(ev.decoded.collective, ev.dur_us, ev.dur_us - hidden)
             for ev, hidden in collective_exposure(step.device_events)] for step in trace.steps]


# ------------------------------------------------------------------ predicates
def last_call_exposed(trace: Trace, collective: str = "all_reduce"):
    """The step's last ``collective`` kernel runs alone, and holds most of the step's exposed collective time."""
    def _predicate(_=None):
        shares, alone = [], []
        for calls in _exposure(trace):
            mine = [c for c in calls if c[0] == collective]
            if not mine:
                return False, f"no {collective} kernel in a step"
            total = sum(exposed for _, _, exposed in calls)
            last = mine[-1]
            alone.append(last[2] / last[1])
            shares.append(last[2] / total if total else 0.0)
        holds = min(alone) > 0.9 and min(shares) > 0.5
        return holds, (f"last {collective}: alone {100 * min(alone):.0f}–{100 * max(alone):.0f}% of its time, "
                       f"{100 * min(shares):.0f}–{100 * max(shares):.0f}% of the step's exposed collective time; "
                       f"the others: alone {_median_alone(trace, collective):.0%} (median)")
    return _predicate


def _median_alone(trace: Trace, collective: str) -> float:
    shares = [exposed / dur for calls in _exposure(trace) for c, dur, exposed in calls[:-1] if c == collective and dur]
    return statistics.median(shares) if shares else float("nan")


def _hidden(trace: Trace, collective: str, but_first: bool) -> tuple[float | None, str]:
    """The median hidden share of ``trace``'s ``collective`` kernels (the step's first excepted), and in words."""
    hidden = []
    for calls in _exposure(trace):
        mine = [c for c in calls if c[0] == collective][1 if but_first else 0:]
        hidden += [1 - exposed / dur for _, dur, exposed in mine if dur]
    if not hidden:
        return None, f"no {collective} kernel"
    share = statistics.median(hidden)
    first = [c for c in _exposure(trace)[0] if c[0] == collective][:1]
    note = f"; the step's first: alone {100 * first[0][2] / first[0][1]:.0f}%" if first and but_first else ""
    return share, f"hidden behind compute: {100 * share:.0f}% (median){note}"


def mostly_hidden(trace: Trace | dict[int, Trace], collective: str, *, but_first: bool = True):
    """The ``collective`` kernels run beside compute (over 80% hidden, median), the step's first one excepted.

    ``trace``: one rank's trace, or rank → trace: then on every rank.
    """
    traces = trace if isinstance(trace, dict) else {None: trace}

    def _predicate(_=None):
        found = {rank: _hidden(t, collective, but_first) for rank, t in traces.items()}
        holds = all(share is not None and share > 0.8 for share, _ in found.values())
        return holds, "; ".join(said if rank is None else f"rank {rank}: {said}" for rank, (_, said) in found.items())
    return _predicate


def more_bytes(runs: dict, more: str, than: str, ratio: float | None = None):
    """Each rank of job ``more`` sends more bytes per step than each of job ``than`` (:func:`sent_per_step`), and
    ``ratio`` times as many within 2 % where given."""
    def _predicate(_=None):
        a, b = sent_per_step(runs[more]) / 1e6, sent_per_step(runs[than]) / 1e6
        holds = a > b and (ratio is None or abs(a / b - ratio) <= 0.02 * ratio)
        return holds, f"{more} {a:,.0f} MB sent per rank per step, {than} {b:,.0f} MB ({a / b:.2f}×)"
    return _predicate


def lag_predates_recording(run, tolerance_us: float = 20.0):
    """The rank whose GPU began the first profiled step last is the one that finished the work launched before
    the recording last, by as much (within ``tolerance_us``): the lag is older than the profiled steps."""
    def _predicate(_=None):
        step, rank, lag, *_ = _latest_gpus(run)[0]
        row = run.stragglers[run.stragglers["rank"] == rank].iloc[0]
        before = float(row["before_lag_us"])
        holds = before == before and abs(before - lag) <= tolerance_us
        return holds, (f"step {step}: rank {rank}'s GPU began {lag / 1e3:.3f} ms after the first; it finished the "
                       f"work launched before the recording {before / 1e3:.3f} ms after the first")
    return _predicate


def no_rank_named(run, same_compute: float = 0.01):
    """No rank is named, and the ranks' GPUs compute within ``same_compute`` of each other per step."""
    def _predicate(_=None):
        compute = run.per_rank.groupby("rank")["compute_us"].mean()
        apart = (compute.max() - compute.min()) / compute.max()
        holds = run.straggler is None and apart <= same_compute
        return holds, (f"GPU compute per step {apart:.1%} apart; named: "
                       f"{'none' if run.straggler is None else f'rank {run.straggler}'}")
    return _predicate


def late_gpu_arrives_last(run):
    """In each profiled step the rank whose GPU began the step last arrived last at most of the step's collectives."""
    def _predicate(_=None):
        steps = _latest_gpus(run)
        holds = all(arrived > calls / 2 for *_, arrived, calls in steps)
        return holds, "; ".join(f"step {step}: rank {rank}'s GPU {lag / 1e3:.3f} ms later, last at {arrived} of "
                                f"{calls}" for step, rank, lag, arrived, calls in steps)
    return _predicate


def faster(times: dict[str, Spread], fast: str, slow: str):
    """Job ``fast``'s step is shorter than ``slow``'s, outside the spreads."""
    def _predicate(_=None):
        a, b = times[fast], times[slow]
        return compare(a, b) == "faster", f"{fast} {a:.2f} ms, {slow} {b:.2f} ms per step"
    return _predicate


def straggler_named(run, rank: int):
    """The run analysis names ``rank`` as the one the others wait for, and its waiting ranks are told so."""
    def _predicate(_=None):
        others = [r for r in run.ranks if r != rank]
        told = [r for r in others if run.verdicts[r].bound == "communication-bound"]
        row = run.stragglers[run.stragglers["rank"] == rank]
        late = float(row["late_us"].iloc[0]) / 1e3 if len(row) else 0.0
        holds = run.straggler == rank and told == others
        return holds, (f"named: rank {run.straggler}; the others' wait for it: {late:.1f} ms per step; "
                       f"ranks whose verdict is communication-bound: {', '.join(map(str, told)) or 'none'}")
    return _predicate

