"""
Deep dive 3 · What torch.compile changed: the dispatch path, the kernel, recompiles
===================================================================================

Optional, after chapter 3. Where the compiled forward's dispatcher work went,
what the fused kernel's name says, what the compiler adds on the host for
every call, and what a new input shape costs with ``dynamic=False``, the
default and ``dynamic=True``. Everything is read from chapter 3's recordings;
nothing is measured again.
"""

# %%
# The recordings
# --------------

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.recorded("03_mlp_compile")
eager = chapter.read("eager")
compiled = chapter.read("compiled")
recompile = chapter.read("recompile")
chapter.banner()

# %%
# One compiled step, to explore
# -----------------------------
# Drag to pan, the buttons (or Ctrl and the wheel) to zoom, hover a bar for
# its decoded name, its µs and, for a kernel, the op that launched it and how
# long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(compiled.trace, caption="torch.compile, one profiled step")

# %%
# The dispatch chain, folded
# --------------------------
# Eagerly each linear was ``linear → t → matmul → reshape → mm``. Compiled,
# the graph was traced once, the strides and views resolved at compile time,
# and what runs is the generated code calling ``mm`` directly:

from profiling_guide.pages import tables

tables.styled(tables.dispatch_chain(compiled.trace, "mlp_fwd"), precision=1)

# %%
# The fused kernel, decoded
# -------------------------
# Inductor names its kernels ``triton_<kind>_fused_<ops>_<n>``: ``poi`` is
# pointwise, ``red`` a reduction, ``per`` a persistent reduction (one block
# holds a whole row), ``tem`` a template (e.g. a GEMM). The ops are the ATen
# ops the kernel absorbed.

import pandas as pd

from profiling_guide.analysis import predicates
from profiling_guide.trace.kernel_names import decode

fused = predicates.triton_kernels(compiled.trace)
pd.DataFrame([decode(k.name).to_dict() for k in fused]).T.rename(columns=lambda i: "fused kernel")

# %%
# What the compiler adds on the CPU
# ---------------------------------
# A compiled call first asks TorchDynamo whether a compiled graph fits these
# inputs (the cache lookup runs the graph's guards), then calls the graph.
# These rows exist only in the compiled trace (CPU µs per step, profiler on):

eager_names = {op.name for op in eager.trace.step_ops}
ops = tables.op_table(compiled.trace)
tables.styled(ops[~ops.index.isin(eager_names)], precision=1)

# %%
# Recompilation, measured
# -----------------------
# The compiled graph is specialised to the shapes it saw. Chapter 3's run fed
# new sequence lengths in turn and timed each first call (wall time, which
# pays any compilation) and the device time per forward after it, for three
# settings: ``dynamic=False`` (always specialise), the default (specialise,
# and after the first new shape compile one graph with symbolic sizes) and
# ``dynamic=True`` (symbolic from the start). Each setting ran in a fresh
# Python process with empty compiler caches, so none reused what another
# compiled. The three processes started together (Python, torch, the CUDA
# context and the model, none of it timed), then took turns: one ran its
# shapes and exited before the next began
# (:func:`~profiling_guide.measure.shape_sweeps.recompile_in_fresh_processes`), so no
# timed call shared the machine with another's compiles or GPU work. Rows are
# in the order each setting ran them.

frames = []
for setting, sweep_rows in recompile.values.items():
    frame = pd.DataFrame(sweep_rows)
    frame.insert(0, "setting", setting)
    frames.append(frame)
sweep_table = pd.concat(frames, ignore_index=True)
tables.styled(sweep_table, precision=1)

# %%

from profiling_guide.pages import facts

facts.recompilations(sweep_table)
