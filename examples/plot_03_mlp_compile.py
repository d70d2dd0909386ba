"""
3 · The MLP under torch.compile: what the compiler fuses, and what it costs
===========================================================================

The same GeGLU MLP, compiled. The GEMMs stay with cuBLAS; the GeLU and the
mul become one generated Triton kernel, so the intermediate makes one fewer
round trip through memory. We check both claims against the trace, measure
the fused kernel against the copy bandwidth, and put numbers on the price of
specialising to shapes: the compile at the first call, and again at every new
shape unless ``dynamic=True``.

*Needs:* this package alone, no extra (live, ``torch.compile`` uses the Triton that torch's CUDA
builds bring).
"""

# %%
# The code under study
# --------------------
# The eager model of the previous chapter, and ``torch.compile`` of it. Both
# are profiled in this run so the kernel names can be compared directly.

import torch

from profiling_guide.kernels.models import SimpleGeGLUMLP
from profiling_guide.pages.chapter import Chapter

# The post's sizes and its --compile switch (this page always compiles); as a
# script, flags override them (--help lists them) and --mode picks live or replay.
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
# The model and its input:

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
# Compile once, outside the profiler, and time that first call.

import time


def first_compiled_call():
    start = time.perf_counter()
    compiled_forward()
    torch.cuda.synchronize()
    return {"first_call_s": time.perf_counter() - start}


compile_cost = chapter.measure("compile", first_compiled_call, code=[SimpleGeGLUMLP])

# %%
# Profile both (on a GPU; then each trace is read back, as in replay), and
# take the same reference rates as the previous chapter (measured once per
# process, see there).

from profiling_guide.measure.bench_mlp import mlp_gemm_shapes

eager = chapter.profile("eager", eager_forward, profiler=profile_steps, label="mlp_fwd",
                        code=[SimpleGeGLUMLP], variant="eager")
compiled = chapter.profile("compiled", compiled_forward, profiler=profile_steps, label="mlp_fwd",
                           code=[SimpleGeGLUMLP], variant="compile")
references = chapter.reference_rates(mlp_gemm_shapes(rows, dim, hidden))

# %%
# Before we look
# --------------

from profiling_guide.analysis import checks, expect
from profiling_guide.analysis.expect import POST
from profiling_guide.trace.kernel_names import decode

predictions = [
    expect.Prediction("four kernels per forward: 3 GEMMs + one fused GeLU·mul",
                      expect.kernels_per_step(4), POST),
    expect.Prediction("no aten::linear / aten::t / aten::matmul: three bare aten::mm",
                      checks.bare_mm, POST),
    expect.Prediction("GEMM kernel names byte-identical to eager",
                      checks.same_gemms_as(eager.trace), POST),
    expect.Prediction("one Triton kernel fusing gelu and mul",
                      checks.one_triton_kernel_fusing("gelu", "mul"), POST),
]

# %%
# Two steps, one time axis
# ------------------------

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"eager": eager.trace, "torch.compile": compiled.trace})

# %%
# The same compiled step, to explore: drag to pan, the buttons (or Ctrl and
# the wheel) to zoom, hover a bar for its decoded name, its µs and, for a kernel, the op
# that launched it and how long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(compiled.trace, caption="torch.compile, one profiled step")


# %%
# The verdict
# -----------

verdicts = expect.check(predictions, compiled.trace)
verdicts

# %%
# The dispatch chain, folded
# --------------------------
# Eagerly each linear was ``linear → t → matmul → reshape → mm``. Compiled,
# the graph was traced once, the strides and views resolved at compile time,
# and what runs is the generated code calling ``mm`` directly:

tables.styled(tables.dispatch_chain(compiled.trace, "mlp_fwd"), precision=1)

# %%
# The fused kernel, decoded
# -------------------------
# Inductor names its kernels ``triton_<kind>_fused_<ops>_<n>``: ``poi`` is
# pointwise, ``red`` a reduction, ``per`` a persistent reduction (one block
# holds a whole row), ``tem`` a template (e.g. a GEMM). The ops are the ATen
# ops the kernel absorbed.

import pandas as pd

fused = checks.triton_kernels(compiled.trace)
pd.DataFrame([decode(k.name).to_dict() for k in fused]).T.rename(columns=lambda i: "fused kernel")

