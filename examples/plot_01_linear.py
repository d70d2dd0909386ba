"""
1 · nn.Linear: one kernel, and the add nobody launched
======================================================

What does one ``nn.Linear`` become on the GPU, and who sets the pace: the
CPU issuing it, or the GPU running it? We profile the layer of
`Profiling in PyTorch (Part 2) <https://huggingface.co/blog/torch-mlp-fusion>`_
(``--batch 1024 --in_dim 32 --out_dim 64``, bf16; the post ran on an A100),
eager and under ``torch.compile``, guess what the trace will hold, then open it.

*Needs:* this package alone, no extra.
"""

# %%
# The code under study
# --------------------
# One layer and one batch of input: ``y = x @ W.T + b``.

import torch
from torch import nn


def make_layer(batch, in_dim, out_dim, *, device, dtype):
    """The post's layer and one batch of input for it."""
    torch.manual_seed(0)
    linear = nn.Linear(in_dim, out_dim, device=device, dtype=dtype)
    return linear, torch.randn(batch, in_dim, device=device, dtype=dtype)


# %%
# The profiler block
# ------------------
# This is the block to copy into your own code. It records five steps: it
# skips the first (``wait``), records but discards the second (``warmup``:
# the first calls pay one-off costs), and keeps three (``active``).
# ``ProfilerActivity.CPU`` records the operators and the CUDA runtime calls
# the host makes; ``ProfilerActivity.CUDA`` the kernels the GPU runs;
# ``record_shapes=True`` each operator's input shapes and strides.
# ``record_function`` puts a label around one forward,
# ``torch.cuda.synchronize`` keeps each step's kernels inside its step, and
# ``prof.step()`` moves the schedule on. ``export_chrome_trace`` writes the
# trace (``.json.gz`` is gzipped) that https://ui.perfetto.dev opens, and
# that this page reads.
#
# Two switches this block leaves off, on purpose. ``with_stack=True`` (with
# ``with_modules=True``) records each op's Python frames and module: more host
# time per op and a larger trace, worth it on your own model, where the
# question is which line launched a kernel; for one ``nn.Linear`` the op names
# say it all. ``on_trace_ready=tensorboard_trace_handler("traces")`` writes a
# trace at the end of every cycle of the schedule, named by host, process and
# time: the form for a training loop profiled with ``schedule(repeat=…)``.
# These pages keep one trace of a name they choose, so they call
# ``export_chrome_trace`` after the block.

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
# The rest is the guide's plumbing, one object: ``chapter`` reads the flags
# (run as a script, ``--batch``, ``--in_dim``, ``--out_dim``, ``--dtype``
# override the post's sizes; ``--help`` lists them) and knows the mode. On a
# CUDA GPU it runs ``profile_steps`` and keeps the trace; elsewhere it reads
# the recordings this page was built from, and builds the layer on the
# ``meta`` device (shapes only). Every number below is read back from the
# trace files either way.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("01_linear", batch=1024, in_dim=32, out_dim=64, compile=False)
batch, in_dim, out_dim = chapter.flags.batch, chapter.flags.in_dim, chapter.flags.out_dim
dtype = chapter.dtype  # bfloat16 unless --dtype says otherwise
chapter.require_memory(dtype.itemsize * (in_dim * out_dim + out_dim + batch * (in_dim + out_dim)),
                       f"nn.Linear({in_dim}, {out_dim}) on {batch} rows")
chapter.banner()

# %%
# The layer and its input, on ``chapter.device``, and the same layer compiled:

linear, x = make_layer(batch, in_dim, out_dim, device=chapter.device, dtype=dtype)
compiled_linear = torch.compile(linear)


def eager_forward():
    return linear(x)


def compiled_forward():
    return compiled_linear(x)


# %%
# ``torch.compile`` does its work at the first call. We pay for it once,
# before profiling, and keep the time it took:

import time


