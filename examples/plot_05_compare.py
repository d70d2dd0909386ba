"""
5 · All four MLPs in one run: eager, compiled, max-autotune, Liger
===================================================================

Each chapter so far profiled one way of running the GeGLU MLP. Timings taken
in different runs drift with clocks, temperature and the rest of the machine,
so here all four run in **one** process, on the same weights and inputs, next
to the two ceilings that bound them (the bf16 GEMM rate and the copy
bandwidth, measured in the same run). The question is no longer "what does
each one launch" but "where does each one's time go, and how far is it from
the fastest this GPU can do".
"""

# %%
# Set-up
# ------

import torch

from profiling_guide.args import add_mlp_flags, example_parser, require_bfloat16, run_args
from profiling_guide.models import SimpleGeGLUMLP, load_liger_geglu_mlp, mlp_flops
from profiling_guide.recordings import Chapter

# sphinx-gallery runs the script with __doc__ emptied, so the description is spelled out.
parser = example_parser("5 · All four MLPs in one run: eager, compiled, max-autotune, Liger")
add_mlp_flags(parser)
args = parser.parse_args()
dtype = require_bfloat16(args, "this chapter compares bf16 kernels against the bf16 GEMM ceiling")
rows = args.batch * args.seq
element = 2

chapter = Chapter("05_compare", run_args(args), mode=args.mode)
chapter.banner()

# %%
# The four variants
# -----------------
# One set of weights, four ways to run it. ``max-autotune-no-cudagraphs`` is
# Inductor's max-autotune without CUDA graphs: it benchmarks its own Triton
# GEMM templates against cuBLAS for every ``mm`` and keeps the fastest. The
# plain ``"max-autotune"`` mode would also replay the forward as a CUDA graph,
# which removes launch gaps the other three pay: a different experiment.

chapter.require_memory(
    element * (4 * 3 * args.dim * args.hidden + rows * (2 * args.dim + 4 * args.hidden)),
    f"four MLPs at batch {args.batch} × seq {args.seq} × dim {args.dim} × hidden {args.hidden}",
)
torch.manual_seed(0)
mlp = SimpleGeGLUMLP(args.dim, args.hidden, device=chapter.device, dtype=dtype)
autotune_mlp = SimpleGeGLUMLP(args.dim, args.hidden, device=chapter.device, dtype=dtype)
autotune_mlp.load_state_dict(mlp.state_dict())
liger = load_liger_geglu_mlp(args.dim, args.hidden, device=chapter.device, dtype=dtype, offline=not chapter.live)
liger.module.load_state_dict(mlp.state_dict())
x = torch.randn(args.batch, args.seq, args.dim, device=chapter.device, dtype=dtype)

VARIANTS = {
    "eager": mlp,
    "compile": torch.compile(mlp, dynamic=False),
    "compile-max-autotune": torch.compile(autotune_mlp, mode="max-autotune-no-cudagraphs", dynamic=False),
    "liger": liger.module,
}
print(liger.note)

# %%
# Profile each
# ------------
# Compiling (and autotuning) happens at the first call; we make it before
# profiling so the traces hold steady-state forwards only.

from profiling_guide.report import Facts

