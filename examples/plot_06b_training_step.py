"""
6b · The training step: forward, backward, and what the forward keeps
======================================================================

Every chapter so far ran the MLP under ``torch.no_grad()``. Training runs
the forward *and* the backward, and the backward is where a profile gets
hard to read: its kernels are launched from the autograd engine's own
thread, their names say nothing of the layer they belong to, and what the
forward keeps for the backward decides the step's memory. This chapter
profiles one training step (forward and backward, no optimizer) of the same
GeGLU MLP in four ways (eager, ``torch.compile``, Liger, and ours, whose
backward is fused too), ties every backward kernel to the forward op that
caused it, names the step's nine GEMMs from their shapes, and measures what
each variant saves.

*Needs:* ``pip install 'profiling-guide[liger]'`` (Liger's kernels, Triton for ours).
"""

# %%
# Set-up
# ------
# The post's sizes, bf16. As in every chapter, the cells of this page copied
# in order into a file run as they are: on a CUDA GPU they profile,
# elsewhere they replay the recordings.

import torch

from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.kernels.models import SimpleGeGLUMLP, load_liger_geglu_mlp
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
# Four ways to train the same MLP
# -------------------------------
# One set of weights. ``x`` asks for its gradient, as the MLP's input inside
# a network would: the backward then computes dX for each linear as well as
# dW. ``dy`` stands in for the gradient that arrives from the layers above.

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


def training_step(module):
    """One forward and backward; every gradient set afresh, as ``zero_grad()`` leaves them."""
    params = list(module.parameters())

    def step():
        for t in (x, *params):
            t.grad = None
        module(x).backward(dy)

    return step


# %%
# Profile each step
# -----------------
# The ``torch.profiler`` block of the other chapters with one more option:
# ``profile_memory=True`` records every allocation and free of the CUDA
# caching allocator, with its running total, so the trace itself says how
# much the forward left for the backward and how high the step went.

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


runs = {name: chapter.profile(name, training_step(module), profiler=profile_steps,
                              label="train_step", warm_up=True,
                              code=[SimpleGeGLUMLP, FusedGeGLUMLP, training_step],
                              args={"variant": name}, variant=f"{name}-train")
        for name, module in VARIANTS.items()}

# %%
# Timed in one run
# ----------------
# :func:`~profiling_guide.measure.bench_step.run_training_step` first checks
# each variant's four gradients (x, gate, up, down) against eager's, then
# times device µs per step as the forward benchmark does: rotating inputs
# larger than the L2 cache, the GPU's queue kept full, 7 interleaved repeats,
# medians with their interquartile range. Beside them, the floor: cuBLAS's
# nine GEMMs of the step (three in the forward; dX and dW of each linear in
# the backward) back to back, with nothing between them. Memory per variant,
# from the allocator's counters around one step: *saved MB*, what the forward
# left allocated for the backward (the output y not counted), and *peak MB*,
# the step's highest point above its start.

from profiling_guide.measure import bench_step
from profiling_guide.measure.timing import Spread, compare


def benchmark():
    return bench_step.run_training_step(batch, seq, dim, hidden)


bench = chapter.measure("bench", benchmark,
                        code=[bench_step.measure_training_step, bench_step.nine_gemms,
                              bench_step.training_step, FusedGeGLUMLP])
result = bench.values
times = {name: Spread.from_dict(t) for name, t in result["variants_us"].items()}
floor = Spread.from_dict(result["nine_gemms_us"])

# %%

import pandas as pd

from profiling_guide.pages import tables
from profiling_guide.pages.prose import Facts, spread_cell

Facts(*(f"{name} failed in the benchmark: {why}" for name, why in result["errors"].items()))
step_table = pd.DataFrame([
    {
        "variant": name,
        "device µs per step": spread_cell(times[name]),
        "× nine GEMMs": times[name].median / floor.median,
        "against eager": compare(times[name], times["eager"]) if name != "eager" else "–",
        "saved MB": result["memory"][name]["saved_mb"],
        "peak MB": result["memory"][name]["peak_mb"],
        "worst gradient error vs eager": max(v for v in result["max_rel_error"][name].values()
                                             if v is not None),
    }
    for name in VARIANTS if name in times
]).set_index("variant")
tables.styled(step_table, precision=3,
              caption=f"cuBLAS's nine GEMMs alone: {spread_cell(floor)} µs per step")

