"""
6 · GeGLU in the GEMM epilogue: g and u never reach memory
==========================================================

Chapter 1 showed an *epilogue*: the GEMM adds the bias to its accumulators
before it stores them. Chapters 3 and 4 showed *fusion*: GeLU and mul in one
kernel. Put the two together and GeLU·mul becomes the epilogue of the gate/up
GEMM: one kernel computes ``g`` and ``u`` for a tile, applies
``gelu_tanh(g) * u`` to the fp32 accumulators and stores only ``h``. How many
bytes does that save, and is the MLP then faster than every other variant?

*Needs:* ``pip install 'profiling-guide[liger]'`` (Triton for our kernel; live, Liger too).
"""

# %%
# The code under study
# --------------------
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
# Inductor and Liger fuse the *pointwise* work, but each still runs the gate
# and up GEMMs as library calls that must store their full outputs before
# anything can read them. The epilogue that removes four passes, applied to
# the fp32 accumulators of one tile (for bf16 the tanh is the hardware's
# ``tanh.approx.f32``, one instruction per element):
#
# .. literalinclude:: ../../src/profiling_guide/kernels/geglu_common.py
#    :pyobject: gelu_tanh_times
#
# :class:`~profiling_guide.kernels.fused_mlp.FusedGeGLUMLP` wraps the fused
# gate/up kernel and cuBLAS's down GEMM in a module with the eager MLP's
# weights. On Hopper it runs a Gluon kernel whose two groups of warps take
# tiles in turn, so one tile's epilogue runs while the other's products do;
# :doc:`the deep dive <deep_dives/plot_06_deep_kernel_design>` shows the
# kernel, the four designs it grew from and what each one bought.

import torch

from profiling_guide.kernels import fused_mlp
from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.kernels.models import SimpleGeGLUMLP, mlp_flops

# %%
# The profiler block
# ------------------
# Chapter 1's block, unchanged: five steps (skip one, warm up one, record
# three), CPU and CUDA activities, input shapes, one ``record_function``
# label per forward, and the trace exported for https://ui.perfetto.dev and
# for this page.

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


# %%
# Running it
# ----------
# ``chapter`` (chapter 1) reads the flags (the post's sizes, bf16 only; the
# kernel itself also takes float16 and float32) and knows the mode: live on a
# CUDA GPU, otherwise a replay of the recordings.

from profiling_guide.pages.chapter import Chapter

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
# The eager MLP's weights in the fused module, and the compiled MLP beside it
# for comparison:

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
# The first call of each compiles (Inductor) or autotunes (our kernel tries
# its configs once per shape); ``warm_up`` makes it before the profiler
# starts, its logs on the console.

fused_run = chapter.profile("fused", fused_forward, profiler=profile_steps, label="mlp_fwd",
                            warm_up=True, code=[FusedGeGLUMLP, fused_mlp.geglu], variant="fused")
compiled_run = chapter.profile("compiled", compiled_forward, profiler=profile_steps,
                               label="mlp_fwd", warm_up=True, code=[SimpleGeGLUMLP],
                               variant="compile")

# %%
# Before we look
# --------------

from profiling_guide.analysis import expect, predicates

OURS = "this chapter"

predictions = [
    expect.Prediction("two kernels per forward: the fused gate/up GEMM and the down GEMM",
                      expect.kernels_per_step(2), OURS),
    expect.Prediction("no pointwise kernel: the GeLU·mul runs inside the GEMM",
                      expect.no_kernel_of_kind("pointwise"), OURS),
    expect.Prediction("the gate/up GEMM is our kernel", predicates.has_kernel_named("geglu"),
                      OURS),
    expect.Prediction("the down projection runs the cuBLAS kernel the compiled MLP uses for it",
                      predicates.cublas_gemms_within(compiled_run.trace), OURS),
]

# %%
# Two steps, one time axis
# ------------------------

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"torch.compile": compiled_run.trace,
                             "epilogue-fused": fused_run.trace})

# %%
# The verdicts
# ------------

verdicts = expect.judge(predictions, fused_run.trace)
tables.verdict_table(verdicts)

# %%
# Timed against everything else, in one run
# -----------------------------------------
# Chapter 5's benchmark, run by this chapter: every variant on the same
# weights, checked against eager and against a float64 reference; device
# time per forward, inputs rotated through more memory than the L2 cache
# holds, the GPU's queue kept full, 7 interleaved passes, median and
# interquartile range. cuBLAS's three bare GEMMs, timed in the same passes,
# are the reference (a kernel that computes the products itself may beat
# it); the datasheet bound is the least time the MLP can take at the
# datasheet's peaks.

