"""
1 · nn.Linear: one kernel, and the add nobody launched
======================================================

What does one ``nn.Linear`` become on the GPU, and what does ``torch.compile``
change about it? We profile the layer of
`Profiling in PyTorch (Part 2) <https://huggingface.co/blog/torch-mlp-fusion>`_
(``--batch 1024 --in_dim 32 --out_dim 64``, bf16; the post ran on an A100)
eager and compiled, guess what the trace will hold, then open it.

*Needs:* this package alone, no extra.
"""

# %%
# The code under study
# --------------------
# One layer, one input, and the same layer compiled. Every cell of this page,
# copied in order into a file (or downloaded below), is a program that runs as
# it is: on a CUDA GPU it profiles and writes the traces; elsewhere it reads
# the recordings this page was built from. ``chapter`` is the one object that
# knows which: its flags, its mode and where its recordings live.

import torch
from torch import nn

from profiling_guide.pages.chapter import Chapter

# The post's sizes. Run as a script, flags override them (--batch, --in_dim,
# --out_dim, --dtype; --help lists them all) and --mode picks live or replay.
chapter = Chapter.from_command_line("01_linear", batch=1024, in_dim=32, out_dim=64, compile=False)
batch, in_dim, out_dim = chapter.flags.batch, chapter.flags.in_dim, chapter.flags.out_dim
dtype = chapter.dtype  # bfloat16 unless --dtype says otherwise
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
chapter.require_memory(dtype.itemsize * (in_dim * out_dim + out_dim + batch * (in_dim + out_dim)),
                       f"nn.Linear({in_dim}, {out_dim}) on {batch} rows")
chapter.banner()

# %%
# The layer, its input, and the same layer compiled:

torch.manual_seed(0)
linear = nn.Linear(in_dim, out_dim, device=device, dtype=dtype)
x = torch.randn(batch, in_dim, device=device, dtype=dtype)
compiled_linear = torch.compile(linear)


def eager_forward():
    return linear(x)


def compiled_forward():
    return compiled_linear(x)


# %%
# Profiling
# ---------
# The profiler records five steps: it skips the first (``wait``), records but
# discards the second (``warmup``: the first calls pay one-off costs), and keeps
# three (``active``). ``ProfilerActivity.CPU`` records the operators and the
# CUDA runtime calls the host makes; ``ProfilerActivity.CUDA`` the kernels the
# GPU runs; ``record_shapes=True`` each operator's input shapes and strides.
# ``record_function`` puts a label around one forward, ``torch.cuda.synchronize``
# keeps each step's kernels inside its step, and ``prof.step()`` moves the
# schedule on. ``export_chrome_trace`` writes the trace (``.json.gz`` is
# gzipped) that https://ui.perfetto.dev opens, and that this page reads.

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
# ``torch.compile`` does its work at the first call. We pay for it here, once,
# and keep the time it took; the profiler then sees only steady-state calls.

import time


def first_compiled_call():
    start = time.perf_counter()
    compiled_forward()
    torch.cuda.synchronize()
    return {"first_call_s": time.perf_counter() - start}


compile_cost = chapter.measure("compile", first_compiled_call)

# %%
# Now the two runs. On a GPU ``chapter.profile`` calls ``profile_steps`` and
# keeps the trace it exports; every number below is read back from the trace
# files, as a replay of the recordings does on a machine without a GPU. It
# also times each forward with the profiler off (device time, CPU issue time
# and wall time per call, each a median over 7 repeats).

def profiler_table(prof):
    """The profiler's own summary, kept with the recording."""
    return {"key_averages": prof.key_averages().table(sort_by="cpu_time_total", row_limit=8,
                                                      max_name_column_width=30)}


eager = chapter.profile("eager", eager_forward, profiler=profile_steps, label="linear_fwd",
                        variant="linear-eager", keep=profiler_table)
compiled = chapter.profile("compiled", compiled_forward, profiler=profile_steps, label="linear_fwd",
                           variant="linear-compiled")

# %%
# Before we look
# --------------
# ``y = x @ W.T + b`` is one matrix product and one add. What should the trace
# hold? We write the guesses down as data; the page checks them against the
# trace after we have looked.

from profiling_guide.analysis import checks, expect
from profiling_guide.analysis.expect import POST

eager_predictions = [
    expect.Prediction("one kernel per forward", expect.kernels_per_step(1), POST),
    expect.Prediction("no separate add kernel: the bias rides in the GEMM",
                      expect.no_kernel_of_kind("pointwise"), POST),
    expect.Prediction("aten::t launches nothing (a view: strides swap, no copy)",
                      expect.launches_nothing("aten::t"), POST),
    expect.Prediction("aten::linear dispatches to aten::addmm",
                      checks.dispatches_to("aten::linear", "aten::addmm"), POST),
    expect.Prediction("the GPU waits for the CPU: overhead-bound",
                      checks.paced_by("overhead-bound"), "this page"),
]
compiled_predictions = [
    expect.Prediction("one kernel per forward", expect.kernels_per_step(1), POST),
    expect.Prediction("no aten::t: strides are fixed at compile time",
                      expect.no_op("aten::t"), POST),
    expect.Prediction("the same GEMM kernel as eager", checks.same_kernels_as(eager.trace), POST),
]

