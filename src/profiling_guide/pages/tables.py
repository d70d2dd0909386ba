"""The tables a page shows, as pandas DataFrames computed from a :class:`~profiling_guide.trace.model.Trace`.

Every number is a per-step mean over the profiler's active steps, so a table
from a three-step trace reads as "one forward".
"""

from __future__ import annotations

import html
from collections import defaultdict

import pandas as pd
from pandas.io.formats.style import Styler

from profiling_guide.analysis.expect import POST, POST_URL, Verdicts
from profiling_guide.analysis.roofline import CEILING_COLUMN, REFERENCE_COLUMN
from profiling_guide.output import echo, scrolling
from profiling_guide.spread import Spread, compare
from profiling_guide.trace.model import CpuOp, Trace


def spread_cell(spread, precision: int = 1) -> str:
    """``"54.9 (IQR 53.1–56.0)"``: a table cell for a :class:`~profiling_guide.spread.Spread`."""
    # non-breaking spaces: a narrow column must not break the figure over four lines
    return format(spread, f".{precision}f").replace(" ", "\u00a0")


def _per_step(trace: Trace) -> float:
    return float(max(len(trace.steps), 1))


def op_table(trace: Trace, *, top: int | None = None, by_input_shape: bool = False) -> pd.DataFrame:
    """The familiar profiler table: per CPU op, calls and self/total CPU and CUDA µs per step.

    *Self* CPU time excludes nested ops; *self* CUDA time is the device work
    launched by the op's own runtime calls, *total* includes nested ops'.
    ``by_input_shape`` keeps an op's calls of different input shapes apart,
    as ``prof.key_averages(group_by_input_shape=True)`` does (the trace must
    be recorded with ``record_shapes=True``).
    """
    n = _per_step(trace)
    rows: dict = defaultdict(lambda: dict.fromkeys(
        ("calls", "self_cpu_us", "cpu_total_us", "self_cuda_us", "cuda_total_us"), 0.0))
    for op in trace.step_ops:
        row = rows[(op.name, _fmt_list(op.input_dims)) if by_input_shape else op.name]
        row["calls"] += 1
        row["cpu_total_us"] += op.dur_us
        row["self_cpu_us"] += op.dur_us - sum(c.dur_us for c in op.children)
        row["self_cuda_us"] += sum(ev.dur_us for ev in op.self_device_events)
        row["cuda_total_us"] += sum(ev.dur_us for ev in op.device_events)
    df = pd.DataFrame.from_dict(rows, orient="index") / n
    if by_input_shape:
        df.index = pd.MultiIndex.from_tuples(df.index, names=["op", "input shapes"])
    else:
        df.index.name = "op"
    df = df.sort_values("cpu_total_us", ascending=False)
    return df.head(top) if top else df


def kernel_table(trace: Trace) -> pd.DataFrame:
    """Per device event name: decoded kind, calls and mean µs per step, who launched it and how."""
    n = _per_step(trace)
    groups: dict[str, list] = defaultdict(list)
    for step in trace.steps:
        for ev in step.device_events:
            groups[ev.name].append(ev)
    rows = []
    for name, events in groups.items():
        first = events[0]
        k = first.decoded
        launcher = first.launch.op.name if first.launch and first.launch.op else "?"
        rows.append({
            "kernel": k.short,
            "kind": k.kind,
            "library": k.library,
            "calls_per_step": len(events) / n,
            "avg_us": sum(e.dur_us for e in events) / len(events),
            "grid": "×".join(map(str, first.grid)) if first.grid else "",
            "block": "×".join(map(str, first.block)) if first.block else "",
            "launched_by": launcher,
            "via": first.launch.name if first.launch else "?",
            "name": name,
        })
    df = pd.DataFrame(rows, columns=["kernel", "kind", "library", "calls_per_step", "avg_us", "grid", "block",
                                     "launched_by", "via", "name"])
    return df.sort_values(["calls_per_step", "avg_us"], ascending=False, ignore_index=True)


