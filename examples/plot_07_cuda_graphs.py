"""
7 · Overhead: when the CPU sets the pace, and CUDA graphs take it back
=======================================================================

Chapter 1's layer runs one kernel of a few microseconds, and the host needs
longer than that to launch it: the GPU waits for Python. The same happens to
the MLP of chapters 2–6 at a handful of tokens (one decoding step of a small
batch). Does a **CUDA graph**, which records a sequence of kernel launches
once and replays it with one call, give the host its time back, and when
does a capture pay for itself?

*Needs:* this package alone, no extra.
"""

# %%
# The code under study
# --------------------
# Chapter 1's ``nn.Linear`` and chapter 2's GeGLU MLP at 16 tokens, each run
# four ways. Capturing a graph by hand follows the recipe of the PyTorch
# documentation: warm up on a side stream (cuBLAS allocates its workspace and
# picks its kernels there, outside the graph), then record one forward into a
# ``torch.cuda.CUDAGraph``. The graph keeps the *addresses* it was captured
# with: it reads its input from ``static_x`` and writes its output into
# ``static_y``, on every replay.

import torch
from torch import nn

from profiling_guide.kernels.models import SimpleGeGLUMLP


def capture(module, x):
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            module(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_y = module(static_x)
    return graph, static_x, static_y


# %%
# The four ways. ``replay`` reuses the captured input; ``copy in, replay`` is
# what a caller with a *new* input must do: copy it into ``static_x`` first.
# ``torch.compile(mode="reduce-overhead")`` does the capture itself, after a
# few warm-up calls. Every forward runs under ``torch.no_grad()``.


def forwards(module, x):
    compiled = torch.compile(module, mode="reduce-overhead")
    graph, static_x, static_y = capture(module, x) if chapter.live else (None, None, None)

    def eager():
        with torch.no_grad():
            return module(x)

    def reduce_overhead():
        with torch.no_grad():
            return compiled(x)

    def replay():
        graph.replay()
        return static_y

    def copy_in_replay():
        static_x.copy_(x)
        graph.replay()
        return static_y

    return {"eager": eager, "reduce-overhead": reduce_overhead, "replay": replay,
            "copy in, replay": copy_in_replay}


# %%
# The profiler block
# ------------------
# Chapter 1's block, unchanged: five steps (skip one, warm up one, record
# three), one ``record_function`` label per forward.

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
# ``chapter`` (chapter 1) reads the flags (``--help`` lists them) and knows
# the mode: live on a CUDA GPU, otherwise a replay of the recordings.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("07_cuda_graphs", batch=1024, in_dim=32, out_dim=64,
                                    tokens=16, dim=768, hidden=3072)
batch, in_dim, out_dim = chapter.flags.batch, chapter.flags.in_dim, chapter.flags.out_dim
tokens, dim, hidden = chapter.flags.tokens, chapter.flags.dim, chapter.flags.hidden
dtype = chapter.dtype  # bfloat16 unless --dtype says otherwise
device = chapter.device  # "cuda" on a GPU; "meta" (shapes only) when the page replays a recording
chapter.require_memory(dtype.itemsize * (3 * dim * hidden + 8 * tokens * (dim + hidden)),
                       f"the MLP at {tokens} tokens × dim {dim} × hidden {hidden}")
chapter.banner()

# %%
# The two models and their inputs:

torch.manual_seed(0)
linear = nn.Linear(in_dim, out_dim, device=device, dtype=dtype)
x_linear = torch.randn(batch, in_dim, device=device, dtype=dtype)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
x_mlp = torch.randn(tokens, dim, device=device, dtype=dtype)

# %%
# Each forward is called a few times first (``reduce-overhead`` compiles and
# captures there), then profiled; ``chapter.profile`` also times it with the
# profiler off (device time with the GPU's queue kept full, CPU time to issue
# one call, wall time per call; medians of 7 repeats with their spread).

workloads = {"linear": (linear, x_linear), "mlp": (mlp, x_mlp)}
runs = {}
for model, (module, x) in workloads.items():
    steps = forwards(module, x)
    chapter.warm_up(*[step for step in steps.values() for _ in range(3)])
    for variant, step in steps.items():
        name = f"{model}.{variant.replace(', ', '_').replace(' ', '_')}"
        runs[model, variant] = chapter.profile(name, step, profiler=profile_steps,
                                               label=f"{model}_fwd",
                                               code=[forwards, capture, SimpleGeGLUMLP])

# %%
# What a capture costs: ``capture`` itself (warm-up calls included), timed
# five times on the MLP with the wall clock, each on a fresh graph.

import time

from profiling_guide.spread import Spread, compare


def capture_cost():
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        graph, *_ = capture(mlp, x_mlp)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e6)
        del graph
    return {"capture_us": Spread.of(times).to_dict()}


captured = chapter.measure("capture", capture_cost, code=[capture, SimpleGeGLUMLP])

# %%
# Before we look
# --------------
# A graph replay is one call into the driver, whatever it holds: the runtime
# lane should show one ``cudaGraphLaunch`` per forward and no kernel launches,
# and the GPU should run the very kernels eager ran.

from profiling_guide.analysis import expect, predicates


def predictions(model):
    eager, replay = runs[model, "eager"].trace, runs[model, "replay"].trace
    cpu = {variant: runs[model, variant].timings["cpu_issue_us"] for variant in ("eager", "replay")}
    return [
        expect.Prediction(f"{model}, eager: one launch call per kernel",
                          predicates.one_launch_per_kernel, of=eager),
        expect.Prediction(f"{model}, replay: one cudaGraphLaunch, no kernel launch",
                          predicates.one_graph_launch_only, of=replay),
        expect.Prediction(f"{model}, replay: the kernels eager ran",
                          predicates.same_kernels_as(eager), of=replay),
        expect.Prediction(f"{model}, replay: less CPU to issue than eager",
                          predicates.compares("replay", "eager", "faster"), of=cpu),
    ]


