"""``profiling-guide report`` over every rank of a run: one self-contained HTML page.

:func:`write_run_report` reads the ranks' traces one at a time
(:func:`~profiling_guide.trace.run.read_run`), reduces each to its summary
(:func:`~profiling_guide.analysis.ranks.summarize_rank`), analyses the run
(:func:`~profiling_guide.analysis.ranks.analyse_run`), reads again only the
few ranks the page draws (the one the others waited for, and the timeline's),
and writes the page: who keeps the others waiting and what it was doing, each
rank's verdict, each rank's time per step (compute, communication, their
overlap, exposed communication, idle, waiting), the collectives with their
bus bandwidth against a measured sweep, and one step of every shown rank on
one time axis. Like the single-trace report it needs nothing from the network.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from profiling_guide import __version__
from profiling_guide.analysis.bandwidth import Sweep, read_sweep
from profiling_guide.analysis.ranks import RunAnalysis, analyse_run, straggler_activity, summarize_rank
from profiling_guide.analysis.run_verdict import REASONS, run_verdict
from profiling_guide.analysis.verdict import MIN_SAVING, verdict_of
from profiling_guide.errors import GuideError
from profiling_guide.files import atomic_output, check_writable
from profiling_guide.pages.interactive_timeline import RanksTimeline, timeline_html
from profiling_guide.pages.pace_sentences import fmt_us, rank_headline
from profiling_guide.report.html import _CSS, _Progress, _bytes, _cell, _table
from profiling_guide.report.json_report import run_json, write_json
from profiling_guide.report.merge import write_merged
from profiling_guide.report.verdict_html import run_verdict_section, run_verdict_sentence
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run import rank_info, read_run

#: Ranks drawn on the timeline; the merged trace (``--merge``) holds them all.
TIMELINE_RANKS = 8
#: Ranks shown with a table each; above this, one table with a row per rank.
TABLE_PER_RANK = 8
PROGRESS_RANKS = 8  # runs of this many ranks or more get progress lines on stderr


def _ms(us: float) -> str:
    return "–" if us is None or (isinstance(us, float) and math.isnan(us)) else f"{us / 1000:,.2f}"


def _ranks_text(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}–{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks[:12])) + (" …" if len(ranks) > 12
                                                                                           else "")


def _op_name(name: str) -> str:
    return name.removeprefix("autograd::engine::evaluate_function: ").removeprefix("aten::")


# ------------------------------------------------------------------ sections
def _who_waits(run: RunAnalysis, activity) -> str:
    if run.straggler is None:
        return _no_straggler(run)
    row = run.stragglers[run.stragglers["rank"] == run.straggler].iloc[0]
    text = (f"Rank {run.straggler} keeps the others waiting: it arrived last at {int(row['arrived_last'])} of "
            f"{int(row['calls'])} collectives, {fmt_us(row['late_us'])} per step after the first rank to "
            f"arrive{_who_waited(run)}.") + _behind_before_the_step(row, activity)
    out = f'<p class="pg-verdict pg-v-collectives">{html.escape(text)}</p>'
    if activity is not None and len(activity):
        out += _straggler_activity_table(run, activity)
    return out


def _no_straggler(run: RunAnalysis) -> str:
    """Why no rank is named: no collective matched across ranks, or the rule of
    :func:`~profiling_guide.analysis.run_verdict.find_culprit` names none (which part of it, with the numbers)."""
    stragglers = run.stragglers
    if not len(stragglers) or stragglers["late_us"].iloc[0] <= 0:
        return "<p>No collective was matched on two or more ranks, so no rank can be said to wait for another.</p>"
    top = stragglers.iloc[0]
    late = int(top["rank"])
    text = (f"No rank is named as holding the others up. Rank {late} arrived last most: at "
            f"{int(top['arrived_last'])} of {int(top['calls'])} collectives, {fmt_us(top['late_us'])} per step "
            "after the first rank to arrive.")
    f = run.culprit
    if f is not None and f.slowest is not None and f.reason in REASONS:
        text += (f" A rank is named when, re-timed on its own, its step is longer than every other rank's by at "
                 f"least 5% of the run's step ({fmt_us(1e3 * MIN_SAVING * f.run_step_ms)}) and by more than the "
                 f"noise (the IQR of the run's step over its steps, {fmt_us(1e3 * f.noise_ms)}), and the others "
                 f"wait for it at least 5% of a step. The slowest on its own, rank {f.slowest}, needs "
                 f"{fmt_us(1e3 * f.margin_ms)} a step more than the next, and the others waited "
                 f"{fmt_us(1e3 * f.waited_for_ms.get(f.slowest, 0.0))} a step for it: {REASONS[f.reason]}.")
        if late != f.slowest and late in f.standalone_ms:
            text += (f" Rank {late}, whom they waited for, needs {fmt_us(1e3 * f.standalone_ms[late])} a step on "
                     f"its own, with the profiler's cost taken out of its CPU's time, against rank {f.slowest}'s "
                     f"{fmt_us(1e3 * f.standalone_ms[f.slowest])}: its lateness comes with the profiler, not with "
                     "its work.")
    return f'<p class="pg-verdict">{html.escape(text)}</p>'


def _who_waited(run: RunAnalysis) -> str:
    """The clause naming the ranks that waited for the straggler, and how long per step ("" where none did)."""
    waiters = run.per_rank[run.per_rank["waited_for"] == run.straggler]
    per = waiters.groupby("rank")["wait_us"].mean() if len(waiters) else None
    if per is None or not len(per):
        return ""
    lo, hi = per.min(), per.max()
    span = fmt_us(lo) if abs(hi - lo) < 1 else f"{fmt_us(lo)} to {fmt_us(hi)}"
    return f"; {_ranks_text([int(r) for r in per.index])} waited {span} per step, most of it for it"


def _behind_before_the_step(row, activity) -> str:
    """The sentence saying the straggler's GPU idled, waiting for its CPU, which began its steps late ("" if not so)."""
    gaps = activity.attrs.get("gaps_us", 0.0) if activity is not None else 0.0
    idle = float(activity.loc[activity["where"] == "idle", "us"].sum()) if activity is not None else 0.0
    lag = float(row["start_lag_us"])
    if not (gaps and idle >= 0.5 * gaps and lag > 0):
        return ""
    return (f" Its GPU sat idle through {idle / gaps:.0%} of those waits, waiting for work from its CPU, which "
            f"began its steps {fmt_us(lag)} after the earliest rank's (mean per step, clocks aligned): it falls "
            "behind before the step begins, where the trace does not look.")