# %%
# The trace, one step
# -------------------
# The eager step on top, the compiled one below, on one time axis. Each lane
# is a row of the trace: CPU ops by nesting depth, the CUDA runtime calls the
# CPU made, and the GPU stream. Arrows join each launch to its kernel.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"eager nn.Linear": eager.trace,
                             "torch.compile(nn.Linear)": compiled.trace})

# %%
# The same eager step, to explore: drag to pan, the buttons (or Ctrl and the
# wheel) to zoom, hover a bar for its decoded name, its µs and, for a kernel, the op
# that launched it and how long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(eager.trace, caption="eager nn.Linear, one profiled step")


# %%
# The kernel is the thin sliver on the GPU lane. Where does the CPU time go?
# First the profiler's own summary, ``prof.key_averages().table()``, as the
# live run printed it. *Self* time is an op's own time, without the ops it
# called; *total* time includes them (``aten::linear``'s total holds
# ``aten::t`` and ``aten::addmm``). Its rows sum the three active steps
# (``# of Calls``: 3); ``ProfilerStep*`` is the schedule's own step marker.

print(eager.run.get("key_averages",
                    "(this recording was made without the profiler's own table: re-record it)"))

# %%
# The same split read from the trace file, per active step, in µs; a trace
# from someone else's machine gives this table too, where ``key_averages``
# needs the live profiler object:

tables.styled(tables.op_table(eager.trace), caption="eager: CPU ops per step")

# %%
# And the dispatch chain of one eager forward: which op called which, the
# shapes and strides each received, and the runtime call that launched the
# one kernel. Note ``aten::t``: its output stride is the input's, swapped.

tables.styled(tables.dispatch_chain(eager.trace, "linear_fwd"), precision=1)

# %%
# The compiled forward skips the ``aten::linear``/``aten::t`` bookkeeping and
# adds the compiler's own rows instead (guards, the compiled graph call):

tables.styled(tables.dispatch_chain(compiled.trace, "linear_fwd"), precision=1)

# %%
# The verdict
# -----------

eager_verdicts = expect.check(eager_predictions, eager.trace)
eager_verdicts

# %%

compiled_verdicts = expect.check(compiled_predictions, compiled.trace)
compiled_verdicts

# %%
# The kernel, decoded
# -------------------
# A GEMM kernel's name is a spec sheet. The decoder
# (:func:`profiling_guide.trace.kernel_names.decode`) reads the library, the
# architecture, the tile and the layout from it; where the name carries an
# epilogue (work fused after the product, here the bias add), it says so.

import pandas as pd

from profiling_guide.trace.kernel_names import decode

decoded = [decode(name).to_dict() for name in expect.kernel_names(eager.trace)]
pd.DataFrame(decoded).T.rename(columns=lambda i: "eager kernel")

# %%
# What it costs: CPU against GPU
# ------------------------------
# Medians with the profiler off, and their interquartile range over repeats.
# Read the rows by what they measure: the *device time* is what the GPU
# spends per call; the *wall time* is what a caller that waits for each
# result sees; the *CPU issue time* is the host's share of it. The last two
# rows come from the profiled steps.

from profiling_guide.pages.prose import pace_facts, spread_cell

runs = {"eager": eager, "compiled": compiled}
cost = pd.DataFrame({
    name: {
        "device µs per call (queue full)": spread_cell(rec.timings["device_us"]),
        "wall µs per call (one at a time)": spread_cell(rec.timings["wall_us_per_call"]),
        "CPU µs to issue one call": spread_cell(rec.timings["cpu_issue_us"]),
        "kernel µs per step in the trace": f"{rec.trace.device_us_per_step():.1f}",
        "CPU µs per step in the trace (profiler on)":
            f"{rec.trace.cpu_us_per_step('linear_fwd'):.1f}",
    } for name, rec in runs.items()
})
tables.styled(cost)

# %%

pace_facts(eager)

# %%
# Does compiling pay on the host? ``torch.compile`` removes the dispatcher
# work of ``aten::linear`` and ``aten::t``, and adds its guards and the
# compiled graph's wrapper. For one tiny layer we expect the second to cost
# more than the first; then the seconds the first call spent compiling are
# never won back.

from profiling_guide.pages import facts

issue = {name: rec.timings["cpu_issue_us"] for name, rec in runs.items()}
first_call_s = compile_cost.values["first_call_s"]
facts.timing("CPU to issue one call", issue)
facts.first_call(first_call_s)

# %%

cost_verdicts = expect.check([
    expect.Prediction("for one tiny layer the compiled call costs the host more than eager's",
                      checks.compares("compiled", "eager", "slower"), "this page", must_hold=False),
    expect.Prediction("the first compiled call never pays back in CPU time saved per call",
                      checks.never_pays_back(first_call_s), "this page", must_hold=False),
], issue)
cost_verdicts

# %%
# Claims this page makes in prose are checked too: if one failed on the
# recording, the build would stop here rather than print a false sentence.

eager_verdicts.require()
compiled_verdicts.require()

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# On a GPU machine, from the repository root::
#
#     python examples/plot_01_linear.py --batch 1024 --in_dim 32 --out_dim 64
#     profiling-guide summarize docs/recordings/<your-gpu>/01_linear.eager.trace.json.gz
#
# The script measures live and refreshes the recordings of your GPU (set
# ``PROFILING_GUIDE_RECORDINGS`` to keep them elsewhere). Open the
# ``.trace.json.gz`` files in https://ui.perfetto.dev to explore them.
