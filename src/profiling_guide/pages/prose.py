"""Sentences computed from measurements.

Prose in an example never hard-codes a number a trace can supply: where a
sentence needs one, the example computes the sentence and shows it as
:class:`Facts`, rendered as ordinary paragraphs on the page.
"""

from __future__ import annotations

import html

from profiling_guide.output import echo


class Facts:
    """One or more computed sentences; renders as paragraphs (HTML) or lines (text)."""

    def __init__(self, *sentences: str, links: dict[str, str] | None = None):
        self.sentences = [s for s in sentences if s]
        self.links = links or {}  # phrase -> href: the phrase's first use on the page becomes a link
        echo(self)

    def __repr__(self) -> str:
        return "\n".join(self.sentences)

    def _repr_html_(self) -> str | None:
        if not self.sentences:  # nothing to say: no empty box on the page
            return None
        pending = dict(self.links)
        paragraphs = []
        for s in self.sentences:
            text = html.escape(s)
            for phrase, href in list(pending.items()):
                escaped = html.escape(phrase)
                if escaped in text:
                    text = text.replace(escaped, f'<a href="{html.escape(href)}">{escaped}</a>', 1)
                    del pending[phrase]
            paragraphs.append(f"<p>{text}</p>")
        return '<div class="pg-facts">' + "".join(paragraphs) + "</div>"


def spread_cell(spread, precision: int = 1) -> str:
    """``"54.9 (IQR 53.1–56.0)"``: a table cell for a :class:`~profiling_guide.spread.Spread`."""
    # non-breaking spaces: a narrow column must not break the figure over four lines
    return format(spread, f".{precision}f").replace(" ", "\u00a0")
