"""
5 · All four MLPs in one run: eager, compiled, max-autotune, Liger
===================================================================

Each chapter so far profiled one way of running the GeGLU MLP. Timings taken
in different runs drift with clocks, temperature and the rest of the machine,
so here all four run in **one** process, on the same weights and inputs, next
to two floors: cuBLAS's three bare GEMMs timed the same way, and the
datasheet bound of this GPU. The question is no longer "what does
each one launch" but "where does each one's time go, and how far is it from
the fastest this GPU can do".

*Needs:* ``pip install 'profiling-guide[liger]'`` (Liger's kernels, ``kernels``, Triton).
"""

# %%
# Set-up
# ------
# The sizes of the post. After ``pip install`` of this repository (with the
# ``liger`` extra), the cells of this page, copied in order into a file, run as
# they are: on a CUDA GPU they profile, elsewhere they replay the recordings.

import torch

from profiling_guide.kernels.models import (
    SimpleGeGLUMLP,
    load_liger_geglu_mlp,
)
from profiling_guide.pages.chapter import Chapter

# The post's sizes, in bf16 only. As a script, flags override the sizes
# (--help lists them) and --mode picks live or replay; ``chapter`` knows
# which, and where the recordings live.
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
# The four variants
# -----------------
# One set of weights, four ways to run it. ``max-autotune-no-cudagraphs`` is
# Inductor's max-autotune without CUDA graphs: it benchmarks its own Triton
# GEMM templates against cuBLAS for every ``mm`` and keeps the fastest. The
# plain ``"max-autotune"`` mode would also replay the forward as a CUDA graph,
# which removes launch gaps the other three pay: a different experiment.

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
autotune_mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
autotune_mlp.load_state_dict(mlp.state_dict())
liger = load_liger_geglu_mlp(dim, hidden, device=device, dtype=dtype, offline=not chapter.live)
liger.module.load_state_dict(mlp.state_dict())
x = torch.randn(batch, seq, dim, device=device, dtype=dtype)

VARIANTS = {
    "eager": mlp,
    "compile": torch.compile(mlp, dynamic=False),
    "compile-max-autotune": torch.compile(autotune_mlp, mode="max-autotune-no-cudagraphs",
                                          dynamic=False),
    "liger": liger.module,
}
print(liger.note)

# %%
# Profile each
# ------------
# Compiling (and autotuning) happens at the first call; ``chapter.warm_up``
# makes it before profiling (its logs go to the console), so the traces hold
# steady-state forwards only.
# With the ``torch.profiler`` block of chapter 1: five steps (skip one, warm up
# one, record three), CPU and CUDA activities, input shapes, one
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


# %%
# Each variant in turn, warmed up, profiled and loaded; a variant that fails
# live is named below and left out of the rest of the page.

from profiling_guide.pages.prose import Facts

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
# Timed in one run
# ----------------
# :func:`~profiling_guide.measure.bench_mlp.run_benchmark` checks every variant's
# output against eager, then times each: device time per forward, cycling
# through fresh random inputs that together exceed the L2 cache, each round
# of forwards queued behind a sleep kernel so the GPU never waits for Python.
# Every variant is timed in 7 interleaved passes; a time is the median of
# those passes with their interquartile range, and one variant beats another
# only when the two ranges do not overlap. The same passes time the MLP's
# three bare cuBLAS GEMMs (no GeLU, no mul): the first of two floors, what a
# perfect fusion of everything else would reach with the library's GEMMs.
# The second is the datasheet bound: the MLP's FLOPs at the datasheet's bf16
# peak; nothing runs faster. The benchmark times every variant of this guide,
# the next chapter's too, in one run that both pages read; this one shows its
# four.

from profiling_guide.measure import bench_mlp
from profiling_guide.measure.timing import Spread, compare


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

facts.floors(result)
facts.reference_rates(refs)
Facts(*(f"{name} failed in the benchmark: {why}" for name, why in result["errors"].items()
        if name in VARIANTS))

# %%
# The table
# ---------
# Device µs per forward from the benchmark, against both floors and against
# eager; kernels and launches per forward from the traces; *CPU µs*: the
# median time Python and the dispatcher spend issuing one forward, profiler
# off; *kernel µs*: the sum of kernel times in a profiled forward; *error*:
# the largest deviation from a float64 reference, relative to the largest
# output.

import pandas as pd

from profiling_guide.pages import tables
from profiling_guide.pages.prose import spread_cell

summary = pd.DataFrame([
    {
        "variant": name,
        "device µs": spread_cell(times[name]),
        "× GEMMs alone": times[name].median / alone.median,
        "× datasheet bound": times[name].median / bound if bound else float("nan"),
        "eager ÷ this": times["eager"].median / times[name].median,
        "against eager": compare(times[name], times["eager"]),
        "kernels": int(run.trace.kernels_per_step()),
        "launches": int(sum(n for call, n in run.trace.runtime_calls_per_step().items()
                            if "Launch" in call)),
        "CPU µs": spread_cell(Spread.from_dict(result["cpu_issue_us"][name])),
        "kernel µs": run.trace.device_us_per_step(),
        "error": (result["max_rel_error_fp64"] or {}).get(name),
    }
    for name, run in runs.items() if name in times
]).set_index("variant")
tables.styled(summary, precision=2)