def dispatch_chain(trace: Trace, root: str, *, step: int | None = None) -> pd.DataFrame:
    """How one call unfolds: every op nested under the first ``root`` op of a step.

    ``root`` is an op or annotation name (e.g. ``"linear_fwd"``). Each row is an
    op indented by depth, with its input shapes and strides, CPU µs, the runtime
    calls it made and the device work they started.
    """
    steps = [s for s in trace.steps if step is None or s.number == step]
    roots = [op for s in steps for op in s.ops if op.name == root]
    if not roots:
        raise ValueError(f"no op named {root!r} in the chosen step of {trace.source}")
    top = roots[0]
    rows = []
    for op in top.walk():
        rel = op.depth - top.depth
        device = op.self_device_events
        rows.append({
            # non-breaking spaces: HTML would collapse ordinary ones and lose the nesting
            "op": ("\u00a0\u00a0\u00a0" * rel) + ("└ " if rel else "") + op.name,
            "input_dims": _fmt_list(op.input_dims),
            "input_strides": _fmt_list(op.input_strides),
            "cpu_us": op.dur_us,
            "runtime_calls": ", ".join(c.name for c in op.runtime_calls),
            "device_work": ", ".join(ev.decoded.short for ev in device),
            "device_us": sum(ev.dur_us for ev in device),
        })
    return pd.DataFrame(rows)


def _fmt_list(value) -> str:
    if not value:
        return ""
    return " ".join("[" + ",".join(map(str, v)) + "]" if isinstance(v, list) else str(v) for v in value)


GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm")


def gemm_table(trace: Trace, *, references: dict | None = None) -> pd.DataFrame:
    """One row per GEMM op of a step: shapes → M·K·N → kernel → µs → TFLOP/s.

    ``aten::mm(A[M,K], B[K,N])`` does ``2·M·K·N`` FLOPs, read from the op's
    recorded input dims. The time is the GEMM kernel's alone: a memset the op
    launches before it (cuBLAS clears a workspace on some GPUs) is not counted.
    With ``references`` (:func:`profiling_guide.measure.timing.reference_rates`) two
    more columns: the fraction of the datasheet ceiling and of the best
    measured cuBLAS rate.
    """
    step = trace.steps[0]
    rows = []
    for op in step.ops:
        if op.name not in GEMM_OPS or not op.device_events:
            continue
        dims = op.input_dims
        a, b = (dims[1], dims[2]) if op.name == "aten::addmm" else (dims[0], dims[1])
        m, k, n = a[-2], a[-1], b[-1]
        kernels = [ev for ev in op.device_events if ev.kind == "kernel"]
        # Mean over all steps of the same call position, for a steadier number.
        us = _mean_same_position(trace, op)
        flops = 2 * m * k * n
        row = {
            "op": op.name,
            "parent": _first_named_ancestor(op),
            "input_dims": _fmt_list(dims),
            "M·K·N": f"{m}·{k}·{n}",
            "GFLOP": flops / 1e9,
            "kernel": " + ".join(ev.decoded.short for ev in kernels),
            "avg_us": us,
            "TFLOP/s": flops / us / 1e6 if us else float("nan"),
        }
        if references:
            peak = (references.get("datasheet") or {}).get("bf16_tflops")
            row[CEILING_COLUMN] = 100 * row["TFLOP/s"] / peak if peak else float("nan")
            row[REFERENCE_COLUMN] = 100 * row["TFLOP/s"] / references["gemm_tflops"]["rate"]
        rows.append(row)
    return pd.DataFrame(rows)


def _first_named_ancestor(op: CpuOp) -> str:
    for anc in op.ancestors():
        if anc.name.startswith("aten::linear") or anc.annotation:
            return anc.name
    return ""


def _mean_same_position(trace: Trace, op: CpuOp) -> float:
    """Mean kernel µs of the op at the same position (n-th op of that name) in every step (memsets left out)."""
    first = trace.steps[0]
    index = [o for o in first.ops if o.name == op.name].index(op)
    totals = []
    for s in trace.steps:
        same = [o for o in s.ops if o.name == op.name]
        if len(same) > index:
            totals.append(sum(ev.dur_us for ev in same[index].device_events if ev.kind == "kernel"))
    return sum(totals) / len(totals) if totals else 0.0


def runtime_table(trace: Trace) -> pd.DataFrame:
    """Runtime/driver API calls per step, with their mean CPU µs."""
    n = _per_step(trace)
    groups: dict[str, list] = defaultdict(list)
    for s in trace.steps:
        for c in s.runtime_calls:
            groups[c.name].append(c)
    rows = [{
        "call": name,
        "calls_per_step": len(calls) / n,
        "avg_us": sum(c.dur_us for c in calls) / len(calls),
        "launches_work": any(c.device_events for c in calls),
    } for name, calls in groups.items()]
    return pd.DataFrame(rows, columns=["call", "calls_per_step", "avg_us", "launches_work"]).sort_values(
        "calls_per_step", ascending=False, ignore_index=True)


