"""
6 · GeGLU in the GEMM epilogue: g and u never reach memory
==========================================================

The first chapter showed an *epilogue*: cuBLAS adds the bias to the GEMM's
accumulators before it stores them, so no separate add kernel runs. The
compiled and Liger chapters showed *fusion*: GeLU and mul in one kernel, so the
activation makes fewer trips through memory. Put the two together and the
GeLU·mul itself becomes the epilogue of the gate/up GEMM: one kernel computes
``g`` and ``u`` for a tile, applies ``gelu_tanh(g) * u`` to the fp32
accumulators and stores only ``h``. Neither ``g`` nor ``u`` ever reaches HBM;
``h`` is written once and read once, by the down projection.

This chapter counts the bytes that saves, shows the kernel, profiles it, and
times it against every other variant in one run, against two floors: cuBLAS's
bare GEMMs and the datasheet bound.

*Needs:* ``pip install 'profiling-guide[liger]'`` (Triton for our kernel; live, Liger too).
"""

# %%
# Set-up
# ------
# The sizes of the post. After ``pip install`` of this repository, the cells of
# this page, copied in order into a file, run as they are: on a CUDA GPU they
# profile, elsewhere they replay the recordings.

import torch

from profiling_guide.kernels.models import SimpleGeGLUMLP, mlp_flops
from profiling_guide.pages.chapter import Chapter

# The post's sizes, in bf16 only (the kernel itself also takes float16 and
# float32). As a script, flags override the sizes (--help lists them) and
# --mode picks live or replay; ``chapter`` knows which, and where the
# recordings live.
chapter = Chapter.from_command_line(
    "06_fused", batch=64, seq=128, dim=768, hidden=3072,
    bf16_only_because="this chapter measures bf16 kernels against the bf16 datasheet ceiling "
                      "(the kernel itself also takes float16 and float32)")
flags = chapter.flags
batch, seq, dim, hidden = flags.batch, flags.seq, flags.dim, flags.hidden
dtype = chapter.dtype
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
rows, element = batch * seq, dtype.itemsize
chapter.require_memory(element * (5 * dim * hidden + rows * (2 * dim + 4 * hidden)),
                       f"the MLPs at batch {batch} × seq {seq} × dim {dim} × hidden {hidden}")
chapter.banner()

# %%
# The bytes nobody keeps
# ----------------------
# Count only the traffic of the ``[B·S, hidden]`` intermediates, in *passes*
# (one pass = one read or one write of ``B·S·hidden`` bf16 values):
#
# ==========================  ==================================================  =====
# variant                     passes                                              total
# ==========================  ==================================================  =====
# eager                       GEMMs write g, u (2); GeLU reads g, writes            8
#                             gelu(g) (2); mul reads gelu(g), u, writes h (3);
#                             down reads h (1)
# compiled, Liger             GEMMs write g, u (2); fused GeLU·mul reads g, u,      6
#                             writes h (3); down reads h (1)
# epilogue-fused (this page)  the gate/up kernel writes h (1); down reads h (1)     2
# ==========================  ==================================================  =====
#
# Inductor and Liger both fuse the *pointwise* work, but each still runs the
# gate and up GEMMs as library calls that must store their full outputs before
# anything can read them. Fusing into the epilogue removes four passes.

from profiling_guide.pages import facts
from profiling_guide.pages.prose import Facts

pass_bytes = rows * hidden * element
facts.intermediate_traffic(rows, hidden, element,
                           {"eager": 8, "compiled and Liger": 6, "the epilogue-fused MLP": 2})

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
# .. literalinclude:: ../../src/profiling_guide/kernels/geglu_kernels.py
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
# .. literalinclude:: ../../src/profiling_guide/kernels/geglu_kernels.py
#    :pyobject: _gelu_tanh_times
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
# .. literalinclude:: ../../src/profiling_guide/kernels/geglu_pingpong.py
#    :pyobject: _consumer
#
# The kernel itself is the ring, its mbarriers, and the three partitions
# (:mod:`profiling_guide.kernels.geglu_pingpong`). ``design="auto"`` runs it
# on Hopper GPUs (compute capability 9.x: the ``wgmma`` instruction is
# Hopper's) for bf16 and fp16; chapter 6c looks inside it with Nsight
# Compute.