# %%
# Who sets the pace in each profiled forward
# (:func:`~profiling_guide.analysis.pace.pace`): how busy the GPU was from the first
# launch to the last kernel's end, and whether the launch→start delay grew
# along the step.

from profiling_guide.analysis.pace import pace, summarize_step


def pace_row(trace):
    steps = [summarize_step(s) for s in trace.steps]
    return {
        "verdict (profiler on)": pace(steps).bound,
        "GPU busy % of the step":
            100 * sum(s.device_busy_us for s in steps) / sum(s.window_us for s in steps),
        "GPU idle % between its kernels":
            100 * sum(s.gpu_idle_fraction for s in steps) / len(steps),
        "launch→start µs, first third": sum(s.delay_start_us or 0 for s in steps) / len(steps),
        "launch→start µs, last third": sum(s.delay_end_us or 0 for s in steps) / len(steps),
    }


pace_rows = pd.DataFrame({name: pace_row(run.trace) for name, run in runs.items()}).T
tables.styled(pace_rows, precision=1)

# %%
# Where the time goes
# -------------------
# Each bar splits one forward into the device time of its GEMMs and of its
# pointwise kernels (from the trace), and the rest of the median: time on the
# GPU between the end of one kernel and the start of the next.


from profiling_guide.trace.kernel_names import decode


def device_time_by_kind(trace):
    spent: dict[str, float] = {}
    for step in trace.steps:
        for ev in step.device_events:
            kind = decode(ev.name).kind
            spent[kind] = spent.get(kind, 0.0) + ev.dur_us / len(trace.steps)
    return dict(sorted(spent.items(), key=lambda kv: kv[0] != "gemm"))


from profiling_guide.pages import charts

breakdown = {name: device_time_by_kind(run.trace) for name, run in runs.items()}
floors = {"cuBLAS GEMMs alone": alone.median} | ({"datasheet bound": bound} if bound else {})
fig = charts.variant_bars({n: times[n] for n in runs if n in times}, floors, breakdown=breakdown,
                          title="One MLP forward, device µs")

# %%
# Every kernel against the ceiling and the reference
# --------------------------------------------------
# GEMMs in TFLOP/s, pointwise kernels in TB/s, counting their passes over the
# ``[B·S, hidden]`` intermediate
# (:func:`~profiling_guide.analysis.roofline.intermediate_passes`); each against the
# datasheet ceiling and the rate measured in this run.

from profiling_guide.analysis.roofline import kernel_work_table

work = pd.concat({name: kernel_work_table(run.trace, rows=rows, dim=dim, hidden=hidden,
                                          element=element, references=refs)
                  for name, run in runs.items()})
work.index = work.index.droplevel(1)
work.index.name = "variant"
tables.styled(work, precision=1)

# %%
# What the numbers say
# --------------------

facts.ranking(times)
facts.time_by_kind(breakdown, times)

# %%
# compile and Liger both run cuBLAS's GEMMs and one fused GeLU·mul kernel
# (Inductor's and Liger's); which is faster comes down to that one kernel.
# None of the four removes the round trip of the intermediate through HBM
# between the first two GEMMs and the last: we expect each to spend most of
# its time in the three products. The next chapter removes it.

from profiling_guide.analysis import checks, expect

numbers_verdicts = expect.check([
    expect.Prediction("compile is faster than Liger, outside both spreads",
                      checks.compares("compile", "liger", "faster"), "this run", must_hold=False),
    expect.Prediction("every variant spends most of its median in the three GEMMs",
                      checks.gemm_share_above(0.5, breakdown), "this run", must_hold=False),
], times)
numbers_verdicts

# %%

numbers_verdicts.require()

# %%
# max-autotune's Triton GEMM templates, with the tensors each launch takes.
# A template whose name lists gelu and mul but whose launch takes a single
# ``[B, S, hidden]`` tensor reads ``h``, the pointwise kernel's output: it
# cannot recompute ``gelu(g)·u``, which needs both ``g`` and ``u``. Its name
# lists the ops of the graph nodes it was built from, not the work it repeats.

# (eager's trace, which has none, where max-autotune failed live)
autotuned = runs.get("compile-max-autotune", runs["eager"]).trace
tables.styled(tables.template_table(autotuned), precision=1)

# %%

expect.check([
    expect.Prediction("a max-autotune GEMM template takes a single [B, S, hidden] tensor: h",
                      checks.template_reads_one(hidden), "this run", must_hold=False),
], autotuned)

# %%
# The four timelines
# ------------------
# One profiled forward of each, on one time axis.

from profiling_guide.pages import timeline

fig = timeline.plot_compare({name: run.trace for name, run in runs.items()})

# %%
# The recordings
# --------------

chapter.downloads()

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
