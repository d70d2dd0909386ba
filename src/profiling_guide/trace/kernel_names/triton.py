"""Hand-written Triton kernels launched from Python: ``_geglu_tanh_forward_kernel``, ``matmul_kernel``.

A ``@triton.jit`` function shows in the trace as its bare identifier (Liger,
a tutorial's matmul, our own fused MLP). The name carries only the words its
author chose: the kind is guessed from them (a GEMM, attention, a reduction
or a pointwise kernel), and the activation and norm words are kept as the
ops it fuses. Inductor's generated kernels read in
:mod:`~profiling_guide.trace.kernel_names.inductor`.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _clip, _snake

# ---------------------------------------------------------------------------
# A bare identifier: most likely a Triton kernel launched from Python (Liger,
# a tutorial's matmul_kernel, our own fused MLP). torch.profiler shows C++
# kernels with their full signature ("void ns::f<...>(...)") and library
# kernels with a library prefix, both read by the families decode() tries
# before this one; a name that is only an identifier is what @triton.jit
# functions look like. This is a heuristic, and so is the kind, guessed from
# the words in the name. An identifier with no kernel word in it (``main``,
# ``x``, a mangled ``_Z...`` C++ name) is no evidence of Triton and stays
# unknown.
# ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GEMM_WORDS = frozenset({"gemm", "gemv", "matmul", "mm", "bmm", "addmm", "dot", "linear"})
_ATTENTION_WORDS = frozenset({"attn", "attention", "fmha", "sdpa", "mha", "flash"})
_REDUCTION_WORDS = frozenset(
    {"softmax", "norm", "rmsnorm", "layernorm", "rms_norm", "layer_norm", "group_norm", "reduce", "reduction",
     "sum", "mean", "argmax", "argmin", "topk", "cumsum", "scan", "logsumexp", "cross_entropy", "entropy", "loss"}
)
_POINTWISE_WORDS = frozenset(
    {"gelu", "geglu", "swiglu", "silu", "swish", "relu", "sigmoid", "tanh", "glu", "reglu", "act", "activation",
     "mul", "add", "sub", "div", "copy", "cast", "fill", "rope", "rotary", "quant", "dequant", "scale", "dropout",
     "elementwise", "pointwise", "exp", "clamp"}
)
# Words that make a bare identifier read as a kernel someone wrote in Triton.
_KERNEL_WORDS = _GEMM_WORDS | _ATTENTION_WORDS | _REDUCTION_WORDS | _POINTWISE_WORDS | frozenset(
    {"kernel", "fwd", "bwd", "forward", "backward", "fused", "persistent", "triton", "tma", "splitk"}
)
# A C++ name as the compiler writes it (Itanium ABI): _Z, then a length, N, L, S or I.
_MANGLED = re.compile(r"_Z[0-9NLSIT]")
_ACTIVATION_WORDS = ("gelu", "geglu", "swiglu", "silu", "swish", "relu", "sigmoid", "tanh", "glu", "reglu")
_NORM_WORDS = ("rms_norm", "layer_norm", "group_norm", "softmax", "cross_entropy")
_COMPOUNDS = {("rms", "norm"): "rms_norm", ("layer", "norm"): "layer_norm", ("group", "norm"): "group_norm",
              ("cross", "entropy"): "cross_entropy", ("rmsnorm",): "rms_norm", ("layernorm",): "layer_norm"}


def _words(identifier: str) -> list[str]:
    raw = [w for w in _snake(identifier).split("_") if w]
    out: list[str] = []
    i = 0
    while i < len(raw):
        pair = tuple(raw[i : i + 2])
        if pair in _COMPOUNDS:
            out.append(_COMPOUNDS[pair])
            i += 2
        else:
            out.append(_COMPOUNDS.get((raw[i],), raw[i]))
            i += 1
    return out


def _plain_triton(name: str) -> dict | None:
    if not _IDENTIFIER.match(name) or _MANGLED.match(name):
        return None
    words = _words(name)
    word_set = set(words)
    if not word_set & _KERNEL_WORDS:
        return None  # an identifier that says nothing of a kernel: not evidence of Triton
    if word_set & _GEMM_WORDS:
        kind = "gemm"
    elif word_set & _ATTENTION_WORDS:
        kind = "other"
    elif word_set & _REDUCTION_WORDS:
        kind = "reduction"
    elif word_set & _POINTWISE_WORDS:
        kind = "pointwise"
    else:
        kind = "other"
    fused = tuple(dict.fromkeys(w for w in words if w in _ACTIVATION_WORDS or w in _NORM_WORDS))
    if word_set & _ATTENTION_WORDS:
        fused = ("attention",) + fused
    return {"kind": kind, "library": "triton", "fused_ops": fused, "short": _clip(f"triton: {name}")}
