"""
3 · The MLP under torch.compile: what the compiler fuses, and what it costs
===========================================================================

The same GeGLU MLP, compiled. Does the compiler fuse the GeLU and the mul into
one kernel while the GEMMs stay with cuBLAS, and does the forward get faster
on the GPU for it? We check both against the trace and put a number on the
compile at the first call.

*Needs:* this package alone, no extra (live, ``torch.compile`` uses the Triton that torch's CUDA
builds bring).
"""

# %%
# The code under study
# --------------------
# Chapter 2's ``SimpleGeGLUMLP``, and ``torch.compile`` of it. Both are
# profiled in this run so the kernel names can be compared directly.

import torch

from profiling_guide.kernels.models import SimpleGeGLUMLP

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
# ``chapter`` (chapter 1) reads the flags, the post's sizes and its
# ``--compile`` switch (this page always compiles; ``--help`` lists them), and
# knows the mode: live on a CUDA GPU, otherwise a replay of the recordings.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("03_mlp_compile", batch=64, seq=128, dim=768, hidden=3072,
                                    compile=True)
flags = chapter.flags
batch, seq, dim, hidden = flags.batch, flags.seq, flags.dim, flags.hidden
dtype = chapter.dtype  # bfloat16 unless --dtype says otherwise
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
rows, element = batch * seq, dtype.itemsize
chapter.require_memory(element * (3 * dim * hidden + rows * (2 * dim + 4 * hidden)),
                       f"the MLP at batch {batch} × seq {seq} × dim {dim} × hidden {hidden}")
chapter.banner()

# %%
# The model, its input, and the compiled model:

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
compiled_mlp = torch.compile(mlp)


def eager_forward():
    with torch.no_grad():
        return mlp(x)


def compiled_forward():
    with torch.no_grad():
        return compiled_mlp(x)


# %%
# Compile once, outside the profiler, and time that first call:

import time


def first_compiled_call():
    start = time.perf_counter()
    compiled_forward()
    torch.cuda.synchronize()
    return {"first_call_s": time.perf_counter() - start}


compile_cost = chapter.measure("compile", first_compiled_call, code=[SimpleGeGLUMLP])

# %%
# Then profile both, and take the reference rates of chapter 2 (measured once
# per process).

from profiling_guide.measure.bench_mlp import mlp_gemm_shapes

eager = chapter.profile("eager", eager_forward, profiler=profile_steps, label="mlp_fwd",
                        code=[SimpleGeGLUMLP], variant="eager")
compiled = chapter.profile("compiled", compiled_forward, profiler=profile_steps, label="mlp_fwd",
                           code=[SimpleGeGLUMLP], variant="compile")
references = chapter.reference_rates(mlp_gemm_shapes(rows, dim, hidden))

# %%
# Before we look
# --------------
# The post's expectations: the three GEMMs unchanged, GeLU and mul fused into
# one generated Triton kernel, and the dispatcher's wrappers gone.

from profiling_guide.analysis import expect, predicates
from profiling_guide.analysis.expect import POST

predictions = [
    expect.Prediction("four kernels per forward: 3 GEMMs + one fused GeLU·mul",
                      expect.kernels_per_step(4), POST),
    expect.Prediction("no aten::linear / aten::t / aten::matmul: three bare aten::mm",
                      predicates.bare_mm, POST),
    expect.Prediction("GEMM kernel names byte-identical to eager",
                      predicates.same_gemms_as(eager.trace), POST),
    expect.Prediction("one Triton kernel fusing gelu and mul",
                      predicates.one_triton_kernel_fusing("gelu", "mul"), POST),
]

# %%
# Two steps, one time axis
# ------------------------
# Eager on top, compiled below: count the kernels on the GPU lanes.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"eager": eager.trace, "torch.compile": compiled.trace})

# %%
# The verdicts
# ------------

verdicts = expect.judge(predictions, compiled.trace)
tables.verdict_table(verdicts)