def _straggler_activity_table(run: RunAnalysis, activity) -> str:
    """What the straggler did while the others waited for it: a sentence and a table per step."""
    n = max(len(run.steps), 1)
    gaps = activity.attrs.get("gaps_us", 0.0) / n
    rows = []
    for r in activity.itertuples():
        where = {"gpu": "its GPU ran", "idle": "its GPU idled", "cpu": "meanwhile its CPU ran"}[r.where]
        label = "–" if r.label is None or (isinstance(r.label, float) and math.isnan(r.label)) else r.label
        ops = "–" if r.where == "idle" else f"{r.ops / n:,.1f}"
        rows.append(_cell(where) + _cell(_op_name(r.op), title=r.op, cls="name") + _cell(label, cls="name")
                    + _cell(ops, num=True) + _cell(_ms(r.us / n), num=True)
                    + _cell(f"{r.share:.0%}", num=True))
    return (f"<p>While the others waited for it ({html.escape(fmt_us(gaps))} per step in all: for each "
            "collective, from the first rank's arrival to its own), rank "
            f"{run.straggler} was doing this, by the op that launched the work and the "
            "<code>record_function</code> label around it:</p>"
            + _table(["where", "op", "label", "ops / step", "ms / step in the gaps", "share of the gaps"], rows))


