"""Which words of the glossary are linked automatically, and how a use of one is found.

Shared by the site's extension (``_glossary_links``) and the test that checks
its output, which runs without Sphinx.
"""

from __future__ import annotations

import re

GLOSSARY = "concepts/glossary"
#: Terms whose everyday sense is too common to link automatically.
NOT_AUTOMATIC = {"kernel", "reference", "stream", "layout letters"}


def term_pattern(term: str) -> re.Pattern:
    """The term as a word (plural too); case kept where it has capitals after its first letter (IQR, NVTX)."""
    flags = 0 if any(c.isupper() for c in term[1:]) else re.IGNORECASE
    return re.compile(rf"(?<![\w.-]){re.escape(term)}(?:e?s)?(?![\w-])", flags)
