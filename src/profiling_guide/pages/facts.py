"""The lines of facts the pages print: :class:`Facts`, and one function per kind of fact.

Prose in an example never hard-codes a number a trace can supply: where a
sentence needs one, the example computes the sentence and shows it as
:class:`Facts`, rendered as ordinary paragraphs on the page. Each function
here takes recordings, tables or benchmark results and returns the
:class:`Facts` of one or a few short lines of numbers. What the numbers mean
is the page's prose; a sentence whose truth depends on the GPU is a judged
claim (:mod:`profiling_guide.analysis.expect`), so nothing here picks its
words by a condition.
"""

from __future__ import annotations

import html
import re
from collections import Counter

import pandas as pd

from profiling_guide.analysis.causes import Cause
from profiling_guide.analysis.launches import (
    changed_launches,
    kernel_launches,
    mover,
    paired_gemms,
    ranking_changes,
    resident_blocks,
)
from profiling_guide.analysis.step_graph import sm_count
from profiling_guide.analysis.roofline import (
    CEILING_COLUMN,
    REFERENCE_COLUMN,
    datasheet_bound_us,
)
from profiling_guide.output import echo
from profiling_guide.spread import Spread, compare


#: The report's causes (``docs/report.md``, "The verdict"): set in code type wherever a sentence names one.
#: (the two-word ones: ``memcpy`` and ``allocator`` are also plain words of a sentence)
CAUSE_WORDS = re.compile(r"\b(" + "|".join(c.value for c in Cause if "_" in c.value) + r")\b")


class Facts:
    """One or more computed sentences; renders as paragraphs (HTML) or lines (text)."""

    def __init__(self, *sentences: str, links: dict[str, str] | None = None):
        self.sentences = [s for s in sentences if s]
        self.links = links or {}  # phrase -> href: the phrase's first use on the page becomes a link
        echo(self)

    def __repr__(self) -> str:
        return "\n".join(self.sentences)

    def _repr_html_(self) -> str | None:
        if not self.sentences:  # nothing to say: no empty box on the page
            return None
        pending = dict(self.links)
        paragraphs = []
        for s in self.sentences:
            text = CAUSE_WORDS.sub(r"<code>\1</code>", html.escape(s))
            for phrase, href in list(pending.items()):
                escaped = html.escape(phrase)
                if escaped in text:
                    text = text.replace(escaped, f'<a href="{html.escape(href)}">{escaped}</a>', 1)
                    del pending[phrase]
            paragraphs.append(f"<p>{text}</p>")
        return '<div class="pg-facts">' + "".join(paragraphs) + "</div>"


def _spread(d: dict) -> Spread:
    return Spread.from_dict(d)


# ------------------------------------------------------------------ reference rates
def reference_rates(refs: dict) -> Facts:
    """The rates measured in this run, and the datasheet ceilings of the GPU (where it has them).

    ``refs``: :func:`profiling_guide.measure.timing.reference_rates`' result.
    """
    gemm, copy, sheet = refs["gemm_tflops"], refs["copy_tbps"], refs.get("datasheet")
    measured = (f"Reference rates measured in this run: {_spread(gemm['spread']):.0f} TFLOP/s for a "
                f"bf16 cuBLAS GEMM (best at {gemm['source']}), {_spread(copy['spread']):.2f} TB/s for a "
                f"device-to-device copy ({copy['source']}).")
    if not sheet:
        return Facts(measured, "This GPU is not in the datasheet table: no ceiling.")
    return Facts(measured, f"Datasheet ceilings ({sheet['model']}, {sheet['source']}): "
                           f"{sheet['bf16_tflops']:.0f} TFLOP/s dense bf16, {sheet['hbm_tbps']:.2f} TB/s HBM.")


