"""Fused attention kernels: flash attention, PyTorch's memory-efficient kernel, cuDNN's SDPA, their helpers.

Flash attention (Tri Dao's, bundled in PyTorch as ``pytorch_flash``) names a
C++ template whose traits carry the head dimension and the block sizes, and
whose template arguments after the traits are booleans in a fixed order:
``Is_dropout, Is_causal, ...`` (``DEFINE_FLASH_FORWARD_KERNEL`` and its
backward twin in PyTorch's ``flash_attn`` sources), so the name says whether
the kernel is causal. PyTorch's memory-efficient kernel
(``fmha_cutlassF_bf16_aligned_64x64_rf_sm80``) carries the direction, the
type, a tile and the architecture; its mask is a run-time argument. cuDNN's
generated SDPA kernels (``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_...``)
carry the architecture, the direction (``fprop``/``bprop``) and an ``MxNxK``
tile; cuDNN's backward also runs two helpers of its own
(``cudnn::fusion::compute_dot_do_o…``: the row sums of dO·O the softmax's
gradient needs; ``cudnn::fusion::convert_dq_to_16bits``: dQ, accumulated in
float32, rounded to 16 bits).

FlashAttention-4 is written in CuTe DSL, whose compiled kernels are named
``kernel_cutlass_kernel_`` + the Python module path with its dots dropped +
the class + ``_object_at_`` + the argument types
(``kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__tensor...``):
the module says the pass and the architecture, the class the step.

Every one of these is kind ``"attention"``, with ``direction`` and, where the
name says it, ``causal``.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _DTYPE_WORDS, _TILE_2D, _TILE_3D, _cxx_dtype

_FLASH = re.compile(r"\bflash_(?:fwd|bwd)\w*|\bflash::|\bpytorch_flash::|\bFlashAttn\w*")
_FLASH_TRAITS = re.compile(r"Flash_(?:fwd|bwd)_kernel_traits<(?:\(int\))?(\d+), (?:\(int\))?(\d+), (?:\(int\))?(\d+)")
_FLASH_FUNCTION = re.compile(r"\b(flash_(?:fwd|bwd)\w*)<")
# The main kernels whose first two booleans after the traits are Is_dropout, Is_causal.
_FLASH_MASKED = ("flash_fwd_kernel", "flash_fwd_splitkv_kernel", "flash_bwd_dq_dk_dv_loop_kernel",
                 "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel")
# fmha_cutlassF_f16_aligned_64x64_rf_sm80: direction, dtype, then a tile and, after it, the arch.
_FMHA = re.compile(r"\bfmha_cutlass(?P<dir>[FB])_(?P<dtype>[a-z0-9]+)_(?P<rest>\w*)")
_SM_WORD = re.compile(r"sm\d+")
_CUDNN_SDPA = re.compile(r"^cudnn_generated_fort_native_sdpa_(?P<arch>sm\d+)_(?P<rest>\w+)")
_CUTE_FLASH = re.compile(r"^kernel_cutlass_kernel_flash_attncute(?P<module>flash_(?P<dir>fwd|bwd)[a-z0-9_]*?)"
                         r"(?P<cls>FlashAttention[A-Za-z0-9]*)_object_at_")
_CUDNN_SDPA_HELPER = re.compile(r"\bcudnn::fusion::(?P<what>compute_dot_do_o\w*|convert_dq\w*)")


def _after_traits(name: str, start: int) -> list[str]:
    """The template arguments that follow the traits ``<...>`` opened at ``start``, split at top-level commas."""
    depth, i = 0, start
    while i < len(name):  # skip the traits' own brackets
        depth += {"<": 1, ">": -1}.get(name[i], 0)
        i += 1
        if depth == 0:
            break
    args, word = [], []
    for ch in name[i:]:
        if ch in ">(":
            break
        if ch == ",":
            args.append("".join(word).strip())
            word = []
        else:
            word.append(ch)
    args.append("".join(word).strip())
    return [a for a in args if a]


def _flash(name: str) -> dict | None:
    if not _FLASH.search(name):
        return None
    function = _FLASH_FUNCTION.search(name)
    direction = "bwd" if re.search(r"bwd|Bwd|backward", name) else "fwd"
    traits = _FLASH_TRAITS.search(name)
    tile = f"{traits[2]}x{traits[3]}" if traits else None  # traits: head dim, block M, block N
    causal = None
    if traits and function and function[1] in _FLASH_MASKED:
        flags = _after_traits(name, name.index("<", traits.start()))
        if len(flags) >= 2 and flags[1] in ("true", "false", "1", "0"):  # a profiler may print bools as 0/1
            causal = flags[1] in ("true", "1")
    arch_m = re.search(r"Sm(\d+)", name)
    dtype = _cxx_dtype(name)
    step = function[1].removeprefix("flash_").removesuffix("_kernel") if function else direction
    short = " ".join(p for p in ("flash", step, "causal" if causal else None) if p)
    return {"kind": "attention", "library": "flash", "arch": f"sm{arch_m[1]}" if arch_m else None,
            "dtype": dtype, "tile": tile, "fused_ops": ("attention",), "direction": direction, "causal": causal,
            "short": short}


def _flash_attn_4(m: re.Match) -> dict:
    arch = re.search(r"sm\d+", m["module"])
    step = re.sub(r"^FlashAttention(Forward|Backward)", "", m["cls"])  # Sm90, Preprocess, Postprocess
    step = "" if arch and step.lower() == arch[0] else step.lower()
    return {"kind": "attention", "library": "flash-attn-4", "arch": arch[0] if arch else None,
            "fused_ops": ("attention",), "direction": m["dir"],
            "short": " ".join(p for p in ("FA4", m["dir"], step, arch[0] if arch else None) if p)}


def _attention(name: str) -> dict | None:
    m = _CUTE_FLASH.match(name)
    if m:
        return _flash_attn_4(m)
    m = _CUDNN_SDPA.match(name)
    if m:
        words = m["rest"].split("_")
        direction = "bwd" if "bprop" in words else "fwd"
        # "wgmma_f16" names the 16-bit MMA class; bf16 inputs run the same kernel: no dtype from it.
        tile = next((w for w in words if _TILE_3D.match(w)), None)
        return {"kind": "attention", "library": "cudnn", "arch": m["arch"], "tile": tile,
                "fused_ops": ("attention",), "direction": direction, "short": f"cudnn sdpa {direction} {m['arch']}"}
    m = _CUDNN_SDPA_HELPER.search(name)
    if m:
        what = "dot(dO, O)" if m["what"].startswith("compute_dot") else "dQ to 16 bits"
        return {"kind": "attention", "library": "cudnn", "fused_ops": ("attention",), "direction": "bwd",
                "short": f"cudnn sdpa bwd {what}"}
    m = _FMHA.search(name)
    # Read word by word: a pattern that looks for a tile and an arch in the same
    # run of word characters backtracks for minutes on a long hostile name.
    words = m["rest"].split("_") if m else []
    tile_at = next((i for i, w in enumerate(words) if _TILE_2D.match(w)), None)
    arch = next((a[0] for w in words[tile_at + 1 :] if (a := _SM_WORD.match(w))), None) if tile_at is not None else None
    if arch:
        direction = "fwd" if m["dir"] == "F" else "bwd"
        dtype = _DTYPE_WORDS.get(m["dtype"], m["dtype"])
        return {"kind": "attention", "library": "cutlass", "arch": arch, "dtype": dtype, "tile": words[tile_at],
                "fused_ops": ("attention",), "direction": direction, "short": f"mem-eff attn {direction} {arch} {dtype}"}
    return _flash(name)
