"""
2 · The GeGLU MLP, eager: five kernels and a round trip through memory
=======================================================================

One MLP block of a Gemma-style model, ``down(gelu_tanh(gate(x)) * up(x))``,
run eagerly in bf16 at the size of
`Profiling in PyTorch (Part 2) <https://huggingface.co/blog/torch-mlp-fusion>`_
(``--batch 64 --seq 128 --dim 768 --hidden 3072``). How many kernels does it
launch, which of them are matrix products, and what does the GeLU·mul between
them cost?

*Needs:* this package alone, no extra.
"""

# %%
# The code under study
# --------------------
# The model of the post (from :mod:`profiling_guide.kernels.models`):
#
# .. literalinclude:: ../../src/profiling_guide/kernels/models.py
#    :pyobject: SimpleGeGLUMLP
#
# Three bias-free linears: ``gate_proj`` and ``up_proj`` widen each token from
# ``dim`` to ``hidden``, ``down_proj`` brings it back.

import torch

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
# ``chapter`` (chapter 1) reads the flags (``--batch``, ``--seq``, ``--dim``,
# ``--hidden``, ``--dtype``; ``--help`` lists them) and knows the mode: live
# on a CUDA GPU, otherwise a replay of this page's recordings.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("02_mlp_eager", batch=64, seq=128, dim=768, hidden=3072)
flags = chapter.flags
batch, seq, dim, hidden = flags.batch, flags.seq, flags.dim, flags.hidden
dtype = chapter.dtype  # bfloat16 unless --dtype says otherwise
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
rows, element = batch * seq, dtype.itemsize
chapter.require_memory(element * (3 * dim * hidden + rows * (2 * dim + 4 * hidden)),
                       f"the MLP at batch {batch} × seq {seq} × dim {dim} × hidden {hidden}")
chapter.banner()

# %%
# The model and its input:

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
x = torch.randn(batch, seq, dim, device=device, dtype=dtype)


def mlp_forward():
    with torch.no_grad():  # inference: no autograd graph, no saved activations
        return mlp(x)


# %%
# Profile it, and measure in the same run the rates every later number is
# compared with (:func:`~profiling_guide.measure.timing.reference_rates`): the
# best cuBLAS bf16 GEMM rate over a settled 8192³ product and this MLP's own
# GEMM shapes, and the best device-to-device copy bandwidth, each a median
# over 7 repeats with its spread. Beside them, the vendor's datasheet peaks
# for this GPU: the only numbers this guide calls a *ceiling*, since no
# kernel can pass them. A measured rate is a *reference*: real code reaches
# it, and a short kernel can beat it.

from profiling_guide.measure.bench_mlp import mlp_gemm_shapes

eager = chapter.profile("eager", mlp_forward, profiler=profile_steps, label="mlp_fwd",
                        code=[SimpleGeGLUMLP], variant="eager")
references = chapter.reference_rates(mlp_gemm_shapes(rows, dim, hidden))

# %%
# Before we look
# --------------
# Three ``nn.Linear`` calls are three matrix products. ``F.gelu`` and ``*``
# are two more operators, each its own kernel in eager mode: five in all.
# Everything that only reshapes (``t``, ``transpose``, ``view``...) should
# cost the GPU nothing.

from profiling_guide.analysis import expect, predicates
from profiling_guide.analysis.expect import POST

METADATA_OPS = ["aten::t", "aten::transpose", "aten::reshape", "aten::view", "aten::as_strided",
                "aten::_unsafe_view"]

predictions = [
    expect.Prediction("three aten::linear calls per forward",
                      predicates.ops_per_step("aten::linear", 3)),
    expect.Prediction("five kernels per forward: 3 GEMMs + GeLU + mul",
                      expect.kernels_per_step(5), POST),
    expect.Prediction("three of them are GEMMs", predicates.gemms_per_step(3)),
    expect.Prediction("an occupancy query before each GEMM launch",
                      predicates.gemms_query_occupancy, POST, must_hold=False),
    *[expect.Prediction(f"{op} launches nothing", expect.launches_nothing(op), POST,
                        must_hold=False) for op in METADATA_OPS],
]

# %%
# The trace, one step
# -------------------
# CPU ops by nesting depth, the runtime calls, the GPU stream; arrows join
# each launch to its kernel.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_step(eager.trace, title="eager GeGLU MLP, one forward")

# %%
# The verdicts
# ------------

verdicts = expect.judge(predictions, eager.trace)
tables.verdict_table(verdicts)