def first_compiled_call():
    start = time.perf_counter()
    compiled_forward()
    torch.cuda.synchronize()
    return {"first_call_s": time.perf_counter() - start}


compile_cost = chapter.measure("compile", first_compiled_call)

# %%
# Then both forwards go through ``profile_steps``. ``chapter.profile`` also
# times each with the profiler off (device time, CPU issue time and wall
# time per call, each a median over 7 repeats), and keeps the profiler's own
# summary table with the recording.


def profiler_table(prof):
    return {"key_averages": prof.key_averages().table(sort_by="cpu_time_total", row_limit=8,
                                                      max_name_column_width=30)}


eager = chapter.profile("eager", eager_forward, profiler=profile_steps, label="linear_fwd",
                        variant="linear-eager", keep=profiler_table)
compiled = chapter.profile("compiled", compiled_forward, profiler=profile_steps, label="linear_fwd",
                           variant="linear-compiled")

# %%
# Before we look
# --------------
# ``y = x @ W.T + b`` is one matrix product and one add. What should the
# trace hold? The guesses, written down as data; the page checks them after
# we have looked.

from profiling_guide.analysis import expect, predicates
from profiling_guide.analysis.expect import POST

eager_predictions = [
    expect.Prediction("one kernel per forward", expect.kernels_per_step(1), POST),
    expect.Prediction("no separate add kernel: the bias rides in the GEMM",
                      expect.no_kernel_of_kind("pointwise"), POST),
    expect.Prediction("aten::t launches nothing (a view: strides swap, no copy)",
                      expect.launches_nothing("aten::t"), POST),
    expect.Prediction("aten::linear dispatches to aten::addmm",
                      predicates.dispatches_to("aten::linear", "aten::addmm"), POST),
]
compiled_predictions = [
    expect.Prediction("one kernel per forward", expect.kernels_per_step(1), POST),
    expect.Prediction("no aten::t: strides are fixed at compile time",
                      expect.no_op("aten::t"), POST),
    expect.Prediction("the same GEMM kernel as eager",
                      predicates.same_kernels_as(eager.trace), POST),
]

# %%
# The trace, one step
# -------------------
# The eager step on top, the compiled one below, on one time axis. Each lane
# is a row of the trace: CPU ops by nesting depth, the CUDA runtime calls the
# CPU made, and the GPU stream. Arrows join each launch to its kernel; the
# kernel is the thin sliver on the GPU lane.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"eager nn.Linear": eager.trace,
                             "torch.compile(nn.Linear)": compiled.trace})

# %%
# The profiler's own summary, ``prof.key_averages().table()``, as the live
# run printed it. *Self* time is an op's own time, without the ops it called;
# *total* time includes them (``aten::linear``'s total holds ``aten::t`` and
# ``aten::addmm``). Its rows sum the three active steps (``# of Calls``: 3).

print(eager.run.get("key_averages",
                    "(this recording was made without the profiler's own table: re-record it)"))

# %%
# The verdicts
# ------------

eager_verdicts = expect.judge(eager_predictions, eager.trace)
tables.verdict_table(eager_verdicts)

# %%

compiled_verdicts = expect.judge(compiled_predictions, compiled.trace)
tables.verdict_table(compiled_verdicts)

# %%
# One kernel, and the bias add rides in it: the GEMM applies it as its
# *epilogue*, work done on each tile of the product before it is stored. The
# kernel's name says so; :doc:`the deep dive <deep_dives/plot_01_deep_dispatch>`
# decodes it and follows the call through the dispatcher, op by op.
#
# What it costs
# -------------
# Medians with the profiler off, with their interquartile range (IQR). The
# *device time* is the GPU's time per call with its queue kept full; the
# *wall time* is what a caller that waits for each result sees; the *CPU
# issue time* is the host's share of it.

import pandas as pd

from profiling_guide.pages.tables import spread_cell

