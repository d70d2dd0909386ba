"""DDP against FSDP2, read from every rank's trace: what chapter 10 shows and predicts.

Built on the run analysis (:func:`~profiling_guide.analysis.ranks.analyse_run`):
:func:`rank_table` is one strategy's time per rank and step;
:func:`collectives_table` the collectives of several strategies side by
side, with their bus bandwidth against the measured sweep;
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
    """Per rank, means per profiled step (ms): compute, communication, its hidden share, exposed, waited."""
    rows = {}
    for rank, df in run.per_rank.groupby("rank"):
        comm = df["comm_us"].mean()
        rows[f"rank {rank}"] = {
            "compute ms": df["compute_us"].mean() / 1e3,
            "communication ms": comm / 1e3,
            "hidden behind compute": df["overlap_us"].mean() / comm if comm else float("nan"),
            "exposed ms": df["exposed_us"].mean() / 1e3,
            "waited for another rank, ms": df["wait_us"].mean() / 1e3,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def collectives_table(runs: dict) -> pd.DataFrame:
    """One row per strategy and kind of call: MB per call, calls per step, bus bandwidth and its share of the sweep."""
    rows = []
    for name, run in runs.items():
        for r in run.collectives.itertuples():
            rows.append({"job": name, "collective": r.collective, "MB per call": r.bytes / 1e6,
                         "calls / step": r.per_step, "bus GB/s": r.busbw_gbps, "of the sweep": r.of_sweep})
    return pd.DataFrame(rows).set_index(["job", "collective"])


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


def mostly_hidden(trace: Trace, collective: str, *, but_first: bool = True):
    """The ``collective`` kernels run beside compute (over 80% hidden, median), the step's first one excepted."""
    def _predicate(_=None):
        hidden = []
        for calls in _exposure(trace):
            mine = [c for c in calls if c[0] == collective][1 if but_first else 0:]
            hidden += [1 - exposed / dur for _, dur, exposed in mine if dur]
        if not hidden:
            return False, f"no {collective} kernel"
        share = statistics.median(hidden)
        first = [c for c in _exposure(trace)[0] if c[0] == collective][:1]
        note = f"; the step's first: alone {100 * first[0][2] / first[0][1]:.0f}%" if first and but_first else ""
        return share > 0.8, f"hidden behind compute: {100 * share:.0f}% (median){note}"
    return _predicate


def more_bytes(runs: dict, more: str, than: str):
    """Job ``more`` moves more collective bytes per step than job ``than`` (from the matched calls)."""
    def _mb(run) -> float:
        return float((run.collectives["bytes"] * run.collectives["per_step"]).sum()) / 1e6

    def _predicate(_=None):
        a, b = _mb(runs[more]), _mb(runs[than])
        return a > b, f"{more} {a:,.0f} MB per step, {than} {b:,.0f} MB"
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