def _verdicts(run: RunAnalysis) -> str:
    if len(run.verdicts) <= TABLE_PER_RANK:
        items = "".join(f"<li><b>rank {r}</b> ({html.escape(v.bound)}): {html.escape(rank_headline(v))}</li>"
                        for r, v in run.verdicts.items())
        return f'<ul class="pg-verdicts">{items}</ul>'
    # Many ranks: how many got each verdict, and in full the ranks that matter most.
    by_bound: dict[str, list[int]] = {}
    for r, v in run.verdicts.items():
        by_bound.setdefault(v.bound, []).append(r)
    counts = "; ".join(f"{len(ranks)} {html.escape(bound)} ({html.escape(_ranks_text(ranks))})"
                       for bound, ranks in sorted(by_bound.items(), key=lambda kv: -len(kv[1])))
    waited = run.per_rank.groupby("rank")["wait_us"].mean()
    keys = [r for r in (run.straggler, int(waited.idxmax()) if len(waited) else None) if r is not None]
    items = "".join(f"<li><b>rank {r}</b> ({html.escape(run.verdicts[r].bound)}): "
                    f"{html.escape(rank_headline(run.verdicts[r]))}</li>" for r in dict.fromkeys(keys))
    return (f"<p>{counts}.</p>" + (f'<ul class="pg-verdicts">{items}</ul>' if items else "")
            + '<p class="pg-note">In full above: the rank the others waited for and the rank that waited '
            "longest.</p>")


_RANK_HEAD = ["step", "compute ms", "communication ms", "of it hidden behind compute, ms", "exposed communication ms",
              "idle ms", "waited for another rank, ms"]


def _rank_row(label: str, r) -> str:
    who = "" if r.waited_for is None or (isinstance(r.waited_for, float) and math.isnan(r.waited_for)) else \
        f" (rank {int(r.waited_for)})"
    return (_cell(label) + _cell(_ms(r.compute_us), num=True) + _cell(_ms(r.comm_us), num=True)
            + _cell(_ms(r.overlap_us), num=True) + _cell(_ms(r.exposed_us), num=True) + _cell(_ms(r.idle_us), num=True)
            + _cell(_ms(r.wait_us) + (who if r.wait_us >= 1 else ""), num=True))


def _per_rank(run: RunAnalysis) -> str:
    df = run.per_rank
    note = ('<p class="pg-note">Per step, over the GPU\'s span of the work the step launched: <b>compute</b>, time '
            "with any kernel that is not communication running; <b>communication</b>, time with an NCCL kernel "
            "running, and the part of it with compute beside it (<b>hidden</b>); <b>exposed communication</b>, "
            "with no compute beside it (hidden and exposed add up to communication); <b>idle</b>, nothing "
            "running. HTA's temporal breakdown and comm/comp overlap define them so. <b>Waited</b>: the sum over "
            "the step's collectives of how much longer this rank's kernel ran than the shortest one of that "
            "call, the rank it waited for most in brackets.</p>")
    if len(run.ranks) <= TABLE_PER_RANK:
        parts = []
        for rank in run.ranks:
            rows = [_rank_row(f"#{int(r.step)}", r) for r in df[df["rank"] == rank].itertuples()]
            verdict = run.verdicts[rank].bound
            parts.append(f"<h3>Rank {rank}: {html.escape(verdict)}</h3>" + _table(_RANK_HEAD, rows))
        return "".join(parts) + note
    means = df.groupby("rank", as_index=False).agg(
        compute_us=("compute_us", "mean"), comm_us=("comm_us", "mean"), overlap_us=("overlap_us", "mean"),
        exposed_us=("exposed_us", "mean"), idle_us=("idle_us", "mean"), wait_us=("wait_us", "mean"),
        waited_for=("waited_for", lambda x: x.mode().iloc[0] if x.notna().any() else None))
    rows = [_rank_row(f"rank {int(r.rank)}", r) for r in means.itertuples()]
    return _table(["rank (mean per step)", *_RANK_HEAD[1:]], rows) + note


#: Rows of the arrivals table; the rest of the ranks are counted under it.
ARRIVAL_ROWS = 16


def _stragglers(run: RunAnalysis) -> str:
    rows = []
    for r in run.stragglers.head(ARRIVAL_ROWS).itertuples():
        rows.append(_cell(f"rank {int(r.rank)}") + _cell(f"{int(r.arrived_last)} of {int(r.calls)}", num=True)
                    + _cell(_ms(r.late_us), num=True) + _cell(_ms(r.wait_us), num=True)
                    + _cell(run.verdicts[int(r.rank)].bound))
    more = len(run.stragglers) - ARRIVAL_ROWS
    rest = (f'<p class="pg-note">{more} more ranks, each of which kept the others waiting less than those above.</p>'
            if more > 0 else "")
    return (_table(["rank", "arrived last at", "the others waited for it, ms / step", "it waited, ms / step",
                    "its verdict"], rows) + rest
            + '<p class="pg-note">A collective\'s kernel runs until every rank of its group has arrived. The rank '
            "whose kernel is the shortest arrived last; each other rank waited its kernel's duration minus that "
            "shortest one. <i>The others waited for it</i> adds up, over the collectives it arrived last at, the "
            "longest of those waits; durations need no shared clock, so this holds across hosts.</p>")