from profiling_guide.kernels import fused_mlp
from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
fused = FusedGeGLUMLP.from_mlp(mlp)  # design="auto": pingpong on Hopper, packed elsewhere
compiled = torch.compile(mlp, dynamic=False)
x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
fused


def fused_forward():
    with torch.no_grad():
        return fused(x)


def compiled_forward():
    with torch.no_grad():
        return compiled(x)


# %%
# Profile it
# ----------
# The compiled MLP beside it, for comparison. The first call of each compiles
# (Inductor) or autotunes (our kernel tries its configs once per shape);
# ``chapter.warm_up`` makes it before the profiler starts, its logs on the
# console.
# With the ``torch.profiler`` block of chapter 1: five steps (skip one, warm
# up one, record three), CPU and CUDA activities, input shapes, one
# ``record_function`` label per forward, and the trace exported for
# https://ui.perfetto.dev and for this page.

from torch.profiler import ProfilerActivity, profile, record_function, schedule


def profile_steps(forward, label, trace_file):
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
    ) as prof:
        for _ in range(5):
            with record_function(label):
                forward()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(trace_file)
    return prof


fused_run = chapter.profile("fused", fused_forward, profiler=profile_steps, label="mlp_fwd",
                            warm_up=True, code=[FusedGeGLUMLP, fused_mlp.geglu], variant="fused")
compiled_run = chapter.profile("compiled", compiled_forward, profiler=profile_steps,
                               label="mlp_fwd", warm_up=True, code=[SimpleGeGLUMLP],
                               variant="compile")

# %%
# Before we look
# --------------

from profiling_guide.analysis import checks, expect

OURS = "this chapter"

predictions = [
    expect.Prediction("two kernels per forward: the fused gate/up GEMM and the down GEMM",
                      expect.kernels_per_step(2), OURS),
    expect.Prediction("no pointwise kernel: the GeLU·mul runs inside the GEMM",
                      expect.no_kernel_of_kind("pointwise"), OURS),
    expect.Prediction("the gate/up GEMM is our kernel", checks.has_kernel_named("geglu"),
                      OURS),
    expect.Prediction("the down projection runs the cuBLAS kernel the compiled MLP uses for it",
                      checks.cublas_gemms_within(compiled_run.trace), OURS),
]

# %%

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"torch.compile": compiled_run.trace,
                             "epilogue-fused": fused_run.trace})

# %%
# The same epilogue-fused step, to explore: drag to pan, the buttons (or Ctrl
# and the wheel) to zoom, hover a bar for its decoded name, its µs and, for a kernel, the op
# that launched it and how long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(fused_run.trace, caption="epilogue-fused MLP, one profiled step")


# %%

verdicts = expect.check(predictions, fused_run.trace)
verdicts

# %%

tables.styled(tables.kernel_table(fused_run.trace).drop(columns=["name"]), precision=1)

# %%

from profiling_guide.pages.prose import pace_facts

pace_facts(fused_run)

# %%
# Timed against everything else, in one run
# -----------------------------------------
# The previous chapter's benchmark, the very run it showed: every variant of
# this guide, and each of the three designs, on the same weights, checked
# against eager and against a float64 reference; device time per forward,
# inputs rotated through more memory than the L2 cache holds, the GPU's queue
# kept full, 7 interleaved passes, median and interquartile range. The same
# passes time cuBLAS's three bare GEMMs, the first floor; the datasheet bound
# is the second.

from profiling_guide.measure import bench_mlp
from profiling_guide.measure.timing import Spread, compare
from profiling_guide.pages.prose import spread_cell

VARIANTS = ["eager", "compile", "compile-max-autotune", "liger",
            "fused-dual", "fused-packed", "fused-packed-tma", "fused-pingpong"]