LONG_CELL = 48  # characters: a longer text is shortened in its cell, whole on hover


def shorten(text: str, limit: int = LONG_CELL) -> str:
    """``text`` cut to ``limit`` characters in the middle (``"head…tail"``), or as it is when it fits."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return text[:head] + "…" + text[-(limit - 1 - head):]


def _shortened_with_title(value) -> str:
    # A native tooltip (the title attribute) takes no room on the page, even on a phone.
    text = str(value)
    if len(text) <= LONG_CELL:
        return html.escape(text)
    return f'<span title="{html.escape(text)}">{html.escape(shorten(text))}</span>'


def is_fraction_column(name) -> bool:
    """A column of fractions (0–1) that reads better as a percentage: ``share``, ``*_share``, ``of_reference``.

    Spaces count as underscores, so a readable header (``device-time share``,
    ``of reference``) keeps the percentage format. A header that starts with
    ``% of`` holds percentages already (``% of datasheet ceiling``): it is
    printed as it is.
    """
    return isinstance(name, str) and (name.endswith("share") or name.replace(" ", "_") == "of_reference")


def _cell_text(value) -> str:
    # A list (a kernel's fused ops) reads as its items; an empty one as nothing.
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return _shortened_with_title(text)


class ScrollingStyler(Styler):
    """A pandas Styler whose HTML sits in the page's scrolling box (:func:`profiling_guide.output.scrolling`)."""

    def _repr_html_(self) -> str | None:
        table = super()._repr_html_()
        return scrolling(table) if table else table


def styled(df: pd.DataFrame, *, precision: int = 1, caption: str | None = None, na_rep: str = "–"):
    """A Styler that renders ``df`` as a clean HTML table in a scrolling box on the page (µs with ``precision`` digits).

    Whole numbers print as integers; fractions in a column :func:`is_fraction_column`
    names print as percentages; a text cell longer than :data:`LONG_CELL`
    characters (a kernel name, a compiled graph's hash) is shortened in the
    middle and shown whole on hover; a list prints as its items. Missing values
    (NaN, None) print as ``na_rep``.
    """
    fmt = {}
    for c in df.columns:
        if is_fraction_column(c) and pd.api.types.is_numeric_dtype(df[c]):
            fmt[c] = "{:.1%}" if str(c).endswith("share") else "{:.0%}"
        elif pd.api.types.is_float_dtype(df[c]):
            whole = df[c].notna().any() and (df[c].dropna() % 1 == 0).all() and "µs" not in str(c)
            fmt[c] = "{:,.0f}" if whole else f"{{:,.{precision}f}}"
        elif df[c].map(lambda v: isinstance(v, (list, tuple)) or isinstance(v, str) and len(v) > LONG_CELL).any():
            fmt[c] = _cell_text
    st = ScrollingStyler(df).format(fmt, na_rep=na_rep)
    if df.index.name is None and isinstance(df.index, pd.RangeIndex):
        st = st.hide(axis="index")
    if caption:
        st = st.set_caption(caption)
    return st.set_table_attributes('class="pg-table"')


def launch_table(trace: Trace, *, step: int | None = None) -> pd.DataFrame:
    """Each piece of device work of one step, with the runtime calls its op made around the launch.

    This is where the GPUs differ: on an A100 the post saw an occupancy query
    before every cuBLAS launch; newer cuBLAS builds launch with
    ``cuLaunchKernelEx`` and may query nothing at all.
    """
    s = trace.steps[0] if step is None else next(x for x in trace.steps if x.number == step)
    rows = []
    for ev in s.device_events:
        call = ev.launch
        op = call.op if call else None
        others = [c.name for c in (op.runtime_calls if op else []) if c is not call]
        rows.append({
            "device work": ev.decoded.short,
            "kind": ev.decoded.kind,
            "launched by": op.name if op else "?",
            "launch call": call.name if call else "?",
            "other runtime calls of that op": ", ".join(others) or "–",
            "launch → start µs": ev.start_us - call.start_us if call else float("nan"),
            "device µs": ev.dur_us,
        })
    return pd.DataFrame(rows)


def template_table(trace: Trace) -> pd.DataFrame:
    """The Triton GEMM templates of one step (max-autotune's): grid, µs, and the tensors their op passed."""
    rows = []
    for k in trace.steps[0].kernels:
        if k.decoded.kind != "gemm" or k.decoded.library != "triton":
            continue
        op = k.launch.op if k.launch else None
        rows.append({"template": k.decoded.short, "grid": str(k.grid), "µs": k.dur_us,
                     "input tensors": _fmt_list([d for d in (op.input_dims if op else []) if d])})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ benchmark sweeps
