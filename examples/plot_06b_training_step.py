"""
6b · The training step: forward, backward, and what the forward keeps
======================================================================

Every chapter so far ran the MLP under ``torch.no_grad()``. Training runs the
forward *and* the backward, and the backward is where a profile gets hard to
read: its kernels are launched from the autograd engine's own thread, and
their names say nothing of the layer they belong to. Which backward kernel
belongs to which forward op, where does a step's time go, and what does the
forward keep for the backward? One training step (forward and backward, no
optimizer) of the same MLP, four ways: eager, ``torch.compile``, Liger, and
ours, whose backward is fused too.

*Needs:* ``pip install 'profiling-guide[liger]'`` (Liger's kernels, Triton for ours).
"""

# %%
# The code under study
# --------------------
# One step: every gradient set afresh, then a forward and a backward. ``x``
# asks for its gradient, as the MLP's input inside a network would: the
# backward then computes dX for each linear as well as dW. ``dy`` stands in
# for the gradient that arrives from the layers above.

import torch

from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.kernels.models import SimpleGeGLUMLP, load_liger_geglu_mlp


def training_step(module):
    """One forward and backward of ``module`` on ``x``, with ``dy`` as the output's gradient."""
    params = list(module.parameters())

    def step():
        for t in (x, *params):
            t.grad = None
        module(x).backward(dy)

    return step


# %%
# The profiler block
# ------------------
# Chapter 1's block with one more option: ``profile_memory=True`` records
# every allocation and free of the CUDA caching allocator, with its running
# total, so the trace itself says how much the forward left for the backward
# and how high the step went.

from torch.profiler import ProfilerActivity, profile, record_function, schedule


def profile_steps(step, label, trace_file):
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        for _ in range(5):
            with record_function(label):
                step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(trace_file)
    return prof


# %%
# Running it
# ----------
# ``chapter`` (chapter 1) reads the flags (the post's sizes, bf16) and knows
# the mode: live on a CUDA GPU, otherwise a replay of the recordings.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line(
    "06b_training_step", batch=64, seq=128, dim=768, hidden=3072,
    bf16_only_because="this chapter compares bf16 kernels with cuBLAS's bf16 GEMMs")
flags = chapter.flags
batch, seq, dim, hidden = flags.batch, flags.seq, flags.dim, flags.hidden
dtype, device = chapter.dtype, chapter.device
rows, element = batch * seq, dtype.itemsize
# weights, grads and copies of four variants; x, dy and each step's activations and gradients
chapter.require_memory(element * (4 * 5 * dim * hidden + rows * (6 * dim + 12 * hidden)),
                       f"four MLP training steps at batch {batch} × seq {seq} × dim {dim} × "
                       f"hidden {hidden}")
chapter.banner()

# %%
# One set of weights, four ways to train it:

torch.manual_seed(0)
mlp = SimpleGeGLUMLP(dim, hidden, device=device, dtype=dtype)
liger = load_liger_geglu_mlp(dim, hidden, device=device, dtype=dtype, offline=not chapter.live)
liger.module.load_state_dict(mlp.state_dict())
fused = FusedGeGLUMLP.from_mlp(mlp)
x = torch.randn(batch, seq, dim, device=device, dtype=dtype, requires_grad=True)
dy = torch.randn(batch, seq, dim, device=device, dtype=dtype)

VARIANTS = {"eager": mlp, "compile": torch.compile(mlp, dynamic=False), "liger": liger.module,
            "fused": fused}
print(liger.note)

# %%

runs = {name: chapter.profile(name, training_step(module), profiler=profile_steps,
                              label="train_step", warm_up=True,
                              code=[SimpleGeGLUMLP, FusedGeGLUMLP, training_step],
                              args={"variant": name}, variant=f"{name}-train")
        for name, module in VARIANTS.items()}

# %%
# Before we look
# --------------
# Eager keeps g, u, gelu(g) and h for its backward: four ``[rows, hidden]``
# bf16 tensors. Ours keeps ``[g | u]`` and h (three), the bytes compile and
# Liger keep too (they recompute gelu(g) in their backward). Every step does
# nine GEMMs' worth of FLOPs: gate, up and down in the forward, and for each
# linear its dX and its dW in the backward. Our target is at most 1.05× the
# time of the nine bare GEMMs; it is a target, and the verdict says whether it
# held here. Each predicate reads one piece of the evidence gathered below.

from profiling_guide.analysis import expect, predicates


def on(key, predicate):
    return lambda evidence: predicate(evidence[key])


