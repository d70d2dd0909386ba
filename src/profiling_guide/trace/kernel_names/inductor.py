"""TorchInductor's kernels (``torch.compile``): ``triton_poi_fused__unsafe_view_gelu_mul_0``.

Inductor names each Triton kernel it generates after the heuristic it used
(``poi`` pointwise, ``red`` and ``per`` reductions, ``tem`` a template such
as its matmul, ...) and the ATen ops it fused, sorted and joined with ``_``,
then a counter. :func:`split_inductor_ops` cuts the joined list back into op
names with a vocabulary of ATen ops (:data:`INDUCTOR_OP_VOCABULARY`), so a
fused op can be matched against the eager trace's ``aten::`` rows; a template
kernel's fused activation reads as its epilogue.
"""

from __future__ import annotations

import functools
import re

from profiling_guide.trace.kernel_names.fields import _clip

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
_ATTENTION_OPS = frozenset({"flex_attention", "flex_attention_backward", "_scaled_dot_product_flash_attention",
                            "_scaled_dot_product_efficient_attention"})
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
    (:data:`~profiling_guide.trace.kernel_names.inductor.INDUCTOR_OP_VOCABULARY`).
    Of all the ways to cut the words into ops, the one chosen leaves the
    fewest words unexplained, then keeps the ops in sorted order (Inductor
    sorts them), then uses the fewest, longest ops. A greedy longest match is
    not enough: ``clamp_max_pool2d_with_indices`` is ``clamp`` +
    ``max_pool2d_with_indices``, not ``clamp_max`` + leftovers.
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


def _inductor_ops(body: str) -> tuple[str, ...] | None:
    """The ops in a kernel name's body after ``fused_``; None where the body is a user's own word."""
    if body.startswith("fused"):
        return split_inductor_ops(body[len("fused") :].removeprefix("_"))
    if body == "":
        return ()
    return None  # e.g. a user kernel named triton_per_token_quant


def _template_kind(op_set: set[str]) -> tuple[str, str | None]:
    """A template kernel's kind and epilogue: Inductor's own Triton GEMM (or attention), with
    the ops after the matmul fused into its epilogue."""
    if op_set & _GEMM_OPS:
        words = (["bias"] if op_set & {"addmm", "baddbmm"} else []) + [a for a in _ACTIVATION_OPS if a in op_set]
        return "gemm", "_".join(words) or None
    if op_set & _ATTENTION_OPS:
        return "attention", None  # FlexAttention's template: one kernel for softmax(q·kᵀ + mask)·v or its gradients
    return "other", None


def _inductor_kind(tk: str, op_set: set[str]) -> tuple[str, str | None]:
    """The kernel's kind and (for a template) its epilogue, from its Triton kind word and its ops."""
    if tk == "tem":
        return _template_kind(op_set)
    if tk == "unk":
        return ("gemm" if op_set & _GEMM_OPS else ("reduction" if op_set & _REDUCTION_OPS else "pointwise")), None
    return _TRITON_KIND[tk], None


def _attention_direction(kind: str, op_set: set[str]) -> str | None:
    if kind != "attention":
        return None
    return "bwd" if any(op.endswith("_backward") for op in op_set & _ATTENTION_OPS) else "fwd"


def _inductor(name: str) -> dict | None:
    m = _INDUCTOR.match(name)
    if not m:
        return None
    ops = _inductor_ops(m["body"])
    if ops is None:
        return None
    tk = m["tk"]
    kind, epilogue = _inductor_kind(tk, set(ops))
    label_ops = [op for op in ops if op not in _VIEW_OPS and op not in _CAST_OPS] or list(ops)
    short = f"triton {tk}" + (": " + "·".join(label_ops) if label_ops else "")
    return {"kind": kind, "library": "triton", "epilogue": epilogue, "fused_ops": ops, "triton_kind": tk,
            "direction": _attention_direction(kind, set(ops)), "short": _clip(short)}
