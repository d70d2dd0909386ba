"""
Deep dive 9 · Attention backends across sequence lengths, and FlashAttention-4
==============================================================================

Optional, after chapter 9. How do the attention variants' time and memory
grow with the sequence length, causal and not, and where do the backends
cross? What does FlexAttention's block mask save, and how does
FlashAttention-4, written in CuTe DSL, compare on this GPU?

Unlike the other deep dives, this page measures: the sweep its figure
shows, once per live build.

*Needs:* this package alone, no extra. FlashAttention-4 is measured where
``flash-attn-4`` is installed (``pip install flash-attn-4``, which brings
``nvidia-cutlass-dsl`` and ``quack-kernels``), and left out otherwise.
"""

# %%
# The variants
# ------------
# Chapter 9's, at batch 8 and 16 heads, less FlexAttention (it compiles a
# kernel for each length and mask: its block mask is measured below, at
# chapter 9's length), and FlashAttention-4 where it is installed: the
# outside anchor, a Hopper/Blackwell kernel written in CuTe DSL by
# FlashAttention's authors. It takes q, k and v as
# ``[batch, seq, heads, head_dim]``; it gets its inputs in that layout, the
# others in SDPA's ``[batch, heads, seq, head_dim]``.

import functools

import torch

from profiling_guide.kernels.attention import (
    causal_mask,
    fa4_causal,
    flex_attention_causal,
    load_fa4,
    naive_attention_inplace,
    sdpa,
)
from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line(
    "09b_attention_sweep", batch=8, heads=16, head_dim=64,
    bf16_only_because="the fused backends' kernels are compiled for 16-bit inputs")
batch, heads, head_dim = chapter.flags.batch, chapter.flags.heads, chapter.flags.head_dim
dtype, device = chapter.dtype, chapter.device
chapter.banner()

# %%
# FlashAttention-4 is imported where it is installed; the page says which one it measured.

fa4, fa4_source = load_fa4()
fa4_run = chapter.measure("fa4", lambda: {"available": fa4 is not None, "source": fa4_source}).values
print(f"FlashAttention-4: {fa4_run['source']}")

# %%
# FlashAttention-4 in the trace
# -----------------------------
# Where it is installed, one training step of FlashAttention-4 at chapter 9's
# shape (1,024 tokens, causal), profiled with chapter 9's ``torch.profiler``
# block, and its kernels decoded:

from torch.profiler import ProfilerActivity, profile, record_function, schedule

from profiling_guide.analysis import attention
from profiling_guide.pages import tables


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


# %%
# One step of it, where it was installed when the page was recorded:

if fa4_run["available"]:
    torch.manual_seed(0)
    bshd = (batch, 1024, heads, head_dim)
    q, k, v = (torch.randn(bshd, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    dout = torch.randn(bshd, device=device, dtype=dtype)
    attend = fa4_causal(fa4)

    def fa4_step():
        return torch.autograd.grad(attend(q, k, v), (q, k, v), dout)

    fa4_trace = chapter.profile("fa4_step", fa4_step, profiler=profile_steps, label="attention",
                                code=[fa4_causal], warm_up=True, variant="attention fa4")
    shown = tables.styled(attention.kernel_names_table({"FlashAttention-4": fa4_trace}))
else:
    shown = None
shown

# %%
# The sweep
# ---------
# Sequence lengths 1k to 8k, causal and not, head dim 64 (GPT-2), and 128
# (Llama) at 4k for the fused kernels. Forward and backward device time of
# each point (5 interleaved repeats, medians with their IQR), the step's
# peak memory above its inputs, and each output checked against float64.
# The naive version and the math backend hold whole ``seq × seq`` score
# matrices and are slow: they are timed up to 4k and 2k only, since one
# longer point would take minutes of build time. Each point left out is
# listed with the memory it would need (from the bytes each holds per
# score), and a point that would not fit in the GPU's free memory is left
# out the same way.

from profiling_guide.measure.attention import sweep

SEQS = (1024, 2048, 4096, 8192)

# %%
# The variants at each length: the written-out ones only with a causal mask,
# FlashAttention-4 where it is installed.


@functools.cache
def mask_for(seq: int):
    return causal_mask(seq, device)


def variants_for(causal: bool) -> dict:
    chosen = {
        "efficient": (sdpa("efficient", causal=causal), "bhsd"),
        "flash": (sdpa("flash", causal=causal), "bhsd"),
        "cudnn": (sdpa("cudnn", causal=causal), "bhsd"),
    }
    if causal:
        chosen["naive_inplace"] = (lambda q, k, v: naive_attention_inplace(q, k, v, mask_for(q.size(-2))), "bhsd")
        chosen["math"] = (sdpa("math", causal=causal), "bhsd")
    if fa4 is not None:
        chosen["fa4"] = (fa4_causal(fa4, causal=causal), "bshd")
    return chosen


# %%
# What the written-out variants hold, and how far each is timed; then the sweep.

# Bytes each holds per score element at its peak: bf16 scores, their masked copy,
# the softmax; math in float32.
SCORE_BYTES = {"naive_inplace": 8, "math": 16}
# The longest sequence each written-out variant is timed at: past it, minutes of
# build time for one point.
MAX_SEQ = {"naive_inplace": 4096, "math": 2048}


def run_sweep():
    rows = []
    for causal in (True, False):
        rows += sweep(variants_for(causal), SEQS, batch=batch, heads=heads, head_dim=head_dim, causal=causal,
                      dtype=dtype, score_bytes=SCORE_BYTES, max_seq=MAX_SEQ)
    fused = {n: v for n, v in variants_for(True).items() if n not in MAX_SEQ}
    rows += sweep(fused, (4096,), batch=batch, heads=heads, head_dim=128, causal=True, dtype=dtype)
    return {"rows": rows}


swept = [variants_for, sweep, naive_attention_inplace, sdpa, fa4_causal,
         f"SCORE_BYTES={SCORE_BYTES}", f"SEQS={SEQS}", f"MAX_SEQ={MAX_SEQ}"]
points = chapter.measure("sweep", run_sweep, code=swept,
                         args={"fa4": fa4_run["source"]}).values["rows"]
for point in points:
    if "skipped" in point:
        print(f"{point['variant']} at {point['seq']:,} tokens, head dim {point['head_dim']}, "
              f"{'causal' if point['causal'] else 'no mask'}: {point['skipped']}")

# %%
# Time and memory against the sequence length, causal, head dim 64. The
# time axes are logarithmic: a line of slope 2 is quadratic growth, of
# slope 1 linear.

from profiling_guide.pages import charts

fig = charts.attention_sweep(points, head_dim=head_dim, causal=True)

# %%
# Where the backends cross
# ------------------------
# At each length, the fastest forward and backward, and the others within
# its spread (a tie):

tables.styled(attention.sweep_winners(points), precision=1)

# %%
# What the block mask saves
# -------------------------
# FlexAttention asks the mask function which tiles of the score matrix hold
# anything; with a causal mask, about half hold nothing and are skipped.
# The same mask given only as a ``score_mod`` (every score is computed,
# then the masked ones set to −∞) computes every tile:

from profiling_guide.measure.attention import AttentionShape, keep_graphs_for_timing, time_variants

keep_graphs_for_timing()  # the backward is timed on a kept graph, as in chapter 9
SEQ = 1024  # chapter 9's: its block-mask kernel is compiled already


def causal_score_mod(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, float("-inf"))


def flex_without_block_mask():
    from torch.nn.attention.flex_attention import flex_attention

    compiled = torch.compile(flex_attention)
    return lambda q, k, v: compiled(q, k, v, score_mod=causal_score_mod)


flex_runs = chapter.measure(
    "block_mask",
    lambda: time_variants({"flex, block mask": (flex_attention_causal(SEQ, device), "bhsd"),
                           "flex, score_mod only": (flex_without_block_mask(), "bhsd")},
                          AttentionShape(batch, heads, SEQ, head_dim, dtype), sets=2, repeats=5),
    code=[flex_attention_causal, flex_without_block_mask, causal_score_mod, time_variants, f"SEQ={SEQ}"]).values

from profiling_guide.pages import facts

facts.block_mask_saving(flex_runs)

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     pip install flash-attn-4   # optional: the FlashAttention-4 rows
#     python examples/deep_dives/plot_09_deep_attention.py