def benchmark():
    # the previous chapter's run (once per process): every variant at the post's shape
    result = bench_mlp.run_benchmark(batch, seq, dim, hidden, variants=bench_mlp.CHAPTER_VARIANTS,
                                     rounds=bench_mlp.CHAPTER_ROUNDS)
    # what design="auto" picks here, so the page can name the design it stands for
    result["auto_design"] = fused_mlp.choose_design(x.reshape(-1, dim), hidden)
    return result


bench = chapter.measure("bench", benchmark,
                        code=[bench_mlp.run_benchmark, bench_mlp.measure_shape,
                              bench_mlp.build_variant, fused_mlp.choose_design])
result = bench.values
refs = result["references"]
times = {n: Spread.from_dict(t) for n, t in result["variants_us"].items()}
alone, bound = Spread.from_dict(result["gemms_alone_us"]), result["datasheet_bound_us"]
ours = f"fused-{result['auto_design']}"

# %%
# Each variant against the first floor, and the second; *tie*: inside the
# spread.

import pandas as pd

table = pd.DataFrame({
    "device µs": {n: spread_cell(t) for n, t in times.items()},
    "× GEMMs alone": {n: t.median / alone.median for n, t in times.items()},
    "against GEMMs alone": {n: compare(t, alone) for n, t in times.items()},
    "× datasheet bound": {n: t.median / bound for n, t in times.items()} if bound else {},
    "max rel error vs fp64": result["max_rel_error_fp64"],
}).loc[[n for n in VARIANTS if n in times]]
tables.styled(table, precision=3)

# %%

facts.floors(result)

# %%
# The claims
# ----------
# Our target: faster than every other variant in the same run, outside the
# spreads, and its output closer to float64 than eager's. Against cuBLAS's
# bare GEMMs the page reports what it measured, a win or a tie.

others = [n for n in times if not n.startswith("fused")]
claims = [
    expect.Prediction(f"{ours} faster than {', '.join(others)}, outside the spreads",
                      lambda r: checks.faster_than_each(ours, others)(times), OURS),
    expect.Prediction(f"{ours} faster than cuBLAS's three bare GEMMs",
                      lambda r: checks.compares(ours, "GEMMs alone", "faster")(
                          times | {"GEMMs alone": alone}), OURS, must_hold=False),
    expect.Prediction("its output is closer to the float64 answer than eager's",
                      checks.closer_to_fp64(ours), OURS),
]
claim_verdicts = expect.check(claims, result)
claim_verdicts

# %%
# The roofline
# ------------
# Each variant's whole forward as one point: its FLOPs over its HBM bytes
# (weights, x and y once each, plus its passes over the intermediate) on the
# x axis, the rate it achieved on the y axis. The solid roof is the datasheet
# ceiling; the dashed one, the reference rates measured in this run.
# Removing passes moves a point right; running its kernels closer to the
# roof moves it up. ``compile-max-autotune`` is left out: its traffic
# depends on which templates its autotuning picked in that run (see the
# previous chapter's trace).

from profiling_guide.pages import charts

flops = mlp_flops(rows, dim, hidden)
fixed_bytes = element * (3 * dim * hidden + 2 * rows * dim)
PASSES = {"eager": 8, "compile": 6, "liger": 6,
          "fused-dual": 2, "fused-packed": 2, "fused-packed-tma": 2, "fused-pingpong": 2}
points = {
    name: (flops / (fixed_bytes + PASSES[name] * pass_bytes), flops / t.median / 1e6)
    for name, t in times.items() if name in PASSES
}
fig = charts.roofline(points, references=refs,
                      title="The MLP forward on the roofline of this GPU")

# %%
# What each design bought
# -----------------------
# Four designs from the idea to the kernel on this page, three steps between
# them, timed in the run above:
#
# * ``dual``: two accumulators, two MMAs per K step, pointer loads with masks.
# * ``packed``: one MMA twice as wide against the interleaved weight; the x
#   tile read from shared memory serves twice the output.
# * ``packed-tma``: the same MMA fed by the TMA engine, persistent over tiles.
# * ``pingpong`` (Gluon, Hopper): a producer warp and two consumer
#   warpgroups taking turns, so one tile's epilogue runs under the other's
#   MMAs.