def sweep_standing(sweep: list[dict], variant: str) -> pd.DataFrame:
    """Per shape of a :func:`~profiling_guide.measure.bench_mlp.sweep`: ``variant`` against the best other one
    and against cuBLAS's bare GEMMs, with the verdict (:func:`~profiling_guide.spread.compare`) of each."""
    rows = []
    for r in sweep:
        t = {v: Spread.from_dict(s) for v, s in r["variants_us"].items()}
        if variant not in t or len(t) < 2:
            continue
        rival = min((v for v in t if v != variant), key=lambda v: t[v].median)
        alone = Spread.from_dict(r["gemms_alone_us"])
        rows.append({"rows×hidden": f"{r['rows']}×{r['hidden']}", "best other": rival,
                     "its × ours": t[rival].median / t[variant].median,
                     "against it": compare(t[variant], t[rival]),
                     "× GEMMs alone": t[variant].median / alone.median,
                     "against GEMMs alone": compare(t[variant], alone)})
    return pd.DataFrame(rows).set_index("rows×hidden")


# ------------------------------------------------------------------ verdicts
#: Where a prediction's source is a page of its own, the verdict table links it.
SOURCE_LINKS = {POST: POST_URL}


class VerdictTable:
    """Checked predictions (:func:`~profiling_guide.analysis.expect.judge`) as the page shows them: ✓/✗ rows.

    A guess (``must_hold=False``) may come out either way on a GPU: it is marked, so a ✗ there
    reads as a finding, not as a broken page. The "from" column shows only where a source is named.
    """

    def __init__(self, verdicts: Verdicts):
        self.verdicts = verdicts

    def __repr__(self) -> str:
        return "\n".join(f"{'✓' if v.holds else '✗'} {v.claim} — {v.seen}" for v in self.verdicts)

    def _repr_html_(self) -> str:
        sources = any(v.source for v in self.verdicts)
        rows = "".join(
            f'<tr class="{"pg-pass" if v.holds else "pg-fail"}"><td class="pg-mark">{"✓" if v.holds else "✗"}</td>'
            f"<td>{html.escape(v.claim)}"
            + ("" if v.must_hold else ' <span class="pg-guess" title="may hold or not on a given GPU">guess</span>')
            + f"</td><td>{html.escape(v.seen)}</td>"
            + (f'<td class="pg-source">{_source_html(v.source)}</td>' if sources else "")
            + "</tr>"
            for v in self.verdicts
        )
        return scrolling(
            '<table class="pg-table pg-verdicts"><thead><tr><th></th><th>prediction</th>'
            f"<th>{html.escape(self.verdicts.seen_header)}</th>{'<th>from</th>' if sources else ''}</tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )


def _source_html(source: str) -> str:
    url = SOURCE_LINKS.get(source)
    return f'<a href="{url}">{html.escape(source)}</a>' if url else html.escape(source)


def verdict_table(verdicts: Verdicts) -> VerdictTable:
    """The table of ``verdicts`` a page shows (the last expression of a cell renders it; a script prints it)."""
    return echo(VerdictTable(verdicts))


def attribution_lines(reports: dict, *, count: int = 5):
    """The ``count`` source lines with the most device time per step in each report's attribution, as one table.

    ``reports`` maps a variant's name to its :func:`~profiling_guide.analysis.trace_report.analyse` result. A
    line is its number where every line shown is in one file (the header names it), else ``file:line``; its
    code where inductor recorded it, else the function that starts there; the module that spent most of its
    time. Its kernels by kind are in the report's own table.
    """
    from pathlib import PurePath

    picked = [(variant, line, report.attribution.device_us) for variant, report in reports.items()
              for line in report.attribution.sources()[:count]]
    files = {PurePath(line["source"].rpartition(":")[0]).name for _, line, _ in picked}
    header = f"line of {next(iter(files))}" if len(files) == 1 else "line"
    rows = []
    for variant, line, total in picked:
        file, _, number = line["source"].rpartition(":")
        rows.append({"variant": variant, header: number if len(files) == 1 else f"{PurePath(file).name}:{number}",
                     "code": line["code"] or f"def {line['function']}(...)",
                     "module (most time)": line["modules"].most_common(1)[0][0],
                     "device µs per step": line["device_us"],
                     "step share": line["device_us"] / total if total else 0.0})
    return styled(pd.DataFrame(rows).set_index("variant"), precision=1)