def gemm_rates(gemms: pd.DataFrame) -> Facts:
    """How many distinct GEMM kernels ran, and the range of their rates (a :func:`~.tables.gemm_table`)."""
    ref = gemms[REFERENCE_COLUMN]
    rates = [f"{ref.min():.0f}–{ref.max():.0f}% of the measured reference"]
    ceiling = gemms[CEILING_COLUMN].dropna() if CEILING_COLUMN in gemms else ref.iloc[:0]
    if len(ceiling):
        rates.append(f"{ceiling.min():.0f}–{ceiling.max():.0f}% of the datasheet ceiling")
    lines = [f"GEMM kernels: {gemms['kernel'].nunique()} distinct for {len(gemms)} products of "
             f"{gemms['GFLOP'].iloc[0]:.1f} GFLOP each.", "Their rates: " + ", ".join(rates) + "."]
    return Facts(*lines)


# ------------------------------------------------------------------ timings
def profiler_off(timings: dict) -> Facts:
    """A recording's three profiler-off timings, medians over repeats with their IQR."""
    t = timings
    return Facts(f"Profiler off, medians over repeats (IQR): device time {t['device_us']:.1f} µs "
                 f"per forward, CPU issue time {t['cpu_issue_us']:.1f} µs, wall time per call "
                 f"{t['wall_us_per_call']:.1f} µs.")


def timing(what: str, spreads: dict[str, Spread], *, unit: str = "µs") -> Facts:
    """``"<what>: a 12.3 (IQR …) µs, b 45.6 (IQR …) µs."``: one timing of several runs."""
    return Facts(f"{what}: " + ", ".join(f"{name} {s:.1f} {unit}" for name, s in spreads.items()) + ".")


def first_call(seconds: float) -> Facts:
    """The wall time of the first compiled call, which traces, compiles and loads."""
    return Facts(f"The first compiled call took {seconds:.1f} s (tracing, compiling, loading).")


# ------------------------------------------------------------------ the intermediate
def intermediate_round_trip(trace, pointwise: pd.DataFrame, *, intermediate_bytes: int,
                            references: dict, flops: float, min_bytes: float) -> Facts:
    """What eager's GeLU and mul cost, and what the fewest passes over the intermediate would.

    ``pointwise``: the pointwise rows of :func:`~.roofline.kernel_work_table`;
    ``flops`` and ``min_bytes``: the whole MLP's work and its least HBM traffic.
    """
    n = max(len(trace.steps), 1)
    spent = pointwise["avg_us"].sum()
    step = sum(k.dur_us for s in trace.steps for k in s.kernels) / n  # kernels only: memsets are not kernels
    kinds = Counter(ev.kind for s in trace.steps for ev in s.device_events if ev.kind != "kernel")
    left_out = "".join(f", its {count / n:g} {kind}{'' if count == n else 's'} per forward left out"
                       for kind, count in kinds.items())
    lines = [
        f"The intermediate is {intermediate_bytes / 1e6:.1f} MB per tensor. GeLU and mul take "
        f"{spent:.1f} µs of the GPU's {step:.1f} µs of kernel time per profiled forward "
        f"({100 * spent / step:.0f}%{left_out}).",
        f"At the measured copy bandwidth, the three passes a fused GeLU·mul needs would take "
        f"{3 * intermediate_bytes / references['copy_tbps']['rate'] / 1e6:.1f} µs.",
    ]
    sheet = references.get("datasheet")
    if sheet:
        lines.append(f"The datasheet bound of the whole MLP is "
                     f"{datasheet_bound_us(flops, min_bytes, sheet):.1f} µs.")
    return Facts(*lines)


def intermediate_traffic(rows: int, hidden: int, element: int, passes: dict[str, int]) -> Facts:
    """The bytes one pass over the ``[rows, hidden]`` intermediate moves, and each variant's total."""
    one = rows * hidden * element
    return Facts(f"At this shape one pass is {rows}·{hidden}·{element} B = {one / 1e6:.1f} MB.",
                 "Intermediates per forward: " + ", ".join(
                     f"{name} {n * one / 1e6:.0f} MB" for name, n in passes.items()) + ".")


def pointwise_per_step(runs: dict) -> Facts:
    """Each run's pointwise kernel time per profiled forward: least and most over its steps."""
    parts = []
    for name, rec in runs.items():
        steps = rec.trace.steps
        per_step = [sum(k.dur_us for k in s.kernels if k.decoded.kind == "pointwise")
                    for s in steps]
        kernels = sum(k.decoded.kind == "pointwise" for k in steps[0].kernels)
        parts.append(f"{name} {min(per_step):.1f}–{max(per_step):.1f} µs ({kernels} per forward)")
    return Facts(f"Pointwise kernels, time per profiled forward over {len(steps)} steps: "
                 + ", ".join(parts) + ".")


