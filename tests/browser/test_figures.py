"""Every chapter's figures on a phone, in every GPU's build, deep dives included.

Chromium emulates a phone (conftest's ``PHONE``: 390×844, touch, 3 device
pixels to the CSS pixel). Each figure's ``<img>`` says how high its smallest
text is, in pixels of its 1x image (``data-text-px``, written by
docs/_figures.py from the figure's matplotlib font sizes and dpi). Shown at
the width the page gives it by default, that text is ``data-text-px × shown
width / natural width`` CSS px high: it must be at least 9. A figure wider
than the column scrolls in a box of its own to its right edge, the page never
sideways, and a line under it says so; a tap opens it at full size, the
close button closes it, and Back closes it staying on the page. One load of
each page on the phone for all of these.
"""

from __future__ import annotations

import pytest
from site_pages import SITE, chapter_pages

LEGIBLE_PX = 9
CHAPTERS = chapter_pages()
FIGURES = ".bd-article img.sphx-glr-single-img, .bd-article img.sphx-glr-multi-img"
WITH_FIGURES = [p for p in CHAPTERS if "sphx-glr-single-img" in (SITE / p).read_text()
                or "sphx-glr-multi-img" in (SITE / p).read_text()]

# Each figure as shown: its text's size on screen, and whether its box reaches its right edge.
MEASURE = """
(selector) => [...document.querySelectorAll(selector)].map((img, i) => {
  const shown = img.getBoundingClientRect().width, text = parseFloat(img.dataset.textPx);
  let box = img.parentElement;
  while (box && box !== document.body && !["auto", "scroll"].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
  const page = document.documentElement.clientWidth;
  let reaches = img.getBoundingClientRect().right <= page + 1, hinted = null;
  if (!reaches && box && box !== document.body) {
    hinted = box.classList.contains("pg-figure-wide") && !["none", "normal", '""'].includes(getComputedStyle(box, "::after").content);
    box.scrollLeft = box.scrollWidth;
    const b = box.getBoundingClientRect();
    reaches = b.right <= page + 1 && img.getBoundingClientRect().right <= b.right + 1;
    box.scrollLeft = 0;
  }
  return {figure: i + 1, name: img.getAttribute("src").split("/").pop(), text_px: isNaN(text) ? null : text,
          shown: Math.round(shown), natural: img.naturalWidth,
          on_screen_px: isNaN(text) ? null : Math.round(100 * text * shown / img.naturalWidth) / 100, reaches, hinted};
})
"""


def open_on_phone(page, url: str):
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: HTTP {response.status if response else 'no response'}"
    page.evaluate("document.fonts.ready.then(() => true)")
    page.wait_for_function(f"() => [...document.querySelectorAll({FIGURES!r})].every(i => i.complete && i.naturalWidth > 0)",
                           timeout=10_000)


@pytest.mark.parametrize("path", CHAPTERS or [pytest.param("", marks=pytest.mark.skip("no chapter pages were built"))])
def test_figure_text_is_legible_on_a_phone_and_a_tap_opens_each_figure(phone_tab, base_url, path):
    """At 390×844 no figure's smallest text is shown under 9 px high, and every figure can be seen to its right
    edge; a tap (a touch, not a click) opens each at no less than the size it was drawn for, × closes it, and
    Back closes an open figure and stays on the page."""
    open_on_phone(phone_tab, f"{base_url}/{path}")
    figures = phone_tab.evaluate(MEASURE, FIGURES)
    unknown = [f["name"] for f in figures if f["text_px"] is None]
    assert not unknown, f"{path}: figures without data-text-px (their text size is unknown): {unknown}"
    small = [f for f in figures if f["on_screen_px"] < LEGIBLE_PX]
    assert not small, f"{path} on a phone: figure text under {LEGIBLE_PX} px: {small}"
    cut = [f for f in figures if not f["reaches"]]
    assert not cut, f"{path} on a phone: figures whose right edge cannot be reached: {cut}"
    silent = [f["name"] for f in figures if f["hinted"] is False]
    assert not silent, f"{path} on a phone: figures that scroll sideways without a line saying so: {silent}"
    sideways = phone_tab.evaluate("() => document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth")
    assert sideways <= 0, f"{path} on a phone: the page scrolls sideways by {sideways} px"

    shown = phone_tab.locator(FIGURES)
    assert (shown.count() > 0) == (path in WITH_FIGURES), f"{path}: the page's figures are not all shown"
    for i in range(shown.count()):
        figure = shown.nth(i)
        figure.scroll_into_view_if_needed()
        drawn = figure.evaluate("img => img.naturalWidth")
        figure.tap()
        big = phone_tab.locator(".pg-lightbox img")
        big.wait_for(state="visible", timeout=5_000)
        phone_tab.wait_for_function("() => { const i = document.querySelector('.pg-lightbox img');"
                                     " return i.complete && i.naturalWidth > 0 && i.style.width; }", timeout=5_000)
        opened = big.bounding_box()["width"]
        assert opened >= drawn - 1, f"{path}: figure {i + 1} opens at {opened:.0f} px, drawn at {drawn} px"
        phone_tab.locator(".pg-lightbox button").tap()
        phone_tab.locator(".pg-lightbox").wait_for(state="hidden", timeout=5_000)
        assert phone_tab.url.endswith(path), f"{path}: closing figure {i + 1} left the page: {phone_tab.url}"
    if shown.count():
        shown.first.tap()
        phone_tab.locator(".pg-lightbox img").wait_for(state="visible", timeout=5_000)
        phone_tab.go_back()
        phone_tab.locator(".pg-lightbox").wait_for(state="hidden", timeout=5_000)
        assert phone_tab.url.endswith(path), f"{path}: Back from an open figure left the page: {phone_tab.url}"
    assert not phone_tab.errors, f"{path}: " + "; ".join(phone_tab.errors)