# %%
# At the power limit
# ------------------
# After the timing, each variant's timing loop and the floor's ran again,
# over and over for a second and a half, while ``nvidia-smi`` sampled the GPU's SM clock, its
# power draw and the reasons the driver gives for holding the clock below
# its maximum (:mod:`~profiling_guide.measure.clocks`; a trace records
# times, not clocks). Where the reason reads *software power cap*, the
# loop drew the GPU to its power limit and the driver lowered the clock
# for every kernel in it: a kernel that waits on its tensor cores slows with
# the clock, one that waits on memory hardly does, and the table's times
# are those of a slower GPU than its datasheet's. The timing loop sleeps
# between rounds (the sleep that lets the host queue a round), so it draws
# less than a training loop with no pauses would: the figures below are
# what these times were taken at, not what every loop runs at.

clocks = result.get("clocks", {})
# the floor first, then the variants in the order of the tables above
clock_rows = [name for name in [bench_step.NINE_GEMMS, *VARIANTS] if name in clocks]
clock_table = pd.DataFrame([
    {
        "step": name,
        "SM clock, median MHz": clocks[name]["sm_mhz"],
        "GPU's maximum MHz": clocks[name]["max_sm_mhz"],
        "power draw, median W": clocks[name]["power_w"],
        "power limit W": clocks[name]["power_limit_w"],
        "clock held down by (share of samples)":
            [f"{why} {share:.0%}" for why, share in clocks[name]["reasons"].items()] or ["nothing"],
    }
    for name in clock_rows
], columns=["step", "SM clock, median MHz", "GPU's maximum MHz", "power draw, median W",
            "power limit W", "clock held down by (share of samples)"]).set_index("step")
not_sampled = result["notes"].get("clocks", "no readings")
tables.styled(clock_table, precision=0,
              caption="nvidia-smi every 20 ms, while each timing loop ran again" if clocks
              else f"Clocks not sampled in this run: {not_sampled}")

# %%
# Where a step's device time goes: forward, backward
# --------------------------------------------------
# The profiler puts every backward op under
# ``autograd::engine::evaluate_function``, and ties it to the forward op it
# differentiates with a flow event (the ``fwdbwd`` arrows Perfetto draws).
# :func:`~profiling_guide.analysis.backward.phase_shares` splits each
# step's device time by the phase of the op that launched each kernel.

from profiling_guide.analysis.backward import forward_backward, phase_shares

phases = pd.concat({name: phase_shares(run.trace.steps) for name, run in runs.items()})
tables.styled(phases, precision=1)

# %%
# Every backward kernel, tied to its forward op
# ---------------------------------------------
# One row per kind of link: the forward op and its input shapes, the
# backward op the autograd engine ran for it, and the kernels that backward
# launched (device µs per step). ``MmBackward0`` of a ``[8192, 3072] ·
# [3072, 768]`` product is the down projection's backward: two GEMMs, dX
# and dW. Ours has one backward op for the whole MLP, ``GeGLUFunctionBackward``.

links = pd.concat({name: forward_backward(run.trace, run.trace.steps, top=None)
                   for name, run in runs.items()})
tables.styled(links, precision=1)

# %%
# The phase table's backward also holds work tied to no forward op, which
# this table leaves out: the autograd engine summing the two gradients that
# reach x (from gate and from up; ours computes one).
#
# The same links on the GPU's timeline: one step of each variant, each
# kernel colored by the forward op it belongs to, numbered in forward order
# in the legend. compile's backward is one autograd node for the whole
# compiled graph (``CompiledFunctionBackward``): its kernels all belong to
# the compiled region, which launched none of the forward's kernels itself.
# A bar wide enough for a tag says ``F1`` (forward op 1's own kernel) or
# ``B1`` (a kernel of its backward); gray is work of no forward op. The
# gaps are the profiled step's: the GPU waits for launches, the profiler's
# own cost included, which the device times in the table above leave out.