def _collectives(run: RunAnalysis) -> str:
    df = run.collectives
    if df.empty:
        return "<p>No collective call with an NCCL kernel was found in the steps.</p>"
    rows = []
    for r in df.itertuples():
        how = " ".join(x for x in (r.algorithm, r.protocol) if x)
        label = f"{r.collective} {r.dtype}" + (f" ({how})" if how else "")
        size = _bytes(r.bytes) if r.bytes and not math.isnan(r.bytes) else "–"
        transfer = f"{r.transfer_us:,.0f} ({r.transfer_min_us:,.0f}–{r.transfer_max_us:,.0f})"
        if math.isnan(r.of_sweep):
            against = "–"
        else:
            against = f"{r.of_sweep:.0%} of {r.sweep_gbps:,.0f} ({r.regime})"
            if not r.in_sweep_range:
                against += ", outside the sweep's sizes"
        rows.append(_cell(label, cls="name") + _cell(size, num=True) + _cell(f"{r.per_step:g}", num=True)
                    + _cell(transfer, num=True) + _cell("–" if math.isnan(r.busbw_gbps) else f"{r.busbw_gbps:,.0f}",
                                                        num=True) + _cell(against, num=True))
    table = _table(["collective (algorithm, protocol)", "size", "calls / step", "transfer µs, median (min–max)",
                    "bus bandwidth GB/s", "against the sweep at that size"], rows)
    note = ('<p class="pg-note">Transfer time: the shortest duration of the call\'s kernel across the ranks of its '
            "group (the rest is waiting), as TraceLens's NCCL analyser defines it. Bus bandwidth as nccl-tests "
            "defines it: the full buffer over the transfer time (GB = 10⁹ bytes), times 2(n−1)/n for all-reduce "
            "and (n−1)/n for all-gather and reduce-scatter. Sizes from <code>record_param_comms</code>; algorithm "
            "and protocol from the kernel's name.</p>")
    return table + note + _exposed(run)


def _exposed(run: RunAnalysis) -> str:
    unexplained = run.exposed_unexplained_us
    top = run.collectives.iloc[0]
    span = float(run.per_rank["span_us"].median()) if len(run.per_rank) else 0.0
    share = f" ({unexplained / span:.1%} of a step)" if span else ""
    text = (f"Beyond waiting for other ranks, {fmt_us(unexplained)} of communication per step{share} ran on the "
            "average rank with no compute beside it: the transfers themselves, not hidden.")
    sweep: Sweep | None = run.sweep
    if sweep is None:
        text += (" Give a sweep measured on this machine (--nccl-sweep FILE, written by profiling-guide bench-nccl) "
                 "to say whether they are latency- or bandwidth-bound.")
    elif top["regime"]:
        best = sweep.best_busbw(top["collective"])
        size = _bytes(top["bytes"])
        if top["regime"] == "latency-bound":
            advice = "fewer, larger calls (larger buckets) would help"
        else:
            advice = "fewer bytes, or more of the transfer hidden behind compute, would help; larger calls would not"
        text += (f" At {size} the sweep's {top['collective']} is {top['regime']} (it reaches "
                 f"{top['sweep_gbps']:,.0f} GB/s of bus bandwidth there, {top['sweep_gbps'] / best:.0%} of its best, "
                 f"{best:,.0f} GB/s): {advice}. This run's {top['collective']} calls of {size} reached "
                 f"{top['busbw_gbps']:,.0f} GB/s, {top['of_sweep']:.0%} of the sweep at that size"
                 + ("" if top["bytes"] in {r.bytes for r in sweep.rows} else " (read between its measured sizes)")
                 + ".")
    else:
        text += f" The sweep {sweep.source} has no {top['collective']} rows to compare with."
    return f"<p>{html.escape(text)}</p>"


