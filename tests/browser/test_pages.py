"""The built site as a reader sees it, in headless Chromium.

Every page of every GPU's build loads without console errors and its images
decode (of the generated source listings, ``_modules/``, the first of each
build: they are one template); each example page shows a timeline and a
table; each build's search finds the Linear chapter; and on a 390 px wide
phone screen the prose never scrolls sideways (tables and code scroll inside
their own boxes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from site_pages import builds, example_pages, pages, same_as_in_the_default_build
from site_visits import check, visiting

ALL_PAGES = pages()
EXAMPLES = example_pages()
PREFIXES = [b["prefix"] for b in builds()] or [""]
# A page of the H200 build that is the default build's page but for its random ids (a sample report) is
# read there: its checks would see the same.
DISTINCT_PAGES = [p for p in ALL_PAGES if not same_as_in_the_default_build(p)]
# The pages a reader reaches from the navigation (not the generated source listings).
READER_PAGES = [p for p in DISTINCT_PAGES if "_modules/" not in p
                and not p.rsplit("/", 1)[-1].startswith(("genindex", "py-modindex"))]
# Every page but the source listings, which are one template: the first of each build stands for the rest.
LOADED_PAGES = [p for p in DISTINCT_PAGES if "_modules/" not in p] + [
    next(p for p in ALL_PAGES if p.startswith(prefix + "_modules/")) for prefix in PREFIXES
    if any(p.startswith(prefix + "_modules/") for p in ALL_PAGES)]

# Each check() registers a script run at every visit and returns the key of its result.
BROKEN_IMAGES = check("broken_images", """
async () => {
  const bad = [];
  for (const img of Array.from(document.images)) {
    img.loading = "eager";
    try { await img.decode(); } catch (e) { /* reported below */ }
    if (!img.complete || img.naturalWidth === 0) bad.push(img.currentSrc || img.src);
  }
  return bad;
}
""")

WIDE_ELEMENTS_SEEN = check("wide_elements", """
() => {
  const doc = document.scrollingElement;
  const limit = doc.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > limit + 1) {
      const scroller = el.closest("pre, .highlight, table, .pg-scroll, .output_subarea, .rendered_html, .cell_output, .pst-scrollable-table-container, .table-wrapper, .MathJax, mjx-container");
      if (!scroller || scroller === el) wide.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} (right edge ${Math.round(r.right)} px)`);
    }
  }
  return {scrollWidth: doc.scrollWidth, clientWidth: limit, wide: wide.slice(0, 8)};
}
""")


# An example page's first figure (its timeline) and first table, as a reader gets them: shown, not hidden.
FIRST_FIGURE_AND_TABLE = check("first_figure_and_table", """
() => {
  const shown = (el) => !!el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden"
    && el.getBoundingClientRect().width > 0 && el.getBoundingClientRect().height > 0;
  const figures = document.querySelectorAll("img.sphx-glr-single-img, img.sphx-glr-multi-img");
  const tables = document.querySelectorAll("table.pg-table, table.dataframe");
  return {figures: figures.length, figure_shown: shown(figures[0]), tables: tables.length, table_shown: shown(tables[0])};
}
""", lambda path, size: path in EXAMPLES and size == "laptop")


def open_page(page, base_url: str, path: str):
    response = page.goto(f"{base_url}/{path}", wait_until="load")
    assert response is not None and response.ok, f"{path}: HTTP {response.status if response else 'no response'}"
    page.wait_for_load_state("networkidle")


@pytest.mark.parametrize("path", [visiting(p, "laptop", size_given=False) for p in LOADED_PAGES])
def test_page_loads_without_console_errors_and_its_images_decode(visit, path):
    seen = visit(path, "laptop")
    assert seen["status"] == 200, f"{path}: HTTP {seen['status']}"
    assert seen[BROKEN_IMAGES] == [], f"{path}: images that do not decode: {seen[BROKEN_IMAGES]}"
    assert not seen["errors"], f"{path}: " + "; ".join(seen["errors"])


@pytest.mark.parametrize("path", [visiting(p, "laptop", size_given=False) for p in EXAMPLES]
                         or [pytest.param("", marks=pytest.mark.skip("no example pages were built"))])
def test_example_page_shows_a_timeline_and_a_table(visit, path):
    seen = visit(path, "laptop")[FIRST_FIGURE_AND_TABLE]
    assert "check_failed" not in seen, f"{path}: {seen}"
    assert seen["figures"] > 0, f"{path}: no figure"
    assert seen["figure_shown"], f"{path}: the first figure is not visible"
    assert seen["tables"] > 0, f"{path}: no .pg-table or pandas table"
    assert seen["table_shown"], f"{path}: the first table is not visible"


def chapter_titles() -> dict[str, str]:
    """Each example's title (its docstring's first line, ``6b · The training step: ...``) by file stem."""
    titles = {}
    for path in sorted(Path(__file__).resolve().parents[2].glob("examples/**/plot_*.py")):
        first = next(line for line in path.read_text().split('"""', 2)[1].splitlines() if line.strip())
        titles[path.stem] = first.strip()
    return titles


@pytest.mark.parametrize("prefix", PREFIXES)
def test_landing_page_opens_with_the_ladder_numbered_as_the_chapters_are(page, base_url, prefix):
    open_page(page, base_url, prefix + "index.html")
    examples = [p for p in EXAMPLES if p.startswith(prefix + "auto_examples/")]
    # the lessons and the deep dives (a gallery subfolder), each with its rung
    rung_pages = [p for p in ALL_PAGES if p.startswith(prefix + "auto_examples/") and p.rsplit("/", 1)[-1].startswith("plot_")]
    rungs = page.locator("ul.pg-ladder > li")
    titles = chapter_titles()
    assert rungs.count() == len(titles), "the ladder has a rung per chapter"
    linked = page.locator("ul.pg-ladder > li > p > strong a")  # the rung's own link, not a glossary term's
    assert linked.count() == len(rung_pages), "each built example is linked from its rung"
    for i in range(linked.count()):
        rung = linked.nth(i).locator("xpath=ancestor::li[1]")
        number = rung.locator(".pg-rung-number").inner_text().strip()
        stem = linked.nth(i).get_attribute("href").rsplit("/", 1)[-1].removesuffix(".html").split("#")[0]
        assert titles[stem].startswith((f"{number} · ", f"Deep dive {number} · ")), (
            f"rung {number} links {stem}, titled {titles[stem]!r}")
    thumbs = page.locator(".sphx-glr-thumbcontainer img")
    assert thumbs.count() == len(examples), "each built example has a thumbnail on the landing page"
    # the ladder comes first, the two GPUs' table after it, with its jargon glossed
    order = page.evaluate("""() => {
        const ladder = document.querySelector("ul.pg-ladder"), table = document.querySelector("table.pg-headlines");
        return ladder && table ? ladder.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING : -1; }""")
    assert order, "the ladder comes before the two GPUs' table"
    glossed = page.evaluate("""() => [...document.querySelectorAll(".bd-article a[href*='glossary']")]
        .map(a => a.textContent.trim())""")
    assert {"IQR", "cuBLAS", "fused-pingpong"} <= set(glossed), f"terms linked to the glossary: {glossed}"
    assert page.locator("table.pg-headlines abbr[title]").count() > 0, "the table's IQR says what it is on hover"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_search_finds_the_linear_chapter(page, base_url, prefix):
    open_page(page, base_url, prefix + "search.html?q=epilogue")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=20_000)
    hrefs = [results.nth(i).get_attribute("href") or "" for i in range(results.count())]
    assert any("plot_01_linear" in h for h in hrefs), f"search for 'epilogue' did not find the Linear chapter: {hrefs}"


@pytest.mark.parametrize("path", [visiting(p, "phone", size_given=False) for p in READER_PAGES])
def test_prose_does_not_scroll_sideways_on_a_phone(visit, path):
    seen = visit(path, "phone")[WIDE_ELEMENTS_SEEN]
    assert "check_failed" not in seen, f"{path}: {seen.get('check_failed')}"
    assert seen["scrollWidth"] <= seen["clientWidth"], (
        f"{path} at 390 px: the page scrolls sideways ({seen['scrollWidth']} > {seen['clientWidth']} px); "
        f"too wide: {seen['wide']}"
    )