# %%
# ``torch.compile(mode="reduce-overhead")`` should replay a graph too; what
# it costs the host besides is the question.


def reduce_overhead_predictions(model):
    compiled = runs[model, "reduce-overhead"].trace
    cpu = {variant: runs[model, variant].timings["cpu_issue_us"]
           for variant in ("eager", "reduce-overhead")}
    return [
        expect.Prediction(f"{model}, reduce-overhead: a graph replay too",
                          predicates.launches_a_graph, of=compiled),
        expect.Prediction(f"{model}, reduce-overhead: less CPU to issue than eager",
                          predicates.compares("reduce-overhead", "eager", "faster"), of=cpu,
                          must_hold=False),
        expect.Prediction(f"{model}, reduce-overhead: copies the input into its graph's buffer",
                          predicates.copies_on_device, of=compiled, must_hold=False),
    ]


# %%
# The runtime lane empties
# ------------------------
# The MLP's eager step on top, its replay below, on one time axis: the same
# kernels on the GPU lane, and one launch where there was one per kernel.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_compare({"eager MLP, 16 tokens": runs["mlp", "eager"].trace,
                             "CUDA graph replay": runs["mlp", "replay"].trace})

# %%
# The verdicts
# ------------

verdicts = expect.judge([*predictions("linear"), *reduce_overhead_predictions("linear"),
                         *predictions("mlp"), *reduce_overhead_predictions("mlp")], None)
tables.verdict_table(verdicts)

# %%
# A replay is one ``cudaGraphLaunch`` on the runtime lane, and the GPU lane
# runs the very kernels eager ran, in the same order; everything the host did
# per kernel (the dispatcher's work, argument checks, one launch call each)
# happened once, at capture. The graph adds work of its own where the input
# is not already where the graph reads it: ``reduce-overhead`` copies each
# input into its graph's static buffer (``aten::_foreach_copy_``: device work
# of its own, every forward), as does our ``copy in, replay``. And
# ``reduce-overhead`` does more on the host than ``graph.replay()``: Dynamo's
# guards, the checks cudagraph trees make on each input's address, the copy,
# all in Python. What each variant launches per profiled step, and the
# kernels it runs:

import pandas as pd


def launch_row(trace):
    return {"kernels": int(trace.kernels_per_step()),
            "kernel launches": int(predicates.kernel_launches_per_step(trace)),
            "graph launches": int(predicates.graph_launches_per_step(trace)),
            "kernel µs": trace.device_us_per_step()}


tables.styled(pd.DataFrame({f"{m}: {v}": launch_row(r.trace) for (m, v), r in runs.items()}).T,
              precision=1)

# %%
# What it costs, and who sets the pace
# ------------------------------------
# Profiler off, medians with their IQR. *CPU µs to issue* is the host's time
# for one call; *wall µs per call* is what a caller waiting for each result
# sees; *device µs* is the GPU's time with its queue kept full. Who sets the
# pace compares the first with the last: when issuing is shorter, forwards
# issued back to back keep the GPU busy (the GPU sets the pace), otherwise
# the GPU waits for the host; a tie where the spreads overlap. (With the
# profiler on the host is slower: :ref:`chapter 1 <profiler-cost>` says
# why.)

from profiling_guide.pages import verdicts as pace
from profiling_guide.pages.tables import spread_cell


def cost_row(rec):
    t = rec.timings
    return {"CPU µs to issue": spread_cell(t["cpu_issue_us"]),
            "wall µs per call": spread_cell(t["wall_us_per_call"]),
            "device µs": spread_cell(t["device_us"]),
            "sets the pace, profiler off": pace.who_sets_the_pace(rec)}


tables.styled(pd.DataFrame({f"{m}: {v}": cost_row(r) for (m, v), r in runs.items()}).T)

# %%

pace.other_gpu_facts({f"{m}: {v}": r for (m, v), r in runs.items()})

# %%
# When a capture pays back
# ------------------------
# A capture costs wall time once; each replay saves the difference in wall
# time per call against eager. Where the two per-call figures tie (their IQRs
# overlap) nothing is saved, and the capture never pays back.


def payback(model, variant):
    eager = runs[model, "eager"].timings["wall_us_per_call"]
    graph = runs[model, variant].timings["wall_us_per_call"]
    cost = Spread.from_dict(captured.values["capture_us"])
    saved = eager.median - graph.median
    calls = f"{cost.median / saved:,.0f}" if compare(graph, eager) == "faster" else "never (tie)"
    return {"capture, wall µs": spread_cell(cost, 0), "wall µs saved per call": f"{saved:.1f}",
            "calls to pay back": calls}


paybacks = {f"mlp: {v}": payback("mlp", v) for v in ("replay", "copy in, replay")}
tables.styled(pd.DataFrame(paybacks).T)

# %%
# What to do next
# ---------------
# Where the GPU waits for the host, a graph gives the host its time back: one
# call replays what took one launch per kernel. Capture what runs the same
# way every time (same shapes, same addresses), copy new inputs into the
# graph's buffers, and count the capture's cost against the calls that will
# replay it. ``torch.compile(mode="reduce-overhead")`` does all of that for
# you, at a host cost of its own that the table above measures. Where the
# GPU already sets the pace, a graph cannot make the kernels faster.

verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_07_cuda_graphs.py --tokens 16 --dim 768 --hidden 3072
#
# The recordings behind this page:

chapter.downloads()
