"""
1 · nn.Linear: one kernel, and the add nobody launched
======================================================

What does one ``nn.Linear`` become on the GPU, and what does ``torch.compile``
change about it? We profile the layer of the original write-up
(``--batch 1024 --in_dim 32 --out_dim 64``, bf16) eager and compiled, guess
what the trace will hold, then open it.
"""

# %%
# Set-up
# ------
# Every example runs as a script with the original flags
# (``python examples/plot_01_linear.py --batch 1024 --in_dim 32 --out_dim 64``)
# and, under sphinx-gallery, with those defaults. A :class:`~profiling_guide.recordings.Chapter`
# decides whether we measure on a GPU (*live*) or read the recording of the
# last GPU run (*replay*); the banner below says which, and where the numbers
# come from.

import torch
from torch import nn

from profiling_guide.args import DTYPES, example_parser, positive_int, run_args
from profiling_guide.recordings import Chapter

# sphinx-gallery runs the script with __doc__ emptied, so the description is spelled out.
parser = example_parser('1 · nn.Linear: one kernel, and the add nobody launched')
parser.add_argument("--batch", type=positive_int, default=1024, help="rows of the input (default 1024)")
parser.add_argument("--in_dim", type=positive_int, default=32, help="input features (default 32)")
parser.add_argument("--out_dim", type=positive_int, default=64, help="output features (default 64)")
parser.add_argument("--compile", action="store_true",
                    help="accepted for the original command line; both runs are always profiled")
args = parser.parse_args()
dtype = DTYPES[args.dtype]

chapter = Chapter("01_linear", run_args(args) | {"compile": False}, mode=args.mode)
chapter.banner()

# %%
# The code under study
# --------------------
# One layer, one input, and the same layer compiled. On a GPU these are real
# tensors; in replay they live on the ``meta`` device (shapes only, no data),
# so this is exactly the code that ran when the recording was made.

element = torch.tensor([], dtype=dtype).element_size()
chapter.require_memory(
    element * (args.in_dim * args.out_dim + args.out_dim + args.batch * (args.in_dim + args.out_dim)),
    f"nn.Linear({args.in_dim}, {args.out_dim}) on {args.batch} rows",
)
torch.manual_seed(0)
linear = nn.Linear(args.in_dim, args.out_dim, device=chapter.device, dtype=dtype)
x = torch.randn(args.batch, args.in_dim, device=chapter.device, dtype=dtype)
compiled_linear = torch.compile(linear)


def eager_forward():
    return linear(x)


def compiled_forward():
    return compiled_linear(x)


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
# Profiling
# ---------
# :meth:`~profiling_guide.recordings.Chapter.capture` runs each forward under
# ``torch.profiler`` with the write-up's schedule (skip one step, warm up one,
# record three), inside a ``record_function("linear_fwd")`` label, with CPU
# and CUDA activities and input shapes recorded. It writes the Chrome trace
# (open it in https://ui.perfetto.dev) and then times the forward with the
# profiler off, three ways, each a median over 7 repeats with its spread
# (:mod:`profiling_guide.measure`): the *device time* per call (calls queued
# behind a sleep kernel, so the GPU never waits for the host), the *CPU
# issue time* (the host's work to issue one call, the GPU drained between
# calls) and the *wall time per call* (one call at a time, waiting for it).

eager = chapter.capture("eager", eager_forward, label="linear_fwd", variant="linear-eager")
compiled = chapter.capture("compiled", compiled_forward, label="linear_fwd", variant="linear-compiled")

# %%
# Before we look
# --------------
# ``y = x @ W.T + b`` is one matrix product and one add. What should the trace
# hold? We write the guesses down as data; the page checks them against the
# trace after we have looked.

from profiling_guide import expect
from profiling_guide.pace import pace

