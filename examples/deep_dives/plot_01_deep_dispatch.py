"""
Deep dive 1 · Inside one call: the dispatcher, the launch and the kernel's name
===============================================================================

Optional, after chapter 1. What ``nn.Linear`` goes through on the host before
its one kernel starts, what ``torch.compile`` takes off that path, and what the
kernel's name says about it. Everything here is read from chapter 1's
recordings; nothing is measured again.
"""

# %%
# The recordings
# --------------
# ``Chapter.recorded`` reads what chapter 1 recorded (in a live build, what its
# page recorded minutes ago on this GPU).

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.recorded("01_linear")
eager = chapter.read("eager")
compiled = chapter.read("compiled")
chapter.banner()

# %%
# One step, to explore
# --------------------
# Drag to pan, the buttons (or Ctrl and the wheel) to zoom, hover a bar for
# its decoded name, its µs and, for a kernel, the op that launched it and how
# long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(eager.trace, caption="eager nn.Linear, one profiled step")

# %%
# The profiler's table, from the trace
# ------------------------------------
# Chapter 1 printed ``prof.key_averages().table()``, which needs the live
# profiler object. The same split read from the trace file, per active step,
# in µs: a trace from someone else's machine gives this table too.

from profiling_guide.pages import tables

tables.styled(tables.op_table(eager.trace), caption="eager: CPU ops per step")

# %%
# The dispatch chain
# ------------------
# Which op called which, the shapes and strides each received, and the
# runtime call that launched the one kernel. Note ``aten::t``: its output
# stride is the input's, swapped; no data moves.

tables.styled(tables.dispatch_chain(eager.trace, "linear_fwd"), precision=1)

# %%
# The compiled forward skips the ``aten::linear``/``aten::t`` bookkeeping and
# adds the compiler's own rows instead (guards, the compiled graph call):

tables.styled(tables.dispatch_chain(compiled.trace, "linear_fwd"), precision=1)

# %%
# The kernel, decoded
# -------------------
# A GEMM kernel's name is a spec sheet. The decoder
# (:func:`profiling_guide.trace.kernel_names.decode`) reads the library, the
# architecture, the tile and the layout from it; where the name carries an
# epilogue (work fused after the product, here the bias add), it says so.

import pandas as pd

from profiling_guide.analysis import expect
from profiling_guide.trace.kernel_names import decode

decoded = [decode(name).to_dict() for name in expect.kernel_names(eager.trace)]
pd.DataFrame(decoded).T.rename(columns=lambda i: "eager kernel")
