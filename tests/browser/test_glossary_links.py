"""Every glossary term a page's prose uses is linked to its entry, at its first use.

Read from the built HTML of every build: the text of each paragraph (code,
program output and titles left out) in order, and the links to the
glossary. A term whose first use is plain text, with a link only later or
nowhere, fails.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser

import pytest
from site_pages import ROOT, SITE, build_chapter_pages, builds

sys.path.insert(0, str(ROOT / "docs"))
from _glossary_terms import NOT_AUTOMATIC, term_pattern  # noqa: E402 - the rule the site's extension applies

#: The terms a reader found used unexplained: each must have a glossary entry.
MUST_BE_DEFINED = ["memset", "occupancy", "NVTX", "wgmma", "L2", "bus bandwidth"]


class Prose(HTMLParser):
    """The paragraphs' text in order, each piece with the glossary anchor it links to ("" another link, None none).

    Left out, as the site's extension leaves them: code, admonition titles,
    and a cell's output (tables, boxes and banners a chapter prints).
    """

    SKIPPED_TAGS = {"code", "pre", "script", "style"}
    VOID = {"br", "img", "hr", "input", "meta", "link", "wbr", "source", "col", "area"}

    def __init__(self):
        super().__init__()
        self.pieces: list[tuple[str, str | None]] = []
        self._stack: list[tuple[str, bool]] = []  # (tag, whether it starts a skipped region)
        self._link: str | None = None

    def _skipping(self) -> bool:
        return any(skip for _, skip in self._stack)

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = (tag in self.SKIPPED_TAGS or "admonition-title" in classes
                or any(c.startswith("output_") or c == "sphx-glr-script-out" for c in classes))
        self._stack.append((tag, skip))
        if tag == "a":
            href = dict(attrs).get("href") or ""
            self._link = href.partition("#")[2] if "glossary.html#term-" in href else ""

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        while self._stack:
            if self._stack.pop()[0] == tag:
                break
        if tag == "a":
            self._link = None

    def handle_data(self, data):
        if not self._skipping() and any(t == "p" for t, _ in self._stack):
            self.pieces.append((data, self._link))


def glossary_terms() -> dict[str, str]:
    """Term → its anchor in the built glossary, as the site's build made them."""
    html = (SITE / "concepts" / "glossary.html").read_text(encoding="utf-8")
    return {re.sub(r"<[^>]+>", "", term).strip(): anchor
            for anchor, term in re.findall(r'<dt id="(term-[^"]+)">(.*?)<a class="headerlink"', html, re.S)}


def _cases():
    cases = [pytest.param(build, page, id=f"{build['name']}:{page}") for build in builds()
             for page in build_chapter_pages(build)]
    return cases or [pytest.param(None, None, marks=pytest.mark.skip("no built site: run nox -s docs"))]


def test_the_terms_readers_asked_for_are_defined():
    if not (SITE / "concepts" / "glossary.html").is_file():
        pytest.skip("no built site: run nox -s docs")
    missing = [t for t in MUST_BE_DEFINED if t not in glossary_terms()]
    assert not missing, f"the glossary does not define {', '.join(missing)}"


@pytest.mark.parametrize("build, page", _cases())
def test_each_term_is_linked_at_its_first_use(build, page):
    parser = Prose()
    parser.feed((SITE / build["prefix"] / page).read_text(encoding="utf-8"))
    late = []
    for term, anchor in glossary_terms().items():
        if term.lower() in NOT_AUTOMATIC:
            continue
        pattern = term_pattern(term)
        for text, link in parser.pieces:
            if link == anchor:
                break  # linked at (or before) its first use
            if link is not None:
                continue  # inside another link (a longer term, a synonym, a page): not linked twice
            if pattern.search(text):
                late.append(f"{term!r} in {text.strip()[:60]!r}")
                break
    assert not late, f"{build['prefix']}{page}: first use not linked: " + "; ".join(late)