from profiling_guide.pages import timeline

fig = timeline.plot_links({name: run.trace for name, run in runs.items()})

# %%
# The nine GEMMs, named from their shapes
# ---------------------------------------
# A step of this MLP multiplies nine times: gate, up and down in the
# forward, and for each linear its dX and its dW in the backward. The
# kernels' names do not say which is which; the shapes do. In the
# backward, an ``aten::mm`` of ``[M, K] · [K, N]`` with K = rows is a
# weight's gradient (M = dim: ``dyᵀ·h``, the down weight's; M = hidden:
# gate's or up's); one with M = rows is an input's gradient (N = dim:
# gate's or up's dX; K = dim, N = hidden: ``dh = dy·Wd``, the down
# projection's). Ours runs two of the nine in one kernel three times (gate
# and up in the forward, their dX and their dW in the backward), so its
# step has six GEMM kernels. *gemms* counts each kernel's FLOPs in units of one linear's
# (``2·rows·dim·hidden``); every variant's must add up to nine. Rates are
# against cuBLAS's own rate at the same (M, K, N), measured in this run on
# a settled, repeated product: a reference, not a ceiling, which a kernel
# of the profiled step can exceed.

from profiling_guide.analysis.training import step_gemms

refs = chapter.reference_rates([(rows, dim, hidden), (rows, hidden, dim), (dim, rows, hidden),
                                (hidden, rows, dim)]).values
gemms = {name: step_gemms(run.trace, rows=rows, dim=dim, hidden=hidden, references=refs)
         for name, run in runs.items()}
tables.styled(pd.concat(gemms), precision=1)

# %%
# The floor of the timing table is timed another way: the nine GEMMs back
# to back with the GPU's queue full, over inputs rotating through more than
# the L2 cache, the GPU's time between kernels included. Eager's nine GEMM
# kernels of a profiled step, summed alone, come to a little less.

eager_gemms_us = gemms["eager"]["µs"].sum()
Facts(f"eager's nine GEMM kernels in a profiled step: {eager_gemms_us:.1f} µs summed; "
      f"the floor, cuBLAS's nine GEMMs timed back to back: {floor.median:.1f} µs")

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
# The same question asked of the allocator. The trace's memory events give
# what was allocated when the first backward op started, above what was
# allocated when the step began (saved tensors and the output y), and the
# step's peak. A snapshot of the caching allocator
# (``torch.cuda.memory._record_memory_history``, then ``_snapshot()``, the
# data behind https://pytorch.org/memory_viz) names, for each block still
# held after the forward, the innermost line of Python outside torch's own
# modules that allocated it: a line of ``models.py`` or ``fused_mlp.py``,
# of Inductor's generated code for compile, or this page's own call where
# the library allocates through torch's modules alone (Liger).

from profiling_guide.analysis.training import snapshot_summary, step_memory


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


# %%
# The trace's figures and the snapshots' side by side, with the lines that
# allocated the largest blocks the forward still holds.

snapshots = chapter.measure("snapshot", memory_snapshots, code=[snapshot_summary, SimpleGeGLUMLP,
                                                                FusedGeGLUMLP]).values
memory = {name: step_memory(run.trace, run.trace.steps[0]) for name, run in runs.items()}
tables.styled(pd.DataFrame([
    {"variant": name,
     "trace: held at backward MB": memory[name]["held_at_backward_mb"],
     "trace: peak MB": memory[name]["peak_mb"],
     "snapshot: held after forward MB": snapshots[name]["held_mb"],
     "snapshot: peak MB": snapshots[name]["peak_mb"],
     "largest blocks held, allocated at": "; ".join(f"{b['mb']:.0f} MB {b['where']}"
                                                    for b in snapshots[name]["held"][:4])}
    for name in runs]).set_index("variant"), precision=1)

