"""Hooks sphinx-gallery calls between examples (named in ``reset_modules``, before and after each)."""

import sys
import time
from pathlib import Path

#: Seconds each chapter took in this build, in the order they ran: ``{"plot_01_linear.py": 4.2, ...}``.
CHAPTER_SECONDS: dict[str, float] = {}
_started: dict[str, float] = {}


def reset_torch(gallery_conf, fname, when=None):
    """Forget compiled graphs and free cached GPU memory so each example starts clean."""
    import torch

    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def chapter_clock(gallery_conf, fname, when=None):
    """One console line as each chapter starts and as it ends, with its time (never on the page)."""
    name = Path(fname).name
    console = sys.__stderr__ or sys.stderr
    if when == "before":
        _started[name] = time.perf_counter()
        console.write(f"[chapters] {name}: started\n")
    elif when == "after" and name in _started:
        CHAPTER_SECONDS[name] = time.perf_counter() - _started.pop(name)
        console.write(f"[chapters] {name}: done in {CHAPTER_SECONDS[name]:.1f} s\n")
    console.flush()
