"""
2 · The GeGLU MLP, eager: five kernels and a round trip through memory
=======================================================================

One MLP block of a Gemma-style model, ``down(gelu_tanh(gate(x)) * up(x))``,
run eagerly in bf16 at the original write-up's size
(``--batch 64 --seq 128 --dim 768 --hidden 3072``). How many kernels does it
launch, which of them are matrix products, and what does the GeLU·mul between
them cost?
"""

# %%
# Set-up
# ------

import torch

from profiling_guide.args import DTYPES, add_mlp_flags, example_parser, run_args
from profiling_guide.models import SimpleGeGLUMLP, mlp_flops
from profiling_guide.recordings import Chapter

# sphinx-gallery runs the script with __doc__ emptied, so the description is spelled out.
parser = example_parser('2 · The GeGLU MLP, eager: five kernels and a round trip through memory')
add_mlp_flags(parser)
args = parser.parse_args()
dtype = DTYPES[args.dtype]
rows = args.batch * args.seq

chapter = Chapter("02_mlp_eager", run_args(args), mode=args.mode)
chapter.banner()

# %%
# The code under study
# --------------------
# The model is the one of the original write-up (from
# :mod:`profiling_guide.models`):
#
# .. literalinclude:: ../../src/profiling_guide/models.py
#    :pyobject: SimpleGeGLUMLP
#
# Three bias-free linears: ``gate_proj`` and ``up_proj`` widen each token from
# ``dim`` to ``hidden``, ``down_proj`` brings it back.

element = torch.tensor([], dtype=dtype).element_size()
chapter.require_memory(
    element * (3 * args.dim * args.hidden + rows * (2 * args.dim + 4 * args.hidden)),
    f"the MLP at batch {args.batch} × seq {args.seq} × dim {args.dim} × hidden {args.hidden}",
)
torch.manual_seed(0)
mlp = SimpleGeGLUMLP(args.dim, args.hidden, device=chapter.device, dtype=dtype)
x = torch.randn(args.batch, args.seq, args.dim, device=chapter.device, dtype=dtype)


def mlp_forward():
    with torch.no_grad():  # inference: no autograd graph, no saved activations
        return mlp(x)


# %%
# Profile it, and measure in the same run the two ceilings every later number
# is compared with: the bf16 GEMM rate (an 8192³ matrix product) and the
# device-to-device copy bandwidth.

from profiling_guide import roofline

eager = chapter.capture("eager", mlp_forward, label="mlp_fwd", code=[SimpleGeGLUMLP])
ceilings = chapter.measure("ceilings", roofline.measure_ceilings,
                           code=[roofline.measure_gemm_tflops, roofline.measure_copy_tbps])

# %%
# Before we look
# --------------
# Three ``nn.Linear`` calls are three matrix products. ``F.gelu`` and ``*``
# are two more operators, each its own kernel in eager mode: five in all.
# Everything that only reshapes (``t``, ``transpose``, ``view``...) should
# cost the GPU nothing.

from profiling_guide import expect

POST = "original post (A100)"
METADATA_OPS = ["aten::t", "aten::transpose", "aten::reshape", "aten::view", "aten::as_strided", "aten::_unsafe_view"]


def gemm_kernels(trace):
    return [k for k in trace.steps[0].kernels if expect.decode(k.name).kind == "gemm"]


def occupancy_before_each_gemm(trace):
    ops = [k.launch.op for k in gemm_kernels(trace)]
    queried = sum(any("Occupancy" in c.name for c in op.runtime_calls) for op in ops)
    launches = sorted({k.launch.name for k in gemm_kernels(trace)})
    return queried == len(ops), f"{queried} of {len(ops)} GEMMs query occupancy; launched with {', '.join(launches)}"


predictions = [
    expect.Prediction("three aten::linear calls per forward", lambda t: (
        len(t.ops_named("aten::linear")) == 3 * len(t.steps),
        f"{len(t.ops_named('aten::linear')) / len(t.steps):g} per step")),
    expect.Prediction("five kernels per forward: 3 GEMMs + GeLU + mul", expect.kernels_per_step(5), POST),
    expect.Prediction("three of them are GEMMs", lambda t: (
        len(gemm_kernels(t)) == 3, f"{len(gemm_kernels(t))} GEMM kernels in a step")),
    expect.Prediction("an occupancy query before each GEMM launch", occupancy_before_each_gemm, POST,
                      must_hold=False),
    *[expect.Prediction(f"{op} launches nothing", expect.launches_nothing(op), POST, must_hold=False)
      for op in METADATA_OPS],
]

# %%
# The trace, one step
# -------------------

from profiling_guide import tables, timeline

fig = timeline.plot_step(eager.trace, title="eager GeGLU MLP, one forward")

# %%
# The verdict
# -----------

verdicts = expect.check(predictions, eager.trace)
verdicts

# %%
# Which ops launched nothing at all? The trace says (these are the metadata-only
# ops: they rewrite a tensor's shape and strides and copy no data):

from profiling_guide.report import Facts

Facts("CPU ops with no device work: " + ", ".join(eager.trace.no_device_ops) + ".")

# %%
# One linear, unfolded
# --------------------
# The dispatch chain of the first ``aten::linear`` of a step: the input is
# 3-D (batch, seq, dim), so ``matmul`` folds it to 2-D with a ``reshape``
# (a ``view``: no copy) before the ``mm``, and unfolds the result after.

first_linear = eager.trace.ops_named("aten::linear")[0]
chain = tables.dispatch_chain(eager.trace, "mlp_fwd")
tables.styled(chain.iloc[: 1 + sum(1 for _ in first_linear.walk())], precision=1)

