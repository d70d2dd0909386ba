"""NCCL's collectives: ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)``.

The name carries the collective (AllReduce, AllGather, ReduceScatter,
SendRecv ...), then, where there is one, the reduction operator, the element
type, the algorithm (``RING``, ``TREE``) and the protocol (``LL``, ``SIMPLE``).
The decoder reads the collective and the type.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _DTYPE_WORDS, _clip, _snake

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