# %%
# What we expect, checked
# -----------------------
# Eager keeps g, u, gelu(g) and h: four ``[rows, hidden]`` bf16 tensors.
# Ours keeps ``[g | u]`` and h (three), the same bytes as compile and Liger,
# which recompute gelu(g) in their backward. Every step does nine GEMMs'
# worth of FLOPs. Our target is at most 1.05× the time of the nine bare
# GEMMs; it is a target, and the verdict says whether it held here.

from profiling_guide.analysis import checks, expect

per_variant = {name: {"held": memory[name]["held_at_backward_mb"]} for name in runs}
verdicts = expect.check([
    expect.Prediction("eager saves four [rows, hidden] bf16 tensors: g, u, gelu(g), h",
                      checks.saved_tensors("eager", 4, rows * hidden, "bfloat16"),
                      "autograd's formulas", of=saved),
    expect.Prediction("ours saves no more than eager (trace: held when the backward starts)",
                      checks.at_most_as_much("held", "fused", "eager"), "this design",
                      of=per_variant),
    expect.Prediction("every variant's GEMMs add up to nine linears' FLOPs",
                      checks.gemm_work_per_step(9), "the chain rule", of=gemms),
    expect.Prediction("ours is faster than eager, compile and Liger, outside the spreads",
                      checks.faster_than_each("fused", ["eager", "compile", "liger"]), "this run",
                      must_hold=False, of=times),
    expect.Prediction("ours takes at most 1.05× the time of cuBLAS's nine GEMMs alone",
                      checks.median_at_most("fused", 1.05, "nine GEMMs"), "the target",
                      must_hold=False,
                      of=times | {"nine GEMMs": floor}),
], None)
verdicts

# %%

verdicts.require()

# %%
# Why ours is not at the floor
# ----------------------------
# Two of our kernels do more than a GEMM, and the table of GEMMs above times
# both beside the same products in cuBLAS, in eager's step. The forward's
# gate/up kernel writes h as well as the g and u that cuBLAS's two GEMMs
# write. The backward's dh kernel reads g and u and writes dg and du where
# cuBLAS's dh GEMM writes dh. Beside each, the time those extra bytes would
# take at this GPU's copy rate (measured in this run): what the kernel would
# add if none of that traffic overlapped its tensor-core work. A share under
# 100 % means part of it did; over 100 %, the kernel loses time beyond its
# extra bytes too.


def step_us(variant, role):
    return gemms[variant].loc[gemms[variant]["role"] == role, "µs"].sum()


copy_tbps = refs["copy_tbps"]["rate"]
one_mb = rows * hidden * element / 1e6  # one [rows, hidden] tensor: g, u, h, dh, dg or du
extra_mb = {"forward": one_mb,  # h
            "backward": 4 * one_mb - one_mb}  # g, u read and dg, du written; dh not written
gate_up, dh = "gate and up in one: x·[Wg; Wu]ᵀ", "down's dX: dh = dy·Wd"
ours_us = {"forward": step_us("fused", gate_up), "backward": step_us("fused", dh)}
cublas_us = {"forward": step_us("eager", "gate or up: x·Wᵀ"), "backward": step_us("eager", dh)}
what = {"forward": "gate and up, writing h, g and u; cuBLAS's two GEMMs write g and u",
        "backward": "dh, reading g and u, writing dg and du; cuBLAS's GEMM writes dh"}
sentences = []
for phase in ("forward", "backward"):
    extra_us, copy_us = ours_us[phase] - cublas_us[phase], extra_mb[phase] / copy_tbps
    sentences.append(
        f"{phase}: ours {ours_us[phase]:.1f} µs, cuBLAS {cublas_us[phase]:.1f} µs ({what[phase]}); "
        f"ours takes {extra_us:.1f} µs more, {extra_us / copy_us:.0%} of the {copy_us:.1f} µs "
        f"its {extra_mb[phase]:.0f} MB more take at {copy_tbps:.2f} TB/s")
