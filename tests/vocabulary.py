"""The guide's words for what a measured time or rate is read against.

A *ceiling* is a datasheet peak, never exceeded; the *datasheet bound* is the
least time a piece of work takes at the ceilings. A rate or a time measured
on the GPU (the best cuBLAS GEMM, cuBLAS's GEMMs timed alone) is a
*reference*: a kernel may beat it, so it is never a *floor*. The word
"floor" appears only to say so ("a reference, not a floor").
"""

import re

# "floor" or "floors" as a word, not JavaScript's Math.floor or a call floor(...).
_FLOOR = re.compile(r"(?<![.\w])floors?\b(?!\s*\()", re.IGNORECASE)
_NEGATED = re.compile(r"\bnot\s+a\s+$", re.IGNORECASE)


def prose_of(text: str) -> str:
    """``text`` with its line breaks and the comment markers that start lines joined into spaces."""
    return re.sub(r"\s*\n\s*(?:#+(?!%%)\s*)?", " ", text)


def floor_misuses(text: str) -> list[str]:
    """Each "floor" of ``text`` that is not "not a floor", with the words around it."""
    prose = prose_of(text)
    return [prose[max(0, m.start() - 60):m.end() + 30] for m in _FLOOR.finditer(prose)
            if not _NEGATED.search(prose[max(0, m.start() - 12):m.start()])]
