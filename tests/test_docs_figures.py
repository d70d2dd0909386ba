"""docs/_figures.py: the smallest text a figure draws, which the site's pages put on each figure's image."""

import importlib.util
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

pytest.importorskip("sphinx_gallery")
_spec = importlib.util.spec_from_file_location("_figures", Path(__file__).resolve().parents[1] / "docs" / "_figures.py")
figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(figures)


def test_smallest_text_counts_drawn_text_only():
    fig, (shown, hidden) = plt.subplots(1, 2, figsize=(8.2, 3), dpi=100)
    shown.plot([1, 2], [1, 2])
    shown.set_title("title", fontsize=12)
    shown.tick_params(labelsize=9)
    shown.text(0.5, 0.5, "", fontsize=2)  # empty: nothing drawn
    hidden.set_title("in a hidden panel", fontsize=3)
    hidden.set_visible(False)
    assert figures.smallest_text_px(fig) == pytest.approx(9 * 100 / 72)
    plt.close(fig)


def test_a_log_axis_exponent_is_the_smallest_text():
    fig, ax = plt.subplots(figsize=(8.2, 3), dpi=100)
    ax.plot([1, 1024], [1, 2])
    ax.set_xscale("log", base=2)  # ticks 2^0 ... 2^10: exponents at 70 % of the 10-pt labels
    ax.set_xlabel("rows", fontsize=12)
    ax.tick_params(axis="y", labelsize=12)
    assert figures.smallest_text_px(fig) == pytest.approx(10 * figures.MATH_SCRIPT * 100 / 72)
    plt.close(fig)


def test_a_figure_without_text_has_no_size():
    fig = plt.figure()
    assert figures.smallest_text_px(fig) is None
    plt.close(fig)
