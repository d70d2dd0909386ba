"""
4 · Liger's GeGLU MLP through ``kernels``: a hand-written fused kernel
======================================================================

Liger ships the GeGLU MLP with the GeLU·mul already fused into one Triton
kernel, written by hand rather than generated. We load it the way the
original write-up does, through the ``kernels`` library (from the Hugging Face
Hub where it is reachable, otherwise from a local kernel repository through
the same library), give it the eager model's weights, and check what it
launches, how its kernel is configured, and what happens when the input shape
changes.

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

# The post's sizes and activation (Liger implements only gelu_pytorch_tanh).
# As a script, flags override them (--help lists them) and --mode picks live
# or replay; ``chapter`` knows which, and where the recordings live.
chapter = Chapter.from_command_line("04_liger", batch=64, seq=128, dim=768, hidden=3072,
                                    hidden_act="gelu_pytorch_tanh")
flags = chapter.flags
batch, seq, dim, hidden = flags.batch, flags.seq, flags.dim, flags.hidden
dtype = chapter.dtype  # bfloat16 unless --dtype says otherwise
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
rows, element = batch * seq, dtype.itemsize
chapter.require_memory(element * (9 * dim * hidden + rows * (2 * dim + 4 * hidden)),
                       f"three MLPs at batch {batch} × seq {seq} × dim {dim} × hidden {hidden}")
chapter.banner()

# %%
# Loading the layer
# -----------------
# With internet, this is the whole story::
#
#     from kernels import get_kernel
#     liger = get_kernel("kernels-community/liger-kernels", version=1)
#     mlp = liger.layers.LigerGEGLUMLP(config)
#
# :func:`~profiling_guide.kernels.models.load_liger_geglu_mlp` makes that call when
# the Hub is allowed and answers (``PROFILING_GUIDE_HUB=1``); by default, and
# on machines with no Hub, it loads the same layer through the same library
# from a local kernel repository
# (:func:`~profiling_guide.kernels.liger_repo.local_liger_repo`:
# ``kernels.get_local_kernel`` over a folder in the layout ``kernels``
# expects, which re-exports the installed ``liger-kernel`` package). In
# replay no ``kernels`` call is made at all. The note says which path ran:

liger = load_liger_geglu_mlp(dim, hidden, hidden_act=chapter.flags.hidden_act, device=device,
                             dtype=dtype, offline=not chapter.live)
print(liger.note)

# %%
# It gets the eager model's weights (same parameter names), so both compute
# the same function:

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
liger_mlp = liger.module
liger_mlp.load_state_dict(mlp.state_dict())
x = torch.randn(batch, seq, dim, device=device, dtype=dtype)


def liger_forward():
    with torch.no_grad():
        return liger_mlp(x)


def eager_forward():
    with torch.no_grad():
        return mlp(x)


# %%
# Does it compute the same thing? Both against a float64 reference:

from liger_kernel.ops.utils import calculate_settings


def compare_outputs():
    reference = SimpleGeGLUMLP(dim, hidden, device="cuda", dtype=torch.float64)
    reference.load_state_dict(mlp.state_dict())
    with torch.no_grad():
        want = reference(x.double())
        errors = {}
        for name, out in (("eager", eager_forward()), ("liger", liger_forward())):
            diff = (out.double() - want).abs()
            errors[name] = {"max_abs_error": diff.max().item(),
                            "rel_error": (diff.norm() / want.norm()).item()}
    block_size, num_warps = calculate_settings(hidden)
    return {"errors": errors, "source": liger.source, "note": liger.note,
            "block_size": block_size, "num_warps": num_warps}


check = chapter.measure("check", compare_outputs, code=[SimpleGeGLUMLP])

import pandas as pd

from profiling_guide.pages import tables

tables.styled(pd.DataFrame(check.values["errors"]).T, precision=6)

# %%

from profiling_guide.pages.prose import Facts

Facts(f"The recording was made with: {check.values['note']}.")

# %%
# Profile both
# ------------
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


eager = chapter.profile("eager", eager_forward, profiler=profile_steps, label="mlp_fwd",
                        code=[SimpleGeGLUMLP], variant="eager")
liger_run = chapter.profile("liger", liger_forward, profiler=profile_steps, label="mlp_fwd",
                            code=[SimpleGeGLUMLP], variant="liger")

# %%
# The reference rates of chapter 2, measured once per process.

from profiling_guide.measure.bench_mlp import mlp_gemm_shapes

references = chapter.reference_rates(mlp_gemm_shapes(rows, dim, hidden))

# %%
# Before we look
# --------------

from profiling_guide.analysis import checks, expect
from profiling_guide.analysis.expect import POST

predictions = [
    expect.Prediction("four kernels per forward: 3 GEMMs + Liger's fused GeLU·mul",
                      expect.kernels_per_step(4), POST),
    expect.Prediction("one _geglu_tanh_forward_kernel per forward",
                      checks.kernels_named("geglu", ["_geglu_tanh_forward_kernel"]), POST),
    expect.Prediction("no compile pre-ops (no TorchDynamo rows on the CPU)",
                      checks.no_compiler_ops, POST),
]

# %%

from profiling_guide.pages import timeline

fig = timeline.plot_compare({"eager": eager.trace, "Liger": liger_run.trace})

# %%
# The same Liger step, to explore: drag to pan, the buttons (or Ctrl and the
# wheel) to zoom, hover a bar for its decoded name, its µs and, for a kernel, the op
# that launched it and how long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(liger_run.trace, caption="Liger, one profiled step")


# %%
# The verdict
# -----------

verdicts = expect.check(predictions, liger_run.trace)
verdicts

# %%
# How Liger launches its kernel
# -----------------------------
# Liger's ``geglu_forward`` gives each row of the ``[B·S, hidden]`` input to
# one program: the grid is the number of rows, and ``calculate_settings``
# picks the block (the next power of two ≥ ``hidden`` columns) and the warps
# from the column count alone. The trace records what was launched:

from profiling_guide.pages import facts

geglu = next(k for k in liger_run.trace.steps[0].kernels if "geglu" in k.name)
facts.liger_launch(geglu, check.values, hidden)

# %%
# Every kernel of the Liger forward against the datasheet ceiling and the
# reference measured in this run: the GEMMs in TFLOP/s, Liger's kernel in
# TB/s (it reads ``g`` and ``u`` and writes ``h``, three passes over the
# intermediate).

from profiling_guide.analysis.roofline import kernel_work_table

tables.styled(kernel_work_table(liger_run.trace, rows=rows, dim=dim, hidden=hidden,
                                element=element, references=references.values), precision=1)

# %%
# Profiler off: device time per forward (queue full), the CPU's time to
# issue one, and who sets the pace.

from profiling_guide.pages.prose import pace_facts, spread_cell

runs = {"eager": eager, "liger": liger_run}
tables.styled(pd.DataFrame({name: {
    "device µs per forward": spread_cell(rec.timings["device_us"]),
    "CPU µs to issue one forward": spread_cell(rec.timings["cpu_issue_us"]),
} for name, rec in runs.items()}))

# %%

# One hand-written fused kernel in place of eager's GeLU and mul: we expect
# it to beat eager on the GPU, as the compiled MLP did.

device_times = {"Liger": liger_run.timings["device_us"], "eager": eager.timings["device_us"]}
device_verdicts = expect.check([
    expect.Prediction("Liger is faster than eager per forward, outside both spreads",
                      checks.compares("Liger", "eager", "faster"), POST, must_hold=False),
], device_times)
device_verdicts

# %%

pace_facts(liger_run)

# %%
# A new shape, no recompilation
# -----------------------------
# Liger's kernel specialises on ``n_cols`` and ``BLOCK_SIZE`` (both set by
# ``hidden``), not on the number of rows. A new sequence length only changes
# the grid, so the Triton kernel compiled for the first shape serves all of
# them. The same shapes as the compiled chapter, in the order they ran: the
# first call's wall time, and the device time per forward after it.

from profiling_guide.measure.sweep import liger_geglu_kernels_compiled, shape_sweep

SEQS = [seq, 2 * seq, 4 * seq, seq + 72]
SHAPES = [(batch, s, dim) for s in SEQS]


def liger_sweep():
    with torch.no_grad():
        return shape_sweep(liger_mlp, SHAPES, dtype=dtype, compiles=liger_geglu_kernels_compiled)


sweep = chapter.measure("sweep", liger_sweep, code=[shape_sweep, liger_geglu_kernels_compiled])
tables.styled(pd.DataFrame(sweep.values), precision=1)

# %%

verdicts.require()
device_verdicts.require()

# %%
# The transformers way: kernelize
# -------------------------------
# A transformers model never builds Liger's class. It gives a layer a hub
# layer name and keeps its own code; ``kernels.kernelize`` then replaces that
# layer's ``forward`` with one from a kernel repository, chosen by a mapping.
# Our unchanged MLP, named::
#
#     @use_kernel_forward_from_hub("GeGLUMLP")
#     class HubGeGLUMLP(SimpleGeGLUMLP): ...
#
# and kernelized by :func:`~profiling_guide.kernels.kernelize.kernelize_with_liger`
# with a mapping to the local kernel repository::
#
#     layer = LocalLayerRepository(repo, layer_name="LigerGEGLUMLPForward")
#     with use_kernel_mapping({"GeGLUMLP": {"cuda": layer}}):
#         kernelize(hub_mlp, mode=Mode.INFERENCE, device="cuda")
#
# The module and its weights stay; only ``forward`` becomes Liger's. In replay
# the model is built on the meta device and not kernelized.

from profiling_guide.kernels.kernelize import HubGeGLUMLP, kernelize_with_liger

hub_mlp = HubGeGLUMLP(dim, hidden, device=device, dtype=dtype)
hub_mlp.load_state_dict(mlp.state_dict())
if chapter.live:
    kernelize_with_liger(hub_mlp, "cuda")
    forward = hub_mlp.forward
    print(f"HubGeGLUMLP.forward is now {forward.__qualname__} from {forward.__module__}")
else:
    print("replay: HubGeGLUMLP built on the meta device, not kernelized (no kernels call)")


def kernelized_forward():
    with torch.no_grad():
        return hub_mlp(x)


kernelized_predictions = [
    expect.Prediction("under mlp_fwd, our kernelized MLP runs Liger's geglu kernel and 3 GEMMs",
                      checks.geglu_and_gemms_under("mlp_fwd"), "kernels.kernelize"),
    expect.Prediction("the same kernels as LigerGEGLUMLP",
                      checks.same_kernels_as(liger_run.trace), "kernels.kernelize",
                      must_hold=False),
]

# %%

kernelized = chapter.profile("kernelized", kernelized_forward, profiler=profile_steps,
                             label="mlp_fwd",
                             code=[SimpleGeGLUMLP, HubGeGLUMLP, kernelize_with_liger])
kernelized_verdicts = expect.check(kernelized_predictions, kernelized.trace)
kernelized_verdicts

# %%

kernelized_verdicts.require()

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_04_liger.py --batch 64 --seq 128 --dim 768 --hidden 3072