Facts(*sentences)

# %%
# **The backward's dh kernel** is the ping-pong design of the gate/up
# kernel (chapter 6; chapter 6c looks inside it), written in Gluon
# (:mod:`profiling_guide.kernels.geglu_backward_pingpong`): a producer warp
# streams dy and Wd tiles, and two consumer warpgroups take the tiles of dh
# in turn, so one tile's epilogue (g and u copied in by the TMA unit, the
# GeGLU's derivative, dg and du copied out) runs while the other tile's MMAs
# do. Written in Triton's language (``"packed-tma"``), each program runs its
# K loop and then its epilogue, one after the other, and the two costs add;
# ``scripts/probe_backward.py`` times both designs, the ping-pong with one
# consumer, and cuBLAS's bare dh, and its last run on each GPU is committed
# (``probe_backward_dependent.json``). Against cuBLAS's bare dh, though, most of the
# extra traffic still adds to the time (the share above): each consumer
# waits for its previous tile's dg and du to leave shared memory before it
# asks for the next tile's g and u, so each SM has at most two tiles' worth
# of g and u in flight, too few to keep the memory busy while the MMAs run. Holding a
# second set of g and u tiles per consumer, to ask a tile ahead, measured
# slower on the H100: shared memory holds either those tiles or a deeper
# ring of dy and Wd, and the ring's depth mattered more. So did loading g
# and u and storing dg and du from registers instead of through the TMA
# unit, and asking L2 for later tiles' g and u ahead of time (the kernel's
# docstring lists these with their times).
#
# The dh kernel is launched as a *programmatic dependent* of the down GEMM
# before it (``launch_pdl``): the GPU may start it while the down GEMM
# finishes, and its first instruction after setting up shared memory,
# ``griddepcontrol.wait``, holds it until the down GEMM's writes are
# visible. Its launch and set-up overlap the down GEMM's end: 538.9 against
# 540.8 µs per step on the H100 and 519.6 against 521.6 on the H200, launched
# the ordinary way (``probe_backward_dependent.json``). In the profiled step
# above, the host issues the kernel hundreds of µs after the down GEMM has
# finished (the autograd engine issues the backward, more slowly under the
# profiler), so there is nothing to overlap; the saving is in the timed
# steps, where the queue is kept full.
#
# Where a kernel is timed matters as much as how. 128×128 tiles of dh,
# holding two of their four chunks of g and u and refilling them in the
# epilogue, beat the 128×64 tiles this step runs when each is timed alone,
# and lose inside the step, after the forward and the down GEMM
# (``probe_backward_dependent.json``'s ``step_us``: 545.0 against 538.9 µs per
# step on the H100, 522.9 against 519.6 on the H200). Not because the step runs at a
# lower clock: the probe sampled 1980 MHz, the GPUs' maximum, for both
# configs, alone and in the step, on both GPUs (its ``clocks``). The kernel runs in
# the step, so its config is the step's fastest.
#
# **The forward's gate/up kernel** is the ping-pong design of chapter 6,
# storing g and u beside h, so its epilogue runs under the other consumer's
# MMAs here too. How it stores them mattered more than anything else in
# this kernel. Through shared-memory staging tiles and the TMA unit, as it
# stores h, the kernel took 197 µs on the H100 (``scripts/probe_backward.py``,
# the benchmark's way), and Nsight Compute saw its tensor pipe busy 43 % of
# the time, against 87 % for h alone; straight from the accumulator's registers, the stores
# do not coalesce (each thread holds two-byte pieces of many rows). The
# kernel has the compiler regroup g and u into rows, 16 bytes per
# thread, and stores them from registers, marked streaming (``.cs``: nothing
# reads them before the backward): 125 µs on the H100, against 137 µs for
# ``"packed-tma"`` storing the same, and 109 µs for h alone (the committed
# ``probe_backward_dependent.json``).


# %%
# The recordings
# --------------

chapter.downloads()

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
