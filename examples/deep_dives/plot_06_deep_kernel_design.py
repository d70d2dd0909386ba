"""
Deep dive 6 · The epilogue-fused kernel: designs, configurations, host cost, shapes
===================================================================================

Optional, after chapter 6. The kernel behind ``FusedGeGLUMLP``: the four
designs it grew from and what each step bought, the configuration each ran,
what it costs the host with Triton's launcher and through a CUDA graph, and
the sweep over shapes in full. Everything is read from chapter 6's
recordings; nothing is measured again.
"""

# %%
# The recordings
# --------------

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.recorded("06_fused")
fused_run = chapter.read("fused")
result = chapter.read("bench").values
host = chapter.read("host")
sweep = chapter.read("sweep")
chapter.banner()

# %%
# The kernel
# ----------
# :mod:`profiling_guide.kernels.fused_mlp` holds four designs of the same idea,
# three in Triton and one in Gluon. The Triton one for Hopper packs the gate
# and up weights into one
# ``[2·hidden, dim]`` matrix, interleaved row by row
# (:func:`~profiling_guide.kernels.fused_mlp.pack_gate_up`), so each K step is **one**
# MMA twice as wide, and every thread ends up holding the ``g`` and ``u`` of
# the same output column side by side in its registers. The epilogue splits
# them with a reshape, which moves no data:
#
# .. literalinclude:: ../../../src/profiling_guide/kernels/geglu_kernels.py
#    :pyobject: _geglu_packed_tma_gemm_kernel
#
# The GeLU is computed on the fp32 accumulator while the tensor cores wait,
# so its instruction count matters: for bf16 inputs the tanh is the
# hardware's ``tanh.approx.f32``, one special-function instruction per
# element, where ``g·sigmoid(2z)`` (the same function) needs two (an
# exponential and a reciprocal). Its maximum relative error,
# 2⁻¹¹ (`PTX ISA
# <https://docs.nvidia.com/cuda/parallel-thread-execution/#floating-point-instructions-tanh>`_),
# is far below the bf16 rounding of the result:
#
# .. literalinclude:: ../../../src/profiling_guide/kernels/geglu_common.py
#    :pyobject: gelu_tanh_times
#
# Two Hopper features sit under ``x_desc.load``/``h_desc.store``: the **TMA**
# copy engine fetches whole tiles described once on the host (no address
# arithmetic or masks in registers; it zero-fills past the edges), and the
# kernel is **persistent** — one program per SM loops over output tiles, so
# the loads of the next tile overlap this tile's epilogue. Both build on
# Triton's tutorials: the grouped tile order of
# `Matrix Multiplication
# <https://triton-lang.org/main/getting-started/tutorials/03-matrix-multiplication.html>`_
# and the TMA descriptors and one-program-per-SM loop of
# `Persistent Matmul
# <https://triton-lang.org/main/getting-started/tutorials/09-persistent-matmul.html>`_.
# The down projection stays a cuBLAS GEMM: after the epilogue there is nothing left
# to fuse into it.
#
# In that kernel the warps that issue the MMAs also run the epilogue, so
# while a program splits, activates and stores one tile, its SM's tensor
# cores wait: with only ``dim / BLOCK_K`` = 12 K steps per tile at ``dim``
# 768, that pause is a large share of each tile. CUTLASS's Hopper *ping-pong*
# schedule hides it, and Triton's language cannot ask for it (its compiler
# picks the schedule: its warp specialization, and two programs per SM, were
# both slower than the kernel above in our probes). Gluon
# (``triton.experimental.gluon``, part of Triton) can: the kernel allocates
# its shared memory and mbarriers, issues the TMA copies and ``wgmma``\ s
# itself, and splits its warps into partitions. One producer warp streams x
# and weight tiles into a ring of shared-memory slots; two consumer
# warpgroups take the program's tiles in turn, each waiting for its turn on
# the tensor cores, then handing it over as it starts its epilogue:
#
# .. literalinclude:: ../../../src/profiling_guide/kernels/geglu_pingpong.py
#    :pyobject: _consumer
#
# As in Gluon's own tutorials, a partition takes one bundle, ``p`` (an
# ``@aggregate``: the tile shape, the ring of operand tiles and its
# mbarriers, the turns, where h goes), and a small counter, ``read``, says
# which ring slot and which mbarrier phase each K step uses. The kernel
# itself allocates the ring and its mbarriers and hands the partitions to a
# launch helper it shares with the backward's kernel
# (:mod:`profiling_guide.kernels.geglu_pingpong`,
# :mod:`profiling_guide.kernels.geglu_common`). ``design="auto"`` runs it
# on Hopper GPUs (compute capability 9.x: the ``wgmma`` instruction is
# Hopper's) for bf16 and fp16; chapter 6c looks inside it with Nsight
# Compute. What else was tried for it and for the backward's kernel, and what
# each measured, is a dated design note: :doc:`/notes/gluon_kernels_2026_11`.