# %%
# Launches and the runtime calls around them
# ------------------------------------------
# Which runtime call started each kernel, and what else its op asked of the
# driver. On the A100 the post saw ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``
# before every GEMM's ``cudaLaunchKernel``; here is what this GPU shows:

tables.styled(tables.launch_table(eager.trace), precision=1)

# %%

launches = tables.launch_table(eager.trace)
gemm_calls = sorted(set(launches.loc[launches["kind"] == "gemm", "launch call"]))
pointwise_calls = sorted(set(launches.loc[launches["kind"] == "pointwise", "launch call"]))
Facts(
    f"GEMMs are launched with {', '.join(gemm_calls)}; the pointwise kernels with {', '.join(pointwise_calls)}.",
    "cuLaunchKernelEx is the driver's extended launch: it takes launch attributes such as a thread-block "
    "cluster shape, which Hopper's cuBLAS kernels use. The cluster size and the occupancy the kernel needs "
    "are fixed when the library picks the kernel, so there is nothing left to query at launch time."
    if any("Ex" in c for c in gemm_calls) else "",
)

# %%
# The GEMMs
# ---------
# Each ``mm`` is ``[M, K] @ [K, N]`` with ``2·M·K·N`` FLOPs. gate and up are
# ``M=B·S, K=dim, N=hidden``; down is ``M=B·S, K=hidden, N=dim``: the same
# FLOPs, but a different shape, so cuBLAS's heuristics may pick a different
# kernel (tile and cluster) for it. The last column compares each with the
# GEMM ceiling measured in this run.

gemm_tflops = ceilings.values["gemm_tflops"]
gemms = tables.gemm_table(eager.trace, gemm_tflops=gemm_tflops)
tables.styled(gemms, precision=1)

# %%

kernels_by_shape = dict(zip(gemms["M·K·N"], gemms["kernel"]))
distinct = len(set(gemms["kernel"]))
Facts(
    f"Measured ceiling in this run: {gemm_tflops:.0f} TFLOP/s (bf16 GEMM), "
    f"{ceilings.values['copy_tbps']:.2f} TB/s (device-to-device copy).",
    f"{distinct} distinct GEMM kernel{'s' if distinct > 1 else ''} for {len(gemms)} products of "
    f"{gemms['GFLOP'].iloc[0]:.1f} GFLOP each; the slowest GEMM reaches "
    f"{gemms['% of ceiling'].min():.0f}% of the ceiling, the fastest {gemms['% of ceiling'].max():.0f}%.",
)

# %%
# The intermediate's round trip
# -----------------------------
# Between the GEMMs sits the ``[B·S, hidden]`` activation. Eagerly, the GeLU
# kernel reads ``g`` and writes ``gelu(g)``; the mul kernel reads that and ``u``
# and writes ``h``: five passes over ``B·S·hidden`` bf16 values, on top of the
# GEMMs writing ``g`` and ``u`` and ``down`` reading ``h``. None of those bytes
# are needed: a fused kernel would read ``g`` and ``u`` once and write ``h``
# once (three passes), and an epilogue-fused GEMM would write only ``h`` (one).

import pandas as pd

intermediate = rows * args.hidden * element
pointwise = [k for k in eager.trace.steps[0].kernels if expect.decode(k.name).kind == "pointwise"]
passes = {"gelu": 2, "mul": 3}
bw_rows = []
for k in pointwise:
    op = expect.decode(k.name).fused_ops[0] if expect.decode(k.name).fused_ops else k.name
    nbytes = passes.get(op, 2) * intermediate
    us = sum(e.dur_us for s in eager.trace.steps for e in s.kernels if e.name == k.name) / len(eager.trace.steps)
    bw_rows.append({"kernel": expect.decode(k.name).short, "MB moved": nbytes / 1e6, "avg_us": us,
                    "TB/s": nbytes / us / 1e6, "% of copy bandwidth": 100 * nbytes / us / 1e6 / ceilings.values["copy_tbps"]})
bw = pd.DataFrame(bw_rows)
tables.styled(bw, precision=1)

# %%

elementwise_us = bw["avg_us"].sum()
step_us = eager.trace.device_us_per_step()
Facts(
    f"The intermediate is {intermediate / 1e6:.1f} MB per tensor. GeLU and mul move "
    f"{bw['MB moved'].sum():.0f} MB in {elementwise_us:.1f} µs: {100 * elementwise_us / step_us:.0f}% of the "
    f"GPU's {step_us:.1f} µs per forward, for work that does no matrix arithmetic at all.",
    f"At the measured copy bandwidth, the three passes a fused GeLU·mul needs would take "
    f"{3 * intermediate / ceilings.values['copy_tbps'] / 1e6:.1f} µs, and the MLP's compute floor "
    f"(all FLOPs at the GEMM ceiling) is {mlp_flops(rows, args.dim, args.hidden) / gemm_tflops / 1e6:.1f} µs.",
)

# %%
# What it costs
# -------------

gpu_us, cpu_us = eager.timings["gpu_us_median"], eager.timings["cpu_us_median"]
Facts(
    f"Median GPU time per forward, profiler off: {gpu_us:.1f} µs; the CPU needs {cpu_us:.1f} µs to issue it, "
    + ("so the GPU, not Python, sets the pace: the CPU runs ahead and the launches queue up."
       if gpu_us > cpu_us else "so the CPU, not the GPU, sets the pace: the GPU waits for launches."),
)

# %%

verdicts.require()

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_02_mlp_eager.py --batch 64 --seq 128 --dim 768 --hidden 3072
