"""cuDNN's own C++ kernels (``cudnn::...``) and its NCHW/NHWC layout transposes.

These names are C++ signatures, and the function's name says the kind of work:
a convolution (``conv``, ``gemm``, ``winograd``), a pooling, normalisation or
softmax reduction, or a layout transpose; the template arguments give the
element type. cuDNN's tensor-core convolutions read elsewhere: xmma names in
:mod:`~profiling_guide.trace.kernel_names.cublas`, its CUTLASS copy in
:mod:`~profiling_guide.trace.kernel_names.cutlass`, its SDPA kernels in
:mod:`~profiling_guide.trace.kernel_names.attention`.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _base_name, _clip, _cxx_dtype

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
    elif re.search(r"conv(?!ert)|gemm|winograd", low):  # "convert" is not a convolution
        kind, op = "gemm", "conv"
    elif "pool" in low or "bn_" in low or "batch_norm" in low or "softmax" in low or "reduce" in low:
        kind, op = "reduction", None
    else:
        kind, op = "other", None
    return {"kind": kind, "library": "cudnn", "dtype": _cxx_dtype(name), "fused_ops": (op,) if op else (),
            "short": _clip(f"cudnn {op or base}")}
