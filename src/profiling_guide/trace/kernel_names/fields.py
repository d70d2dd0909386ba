"""What every family's decoder shares: the record, its limits, and the words libraries share.

This module reads no library's names on its own. It holds :class:`KernelName`
(one field per fact a name states) and :data:`FIELDS`, the limits on what is
read and shown (:data:`SHORT_MAX`, :data:`MAX_NAME`), and the readers of the
words several libraries put in their names: data types (``bf16``, ``f32``, the
C++ element types of a template argument list), epilogue words (``bias``,
``relu``), tile shapes (``128x128``, ``128x128x64``), the token grammar that
pre-Hopper cuBLAS and CUTLASS 2 share (``s16816gemm``, ``tn``), and the pieces
of a C++ signature (the function's base name, CamelCase to snake_case).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    "direction",
    "causal",
    "triton_kind",
    "collective",
    "reduce_op",
    "algorithm",
    "protocol",
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
        What the kernel does: ``"gemm"``, ``"attention"`` (a fused
        softmax(q·kᵀ)·v, or a step of its backward), ``"pointwise"``,
        ``"reduction"``, ``"memset"``, ``"memcpy"``, ``"collective"`` (NCCL's
        communication kernels, point-to-point included) or ``"other"``
        (anything not recognised).
    library : str
        Who wrote it: ``"cublas"``, ``"cutlass"``, ``"cudnn"``, ``"triton"``,
        ``"aten"``, ``"flash"`` (FlashAttention 2, inside PyTorch),
        ``"flash-attn-4"`` (FlashAttention-4, CuTe DSL), ``"nccl"``, ``"tensorrt"``, ``"tensile"``,
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
        ``("splitk_reduce",)``.
    direction : str or None
        For attention: ``"fwd"`` or ``"bwd"``, the pass the kernel belongs to,
        where the name says it.
    causal : bool or None
        For attention: whether the kernel was built with a causal mask, where
        the name says it (flash attention's template arguments); None where
        the mask is a run-time argument the name does not show.
    triton_kind : str or None
        Inductor's kernel category prefix: ``"poi"``, ``"red"``, ``"per"``,
        ``"tem"``, ``"for"``, ``"spl"``, ``"unk"``.
    collective : str or None
        NCCL: the collective, snake_case (``"all_reduce"``, ``"all_gather"``,
        ``"reduce_scatter"``, ``"broadcast"``, ``"send_recv"`` ...).
    reduce_op : str or None
        NCCL: the reduction operator of a reducing collective (``"sum"``,
        ``"prod"``, ``"min_max"``, ``"pre_mul_sum"`` ...).
    algorithm : str or None
        NCCL: how the ranks are connected for this call, as NCCL spells it
        (``"RING"``, ``"TREE"``, ``"NVLS"``, ``"NVLS_TREE"``, ``"COLLNET_DIRECT"``,
        ``"COLLNET_CHAIN"``, ``"PAT"``).
    protocol : str or None
        NCCL: the protocol, ``"LL"`` (low latency: 8-byte stores with a flag),
        ``"LL128"`` or ``"Simple"`` (large chunks, the bandwidth protocol).
    note : str or None
        Said when the name was not decoded whole: only its first
        :data:`~profiling_guide.trace.kernel_names.fields.MAX_NAME`
        characters are read.
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
    direction: str | None = None
    causal: bool | None = None
    triton_kind: str | None = None
    collective: str | None = None
    reduce_op: str | None = None
    algorithm: str | None = None
    protocol: str | None = None
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


# ---------------------------------------------------------------------------
# C++ signatures: the function's own name, and CamelCase words read as snake_case.
# ---------------------------------------------------------------------------

def _snake(word: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", word).lower()


def _strip_anonymous(name: str) -> str:
    return name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")


def _base_name(name: str) -> str:
    """``void at::native::reduce_kernel<512, 1, ...>(...)`` -> ``reduce_kernel``."""
    text = _strip_anonymous(name).removeprefix("void ").strip()
    head = re.split(r"[<(\s]", text, maxsplit=1)[0]
    return head.rsplit("::", 1)[-1] or text
