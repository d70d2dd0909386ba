"""Figures that stay legible on a phone: a Sphinx extension and sphinx-gallery's image scraper.

sphinx-gallery saves each matplotlib figure of a chapter as a PNG, and a 2x
PNG for sharp screens. Shrunk to a phone's column (about 358 px of an 820 px
figure) its text was about 4 px high. Here:

* :func:`scrape_figures` saves the figures as sphinx-gallery does and adds to
  each figure's ``image-sg`` directive the size of its smallest text, in
  pixels of the 1x image (``:text-px:``; matplotlib: points × dpi / 72);
* the HTML of such a figure is
  ``<div class="pg-figure"><a class="pg-zoom" href="…_2_00x.png"><img …></a></div>``;
  the ``<img>`` carries its size (``width``, ``height``), ``data-text-px``,
  and ``--pg-legible-width``: the width at which that text is
  :data:`LEGIBLE_PX` high. guide.css never shows the figure narrower than
  that: where the column is narrower, the figure scrolls sideways in its box.
  The link opens the full-size image (guide.js shows it in a lightbox; without
  JavaScript the browser opens the image itself).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from docutils.parsers.rst import directives
from sphinx_gallery.directives import ImageSg, depart_imgsg_html, imgsgnode, visit_imgsg_html

#: The smallest text height a figure is shown at, in CSS pixels (tests/browser/test_figures.py checks it).
LEGIBLE_PX = 9


def _drawn_texts(artist):
    """The non-empty texts of ``artist`` and its children that are drawn (no hidden axes, no hidden tick label)."""
    from matplotlib.text import Text

    if not artist.get_visible():
        return
    if isinstance(artist, Text):
        if artist.get_text().strip():
            yield artist
        return
    for child in artist.get_children():
        yield from _drawn_texts(child)


#: mathtext draws a superscript or subscript (a log axis's 2¹⁰) at 70 % of its text's size.
MATH_SCRIPT = 0.7


def _smallest_pt(text) -> float:
    """The size of the smallest characters of ``text`` in points: its font size, or its math scripts'."""
    words = text.get_text()
    scripted = words.count("$") >= 2 and re.search(r"[\^_]", words) and not text.get_usetex()
    return text.get_fontsize() * (MATH_SCRIPT if scripted else 1.0)


def smallest_text_px(fig) -> float | None:
    """The font size of the smallest text ``fig`` draws, in pixels of the PNG saved at its 1x dpi; None if no text."""
    import matplotlib

    fig.draw_without_rendering()  # tick labels get their text when the figure is drawn
    sizes = [_smallest_pt(text) for text in _drawn_texts(fig)]
    dpi = matplotlib.rcParams["savefig.dpi"]
    dpi = fig.dpi if dpi == "figure" else dpi
    return min(sizes) * dpi / 72 if sizes else None


def scrape_figures(block, block_vars, gallery_conf, **kwargs) -> str:
    """sphinx-gallery's matplotlib scraper, each figure's ``image-sg`` given its smallest text as ``:text-px:``."""
    import matplotlib.pyplot as plt
    from sphinx_gallery.scrapers import matplotlib_scraper

    # measured before the scraper saves and closes the figures; it writes one image-sg per figure, in this order
    sizes = iter([smallest_text_px(plt.figure(n)) for n in plt.get_fignums()])

    def with_size(found: re.Match) -> str:
        px = next(sizes, None)
        return found.group(0) if px is None else f"{found.group(0)}{found.group(1)}:text-px: {px:.2f}"

    rst = matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)
    return re.sub(r"(\n[ \t]+):class: sphx-glr-(?:single|multi)-img", with_size, rst)


class FigureImage(ImageSg):
    """sphinx-gallery's ``image-sg``, with the figure's smallest text size (``:text-px:``)."""

    option_spec = {**ImageSg.option_spec, "text-px": float}

    def run(self):
        nodes = super().run()
        nodes[0]["text_px"] = self.options.get("text-px")
        return nodes


def _png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height, from its header."""
    head = path.read_bytes()[16:24]
    return int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")


def visit_figure_html(self, node) -> None:
    """sphinx-gallery's ``<img>``, with its size and legible width, in a box that scrolls and a link to the 2x image."""
    start = len(self.body)
    visit_imgsg_html(self, node)
    text_px = node.get("text_px")
    if not text_px or node["srcset"] is None:
        return
    img = "".join(self.body[start:])
    # the srcset's densest image ("a.png, a_2_00x.png 2.00x") is the one the link opens
    entries = [e.split() for e in re.search(r'srcset="([^"]*)"', img).group(1).split(",")]
    full = max(entries, key=lambda e: float(e[1].rstrip("x")) if len(e) > 1 else 1.0)[0]
    width, height = _png_size(Path(self.builder.srcdir) / node["uri"].lstrip("/"))
    legible = math.ceil(width * LEGIBLE_PX / text_px)
    img = img.replace("<img ", f'<img width="{width}" height="{height}" data-text-px="{text_px:g}" '
                               f'style="--pg-legible-width: {legible}px" ', 1)
    self.body[start:] = [f'<div class="pg-figure"><a class="pg-zoom" href="{full}" '
                         f'title="Open the figure at full size">{img}</a></div>']


def setup(app):
    # after sphinx_gallery.gen_gallery, whose directive and HTML writer these replace
    app.add_directive("image-sg", FigureImage, override=True)
    app.add_node(imgsgnode, override=True, html=(visit_figure_html, depart_imgsg_html))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
