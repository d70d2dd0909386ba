"""Charts of measurements (matplotlib): variants side by side, a roofline, a shape sweep.

The timeline of one step lives in :mod:`profiling_guide.timeline`; these
charts compare whole runs. Each function takes plain numbers (µs, TFLOP/s)
and returns a Figure, so a page computes what it plots in the open.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from .timeline import KIND_COLORS

GAP_COLOR = "#d9d9d9"
FLOOR_COLOR = "#444444"
MARKERS = "osD^vP*X"  # one per series, cycled


def variant_bars(times_us: dict[str, float], floor_us: float, *, breakdown: dict[str, dict[str, float]] | None = None,
                 title: str | None = None):
    """One horizontal bar per variant (median µs per forward), the compute floor as a dashed line.

    With ``breakdown`` (variant → {kernel kind → µs}), each bar is split into
    the device time of each kind of kernel; what is left of the median is
    drawn grey: time on the GPU between kernels.
    """
    names = list(times_us)
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(names) + 1.3), layout="constrained")
    kinds_seen: list[str] = []
    for i, name in enumerate(names):
        total, left = times_us[name], 0.0
        for kind, us in (breakdown or {}).get(name, {}).items():
            ax.barh(i, us, left=left, color=KIND_COLORS.get(kind, KIND_COLORS["other"]), height=0.6)
            left += us
            if kind not in kinds_seen:
                kinds_seen.append(kind)
        ax.barh(i, max(total - left, 0.0), left=left, color=GAP_COLOR if breakdown else KIND_COLORS["gemm"],
                height=0.6)
        ax.text(total, i, f"  {total:.0f} µs  ({total / floor_us:.2f}× floor)", va="center", fontsize=8)
    ax.axvline(floor_us, color=FLOOR_COLOR, linestyle="--", linewidth=1)
    ax.text(floor_us, len(names) - 0.45, f"compute floor {floor_us:.0f} µs ", ha="right", va="bottom", fontsize=8,
            color=FLOOR_COLOR)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(times_us.values()) * 1.32)
    ax.set_xlabel("µs per forward (median)")
    ax.spines[["top", "right"]].set_visible(False)
    if breakdown:
        from matplotlib.patches import Patch

        handles = [Patch(color=KIND_COLORS.get(k, KIND_COLORS["other"]), label=f"{k} kernels") for k in kinds_seen]
        handles.append(Patch(color=GAP_COLOR, label="GPU between kernels"))
        ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    if title:
        ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
    return fig


def roofline(points: dict[str, tuple[float, float]], gemm_tflops: float, copy_tbps: float, *, title: str | None = None):
    """A roofline: attainable TFLOP/s against arithmetic intensity (FLOP per byte of HBM traffic).

    ``points`` maps a label to (FLOP/byte, achieved TFLOP/s). The roof is
    ``min(gemm_tflops, copy_tbps · intensity)``, both measured.
    """
    import numpy as np

    xs = [p[0] for p in points.values()]
    lo, hi = min(xs + [gemm_tflops / copy_tbps]) / 4, max(xs) * 4
    grid = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    ax.plot(grid, np.minimum(gemm_tflops, copy_tbps * grid), color=FLOOR_COLOR, linewidth=1.5)
    ridge = gemm_tflops / copy_tbps
    ax.annotate(f"GEMM ceiling {gemm_tflops:.0f} TFLOP/s", (hi, gemm_tflops), ha="right", va="bottom", fontsize=8)
    ax.annotate(f"copy {copy_tbps:.2f} TB/s", (lo * 1.5, copy_tbps * lo * 1.5), rotation=0, fontsize=8,
                va="bottom")
    ax.axvline(ridge, color=GAP_COLOR, linestyle=":", linewidth=1)
    for i, (label, (x, y)) in enumerate(points.items()):
        ax.scatter([x], [y], marker=MARKERS[i % len(MARKERS)], s=45, zorder=3, label=f"{label}: {y:.0f} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved through HBM)")
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(copy_tbps * lo, gemm_tflops * 2)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
    return fig


def sweep_lines(rows: list[dict], variants: list[str], *, title: str | None = None):
    """Time over the compute floor against rows (batch·seq), one panel per hidden size."""
    hiddens = sorted({r["hidden"] for r in rows})
    fig, axes = plt.subplots(1, len(hiddens), figsize=(5 * len(hiddens), 3.8), layout="constrained", sharey=True,
                             squeeze=False)
    for ax, hidden in zip(axes[0], hiddens):
        mine = sorted((r for r in rows if r["hidden"] == hidden), key=lambda r: r["rows"])
        for i, v in enumerate(variants):
            pts = [(r["rows"], r[v] / r["floor_us"]) for r in mine if r.get(v)]
            if pts:
                ax.plot(*zip(*pts), marker=MARKERS[i % len(MARKERS)], label=v, linewidth=1.2, markersize=4)
        ax.axhline(1.0, color=FLOOR_COLOR, linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rows (batch·seq)")
        ax.set_title(f"hidden {hidden}", fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel("× compute floor (lower is better)")
    axes[0][-1].legend(fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, x=0.01, ha="left", fontsize=10, fontweight="bold")
    return fig
