"""Every chapter and the landing page on a laptop (1366×768) and a phone (390×844), in headless Chromium.

At both widths: the article never scrolls sideways; every table either fits
or sits in a box of its own that scrolls to its last column, and on the phone
its first column stays in view while it scrolls (both read at the page's one
visit at that width, site_visits.py). On the laptop every figure, clicked,
opens at no less than the size it was drawn for and larger than it is shown;
on the phone a figure is already shown near that size, in a box that scrolls:
test_figures.py checks its text is legible, and that a tap opens it.

With ``PROFILING_GUIDE_SCREENSHOTS`` set, a screenshot of each page at each
width is saved there for a person to look at (the folder is printed at the
end of the run); without it none is taken, as none is a check.
"""

from __future__ import annotations

import os
import re

import pytest
from site_pages import builds, example_pages
from site_visits import SIZES, check, visiting

PREFIXES = [b["prefix"] for b in builds()] or [""]
PAGES = [p for prefix in PREFIXES for p in [prefix + "index.html"]] + example_pages()
WIDTHS = SIZES
CASES = [visiting(path, width) for path in PAGES for width in WIDTHS] or [
    pytest.param("", "laptop", marks=pytest.mark.skip("no pages were built"))]
ON_PAGES = (lambda path, size: path in PAGES)

# What sticks out to the right of the article, other than from inside a box that scrolls.
ARTICLE_OVERFLOW = check("article_overflow", """
() => {
  const doc = document.scrollingElement, article = document.querySelector(".bd-article");
  const limit = Math.min(doc.clientWidth, article.getBoundingClientRect().right);
  const wide = [];
  for (const el of article.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= limit + 1) continue;
    let box = el.parentElement, scrolled = false;
    while (box && box !== article) {
      const x = getComputedStyle(box).overflowX;
      if (x === "auto" || x === "scroll" || x === "hidden") { scrolled = box.getBoundingClientRect().right <= limit + 1; break; }
      box = box.parentElement;
    }
    if (!scrolled) wide.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} (right edge ${Math.round(r.right)} px > ${Math.round(limit)})`);
  }
  return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, wide: wide.slice(0, 6)};
}
""", ON_PAGES)

# Each table: does it fit, and if not, does its own box scroll to its last column with the first column in view?
TABLES = check("tables", """
() => {
  const article = document.querySelector(".bd-article"), right = article.getBoundingClientRect().right;
  const out = [];
  article.querySelectorAll("table").forEach((table, i) => {
    if (!table.offsetParent) return;  // not displayed (a folded section)
    const head = (table.querySelector("thead") || table).innerText.replace(/\\s+/g, " ").trim().slice(0, 60);
    // the rows shown (a phone shows a verdict table as cards, without its header row)
    const rows = [...table.querySelectorAll("tr")].filter(r => r.children.length && r.getClientRects().length);
    const widest = rows.reduce((a, r) => r.children.length > a.children.length ? r : a, rows[0]);
    if (!widest) return;
    const last = widest.children[widest.children.length - 1];
    let box = table.parentElement;
    while (box && box !== article && !["auto", "scroll"].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    const boxed = box && box !== article ? box : null;
    const clippers = [];  // every ancestor inside the article that cuts what sticks out of it
    for (let el = table.parentElement; el && el !== article; el = el.parentElement)
      if (getComputedStyle(el).overflowX !== "visible") clippers.push(el);
    // A cell is in view when its right end is: inside the article and every box that clips it,
    // and clear of the first column where that stays put over the rest.
    const visible = (cell) => {
      const r = cell.getBoundingClientRect();
      const first = (table.querySelector("tbody tr") || widest).children[0];
      const cover = first !== cell && getComputedStyle(first).position === "sticky" ? first.getBoundingClientRect().right : -Infinity;
      return r.right <= right + 1 && r.right > cover + 1 && clippers.every(c => {
        const b = c.getBoundingClientRect();
        return r.right <= b.right + 1 && r.right > b.left;
      });
    };
    const row = {i, head, fits: visible(last), scrolls: false, reaches_last: false, first_stays: null, moved: null};
    if (!row.fits && boxed) {
      // the cells of the first column, a cell that spans rows counted once
      const first = new Set();
      for (const section of [table.tHead, ...table.tBodies, table.tFoot]) {
        let spanned = 0;
        for (const r of section ? section.rows : []) {
          if (spanned > 0) { spanned--; continue; }
          if (r.cells[0]) { first.add(r.cells[0]); spanned = r.cells[0].rowSpan - 1; }
        }
      }
      const cells = [...table.querySelectorAll("td, th")].filter(c => c.getClientRects().length);
      const before = cells.map(c => c.getBoundingClientRect().left);
      boxed.scrollLeft = boxed.scrollWidth;
      const moved = boxed.scrollLeft;
      row.scrolls = moved > 0;
      row.reaches_last = visible(last);
      const after = cells.map(c => c.getBoundingClientRect().left);
      // the first column stays put; every other cell scrolls by as much as the box did
      row.first_stays = cells.every((c, k) => !first.has(c) || Math.abs(after[k] - before[k]) <= 2);
      row.moved = cells.every((c, k) => first.has(c) || Math.abs(before[k] - after[k] - moved) <= 2);
      boxed.scrollLeft = 0;
    }
    out.push(row);
  });
  return out;
}
""", ON_PAGES)

FIGURES = ".bd-article img.sphx-glr-single-img, .bd-article img.sphx-glr-multi-img"