def _environment(run: RunAnalysis, env: dict) -> str:
    rows = [f"<th>{html.escape(k)}</th>" + _cell(v) for k, v in env.items()]
    if run.sweep is not None:
        sweep = run.sweep
        what = ", ".join(x for x in (sweep.gpu, f"{sweep.world_size} ranks" if sweep.world_size else None) if x)
        rows.append("<th>NCCL sweep</th>" + _cell(f"{sweep.source}" + (f" ({what})" if what else "")))
    clocks = ("aligned by where their collectives end (offsets up to "
              f"{fmt_us(max(abs(v) for v in run.offsets_us.values()))})" if run.aligned else
              "one clock: collectives end within "
              f"{fmt_us(max((abs(v) for v in run.offsets_us.values()), default=0.0))} of each other, as recorded")
    rows.append("<th>clocks</th>" + _cell(clocks))
    return _table(None, rows)


def render_run_html(run: RunAnalysis, env: dict, timeline: dict | None, timeline_step: int | None,
                    activity=None, *, shown: list[int] = (), title: str = "run",
                    sources: dict[int, str] | None = None) -> str:
    """The run's report page as one HTML string; ``shown`` are the ranks the timeline draws."""
    sections = [
        *([("verdict", "What makes the step slow", run_verdict_section(run.verdict))] if run.verdict else []),
        ("waits", "Who keeps the others waiting", _who_waits(run, activity)),
        ("verdicts", "Who sets each rank's pace (profiler on)", _verdicts(run)),
        ("ranks", "Each rank's time per step", _per_rank(run)),
        ("stragglers", "Arrivals at the collectives", _stragglers(run)),
        ("collectives", "Collectives", _collectives(run)),
    ]
    if timeline is not None:
        sections.append(("timeline", f"Timeline of ProfilerStep#{timeline_step}, {_ranks_text(shown)}",
                         timeline_html(timeline) + '<p class="pg-note">Each rank\'s <code>record_function</code> '
                         "labels and outermost CPU ops, and one lane per GPU stream, on one time axis"
                         + (" (clocks aligned by the collectives' ends)" if run.aligned else "")
                         + (f"; {len(run.ranks) - len(shown)} more ranks are in the merged trace "
                            "(<code>--merge OUT.json</code>)" if len(shown) < len(run.ranks) else "")
                         + ". Choose another step with <code>--step N</code>.</p>"))
    sections.append(("environment", "Environment", _environment(run, env)))
    notes = run_notes(run)
    if sources:
        notes.append("traces: " + "; ".join(f"rank {r}: {Path(p).name}" for r, p in sorted(sources.items())[:16])
                     + (" …" if len(sources) > 16 else ""))
    if notes:
        sections.append(("notes", "Notes", "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"))
    nav = " · ".join(f'<a href="#{sid}">{html.escape(head.split(",")[0])}</a>' for sid, head, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{html.escape(head)}</h2>{content}</section>'
                   for sid, head, content in sections)
    lede = (f"{len(run.ranks)} ranks · steps {', '.join(f'#{s}' for s in run.steps)} · "
            f"{len(run.calls):,} collective calls matched across ranks · tables are per step")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        f"<title>Run report: {html.escape(title)}</title><style>{_CSS}{_RUN_CSS}</style></head><body>"
        f'<main class="pg-report"><h1>Run report <span class="pg-file">{html.escape(title)}</span></h1>'
        f'<p class="pg-lede">{html.escape(lede)}</p><nav>{nav}</nav>{body}'
        f"<footer>Written by profiling-guide {html.escape(__version__)} (<code>profiling-guide report</code> over "
        "the traces of every rank).</footer></main></body></html>\n"
    )


_RUN_CSS = """
.pg-v-collectives{border-color:#34495e}.pg-verdicts li{margin:.35em 0}
h3{font-size:1.02em;margin:1.1em 0 .3em}
"""


