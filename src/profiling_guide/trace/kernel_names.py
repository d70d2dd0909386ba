"""Read a GPU kernel's name: what it computes, who wrote it, how it is tiled.

A kernel name in a ``torch.profiler`` trace is a small, dense report. cuBLAS
writes the architecture, the data type, the tile shape and the operand layout
into it (``ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn``);
Inductor writes the ATen ops it fused (``triton_poi_fused__unsafe_view_gelu_mul_0``);
ATen writes the C++ functor that does the work
(``void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)...>``).
:func:`decode` turns such a name into a :class:`KernelName` with one field per
fact, so tables and timelines can say "cuBLAS bf16 GEMM, 128x128 tiles, ``tn``"
instead of printing 200 characters of C++.

Nothing here is a lookup table of whole names. Each family (nvjet, xmma,
Ampere-era cuBLAS, CUTLASS 2 and 3, cuBLAS helpers, ATen, Inductor, plain
Triton, flash attention, cuDNN, NCCL, the runtime's memcpy/memset) is
recognised by a regular expression and then read token by token, so a tile
shape or layout never seen before still decodes. A name no family claims comes
back as kind ``"other"``, library ``"unknown"``: decoding never raises. It
reads at most :data:`MAX_NAME` characters, and every pattern is read in one
pass (names are split into words rather than searched with nested or adjacent
open-ended repeats), so any name, however long or strange, decodes in
milliseconds.

Some fields are readings, not documented facts; where that is so, the comment
next to the code says how sure the reading is.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["FIELDS", "KernelName", "INDUCTOR_OP_VOCABULARY", "decode", "split_inductor_ops"]

#: The decoded fields, in the order tables and ``profiling-guide decode`` show them.
FIELDS: tuple[str, ...] = (
    "kind",
    "library",
    "arch",
    "dtype",
    "tile",
    "layout",
    "epilogue",
    "fused_ops",
    "triton_kind",
    "note",
    "short",
)

#: Longest ``short`` label; longer ones are cut with an ellipsis.
SHORT_MAX = 40

#: Longest part of a name that is decoded. Real names stay under ~2,000
#: characters (long C++ templates); a longer one is decoded from its start and
#: ``note`` says so, which keeps decoding fast on any input.
MAX_NAME = 4096


@dataclass(frozen=True)
class KernelName:
    """The facts one kernel name states.

    Attributes
    ----------
    name : str
        The raw name, as it appears in the trace.
    kind : str
        What the kernel does: ``"gemm"``, ``"pointwise"``, ``"reduction"``,
        ``"memset"``, ``"memcpy"`` or ``"other"`` (attention, communication,
        anything not recognised).
    library : str
        Who wrote it: ``"cublas"``, ``"cutlass"``, ``"cudnn"``, ``"triton"``,
        ``"aten"``, ``"flash"``, ``"nccl"``, ``"tensorrt"``, ``"tensile"``,
        ``"cuda"`` (runtime copies and fills) or ``"unknown"``.
    arch : str or None
        The GPU generation the kernel was built for: ``"sm90"``, ``"sm80"`` ...
        where the name gives a compute capability, else the family word the
        name uses (``"ampere"``, ``"volta"``).
    tile : str or None
        The thread-block tile, ``MxN`` or ``MxNxK`` as the name writes it.
    layout : str or None
        Operand layouts in cuBLAS's column-major convention: ``"tn"`` (op(A),
        op(B)), or three letters where the name has three (``"TNT"``, ``"tnn"``).
    dtype : str or None
        Input element type, normalised (``"bf16"``, ``"fp16"``, ``"fp32"``,
        ``"tf32"``, ``"fp8"`` ...); written ``"in->out"`` when the name shows a
        different output type.
    epilogue : str or None
        Work done on the accumulator before it is stored (``"bias"``,
        ``"relu"``, ``"bias_gelu"``), where the name shows it.
    fused_ops : tuple of str
        Inductor: the ATen ops fused into the kernel, spelled as ATen spells
        them (``("_unsafe_view", "gelu", "mul")``, leading underscore kept so
        they match the eager trace's ``aten::_unsafe_view`` rows). ATen: the
        functor (``("gelu",)``). Plain Triton: the activation and norm words in
        the name. Elsewhere a word for what the kernel is when ``kind`` cannot
        say it: ``("attention",)``, ``("conv_fprop",)``, ``("gemv",)``,
        ``("splitk_reduce",)``, the NCCL collective.
    triton_kind : str or None
        Inductor's kernel category prefix: ``"poi"``, ``"red"``, ``"per"``,
        ``"tem"``, ``"for"``, ``"spl"``, ``"unk"``.
    note : str or None
        Said when the name was not decoded whole: only its first
        :data:`MAX_NAME` characters are read.
    short : str
        A compact label for plots and tables, at most ``SHORT_MAX`` characters.
    """

    name: str
    kind: str = "other"
    library: str = "unknown"
    arch: str | None = None
    tile: str | None = None
    layout: str | None = None
    dtype: str | None = None
    epilogue: str | None = None
    fused_ops: tuple[str, ...] = ()
    triton_kind: str | None = None
    note: str | None = None
    short: str = ""

    def to_dict(self) -> dict:
        """The name and every decoded field, ready for ``json.dumps``.

        Returns
        -------
        dict
            ``{"name": ..., "kind": ..., ...}`` with ``fused_ops`` as a list.
        """
        out = {"name": self.name}
        for field in FIELDS:
            value = getattr(self, field)
            out[field] = list(value) if isinstance(value, tuple) else value
        return out


def _clip(text: str, limit: int = SHORT_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------
# Data types. Each family spells them its own way; the guide uses one spelling.
# ---------------------------------------------------------------------------

_DTYPE_WORDS = {
    "bf16": "bf16",
    "fp16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "fp32": "fp32",
    "f32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "fp64": "fp64",
    "f64": "fp64",
    "fp8": "fp8",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "int8": "int8",
    "i8": "int8",
    "s8": "int8",
    "u8": "uint8",
    "s32": "int32",
    "i32": "int32",
}

# nvjet packs one letter per type: A/B input, [C,] compute, output (``tst`` =
# bf16 in, fp32 compute, bf16 out; ``hss`` = fp16 in, fp32 out). The letters
# follow BLAS habit (s = single, h = half); ``t`` for bf16 and ``q`` for fp8
# are read from where they appear (bf16 and fp8 models), not from NVIDIA docs.
_NVJET_TYPE_LETTERS = {"h": "fp16", "t": "bf16", "s": "fp32", "d": "fp64", "q": "fp8", "i": "int8"}

# The first C++ type named in a template argument list is, in ATen and most
# libraries, the tensor's element type (later ones are accumulator types).
_CXX_DTYPE = re.compile(
    r"(?P<bf16>c10::BFloat16|__nv_bfloat16|\bbfloat16_t\b)"
    r"|(?P<fp16>c10::Half\b|\b__half\b|\bhalf_t\b)"
    r"|(?P<fp8_e4m3>c10::Float8_e4m3\w*|__nv_fp8_e4m3)"
    r"|(?P<fp8_e5m2>c10::Float8_e5m2\w*|__nv_fp8_e5m2)"
    r"|(?P<fp32>\bfloat\b)"
    r"|(?P<fp64>\bdouble\b)"
)


def _cxx_dtype(text: str) -> str | None:
    m = _CXX_DTYPE.search(text)
    return m.lastgroup if m else None


def _in_out(dtype_in: str | None, dtype_out: str | None) -> str | None:
    """One dtype when input and output agree, ``in->out`` when they do not."""
    if dtype_in is None:
        return dtype_out
    if dtype_out is None or dtype_out == dtype_in:
        return dtype_in
    return f"{dtype_in}->{dtype_out}"


# ---------------------------------------------------------------------------
# Epilogues. The words cuBLAS, CUTLASS and Inductor put in a name for work done
# on the accumulator between the last multiply-add and the store.
# ---------------------------------------------------------------------------

_EPILOGUE_WORDS = (
    "bias", "relu", "gelu", "silu", "swish", "sigmoid", "tanh", "dgelu", "drelu", "bgrada", "bgradb", "aux",
)

_TILE_2D = re.compile(r"^\d+x\d+$")
_TILE_3D = re.compile(r"^\d+x\d+x\d+$")


def _epilogue(words: list[str]) -> str | None:
    found = [w for w in words if w in _EPILOGUE_WORDS]
    return "_".join(found) if found else None


# ---------------------------------------------------------------------------
# Memory operations: not kernels but copy-engine / driver work on a GPU stream.
# ---------------------------------------------------------------------------

_MEMCPY = re.compile(
    r"^\[?(?:CUDA\s+)?memcpy(?:\s+(?P<dir>[\w-]+)|(?P<xla>[HDP]2[HDP]))?(?![\w])"
    r"(?:\s*\((?P<src>\w+)\s*->\s*(?P<dst>\w+)\))?",
    re.IGNORECASE,
)
_MEMSET = re.compile(r"^\[?(?:CUDA\s+)?memset(?![\w])", re.IGNORECASE)


def _memory_op(name: str) -> dict | None:
    if _MEMSET.match(name):
        return {"kind": "memset", "library": "cuda", "short": "memset"}
    m = _MEMCPY.match(name)
    if not m:
        return None
    short = f"memcpy {m['dir'] or m['xla'] or ''}".strip()
    if m["src"]:
        # Pageable host memory forces a staged, synchronous copy; pinned does not.
        short += f" ({m['src'].lower()}→{m['dst'].lower()})"
    return {"kind": "memcpy", "library": "cuda", "short": _clip(short)}


# ---------------------------------------------------------------------------
# cuBLAS on Hopper and later (CUDA 12.8+): nvjet, kernels cuBLASLt generates.
#   nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT
#   arch _ types _ tile MxN _ blockK x stages _ cluster _ [2cta] _ raster _ beta _ options _ LAYOUT
# NVIDIA does not document this grammar. Arch, tile, epilogue words and the
# A/B layout letters are safe readings; "64x4" as K-block x stages, "2x1" as
# the thread-block cluster, v/h as raster order, coopA/coopB as cooperative
# schedules are readings from many names, and are not decoded into fields.
# ---------------------------------------------------------------------------

_NVJET = re.compile(r"^nvjet_(?:(?P<arch>sm\d+)_)?(?:(?P<types>[a-z]{3,6})_)?(?P<rest>\w*)$")


def _nvjet(name: str) -> dict | None:
    m = _NVJET.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    tiles = [w for w in words if _TILE_2D.match(w)]
    # The layout is the trailing group of three capitals. The first two are
    # op(A) and op(B) in cuBLAS's column-major convention (see ``tn`` in
    # _gemm_tokens: nn.Linear reads T, N).
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


def _xmma(name: str) -> dict | None:
    m = _XMMA.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    # The first two words made only of type names: (A, B) then (C or math type, accumulator).
    groups = [_XMMA_TYPES.findall(w) for w in words if _XMMA_TYPE_GROUP.fullmatch(w)][:2]
    dtype = None
    if groups and groups[0]:
        dtype_in = _DTYPE_WORDS.get(groups[0][0])
        second = groups[1] if len(groups) > 1 and groups[1] else []
        if second and second[0] == "tf32":
            # fp32 tensors multiplied on tensor cores as tf32: the precision that matters.
            dtype = "tf32"
        else:
            dtype = _in_out(dtype_in, _DTYPE_WORDS.get(second[0]) if second else None)
    tile_m = re.search(r"tilesize(\d+x\d+x\d+)", m["rest"])
    layout = next((w for w in words if re.fullmatch(r"[nt]{2}", w)), None)
    is_conv = m["op"] != "gemm"
    library = "cudnn" if is_conv or m["rest"].endswith("cudnn") else "cublas"
    fused = (f"conv_{m['op']}",) if is_conv else ()
    parts = [library, m["arch"], f"conv {m['op']}" if is_conv else "xmma", dtype, tile_m[1] if tile_m else None, layout]
    return {
        "kind": "gemm",  # a convolution here is an implicit GEMM on tensor cores
        "library": library,
        "arch": m["arch"],
        "tile": tile_m[1] if tile_m else None,
        "layout": None if is_conv else layout,
        "dtype": dtype,
        "epilogue": _epilogue(words),
        "fused_ops": fused,
        "short": _clip(" ".join(p for p in parts if p)),
    }


# ---------------------------------------------------------------------------
# The token grammar shared by cuBLAS's pre-Hopper kernels and CUTLASS 2:
#   [in dtype] <acc letter><mma shape>gemm [epilogue] [out dtype] MxN [KxStages] ... <layout>
#   ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn
#   cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8
# ``s16816gemm``: fp32 (s) accumulation on a 16x8x16 tensor-core instruction;
# ``sgemm`` with no shape is the fp32 CUDA-core (SIMT) kernel.
# ---------------------------------------------------------------------------

_GEMM_WORD = re.compile(r"^(?P<acc>[a-z]?)(?P<mma>\d*)(?P<what>gemm|fprop|dgrad|wgrad|cudnn)")
_ACC_LETTER = {"s": "fp32", "h": "fp16", "d": "fp64", "i": "int8", "c": "complex64", "z": "complex128"}


def _gemm_tokens(words: list[str], tensor_op: bool) -> dict:
    dtypes = [_DTYPE_WORDS[w] for w in words if w in _DTYPE_WORDS]
    gemm_word = next((_GEMM_WORD.match(w) for w in words if _GEMM_WORD.match(w)), None)
    if dtypes:
        dtype = _in_out(dtypes[0], dtypes[-1])
    elif gemm_word and gemm_word["acc"]:
        dtype = _ACC_LETTER.get(gemm_word["acc"], gemm_word["acc"])
        if dtype == "fp32" and tensor_op and gemm_word["mma"]:
            dtype = "tf32"  # fp32 operands on a tensor-core instruction run as tf32
    else:
        dtype = None
    tile = next((w for w in words if _TILE_2D.match(w)), None)
    # ``tn``: cuBLAS is column-major, so it sees a row-major PyTorch matrix as
    # its transpose. nn.Linear computes y = x·Wᵀ; PyTorch asks cuBLAS for
    # yᵀ = W·xᵀ with A = the weight, read transposed (t), and B = the
    # activations, read as stored (n). That is why every Linear reads ``tn``.
    layout = next((w for w in reversed(words) if re.fullmatch(r"[nt]{2}", w)), None)
    return {"dtype": dtype, "tile": tile, "layout": layout, "epilogue": _epilogue(words), "gemm_word": gemm_word}


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


def _cutlass3(name: str) -> dict | None:
    m = _CUTLASS3.search(name)
    if not m:
        return None
    words = m["rest"].split("_")
    dtypes = [_DTYPE_WORDS.get(w) for w in words if w in _DTYPE_WORDS or w == "void"]
    tile = next((w for w in words if _TILE_3D.match(w)), None)
    layout = next((w for w in words if re.fullmatch(r"[nt]{3}", w)), None)
    dtype = _in_out(dtypes[0], dtypes[-1]) if dtypes else None
    if any(w.startswith("tf32") or w.endswith("tf32gemm") for w in words):
        dtype = "tf32"  # fp32 tensors fed to the tensor cores as tf32
    is_conv = any(w in ("fprop", "dgrad", "wgrad") for w in words)
    conv_op = next((w for w in words if w in ("fprop", "dgrad", "wgrad")), None)
    epilogue = _epilogue(words)
    parts = ["cutlass3x", m["arch"], f"conv {conv_op}" if is_conv else None, dtype, tile, layout]
    short = " ".join(p for p in parts if p) + (f" +{epilogue}" if epilogue else "")
    return {
        "kind": "gemm",
        "library": "cutlass",
        "arch": m["arch"],
        "tile": tile,
        "layout": layout,
        "dtype": dtype,
        "epilogue": epilogue,
        "fused_ops": (f"conv_{conv_op}",) if is_conv else (),
        "short": _clip(short),
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


# ---------------------------------------------------------------------------
# cuDNN's own C++ kernels (``cudnn::...``) and its layout transposes.
# ---------------------------------------------------------------------------

_CUDNN = re.compile(r"\bcudnn::|\bnchwToNhwcKernel\b|\bnhwcToNchwKernel\b")


def _cudnn(name: str) -> dict | None:
    if not _CUDNN.search(name):
        return None
    base = _base_name(name)
    low = name.lower()
    if "nchwtonhwc" in low or "nhwctonchw" in low:
        kind, op = "pointwise", "transpose"
    elif "conv" in low or "gemm" in low or "winograd" in low:
        kind, op = "gemm", "conv"
    elif "pool" in low or "bn_" in low or "batch_norm" in low or "softmax" in low or "reduce" in low:
        kind, op = "reduction", None
    else:
        kind, op = "other", None
    return {"kind": kind, "library": "cudnn", "dtype": _cxx_dtype(name), "fused_ops": (op,) if op else (),
            "short": _clip(f"cudnn {op or base}")}


# ---------------------------------------------------------------------------
# NCCL collectives: ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)
# ---------------------------------------------------------------------------

_NCCL = re.compile(r"^(?:void\s+)?nccl(?:Dev)?Kernel_(?P<rest>\w+)")


def _nccl(name: str) -> dict | None:
    m = _NCCL.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    collective = _snake(words[0]) if words else "collective"
    dtype = next((_DTYPE_WORDS.get(w) for w in words if w in _DTYPE_WORDS), None)
    return {"kind": "other", "library": "nccl", "dtype": dtype, "fused_ops": (collective,),
            "short": _clip(" ".join(p for p in ("nccl", collective, dtype) if p))}


# ---------------------------------------------------------------------------
# ROCm (hipBLASLt / Tensile): Cijk_Alik_Bljk_BBS_BH_..._MT128x128x64_...
# ---------------------------------------------------------------------------

# Cijk_<A layout>_<B layout>_<types>_..._MT<tile>_...: the types word (``BBS``: bf16
# in, bf16 out, fp32 compute), then, anywhere after it, the macro tile.
_TENSILE = re.compile(r"Cijk_(?P<body>\w+)")
_TENSILE_TYPE_WORD = re.compile(r"[BHSDI]{2,3}")
_TENSILE_TILE = re.compile(r"MT(?P<tile>\d+x\d+x\d+)")
_TENSILE_TYPES = {"B": "bf16", "H": "fp16", "S": "fp32", "D": "fp64", "I": "int8"}


def _tensile(name: str) -> dict | None:
    m = _TENSILE.match(name)
    if not m:
        return None
    end = None
    offset = m.start("body")
    for i, word in enumerate(m["body"].split("_")):
        if i and _TENSILE_TYPE_WORD.fullmatch(word):
            types, end = word, offset + len(word)
            break
        offset += len(word) + 1
    tile = _TENSILE_TILE.search(name, end) if end is not None else None
    if tile is None:
        return None
    dtype = _TENSILE_TYPES.get(types[0])
    return {"kind": "gemm", "library": "tensile", "dtype": dtype, "tile": tile["tile"],
            "short": _clip(f"tensile {dtype} {tile['tile']}")}


# ---------------------------------------------------------------------------
# Inductor (torch.compile): triton_<category>_fused_<sorted aten ops>_<n>.
# The category is the first three letters of the Triton heuristic Inductor
# used; the ops are the ATen ops the kernel was lowered from, sorted by name
# and joined with "_", then a counter that keeps names unique.
# ---------------------------------------------------------------------------

#: ATen/prims op names Inductor writes into kernel names. Used to split the
#: joined op list at the right underscores (``native_layer_norm`` is one op,
#: ``add_mean`` two). Leading underscores are aten's own spelling and are kept
#: (``_unsafe_view``), so a fused op can be matched against the eager trace's
#: ``aten::_unsafe_view`` row.
INDUCTOR_OP_VOCABULARY: frozenset[str] = frozenset(
    """
    _adaptive_avg_pool2d _adaptive_avg_pool2d_backward _euclidean_dist _fused_rms_norm _int_mm
    _log_softmax _log_softmax_backward_data _scaled_dot_product_efficient_attention
    _scaled_dot_product_flash_attention _scaled_mm _softmax _softmax_backward_data _to_copy
    _unsafe_index _unsafe_index_put _unsafe_view
    abs acos acosh add addcdiv addcmul addmm alias all amax amin any arange argmax argmin as_strided
    asin asinh atan atan2 atanh avg_pool2d avg_pool2d_backward avg_pool3d baddbmm bernoulli
    bitwise_and bitwise_not bitwise_or bitwise_xor bmm bucketize cat ceil clamp clamp_max clamp_min
    clone constant_pad_nd convert_element_type convolution convolution_backward copy cos cosh
    cumprod cumsum detach diagonal div elu elu_backward embedding embedding_dense_backward empty eq
    erf erfc erfinv exp exp2 expand expm1 fill flip floor floor_divide fmod full full_like gather ge
    gelu gelu_backward glu gt hardsigmoid hardswish hardtanh index index_add index_copy index_put
    index_select iota isinf isnan le leaky_relu lerp lift_fresh lift_fresh_copy linear log log1p log2
    log_sigmoid_forward logical_and logical_not logical_or logsumexp lt masked_fill max
    max_pool2d_with_indices max_pool2d_with_indices_backward maximum mean min minimum mm mul mv
    native_batch_norm native_batch_norm_backward native_dropout native_dropout_backward
    native_group_norm native_group_norm_backward native_layer_norm native_layer_norm_backward ne neg
    nll_loss2d_forward nll_loss_backward nll_loss_forward norm ones permute pow prod reciprocal
    reflection_pad2d relu remainder repeat replication_pad2d rms_norm roll round rsqrt rsub
    scalar_tensor scatter scatter_add scatter_reduce select select_backward select_scatter sigmoid
    sigmoid_backward sign silu silu_backward sin sinh slice slice_backward slice_scatter softplus sort
    split split_with_sizes sqrt squeeze stack sub sum t tanh tanh_backward threshold_backward topk
    transpose tril triu unbind unsqueeze upsample_bilinear2d upsample_nearest2d var var_mean view
    view_as_real where zeros zeros_like
    flex_attention flex_attention_backward
    """.split()
)

# Ops that move no data or only re-read it: left out of ``short`` labels.
_VIEW_OPS = frozenset(
    "_unsafe_view view t transpose permute expand squeeze unsqueeze alias as_strided reshape slice select "
    "split split_with_sizes unbind detach clone lift_fresh lift_fresh_copy".split()
)
_CAST_OPS = frozenset({"_to_copy", "convert_element_type"})
_GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_int_mm", "mv", "linear", "convolution"})
_REDUCTION_OPS = frozenset(
    "sum mean amax amin max min argmax argmin var var_mean norm prod logsumexp _softmax _log_softmax "
    "native_layer_norm native_group_norm native_batch_norm rms_norm _fused_rms_norm cumsum cumprod sort topk "
    "any all".split()
)
_ACTIVATION_OPS = ("relu", "gelu", "silu", "sigmoid", "tanh", "hardswish", "leaky_relu", "elu", "softplus")

# The longest op name, in "_"-separated words (``_scaled_dot_product_efficient_attention``: 6).
_MAX_OP_WORDS = max(len(op.split("_")) for op in INDUCTOR_OP_VOCABULARY)

_INDUCTOR = re.compile(r"^triton_(?P<tk>poi|red|per|tem|for|spl|unk)_(?P<body>\w*?)(?:_\d+)?(?:\.kd)?$")
_TRITON_KIND = {"poi": "pointwise", "red": "reduction", "per": "reduction", "for": "pointwise", "spl": "reduction"}


@functools.lru_cache(maxsize=4096)
def split_inductor_ops(joined: str) -> tuple[str, ...]:
    """Split Inductor's joined op list into ATen op names.

    Inductor joins op names with ``_``, and op names contain ``_`` too, so the
    split is made with a vocabulary of ATen op names
    (:data:`INDUCTOR_OP_VOCABULARY`). Of all the ways to cut the words into
    ops, the one chosen leaves the fewest words unexplained, then keeps the
    ops in sorted order (Inductor sorts them), then uses the fewest, longest
    ops. A greedy longest match is not enough: ``clamp_max_pool2d_with_indices``
    is ``clamp`` + ``max_pool2d_with_indices``, not ``clamp_max`` + leftovers.
    Words no known op explains are kept together as one op name, so a custom
    or newer op still comes out in one piece.

    Parameters
    ----------
    joined : str
        The part of the kernel name between ``fused_`` and the counter, e.g.
        ``"_unsafe_view_gelu_mul"``.

    Returns
    -------
    tuple of str
        The op names in the order they appear, e.g.
        ``("_unsafe_view", "gelu", "mul")``.

    Notes
    -----
    Some names cannot be split with certainty: ``index_select`` is one op, but
    also what ``index`` and ``select`` fused together would be called. The
    single op wins.
    """
    words = joined.split("_")  # a leading "_" of an op name shows up as an empty word
    n = len(words)
    # best[i]: (cost, step, first op) for reading words[i:]; cost is
    # (unexplained words, ops out of sorted order, ops). A step is either a
    # known op spanning words[i:j] or one word left unexplained.
    best: list[tuple[tuple[int, int, int], tuple[str, int], str | None]] = [((0, 0, 0), ("end", n), None)] * (n + 1)
    for i in range(n - 1, -1, -1):
        options = []
        for j in range(min(n, i + _MAX_OP_WORDS), i, -1):  # longest first, so ties keep the longer op
            op = "_".join(words[i:j])
            if op in INDUCTOR_OP_VOCABULARY:
                (unexplained, unsorted, count), _, following = best[j]
                unsorted += following is not None and op > following
                options.append(((unexplained, unsorted, count + 1), ("op", j), op))
        (unexplained, unsorted, count), _, following = best[i + 1]
        # An empty word is a stray separator (e.g. "add_" or "__"), not an unknown op.
        options.append(((unexplained + bool(words[i]), unsorted, count + bool(words[i])), ("word", i + 1), following))
        best[i] = min(options, key=lambda option: option[0])

    ops: list[str] = []
    unknown: list[str] = []
    i = 0
    while i < n:
        _, (step, j), _ = best[i]
        if step == "op":
            if unknown:
                ops.append("_".join(unknown))
                unknown = []
            ops.append("_".join(words[i:j]))
        elif words[i]:
            unknown.append(words[i])
        i = j
    if unknown:
        ops.append("_".join(unknown))
    return tuple(ops)


def _inductor(name: str) -> dict | None:
    m = _INDUCTOR.match(name)
    if not m:
        return None
    body = m["body"]
    if body.startswith("fused"):
        ops = split_inductor_ops(body[len("fused") :].removeprefix("_"))
    elif body == "":
        ops = ()
    else:
        return None  # e.g. a user kernel named triton_per_token_quant
    tk = m["tk"]
    op_set = set(ops)
    epilogue = None
    if tk == "tem":
        # A template kernel: Inductor's own Triton GEMM (or attention), with
        # the ops after the matmul fused into its epilogue.
        if op_set & _GEMM_OPS:
            kind = "gemm"
            words = (["bias"] if op_set & {"addmm", "baddbmm"} else []) + [a for a in _ACTIVATION_OPS if a in op_set]
            epilogue = "_".join(words) or None
        else:
            kind = "other"
    elif tk == "unk":
        kind = "gemm" if op_set & _GEMM_OPS else ("reduction" if op_set & _REDUCTION_OPS else "pointwise")
    else:
        kind = _TRITON_KIND[tk]
    label_ops = [op for op in ops if op not in _VIEW_OPS and op not in _CAST_OPS] or list(ops)
    short = f"triton {tk}" + (": " + "·".join(label_ops) if label_ops else "")
    return {"kind": kind, "library": "triton", "epilogue": epilogue, "fused_ops": ops, "triton_kind": tk,
            "short": _clip(short)}


# ---------------------------------------------------------------------------
# ATen's own CUDA kernels. The outer template says the shape of the work
# (elementwise, reduce, softmax ...); a functor or lambda inside it says which
# op. torch.profiler shows the full demangled signature; nsys-style names
# (``(int)4``, ``<unnamed>``) read the same way.
# ---------------------------------------------------------------------------

_ATEN = re.compile(r"\bat::native::|\bat::cuda::|\bat_cuda_detail::|\bkernelPointwiseApply\d|\bcunn_"
                   r"|^void (?:\(anonymous namespace\)|<unnamed>)::softmax_warp_")

# base kernel name -> (kind, op); op None means: read the functor.
_ATEN_KERNELS: dict[str, tuple[str, str | None]] = {
    "vectorized_elementwise_kernel": ("pointwise", None),
    "unrolled_elementwise_kernel": ("pointwise", None),
    "elementwise_kernel": ("pointwise", None),
    "elementwise_kernel_with_index": ("pointwise", None),
    "multi_tensor_apply_kernel": ("pointwise", None),
    "kernelPointwiseApply1": ("pointwise", None),
    "kernelPointwiseApply2": ("pointwise", None),
    "kernelPointwiseApply3": ("pointwise", None),
    "reduce_kernel": ("reduction", None),
    "cunn_SoftMaxForward": ("reduction", "softmax"),
    "cunn_SoftMaxForwardSmem": ("reduction", "softmax"),
    "cunn_SpatialSoftMaxForward": ("reduction", "softmax"),
    "cunn_SoftMaxBackward": ("reduction", "softmax_backward"),
    "softmax_warp_forward": ("reduction", "softmax"),
    "softmax_warp_backward": ("reduction", "softmax_backward"),
    "vectorized_layer_norm_kernel": ("reduction", "layer_norm"),
    "RowwiseMomentsCUDAKernel": ("reduction", "norm_stats"),
    "layer_norm_grad_input_kernel": ("reduction", "layer_norm_backward"),
    "batch_norm_collect_statistics_kernel": ("reduction", "batch_norm"),
    "nll_loss_forward_reduce_cuda_kernel_2d": ("reduction", "nll_loss"),
    "max_pool_forward_nchw": ("reduction", "max_pool"),
    "adaptive_average_pool": ("reduction", "adaptive_avg_pool"),
    "CatArrayBatchedCopy": ("pointwise", "cat"),
    "index_elementwise_kernel": ("pointwise", "index"),
    "indexSelectLargeIndex": ("pointwise", "index_select"),
    "indexSelectSmallIndex": ("pointwise", "index_select"),
    "_scatter_gather_elementwise_kernel": ("pointwise", "scatter_gather"),
    "fused_dropout_kernel_vec": ("pointwise", "dropout"),
    "fused_dropout_kernel": ("pointwise", "dropout"),
    "im2col_kernel": ("pointwise", "im2col"),
    "vol2col_kernel": ("pointwise", "vol2col"),
}

# Where the op hides inside an elementwise or reduce kernel's template arguments.
_ATEN_OP = re.compile(
    r"CUDAFunctor_(?P<cudafunctor>[a-z]\w*?)(?=<|\b)"  # CUDAFunctor_add<float>
    r"|(?<![A-Za-z0-9])(?P<impl>[A-Za-z0-9]+)CUDAKernelImpl\b"  # GeluCUDAKernelImpl(...)
    r"|(?<![A-Za-z0-9_])(?P<lambda>[a-z][a-z0-9_]*?)_kernel(?:_cuda|_impl)?(?=[<(])"  # direct_copy_kernel_cuda(...)
    r"|(?<![A-Za-z0-9_])(?P<copy>copy_device_to_device)\b"
    r"|\blaunch_(?P<launch>[a-z]+)_(?:scalar|kernel)\b"  # launch_clamp_scalar
    r"|std::(?P<std>plus|minus|multiplies|divides)\b"
    r"|(?<![A-Za-z0-9])(?P<functor>[A-Za-z0-9]+?)(?:Functor|_functor|Ops)\b"  # MulFunctor, sum_functor, MeanOps
)
# Names the patterns above also catch that only wrap the real op.
_ATEN_WRAPPERS = frozenset(
    {"gpu", "gpu_index", "elementwise", "vectorized_elementwise", "unrolled_elementwise", "reduce",
     "index_elementwise", "a_unary", "b_unary", "binary", "unary", "binary_op_list_alpha", "binary_op_list",
     "unary_op_list", "pointwise_op_list", "binary_op_scalar", "ternary_op_list"}
)
_ATEN_OP_ALIASES = {
    "direct_copy": "copy", "bfloat16_copy": "copy", "float16_copy": "copy", "copy_device_to_device": "copy",
    "pow_tensor_scalar": "pow", "pow_tensor_tensor": "pow", "compare_eq": "eq", "compare_ne": "ne",
    "compare_gt": "gt", "compare_ge": "ge", "compare_lt": "lt", "compare_le": "le", "mul_scalar": "mul",
    "div_true": "div", "div_floor": "floor_divide", "arg_max": "argmax", "arg_min": "argmin",
    "welford": "var_mean", "and": "all", "or": "any", "plus": "add", "minus": "sub", "multiplies": "mul",
    "divides": "div", "max_values": "max", "min_values": "min", "gelu_backward": "gelu_backward",
}


def _snake(word: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", word).lower()


def _strip_anonymous(name: str) -> str:
    return name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")


def _base_name(name: str) -> str:
    """``void at::native::reduce_kernel<512, 1, ...>(...)`` -> ``reduce_kernel``."""
    text = _strip_anonymous(name).removeprefix("void ").strip()
    head = re.split(r"[<(\s]", text, maxsplit=1)[0]
    return head.rsplit("::", 1)[-1] or text


def _aten_op(name: str) -> str | None:
    base = _base_name(name)
    start = name.find(base)
    args = name[start + len(base):] if start >= 0 else name
    for m in _ATEN_OP.finditer(args):
        group = m.lastgroup
        raw = m[group]
        op = _snake(raw) if group in ("impl", "functor") else raw
        if op in _ATEN_WRAPPERS:
            continue
        return _ATEN_OP_ALIASES.get(op, op)
    return None


def _aten(name: str) -> dict | None:
    if not _ATEN.search(name):
        return None
    base = _base_name(name)
    kind, op = _ATEN_KERNELS.get(base, (None, None))
    if kind is None:
        low = base.lower()
        if "elementwise" in low or "pointwise" in low or "copy" in low:
            kind = "pointwise"
        elif any(w in low for w in ("reduce", "norm", "softmax", "sum", "mean")):
            kind = "reduction"
        else:
            kind = "other"
    if op is None and base in _ATEN_KERNELS:
        op = _aten_op(name)
    if op == "softmax" and "LogSoftMax" in name:
        op = "log_softmax"
    dtype = _cxx_dtype(name)
    copy_to = re.search(r"\b(bfloat16|float16)_copy_kernel_cuda", name)
    if copy_to:
        dtype = "bf16" if copy_to[1] == "bfloat16" else "fp16"  # the type being cast to
    return {"kind": kind, "library": "aten", "dtype": dtype, "fused_ops": (op,) if op else (),
            "short": _clip(f"aten {op or base}")}


# ---------------------------------------------------------------------------
# A bare identifier: most likely a Triton kernel launched from Python (Liger,
# a tutorial's matmul_kernel, our own fused MLP). torch.profiler shows C++
# kernels with their full signature ("void ns::f<...>(...)") and library
# kernels with a library prefix, both handled above; a name that is only an
# identifier is what @triton.jit functions look like. This is a heuristic,
# and so is the kind, guessed from the words in the name. An identifier with
# no kernel word in it (``main``, ``x``, a mangled ``_Z...`` C++ name) is no
# evidence of Triton and stays unknown.
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


# ---------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------

# Tried in order; the first family that claims a name decodes it. Specific
# prefixes come first, ATen before the bare-identifier guess, and the guess last.
_FAMILIES = (
    _memory_op,
    _nvjet,
    _xmma,
    _attention,
    _cutlass3,
    _cutlass2,
    _legacy_cublas,
    _cublas_helper,
    _cudnn,
    _nccl,
    _tensile,
    _inductor,
    _aten,
    _plain_triton,
)


@functools.lru_cache(maxsize=8192)
def decode(name: str) -> KernelName:
    """Decode a GPU kernel name from a trace into its fields.

    Parameters
    ----------
    name : str
        The device event's name as the Chrome trace has it, e.g.
        ``"nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT"`` or
        ``"triton_poi_fused__unsafe_view_gelu_mul_0"``.

    Returns
    -------
    KernelName
        The decoded fields. A name no family recognises decodes to kind
        ``"other"``, library ``"unknown"`` and a truncated name as ``short``;
        this function does not raise on any input.

    Examples
    --------
    >>> k = decode("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8")
    >>> k.kind, k.library, k.arch, k.dtype, k.tile, k.layout
    ('gemm', 'cutlass', 'sm80', 'bf16', '32x32', 'tn')
    >>> decode("triton_poi_fused__unsafe_view_gelu_mul_0").fused_ops
    ('_unsafe_view', 'gelu', 'mul')
    """
    if not isinstance(name, str):
        name = "" if name is None else str(name)
    text = name.strip()
    note = None
    if len(text) > MAX_NAME:
        note = f"decoded the first {MAX_NAME:,} of {len(text):,} characters"
        text = text[:MAX_NAME]
    for family in _FAMILIES:
        try:
            fields = family(text)
        except (IndexError, KeyError, TypeError, ValueError):
            # A family that half-recognises a malformed name must not take the
            # whole decode down with it; let the next family (or the fallback) try.
            fields = None
        if fields is not None:
            fields.setdefault("short", _clip(text))
            return KernelName(name=name, note=note, **fields)
    # Unknown: label it with the function's own name when it is a C++ signature.
    is_cxx = any(mark in text for mark in ("(", "<", "::"))
    return KernelName(name=name, note=note, short=_clip(_base_name(text) if is_cxx else text))
