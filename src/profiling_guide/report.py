"""Sentences computed from measurements.

Prose in an example never hard-codes a number a trace can supply: where a
sentence needs one, the example computes the sentence and shows it as
:class:`Facts`, rendered as ordinary paragraphs on the page.
"""

from __future__ import annotations

import html


class Facts:
    """One or more computed sentences; renders as paragraphs (HTML) or lines (text)."""

    def __init__(self, *sentences: str):
        self.sentences = [s for s in sentences if s]

    def __repr__(self) -> str:
        return "\n".join(self.sentences)

    def _repr_html_(self) -> str:
        return '<div class="pg-facts">' + "".join(f"<p>{html.escape(s)}</p>" for s in self.sentences) + "</div>"


def ratio_words(a: float, b: float) -> str:
    """``"1.32× faster"`` / ``"1.05× slower"``: how ``a`` compares with ``b`` (times, lower is better)."""
    if a <= b:
        return f"{b / a:.2f}× faster"
    return f"{a / b:.2f}× slower"
