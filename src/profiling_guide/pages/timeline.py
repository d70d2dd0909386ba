"""A timeline of one profiler step, drawn with matplotlib from a :class:`~profiling_guide.trace.model.Trace`.

Lanes, top to bottom: the CPU ops by nesting depth (the ``record_function``
label at the top, ``aten::`` ops below it), the CUDA runtime/driver calls, and
one lane per GPU stream. An arrow joins each launch to the kernel it started,
so the gap between "the CPU asked" and "the GPU ran" is visible. Time is in µs
from the start of the step (in ms for a step longer than 5 ms).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from profiling_guide.analysis.backward import shapes_text
from profiling_guide.analysis.training import kernel_owner
from profiling_guide.pages.palette import ANNOTATION_COLOR, KIND_COLORS, OP_COLORS, RUNTIME_COLOR, short_op
from profiling_guide.trace.model import Step, Trace

ARROW_COLOR = "#555555"
LANE_HEIGHT = 0.7
# The site shows a figure about 830 px wide on a desktop: at 100 dpi an 8.2-inch figure is
# shown at its own size, and 7.5 pt is 10.4 px there, the smallest text any lane carries.
WIDTH_IN = 8.2
BAR_FONT = 7.5
MS_ABOVE_US = 5000  # a longer time axis ticks in ms: five-digit µs labels run into each other


def _step(trace: Trace, step: int | None) -> Step:
    if not trace.steps:
        raise ValueError(f"{trace.source} has no profiler steps to draw")
    if step is None:
        return trace.steps[0]
    for s in trace.steps:
        if s.number == step:
            return s
    raise ValueError(f"{trace.source} has no ProfilerStep#{step}; it has {[s.number for s in trace.steps]}")


def lanes(trace: Trace, step: int | None = None) -> list[tuple[str, list[tuple[float, float, str, str]]]]:
    """The lanes of one step as data: ``[(lane label, [(start_us, dur_us, label, color), ...]), ...]``.

    Times are relative to the step's start. Drawing is :func:`plot_step`'s job;
    this function is what tests and other renderers can read.
    """
    s = _step(trace, step)
    t0 = s.start_us
    by_depth: dict[int, list] = {}
    base = min((op.depth for op in s.ops), default=0)
    for op in s.ops:
        depth = op.depth - base
        color = ANNOTATION_COLOR if op.annotation else OP_COLORS[min(depth, len(OP_COLORS) - 1)]
        by_depth.setdefault(depth, []).append((op.start_us - t0, op.dur_us, short_op(op.name), color))
    # Short labels: the y axis has room for about ten characters on a phone; the x axis says what dN is.
    out = [(f"CPU d{d}", bars) for d, bars in sorted(by_depth.items())]
    out.append(("CUDA runtime", [(c.start_us - t0, c.dur_us, c.name, RUNTIME_COLOR) for c in s.runtime_calls]))
    streams: dict = {}
    for ev in s.device_events:
        k = ev.decoded
        streams.setdefault(ev.stream, []).append((ev.start_us - t0, ev.dur_us, k.short, KIND_COLORS.get(k.kind, KIND_COLORS["other"])))
    out += [(f"GPU stream {stream}", bars) for stream, bars in sorted(streams.items(), key=lambda kv: str(kv[0]))]
    return out


#: A label cut to fewer characters than this reads as noise ("ate…"): it goes beside its bar, or nowhere.
MIN_CUT_LABEL = 16


def _draw_bars(ax, y: float, bars, span_us: float, width_in: float, *, label_outside: bool = False) -> None:
    """One lane's bars and their labels; a label is never cut to a stub.

    A label goes inside its bar where it fits whole (or cut where at least
    :data:`MIN_CUT_LABEL` characters fit); otherwise beside the bar, right or
    left, where the lane is free for it; otherwise nowhere (the interactive
    timeline and the tables name every bar). ``label_outside``: a GPU lane,
    whose small kernels are labelled above and right of the bar, clear of the
    launch arrows that reach its top edge.
    """
    us_per_char = span_us / (width_in * 13)  # ~13 characters of 7.5-pt text per inch
    gap = span_us * 0.004
    bars = sorted(bars, key=lambda bar: bar[0])
    free_from = -1e30  # where this lane has neither bar nor label, for a label placed beside a bar
    above_free_from = -1e30  # the same, for the labels above a GPU lane
    axis_end = span_us * 1.02
    # One collection for the lane's bars, not one per bar: a step of thousands of kernels draws in a blink.
    ax.broken_barh([(start, max(dur, span_us * 0.0015)) for start, dur, _, _ in bars],
                   (y - LANE_HEIGHT / 2, LANE_HEIGHT), facecolors=[color for *_, color in bars],
                   edgecolors="white", linewidth=0.4)
    for i, (start, dur, label, color) in enumerate(bars):
        end = start + max(dur, span_us * 0.0015)
        room = int(dur / us_per_char)
        need = (len(label) + 1) * us_per_char  # the label's width, with a character's margin
        if room >= len(label) or room >= MIN_CUT_LABEL:
            text = label if len(label) <= room else label[: room - 1] + "…"
            ax.text(start + dur / 2, y, text, ha="center", va="center", fontsize=BAR_FONT, clip_on=True,
                    color="white" if color in KIND_COLORS.values() or color == OP_COLORS[0] else "#1b1b1b")
            free_from = max(free_from, end)
            continue
        if label_outside:
            if start > above_free_from:
                ax.text(end + gap, y + LANE_HEIGHT * 0.62, label, ha="left", va="bottom",
                        fontsize=BAR_FONT, color="#333333", clip_on=True)
                above_free_from = end + gap + len(label) * us_per_char * 0.95
            free_from = max(free_from, end)
            continue
        next_start = bars[i + 1][0] if i + 1 < len(bars) else axis_end
        if next_start - end - 2 * gap >= need:  # right of the bar
            ax.text(end + gap, y, label, ha="left", va="center", fontsize=BAR_FONT, color="#333333", clip_on=True)
            free_from = end + gap + need
        elif start - max(free_from, 0.0) - 2 * gap >= need:  # left of it
            ax.text(start - gap, y, label, ha="right", va="center", fontsize=BAR_FONT, color="#333333",
                    clip_on=True)
            free_from = end
        else:
            free_from = max(free_from, end)


def plot_step(trace: Trace, step: int | None = None, *, ax=None, title: str | None = None,
              span_us: float | None = None, arrows: bool = True):
    """Draw one profiler step; returns the matplotlib Figure.

    ``span_us`` fixes the time axis (to put two runs on one scale); by default
    it covers the step and any device work that finished after it.
    """
    s = _step(trace, step)
    data = lanes(trace, s.number)
    if ax is None:
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.45 * len(data) + 1.2), layout="constrained")
    fig = ax.figure
    span = span_us or (s.device_end_us - s.start_us)
    width_in = fig.get_size_inches()[0] * 0.8
    ys = {}
    for i, (lane, bars) in enumerate(data):
        y = len(data) - 1 - i
        ys[lane] = y
        _draw_bars(ax, y, bars, span, width_in, label_outside=lane.startswith("GPU"))
    if arrows:
        runtime_y = ys["CUDA runtime"]
        for call in s.runtime_calls:
            for ev in call.device_events:
                if ev.step != s.number:
                    continue
                ax.annotate("", xy=(ev.start_us - s.start_us, ys[f"GPU stream {ev.stream}"] + LANE_HEIGHT / 2),
                            xytext=(call.start_us - s.start_us + call.dur_us / 2, runtime_y - LANE_HEIGHT / 2),
                            arrowprops=dict(arrowstyle="->", color=ARROW_COLOR, lw=0.6, alpha=0.7,
                                            shrinkA=0, shrinkB=0))
    ax.set_yticks(list(ys.values()), list(ys.keys()), fontsize=8)
    ax.set_ylim(-0.7, len(data) - 0.3)
    ax.set_xlim(0, span * 1.02)
    unit = "ms" if span > MS_ABOVE_US else "µs"
    if unit == "ms":
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}"))
    ax.tick_params(axis="x", labelsize=9)
    ax.set_xlabel(f"{unit} since the start of ProfilerStep#{s.number} · CPU dN: ops at nesting depth N", fontsize=9)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    kinds = sorted({ev.decoded.kind for ev in s.device_events})
    handles = [Patch(color=KIND_COLORS.get(k, KIND_COLORS["other"]), label=k) for k in kinds]
    handles.append(Patch(color=RUNTIME_COLOR, label="runtime call"))
    legend = ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=BAR_FONT,
                       frameon=False, ncols=len(handles), borderaxespad=0.2)
    if title:
        text = ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
        renderer = fig.canvas.get_renderer()
        if text.get_window_extent(renderer).overlaps(legend.get_window_extent(renderer)):
            ax.set_title(title, loc="left", fontsize=10, fontweight="bold", pad=20)  # above the legend's row
    return fig


def plot_compare(traces: dict[str, Trace], *, steps: dict[str, int] | None = None):
    """Stack one step of each run on a shared time axis (first run on top)."""
    chosen = {label: _step(t, (steps or {}).get(label)) for label, t in traces.items()}
    span = max(s.device_end_us - s.start_us for s in chosen.values())
    heights = [len(lanes(t, chosen[label].number)) for label, t in traces.items()]
    fig, axes = plt.subplots(len(traces), 1, figsize=(WIDTH_IN, 0.45 * sum(heights) + 1.2 * len(traces)),
                             layout="constrained", height_ratios=heights, sharex=True)
    axes = [axes] if len(traces) == 1 else list(axes)
    for ax, (label, t) in zip(axes, traces.items(), strict=True):
        plot_step(t, chosen[label].number, ax=ax, title=label, span_us=span)
    for ax in axes[:-1]:
        ax.set_xlabel("")
    return fig


# One color per forward op, its forward and its backward kernels alike (tab10 without its grey).
OWNER_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
NO_OWNER_COLOR = "#9a9a9a"
LEGEND_CHARS = 64  # two legend entries side by side fit the figure's width


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plot_links(traces: dict[str, Trace], *, steps: dict[str, int] | None = None):
    """The GPU's kernels of one training step per run, each colored by the forward op it belongs to.

    A forward kernel takes the color of the top-level forward op that launched
    it; a backward kernel the color of the forward op its backward op
    differentiates (:func:`~profiling_guide.analysis.training.kernel_owner`):
    so each forward op's own kernels and its backward's share one color. Its
    bar is labelled ``F1`` / ``B1``, ... by that op's place in the forward;
    gray is work of no forward op (the engine summing two gradients of one tensor). One row per run,
    on one time axis from each step's first kernel.
    """
    chosen = {label: _step(t, (steps or {}).get(label)) for label, t in traces.items()}
    firsts = {label: min((k.start_us for k in s.kernels), default=s.start_us) for label, s in chosen.items()}
    span = max(max((k.end_us for k in s.kernels), default=firsts[label]) - firsts[label] for label, s in chosen.items())
    fig, axes = plt.subplots(len(traces), 1, figsize=(WIDTH_IN, 1.7 * len(traces) + 0.8), layout="constrained",
                             sharex=True)
    axes = [axes] if len(traces) == 1 else list(axes)
    width_in = WIDTH_IN * 0.8
    for ax, (label, s) in zip(axes, chosen.items(), strict=True):
        owners: dict = {}  # forward op → its number, in forward order
        bars = []
        for k in s.kernels:
            phase, op = kernel_owner(k)
            if op is not None and op not in owners:
                owners[op] = len(owners) + 1
            n = owners.get(op)
            color = OWNER_COLORS[(n - 1) % len(OWNER_COLORS)] if n else NO_OWNER_COLOR
            tag = (f"F{n}" if phase == "forward" else f"B{n}") if n else "acc"
            bars.append((k.start_us - firsts[label], k.dur_us, tag, color))
        _draw_bars(ax, 0, [(a, b, c, d) for a, b, c, d in bars], span, width_in)
        ax.set_yticks([0], [label], fontsize=8)
        ax.set_ylim(-0.5, 1.1)  # the legend sits above the bars
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
        handles = [Patch(color=OWNER_COLORS[(n - 1) % len(OWNER_COLORS)],
                         label=_short(f"{n} {short_op(op.name)} {shapes_text(op)}", LEGEND_CHARS))
                   for op, n in owners.items()]
        if any(color == NO_OWNER_COLOR for *_, color in bars):
            handles.append(Patch(color=NO_OWNER_COLOR, label="acc: of no forward op"))
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 0.55), fontsize=6.5, frameon=False,
                  ncols=min(2, max(len(handles), 1)), borderaxespad=0.0, handlelength=1.0, columnspacing=1.0)
    axes[-1].set_xlim(0, span * 1.02)
    axes[-1].tick_params(axis="x", labelsize=9)
    axes[-1].set_xlabel("µs since the step's first kernel · Fn / Bn: forward op n's kernels / its backward's",
                        fontsize=8)
    return fig
