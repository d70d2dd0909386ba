"""
Deep dive 1 · Inside one call: the dispatcher, the launch and the kernel's name
===============================================================================

Optional, after chapters 1 and 2. What ``nn.Linear`` goes through on the host
before its one kernel starts, what ``torch.compile`` takes off that path, what
the kernel's name says about it, and how the MLP's GEMMs are launched.
Everything here is read from the recordings of chapters 1 and 2; nothing is
measured again.
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
mlp = Chapter.recorded("02_mlp_eager").read("eager")
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

# %%
# One linear of the MLP, unfolded
# -------------------------------
# Chapter 2's MLP takes a 3-D input (batch, seq, dim): the dispatch chain of
# the first ``aten::linear`` of a step shows ``matmul`` folding it to 2-D with a
# ``reshape`` (a ``view``: no copy) before the ``mm``, and unfolding the result
# after. Ops with no device work at all:

from profiling_guide.pages.facts import Facts

Facts("CPU ops with no device work: " + ", ".join(mlp.trace.no_device_ops) + ".")

# %%

first_linear = mlp.trace.ops_named("aten::linear")[0]
chain = tables.dispatch_chain(mlp.trace, "mlp_fwd")
tables.styled(chain.iloc[: 1 + sum(1 for _ in first_linear.walk())], precision=1)

# %%
# Launches and the runtime calls around them
# ------------------------------------------
# Which runtime call started each kernel, and what else its op asked of the
# driver. On the A100 the post saw
# ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` before every GEMM's
# ``cudaLaunchKernel``; here is what this GPU shows:

tables.styled(tables.launch_table(mlp.trace), precision=1)

# %%
# ``cuLaunchKernelEx`` is the driver's extended launch: it takes launch
# attributes such as a thread-block cluster shape, which Hopper's cuBLAS
# kernels use. The cluster size and the occupancy the kernel needs are fixed
# when the library picks the kernel, so there is nothing left to query at
# launch time. Which call launched each kind of kernel here:

from profiling_guide.analysis import predicates

launch_verdicts = expect.judge([
    expect.Prediction("GEMMs are launched with cuLaunchKernelEx",
                      predicates.launched_with("gemm", "cuLaunchKernelEx"), "this page",
                      must_hold=False),
], mlp.trace)
tables.verdict_table(launch_verdicts)

# %%
# The MLP's GEMMs, in full
# ------------------------
# Chapter 2's table with every column: the op, the linear it belongs to, the
# input dims as recorded, the FLOPs and the kernel (decoded). Gate and up have
# one shape and down another, so cuBLAS's heuristics may pick a different
# kernel (tile and cluster) for down.

references = Chapter.recorded("02_mlp_eager").read("references").values
tables.styled(tables.gemm_table(mlp.trace, references=references), precision=1)