predictions = [
    expect.Prediction("eager saves four [rows, hidden] bf16 tensors: g, u, gelu(g), h",
                      on("saved", predicates.saved_tensors("eager", 4, rows * hidden, "bfloat16")),
                      "autograd's formulas"),
    expect.Prediction("ours saves no more than eager (trace: held when the backward starts)",
                      on("held", predicates.at_most_as_much("held", "fused", "eager")),
                      "this design"),
    expect.Prediction("every variant's GEMMs add up to nine linears' FLOPs",
                      on("gemms", predicates.gemm_work_per_step(9)), "the chain rule"),
    expect.Prediction("ours is faster than eager, compile and Liger, outside the spreads",
                      on("times",
                         predicates.faster_than_each("fused", ["eager", "compile", "liger"])),
                      "this run", must_hold=False),
    expect.Prediction("ours takes at most 1.05× the time of cuBLAS's nine GEMMs alone",
                      on("times", predicates.median_at_most("fused", 1.05, "nine GEMMs")),
                      "the target", must_hold=False),
]

# %%
# Every backward kernel, tied to its forward op
# ---------------------------------------------
# The profiler puts every backward op under
# ``autograd::engine::evaluate_function``, and ties it to the forward op it
# differentiates with a flow event (the ``fwdbwd`` arrows Perfetto draws).
# One step of each variant, each kernel colored by the forward op it belongs
# to, numbered in forward order in the legend. A bar wide enough for a tag
# says ``F1`` (forward op 1's own kernel) or ``B1`` (a kernel of its
# backward); gray is work of no forward op. compile's backward is one
# autograd node for the whole compiled graph (``CompiledFunctionBackward``);
# ours has one for the whole MLP, ``GeGLUFunctionBackward``. The gaps are the
# profiled step's: the GPU waits for launches, the profiler's own cost
# included.

from profiling_guide.pages import timeline

fig = timeline.plot_links({name: run.trace for name, run in runs.items()})

# %%
# Each step's device time by the phase of the op that launched each kernel
# (:func:`~profiling_guide.analysis.backward.phase_shares`):

import pandas as pd

from profiling_guide.analysis.backward import phase_shares
from profiling_guide.pages import tables

phases = pd.concat({name: phase_shares(run.trace.steps) for name, run in runs.items()})
tables.styled(phases, precision=1)

# %%
# Timed in one run
# ----------------
# :func:`~profiling_guide.measure.bench_step.run_training_step` first checks
# each variant's four gradients (x, gate, up, down) against eager's, then
# times device µs per step as the forward benchmark does: rotating inputs
# larger than the L2 cache, the GPU's queue kept full, 7 interleaved repeats,
# medians with their interquartile range. Beside them, cuBLAS's nine GEMMs of
# the step back to back: a reference, not a floor (it counts the GPU's time
# between kernels, and the nine GEMM kernels of a profiled step sum to
# less). Memory per variant, from the allocator's counters around one step:
# *saved MB*, what the forward left allocated for the backward (the output y
# not counted), and *peak MB*, the step's highest point above its start.

from profiling_guide.measure import bench_step
from profiling_guide.spread import Spread, compare


def benchmark():
    return bench_step.run_training_step(batch, seq, dim, hidden)


bench = chapter.measure("bench", benchmark,
                        code=[bench_step.measure_training_step, bench_step.nine_gemms,
                              bench_step.training_step, FusedGeGLUMLP])
result = bench.values
times = {name: Spread.from_dict(t) for name, t in result["variants_us"].items()}
nine_gemms = Spread.from_dict(result["nine_gemms_us"])

# %%

from profiling_guide.pages.facts import Facts
from profiling_guide.pages.tables import spread_cell

Facts(*(f"{name} failed in the benchmark: {why}" for name, why in result["errors"].items()))

# %%

step_table = pd.DataFrame([
    {
        "variant": name,
        "device µs per step": spread_cell(times[name]),
        "× nine GEMMs": f"{times[name].median / nine_gemms.median:.3f}",
        "against eager": compare(times[name], times["eager"]) if name != "eager" else "–",
        "saved MB": result["memory"][name]["saved_mb"],
        "peak MB": result["memory"][name]["peak_mb"],
    }
    for name in VARIANTS if name in times
]).set_index("variant")
tables.styled(step_table, precision=1,
              caption=f"cuBLAS's nine GEMMs back to back: {spread_cell(nine_gemms)} µs per step")

# %%
# What the forward keeps for the backward
# ---------------------------------------
# ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor an autograd
# node saves, as it saves it. The hook below notes each one that is neither
# the input nor a weight (nor our module's cached weight copies): the
# activations the step keeps alive until its backward.


