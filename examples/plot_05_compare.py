"""
5 · All four MLPs in one run: eager, compiled, max-autotune, Liger
===================================================================

Which way of running the GeGLU MLP is fastest on the GPU, where does each
one's time go, and how far is each from the fastest this GPU can do? Timings
taken in different runs drift with clocks, temperature and the rest of the
machine, so here all four run in **one** process, on the same weights and
inputs, next to a reference (cuBLAS's GEMMs alone) and the datasheet bound.

*Needs:* ``pip install 'profiling-guide[liger]'`` (Liger's kernels, ``kernels``, Triton).
"""

# %%
# The code under study
# --------------------
# One set of weights, four ways to run it. ``max-autotune-no-cudagraphs`` is
# Inductor's max-autotune without CUDA graphs: it benchmarks its own Triton
# GEMM templates against cuBLAS for every ``mm`` and keeps the fastest. The
# plain ``"max-autotune"`` mode would also replay the forward as a CUDA graph,
# which removes launch gaps the other three pay: a different experiment.

import torch

from profiling_guide.kernels.models import SimpleGeGLUMLP, load_liger_geglu_mlp


def make_variants(mlp, autotune_mlp, liger_mlp):
    """The four ways to run one MLP (``autotune_mlp`` and ``liger_mlp`` hold ``mlp``'s weights)."""
    return {
        "eager": mlp,
        "compile": torch.compile(mlp, dynamic=False),
        "compile-max-autotune": torch.compile(autotune_mlp, mode="max-autotune-no-cudagraphs",
                                              dynamic=False),
        "liger": liger_mlp,
    }


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
# ``chapter`` (chapter 1) reads the flags (the post's sizes, bf16 only) and
# knows the mode: live on a CUDA GPU, otherwise a replay of the recordings.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line(
    "05_compare", batch=64, seq=128, dim=768, hidden=3072,
    bf16_only_because="this chapter compares bf16 kernels with the bf16 datasheet ceiling")
flags = chapter.flags
batch, seq, dim, hidden = flags.batch, flags.seq, flags.dim, flags.hidden
dtype = chapter.dtype
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
rows, element = batch * seq, dtype.itemsize
chapter.require_memory(element * (4 * 3 * dim * hidden + rows * (2 * dim + 4 * hidden)),
                       f"four MLPs at batch {batch} × seq {seq} × dim {dim} × hidden {hidden}")
chapter.banner()

# %%
# The weights, the four variants and the input:

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
autotune_mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
autotune_mlp.load_state_dict(mlp.state_dict())
liger = load_liger_geglu_mlp(dim, hidden, device=device, dtype=dtype, offline=not chapter.live)
liger.module.load_state_dict(mlp.state_dict())
x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
VARIANTS = make_variants(mlp, autotune_mlp, liger.module)
print(liger.note)

# %%
# Each variant in turn, warmed up (compiling and autotuning happen there, their
# logs on the console), profiled and loaded; a variant that fails live is
# named below and left out of the rest of the page.

from profiling_guide.pages.facts import Facts

runs, failed = {}, {}
for name, module in VARIANTS.items():

    def forward(module=module):
        with torch.no_grad():
            return module(x)

    try:
        runs[name] = chapter.profile(name, forward, profiler=profile_steps, label="mlp_fwd",
                                     warm_up=True, code=[SimpleGeGLUMLP], args={"variant": name},
                                     variant=name)
    except Exception as exc:
        if not chapter.live:
            raise
        failed[name] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
Facts(*(f"{name} could not be profiled on this GPU: {why}" for name, why in failed.items()))

# %%
# The four timelines
# ------------------
# One profiled forward of each, on one time axis: count the kernels, and
# see where the GPU lane is busy.

from profiling_guide.pages import timeline

fig = timeline.plot_compare({name: run.trace for name, run in runs.items()})

