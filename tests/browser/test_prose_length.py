"""Every chapter's main path reads in about ten minutes: at most 1,500 words of prose, tables of six columns.

No browser: each built chapter page (``auto_examples/plot_*.html`` of every
GPU's build, deep dives left out) is parsed from ``docs/_build/html``.

*Prose* is every word of the page's article a reader reads as running text:
paragraphs, headings, lists, notes and the computed sentences a chapter prints
(``pg-facts``), inline code included. Left out: code and printed output
(``<pre>``), tables, figures, the interactive timeline, folded asides
(``<details>``: off the main path until the reader opens one), the replay
banner and sphinx-gallery's own lines (download links, running time). A word
is a run of characters between spaces that holds a letter or a digit.

A table's columns are its data cells (``<td>``) in its widest row: the row
labels a DataFrame prints as header cells are not counted. Run as a script
(``python tests/browser/test_prose_length.py [site]``) it prints each chapter's
prose words, tables and widest table.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from site_pages import SITE, example_pages

MAX_PROSE_WORDS = 1500
MAX_TABLE_COLUMNS = 6
WORD = re.compile(r"\S*[^\W_]\S*")
# Elements whose text is not main-path prose (see the module docstring).
SKIPPED_TAGS = {"pre", "table", "details", "figure", "img", "svg", "script", "style", "button", "select", "canvas",
                "noscript", "textarea"}
SKIPPED_CLASSES = {"sphx-glr-download-link-note", "sphx-glr-footer", "sphx-glr-timing", "sphx-glr-signature",
                   "headerlink", "pg-banner", "pg-itl", "pg-downloads", "highlight"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Prose(HTMLParser):
    """The main-path prose words, tables and the widest table's data columns of one page's article."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.in_article = 0  # element depth inside <article>, 0 outside
        self.skip_depth = 0  # depth inside a skipped element, 0 outside
        self._skips: list[str] = []  # the tags open inside it
        self.text: list[str] = []
        self.tables = 0
        self.widest = 0
        self._row_cells: int | None = None
        self._table_depth = 0

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        if not self.in_article:
            if tag == "article":
                self.in_article = 1
            return
        self.in_article += 1
        if tag == "table" and "details" not in self._open_skips():
            if not self._table_depth:
                self.tables += 1
            self._table_depth += 1
        if tag == "tr" and self._table_depth:
            self._row_cells = 0
        if tag == "td" and self._row_cells is not None:
            self._row_cells += 1
        if self.skip_depth:
            self.skip_depth += 1
            self._skips.append(tag)
        elif tag in SKIPPED_TAGS or classes & SKIPPED_CLASSES:
            self.skip_depth = 1
            self._skips = [tag]

    def _open_skips(self) -> list[str]:
        return self._skips if self.skip_depth else []

    def handle_endtag(self, tag):
        if tag in VOID or not self.in_article:
            return
        self.in_article -= 1
        if tag == "tr" and self._row_cells is not None:
            self.widest = max(self.widest, self._row_cells)
            self._row_cells = None
        if tag == "table" and self._table_depth:
            self._table_depth -= 1
        if self.skip_depth:
            self.skip_depth -= 1
            self._skips.pop()

    def handle_data(self, data):
        if self.in_article and not self.skip_depth:
            self.text.append(data)

    @property
    def words(self) -> int:
        return len(WORD.findall(" ".join(self.text)))


def prose(html: str) -> _Prose:
    parser = _Prose()
    parser.feed(html)
    parser.close()
    return parser


def chapter_pages() -> list[str]:
    """The chapter pages of every build (deep dives, in their own folder, left out)."""
    return [p for p in example_pages() if "/deep_dives/" not in p]


def test_prose_counts_words_outside_code_tables_and_folds():
    page = prose(
        "<nav><p>menu words here</p></nav><article>"
        '<div class="sphx-glr-download-link-note"><p>Go to the end</p></div>'
        "<h1>One title<a class=\"headerlink\">#</a></h1><p>Two <code>words</code> here.</p>"
        '<div class="highlight"><pre>x = 1</pre></div><div class="pg-facts"><p>A computed sentence.</p></div>'
        "<table><tr><th>row</th><td>a</td><td>b</td><td>c</td></tr></table>"
        "<details><summary>Aside</summary><p>not on the main path</p><table><tr><td>x</td></tr></table></details>"
        "<p>— 3.5 µs</p></article><p>footer words</p>"
    )
    assert page.words == 2 + 3 + 3 + 2  # title, paragraph, facts, "3.5 µs" (a lone dash is no word)
    assert (page.tables, page.widest) == (1, 3)


@pytest.mark.parametrize("page", chapter_pages() or ["(no chapter pages built)"])
def test_a_chapters_main_path_prose_reads_in_about_ten_minutes(page):
    if not chapter_pages():
        pytest.skip("no chapter pages were built")
    words = prose((SITE / page).read_text(encoding="utf-8")).words
    assert words <= MAX_PROSE_WORDS, (f"{page}: {words} words of prose on the main path (at most {MAX_PROSE_WORDS}); "
                                      "move depth to a deep-dive page or a folded <details> aside")


@pytest.mark.parametrize("page", chapter_pages() or ["(no chapter pages built)"])
def test_a_chapters_tables_have_at_most_six_columns(page):
    if not chapter_pages():
        pytest.skip("no chapter pages were built")
    widest = prose((SITE / page).read_text(encoding="utf-8")).widest
    assert widest <= MAX_TABLE_COLUMNS, (f"{page}: a table of {widest} columns on the main path (at most "
                                         f"{MAX_TABLE_COLUMNS}): drop columns or move the table to a deep dive")


if __name__ == "__main__":
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else SITE
    for html in sorted(site.rglob("auto_examples/**/plot_*.html")):
        p = prose(html.read_text(encoding="utf-8"))
        print(f"{html.relative_to(site).as_posix():60s} {p.words:6d} words {p.tables:3d} tables  "
              f"widest {p.widest} columns")