# ------------------------------------------------------------------ compilation
def recompilations(sweep: pd.DataFrame) -> Facts:
    """Per compile setting: compilations, first-call wall time, device time at the first shape."""
    return Facts(*[
        f"{setting}: {int(group['compilations'].sum())} compilation(s) over {len(group)} shapes, "
        f"{group['first_call_ms'].sum() / 1e3:.1f} s of wall time in first calls; device time "
        f"{group['device_us'].iloc[0]:.1f} µs per forward at the original shape."
        for setting, group in sweep.groupby("setting", sort=False)
    ])


# ------------------------------------------------------------------ kernels
def liger_launch(kernel, settings: dict, hidden: int) -> Facts:
    """What ``calculate_settings`` picked for Liger's kernel, and what the trace shows was launched."""
    return Facts(
        f"calculate_settings({hidden}) → BLOCK_SIZE={settings['block_size']}, "
        f"num_warps={settings['num_warps']}.",
        f"The trace shows grid {kernel.grid} and block {kernel.block} ({kernel.block[0] // 32} warps "
        f"of 32 threads), {kernel.args.get('registers per thread', '?')} registers per thread, "
        f"launched with {kernel.launch.name}.",
    )


def fused_kernels(work: pd.DataFrame, benchmark_us: Spread) -> Facts:
    """The epilogue-fused forward's two kernels (a :func:`~.roofline.kernel_work_table`) and their sum."""
    gate_up = work[work["kernel"].str.contains("geglu")].iloc[0]
    down = work[(work["kind"] == "gemm") & ~work["kernel"].str.contains("geglu")].iloc[0]
    return Facts(
        f"In the profiled forward the fused gate/up kernel takes {gate_up['avg_us']:.1f} µs "
        f"({gate_up[REFERENCE_COLUMN]:.0f}% of the best cuBLAS rate measured in this run, GeLU·mul "
        f"and the store of h included); the cuBLAS down GEMM {down['avg_us']:.1f} µs "
        f"({down[REFERENCE_COLUMN]:.0f}%).",
        f"The two kernels add up to {gate_up['avg_us'] + down['avg_us']:.1f} µs in the profiled step; "
        f"the benchmark's device time per forward is {benchmark_us:.1f} µs.",
    )


# ------------------------------------------------------------------ the benchmark
def reference_and_bound(result: dict) -> Facts:
    """What a :func:`~.bench_mlp.run_benchmark` result measures the variants against.

    The reference: cuBLAS's three GEMMs alone, timed in the same passes (a
    kernel that computes the products itself may beat it). The datasheet
    bound: the least time the MLP can take at the datasheet's peaks (nothing
    runs faster).
    """
    alone, bound = _spread(result["gemms_alone_us"]), result["datasheet_bound_us"]
    sheet = result["references"].get("datasheet")
    lines = [f"Reference, cuBLAS's three GEMMs alone: {alone:.1f} µs."]
    if bound and sheet:
        lines.append(f"Datasheet bound: {bound:.1f} µs ({sheet['model']}: {result['flops'] / 1e9:.1f} "
                     f"GFLOP at {sheet['bf16_tflops']:.0f} TFLOP/s).")
    return Facts(*lines)


#: How a page names a kernel's library (:attr:`~profiling_guide.trace.kernel_names.KernelName.library`).
LIBRARY_NAMES = {"cublas": "cuBLAS", "cutlass": "CUTLASS", "triton": "Triton", "cudnn": "cuDNN", "aten": "ATen"}


def _library(launches) -> str:
    return " and ".join(dict.fromkeys(LIBRARY_NAMES.get(k.library, k.library) for k in launches))


def _listed(values) -> str:
    """``"a"``, ``"a or b"``, ``"a, b or c"``: the distinct values, in order."""
    distinct = list(dict.fromkeys(values))
    return distinct[0] if len(distinct) == 1 else ", ".join(distinct[:-1]) + " or " + distinct[-1]


