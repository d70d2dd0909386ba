"""cuBLAS's kernels: nvjet, xmma, the architecture-named GEMMs, and the helpers that are not tiled GEMMs.

* nvjet (``nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT``), the kernels
  cuBLASLt generates on Hopper and later: the architecture, one type letter
  per operand, the tile, the epilogue words and the operand layouts.
* xmma (``sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_..._cublas``),
  NVIDIA's tensor-core templates, shipped by cuBLAS and, for convolutions
  (fprop, dgrad, wgrad), by cuDNN: the architecture, the operand and
  accumulator types, an ``MxNxK`` tile and the layouts.
* The architecture-named kernels of pre-Hopper cuBLAS
  (``ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn``), with
  TensorRT's ``trt_`` copies and cuDNN's convolutions in the same grammar: the
  GPU generation, the types, the tile, the layout and the epilogue.
* The helpers: the reduction that finishes a split-K GEMM, small-N and K=1
  special cases, matrix-vector products, dot products, an epilogue run as a
  kernel of its own: what the kernel does, and the C++ element type.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import (
    _DTYPE_WORDS,
    _EPILOGUE_WORDS,
    _TILE_2D,
    _base_name,
    _clip,
    _cxx_dtype,
    _epilogue,
    _gemm_tokens,
    _in_out,
)

# ---------------------------------------------------------------------------
# cuBLAS on Hopper and later (CUDA 12.8+): nvjet, kernels cuBLASLt generates.
#   nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT
#   arch _ types _ tile MxN _ blockK x stages _ cluster _ [2cta] _ raster _ beta _ options _ LAYOUT
# NVIDIA does not document this grammar. Arch, tile, epilogue words and the
# A/B layout letters are safe readings; "64x4" as K-block x stages, "2x1" as
# the thread-block cluster, v/h as raster order, coopA/coopB as cooperative
# schedules are readings from many names, and are not decoded into fields.
# ---------------------------------------------------------------------------

# nvjet packs one letter per type: A/B input, [C,] compute, output (``tst`` =
# bf16 in, fp32 compute, bf16 out; ``hss`` = fp16 in, fp32 out). The letters
# follow BLAS habit (s = single, h = half); ``t`` for bf16 and ``q`` for fp8
# are read from where they appear (bf16 and fp8 models), not from NVIDIA docs.
_NVJET_TYPE_LETTERS = {"h": "fp16", "t": "bf16", "s": "fp32", "d": "fp64", "q": "fp8", "i": "int8"}

_NVJET = re.compile(r"^nvjet_(?:(?P<arch>sm\d+)_)?(?:(?P<types>[a-z]{3,6})_)?(?P<rest>\w*)$")


def _nvjet(name: str) -> dict | None:
    m = _NVJET.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    tiles = [w for w in words if _TILE_2D.match(w)]
    # The layout is the trailing group of three capitals. The first two are
    # op(A) and op(B) in cuBLAS's column-major convention (see ``tn`` in
    # fields._gemm_tokens: nn.Linear reads T, N).
    # The third is not documented: it is usually read as the order of the
    # output D, but the same op has been seen to switch between ``TNT`` and
    # ``TNN`` as M changes, so take it as part of the kernel's identity rather
    # than a fact about your tensors.
    layout = words[-1] if re.fullmatch(r"[TN]{3}", words[-1]) else None
    types = m["types"] or ""
    dtype = _in_out(_NVJET_TYPE_LETTERS.get(types[0]), _NVJET_TYPE_LETTERS.get(types[-1])) if types else None
    epilogue_words = [w for w in words if w in _EPILOGUE_WORDS]
    # ``bz`` / ``badd`` sit in the same slot: read as beta zero (D = A·B) and
    # beta add (D = A·B + C). ``badd`` shows up where fp32 gradients are
    # accumulated in place, which fits; it is a reading, not documentation.
    if "badd" in words:
        epilogue_words.append("beta_c")
    epilogue = "_".join(epilogue_words) or None
    parts = ["nvjet", m["arch"], tiles[0] if tiles else None, layout, "splitK" if "splitK" in words else None]
    short = " ".join(p for p in parts if p)
    if epilogue:
        short += " +" + epilogue
    return {
        "kind": "gemm",
        "library": "cublas",
        "arch": m["arch"],
        "tile": tiles[0] if tiles else None,
        "layout": layout,
        "dtype": dtype,
        "epilogue": epilogue,
        "short": _clip(short),
    }


# ---------------------------------------------------------------------------
# xmma: NVIDIA's internal tensor-core templates, shipped by cuBLAS (``_cublas``
# suffix) and cuDNN (convolutions: fprop, dgrad, wgrad).
#   sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_..._cublas
#   types: A B _ C accumulator _ scale;  layouts: op(A) op(B) _ C
# ---------------------------------------------------------------------------

_XMMA = re.compile(r"^(?P<arch>sm\d+)_xmma_(?P<op>gemm|fprop|dgrad|wgrad)_(?P<rest>\w+)$")
_XMMA_TYPES = re.compile(r"bf16|tf32|f16|f32|f64|e4m3|e5m2|s8|i8|u8|s32|i32")
_XMMA_TYPE_GROUP = re.compile(r"(?:bf16|tf32|f16|f32|f64|e4m3|e5m2|s8|i8|u8|s32|i32)+")


def _xmma_dtype(words: list[str]) -> str | None:
    """The input type from the first two words made only of type names: (A, B) then (C or math type,
    accumulator); ``in->out`` where they differ."""
    groups = [_XMMA_TYPES.findall(w) for w in words if _XMMA_TYPE_GROUP.fullmatch(w)][:2]
    if not (groups and groups[0]):
        return None
    dtype_in = _DTYPE_WORDS.get(groups[0][0])
    second = groups[1] if len(groups) > 1 and groups[1] else []
    if second and second[0] == "tf32":
        # fp32 tensors multiplied on tensor cores as tf32: the precision that matters.
        return "tf32"
    return _in_out(dtype_in, _DTYPE_WORDS.get(second[0]) if second else None)


def _xmma(name: str) -> dict | None:
    m = _XMMA.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    dtype = _xmma_dtype(words)
    tile_m = re.search(r"tilesize(\d+x\d+x\d+)", m["rest"])
    tile = tile_m[1] if tile_m else None
    layout = next((w for w in words if re.fullmatch(r"[nt]{2}", w)), None)
    is_conv = m["op"] != "gemm"
    library = "cudnn" if is_conv or m["rest"].endswith("cudnn") else "cublas"
    fused = (f"conv_{m['op']}",) if is_conv else ()
    parts = [library, m["arch"], f"conv {m['op']}" if is_conv else "xmma", dtype, tile, layout]
    return {
        "kind": "gemm",  # a convolution here is an implicit GEMM on tensor cores
        "library": library,
        "arch": m["arch"],
        "tile": tile,
        "layout": None if is_conv else layout,
        "dtype": dtype,
        "epilogue": _epilogue(words),
        "fused_ops": fused,
        "short": _clip(" ".join(p for p in parts if p)),
    }


_LEGACY_ARCHS = "maxwell|pascal|volta|turing|ampere|ada|hopper|blackwell"
_LEGACY = re.compile(rf"^(?:(?P<trt>trt)_)?(?P<arch>{_LEGACY_ARCHS})_(?P<rest>\w+)$")


def _legacy_cublas(name: str) -> dict | None:
    m = _LEGACY.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    fields = _gemm_tokens(words, tensor_op=True)
    gemm_word = fields.pop("gemm_word")
    if gemm_word is None:
        return None
    is_conv = gemm_word["what"] == "cudnn" or any("cudnn" in w for w in words)
    library = "tensorrt" if m["trt"] else ("cudnn" if is_conv else "cublas")
    if is_conv:
        fields["layout"] = None  # a convolution's n/t letters are not GEMM operand layouts
    parts = [m["arch"], "conv" if is_conv else None, fields["dtype"], fields["tile"], fields["layout"]]
    short = " ".join(p for p in parts if p) + (f" +{fields['epilogue']}" if fields["epilogue"] else "")
    return {
        "kind": "gemm",
        "library": library,
        "arch": m["arch"],
        "fused_ops": ("conv",) if is_conv else (),
        "short": _clip(short),
        **fields,
    }


# ---------------------------------------------------------------------------
# cuBLAS helpers that are not tiled GEMMs: matrix-vector products, small-N and
# K=1 special cases, and the reduction that finishes a split-K GEMM.
# ---------------------------------------------------------------------------

_SPLITK = re.compile(r"\bsplitKreduce_kernel\b")
_GEMM_SN = re.compile(r"\bgemmSN_(?P<layout>[TN]{2})_kernel\b")
_GEMM_K1 = re.compile(r"\bgemmk1_kernel\b")
_GEMV = re.compile(r"\bgemv2[TN]_kernel\w*|\bgemvNSP_kernel\b|\bgemvx::kernel\b")


_WORD_RUN = re.compile(r"\w+")


def _cublas_helper(name: str) -> dict | None:
    dtype = _cxx_dtype(name)
    if _SPLITK.search(name):
        # Split-K cuts the K loop across thread blocks; each writes a partial
        # sum and this kernel adds them up. It follows a GEMM whose M×N tiles
        # were too few to fill the GPU.
        return {"kind": "reduction", "library": "cublas", "dtype": dtype,
                "fused_ops": ("splitk_reduce",), "short": "cublasLt splitK reduce"}
    m = _GEMM_SN.search(name)
    if m:
        layout = m["layout"].lower()
        return {"kind": "gemm", "library": "cublas", "dtype": dtype, "layout": layout,
                "short": f"cublas gemmSN {layout}"}
    if _GEMM_K1.search(name):
        return {"kind": "gemm", "library": "cublas", "dtype": dtype, "short": "cublas gemmk1"}
    has_cublas = "cublas" in name
    if _GEMV.search(name) or (has_cublas and re.search(r"\bgemv", name)):
        # A matrix-vector product: a GEMM with one side of width 1, memory-bound.
        return {"kind": "gemm", "library": "cublas", "dtype": dtype, "fused_ops": ("gemv",),
                "short": "cublas gemv"}
    if not has_cublas:
        return None
    if "cublasLt::epilogue" in name:
        # An epilogue run as a kernel of its own: cuBLASLt could not fuse it.
        return {"kind": "pointwise", "library": "cublas", "dtype": dtype, "fused_ops": ("epilogue",),
                "short": "cublasLt epilogue"}
    if re.search(r"\bdot_kernel\b", name):
        return {"kind": "reduction", "library": "cublas", "dtype": dtype, "fused_ops": ("dot",),
                "short": "cublas dot"}
    if any("_kernel" in w[w.find("reduce") + 6 :] for w in _WORD_RUN.findall(name) if "reduce" in w):
        return {"kind": "reduction", "library": "cublas", "dtype": dtype, "short": "cublas reduce"}
    if "gemm" in name.lower():
        return {"kind": "gemm", "library": "cublas", "dtype": dtype, "short": "cublas gemm"}
    return {"kind": "other", "library": "cublas", "dtype": dtype, "short": _clip("cublas " + _base_name(name))}
