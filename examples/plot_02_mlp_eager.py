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
# ``dim`` to ``hidden``, ``down_proj`` brings it back. After
# ``pip install`` of this repository, the cells of this page, copied in order
# into a file (or downloaded below), run as they are: on a CUDA GPU they
# profile, elsewhere they replay this page's recordings.

import torch

from profiling_guide.kernels.models import SimpleGeGLUMLP, mlp_flops
from profiling_guide.pages.chapter import Chapter

# The post's sizes. Run as a script, flags override them (--batch, --seq,
# --dim, --hidden, --dtype; --help lists them all) and --mode picks live or
# replay. ``chapter`` knows which, and where the recordings live (chapter 1).
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
# Profiling
# ---------
# The ``torch.profiler`` block of chapter 1: five steps (skip one, warm up
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
# Profile it (on a GPU; then the trace is read back, as in replay), and
# measure in the same run the rates every later number is
# compared with (:func:`~profiling_guide.measure.timing.reference_rates`, once per
# process): the best cuBLAS bf16 GEMM rate seen over a settled 8192³ product
# and this MLP's own GEMM shapes, and the best device-to-device copy
# bandwidth, each a median over 7 repeats with its spread. Beside them, the
# vendor's datasheet peaks for this GPU: the only numbers this guide calls a
# *ceiling*, since no kernel can pass them. A measured rate is a *reference*:
# real code reaches it, and a short kernel can beat it.

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

from profiling_guide.analysis import checks, expect
from profiling_guide.analysis.expect import POST

METADATA_OPS = ["aten::t", "aten::transpose", "aten::reshape", "aten::view", "aten::as_strided",
                "aten::_unsafe_view"]

predictions = [
    expect.Prediction("three aten::linear calls per forward",
                      checks.ops_per_step("aten::linear", 3)),
    expect.Prediction("five kernels per forward: 3 GEMMs + GeLU + mul",
                      expect.kernels_per_step(5), POST),
    expect.Prediction("three of them are GEMMs", checks.gemms_per_step(3)),
    expect.Prediction("an occupancy query before each GEMM launch", checks.gemms_query_occupancy,
                      POST, must_hold=False),
    *[expect.Prediction(f"{op} launches nothing", expect.launches_nothing(op), POST,
                        must_hold=False) for op in METADATA_OPS],
]

# %%
# The trace, one step
# -------------------

from profiling_guide.pages import tables, timeline

fig = timeline.plot_step(eager.trace, title="eager GeGLU MLP, one forward")

# %%
# The same step, to explore: drag to pan, the buttons (or Ctrl and the
# wheel) to zoom, hover a bar for its decoded name, its µs and, for a kernel, the op
# that launched it and how long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(eager.trace, caption="eager GeGLU MLP, one profiled step")


# %%
# The verdict
# -----------

verdicts = expect.check(predictions, eager.trace)
verdicts

# %%
# Which ops launched nothing at all? The trace says (these are the
# metadata-only ops: they rewrite a tensor's shape and strides and copy no
# data):

from profiling_guide.pages.prose import Facts, pace_facts

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
# driver. On the A100 the post saw
# ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` before every GEMM's
# ``cudaLaunchKernel``; here is what this GPU shows:

tables.styled(tables.launch_table(eager.trace), precision=1)

# %%
# ``cuLaunchKernelEx`` is the driver's extended launch: it takes launch
# attributes such as a thread-block cluster shape, which Hopper's cuBLAS
# kernels use. The cluster size and the occupancy the kernel needs are fixed
# when the library picks the kernel, so there is nothing left to query at
# launch time. Which call launched each kind of kernel here:

launch_verdicts = expect.check([
    expect.Prediction("GEMMs are launched with cuLaunchKernelEx",
                      checks.launched_with("gemm", "cuLaunchKernelEx"), "this page",
                      must_hold=False),
], eager.trace)
launch_verdicts

# %%
# The GEMMs
# ---------
# Each ``mm`` is ``[M, K] @ [K, N]`` with ``2·M·K·N`` FLOPs, read from the
# op's recorded input dims. gate and up are ``M=B·S, K=dim, N=hidden``; down
# is ``M=B·S, K=hidden, N=dim``: the same FLOPs, but a different shape, so
# cuBLAS's heuristics may pick a different kernel (tile and cluster) for it.
# The time is the GEMM kernel's alone (a memset its op launches is left out).
# The last two columns compare each with the datasheet ceiling and with the
# best cuBLAS rate measured in this run.

refs = references.values
gemms = tables.gemm_table(eager.trace, references=refs)
tables.styled(gemms, precision=1)

# %%

from profiling_guide.pages import facts

facts.reference_rates(refs)
facts.gemm_rates(gemms)

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
tables.styled(bw, precision=1)

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
# What it costs, and who sets the pace
# ------------------------------------
# The profiled forward shows each kernel's launch and start. If the CPU ran
# ahead, each launch would wait longer in the queue than the one before; if
# the GPU waits for Python, the delays stay flat and the GPU idles between
# kernels. The launch table above has the delays; here they are summed up,
# then set beside the profiler-off timings.

pace_facts(eager)

# %%

facts.profiler_off(eager.timings)

# %%

verdicts.require()
launch_verdicts.require()

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
