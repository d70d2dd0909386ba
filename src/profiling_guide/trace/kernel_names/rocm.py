"""ROCm's GEMM kernels, written by Tensile for rocBLAS and hipBLASLt.

A name such as ``Cijk_Alik_Bljk_BBS_BH_..._MT128x128x64_...`` carries the
index order of A and B (``Alik``, ``Bljk``), a types word (``BBS``: bf16 in,
bf16 out, fp32 compute) and, further on, the macro tile (``MT128x128x64``);
the decoder reads the input type and the tile.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _clip

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
