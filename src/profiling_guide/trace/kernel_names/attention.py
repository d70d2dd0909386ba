"""Fused attention kernels: flash attention, PyTorch's memory-efficient kernel, cuDNN's SDPA.

Flash attention (Tri Dao's, bundled in PyTorch as ``pytorch_flash``) names a
C++ template whose traits carry the head dimension and the block sizes, and
whose arguments carry the element type and the architecture (``Sm80``).
PyTorch's memory-efficient kernel (``fmha_cutlassF_f16_aligned_64x64_rf_sm80``)
carries the direction, the type, a tile and the architecture. cuDNN's
generated SDPA kernels (``cudnn_generated_fort_native_sdpa_sm90_...``) carry
the architecture, the direction (``bprop``), the type and an ``MxNxK`` tile.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _DTYPE_WORDS, _TILE_2D, _TILE_3D, _cxx_dtype

# ---------------------------------------------------------------------------
# Attention: flash attention (Tri Dao's, bundled in PyTorch as pytorch_flash),
# PyTorch's memory-efficient kernel (fmha_cutlass*), cuDNN's generated SDPA.
# Kind is "other": a fused GEMM-softmax-GEMM is none of the simple kinds.
# ---------------------------------------------------------------------------

_FLASH = re.compile(r"\bflash_(?:fwd|bwd)\w*|\bflash::|\bpytorch_flash::|\bFlashAttn\w*")
_FLASH_TRAITS = re.compile(r"Flash_(?:fwd|bwd)_kernel_traits<(?:\(int\))?(\d+), (?:\(int\))?(\d+), (?:\(int\))?(\d+)")
# fmha_cutlassF_f16_aligned_64x64_rf_sm80: direction, dtype, then a tile and, after it, the arch.
_FMHA = re.compile(r"\bfmha_cutlass(?P<dir>[FB])_(?P<dtype>[a-z0-9]+)_(?P<rest>\w*)")
_SM_WORD = re.compile(r"sm\d+")
_CUDNN_SDPA = re.compile(r"^cudnn_generated_fort_native_sdpa_(?P<arch>sm\d+)_(?P<rest>\w+)")


def _attention(name: str) -> dict | None:
    m = _CUDNN_SDPA.match(name)
    if m:
        words = m["rest"].split("_")
        direction = "bwd" if "bprop" in words else "fwd"
        dtype = next((_DTYPE_WORDS[w] for w in words if w in _DTYPE_WORDS), None)
        tile = next((w for w in words if _TILE_3D.match(w)), None)
        return {"kind": "other", "library": "cudnn", "arch": m["arch"], "dtype": dtype, "tile": tile,
                "fused_ops": ("attention",), "short": f"cudnn sdpa {direction} {m['arch']}"}
    m = _FMHA.search(name)
    # Read word by word: a pattern that looks for a tile and an arch in the same
    # run of word characters backtracks for minutes on a long hostile name.
    words = m["rest"].split("_") if m else []
    tile_at = next((i for i, w in enumerate(words) if _TILE_2D.match(w)), None)
    arch = next((a[0] for w in words[tile_at + 1 :] if (a := _SM_WORD.match(w))), None) if tile_at is not None else None
    if arch:
        direction = "fwd" if m["dir"] == "F" else "bwd"
        dtype = _DTYPE_WORDS.get(m["dtype"], m["dtype"])
        return {"kind": "other", "library": "cutlass", "arch": arch, "dtype": dtype, "tile": words[tile_at],
                "fused_ops": ("attention",), "short": f"mem-eff attn {direction} {arch} {dtype}"}
    if not _FLASH.search(name):
        return None
    direction = "bwd" if re.search(r"bwd|Bwd|backward", name) else "fwd"
    traits = _FLASH_TRAITS.search(name)
    tile = f"{traits[2]}x{traits[3]}" if traits else None  # traits: head dim, block M, block N
    arch_m = re.search(r"Sm(\d+)", name)
    dtype = _cxx_dtype(name)
    short = " ".join(p for p in ("flash attn", direction, dtype) if p)
    return {"kind": "other", "library": "flash", "arch": f"sm{arch_m[1]}" if arch_m else None, "dtype": dtype,
            "tile": tile, "fused_ops": ("attention",), "short": short}