from profiling_guide.measure import bench_mlp
from profiling_guide.spread import Spread, compare
from profiling_guide.pages.tables import spread_cell


def benchmark():
    # chapter 5's benchmark, every variant at the post's shape (measured once per process: a
    # build that runs chapter 5 in this process reads its run)
    result = bench_mlp.run_benchmark(batch, seq, dim, hidden, variants=bench_mlp.CHAPTER_VARIANTS,
                                     rounds=bench_mlp.CHAPTER_ROUNDS)
    # what design="auto" picks here, so the page can name the design it stands for
    result["auto_design"] = fused_mlp.choose_design(x.reshape(-1, dim), hidden)
    return result


bench = chapter.measure("bench", benchmark,
                        code=[bench_mlp.run_benchmark, bench_mlp.measure_shape,
                              bench_mlp.build_variant, fused_mlp.choose_design])
result = bench.values
times = {n: Spread.from_dict(t) for n, t in result["variants_us"].items()}
alone, bound = Spread.from_dict(result["gemms_alone_us"]), result["datasheet_bound_us"]
ours = f"fused-{result['auto_design']}"

# %%
# Each variant against the reference, and the share of the datasheet
# ceiling its whole forward reaches (the datasheet bound over its time);
# *tie*: inside the spread. Ours is the design ``design="auto"`` picked on
# this GPU.

import pandas as pd

from profiling_guide.analysis.roofline import CEILING_COLUMN

shown = [n for n in ("eager", "compile", "compile-max-autotune", "liger", ours) if n in times]
table = pd.DataFrame({
    "device µs": {n: spread_cell(times[n]) for n in shown},
    "against GEMMs alone": {n: compare(times[n], alone) for n in shown},
    "× GEMMs alone": {n: f"{times[n].median / alone.median:.2f}" for n in shown},
    CEILING_COLUMN: {n: f"{100 * bound / times[n].median:.0f}" if bound else "–" for n in shown},
    "max rel error vs fp64": {n: f"{result['max_rel_error_fp64'][n]:.1e}" for n in shown},
})
tables.styled(table)

# %%

from profiling_guide.pages import facts

facts.reference_and_bound(result)

# %%
# Chapter 5 shows this benchmark too: the same run where both pages were
# recorded in one process, as a live build records them, or else a run of
# its own, and two runs need not agree. Inductor picks some kernels by timing
# candidates on the GPU: max-autotune each GEMM's kernel as it compiles, and
# both modes the launch configuration (blocks, threads) of the fused
# GeLU·mul kernel at its first call. Another run can keep other kernels and
# rank the variants otherwise. Both runs' dates; then, where the two rankings
# differ, which variant moved, and what its traces in the two runs show.

chapter5 = Chapter.recorded("05_compare", argv=["--mode", chapter.mode])
earlier = {name: chapter5.read(name, missing_ok=True)
           for name in ("bench", "eager", "compile", "compile-max-autotune", "liger")}
this_run = {"bench": bench, "compile": compiled_run, ours: fused_run}
facts.two_runs({"chapter 5": earlier, "chapter 6": this_run}, shown)

# %%
# The claims
# ----------
# Our target: faster than every other variant in the same run, outside the
# spreads, and its output closer to float64 than eager's (one rounding to
# bf16 of h instead of three). Against cuBLAS's bare GEMMs the page reports
# what it measured, a win or a tie.

others = [n for n in times if not n.startswith("fused")]
claims = [
    expect.Prediction(f"{ours} faster than {', '.join(others)}, outside the spreads",
                      lambda r: predicates.faster_than_each(ours, others)(times), OURS),
    expect.Prediction(f"{ours} faster than cuBLAS's three bare GEMMs",
                      lambda r: predicates.compares(ours, "GEMMs alone", "faster")(
                          times | {"GEMMs alone": alone}), OURS, must_hold=False),
    expect.Prediction("its output is closer to the float64 answer than eager's",
                      predicates.closer_to_fp64(ours), OURS),
]
claim_verdicts = expect.judge(claims, result)
tables.verdict_table(claim_verdicts)

# %%
# The roofline
# ------------
# Each variant's whole forward as one point: its FLOPs over its HBM bytes
# (weights, x and y once each, plus its passes over the intermediate) on the
# x axis, the rate it achieved on the y axis. The solid roof is the datasheet
# ceiling; the dashed one, the reference rates measured in this run.
# Removing passes moves a point right; running its kernels closer to the
# roof moves it up.

from profiling_guide.pages import charts