def saved_for_backward():
    saved = {}
    for name, module in VARIANTS.items():
        weights = [*module.parameters(), *getattr(module, "weight_copies", list)()]
        not_activations = {t.untyped_storage().data_ptr() for t in (x, *weights)}
        seen = []

        def note(t, seen=seen):
            if t.untyped_storage().data_ptr() not in not_activations:
                seen.append({"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
                             "MB": t.numel() * t.element_size() / 1e6})
            return t

        with torch.autograd.graph.saved_tensors_hooks(note, lambda t: t):
            y = module(x)
        y.backward(dy)
        saved[name] = seen
    return saved



saved = chapter.measure("saved", saved_for_backward, code=[SimpleGeGLUMLP, FusedGeGLUMLP]).values
saved_table = pd.DataFrame([
    {"variant": name,
     "saved tensors": ", ".join("×".join(map(str, t["shape"])) for t in saved[name]),
     "count": len(saved[name]), "MB": sum(t["MB"] for t in saved[name])}
    for name in VARIANTS]).set_index("variant")
tables.styled(saved_table, precision=1)

# %%
# Ours saves what compile and Liger save, yet peaks higher:

from profiling_guide.pages import facts

facts.peak_memory(result["memory"], "fused", ["compile", "liger"], rows * hidden * element / 1e6)

# %%
# In a model of many such layers that extra is transient: it is allocated in
# the backward of one layer at a time, so it raises the step's peak once, by
# about that much, not once per layer. What grows with depth is what each
# layer saves until its backward, and there ours keeps no more than compile
# or Liger.
#
# The verdicts
# ------------

from profiling_guide.analysis.training import step_gemms, step_memory

refs = chapter.reference_rates([(rows, dim, hidden), (rows, hidden, dim), (dim, rows, hidden),
                                (hidden, rows, dim)]).values
gemms = {name: step_gemms(run.trace, rows=rows, dim=dim, hidden=hidden, references=refs)
         for name, run in runs.items()}
held = {name: {"held": step_memory(run.trace, run.trace.steps[0])["held_at_backward_mb"]}
        for name, run in runs.items()}
evidence = {"saved": saved, "held": held, "gemms": gemms,
            "times": times | {"nine GEMMs": nine_gemms}}
verdicts = expect.judge(predictions, evidence)
tables.verdict_table(verdicts)

# %%
# Who sets the pace
# -----------------
# For our training step: the host's time to issue one against the GPU's
# time to run it, profiler off; then what the profiled trace's idle time
# waited for.

from profiling_guide.pages import verdicts as pace

pace.pace_facts(runs["fused"], what="step")

# %%

pace_verdicts = expect.judge([
    expect.Prediction("issuing our step takes the host longer than the GPU needs: overhead-bound",
                      predicates.paced_by("overhead-bound"), "this run"),
], pace.verdict_of(runs["fused"]), seen_header="what the timings show")
tables.verdict_table(pace_verdicts)

# %%
# What to do next
# ---------------
# The verdicts say how close ours came to the nine bare GEMMs. Why it is
# not closer (the extra bytes its fused
# kernels move), each GEMM named from its shapes, the memory snapshots and
# the clocks the loops ran at are in
# :doc:`the deep dive <deep_dives/plot_06b_deep_training>`. On the host,
# issuing a step takes longer than the GPU needs to run it, so even a loop
# that never waits for the GPU keeps it waiting: fewer launches per step
# (a larger batch, or more of the step compiled into fewer kernels) or a
# CUDA graph of the whole step is the next thing to try. Chapter 8 profiles
# a whole model's training step, optimizer included.

# sphinx_gallery_start_ignore
# The deep dive's memory snapshots (deep_dives/plot_06b_deep_training.py), measured here so that a
# live build runs them once.
from profiling_guide.analysis.training import snapshot_summary


def memory_snapshots():
    summaries = {}
    for name, module in VARIANTS.items():
        training_step(module)()  # warm: compiled, the allocator's pools filled
        for t in (x, *module.parameters()):
            t.grad = None
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
        y = module(x)
        torch.cuda.synchronize()
        after_forward = torch.cuda.memory._snapshot()
        y.backward(dy)
        torch.cuda.synchronize()
        after_step = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        del y
        for t in (x, *module.parameters()):  # or the next variant's snapshot would see them
            t.grad = None
        summaries[name] = snapshot_summary(after_forward, after_step)
    return summaries



chapter.measure("snapshot", memory_snapshots, code=[snapshot_summary, SimpleGeGLUMLP,
                                                    FusedGeGLUMLP])
# sphinx_gallery_end_ignore

verdicts.require()
pace_verdicts.require()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_06b_training_step.py --batch 64 --seq 128 --dim 768 --hidden 3072
#
# or only the timing, with the forward benchmark::
#
#     profiling-guide bench-mlp --backward --json bench.json
#
# The recordings behind this page:

chapter.downloads()
