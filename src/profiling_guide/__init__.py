"""profiling-guide: GPU profiling in PyTorch, taught from real traces.

Trace first, record on a GPU, replay anywhere: every table, timeline and verdict
in the guide is computed from a Chrome trace written by ``torch.profiler``.
"""

__version__ = "0.1.0"

# Run as a script or a command, the guide says a problem in one line: an uncaught GuideError
# prints as "error: ...", and matplotlib's warning about a cache it cannot write (a HOME that is
# not writable) does not come first.
from profiling_guide.errors import show_guide_errors_in_one_line
from profiling_guide.output import quiet_matplotlib_cache

show_guide_errors_in_one_line()
quiet_matplotlib_cache()
