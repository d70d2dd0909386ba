"""Attention, the other half of a transformer block: the variants chapter 9 profiles.

Every variant computes ``softmax(q·kᵀ/√d + mask)·v`` for q, k, v of shape
``[batch, heads, seq, head_dim]``:

* :func:`naive_attention` writes it out as four operators, the mask applied
  out of place (``masked_fill`` returns a new score matrix);
* :func:`naive_attention_inplace` is the same with the mask applied in place
  (``masked_fill_``);
* :func:`sdpa` is ``torch.nn.functional.scaled_dot_product_attention`` with one
  backend forced (``math``, ``efficient``, ``flash``, ``cudnn``);
* :func:`flex_attention_causal` is FlexAttention under ``torch.compile``, the
  causal mask given as a ``mask_mod`` and turned into a block mask;
* :func:`load_fa4` finds FlashAttention-4 (``flash-attn-4``, written in CuTe
  DSL) where it is installed.

:func:`attention_flops` counts what each variant must compute, the causal
half honestly: a causal forward needs about half the products of a full one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from profiling_guide.errors import GuideError

BACKENDS = ("math", "efficient", "flash", "cudnn")
FA4_ENV = "PROFILING_GUIDE_FA4"  # "0": leave FlashAttention-4 out


def causal_mask(seq: int, device=None) -> torch.Tensor:
    """``[seq, seq]`` booleans, True where a query may NOT look (a key after it)."""
    return torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1)


def naive_attention(q, k, v, mask):
    """Attention written out; the mask makes a new score matrix (``masked_fill``)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def naive_attention_inplace(q, k, v, mask):
    """The same, the mask written into the score matrix in place (``masked_fill_``)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores.masked_fill_(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def sdpa_backend(name: str):
    """The :class:`torch.nn.attention.SDPBackend` a short name stands for."""
    backends = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    if name not in backends:
        raise GuideError(f"no SDPA backend {name!r}: use one of {', '.join(backends)}")
    return backends[name]


# Its imports stay in its body: chapter 9's recordings fingerprint this function's code, and moving them
# would make those recordings stale.
def sdpa(backend: str, *, causal: bool = True) -> Callable:
    """``scaled_dot_product_attention(q, k, v)`` with only ``backend`` allowed (it raises if that one cannot run)."""
    from torch.nn.attention import sdpa_kernel

    chosen = sdpa_backend(backend)

    def attend(q, k, v):
        with sdpa_kernel(chosen):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    attend.__name__ = f"sdpa_{backend}"
    return attend


def causal_mask_mod(b, h, q_idx, kv_idx):
    """FlexAttention's causal mask: a query sees the keys up to its own position."""
    return q_idx >= kv_idx


# Its imports stay in its body: chapter 9's recordings fingerprint this function's code, and moving them
# would make those recordings stale.
def flex_attention_causal(seq: int, device) -> Callable:
    """Compiled FlexAttention with :func:`causal_mask_mod` as a block mask for ``seq`` queries and keys."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = create_block_mask(causal_mask_mod, B=None, H=None, Q_LEN=seq, KV_LEN=seq, device=device)
    compiled = torch.compile(flex_attention)

    def attend(q, k, v):
        return compiled(q, k, v, block_mask=block_mask)

    attend.block_mask = block_mask
    return attend


def load_fa4() -> tuple[Callable | None, str]:
    """FlashAttention-4's ``flash_attn_func`` and where it came from, or ``(None, why not)``.

    FlashAttention-4 (``pip install flash-attn-4``) is written in CuTe DSL; it
    needs ``nvidia-cutlass-dsl`` and ``quack-kernels`` and a Hopper or
    Blackwell GPU. It takes q, k, v as ``[batch, seq, heads, head_dim]``.
    ``PROFILING_GUIDE_FA4=0`` leaves it out even where it is installed (its
    kernels are compiled at their first call, which on a fresh machine takes
    minutes).
    """
    if os.environ.get(FA4_ENV, "").strip() == "0":
        return None, f"left out ({FA4_ENV}=0)"
    try:  # optional, and slow to import: only when FlashAttention-4 is asked for
        from flash_attn.cute import flash_attn_func
    except Exception as exc:  # ImportError, or the DSL failing to find its libraries
        return None, f"flash-attn-4 is not usable here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"

    try:
        where = f"flash-attn-4 {version('flash-attn-4')}"
    except PackageNotFoundError:
        where = "flash-attn-4 (version unknown)"
    return flash_attn_func, where


def fa4_causal(flash_attn_func: Callable, *, causal: bool = True) -> Callable:
    """FlashAttention-4 on q, k, v of layout ``[batch, seq, heads, head_dim]``."""
    def attend(q, k, v):
        out = flash_attn_func(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out

    return attend


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, *, causal: bool) -> dict[str, float]:
    """FLOPs a forward and a backward must do: the two products ``q·kᵀ`` and ``p·v``.

    Each product is ``2·seq·seq·head_dim`` per head when every query sees every
    key; a causal query ``i`` sees ``i + 1`` keys, so ``seq·(seq + 1)/2`` pairs
    instead of ``seq²``. The backward counts 2.5 times the forward (its four
    products and the recomputed ``q·kᵀ``), FlashAttention's convention. What a
    kernel computes on the masked half is not counted: a variant that computes
    the full matrix gets no credit for it.
    """
    pairs = seq * (seq + 1) / 2 if causal else seq * seq
    forward = 4.0 * batch * heads * head_dim * pairs
    return {"forward": forward, "backward": 2.5 * forward}
