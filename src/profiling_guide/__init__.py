"""profiling-guide: GPU profiling in PyTorch, taught from real traces.

Trace first, record on a GPU, replay anywhere: every table, timeline and check
in the guide is computed from a Chrome trace written by ``torch.profiler``.
"""

__version__ = "0.1.0"

from profiling_guide.errors import show_guide_errors_in_one_line

show_guide_errors_in_one_line()