# %%
# One fused step, to explore
# --------------------------
# Drag to pan, the buttons (or Ctrl and the wheel) to zoom, hover a bar for
# its decoded name, its µs and, for a kernel, the op that launched it and how
# long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(fused_run.trace, caption="epilogue-fused MLP, one profiled step")

# %%
# The two kernels of a step, who launched them and how, then each against
# the datasheet ceiling and the reference measured in the same run: each
# GEMM's FLOPs over its time
# (:func:`~profiling_guide.analysis.roofline.kernel_work_table`; the fused kernel does
# gate and up).

from profiling_guide.analysis.roofline import kernel_work_table
from profiling_guide.pages import tables

args = fused_run.run["args"]
rows, element = args["batch"] * args["seq"], 2  # bf16: chapter 6 runs bf16 only
tables.styled(tables.kernel_table(fused_run.trace).drop(columns=["name"]), precision=1)

# %%

work = kernel_work_table(fused_run.trace, rows=rows, dim=args["dim"], hidden=args["hidden"],
                         element=element, references=result["references"])
tables.styled(work, precision=1)

# %%
# What each design bought
# -----------------------
# Four designs from the idea to the kernel chapter 6 runs, three steps between
# them, timed in chapter 6's benchmark run:
#
# * ``dual``: two accumulators, two MMAs per K step, pointer loads with masks.
# * ``packed``: one MMA twice as wide against the interleaved weight; the x
#   tile read from shared memory serves twice the output.
# * ``packed-tma``: the same MMA fed by the TMA engine, persistent over tiles.
# * ``pingpong`` (Gluon, Hopper): a producer warp and two consumer
#   warpgroups taking turns, so one tile's epilogue runs under the other's
#   MMAs.

import pandas as pd

from profiling_guide.spread import Spread, compare

times = {n: Spread.from_dict(t) for n, t in result["variants_us"].items()}
DESIGNS = ("fused-dual", "fused-packed", "fused-packed-tma", "fused-pingpong")
steps = [n for n in DESIGNS if n in times]
tables.styled(pd.DataFrame([
    {"step": f"{before} → {after}", "verdict": compare(times[after], times[before]),
     "before ÷ after": times[before].median / times[after].median,
     "µs before": times[before].median, "µs after": times[after].median}
    for before, after in zip(steps, steps[1:])
]).set_index("step"), precision=2)

# %%
# The configuration each design ran (the Triton designs' autotuning kept
# theirs; ``pingpong`` runs one config measured the benchmark's way, because
# Triton's autotuner, timing one input over and over with it warm in L2,
# ranked it 7 % too slow at this shape on an H100):

from profiling_guide.pages.facts import Facts

Facts(*(f"{n}: {result['fused_configs'][n]}" for n in steps if result["fused_configs"].get(n)))

# %%
# Every variant and every design of the benchmark run, against the reference
# (cuBLAS's GEMMs alone) and the datasheet bound:

from profiling_guide.pages.tables import spread_cell

alone, bound = Spread.from_dict(result["gemms_alone_us"]), result["datasheet_bound_us"]
tables.styled(pd.DataFrame({
    "device µs": {n: spread_cell(t) for n, t in times.items()},
    "against GEMMs alone": {n: compare(t, alone) for n, t in times.items()},
    "× GEMMs alone": {n: t.median / alone.median for n, t in times.items()},
    "× datasheet bound": {n: t.median / bound for n, t in times.items()} if bound else {},
    "max rel error vs fp64": {n: f"{e:.1e}" for n, e in result["max_rel_error_fp64"].items()
                              if n in times},
}), precision=3)

