"""CUTLASS's kernels, versions 2 and 3.

CUTLASS 2 names (``cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8``),
bare or wrapped in ``void cutlass::Kernel2<...>(...)``, and cuDNN's own copy of
CUTLASS, carry the compute capability, the instruction family (tensor-op,
wmma, SIMT), the types, the tile, the operand layouts and the epilogue; a
convolution says its direction (fprop, dgrad, wgrad). CUTLASS 3 procedural
names (``cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_...``)
carry the architecture, the types of A, B, the accumulator, C and D, an
``MxNxK`` tile, the cluster, the stages and the layouts of A, B and C.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _DTYPE_WORDS, _TILE_3D, _clip, _epilogue, _gemm_tokens, _in_out

# CUTLASS 2.x names, bare or wrapped: ``void cutlass::Kernel2<cutlass_80_...>(...)``.
# cuDNN ships its own CUTLASS copy (``cutlass__5x_cudnn::Kernel<...>``).
_CUTLASS2 = re.compile(r"\bcutlass_(?:(?P<cc>\d+)_)?(?P<op>wmma_tensorop|tensorop|simt|wmma)_(?P<rest>\w+)")


def _cutlass2(name: str) -> dict | None:
    m = _CUTLASS2.search(name)
    if not m:
        return None
    words = m["rest"].split("_")
    fields = _gemm_tokens(words, tensor_op="tensorop" in m["op"])
    gemm_word = fields.pop("gemm_word")
    arch = f"sm{m['cc']}" if m["cc"] else None
    is_conv = gemm_word is not None and gemm_word["what"] in ("fprop", "dgrad", "wgrad")
    library = "cudnn" if "cudnn" in name else "cutlass"
    op = "wmma" if "wmma" in m["op"] else ("simt" if m["op"] == "simt" else None)
    parts = [library, arch, op, f"conv {gemm_word['what']}" if is_conv else None,
             fields["dtype"], fields["tile"], fields["layout"]]
    short = " ".join(p for p in parts if p) + (f" +{fields['epilogue']}" if fields["epilogue"] else "")
    return {
        "kind": "gemm",
        "library": library,
        "arch": arch,
        "fused_ops": (f"conv_{gemm_word['what']}",) if is_conv else (),
        "short": _clip(short),
        **fields,
    }


# CUTLASS 3.x procedural names (documented in the CUTLASS profiler docs):
#   cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma
#   types A, B, accumulator, C (``void`` = no C), D; tile MxNxK; cluster; stages (0 = auto); layouts of A, B, C.
_CUTLASS3 = re.compile(r"\bcutlass3x_(?P<arch>sm\d+)_(?P<rest>\w+)")


def _cutlass3_dtype(words: list[str]) -> str | None:
    """The input type (``in->out`` where the output differs), or tf32 where the name says so."""
    if any(w.startswith("tf32") or w.endswith("tf32gemm") for w in words):
        return "tf32"  # fp32 tensors fed to the tensor cores as tf32
    dtypes = [_DTYPE_WORDS.get(w) for w in words if w in _DTYPE_WORDS or w == "void"]
    return _in_out(dtypes[0], dtypes[-1]) if dtypes else None


def _cutlass3(name: str) -> dict | None:
    m = _CUTLASS3.search(name)
    if not m:
        return None
    words = m["rest"].split("_")
    tile = next((w for w in words if _TILE_3D.match(w)), None)
    layout = next((w for w in words if re.fullmatch(r"[nt]{3}", w)), None)
    dtype = _cutlass3_dtype(words)
    conv_op = next((w for w in words if w in ("fprop", "dgrad", "wgrad")), None)
    epilogue = _epilogue(words)
    parts = ["cutlass3x", m["arch"], f"conv {conv_op}" if conv_op else None, dtype, tile, layout]
    short = " ".join(p for p in parts if p) + (f" +{epilogue}" if epilogue else "")
    return {
        "kind": "gemm",
        "library": "cutlass",
        "arch": m["arch"],
        "tile": tile,
        "layout": layout,
        "dtype": dtype,
        "epilogue": epilogue,
        "fused_ops": (f"conv_{conv_op}",) if conv_op else (),
        "short": _clip(short),
    }