def _launch_shape(launches, trace) -> str:
    """``"1,536 blocks of 128 threads, 384 of 256"`` (distinct launches), ``"one per SM"`` where the grid is."""
    shapes = list(dict.fromkeys((k.blocks, k.threads) for k in launches))
    text = ", ".join(f"{b:,} {'blocks ' if i == 0 else ''}of {t} threads" for i, (b, t) in enumerate(shapes))
    sms = sm_count(trace)
    return text + (", one per SM" if sms and all(b == sms for b, _ in shapes) else "")


def _warps_per_sm(launches, trace) -> str:
    held = [resident_blocks(k, trace) for k in launches]
    return _listed([f"{n * k.warps}" for n, k in zip(held, launches, strict=True) if n]) if all(held) else "?"


def autotuned_gemms(autotuned, eager) -> Facts:
    """max-autotune's GEMM kernels beside eager's on the same products, from the two traces of one run.

    ``autotuned`` and ``eager``: the two profiled recordings (``autotuned``
    None where max-autotune did not run). The GEMMs are paired in launch order
    (:func:`~profiling_guide.analysis.launches.paired_gemms`); for the kernels
    max-autotune ran in place of eager's, the sentence gives their summed mean
    µs against eager's, each kernel's launch (blocks of threads, and how many
    outputs of its product each block computes, where the grid divides them
    evenly) and how many warps its registers and shared memory let one SM hold
    (:func:`~profiling_guide.analysis.launches.resident_blocks`); for the
    kernels it kept, that they are eager's.
    """
    if autotuned is None:
        return Facts("max-autotune did not run on this GPU: no GEMMs of its own to compare.")
    autotuned, eager = autotuned.trace, eager.trace
    pairs = paired_gemms(autotuned, eager)
    other = [(a, e) for a, e in pairs if a.name != e.name]
    kept = [e for a, e in pairs if a.name == e.name]
    if not other:
        mine, theirs = sum(a.us for a, _ in pairs), sum(e.us for _, e in pairs)
        return Facts(f"At this shape max-autotune kept eager's {_library(kept)} kernels for all {len(pairs)} "
                     f"GEMMs, launched as in eager's trace ({_launch_shape(kept, eager)}): {mine:.1f} µs "
                     f"per profiled forward against {theirs:.1f} µs in eager's trace, the same kernels "
                     "profiled twice.")
    ours, theirs = [a for a, _ in other], [e for _, e in other]
    mine_us, their_us = sum(k.us for k in ours), sum(k.us for k in theirs)
    per_block = [f"{k.product[0] * k.product[2] // k.blocks:,}" for k in ours
                 if k.product and k.blocks and k.product[0] * k.product[2] % k.blocks == 0]
    outputs = f"one block per {_listed(per_block)} outputs ({_launch_shape(ours, autotuned)})" \
        if len(per_block) == len(ours) else _launch_shape(ours, autotuned)
    rest = f"; for the other {len(kept)} it kept eager's kernels" if kept else ""
    return Facts(
        f"For {len(other)} of its {len(pairs)} GEMMs max-autotune ran {_library(ours)} kernels in place of "
        f"eager's {_library(theirs)} ones, {mine_us:.1f} µs per profiled forward against {their_us:.1f} µs "
        f"for the same products ({mine_us / their_us:.2f}×): its kernels launch {outputs}, and their "
        f"registers and shared memory let at most {_warps_per_sm(ours, autotuned)} warps share an SM, "
        f"where eager's launch {_launch_shape(theirs, eager)}, {_warps_per_sm(theirs, eager)} warps "
        f"each{rest}.")


def _date(rec) -> str:
    """A run record's date as ``2026-11-24 22:15 UTC``."""
    date = str(rec.run.get("date", "?"))
    return f"{date[:10]} {date[11:16]} UTC" if len(date) >= 16 else date


GEMMS_ALONE = "GEMMs alone"


def _bench_times(values: dict, names) -> dict[str, Spread]:
    times = {n: _spread(values["variants_us"][n]) for n in names if n in values["variants_us"]}
    return times | {GEMMS_ALONE: _spread(values["gemms_alone_us"])}