# %%
# The fused kernel
# ----------------
# Inductor names its kernels ``triton_<kind>_fused_<ops>_<n>``: ``poi`` is
# pointwise, and the ops are the ATen ops the kernel absorbed. It reads ``g``
# and ``u`` and writes ``h``: three passes over the ``[B·S, hidden]``
# intermediate instead of eager's five. How close do the pointwise kernels of
# each run come to the copy bandwidth measured in this run, and to the
# datasheet's?

import pandas as pd

from profiling_guide.analysis.roofline import CEILING_COLUMN, REFERENCE_COLUMN, kernel_work_table

refs = references.values
runs = {"eager": eager, "compiled": compiled}
work = pd.concat({name: kernel_work_table(rec.trace, rows=rows, dim=dim, hidden=hidden,
                                          element=element, references=refs)
                  for name, rec in runs.items()})
work = work[work["kind"] == "pointwise"].droplevel(1).set_index("kernel", append=True)
bw_columns = [REFERENCE_COLUMN, CEILING_COLUMN, "achieved", "avg_us", "work"]
tables.styled(work[bw_columns], precision=1)

# %%

from profiling_guide.pages import facts

facts.pointwise_per_step(runs)

# %%
# Whole forwards, profiler off
# ----------------------------
# Device time per forward (the GPU's queue kept full), the CPU's time to
# issue one, and the wall time of one call at a time: medians over repeats,
# with their interquartile range.

from profiling_guide.pages.tables import spread_cell

tables.styled(pd.DataFrame({name: {
    "device µs per forward": spread_cell(rec.timings["device_us"]),
    "CPU µs to issue one forward": spread_cell(rec.timings["cpu_issue_us"]),
    "wall µs per call": spread_cell(rec.timings["wall_us_per_call"]),
} for name, rec in runs.items()}))

# %%
# The post expected the compiled MLP to be faster on the GPU: one pointwise
# kernel instead of two, and one fewer round trip of the intermediate.

device_times = {name: rec.timings["device_us"] for name, rec in runs.items()}
device_verdicts = expect.judge([
    expect.Prediction("compiled is faster than eager per forward, outside both spreads",
                      predicates.compares("compiled", "eager", "faster"), POST, must_hold=False),
], device_times)
tables.verdict_table(device_verdicts)

# %%
# That is paid for once, at the first call:

facts.first_call(compile_cost.values["first_call_s"])

# %%
# Who sets the pace
# -----------------
# For the compiled forward: the host's time to issue one against the GPU's
# time to run it, profiler off, over every page that measured it on this GPU;
# then what the profiled trace's idle time waited for.

from profiling_guide.pages.verdicts import pace_facts

pace_facts(compiled)

# %%
# What to do next
# ---------------
# The compiler fused what it could around the GEMMs and left the GEMMs to
# cuBLAS, so ``g`` and ``u`` still go to memory and come back. Chapter 4
# tries a hand-written fused GeLU·mul (Liger's); chapter 6 removes the round
# trip by doing GeLU·mul in the GEMM's epilogue. Two things to know before
# compiling your own model: the compiled graph is specialised to the shapes
# it saw, so a new sequence length compiles again (the
# :doc:`deep dive <deep_dives/plot_03_deep_compile>` measures it, with
# ``dynamic=True`` and without), and the compiler adds guard checks on the
# host for every call (the same page lists them).

# sphinx_gallery_start_ignore
# The deep dive's recompilation sweep, measured here so that a live build runs it once
# (deep_dives/plot_03_deep_compile.py reads the recording).
from profiling_guide.measure.shape_sweeps import SETTINGS, recompile_in_fresh_processes, shape_sweep

SEQS = [seq, 2 * seq, 4 * seq, seq + 72]
SHAPES = [(batch, s, dim) for s in SEQS]


def recompilation():
    return recompile_in_fresh_processes(list(SETTINGS), SHAPES, hidden, dtype=chapter.flags.dtype)


chapter.measure("recompile", recompilation,
                code=[SimpleGeGLUMLP, shape_sweep, recompile_in_fresh_processes])
# sphinx_gallery_end_ignore

verdicts.require()
device_verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_03_mlp_compile.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile
#
# The recordings behind this page:

chapter.downloads()