# %%
# The host: Triton's launcher and a CUDA graph
# --------------------------------------------
# Triton's Python launcher binds and specialises every argument on each call.
# A CUDA graph (:meth:`~profiling_guide.kernels.fused_mlp.FusedGeGLUMLP.captured`)
# records the forward's kernels once and issues them again with one call.
# The CPU time to issue one forward (profiler off, median over repeats with
# its IQR): ours through Triton's launcher, ours through the graph, and
# eager, measured together, one after the other, late in chapter 6's run:

GRAPH, LAUNCHER = "ours, CUDA graph", "ours, Triton's launcher"
cpu = {n: Spread.from_dict(v) for n, v in host.values.items()}
cpu_cells = {n: spread_cell(t) for n, t in cpu.items()}
tables.styled(pd.DataFrame({"CPU µs to issue one forward": cpu_cells}))

# %%
# Chapter 6 quotes another figure for the first row: the CPU issue time
# measured right after the profile, earlier in the same run, the one its pace
# verdict reads. Two measurements of the same call, minutes apart in one
# process: where they differ, that is how far the host's own time moves
# within one run (other work on the machine, the CPU's clock, caches).
# Compare host times only when they were measured side by side, as these
# three were.

at_profile = spread_cell(fused_run.timings["cpu_issue_us"])
Facts(f"Ours through Triton's launcher: {at_profile} µs at the profile, "
      f"{cpu_cells[LAUNCHER]} µs in this later measurement.")

# %%
# We expect the graph replay to be cheaper on the host than Triton's launcher
# and than eager's five launches: one call into the driver replaces the
# module's Python checks, the autotuner's lookup, the descriptors and the
# launches. Against the device time: if the CPU issues a forward in less time
# than the GPU runs it, the CPU runs ahead and its cost stays hidden when
# forwards are issued back to back.

from profiling_guide.analysis import expect, predicates

ours = f"fused-{result['auto_design']}"
host_verdicts = expect.judge([
    expect.Prediction("the graph replay is cheaper on the host than Triton's launcher",
                      predicates.compares(GRAPH, LAUNCHER, "faster"), "chapter 6's run"),
    expect.Prediction("through the graph, ours costs the host less than eager",
                      predicates.compares(GRAPH, "eager", "faster"), "chapter 6's run"),
    expect.Prediction("through Triton's launcher, ours costs the host more than eager",
                      predicates.compares(LAUNCHER, "eager", "slower"), "chapter 6's run",
                      must_hold=False),
    expect.Prediction("through the graph, the host issues a forward faster than the GPU runs it",
                      predicates.compares(GRAPH, "device time of ours", "faster"),
                      "chapter 6's run", must_hold=False),
], cpu | {"device time of ours": times[ours]})
tables.verdict_table(host_verdicts)

# %%
# The sweep, in full
# ------------------
# Chapter 6's sweep over batch·seq from 1k to 32k rows and two hidden sizes:
# every variant's median device µs per forward at each shape, with cuBLAS's
# bare GEMMs at that shape, and the same as a chart, each point over the
# GEMMs alone. It measured what the chart and the table need, device times
# and the GEMMs alone: no reference rates, no CPU costs, and 60 timed forwards per
# repeat (a small shape rotates through many inputs, so one round may be
# enough).

from profiling_guide.pages import charts

SWEEP_VARIANTS = ["eager", "compile", "liger", "fused"]
sweep_table = pd.DataFrame([
    {"hidden": r["hidden"], "rows": r["rows"], "GEMMs alone µs": r["gemms_alone_us"]["median"],
     **{v: r["variants_us"].get(v, {"median": float("nan")})["median"] for v in SWEEP_VARIANTS}}
    for r in sweep.values]).set_index(["hidden", "rows"])
tables.styled(sweep_table, precision=1)

# %%

fig = charts.sweep_lines(sweep.values, SWEEP_VARIANTS,
                         title="Device time per forward over cuBLAS GEMMs alone")

# %%
# Probing further
# ---------------
# ``scripts/probe_pingpong.py --sweep`` ranks the ping-pong kernel's tile
# shapes and ring depths the benchmark's way on your GPU, and
# ``scripts/probe_gate_up.py --quack --mlp`` times a CUTLASS-style ping-pong
# gated GEMM from `quack-kernels <https://github.com/Dao-AILab/quack>`_
# beside ours, and ``scripts/probe_pingpong.py --quack`` times it with and
# without clusters of two CTAs, whose TMA loads it multicasts to both; the
# repository's ``CONTRIBUTING.md`` lists their flags and the committed runs.

host_verdicts.require()