def two_runs(runs: dict[str, dict], shown) -> Facts:
    """Two runs of the MLP benchmark on one GPU: their dates, where they rank ``shown`` differently, and why.

    ``runs``: two entries, the earlier run first, each ``label → {"bench":
    recording, variant: its profiled recording...}`` (a recording None where
    that run has none). Compared: the variants in ``shown`` and cuBLAS's
    GEMMs alone. For each pair ranked differently
    (:func:`~profiling_guide.analysis.launches.ranking_changes`), the one of
    the two whose time changed more (:func:`~profiling_guide.analysis.launches.mover`)
    is named with both pairs of times and, where both runs profiled it, with
    its kernel time per profiled forward in each trace and the kernels whose
    launch differs between the two traces
    (:func:`~profiling_guide.analysis.launches.changed_launches`).
    """
    (first, a), (second, b) = runs.items()
    alone = _one_run(first, a, b)
    if alone is not None:
        return alone
    ta, tb = _bench_times(a["bench"].values, shown), _bench_times(b["bench"].values, shown)
    lines = [f"Two runs of one benchmark: {first}'s, recorded {_date(a['bench'])}, and {second}'s, recorded "
             f"{_date(b['bench'])}; the table above is {second}'s."]
    changes = ranking_changes(ta, tb)
    if not changes:
        lines.append("Their rankings agree: every pair of these variants compares the same way in both runs "
                     "(a tie where the spreads overlap).")
        return Facts(*lines)
    for name, pairs in _movers(changes, ta, tb, first, second).items():
        lines.append(f"Ranked otherwise: {name} " + "; ".join(pairs) + ".")
        lines.append(_kernels_of(name, a.get(name), b.get(name), first, second))
    return Facts(*lines)


def _one_run(first: str, a: dict, b: dict) -> Facts | None:
    """What to say where there is no second run to compare: the first run's benchmark missing, recorded on
    another GPU, or the very same run; None where there are two."""
    if a.get("bench") is None:
        return Facts(f"{first[:1].upper()}{first[1:]}'s benchmark is not recorded on this GPU: no other run to "
                     "compare this one with.")
    va, vb = a["bench"].values, b["bench"].values
    if (va.get("gpu") or {}).get("name") != (vb.get("gpu") or {}).get("name"):
        return Facts(f"{first[:1].upper()}{first[1:]}'s benchmark was recorded on another GPU: no run of its "
                     "to compare on this one.")
    if va["variants_us"] == vb["variants_us"] and va["gemms_alone_us"] == vb["gemms_alone_us"]:
        return Facts(f"The benchmark above is {first}'s run itself, recorded {_date(a['bench'])}: "
                     "both pages read one run.")
    return None


def _movers(changes: list, ta: dict[str, Spread], tb: dict[str, Spread], first: str, second: str
            ) -> dict[str, list[str]]:
    """Each pair ranked differently, said of the variant of the two whose time changed more
    (:func:`~profiling_guide.analysis.launches.mover`): variant → what it was against each other one."""
    flip = {"faster": "slower", "slower": "faster", "tie": "tie"}
    movers: dict[str, list[str]] = {}
    for x, y, v1, v2 in changes:
        if mover(x, y, ta, tb) == y:  # the variant that moved comes first
            x, y, v1, v2 = y, x, flip[v1], flip[v2]
        movers.setdefault(x, []).append(
            f"against {y}, {_verdict_words(v1)} in {first}'s run ({ta[x].median:.1f} against "
            f"{ta[y].median:.1f} µs) and {_verdict_words(v2)} in {second}'s ({tb[x].median:.1f} against "
            f"{tb[y].median:.1f} µs)")
    return movers


