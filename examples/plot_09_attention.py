"""
9 · Attention: the score matrix, and the kernels that never write it
====================================================================

The MLP was half of a transformer block; attention is the other half.
Written out, attention is four operators and a ``seq × seq`` score matrix
per head that goes to memory and back. PyTorch's
``scaled_dot_product_attention`` (SDPA) has four backends that compute the
same thing, three of them in one kernel that never writes the matrix. What
does each one launch, what does it cost in time and memory for a training
step, and which should a model on this GPU use?

*Needs:* this package alone, no extra (live, FlexAttention compiles with the Triton that
torch's CUDA builds bring). FlashAttention-4 is in the deep dive.
"""

# %%
# The code under study
# --------------------
# A GPT-2-sized layer: batch 8, 16 heads of 64, 1,024 tokens, a causal mask
# (each token sees the ones before it), bf16. Attention written out:
#
# .. literalinclude:: ../../src/profiling_guide/kernels/attention.py
#    :pyobject: naive_attention
#
# The same with the mask written into the scores in place (``masked_fill_``)
# is :func:`~profiling_guide.kernels.attention.naive_attention_inplace`; each
# SDPA backend is forced with ``torch.nn.attention.sdpa_kernel``:
#
# .. literalinclude:: ../../src/profiling_guide/kernels/attention.py
#    :pyobject: sdpa
#
# FlexAttention takes the mask as a function of the query and key positions
# (a ``mask_mod``), turns it into a *block mask* (which tiles of the score
# matrix hold anything at all) and compiles one Triton kernel for it:
#
# .. literalinclude:: ../../src/profiling_guide/kernels/attention.py
#    :pyobject: flex_attention_causal

import torch

from profiling_guide.kernels.attention import (
    attention_flops,
    causal_mask,
    flex_attention_causal,
    naive_attention,
    naive_attention_inplace,
    sdpa,
)
from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line(
    "09_attention", batch=8, heads=16, seq=1024, head_dim=64,
    bf16_only_because="the fused backends' kernels are compiled for 16-bit inputs")
flags = chapter.flags
batch, heads, seq, head_dim = flags.batch, flags.heads, flags.seq, flags.head_dim
dtype, device = chapter.dtype, chapter.device  # device: "cuda" live, "meta" when the page replays
chapter.require_memory(40 * batch * heads * seq * seq,
                       f"naive attention at {batch}×{heads}×{seq}²")
chapter.banner()

# %%
# Its inputs, and the variants:

torch.manual_seed(0)
shape = (batch, heads, seq, head_dim)
q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
dout = torch.randn(shape, device=device, dtype=dtype)  # the gradient from above
mask = causal_mask(seq, device)

variants = {
    "naive": lambda q, k, v: naive_attention(q, k, v, mask),
    "naive_inplace": lambda q, k, v: naive_attention_inplace(q, k, v, mask),
    "math": sdpa("math"),
    "efficient": sdpa("efficient"),
    "flash": sdpa("flash"),
    "cudnn": sdpa("cudnn"),
    "flex": flex_attention_causal(seq, device),
}

# %%
# Profiling
# ---------
# One training step is one forward and one backward of the layer
# (``torch.autograd.grad`` gives q's, k's and v's gradients without
# accumulating them). The ``torch.profiler`` block is chapter 1's: skip a
# step, warm up one, record three, with the input shapes.

from torch.profiler import ProfilerActivity, profile, record_function, schedule


def profile_steps(step, label, trace_file):
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
    ) as prof:
        for _ in range(5):
            with record_function(label):
                step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(trace_file)
    return prof


def training_step(attend):
    def step():
        out = attend(q, k, v)
        return torch.autograd.grad(out, (q, k, v), dout)
    return step


# %%
# Each variant in turn (on a GPU; in replay its recording is read back).
# Then, with the profiler off, each pass timed alone: the forward's and the
# backward's device time, the CPU time to issue a forward, and the memory a
# step takes, from the caching allocator's counters
# (:func:`~profiling_guide.measure.attention.time_variants`). The backward
# alone is timed by differentiating one kept graph again and again, which
# compiled code allows only without *buffer donation* (the backward reusing
# the saved tensors' memory for its outputs): it is switched off before
# FlexAttention compiles. The kernels are the same either way.

from profiling_guide.measure.attention import AttentionShape, keep_graphs_for_timing, time_variants

keep_graphs_for_timing()
studied = [naive_attention, naive_attention_inplace, sdpa, flex_attention_causal]
runs = {name: chapter.profile(name, training_step(attend), profiler=profile_steps,
                              label="attention", code=studied, warm_up=True, time_it=False)
        for name, attend in variants.items()}
timings = chapter.measure(
    "timings", lambda: time_variants({name: (attend, "bhsd") for name, attend in variants.items()},
                                     AttentionShape(batch, heads, seq, head_dim, dtype)),
    code=[time_variants, naive_attention, naive_attention_inplace, sdpa, flex_attention_causal]).values
references = chapter.reference_rates([]).values

# %%
# Before we look
# --------------
# The guesses, several from the A100 the series measured first:
#
# * ``masked_fill`` returns a new tensor: PyTorch copies the scores, then
#   masks the copy. In place, the copy goes.
# * The ``math`` backend is attention written out in ATen ops, upcast to
#   float32 for bf16 inputs: more kernels than the naive version, and far
#   slower than a fused kernel.
# * ``efficient``, ``flash``, ``cudnn`` and ``flex`` each compute the forward
#   in one kernel.
# * cuDNN builds an execution plan per call: it costs more CPU time than
#   flash, launches through ``cuLaunchKernelEx``, and the trace shows its
#   kernels at 0 % occupancy, an artefact of that launch (the profiler's
#   occupancy estimate is not a measurement).