runs, failed = {}, {}
for name, module in VARIANTS.items():

    def forward(module=module):
        with torch.no_grad():
            return module(x)

    try:
        if chapter.live:
            forward()
        runs[name] = chapter.capture(name, forward, label="mlp_fwd", code=[SimpleGeGLUMLP], args={"variant": name})
    except Exception as exc:
        if not chapter.live:
            raise
        failed[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
Facts(*(f"{name} could not be profiled on this GPU: {why}" for name, why in failed.items()))

# %%
# Timed in one run
# ----------------
# :func:`~profiling_guide.bench_mlp.run_benchmark` checks every variant's
# output against eager, measures the two ceilings, then times each variant:
# the median of many forwards, cycling through fresh random inputs that
# together exceed the L2 cache so no variant reads an input that is already
# on chip. Each round of forwards is queued behind a sleep kernel, so the GPU
# never waits for Python to launch the next kernel: these are device times.
# What the CPU spends issuing a forward is the *CPU µs* column below.

from profiling_guide import bench_mlp


def benchmark():
    return bench_mlp.run_benchmark(args.batch, args.seq, args.dim, args.hidden, variants=list(VARIANTS), rounds=20)


bench = chapter.measure("bench", benchmark, code=[bench_mlp.run_benchmark, bench_mlp.measure_shape,
                                                   bench_mlp.build_variant, SimpleGeGLUMLP])
result = bench.values
ceilings, floor_us, times = result["ceilings"], result["floor_us"], result["variants_us"]
Facts(
    f"Ceilings measured in this run: {ceilings['gemm_tflops']:.0f} TFLOP/s for a bf16 GEMM, "
    f"{ceilings['copy_tbps']:.2f} TB/s for a device-to-device copy. The GEMM rate is the one the GPU "
    "sustains after half a second of back-to-back GEMMs: a GPU fresh from idle runs its first milliseconds "
    "at a higher clock, until its power limit catches up.",
    f"The MLP does {mlp_flops(rows, args.dim, args.hidden) / 1e9:.1f} GFLOP per forward: at the GEMM rate "
    f"that takes {floor_us:.1f} µs. That is the compute floor: at the rate this GPU sustains, no "
    "implementation of these three products can be faster.",
    *(f"{name} failed in the benchmark: {why}" for name, why in result["errors"].items()),
)

# %%
# The table
# ---------
# Median µs per forward from the benchmark; kernels and launches per forward
# from the traces; *CPU µs*: the median time Python and the dispatcher spend
# issuing one forward, timed with the profiler off; *GPU busy*: the sum of
# kernel times in a profiled forward; *error*: the largest deviation from a
# float64 reference, relative to the largest output.

import pandas as pd

from profiling_guide import tables
from profiling_guide.kernel_names import decode

summary = pd.DataFrame([
    {
        "variant": name,
        "median µs": times.get(name, float("nan")),
        "× floor": times.get(name, float("nan")) / floor_us,
        "vs eager": times.get("eager", float("nan")) / times.get(name, float("nan")),
        "kernels": run.trace.kernels_per_step(),
        "launches": sum(n for call, n in run.trace.runtime_calls_per_step().items() if "Launch" in call),
        "CPU µs": run.timings.get("cpu_us_median", float("nan")),
        "GPU busy µs": run.trace.device_us_per_step(),
        "error": (result["max_rel_error_fp64"] or {}).get(name),
    }
    for name, run in runs.items()
]).set_index("variant")
tables.styled(summary, precision=2)

# %%
# Where the time goes
# -------------------
# Each bar splits one forward into the device time of its GEMMs and of its
# pointwise kernels (from the trace), and the rest of the median: time on the
# GPU between the end of one kernel and the start of the next.


def device_time_by_kind(trace):
    spent: dict[str, float] = {}
    for step in trace.steps:
        for ev in step.device_events:
            kind = decode(ev.name).kind
            spent[kind] = spent.get(kind, 0.0) + ev.dur_us / len(trace.steps)
    return dict(sorted(spent.items(), key=lambda kv: kv[0] != "gemm"))


from profiling_guide import charts

breakdown = {name: device_time_by_kind(run.trace) for name, run in runs.items()}
fig = charts.variant_bars({n: times[n] for n in runs if n in times}, floor_us, breakdown=breakdown,
                          title="One MLP forward, median µs")

# %%
# Every kernel against its ceiling
# --------------------------------
# GEMMs against the GEMM rate; pointwise kernels against the copy bandwidth,
# counting their passes over the ``[B·S, hidden]`` intermediate
# (:func:`~profiling_guide.roofline.intermediate_passes`).

from profiling_guide.roofline import kernel_work_table

work = pd.concat({name: kernel_work_table(run.trace, rows=rows, dim=args.dim, hidden=args.hidden, element=element,
                                          ceilings=ceilings) for name, run in runs.items()})
work.index = work.index.droplevel(1)
work.index.name = "variant"
tables.styled(work, precision=1)

# %%
# What the numbers say
# --------------------

ranked = sorted(times.items(), key=lambda kv: kv[1])
best, worst = ranked[0], ranked[-1]
gemm_us = {name: by_kind.get("gemm", 0.0) for name, by_kind in breakdown.items()}
pointwise_us = {name: sum(us for kind, us in by_kind.items() if kind != "gemm") for name, by_kind in breakdown.items()}
sentences = [
    f"Fastest: {best[0]} at {best[1]:.0f} µs ({best[1] / floor_us:.2f}× the floor); slowest: {worst[0]} at "
    f"{worst[1]:.0f} µs ({worst[1] / floor_us:.2f}×).",
    "Order, fastest first: " + ", ".join(f"{n} {us:.0f} µs" for n, us in ranked) + ".",
]
if "compile" in times and "liger" in times:
    faster, slower = sorted(("compile", "liger"), key=times.get)
    sentences.append(
        f"{faster} beats {slower} by {times[slower] / times[faster]:.2f}× in this run. Their GEMMs are the same "
        f"cuBLAS kernels ({gemm_us['compile']:.0f} vs {gemm_us['liger']:.0f} µs of GEMM time per forward); the "
        f"difference is the fused GeLU·mul kernel ({pointwise_us['compile']:.0f} µs for Inductor's, "
        f"{pointwise_us['liger']:.0f} µs for Liger's) and the gaps around it. The original post saw Inductor's "
        "kernel win on an A100; what this GPU shows is above.")
if "compile-max-autotune" in times and "compile" in times:
    same = set(decode(k.name).short for k in runs["compile"].trace.kernels if decode(k.name).kind == "gemm") == \
        set(decode(k.name).short for k in runs["compile-max-autotune"].trace.kernels if decode(k.name).kind == "gemm")
    def gemm_kernels(trace):
        found: dict[str, list[float]] = {}
        for step in trace.steps:
            for k in step.kernels:
                if decode(k.name).kind == "gemm":
                    found.setdefault(decode(k.name).short, []).append(k.dur_us)
        return ", ".join(f"{name} ({len(us) / len(trace.steps):g}×, {sum(us) / len(us):.1f} µs)"
                         for name, us in found.items())

    sentences.append(
        f"max-autotune {'kept cuBLAS for every GEMM (its own Triton templates lost its benchmark)' if same else 'replaced some cuBLAS GEMMs with its own Triton templates'}"
        f": {times['compile-max-autotune']:.0f} µs against {times['compile']:.0f} µs for the default mode. "
        f"GEMMs in the default mode: {gemm_kernels(runs['compile'].trace)}; with max-autotune: "
        f"{gemm_kernels(runs['compile-max-autotune'].trace)}."
        + ("" if same else " Autotuning times each candidate on its own, once, at compile time; inside the "
           "forward, with the other kernels around it, the choice it made can be the slower one, as the "
           "trace shows when the times above say so."))
if "compile-max-autotune" in runs:
    auto_trace = runs["compile-max-autotune"].trace
    prologue = sorted({decode(k.name).short for k in auto_trace.kernels
                       if decode(k.name).kind == "gemm" and "gelu" in decode(k.name).fused_ops})
    pointwise_left = sorted({decode(k.name).short for k in auto_trace.kernels if decode(k.name).kind == "pointwise"})
    if prologue:
        sentences.append(
            f"max-autotune also fused the GeLU·mul into a GEMM template ({', '.join(prologue)}): it computes "
            "gelu(g)·u from g and u as it loads them for the down projection. "
            + (f"The separate pointwise kernel still runs beside it ({', '.join(pointwise_left)}): by their names, "
               "this run computes the GeLU·mul twice." if pointwise_left else "No separate pointwise kernel is left."))
gemm_share = {n: gemm_us[n] / times[n] for n in runs if n in times}
sentences.append(
    "GEMMs take " + ", ".join(f"{100 * share:.0f}% of {n}" for n, share in gemm_share.items()) +
    " of the median: every variant spends most of its time in the same three products, and none of them "
    "removes the round trip of the intermediate through HBM between the first two GEMMs and the last. "
    "The next chapter does.")
Facts(*sentences)

# %%
# The four timelines
# ------------------
# One profiled forward of each, on one time axis.

from profiling_guide import timeline

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
#     python -m profiling_guide.bench_mlp --json bench.json