# %%
# Timed in one run
# ----------------
# :func:`~profiling_guide.measure.bench_mlp.run_benchmark` checks every variant's
# output against eager, then times each: device time per forward, cycling
# through fresh random inputs that together exceed the L2 cache, each round
# of forwards queued behind a sleep kernel so the GPU never waits for Python.
# Every variant is timed in 7 interleaved passes; a time is the median of
# those passes with their interquartile range, and one variant beats another
# only when the two ranges do not overlap. Beside them, a reference: the MLP's
# three bare cuBLAS GEMMs timed the same way (what a perfect fusion of
# everything else would reach with the library's GEMMs; a kernel that
# computes the products itself may beat it); and the datasheet bound (the
# MLP's FLOPs at the datasheet's bf16 peak; nothing runs faster).

from profiling_guide.measure import bench_mlp
from profiling_guide.spread import Spread, compare


def benchmark():
    return bench_mlp.run_benchmark(batch, seq, dim, hidden, variants=bench_mlp.CHAPTER_VARIANTS,
                                   rounds=bench_mlp.CHAPTER_ROUNDS)


bench = chapter.measure("bench", benchmark, code=[bench_mlp.run_benchmark, bench_mlp.measure_shape,
                                                   bench_mlp.build_variant, SimpleGeGLUMLP])
result = bench.values
refs = result["references"]
times = {name: Spread.from_dict(t) for name, t in result["variants_us"].items() if name in VARIANTS}
alone, bound = Spread.from_dict(result["gemms_alone_us"]), result["datasheet_bound_us"]

# %%

from profiling_guide.pages import facts

facts.reference_and_bound(result)

# %%
# The table
# ---------
# Device µs per forward from the benchmark, against eager (outside both
# spreads, or a tie), × the time of the reference (the GEMMs alone), and the
# share of the datasheet ceiling the whole forward reaches (the datasheet
# bound over its time); kernels per forward from the traces.

import pandas as pd

from profiling_guide.analysis.roofline import CEILING_COLUMN
from profiling_guide.pages import tables
from profiling_guide.pages.tables import spread_cell

summary = pd.DataFrame([
    {
        "variant": name,
        "device µs": spread_cell(times[name]),
        "against eager": compare(times[name], times["eager"]),
        "× GEMMs alone": f"{times[name].median / alone.median:.2f}",
        CEILING_COLUMN: f"{100 * bound / times[name].median:.0f}" if bound else "–",
        "kernels": int(run.trace.kernels_per_step()),
    }
    for name, run in runs.items() if name in times
]).set_index("variant")
tables.styled(summary)

# %%
# Where the time goes
# -------------------
# Each bar splits one forward into the device time of its GEMMs and of its
# pointwise kernels (from the trace), and the rest of the median: time on the
# GPU between the end of one kernel and the start of the next.

from profiling_guide.pages import charts
from profiling_guide.trace.kernel_names import decode


def device_time_by_kind(trace):
    spent: dict[str, float] = {}
    for step in trace.steps:
        for ev in step.device_events:
            kind = decode(ev.name).kind
            spent[kind] = spent.get(kind, 0.0) + ev.dur_us / len(trace.steps)
    return dict(sorted(spent.items(), key=lambda kv: kv[0] != "gemm"))


breakdown = {name: device_time_by_kind(run.trace) for name, run in runs.items()}
marks = {"cuBLAS GEMMs alone": alone.median} | ({"datasheet bound": bound} if bound else {})
fig = charts.variant_bars({n: times[n] for n in runs if n in times}, marks, breakdown=breakdown,
                          title="One MLP forward, device µs")

# %%
# What the numbers say
# --------------------

facts.ranking(times)

# %%

facts.time_by_kind(breakdown, times)

