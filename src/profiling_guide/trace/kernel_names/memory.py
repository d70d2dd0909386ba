"""The CUDA runtime's memory operations: ``Memcpy HtoD (Pageable -> Device)``, ``Memset (Device)``.

These are not kernels but copy-engine or driver work on a GPU stream, and the
trace names them in plain words. A copy's name carries its direction (``HtoD``,
``DtoH``, ``DtoD``, ``PtoP``, or XLA's ``H2D`` spelling) and, where the
profiler adds it, the kinds of memory at each end: pageable host memory forces
a staged, synchronous copy; pinned memory does not.
"""

from __future__ import annotations

import re

from profiling_guide.trace.kernel_names.fields import _clip

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