def _kernels_of(name: str, ra, rb, first: str, second: str) -> str:
    """A variant's kernels in the two runs' traces: their time per forward, and the launches that differ."""
    if ra is None or rb is None:
        kept = first if ra is not None else second if rb is not None else None
        return (f"Only {kept}'s run kept a trace of {name}: which kernels it ran in the other is not "
                "recorded." if kept else f"Neither run kept a trace of {name}.")
    ka, kb = kernel_launches(ra.trace), kernel_launches(rb.trace)
    line = (f"In the two runs' traces {name}'s kernels add up to {sum(k.us for k in ka):.1f} and "
            f"{sum(k.us for k in kb):.1f} µs per forward")
    if len(ka) != len(kb):
        return f"{line}, in {len(ka)} and {len(kb)} kernels."
    changed = changed_launches(ra.trace, rb.trace)
    line += ("; launched otherwise: " + "; ".join(
        f"{x.kernel}, {x.blocks:,} blocks of {x.threads} threads and {x.us:.1f} µs in {first}'s, "
        f"{'' if y.name == x.name else y.kernel + ', '}{y.blocks:,} blocks of {y.threads} threads and "
        f"{y.us:.1f} µs in {second}'s" for x, y in changed)
             if changed else ", every kernel launched the same way in both")
    return line + "."


def ranking(times: dict[str, Spread]) -> Facts:
    """Variants by median device time, and each one's verdict (:func:`~.spread.compare`) against the next."""
    ranked = sorted(times, key=lambda n: times[n].median)
    return Facts(
        "Ranked by median: " + ", ".join(f"{n} {times[n].median:.0f} µs" for n in ranked) + ".",
        "Each against the next, outside the spreads or not: " + ", ".join(
            f"{a} {compare(times[a], times[b])}" for a, b in zip(ranked, ranked[1:], strict=False)) + ".",
    )


def time_by_kind(breakdown: dict[str, dict[str, float]], times: dict[str, Spread]) -> Facts:
    """Per variant: µs of GEMM and of other kernels per profiled forward, and the GEMMs' share of the median."""
    gemm = {n: kinds.get("gemm", 0.0) for n, kinds in breakdown.items()}
    rest = {n: sum(us for k, us in kinds.items() if k != "gemm") for n, kinds in breakdown.items()}
    return Facts(
        "GEMM kernel µs per profiled forward: " + ", ".join(f"{n} {us:.0f}" for n, us in gemm.items()) + ".",
        "Other kernels (GeLU, mul or their fusion): "
        + ", ".join(f"{n} {us:.0f} µs" for n, us in rest.items()) + ".",
        "GEMM kernels take " + ", ".join(f"{100 * gemm[n] / times[n].median:.0f}% of {n}'s median"
                                         for n in gemm if n in times) + ".",
    )