def open_at(page, base_url: str, path: str, width: str):
    """The page at ``width``, its figures loaded and its fonts ready (what the widths read)."""
    w, h = WIDTHS[width]
    page.set_viewport_size({"width": w, "height": h})
    response = page.goto(f"{base_url}/{path}", wait_until="load")
    assert response is not None and response.ok, f"{path}: HTTP {response.status if response else 'no response'}"
    page.evaluate("document.fonts.ready.then(() => true)")


def seen_at(visit, path: str, width: str, name: str):
    seen = visit(path, width)
    assert seen["status"] == 200, f"{path}: HTTP {seen['status']}"
    assert not (isinstance(seen[name], dict) and "check_failed" in seen[name]), f"{path}: {seen[name]}"
    return seen[name]


@pytest.mark.parametrize("path, width", CASES)
def test_the_article_never_scrolls_sideways(visit, path, width):
    seen = seen_at(visit, path, width, ARTICLE_OVERFLOW)
    assert seen["scrollWidth"] <= seen["clientWidth"], (
        f"{path} at {WIDTHS[width][0]} px: the page scrolls sideways ({seen['scrollWidth']} > {seen['clientWidth']} px)")
    assert not seen["wide"], f"{path} at {WIDTHS[width][0]} px: sticks out of the article: {seen['wide']}"


@pytest.mark.parametrize("path, width", CASES)
def test_no_table_is_clipped(visit, path, width):
    """Every table's last column is in view, or its box scrolls to it; on a phone the first column stays put."""
    tables = seen_at(visit, path, width, TABLES)
    clipped = [t for t in tables if not t["fits"] and not t["reaches_last"]]
    assert not clipped, f"{path} at {WIDTHS[width][0]} px: tables whose last column cannot be reached: {clipped}"
    if width == "phone":
        loose = [t["head"] for t in tables if not t["fits"] and not t["first_stays"]]
        assert not loose, f"{path} on a phone: tables whose first column scrolls away: {loose}"
        stuck = [t["head"] for t in tables if not t["fits"] and not t["moved"]]
        assert not stuck, f"{path} on a phone: tables where a cell beyond the first column does not scroll: {stuck}"


@pytest.mark.parametrize("path", [p for p in PAGES if "auto_examples/" in p] or PAGES[:1])
def test_every_figure_opens_larger_than_shown(laptop_tab, base_url, path):
    """On the laptop, clicked, each figure opens at least at its drawn size and larger than shown; Escape closes it."""
    page = laptop_tab
    open_at(page, base_url, path, "laptop")
    figures = page.locator(FIGURES)
    assert figures.count() > 0, f"{path}: no figure"
    for i in range(figures.count()):
        figure = figures.nth(i)
        figure.scroll_into_view_if_needed()
        shown = figure.bounding_box()["width"]
        figure.click()
        big = page.locator(".pg-lightbox img")
        big.wait_for(state="visible", timeout=5_000)
        page.wait_for_function("() => { const i = document.querySelector('.pg-lightbox img');"
                               " return i.complete && i.naturalWidth > 0 && i.style.width; }", timeout=5_000)
        opened, drawn = big.bounding_box()["width"], figure.evaluate("img => img.naturalWidth")
        assert opened >= max(drawn, shown) - 1, (
            f"{path}: figure {i + 1} opens at {opened:.0f} px, drawn at {drawn} px, shown at {shown:.0f} px")
        assert opened > shown * 1.2, f"{path}: figure {i + 1} opens at {opened:.0f} px, shown at {shown:.0f} px"
        page.keyboard.press("Escape")
        page.locator(".pg-lightbox").wait_for(state="hidden", timeout=5_000)
    assert page.url.endswith(path), f"closing the figure left the page: {page.url}"
    assert not page.errors, f"{path}: " + "; ".join(page.errors)


@pytest.mark.parametrize("path, width", CASES if os.environ.get("PROFILING_GUIDE_SCREENSHOTS") else [
    pytest.param("", "", marks=pytest.mark.skip("no screenshots asked for: set PROFILING_GUIDE_SCREENSHOTS to a folder"))])
def test_screenshot(page, base_url, screenshots, path, width):
    """The page's top, its first figure and its widest table, saved for a person to look at."""
    open_at(page, base_url, path, width)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.removesuffix(".html"))
    page.screenshot(path=screenshots / f"{stem}-{width}-top.png")
    figures = page.locator(FIGURES)
    if figures.count():
        figures.first.scroll_into_view_if_needed()
        page.screenshot(path=screenshots / f"{stem}-{width}-figure.png")
        figures.first.click()
        page.locator(".pg-lightbox img").wait_for(state="visible", timeout=5_000)
        page.wait_for_function("() => document.querySelector('.pg-lightbox img').naturalWidth > 0", timeout=5_000)
        page.screenshot(path=screenshots / f"{stem}-{width}-figure-open.png")
        page.keyboard.press("Escape")
    widest = page.evaluate("""() => {
        let best = null, most = 0;
        document.querySelectorAll(".bd-article table").forEach((t, i) => {
          if (t.offsetParent && t.scrollWidth > most) { most = t.scrollWidth; best = i; } });
        return best; }""")
    if widest is not None:
        page.locator(".bd-article table").nth(widest).scroll_into_view_if_needed()
        page.screenshot(path=screenshots / f"{stem}-{width}-table.png")
    assert (screenshots / f"{stem}-{width}-top.png").stat().st_size > 0