flops = mlp_flops(rows, dim, hidden)
pass_bytes = rows * hidden * element
fixed_bytes = element * (3 * dim * hidden + 2 * rows * dim)
PASSES = {"eager": 8, "compile": 6, "liger": 6,
          "fused-dual": 2, "fused-packed": 2, "fused-packed-tma": 2, "fused-pingpong": 2}
points = {
    name: (flops / (fixed_bytes + PASSES[name] * pass_bytes), flops / t.median / 1e6)
    for name, t in times.items() if name in PASSES
}
fig = charts.roofline(points, references=result["references"],
                      title="The MLP forward on the roofline of this GPU")

# %%
# In the profiled forward, each of the two kernels against the best rate
# cuBLAS reached at this MLP's shapes in this run. That reference is not a
# ceiling: a kernel that computes the gate and up products faster than
# cuBLAS's GEMMs sits above 100 % of it.

from profiling_guide.analysis.roofline import kernel_work_table

work = kernel_work_table(fused_run.trace, rows=rows, dim=dim, hidden=hidden, element=element,
                         references=result["references"])
facts.fused_kernels(work, times[ours])

# %%
# Where it wins, and where it does not
# ------------------------------------
# The same comparison over batch·seq from 1k to 32k rows and two hidden
# sizes, in one run: at each shape, ours against the best other variant
# there (and how many times slower that one is), and against cuBLAS's bare
# GEMMs at that shape. ``torch.compile`` recompiles for every shape
# (``dynamic=False``), so each of its points is its best case.

SWEEP_ROWS = [1024, 4096, 8192, 32768]
SWEEP_HIDDENS = [hidden, 8192 if hidden != 8192 else 4096]
SWEEP_VARIANTS = ["eager", "compile", "liger", "fused"]


def shape_sweep():
    return bench_mlp.sweep(SWEEP_ROWS, SWEEP_HIDDENS, dim, SWEEP_VARIANTS, calls_per_repeat=60,
                           rates=False, cpu_issue=False)


sweep = chapter.measure("sweep", shape_sweep,
                        code=[bench_mlp.sweep, bench_mlp.measure_shape, bench_mlp.build_variant])
standing = tables.sweep_standing(sweep.values, "fused")
tables.styled(standing, precision=2)

# %%

facts.sweep_summary(standing)

# %%
# Who sets the pace
# -----------------
# For the fused forward: the host's time to issue one against the GPU's time
# to run it, profiler off; then what the profiled trace's idle time waited
# for.

from profiling_guide.pages.verdicts import pace_facts

pace_facts(fused_run)

# %%
# What to do next
# ---------------
# On the GPU, the epilogue removed four passes, and the claims above say
# what that bought at the post's shape; the sweep says at which shapes ours
# also beats cuBLAS's bare GEMMs, and where the GEMMs themselves are the
# next thing to speed up. On the host, the pace verdict above says whether
# Triton's Python launcher keeps up with the GPU; where the CPU sets the
# pace, a CUDA graph replays the forward with one call (chapter 7; the deep
# dive times it for this kernel). Training needs
# the backward too: :doc:`chapter 6b <plot_06b_training_step>` profiles a
# whole training step, and :doc:`chapter 6c <plot_06c_inside_kernel>` looks
# inside the kernel with Nsight Compute and Proton.

# sphinx_gallery_start_ignore
# What the deep dive (deep_dives/plot_06_deep_kernel_design.py) shows of the host, measured here
# so that a live build runs it once.
from profiling_guide.kernels.graphs import CapturedForward
from profiling_guide.measure.timing import cpu_issue_time


def host_cost():
    captured = fused.captured(x)  # each replay overwrites its output: nothing here keeps one
    with torch.no_grad():
        return {"ours, Triton's launcher": cpu_issue_time(lambda: fused(x)).to_dict(),
                "ours, CUDA graph": cpu_issue_time(lambda: captured(x)).to_dict(),
                "eager": cpu_issue_time(lambda: mlp(x)).to_dict()}


chapter.measure("host", host_cost, code=[FusedGeGLUMLP, fused_mlp.geglu, CapturedForward])
# sphinx_gallery_end_ignore

verdicts.require()
claim_verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_06_fused.py --batch 64 --seq 128 --dim 768 --hidden 3072
#     python -m profiling_guide.kernels.fused_mlp --check          # correctness against float64
#     profiling-guide bench-mlp --json bench.json       # the benchmark alone
#     profiling-guide bench-mlp --sweep                 # the sweep alone
#
# The recordings behind this page:

chapter.downloads()
