"""What a timeline bar looks like, in the matplotlib timeline and the interactive one: colours and labels.

Here, not in :mod:`~profiling_guide.pages.timeline`, so that the report and
the interactive timeline share them without importing matplotlib.
"""

from __future__ import annotations

KIND_COLORS = {
    "gemm": "#7b4fa6",
    "attention": "#d6742a",
    "pointwise": "#2e9c6a",
    "reduction": "#1f8a9c",
    "memset": "#9a9a9a",
    "memcpy": "#a0703c",
    "collective": "#34495e",
    "other": "#c24d6b",
}
ANNOTATION_COLOR = "#c9d3e0"
OP_COLORS = ["#4c78a8", "#6b93c4", "#8fb0d9", "#b3cbe8", "#d2e0f2"]
RUNTIME_COLOR = "#f0a03c"


def short_op(name: str) -> str:
    """An op's name as a timeline bar shows it (both the static and the interactive timeline)."""
    # Inductor names its graph call after a 52-character hash; the hash says nothing on a plot.
    if name.startswith("## Call CompiledFxGraph"):
        return "call CompiledFxGraph"
    return name.removeprefix("aten::")