runs = {"eager": eager, "compiled": compiled}
cost = pd.DataFrame({
    name: {
        "device µs per call": spread_cell(rec.timings["device_us"]),
        "wall µs per call": spread_cell(rec.timings["wall_us_per_call"]),
        "CPU µs to issue one call": spread_cell(rec.timings["cpu_issue_us"]),
        "kernel µs per step in the trace": f"{rec.trace.device_us_per_step():.1f}",
    } for name, rec in runs.items()
})
tables.styled(cost)

# %%
# The device time per call is longer than the kernel's time in the trace. It
# is timed between two CUDA events recorded around each call, so it also
# holds the GPU's spacing between back-to-back items in its queue (event,
# kernel, event): a few µs that a kernel this short cannot hide.
#
# Who sets the pace
# -----------------
# The host's time to issue one call against the GPU's time to run it, both
# measured with the profiler off; then what the profiled trace shows of the
# GPU's idle time.

from profiling_guide.pages import verdicts

pace = verdicts.verdict_of(eager)
verdicts.pace_facts(eager)

# %%

pace_verdicts = expect.judge([
    expect.Prediction("the GPU waits for the CPU: overhead-bound",
                      predicates.paced_by("overhead-bound"), "this page"),
], pace, seen_header="what the timings show")
tables.verdict_table(pace_verdicts)

# %%
# .. _profiler-cost:
#
# What the profiler costs
# -----------------------
# The profiler slows the CPU and not the GPU. Every op, runtime call and
# shape it records costs the host time, while each kernel runs as it would
# unprofiled. In a profiled trace the host therefore looks slower than it
# is, and the GPU idles longer between launches than it would. That is why
# every chapter states who sets the pace from profiler-off timings, and
# reads the trace for what ran, in what order, and where the GPU waited.
# For this layer:

verdicts.profiler_cost(eager, "linear_fwd")

# %%
# Does compiling pay on the host? ``torch.compile`` removes the dispatcher
# work of ``aten::linear`` and ``aten::t``, and adds its guards and the
# compiled graph's wrapper. For one tiny layer we expect the second to cost
# more than the first; then the seconds the first call spent compiling are
# never won back.

from profiling_guide.pages import facts

issue = {name: rec.timings["cpu_issue_us"] for name, rec in runs.items()}
first_call_s = compile_cost.values["first_call_s"]
facts.first_call(first_call_s)

# %%

cost_verdicts = expect.judge([
    expect.Prediction("for one tiny layer the compiled call costs the host more than eager's",
                      predicates.compares("compiled", "eager", "slower"), "this page",
                      must_hold=False),
    expect.Prediction("the first compiled call never pays back in CPU time saved per call",
                      predicates.never_pays_back(first_call_s), "this page", must_hold=False),
], issue)
tables.verdict_table(cost_verdicts)

# %%
# What to do next
# ---------------
# The GPU waits for the host, so a faster kernel would change nothing. What
# helps is more work per launch (more rows per call: batch requests
# together) or fewer launches per step: capture the calls in a CUDA graph
# (:ref:`chapter 7 <sphx_glr_auto_examples_plot_07_cuda_graphs.py>`).
# ``torch.compile`` alone does not help a single small layer; it pays off
# when it can fuse several operators into fewer kernels, which the next
# chapter's MLP gives it.
#
# Claims this page makes in prose are checked: if one failed on the
# recording, the build would stop here rather than print a false sentence.

eager_verdicts.require()
compiled_verdicts.require()
pace_verdicts.require()

# %%
# Run it yourself
# ---------------
# On a GPU machine, from the repository root::
#
#     python examples/plot_01_linear.py --batch 1024 --in_dim 32 --out_dim 64
#     profiling-guide report docs/recordings/<your-gpu>/01_linear.eager.trace.json.gz
#
# The script measures live and refreshes the recordings of your GPU (set
# ``PROFILING_GUIDE_RECORDINGS`` to keep them elsewhere). The recordings
# behind this page:

chapter.downloads()