def ranks_text(ranks: list[int]) -> str:
    """``rank 3``, ``ranks 0, 1`` or ``ranks 0 to 7`` (a run of consecutive ranks)."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]} to {ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks[:12])) + (" …" if len(ranks) > 12 else "")


def gpus_text(run: RunAnalysis) -> str | None:
    """The GPU the ranks ran on; where they differ, each with its ranks."""
    found = run.gpu_ranks()
    if len(found) <= 1:
        return next(iter(found), None)
    return "; ".join(f"{name} ({ranks_text(ranks)})" for name, ranks in found.items())


def run_notes(run: RunAnalysis) -> list[str]:
    """What the run's numbers leave out or mix: ranks without a trace, GPUs that differ, kernels and calls
    matched to nothing."""
    notes = []
    if len(run.gpu_ranks()) > 1:
        notes.append(f"The ranks ran on different GPUs ({gpus_text(run)}): the same work takes a different time on "
                     "each, so a rank on the slower GPU may keep the others waiting with no fault of its own.")
    if run.missing:
        shown = ", ".join(map(str, run.missing[:12])) + (" …" if len(run.missing) > 12 else "")
        notes.append(f"{len(run.missing)} rank(s) of the world have no trace here ({shown}): a collective's last "
                     "rank and every wait are among the ranks given.")
    if run.unmatched_kernels:
        notes.append(f"{run.unmatched_kernels} NCCL kernel(s) in the steps were launched by no record_param_comms "
                     "op: they count as communication time but are matched to no call.")
    if run.untimed_calls:
        notes.append(f"{run.untimed_calls} collective call(s) launched no NCCL kernel the trace shows (a barrier, "
                     "or calls coalesced into one kernel): they are left out of the collectives table.")
    return notes


# ------------------------------------------------------------- writing it
def default_run_report_path(names: list[str | Path]) -> Path:
    """``<folder>.report.html`` here for one folder given, else ``<first trace's folder>.report.html``."""
    first = Path(names[0])
    folder = first if first.is_dir() else first.parent
    stem = folder.resolve().name or "run"
    return Path(f"{stem}.report.html")


def _environment_of(trace: Trace, world: int, ranks: int, run: RunAnalysis) -> dict:
    info, env = rank_info(trace.metadata), {}
    if gpus_text(run):
        env["GPUs (mixed)" if len(run.gpu_ranks()) > 1 else "GPU"] = gpus_text(run)
    env["world size"] = f"{world} ({ranks} traces given)"
    if info.backend:
        env["backend"] = info.backend
    if info.nccl_version:
        env["NCCL"] = info.nccl_version
    if info.groups:
        env["process groups"] = "; ".join(f"{name}: {len(ranks_)} ranks" for name, ranks_ in info.groups[:8])
    return env


def _timeline_ranks(run: RunAnalysis) -> list[int]:
    ranks = list(run.ranks)
    if len(ranks) <= TIMELINE_RANKS:
        return ranks
    chosen = []
    if run.straggler is not None:
        chosen.append(run.straggler)
    waited = run.per_rank.groupby("rank")["wait_us"].mean().sort_values(ascending=False)
    chosen += [int(r) for r in waited.index[:1] if int(r) not in chosen]
    chosen += [r for r in ranks if r not in chosen][: TIMELINE_RANKS - len(chosen)]
    return sorted(chosen)


