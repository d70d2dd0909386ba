"""
4 · Liger's GeGLU MLP through ``kernels``: a hand-written fused kernel
======================================================================

Liger ships the GeGLU MLP with the GeLU·mul already fused into one Triton
kernel, written by hand rather than generated. Loaded the way the original
write-up loads it, through the ``kernels`` library, does it launch what the
post says, and is it faster than eager on the GPU?

*Needs:* ``pip install 'profiling-guide[liger]'`` (Liger's kernels, ``kernels``, Triton).
"""

# %%
# The code under study
# --------------------
# With internet, this is the whole story::
#
#     from kernels import get_kernel
#     liger = get_kernel("kernels-community/liger-kernels", version=1)
#     mlp = liger.layers.LigerGEGLUMLP(config)
#
# ``config`` needs only ``hidden_size``, ``intermediate_size`` and
# ``hidden_act`` (Liger implements ``gelu_pytorch_tanh``). The layer gets the
# eager model's weights (same parameter names), so both compute the same
# function.

import torch

from profiling_guide.kernels.models import SimpleGeGLUMLP, load_liger_geglu_mlp

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
# ``chapter`` (chapter 1) reads the flags (the post's sizes and activation;
# ``--help`` lists them) and knows the mode: live on a CUDA GPU, otherwise a
# replay of the recordings.

from profiling_guide.pages.chapter import Chapter

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
# :func:`~profiling_guide.kernels.models.load_liger_geglu_mlp` makes the
# ``get_kernel`` call above when the Hub is allowed and answers
# (``PROFILING_GUIDE_HUB=1``); by default, and on machines with no Hub, it
# loads the same layer through the same library from a local kernel
# repository (:func:`~profiling_guide.kernels.liger_repo.local_liger_repo`,
# which re-exports the installed ``liger-kernel`` package). In replay no
# ``kernels`` call is made at all. The note says which path ran:

liger = load_liger_geglu_mlp(dim, hidden, hidden_act=chapter.flags.hidden_act, device=device,
                             dtype=dtype, offline=not chapter.live)
print(liger.note)

# %%
# The eager model, its weights given to Liger's layer, and the input:

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

tables.styled(pd.DataFrame(check.values["errors"]).T.map("{:.2e}".format))

# %%

from profiling_guide.pages.facts import Facts

Facts(f"The recording was made with: {check.values['note']}.")

# %%
# Profile both, and take the reference rates of chapter 2 (measured once per
# process):

from profiling_guide.measure.bench_mlp import mlp_gemm_shapes

eager = chapter.profile("eager", eager_forward, profiler=profile_steps, label="mlp_fwd",
                        code=[SimpleGeGLUMLP], variant="eager")
liger_run = chapter.profile("liger", liger_forward, profiler=profile_steps, label="mlp_fwd",
                            code=[SimpleGeGLUMLP], variant="liger")
references = chapter.reference_rates(mlp_gemm_shapes(rows, dim, hidden))

# %%
# Before we look
# --------------
# The post's expectations: the three GEMMs, one hand-written fused kernel,
# and none of the compiler's machinery on the host.

from profiling_guide.analysis import expect, predicates
from profiling_guide.analysis.expect import POST

predictions = [
    expect.Prediction("four kernels per forward: 3 GEMMs + Liger's fused GeLU·mul",
                      expect.kernels_per_step(4), POST),
    expect.Prediction("one _geglu_tanh_forward_kernel per forward",
                      predicates.kernels_named("geglu", ["_geglu_tanh_forward_kernel"]), POST),
    expect.Prediction("no compile pre-ops (no TorchDynamo rows on the CPU)",
                      predicates.no_compiler_ops, POST),
]

# %%
# Two steps, one time axis
# ------------------------

from profiling_guide.pages import timeline

fig = timeline.plot_compare({"eager": eager.trace, "Liger": liger_run.trace})

# %%
# The verdicts
# ------------

verdicts = expect.judge(predictions, liger_run.trace)
tables.verdict_table(verdicts)