# %%
# What changed against eager, kernel by kernel
# --------------------------------------------
# ``profiling-guide diff`` (the report's page documents it) lines up two
# traces' device work through what launched it: the same GEMM in the same
# place, a fused kernel against the ops its name says it fuses, and what is
# left under the label both share (``mlp_fwd``), matched there. It calls a
# change only where the two sides' spreads do not overlap, with five samples a
# side at least. Each trace here holds three profiled steps: too few, so the
# rows below are medians of three, and nothing in them is called. The step
# comes from the benchmark instead (device µs per forward, seven interleaved
# passes), passed in as each side's step; each side's run record gives the
# report's verdict on it, as ``profiling-guide report`` reads it. The fused
# kernel is chapter 6's recording on this GPU, its step this benchmark's run of
# the design chapter 6 picks here.

from profiling_guide.analysis.diff import diff

chapter6 = Chapter.recorded("06_fused", argv=[])
fused = chapter6.read("fused", missing_ok=True)
variants = dict(runs)
steps = dict(times)
if fused is not None:
    variants["fused"] = fused
    design = chapter6.read("bench").values["auto_design"]
    steps["fused"] = Spread.from_dict(result["variants_us"][f"fused-{design}"])
diffs = {
    name: diff([runs["eager"].trace], [run.trace], a_name="eager", b_name=name,
               a_step=steps["eager"], b_step=steps[name],
               step_source="device µs per forward, the benchmark's 7 interleaved passes",
               run_records=(runs["eager"].run, run.run))
    for name, run in variants.items() if name != "eager" and name in steps
}
tables.styled(facts.diff_summary(diffs))

# %%
# max-autotune times Inductor's Triton GEMM templates against cuBLAS once,
# as it compiles, and keeps the faster for each product. Are its GEMMs
# slower than cuBLAS's here, and why? From its trace and eager's: each
# GEMM's time on the same products, how each kernel splits the product into
# blocks of threads, and how many warps one SM can hold at once given the
# registers and shared memory a block takes (the warps an SM switches
# between while others wait on memory). The trace shows how the kernels
# split the work, not what each does inside (chapter 6c looks inside a
# kernel). A choice timed once may come out otherwise in another run:
# chapter 6 runs this benchmark again and says where its ranking differs.

facts.autotuned_gemms(runs.get("compile-max-autotune"), runs["eager"])

# %%
# compile and Liger both run cuBLAS's GEMMs and one fused GeLU·mul kernel
# (Inductor's and Liger's); which is faster comes down to that one kernel.
# None of the four removes the round trip of the intermediate through HBM
# between the first two GEMMs and the last: we expect each to spend most of
# its time in the three products.

from profiling_guide.analysis import expect, predicates

numbers_verdicts = expect.judge([
    expect.Prediction("compile is faster than Liger, outside both spreads",
                      predicates.compares("compile", "liger", "faster"), "this run",
                      must_hold=False),
    expect.Prediction("every variant spends most of its median in the three GEMMs",
                      predicates.gemm_share_above(0.5, breakdown), "this run", must_hold=False),
], times)
tables.verdict_table(numbers_verdicts)

# %%
# Who sets the pace
# -----------------
# Each variant's verdict on this GPU, profiler off: the host's time to issue
# one forward against the GPU's time to run it, over every page that
# measured the variant (chapters 2 to 6 each state the same one).

from profiling_guide.pages import verdicts

tables.styled(verdicts.verdict_table(runs))

# %%

verdicts.other_gpu_facts(runs)

# %%
# What to do next
# ---------------
# None of the four removes the round trip of ``g`` and ``u`` through memory
# between the first two GEMMs and the last, and the bars show how much of
# each one's time its GEMMs take. Chapter 6 removes it: GeLU·mul computed in the gate/up
# GEMM's epilogue, so only ``h`` is written. For your own model, compare
# variants the way this page does: in one process, timed the same way, with
# their spreads. Each kernel's rate, max-autotune's GEMM templates and each
# variant's error against float64 are in
# :doc:`the deep dive <deep_dives/plot_05_deep_compare>`.

numbers_verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_05_compare.py --batch 64 --seq 128 --dim 768 --hidden 3072
#
# or only the benchmark, with the fused variants of the next chapter::
#
#     profiling-guide bench-mlp --json bench.json
#
# The recordings behind this page:

chapter.downloads()