POST = "original post (A100)"
eager_predictions = [
    expect.Prediction("one kernel per forward", expect.kernels_per_step(1), POST),
    expect.Prediction("no separate add kernel: the bias rides in the GEMM",
                      expect.no_kernel_of_kind("pointwise"), POST),
    expect.Prediction("aten::t launches nothing (a view: strides swap, no copy)",
                      expect.launches_nothing("aten::t"), POST),
    expect.Prediction("aten::linear dispatches to aten::addmm", lambda t: (
        bool(t.ops_named("aten::addmm")) and all(
            op.parent is not None and op.parent.name == "aten::linear" for op in t.ops_named("aten::addmm")),
        "aten::linear calls, in time order: " + ", ".join(op.name for op in t.ops_named("aten::linear")[0].children)
        if t.ops_named("aten::linear") else "no aten::linear"), POST),
    expect.Prediction("the GPU waits for the CPU: overhead-bound", lambda t: (
        pace(t).verdict == "overhead-bound", pace(t).evidence()), "this page"),
]
compiled_predictions = [
    expect.Prediction("one kernel per forward", expect.kernels_per_step(1), POST),
    expect.Prediction("no aten::t: strides are fixed at compile time", expect.no_op("aten::t"), POST),
    expect.Prediction("the same GEMM kernel as eager", lambda t: expect.same_kernels(eager.trace, t), POST),
]

# %%
# The trace, one step
# -------------------
# The eager step on top, the compiled one below, on one time axis. Each lane
# is a row of the trace: CPU ops by nesting depth, the CUDA runtime calls the
# CPU made, and the GPU stream. Arrows join each launch to its kernel.

from profiling_guide import tables, timeline

fig = timeline.plot_compare({"eager nn.Linear": eager.trace, "torch.compile(nn.Linear)": compiled.trace})

# %%
# The kernel is the thin sliver on the GPU lane. The op table says where the
# CPU time goes (per step, in µs):

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
# (:func:`profiling_guide.kernel_names.decode`) reads the library, the
# architecture, the tile and the layout from it; where the name carries an
# epilogue (work fused after the product, here the bias add), it says so.

import pandas as pd

from profiling_guide.kernel_names import decode

pd.DataFrame([decode(name).to_dict() for name in expect.kernel_names(eager.trace)]).T.rename(
    columns=lambda i: "eager kernel")

# %%
# What it costs: CPU against GPU
# ------------------------------
# Medians with the profiler off, and their interquartile range over repeats.
# Read the rows by what they measure: the *device time* is what the GPU
# spends per call; the *wall time* is what a caller that waits for each
# result sees; the *CPU issue time* is the host's share of it. The last two
# rows come from the profiled steps.

from profiling_guide.report import Facts, pace_facts, spread_cell
from profiling_guide.measure import compare

runs = {"eager": eager, "compiled": compiled}
cost = pd.DataFrame({
    name: {
        "device µs per call (queue full)": spread_cell(rec.timings["device_us"]),
        "wall µs per call (one at a time)": spread_cell(rec.timings["wall_us_per_call"]),
        "CPU µs to issue one call": spread_cell(rec.timings["cpu_issue_us"]),
        "kernel µs per step in the trace": f"{rec.trace.device_us_per_step():.1f}",
        "CPU µs per step in the trace (profiler on)": f"{rec.trace.cpu_us_per_step('linear_fwd'):.1f}",
    } for name, rec in runs.items()
})
tables.styled(cost)

# %%

pace_facts(eager)

# %%

e, c = eager.timings["cpu_issue_us"], compiled.timings["cpu_issue_us"]
first_call_s = compile_cost.values["first_call_s"]
verdict = compare(c, e)
Facts(
    f"CPU to issue one call: compiled {c:.1f} µs, eager {e:.1f} µs: "
    + {"slower": f"the compiled call costs the host {c.median / e.median:.2f}× eager's; for one tiny layer its "
                 "guards and wrapper cost more than the dispatcher work they remove.",
       "faster": f"the compiled call costs the host {e.median / c.median:.2f}× less than eager's.",
       "tie": "a tie: the two differ by less than their spread."}[verdict],
    f"The first compiled call took {first_call_s:.1f} s (tracing, compiling, loading)"
    + (f"; at {e.median - c.median:.1f} µs saved per call it pays back after about "
       f"{first_call_s * 1e6 / (e.median - c.median):,.0f} calls." if verdict == "faster" else
       "; with no CPU saved per call, it never pays back here."),
)

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