DESIGNS = ("fused-dual", "fused-packed", "fused-packed-tma", "fused-pingpong")
steps = [n for n in DESIGNS if n in times]
tables.styled(pd.DataFrame([
    {"step": f"{before} → {after}", "µs before": times[before].median,
     "µs after": times[after].median,
     "before ÷ after": times[before].median / times[after].median,
     "verdict": compare(times[after], times[before])} for before, after in zip(steps, steps[1:])
]).set_index("step"), precision=2)

# %%
# The configuration each design ran (the Triton designs' autotuning kept
# theirs; ``pingpong`` runs one config measured the benchmark's way, because
# Triton's autotuner, timing one input over and over with it warm in L2,
# ranked it 7 % too slow at this shape on an H100):

Facts(*(f"{n}: {result['fused_configs'][n]}" for n in steps if result["fused_configs"].get(n)))

# %%
# And one more step that is not in the kernel at all: the host. Triton's
# Python launcher binds and specialises every argument on each call. A CUDA
# graph (:meth:`~profiling_guide.kernels.fused_mlp.FusedGeGLUMLP.captured`) records
# the forward's kernels once and issues them again with one call. The CPU
# time to issue one forward (profiler off, median over repeats with its IQR):
# ours through Triton's launcher, ours through the graph, and eager:

from profiling_guide.kernels.graphs import CapturedForward
from profiling_guide.measure.timing import cpu_issue_time


def host_cost():
    captured = fused.captured(x)  # each replay overwrites its output: nothing here keeps one
    with torch.no_grad():
        return {"ours, Triton's launcher": cpu_issue_time(lambda: fused(x)).to_dict(),
                "ours, CUDA graph": cpu_issue_time(lambda: captured(x)).to_dict(),
                "eager": cpu_issue_time(lambda: mlp(x)).to_dict()}


host = chapter.measure("host", host_cost, code=[FusedGeGLUMLP, fused_mlp.geglu, CapturedForward])
cpu = {n: Spread.from_dict(v) for n, v in host.values.items()}
cpu |= {f"{n} (benchmark)": Spread.from_dict(result["cpu_issue_us"][n]) for n in ("compile",)
        if n in result["cpu_issue_us"]}
tables.styled(pd.DataFrame({"CPU µs to issue one forward":
                            {n: spread_cell(t) for n, t in cpu.items()}}))

# %%
# We expect the graph replay to be cheaper on the host than Triton's launcher
# and than eager's five launches: one call into the driver replaces the
# module's Python checks, the autotuner's lookup, the descriptors and the
# launches. Against the device time: if the CPU issues a forward in less time
# than the GPU runs it, the CPU runs ahead and its cost stays hidden when
# forwards are issued back to back; if not, issued one forward at a time from
# Python this MLP is bound by the CPU (the benchmark keeps the GPU's queue
# full to time the device alone).

GRAPH, LAUNCHER = "ours, CUDA graph", "ours, Triton's launcher"
host_verdicts = expect.check([
    expect.Prediction("the graph replay is cheaper on the host than Triton's launcher",
                      checks.compares(GRAPH, LAUNCHER, "faster"), OURS),
    expect.Prediction("through the graph, ours costs the host less than eager",
                      checks.compares(GRAPH, "eager", "faster"), OURS),
    expect.Prediction("through Triton's launcher, ours costs the host more than eager",
                      checks.compares(LAUNCHER, "eager", "slower"), OURS, must_hold=False),
    expect.Prediction("the CPU issues one forward in less time than the GPU runs it",
                      checks.compares(GRAPH, "device time of ours", "faster"), OURS,
                      must_hold=False),
], cpu | {"device time of ours": times[ours]})
host_verdicts

