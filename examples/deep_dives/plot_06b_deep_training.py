"""
Deep dive 6b · The training step in detail: nine GEMMs, extra bytes, memory, clocks
===================================================================================

Optional, after chapter 6b. Every backward kernel tied to its forward op, the
step's nine GEMMs named from their shapes, why ours is not at the time of the
nine bare GEMMs (the bytes its fused kernels move besides the products), what
the allocator's snapshots say the forward holds, each variant's gradients
against eager's, and the clocks and power the timing loops ran at.
Everything is read from chapter 6b's recordings; nothing is measured again.
"""

# %%
# The recordings
# --------------

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.recorded("06b_training_step")
runs = {name: chapter.read(name) for name in ("eager", "compile", "liger", "fused")}
result = chapter.read("bench").values
refs = chapter.read("references").values
snapshots = chapter.read("snapshot").values
chapter.banner()

# %%
# Every backward kernel, tied to its forward op
# ---------------------------------------------
# One row per kind of link: the forward op and its input shapes, the
# backward op the autograd engine ran for it, and the kernels that backward
# launched (device µs per step). ``MmBackward0`` of a ``[8192, 3072] ·
# [3072, 768]`` product is the down projection's backward: two GEMMs, dX
# and dW. Ours has one backward op for the whole MLP, ``GeGLUFunctionBackward``.

import pandas as pd

from profiling_guide.analysis.backward import forward_backward
from profiling_guide.pages import tables

links = pd.concat({name: forward_backward(run.trace, run.trace.steps, top=None)
                   for name, run in runs.items()})
tables.styled(links, precision=1)

# %%
# The phase table of chapter 6b's backward also holds work tied to no forward
# op, which this table leaves out: the autograd engine summing the two
# gradients that reach x (from gate and from up; ours computes one).
#
# The nine GEMMs, named from their shapes
# ---------------------------------------
# The kernels' names do not say which GEMM is which; the shapes do. In the
# backward, an ``aten::mm`` of ``[M, K] · [K, N]`` with K = rows is a
# weight's gradient (M = dim: ``dyᵀ·h``, the down weight's; M = hidden:
# gate's or up's); one with M = rows is an input's gradient (N = dim:
# gate's or up's dX; K = dim, N = hidden: ``dh = dy·Wd``, the down
# projection's). Ours runs two of the nine in one kernel three times (gate
# and up in the forward, their dX and their dW in the backward), so its
# step has six GEMM kernels. *gemms* counts each kernel's FLOPs in units of
# one linear's (``2·rows·dim·hidden``); every variant's add up to nine.
# Rates are against cuBLAS's own rate at the same (M, K, N), measured in
# chapter 6b's run on a settled, repeated product: a reference, not a
# ceiling, which a kernel of the profiled step can exceed.

from profiling_guide.analysis.training import step_gemms

args = runs["eager"].run["args"]
rows, dim, hidden, element = args["batch"] * args["seq"], args["dim"], args["hidden"], 2  # bf16
gemms = {name: step_gemms(run.trace, rows=rows, dim=dim, hidden=hidden, references=refs)
         for name, run in runs.items()}
tables.styled(pd.concat(gemms), precision=1)

# %%
# cuBLAS's nine GEMMs in chapter 6b's timing table are timed another way:
# back to back with the GPU's queue full, over inputs rotating through more
# than the L2 cache, the GPU's time between kernels included. Eager's nine
# GEMM kernels of a profiled step, summed alone, come to less: the timed
# figure is a reference for the step, not a floor under it.

from profiling_guide.pages.facts import Facts
from profiling_guide.spread import Spread

nine_gemms = Spread.from_dict(result["nine_gemms_us"])
eager_gemms_us = gemms["eager"]["µs"].sum()
Facts(f"eager's nine GEMM kernels in a profiled step: {eager_gemms_us:.1f} µs summed; "
      f"cuBLAS's nine GEMMs timed back to back: {nine_gemms.median:.1f} µs")

# %%
# Why ours is not at the nine GEMMs' time
# ---------------------------------------
# Two of our kernels do more than a GEMM, and the table of GEMMs above times
# both beside the same products in cuBLAS, in eager's step. The forward's
# gate/up kernel writes h as well as the g and u that cuBLAS's two GEMMs
# write. The backward's dh kernel reads g and u and writes dg and du where
# cuBLAS's dh GEMM writes dh. Beside each, the time those extra bytes would
# take at this GPU's copy rate (measured in the same run): what the kernel
# would add if none of that traffic overlapped its tensor-core work. A share
# under 100 % means part of it did; over 100 %, the kernel loses time beyond
# its extra bytes too.


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
# What the allocator says the forward holds
# -----------------------------------------
# The trace's memory events give what was allocated when the first backward
# op started, above what was allocated when the step began (saved tensors
# and the output y), and the step's peak. A snapshot of the caching
# allocator (``torch.cuda.memory._record_memory_history``, then
# ``_snapshot()``, the data behind https://pytorch.org/memory_viz) names,
# for each block still held after the forward, the innermost line of Python
# outside torch's own modules that allocated it: a line of ``models.py`` or
# ``fused_mlp.py``, of Inductor's generated code for compile, or chapter
# 6b's own call where the library allocates through torch's modules alone
# (Liger).

from profiling_guide.analysis.training import step_memory

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
# Gradients against eager's
# -------------------------
# The step benchmark first checked each variant's four gradients (x, gate,
# up, down) against eager's: the largest relative deviation of each.

tables.styled(pd.DataFrame(result["max_rel_error"]).T.map(
    lambda v: "–" if v is None else f"{v:.1e}"))

# %%
# Clocks and power while the loops ran
# ------------------------------------
# After the timing, each variant's timing loop and the nine GEMMs' ran again,
# over and over for a second and a half, while ``nvidia-smi`` sampled the
# GPU's SM clock, its power draw and the reasons the driver gives for holding
# the clock below its maximum (:mod:`~profiling_guide.measure.clocks`; a trace
# records times, not clocks). Had a loop drawn the GPU to its power limit,
# the reason would read *software power cap* and every kernel in it would
# have run at a lower clock. The timing loop sleeps between rounds (the sleep
# that lets the host queue a round), so it draws less than a training loop
# with no pauses would. What these loops ran at:

from profiling_guide.pages import facts

facts.clock_summary(result.get("clocks", {}))
