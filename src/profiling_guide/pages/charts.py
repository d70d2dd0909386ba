"""Charts of measurements (matplotlib): variants side by side, a roofline, a shape sweep.

The timeline of one step lives in :mod:`profiling_guide.pages.timeline`; these
charts compare whole runs. Each function takes plain numbers (µs, TFLOP/s)
and returns a Figure, so a page computes what it plots in the open.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from profiling_guide.pages.palette import KIND_COLORS
from profiling_guide.pages.timeline import WIDTH_IN

GAP_COLOR = "#d9d9d9"
MARK_COLOR = "#444444"  # the lines a rate or a time is read against: roofs, references, bounds
MARKERS = "osD^vP*X"  # one per series, cycled


# One colour per variant, on every page and in every build.
VARIANT_COLORS = {
    "eager": "#4c72b0", "compile": "#dd8452", "compile-max-autotune": "#c44e52", "liger": "#55a868",
    "fused": "#64b5cd", "fused-dual": "#937860", "fused-packed": "#da8bc3", "fused-packed-tma": "#8172b3",
    "fused-pingpong": "#64b5cd",
}


def variant_color(name: str) -> str:
    return VARIANT_COLORS.get(name, "#7f7f7f")


def variant_bars(times_us: dict, marks_us: dict[str, float], *, breakdown: dict[str, dict[str, float]] | None = None,
                 title: str | None = None):
    """One horizontal bar per variant (median device µs per forward, IQR as a whisker), each mark a dashed line.

    ``times_us`` maps a variant to a :class:`~profiling_guide.spread.Spread`;
    ``marks_us`` maps the name of a time to read the bars against (a
    reference such as "cuBLAS GEMMs alone", the "datasheet bound") to its µs. With ``breakdown`` (variant → {kernel kind →
    µs}), each bar is split into the device time of each kind of kernel; what
    is left of the median is drawn grey: time on the GPU between kernels.
    """
    names = list(times_us)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.6 * len(names) + 1.6), layout="constrained")
    kinds_seen: list[str] = []
    for i, name in enumerate(names):
        t = times_us[name]
        left = 0.0
        for kind, us in (breakdown or {}).get(name, {}).items():
            ax.barh(i, us, left=left, color=KIND_COLORS.get(kind, KIND_COLORS["other"]), height=0.6)
            left += us
            if kind not in kinds_seen:
                kinds_seen.append(kind)
        ax.barh(i, max(t.median - left, 0.0), left=left, color=GAP_COLOR if breakdown else variant_color(name),
                height=0.6)
        ax.errorbar([t.median], [i], xerr=[[t.median - t.q1], [t.q3 - t.median]], color="black", capsize=3,
                    linewidth=1)
        ax.text(t.q3, i, f"  {t.median:.0f} µs", va="center", fontsize=10)
    styles = iter(["--", ":", "-."])
    for label, us in marks_us.items():
        ax.axvline(us, color=MARK_COLOR, linestyle=next(styles, "--"), linewidth=1, label=f"{label}: {us:.0f} µs")
    ax.set_yticks(range(len(names)), names, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(0, max(t.q3 for t in times_us.values()) * 1.25)
    ax.set_xlabel("device µs per forward (median; whisker: IQR over repeats)", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    handles = [Patch(color=KIND_COLORS.get(k, KIND_COLORS["other"]), label=f"{k} kernels") for k in kinds_seen]
    if breakdown:
        handles.append(Patch(color=GAP_COLOR, label="GPU between kernels"))
    handles += ax.get_legend_handles_labels()[0]
    # Below the axes: a legend inside the plot would cover a bar's label.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.18), ncols=3, fontsize=9, frameon=False)
    if title:
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    return fig


def roofline(points: dict[str, tuple[float, float]], *, references: dict, title: str | None = None):
    """A roofline: attainable TFLOP/s against arithmetic intensity (FLOP per byte of HBM traffic).

    ``points`` maps a variant to (FLOP/byte, achieved TFLOP/s). The solid roof
    is the datasheet ceiling (``min(peak TFLOP/s, peak TB/s · intensity)``);
    the dashed one, the measured references
    (:func:`profiling_guide.measure.timing.reference_rates`), which real code reaches.
    """
    sheet = references.get("datasheet")
    gemm, copy = references["gemm_tflops"]["rate"], references["copy_tbps"]["rate"]
    top_flops, top_bw = (sheet["bf16_tflops"], sheet["hbm_tbps"]) if sheet else (gemm, copy)
    xs, ys = [p[0] for p in points.values()], [p[1] for p in points.values()]
    # The x range spans the points and the ridge (where the roofs bend), with a little room around.
    lo, hi = min(xs + [gemm / copy]) / 1.6, max(xs + [gemm / copy]) * 1.6
    grid = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.2), layout="constrained")
    if sheet:
        ax.plot(grid, np.minimum(top_flops, top_bw * grid), color=MARK_COLOR, linewidth=1.5,
                label=f"datasheet ceiling ({sheet['model']}): {top_flops:.0f} TFLOP/s, {top_bw:.2f} TB/s")
    ax.plot(grid, np.minimum(gemm, copy * grid), color=MARK_COLOR, linewidth=1, linestyle="--",
            label=f"measured reference: {gemm:.0f} TFLOP/s, {copy:.2f} TB/s")
    for i, (label, (x, y)) in enumerate(points.items()):
        ax.scatter([x], [y], marker=MARKERS[i % len(MARKERS)], s=55, zorder=3, color=variant_color(label),
                   label=f"{label}: {y:.0f} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.tick_params(labelsize=10)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved through HBM)", fontsize=10)
    ax.set_ylabel("TFLOP/s", fontsize=10)
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(copy * lo, min(ys) / 1.3), top_flops * 1.3)
    # Below the plot, in two columns: beside it, the legend took half the figure's width.
    fig.legend(fontsize=9, frameon=False, loc="outside lower center", ncols=2)
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    return fig


def sweep_lines(rows: list[dict], variants: list[str], *, title: str | None = None):
    """Median device time over the cuBLAS-GEMMs-alone time against rows (batch·seq), one panel per hidden size.

    ``rows`` are :func:`~profiling_guide.measure.bench_mlp.sweep` rows (``ShapeResult.to_json()``).
    """
    hiddens = sorted({r["hidden"] for r in rows})
    # Two panels a row at most, so the figure is shown near its own size and its text stays readable.
    ncols = min(len(hiddens), 2)
    nrows = -(-len(hiddens) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH_IN, 3.6 * nrows + 0.4), layout="constrained",
                             sharey=True, squeeze=False)
    for ax in axes.flat[len(hiddens):]:
        ax.set_visible(False)
    for ax, hidden in zip(axes.flat, hiddens, strict=False):  # the grid's spare panels are hidden above
        mine = sorted((r for r in rows if r["hidden"] == hidden), key=lambda r: r["rows"])
        for i, v in enumerate(variants):
            pts = [(r["rows"], r["variants_us"][v]["median"] / r["gemms_alone_us"]["median"])
                   for r in mine if v in r["variants_us"]]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=MARKERS[i % len(MARKERS)], label=v, linewidth=1.2, markersize=5,
                        color=variant_color(v))
        ax.axhline(1.0, color=MARK_COLOR, linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.tick_params(labelsize=10)
        ax.set_xlabel("rows (batch·seq)", fontsize=10)
        ax.set_title(f"hidden {hidden}", fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
    for row in axes:
        row[0].set_ylabel("× cuBLAS GEMMs alone (lower is better)", fontsize=10)
    # Below the panels: inside one, the legend covered the end of a line.
    shown = {label: h for ax in axes.flat for h, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    fig.legend(list(shown.values()), list(shown), fontsize=9, frameon=False, loc="outside lower center",
               ncols=len(shown))
    if title:
        fig.suptitle(title, x=0.01, ha="left", fontsize=11, fontweight="bold")
    return fig


def attention_sweep(points: list[dict], *, head_dim: int, causal: bool, title: str | None = None):
    """Forward + backward device ms and peak GiB against the sequence length, one line per variant (log-log).

    ``points``: :func:`profiling_guide.measure.attention.sweep` rows; those of
    ``head_dim`` and ``causal`` that ran are drawn, each time a median with
    its IQR as whiskers; a variant that was skipped at a length simply ends.
    """
    rows = [r for r in points if r["head_dim"] == head_dim and r["causal"] == causal and "skipped" not in r]
    names = list(dict.fromkeys(r["variant"] for r in rows))
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.6), layout="constrained")
    for i, name in enumerate(names):
        mine = sorted((r for r in rows if r["variant"] == name), key=lambda r: r["seq"])
        seqs = [r["seq"] for r in mine]
        step = [(r["forward_us"]["median"] + r["backward_us"]["median"]) / 1e3 for r in mine]
        lo = [(r["forward_us"]["q1"] + r["backward_us"]["q1"]) / 1e3 for r in mine]
        hi = [(r["forward_us"]["q3"] + r["backward_us"]["q3"]) / 1e3 for r in mine]
        marker = MARKERS[i % len(MARKERS)]
        below = [s - a for s, a in zip(step, lo, strict=True)]
        above = [b - s for s, b in zip(step, hi, strict=True)]
        ax_t.errorbar(seqs, step, yerr=[below, above], marker=marker, capsize=2, label=name)
        ax_m.plot(seqs, [r["peak_mb"] / 1024 for r in mine], marker=marker, label=name)
    for ax, label in ((ax_t, "forward + backward, device ms"), (ax_m, "peak memory of a step, GiB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
    ax_m.legend(fontsize=8, loc="upper left")
    fig.suptitle(title or f"{'causal' if causal else 'full'} attention, head dim {head_dim}", fontsize=11)
    return fig


RANK_PARTS = (("compute alone", "#7b4fa6"), ("communication beside compute", "#c9a0dc"),
              ("communication alone (exposed)", "#c24d6b"), ("idle", GAP_COLOR))


def rank_time(runs: dict, *, title: str | None = None):
    """One horizontal bar per job and rank: its GPU's step (ms, mean over profiled steps) split four ways.

    ``runs``: job name → :class:`~profiling_guide.analysis.ranks.RunAnalysis`.
    Compute alone, communication hidden behind compute, exposed
    communication, idle: together the span of the step's device work.
    """
    labels, parts = [], []
    for name, run in runs.items():
        for rank, df in run.per_rank.groupby("rank"):
            m = df.mean(numeric_only=True) / 1e3
            labels.append(f"{name}, rank {rank}")
            parts.append((m["compute_us"] - m["overlap_us"], m["overlap_us"], m["exposed_us"], m["idle_us"]))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.45 * len(labels) + 2.0), layout="constrained")
    for i, values in enumerate(parts):
        left = 0.0
        for (label, color), value in zip(RANK_PARTS, values, strict=True):
            ax.barh(i, value, left=left, color=color, height=0.6, label=label if i == 0 else None)
            left += value
    ax.set_yticks(range(len(labels)), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("ms per profiled step (the GPU's span of the step's work)")
    fig.legend(fontsize=8, loc="outside lower center", ncols=2)
    ax.set_title(title or "Where each rank's step goes", fontsize=11)
    return fig
