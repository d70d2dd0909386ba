"""The timeline figure has the lanes, labels and arrows it should."""

import matplotlib.pyplot as plt
from matplotlib.text import Annotation

from profiling_guide.pages import timeline


def test_lanes_are_cpu_depths_then_runtime_then_stream(mlp_eager):
    names = [name for name, _ in timeline.lanes(mlp_eager)]
    assert names[0] == "CPU d0"
    assert names[-2] == "CUDA runtime"
    assert names[-1].startswith("GPU stream")
    gpu_bars = timeline.lanes(mlp_eager)[-1][1]
    assert len(gpu_bars) == 7 and all(start >= 0 for start, *_ in gpu_bars)


def test_plot_step_labels_lanes_and_draws_one_arrow_per_launch(mlp_eager):
    fig = timeline.plot_step(mlp_eager, title="eager")
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "CUDA runtime" in ticks and any(t.startswith("GPU stream") for t in ticks)
    arrows = [c for c in ax.get_children() if isinstance(c, Annotation)]
    assert len(arrows) == len(mlp_eager.steps[0].device_events)
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "linear" in texts and "mlp_fwd" in texts
    assert "µs" in ax.get_xlabel()
    # the smallest text of the figure is 10 px or more where the site shows it (at its own size)
    assert fig.get_size_inches()[0] * fig.dpi <= 840
    sizes = [t.get_fontsize() for t in [*ax.texts, *ax.get_yticklabels(), *ax.get_legend().get_texts()]]
    assert min(sizes) * fig.dpi / 72 >= 10


def test_a_long_step_ticks_in_ms(mlp_eager):
    fig = timeline.plot_step(mlp_eager, span_us=12_000)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_xlabel().startswith("ms since")
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "10" in labels and "10000" not in labels


def test_plot_compare_puts_both_runs_on_one_time_axis(linear_eager, linear_compiled):
    fig = timeline.plot_compare({"eager": linear_eager, "compiled": linear_compiled})
    top, bottom = fig.axes[:2]
    assert top.get_xlim() == bottom.get_xlim()
    assert top.get_title(loc="left") == "eager" and bottom.get_title(loc="left") == "compiled"


def test_no_bar_label_is_cut_to_a_stub(mlp_eager, linear_eager):
    from profiling_guide.pages.timeline import MIN_CUT_LABEL

    for trace in (mlp_eager, linear_eager):
        fig = timeline.plot_step(trace)
        for text in fig.axes[0].texts:
            label = text.get_text()
            if label.endswith("…"):
                assert len(label) >= MIN_CUT_LABEL, f"a label cut to {label!r}"
        plt.close(fig)


def test_a_narrow_bars_label_goes_beside_it_whole(linear_eager):
    """Chapter 1's launch call is too short for its name: the name sits beside it."""
    fig = timeline.plot_step(linear_eager)
    texts = {t.get_text(): t for t in fig.axes[0].texts}
    lanes = dict(timeline.lanes(linear_eager))
    launch = next(bar for bar in lanes["CUDA runtime"] if "Launch" in bar[2])  # cuLaunchKernelEx on an H100
    assert launch[2] in texts, f"{launch[2]} is not labelled whole: {sorted(texts)}"
    x = texts[launch[2]].get_position()[0]
    assert x <= launch[0] or x >= launch[0] + launch[1], "the label sits beside its bar, not inside it"
    plt.close(fig)
