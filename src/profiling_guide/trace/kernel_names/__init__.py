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
reads at most :data:`~profiling_guide.trace.kernel_names.fields.MAX_NAME`
characters, and every pattern is read in one pass (names are split into words
rather than searched with nested or adjacent open-ended repeats), so any name,
however long or strange, decodes in milliseconds.

Some fields are readings, not documented facts; where that is so, the comment
next to the code says how sure the reading is.

The decoders live one module per library family, all behind :func:`decode`:
:mod:`~profiling_guide.trace.kernel_names.fields` (the :class:`KernelName`
record and the helpers every family shares),
:mod:`~profiling_guide.trace.kernel_names.memory`,
:mod:`~profiling_guide.trace.kernel_names.cublas`,
:mod:`~profiling_guide.trace.kernel_names.cutlass`,
:mod:`~profiling_guide.trace.kernel_names.attention`,
:mod:`~profiling_guide.trace.kernel_names.cudnn`,
:mod:`~profiling_guide.trace.kernel_names.nccl`,
:mod:`~profiling_guide.trace.kernel_names.rocm`,
:mod:`~profiling_guide.trace.kernel_names.inductor`,
:mod:`~profiling_guide.trace.kernel_names.aten` and
:mod:`~profiling_guide.trace.kernel_names.triton`. Each family is a function
from a name to its fields, or ``None`` when the name is not its own;
:func:`decode` tries them in a fixed order.
"""

from __future__ import annotations

import functools

from profiling_guide.trace.kernel_names.attention import _attention
from profiling_guide.trace.kernel_names.aten import _aten
from profiling_guide.trace.kernel_names.cublas import _cublas_helper, _legacy_cublas, _nvjet, _xmma
from profiling_guide.trace.kernel_names.cudnn import _cudnn
from profiling_guide.trace.kernel_names.cutlass import _cutlass2, _cutlass3
from profiling_guide.trace.kernel_names.fields import FIELDS, MAX_NAME, SHORT_MAX, KernelName, _base_name, _clip
from profiling_guide.trace.kernel_names.inductor import INDUCTOR_OP_VOCABULARY, _inductor, split_inductor_ops
from profiling_guide.trace.kernel_names.memory import _memory_op
from profiling_guide.trace.kernel_names.nccl import _nccl
from profiling_guide.trace.kernel_names.rocm import _tensile
from profiling_guide.trace.kernel_names.triton import _plain_triton

__all__ = ["FIELDS", "KernelName", "INDUCTOR_OP_VOCABULARY", "MAX_NAME", "SHORT_MAX", "decode",
           "split_inductor_ops"]

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