# %%
# Where it wins, and where it does not
# ------------------------------------
# The same comparison over batch·seq from 1k to 32k rows and two hidden
# sizes, each point against cuBLAS's bare GEMMs at that shape, timed in the
# same passes. ``torch.compile`` recompiles for every shape here
# (``dynamic=False``), so each point is its best case. The sweep measures
# what the chart and the table need, device times and the floors: no
# reference rates, no CPU costs, and 60 timed forwards per repeat (a small
# shape rotates through many inputs, so one round may be enough).

SWEEP_ROWS = [1024, 4096, 8192, 32768]
SWEEP_HIDDENS = [hidden, 8192 if hidden != 8192 else 4096]
SWEEP_VARIANTS = ["eager", "compile", "liger", "fused"]


def shape_sweep():
    return bench_mlp.sweep(SWEEP_ROWS, SWEEP_HIDDENS, dim, SWEEP_VARIANTS, calls_per_repeat=60,
                           rates=False, cpu_issue=False)


sweep = chapter.measure("sweep", shape_sweep,
                        code=[bench_mlp.sweep, bench_mlp.measure_shape, bench_mlp.build_variant])
sweep_table = pd.DataFrame([
    {"hidden": r["hidden"], "rows": r["rows"], "GEMMs alone µs": r["gemms_alone_us"]["median"],
     **{v: r["variants_us"].get(v, {"median": float("nan")})["median"] for v in SWEEP_VARIANTS}}
    for r in sweep.values]).set_index(["hidden", "rows"])
tables.styled(sweep_table, precision=1)

# %%

fig = charts.sweep_lines(sweep.values, SWEEP_VARIANTS,
                         title="Device time per forward over cuBLAS GEMMs alone")

# %%

# %%
# At each shape, the fused MLP against the best other variant there (and how
# many times slower that one is), and against cuBLAS's bare GEMMs:

standing = tables.sweep_standing(sweep.values, "fused")
tables.styled(standing, precision=2)

# %%

Facts(f"The fused MLP is faster than every other variant, outside the spreads, at "
      f"{(standing['against it'] == 'faster').sum()} of {len(sweep.values)} shapes.")

# %%
# What is left between it and the floors
# --------------------------------------
# The profiled forward's two kernels against the datasheet ceiling and the
# measured reference: each GEMM's FLOPs over its time
# (:func:`~profiling_guide.analysis.roofline.kernel_work_table`; the fused kernel does
# gate and up).

from profiling_guide.analysis.roofline import kernel_work_table

work = kernel_work_table(fused_run.trace, rows=rows, dim=dim, hidden=hidden, element=element,
                         references=refs)
tables.styled(work, precision=1)

# %%
# The reference is the best rate cuBLAS reached at this MLP's shapes in this
# run, not a ceiling: a kernel that computes the gate and up products faster
# than cuBLAS's GEMMs (ours does) sits above 100 % of it. A profiled step is
# also short and runs at a higher clock than back-to-back forwards: compare
# numbers taken the same way.

facts.fused_kernels(work, times[ours])

# %%
# :ref:`Chapter 6c <sphx_glr_auto_examples_plot_06c_inside_kernel.py>` looks
# inside these kernels, with Nsight Compute's counters and Proton's
# warp-by-warp timeline: what the ping-pong schedule changed, and where the
# remaining time to the datasheet ceiling goes.
# ``scripts/probe_pingpong.py --sweep`` ranks the ping-pong kernel's tile
# shapes and ring depths the benchmark's way on your GPU, and
# ``scripts/probe_gate_up.py --quack --mlp`` times a CUTLASS-style ping-pong
# gated GEMM from `quack-kernels <https://github.com/Dao-AILab/quack>`_
# beside ours, and ``scripts/probe_pingpong.py --quack`` times it with and
# without clusters of two CTAs, whose TMA loads it multicasts to both; the
# README lists their flags and the committed runs.

verdicts.require()
claim_verdicts.require()
host_verdicts.require()

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_06_fused.py --batch 64 --seq 128 --dim 768 --hidden 3072
#     python -m profiling_guide.kernels.fused_mlp --check          # correctness against float64
#     profiling-guide bench-mlp --json bench.json       # the benchmark alone
#     profiling-guide bench-mlp --sweep                 # the sweep alone
