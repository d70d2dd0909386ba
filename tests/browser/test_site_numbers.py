"""What the built pages say about their numbers: no kernel above a ceiling, no raw logs.

No browser: each page's tables are parsed from ``docs/_build/html``. A column
whose header calls something a *ceiling* holds percentages of a datasheet
peak; none may pass 100.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from site_pages import SITE, example_pages

from profiling_guide.pages.page_logs import LOG_MARKERS

NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?$")


class _Tables(HTMLParser):
    """Every table of a page as (header cells, rows of cells)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            head, body = self.tables[-1]
            if self._in_head and not head:
                head.extend(self._row)
            elif not self._in_head:
                body.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def ceiling_cells(page: str) -> list[tuple[str, float]]:
    parser = _Tables()
    parser.feed((SITE / page).read_text(encoding="utf-8"))
    found = []
    for head, body in parser.tables:
        for i, name in enumerate(head):
            if "ceiling" not in name.lower():
                continue
            # a Styler table may carry a leading index header cell the body rows also have
            for row in body:
                offset = len(row) - len(head)
                j = i + offset
                if 0 <= j < len(row) and NUMBER.match(row[j]):
                    found.append((name, float(row[j].replace(",", ""))))
    return found


def test_the_checker_reads_a_ceiling_column():
    parser = _Tables()
    parser.feed("<table><thead><tr><th>kernel</th><th>% of datasheet ceiling</th></tr></thead>"
                "<tbody><tr><td>a</td><td>101.5</td></tr></tbody></table>")
    head, body = parser.tables[0]
    assert head == ["kernel", "% of datasheet ceiling"] and body == [["a", "101.5"]]


@pytest.mark.parametrize("page", example_pages() or ["(no example pages built)"])
def test_no_page_shows_a_kernel_above_a_ceiling(page):
    if not example_pages():
        pytest.skip("no example pages were built")
    cells = ceiling_cells(page)
    over = [(name, value) for name, value in cells if value > 100]
    assert not over, f"{page}: {over[:5]} above 100 % of something called a ceiling"


def test_the_mlp_pages_compare_kernels_with_a_ceiling():
    pages = [p for p in example_pages() if any(n in p for n in ("02_", "05_", "06_"))]
    if not pages:
        pytest.skip("no example pages were built")
    assert all(ceiling_cells(p) for p in pages), "an MLP page lost its ceiling column"




class _Outputs(HTMLParser):
    """The text of every output block of a sphinx-gallery page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.text = 0, []

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if self.depth:
            self.depth += 1
        elif "sphx-glr-script-out" in cls or "pg-facts" in cls:
            self.depth = 1

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.text.append(data)


def test_the_log_checker_finds_a_leaked_log_line():
    parser = _Outputs()
    parser.feed('<div class="sphx-glr-script-out"><pre>E1123 16:56:30.277000 1064 torch/_inductor/x.py] No valid'
                '</pre></div>')
    assert LOG_MARKERS.search("".join(parser.text))


@pytest.mark.parametrize("page", example_pages() or ["(no example pages built)"])
def test_no_page_publishes_logs_warnings_or_tracebacks(page):
    if not example_pages():
        pytest.skip("no example pages were built")
    parser = _Outputs()
    parser.feed((SITE / page).read_text(encoding="utf-8"))
    found = LOG_MARKERS.search("".join(parser.text))
    assert not found, f"{page} publishes a log line: {found.group(0)!r}"


def headline_rows(page: str) -> dict[str, list[str]]:
    parser = _Tables()
    parser.feed((SITE / page).read_text(encoding="utf-8"))
    found = [(head, body) for head, body in parser.tables if head and head[1:] and "H100" in " ".join(head)]
    return {row[0]: row[1:] for _, body in found[:1] for row in body}


def test_the_landing_pages_ratios_say_enough_digits_and_their_shape():
    """1.051× must not read as 1.05× (the target it missed); a ratio to cuBLAS's GEMMs names its shape."""
    if not (SITE / "index.html").is_file():
        pytest.skip("no built site")
    rows = headline_rows("index.html")
    ratios = {label: cells for label, cells in rows.items() if any(re.search(r"\d× ", c) for c in cells)}
    assert ratios, f"no ratio on the landing page's table: {list(rows)}"
    for label, cells in ratios.items():
        for cell in cells:
            assert re.search(r"\d\.\d{3}×", cell), f"{label!r}: {cell!r} has fewer than three digits"
    ours = {label: cells for label, cells in ratios.items() if label.startswith("our fused MLP")}
    unshaped = {label: cells for label, cells in ours.items() if "rows" not in label and not all("rows" in c for c in cells)}
    assert ours and not unshaped, f"our MLP's ratio without its shape: {unshaped or ours}"
    nine = [label for label in rows if "nine GEMMs" in label]
    assert nine and all("timed alone" in label for label in nine), f"the nine GEMMs, called: {nine}"
    assert not [label for label in rows if "floor" in label.lower()], "cuBLAS's GEMMs are a reference, not a floor"