# %%
# Where the post saw ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` before
# each GEMM's launch on its A100, this GPU may launch with
# ``cuLaunchKernelEx`` and query nothing: the launches, op by op, are in
# :doc:`the deep dive <deep_dives/plot_01_deep_dispatch>`.
#
# The GEMMs
# ---------
# Each ``mm`` is ``[M, K] @ [K, N]`` with ``2·M·K·N`` FLOPs, read from the
# op's recorded input dims: gate and up are ``M=B·S, K=dim, N=hidden``, down
# is ``M=B·S, K=hidden, N=dim``. The time is the GEMM kernel's alone (a
# memset its op launches is left out). Each rate is set against the
# datasheet ceiling and the best cuBLAS rate measured in this run.

from profiling_guide.analysis.roofline import CEILING_COLUMN, REFERENCE_COLUMN

refs = references.values
gemms = tables.gemm_table(eager.trace, references=refs)
gemms.index = [f"GEMM {i + 1}" for i in range(len(gemms))]
lesson_columns = [CEILING_COLUMN, REFERENCE_COLUMN, "TFLOP/s", "avg_us", "M·K·N"]
tables.styled(gemms[lesson_columns], precision=1)

# %%

from profiling_guide.pages import facts

facts.reference_rates(refs)

# %%
# The profiler's own table adds an op's calls together whatever their
# shapes. Live, ``prof.key_averages(group_by_input_shape=True)`` keeps each
# input shape in a row of its own (it needs ``record_shapes=True``): here
# ``aten::mm`` splits into gate's and up's two products of one shape and
# down's one of another. The same grouping, read from the trace so that it
# shows in replay too, for the ops that ran device work (µs per step):

by_shape = tables.op_table(eager.trace, by_input_shape=True)
with_device_work = by_shape[by_shape["cuda_total_us"] > 0]
tables.styled(with_device_work.sort_values("cuda_total_us", ascending=False), precision=1)

# %%
# The intermediate's round trip
# -----------------------------
# Between the GEMMs sits the ``[B·S, hidden]`` activation. Eagerly, the GeLU
# kernel reads ``g`` and writes ``gelu(g)``; the mul kernel reads that and ``u``
# and writes ``h``: five passes over ``B·S·hidden`` bf16 values, on top of the
# GEMMs writing ``g`` and ``u`` and ``down`` reading ``h``. None of those bytes
# are needed: a fused kernel would read ``g`` and ``u`` once and write ``h``
# once (three passes), and an epilogue-fused GEMM would write only ``h`` (one).

from profiling_guide.analysis.roofline import kernel_work_table

intermediate = rows * hidden * element
work = kernel_work_table(eager.trace, rows=rows, dim=dim, hidden=hidden, element=element,
                         references=refs)
bw = work[work["kind"] == "pointwise"]
bw_columns = [REFERENCE_COLUMN, CEILING_COLUMN, "achieved", "avg_us", "work"]
tables.styled(bw.set_index("kernel")[bw_columns], precision=1)

# %%
# GeLU and mul do no matrix arithmetic at all. Their share of the step, and
# what the three passes of a fused GeLU·mul would take at the measured copy
# bandwidth; beside them, the datasheet bound of the whole MLP: its FLOPs at
# the bf16 peak, or its least HBM traffic at the peak bandwidth, whichever is
# longer.

facts.intermediate_round_trip(eager.trace, bw, intermediate_bytes=intermediate, references=refs,
                              flops=mlp_flops(rows, dim, hidden),
                              min_bytes=element * (3 * dim * hidden + 2 * rows * dim))

# %%
# Who sets the pace
# -----------------
# The host's time to issue one forward against the GPU's time to run it,
# profiler off, over every page that measured this forward on this GPU; then
# what the profiled trace's idle time waited for.

from profiling_guide.pages.verdicts import pace_facts

pace_facts(eager)

# %%
# What to do next
# ---------------
# Two of the five kernels move bytes and compute nothing: GeLU and mul pass
# the intermediate through memory five times where three would do, or one.
# Fusing them is the next step: :doc:`chapter 3 <plot_03_mlp_compile>` lets
# ``torch.compile`` do it, :doc:`chapter 4 <plot_04_liger>` uses Liger's
# hand-written kernel, and :doc:`chapter 6 <plot_06_fused>` folds GeLU·mul
# into the GEMM's epilogue so that ``g`` and ``u`` never reach memory.

verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_02_mlp_eager.py --batch 64 --seq 128 --dim 768 --hidden 3072
#
# The recordings behind this page:

chapter.downloads()
