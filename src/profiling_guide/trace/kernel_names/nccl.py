"""NCCL's collectives: ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)``.

Since NCCL 2.19 a kernel's name reads
``ncclDevKernel_<collective>[_<reduction>][_<type>]_<algorithm>_<protocol>``:
the collective (``AllReduce``, ``AllGather``, ``ReduceScatter``,
``Broadcast``, ``Reduce``; ``SendRecv`` for point-to-point), the reduction
operator where the collective reduces (``Sum``, ``Prod``, ``MinMax``,
``PreMulSum``, ``SumPostDiv``), the element type where it matters (an
all-gather moves bytes and names none), the algorithm (``RING``, ``TREE``,
``NVLS``, ``NVLS_TREE``, ``COLLNET_DIRECT``, ``COLLNET_CHAIN``, ``PAT``) and the
protocol (``LL``, ``LL128``, ``SIMPLE``). Older NCCL wrote
``ncclKernel_AllReduce_RING_LL_Sum_float``: the same words in another order,
C type names. Words are read by what they are, not where they stand, so both
orders decode.

The name says how NCCL moved the data, never how much: message sizes are on
the ``record_param_comms`` op that launched the kernel
(:mod:`profiling_guide.analysis.collectives`).
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _DTYPE_WORDS, _clip, _snake

_NCCL = re.compile(r"^(?:void\s+)?nccl(?:Dev)?Kernel_(?P<rest>\w+)")

_REDUCE_OPS = {"Sum": "sum", "Prod": "prod", "MinMax": "min_max", "Min": "min", "Max": "max",
               "PreMulSum": "pre_mul_sum", "SumPostDiv": "sum_post_div", "Avg": "avg"}
# NCCL's own type words, and the C type names older versions used.
_NCCL_TYPES = {"i8": "int8", "u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64",
               "f8e4m3": "fp8_e4m3", "f8e5m2": "fp8_e5m2", "int8_t": "int8", "uint8_t": "uint8",
               "int32_t": "int32", "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64",
               "half": "fp16", "float": "fp32", "double": "fp64", "bfloat16": "bf16", "rccl_bfloat16": "bf16"}
_ALGORITHMS = ("COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "RING", "TREE", "NVLS", "PAT", "COLLNET")
_PROTOCOLS = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}


def _nccl(name: str) -> dict | None:
    m = _NCCL.match(name)
    if not m:
        return None
    words = m["rest"].split("_")
    collective = _snake(words[0]) if words and words[0] else "collective"
    rest = words[1:]
    reduce_op = next((_REDUCE_OPS[w] for w in rest if w in _REDUCE_OPS), None)
    dtype = next((_NCCL_TYPES.get(w) or _DTYPE_WORDS.get(w) for w in rest if w in _NCCL_TYPES or w in _DTYPE_WORDS),
                 None)
    joined = "_" + "_".join(rest) + "_"
    algorithm = next((a for a in _ALGORITHMS if f"_{a}_" in joined), None)
    protocol = next((_PROTOCOLS[w] for w in rest if w in _PROTOCOLS), None)
    how = "_".join(p for p in (algorithm, protocol and protocol.upper()) if p) or None
    return {"kind": "collective", "library": "nccl", "dtype": dtype, "collective": collective,
            "reduce_op": reduce_op, "algorithm": algorithm, "protocol": protocol,
            "short": _clip(" ".join(p for p in ("nccl", collective, dtype, how) if p))}