def diff_summary(diffs: dict) -> pd.DataFrame:
    """One row per :func:`~profiling_guide.analysis.diff.diff` against the same baseline: what matched, each side's
    device work and its largest change (from the traces, with how many samples), the step (from where the diff
    took it) and the report's verdict on each side."""
    import statistics

    from profiling_guide.analysis.diff import significant
    from profiling_guide.pages.verdict_sentences import NAMES

    def called(flag, a: int, b: int) -> str:
        return {True: "beyond the noise", False: "a tie"}.get(flag, f"not called ({a}, {b} samples)")

    def cause(side) -> str:
        verdict = side.report.verdict.verdict if side.report is not None else None
        return NAMES[verdict.cause].lower() if verdict is not None else "–"

    rows = {}
    for name, d in diffs.items():
        top = d.rows[0]  # the rows come largest change first
        rows[name] = {
            "matched": f"{100 * d.matched_share:.0f} %",
            f"device µs / step, {d.a.name} → it": f"{d.a.device_us:.0f} → {d.b.device_us:.0f}",
            "largest change": top.words(),
            "its µs": f"{statistics.median(top.a):.0f} → {statistics.median(top.b):.0f}, "
                      + called(significant(top.a, top.b), d.a.samples, d.b.samples),
            f"step µs, {d.a.name} → it": f"{d.a.step.median:.0f} → {d.b.step.median:.0f}, "
                                         + called(d.step_significant, d.a.step.repeats, d.b.step.repeats),
            "report's verdict": f"{cause(d.a)} → {cause(d.b)}",
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def sweep_summary(standing: pd.DataFrame) -> Facts:
    """How many shapes of a :func:`~.tables.sweep_standing` table the variant wins, against the best other
    variant and against cuBLAS's bare GEMMs, and the shapes where it loses to them."""
    n = len(standing)
    rivals = (standing["against it"] == "faster").sum()
    alone = standing["against GEMMs alone"]
    behind = ", ".join(standing.index[alone == "slower"]) or "none"
    return Facts(f"Faster than the best other variant, outside the spreads, at {rivals} of {n} shapes; "
                 f"faster than cuBLAS's bare GEMMs alone at {(alone == 'faster').sum()} of {n}. "
                 f"Slower than the bare GEMMs at: {behind}.")


def clock_summary(clocks: dict) -> Facts:
    """What held the SM clock down while each timing loop ran (:mod:`~profiling_guide.measure.clocks`
    readings), or that nothing did, with the clocks and the power drawn against the limit."""
    if not clocks:
        return Facts("No clock readings in this run.")
    held = {name: c["reasons"] for name, c in clocks.items() if c.get("reasons")}
    mhz = sorted({c["sm_mhz"] for c in clocks.values()})
    watts = [c["power_w"] for c in clocks.values()]
    limit = max(c["power_limit_w"] for c in clocks.values())
    lines = [f"SM clock, median over each loop's samples: {', '.join(f'{m:.0f}' for m in mhz)} MHz "
             f"(the GPU's maximum: {max(c['max_sm_mhz'] for c in clocks.values()):.0f} MHz); power drawn "
             f"{min(watts):.0f}–{max(watts):.0f} W of a {limit:.0f} W limit."]
    lines += [f"{name}: clock held down by {', '.join(f'{why} ({share:.0%} of samples)' for why, share in r.items())}."
              for name, r in held.items()]
    lines += [] if held else ["No loop reported a reason for holding the clock down."]
    return Facts(*lines)


def peak_memory(memory: dict, ours: str, rivals: list[str], one_mb: float) -> Facts:
    """Where ``ours``'s peak above ``rivals``' comes from: the ``[rows, hidden]`` tensors its backward holds at once.

    ``memory``: each variant's ``saved_mb`` and ``peak_mb`` (the step benchmark's); ``one_mb``: one
    ``[rows, hidden]`` tensor. Our backward's dh kernel writes dg and du while g, u and h are held: five.
    """
    peak, saved = memory[ours]["peak_mb"], memory[ours]["saved_mb"]
    theirs = max(memory[r]["peak_mb"] for r in rivals)
    five = 5 * one_mb
    return Facts(
        f"Ours peaks {peak:.0f} MB above the step's start, {peak - theirs:.0f} MB above "
        f"{' and '.join(rivals)} ({theirs:.0f} MB); the forward saved {saved:.0f} MB for ours, "
        + ", ".join(f"{memory[r]['saved_mb']:.0f} MB for {r}" for r in rivals) + ".",
        f"Our backward's dh kernel writes dg and du while g, u and h are still held: five "
        f"[rows, hidden] tensors at once, {five:.0f} MB, more than {' and '.join(rivals)} reach at their "
        f"peak ({theirs:.0f} MB), so their backward never holds all five.",
    )


# ------------------------------------------------------------------ attention
def fastest(times: dict[str, Spread]) -> tuple[str, list[str]]:
    """The variant of lowest median time, and the others whose spreads overlap its own (ties)."""
    best = min(times, key=lambda n: times[n].median)
    return best, [n for n in times if n != best and compare(times[best], times[n]) == "tie"]


def attention_advice(timings: dict) -> Facts:
    """Which variant is fastest forward and backward (ties named), and what each keeps in memory."""
    lines = []
    for label, key in (("forward", "forward_us"), ("backward", "backward_us")):
        times = {n: _spread(d) for n, d in timings[key].items()}
        best, ties = fastest(times)
        tie = f"; a tie with {', '.join(ties)} (the spreads overlap)" if ties else ", outside every other spread"
        lines.append(f"Fastest {label}: {best}, {times[best]:.1f} µs{tie}.")
    memory = timings["memory"]
    low = min(memory, key=lambda n: memory[n]["peak_mb"])
    high = max(memory, key=lambda n: memory[n]["peak_mb"])
    lines.append(f"Peak memory of a step, above its inputs: {memory[low]['peak_mb']:,.0f} MB for {low}, "
                 f"{memory[high]['peak_mb']:,.0f} MB for {high}.")
    return Facts(*lines)


def block_mask_saving(runs: dict) -> Facts:
    """Forward and backward device time of FlexAttention with and without its block mask, and the ratio."""
    names = list(runs["forward_us"])
    lines = []
    for label, key in (("forward", "forward_us"), ("backward", "backward_us")):
        a, b = (_spread(runs[key][n]) for n in names)
        lines.append(f"{label.capitalize()}: {names[0]} {a:.1f} µs, {names[1]} {b:.1f} µs "
                     f"({compare(a, b)}, {b.median / a.median:.2f}×).")
    return Facts(*lines)


def _verdict_words(verdict: str) -> str:
    return "a tie" if verdict == "tie" else verdict


def before_after(times: dict[str, Spread], peak_mb: dict[str, float], changes: list[tuple[str, str, str]]) -> Facts:
    """One line per change (before, after, label): step times with spreads, faster/slower/tie, peak memory."""
    lines = []
    for before, after, label in changes:
        a, b = times[before], times[after]
        lines.append(f"{label}: {a:.2f} → {b:.2f} ms per step ({_verdict_words(compare(b, a))}, "
                     f"{b.median / a.median:.3f}×); peak memory {peak_mb[before]:,.0f} → {peak_mb[after]:,.0f} MB.")
    return Facts(*lines)


def bytes_sent(analyses: dict) -> Facts:
    """What each rank of each job sends per step, its definition, and the buffers it is computed from.

    ``analyses``: job name → :class:`~profiling_guide.analysis.ranks.RunAnalysis`.
    """
    sizes = sorted({int(n) for run in analyses.values() for n in run.collectives["group_size"]})
    lines = ["Bytes each rank sends per step: for each collective call, its buffer (nccl-tests' size: an "
             "all-gather's gathered output, else the input, from the call's In or Out msg nelems and dtype) "
             "× 2(n−1)/n for an all-reduce, × (n−1)/n for an all-gather or a reduce-scatter, n the call's "
             f"Group size ({', '.join(map(str, sizes))} here): what a ring sends, and what nccl-tests' bus "
             "bandwidth counts."]
    for name, run in analyses.items():
        calls = ", ".join(f"{r.per_step:g} {r.collective} of {r.bytes / 1e6:,.2f} MB"
                          for r in run.collectives.itertuples())
        buffers = float((run.collectives["bytes"] * run.collectives["per_step"]).sum())
        sent = float(run.collectives["sent_per_step"].sum())
        lines.append(f"{name}: {sent / 1e6:,.0f} MB sent per rank per step ({calls} per step; "
                     f"{buffers / 1e6:,.0f} MB of buffers).")
    return Facts(*lines)


def recording_start(run) -> Facts:
    """How far apart the ranks' GPUs were when the profiler began recording (when each finished the work
    launched before it, clocks aligned, the latest against the earliest), and per rank and profiled step its
    GPU's compute and idle time and how far its CPU ran ahead of its GPU."""
    lags = run.stragglers.dropna(subset=["before_lag_us"]).sort_values("before_lag_us")
    if len(lags) < 2:
        return Facts("No rank's GPU was still running work launched before the profiler began recording.")
    first, last = lags.iloc[0], lags.iloc[-1]
    by_rank = run.per_rank.groupby("rank")
    idle, compute, lead = (by_rank[c].mean() / 1e3 for c in ("idle_us", "compute_us", "cpu_lead_us"))
    ranks = sorted(idle.index)
    return Facts(
        f"When the profiler began recording, every GPU was still running work launched before it: rank "
        f"{int(last['rank'])}'s finished it {last['before_lag_us'] / 1e3:.2f} ms after rank {int(first['rank'])}'s "
        "(clocks aligned).",
        "Per profiled step, GPU computing: " + ", ".join(f"rank {r} {compute[r]:.2f} ms" for r in ranks)
        + "; GPU idle: " + ", ".join(f"rank {r} {idle[r]:.2f} ms" for r in ranks)
        + "; the CPU began the step ahead of its GPU by " + ", ".join(f"{lead[r]:.2f} ms on rank {r}" for r in ranks)
        + ".")