# %%
# Each kernel, against the ceilings
# ---------------------------------
# Every kernel of the Liger forward against the reference measured in this
# run and the datasheet ceiling: the GEMMs in TFLOP/s, Liger's kernel in TB/s
# (it reads ``g`` and ``u`` and writes ``h``, three passes over the
# intermediate). How Liger configures its launch, and why a new sequence
# length needs no new compile, is in
# :doc:`the deep dive <deep_dives/plot_04_deep_liger>`.

from profiling_guide.analysis.roofline import CEILING_COLUMN, REFERENCE_COLUMN, kernel_work_table

work = kernel_work_table(liger_run.trace, rows=rows, dim=dim, hidden=hidden, element=element,
                         references=references.values)
work_columns = [REFERENCE_COLUMN, CEILING_COLUMN, "achieved", "avg_us", "work"]
tables.styled(work.set_index("kernel")[work_columns], precision=1)

# %%
# Whole forwards, profiler off
# ----------------------------
# Device time per forward (the GPU's queue kept full) and the CPU's time to
# issue one: medians over repeats, with their interquartile range.

from profiling_guide.pages.tables import spread_cell

runs = {"eager": eager, "liger": liger_run}
tables.styled(pd.DataFrame({name: {
    "device µs per forward": spread_cell(rec.timings["device_us"]),
    "CPU µs to issue one forward": spread_cell(rec.timings["cpu_issue_us"]),
} for name, rec in runs.items()}))

# %%
# One hand-written fused kernel in place of eager's GeLU and mul: we expect
# it to beat eager on the GPU, as the compiled MLP did.

device_times = {"Liger": liger_run.timings["device_us"], "eager": eager.timings["device_us"]}
device_verdicts = expect.judge([
    expect.Prediction("Liger is faster than eager per forward, outside both spreads",
                      predicates.compares("Liger", "eager", "faster"), POST, must_hold=False),
], device_times)
tables.verdict_table(device_verdicts)

# %%
# Who sets the pace
# -----------------
# For Liger's forward: the host's time to issue one against the GPU's time
# to run it, profiler off, over every page that measured it on this GPU;
# then what the profiled trace's idle time waited for.

from profiling_guide.pages.verdicts import pace_facts

pace_facts(liger_run)

# %%
# What to do next
# ---------------
# Liger and ``torch.compile`` fuse the same two operators, one by hand, one
# generated, and leave the GEMMs to cuBLAS. Which is faster is a question for
# one run with both: chapter 5 times every variant side by side. In a
# transformers model you would not build Liger's class yourself:
# ``kernels.kernelize`` swaps a named layer's ``forward`` for Liger's, shown
# with its trace in the deep dive.

# sphinx_gallery_start_ignore
# What the deep dive (deep_dives/plot_04_deep_liger.py) shows, measured here so that a live build
# runs it once: the shape sweep, and our MLP kernelized with Liger's forward.
from profiling_guide.kernels.kernelize import HubGeGLUMLP, kernelize_with_liger
from profiling_guide.measure.shape_sweeps import liger_geglu_kernels_compiled, shape_sweep

SEQS = [seq, 2 * seq, 4 * seq, seq + 72]
SHAPES = [(batch, s, dim) for s in SEQS]


def liger_sweep():
    with torch.no_grad():
        return shape_sweep(liger_mlp, SHAPES, dtype=dtype, compiles=liger_geglu_kernels_compiled)


chapter.measure("sweep", liger_sweep, code=[shape_sweep, liger_geglu_kernels_compiled])
hub_mlp = HubGeGLUMLP(dim, hidden, device=device, dtype=dtype)
hub_mlp.load_state_dict(mlp.state_dict())
if chapter.live:
    kernelize_with_liger(hub_mlp, "cuda")


def kernelized_forward():
    with torch.no_grad():
        return hub_mlp(x)


chapter.profile("kernelized", kernelized_forward, profiler=profile_steps,
                label="mlp_fwd",
                code=[SimpleGeGLUMLP, HubGeGLUMLP, kernelize_with_liger])
# sphinx_gallery_end_ignore

verdicts.require()
device_verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_04_liger.py --batch 64 --seq 128 --dim 768 --hidden 3072
#
# The recordings behind this page:

chapter.downloads()