from profiling_guide.analysis import attention, expect
from profiling_guide.analysis.expect import POST

predictions = [
    expect.Prediction("the out-of-place mask copies the scores; the in-place one does not",
                      attention.copies_out_of_place(runs, out_of_place="naive",
                                                    in_place="naive_inplace"), POST),
    expect.Prediction("math's softmax runs in float32",
                      attention.softmax_in_fp32(runs["math"].trace), POST),
    expect.Prediction("math launches more kernels than the naive version",
                      attention.more_kernels(runs, "math", "naive_inplace"), POST, must_hold=False),
    expect.Prediction("math's forward is at least 3× slower than flash's",
                      attention.slower_by_at_least(timings, "math", "flash", 3.0), POST,
                      must_hold=False),
]

# %%
# And of the fused backends:

predictions += [
    expect.Prediction("efficient, flash, cudnn and flex launch one kernel per forward",
                      attention.one_kernel_forward(runs, ["efficient", "flash", "cudnn", "flex"]),
                      must_hold=False),
    expect.Prediction("cudnn costs more CPU time per forward than flash",
                      attention.costs_more_cpu(timings, "cudnn", "flash"), POST, must_hold=False),
    expect.Prediction("cudnn's kernels are launched with cuLaunchKernelEx",
                      attention.launched_through(runs["cudnn"].trace, "cuLaunchKernelEx"), POST,
                      must_hold=False),
    expect.Prediction("the trace shows cudnn's attention kernels at 0 % occupancy",
                      attention.zero_occupancy(runs["cudnn"].trace, "cudnn"), POST,
                      must_hold=False),
    expect.Prediction("the 0 % comes with the cuLaunchKernelEx launch",
                      attention.zero_occupancy_follows_launch(runs), must_hold=False),
]

# %%
# The trace, one step
# -------------------
# The naive step, one forward and its backward: the matrix products, the
# scale, the mask and the softmax each run over all ``8·16·1024²`` scores.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_step(runs["naive"].trace, title="naive attention, one training step")

# %%
# Every variant's step, profiler off: kernels per pass (from its trace),
# device time of each pass, the step's peak memory above its inputs, and the
# CPU time to issue a step.

tables.styled(attention.step_table(runs, timings), precision=1)

# %%
# Who sets the pace
# -----------------
# The verdict is the one measured with the profiler off (why: :ref:`chapter 1
# <profiler-cost>`): the CPU time to issue one training step against the
# device time it takes, for the backend whose step is fastest. Each SDPA call
# here runs inside ``sdpa_kernel(...)``, whose entry and exit are part of its
# CPU time.

from profiling_guide.pages.verdicts import timed_pace_facts

best = attention.fastest_step(timings)
cpu_issue, device_time = attention.step_pace(timings, best)
timed_pace_facts(f"09_attention.timings ({best})", cpu_issue, device_time, runs[best].trace,
                 what="training step")

# %%
# Which kernels each variant ran, their names decoded
# (:func:`~profiling_guide.trace.kernel_names.decode`: the library, the pass,
# and for flash whether the kernel was built causal), and the call that
# launched them. ``cuLaunchKernelEx`` is the driver's launch with attributes
# (thread-block clusters, programmatic dependencies).

tables.styled(attention.kernel_names_table(runs))

# %%
# The verdict
# -----------

verdicts = expect.judge(predictions, None, seen_header="what the traces and timings show")
tables.verdict_table(verdicts)

# %%
# Where a guess from the A100 fails on this GPU, its row says what the trace
# shows instead. The trace's "est. achieved occupancy" is the profiler's
# estimate, not a counter. The row on 0 % counts kernels of at least one
# block per SM: for them 0 % is the estimate failing. A kernel of fewer
# blocks than the GPU has SMs (math's one-block fill kernel) is at 0 %
# rightly, since most SMs have nothing to run, and the row lists those
# apart. Chapter 6c measures occupancy with Nsight Compute.

# %%
# Against the limits
# ------------------
# FLOPs counted honestly: a causal step needs only the products of each
# query with the keys up to it, ``seq·(seq + 1)/2`` pairs instead of
# ``seq²``, and the backward 2.5 times the forward's
# (:func:`~profiling_guide.kernels.attention.attention_flops`). A variant
# that computes the masked half gets no credit for it. The reference is the
# best cuBLAS bf16 GEMM rate measured in this run; the ceiling is the
# datasheet's.

flops = attention_flops(batch, heads, seq, head_dim, causal=True)
tables.styled(attention.rates_table(timings, flops, references), precision=0)

# %%
# What to do
# ----------
# Pick the backend by the step's time on your GPU and shape, and check in
# your own trace which one ran: SDPA chooses silently, and only the kernel
# names say which. ``profiling-guide report`` groups them as attention and
# names the library. :doc:`The deep dive <deep_dives/plot_09_deep_attention>`
# sweeps the sequence length, causal and not, shows where the backends cross,
# and times FlashAttention-4.

from profiling_guide.pages import facts

facts.attention_advice(timings)

# %%

verdicts.require()
chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     python examples/plot_09_attention.py --batch 8 --heads 16 --seq 1024 --head_dim 64