def _timeline_step(run: RunAnalysis, step: int | None) -> int:
    if step is not None:
        if step not in run.steps:
            raise GuideError(f"there is no step {step} on every rank: the ranks share steps "
                             + ", ".join(map(str, run.steps)))
        return step
    spans = run.per_rank.groupby("step")["span_us"].mean().sort_values(kind="stable")
    return int(spans.index[(len(spans) - 1) // 2])


def write_run_report(paths: list[Path], out_path: str | Path | None = None, *, step: int | None = None,
                     sweep: Sweep | str | Path | None = None, merge: str | Path | None = None,
                     progress: bool | None = None, title: str | None = None, json_out: str | Path | None = None,
                     on_verdict=None) -> Path:
    """Analyse the traces of every rank of a run and write its HTML page; returns the page's path.

    ``paths`` are the ranks' trace files (any order); ``out_path`` defaults to
    ``<folder>.report.html`` here. ``step`` picks the timeline's step;
    ``sweep`` is a measured NCCL sweep (a :class:`~profiling_guide.analysis.bandwidth.Sweep`
    or its file); ``merge`` also writes every rank's events into one Chrome
    trace there. Progress lines go to stderr (default: for 8 ranks or more).
    """
    paths = [Path(p) for p in paths]
    inputs, out, merge_out = _outputs(paths, out_path, merge, json_out, sweep)
    if isinstance(sweep, (str, Path)):
        sweep = read_sweep(sweep)
    say = _Progress(progress if progress is not None else len(paths) >= PROGRESS_RANKS)
    run, sources, world, dist = _analysed(paths, sweep, say)
    number = _timeline_step(run, step)
    shown = _timeline_ranks(run)
    again = _read_again(run, sources, number, shown, world, say)
    if run.culprit is not None:
        run.verdict = run_verdict(run.culprit, run.timings, again.rank_verdict, again.read)
    say(f"writing {out}")
    page = render_run_html(run, again.env, again.timeline.data(), number, again.activity, shown=shown,
                           title=title or default_run_report_path(paths).name.removesuffix(".report.html"),
                           sources={r: str(p) for r, p in sources.items()})
    with atomic_output(out, suffix=".html", inputs=inputs) as tmp:
        tmp.write_text(page, encoding="utf-8")
    if json_out is not None:
        write_json(run_json(run, {r: str(p) for r, p in sources.items()}), json_out, inputs=[*inputs, out])
    if on_verdict is not None and run.verdict is not None:
        on_verdict(run_verdict_sentence(run.verdict))
    if merge_out is not None:
        say(f"merging {len(sources)} traces into {merge_out}")
        write_merged(sources, merge_out, offsets_us=run.offsets_us if run.aligned else None,
                     metadata={"distributedInfo": dist} if dist else None)
    say("done")
    return out


def _outputs(paths: list[Path], out_path, merge, json_out, sweep) -> tuple[list, Path, Path | None]:
    """The files read (never written over), and the page and merged trace to write, each checked writable first."""
    inputs = [*paths, *([sweep] if isinstance(sweep, (str, Path)) else [])]
    out = check_writable(out_path if out_path is not None else default_run_report_path(paths), inputs=inputs)
    merge_out = check_writable(merge, inputs=[*inputs, out]) if merge is not None else None
    if json_out is not None and str(json_out) != "-":
        check_writable(json_out, inputs=[*inputs, out, *([merge_out] if merge_out else [])])
    return inputs, out, merge_out


def _analysed(paths: list[Path], sweep, say) -> tuple:
    """The run analysed from each rank's summary (one trace in memory at a time): the run, each rank's trace
    file, the world size the traces claim, and the first ``distributedInfo`` found."""
    sources: dict[int, Path] = {}
    world, dist = [0], {}

    def reduce(trace: Trace, info):
        sources[info.rank] = Path(trace.source)
        world[0] = info.world_size or 0
        if not dist and isinstance(trace.metadata.get("distributedInfo"), dict):
            dist.update(trace.metadata["distributedInfo"])
        return summarize_rank(trace, info.rank)

    summaries, missing = read_run(paths, reduce, progress=say)
    say(f"matching collectives across {len(summaries)} ranks")
    return analyse_run(summaries, sweep=sweep, missing=missing), sources, world[0], dist


@dataclass
class _ReadAgain:
    """What the page needs from the ranks read a second time."""

    read: int  # the rank whose own causes are read: the culprit, else the lowest
    timeline: RanksTimeline
    activity: object = None
    env: dict = field(default_factory=dict)
    rank_verdict: object = None


def _read_again(run, sources: dict[int, Path], number, shown: list[int], world: int, say) -> _ReadAgain:
    """The ranks the page shows, the culprit's (or with none the lowest rank's) for its own causes, and the
    straggler's, each read again, one at a time."""
    again = _ReadAgain(run.culprit.culprit if run.culprit and run.culprit.culprit is not None else min(sources),
                       RanksTimeline())
    for rank in sorted(set(shown) | {again.read} | ({run.straggler} if run.straggler is not None else set())):
        say(f"reading rank {rank} again for the page")
        trace = Trace.load(sources[rank])
        if not again.env:
            again.env = _environment_of(trace, world, len(sources), run)
        if rank == again.read:
            again.rank_verdict = verdict_of(trace, trace.steps, rank=rank)
        if rank == run.straggler:
            again.activity = straggler_activity(trace, rank, run.calls)
        if rank in shown:
            chosen = next(s for s in trace.steps if s.number == number)
            again.timeline.add(f"r{rank}", chosen, run.offsets_us.get(rank, 0.0) if run.aligned else 0.0)
        del trace
    return again

