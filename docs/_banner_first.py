"""Put a chapter's recording banner on its first screen: above its first section.

A chapter prints ``chapter.banner()`` in its first code cell, which
sphinx-gallery places after the page's first section starts (the imports and
the code under study come first). Where the numbers come from (live or
replayed, which GPU, and a warning when another GPU's recording stands in)
belongs with the page's title, so the banner's output is moved there: after
the introduction, before the first section.
"""

from __future__ import annotations

from docutils import nodes

GALLERY_DIR = "auto_examples"


def banner_first(app, doctree, docname: str) -> None:
    if not docname.startswith(f"{GALLERY_DIR}/") or app.builder.format != "html":
        return
    banner = next((n for n in doctree.findall(nodes.raw) if "pg-banner" in n.astext()), None)
    page = next(iter(doctree.findall(nodes.section)), None)  # the page's title section
    first = next((c for c in page.children if isinstance(c, nodes.section)), None) if page else None
    if banner is None or first is None or first.parent is banner.parent:
        return
    banner.parent.remove(banner)
    first.parent.insert(first.parent.index(first), banner)


def setup(app):
    app.connect("doctree-resolved", banner_first)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
