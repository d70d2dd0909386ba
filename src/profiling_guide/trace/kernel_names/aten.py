"""ATen's own CUDA kernels, the ones eager PyTorch launches for its native ops.

The name is a C++ signature:
``void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)...>``.
The outer template says the shape of the work (elementwise, reduce, softmax,
layer norm, cat, index ...); a functor or lambda inside its arguments says
which op (``GeluCUDAKernelImpl``, ``CUDAFunctor_add``, ``MeanOps``); the
first C++ type in the arguments is the element type. torch.profiler shows the
full demangled signature, and nsys-style names (``(int)4``, ``<unnamed>``)
read the same way.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _base_name, _clip, _cxx_dtype, _snake

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