# %%
# It reads ``g`` and ``u`` and writes ``h``: three passes over the
# ``[B·S, hidden]`` intermediate instead of eager's five. How close does it
# come to the copy bandwidth measured in this run, and to the datasheet's?

from profiling_guide.analysis.roofline import kernel_work_table

refs = references.values
runs = {"eager": eager, "compiled": compiled}
work = pd.concat({name: kernel_work_table(rec.trace, rows=rows, dim=dim, hidden=hidden,
                                          element=element, references=refs)
                  for name, rec in runs.items()})
work = work[work["kind"] == "pointwise"].droplevel(1)
work.index.name = "run"
tables.styled(work, precision=1)

# %%

from profiling_guide.pages import facts
from profiling_guide.pages.prose import pace_facts, spread_cell

facts.pointwise_per_step(runs)

# %%
# Whole forwards, profiler off
# ----------------------------
# Device time per forward (the GPU's queue kept full), the CPU's time to
# issue one, and the wall time of one call at a time: medians over repeats,
# with their interquartile range.

tables.styled(pd.DataFrame({name: {
    "device µs per forward": spread_cell(rec.timings["device_us"]),
    "CPU µs to issue one forward": spread_cell(rec.timings["cpu_issue_us"]),
    "wall µs per call": spread_cell(rec.timings["wall_us_per_call"]),
} for name, rec in runs.items()}))

# %%

device_times = {name: rec.timings["device_us"] for name, rec in runs.items()}
facts.timing("Device time per forward", device_times)
facts.first_call(compile_cost.values["first_call_s"])

# %%
# The post expected the compiled MLP to be faster on the GPU: one pointwise
# kernel instead of two, and one fewer round trip of the intermediate.

device_verdicts = expect.check([
    expect.Prediction("compiled is faster than eager per forward, outside both spreads",
                      checks.compares("compiled", "eager", "faster"), POST, must_hold=False),
], device_times)
device_verdicts

# %%

pace_facts(compiled)

# %%
# What the compiler adds on the CPU
# ---------------------------------
# A compiled call first asks TorchDynamo whether a compiled graph fits these
# inputs (the cache lookup runs the graph's guards), then calls the graph. These
# rows exist only in the compiled trace (CPU µs per step):

eager_names = {op.name for op in eager.trace.step_ops}
ops = tables.op_table(compiled.trace)
tables.styled(ops[~ops.index.isin(eager_names)], precision=1)

# %%
# Recompilation, measured
# -----------------------
# The compiled graph is specialised to the shapes it saw. We feed new sequence
# lengths in turn and time each first call (wall time, which pays any
# compilation) and the device time per forward after it, for three settings:
# ``dynamic=False`` (always specialise), the default (specialise, and after
# the first new shape compile one graph with symbolic sizes) and
# ``dynamic=True`` (symbolic from the start). Each setting runs in a fresh
# Python process with empty compiler caches, so none reuses what another
# compiled. The three processes start together (Python, torch, the CUDA
# context and the model, none of it timed), then take turns: one runs its
# shapes and exits before the next begins
# (:func:`~profiling_guide.measure.sweep.recompile_in_fresh_processes`), so no
# timed call shares the machine with another's compiles or GPU work. Rows are
# in the order each setting ran them.

from profiling_guide.measure.sweep import (
    SETTINGS,
    recompile_in_fresh_processes,
    shape_sweep,
)

SEQS = [seq, 2 * seq, 4 * seq, seq + 72]
SHAPES = [(batch, s, dim) for s in SEQS]


def recompilation():
    return recompile_in_fresh_processes(list(SETTINGS), SHAPES, hidden, dtype=chapter.flags.dtype)


recompile = chapter.measure("recompile", recompilation,
                            code=[SimpleGeGLUMLP, shape_sweep, recompile_in_fresh_processes])

frames = []
for setting, sweep_rows in recompile.values.items():
    frame = pd.DataFrame(sweep_rows)
    frame.insert(0, "setting", setting)
    frames.append(frame)
sweep_table = pd.concat(frames, ignore_index=True)
tables.styled(sweep_table, precision=1)

# %%

facts.recompilations(sweep_table)

# %%

verdicts.require()
device_verdicts.require()

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_03_mlp_compile.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile
