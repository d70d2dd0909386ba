"""Link each glossary term from its first use in a page's prose.

A chapter's prose comes from comments in its ``.py`` file, where writing
``:term:`` roles by hand would clutter the code a reader copies. So after
Sphinx has resolved a page, the first occurrence of every term of the
glossary (``docs/concepts/glossary.md``) in an ordinary paragraph becomes a
link to its entry. Code, titles, existing links and program output (raw
HTML, literal blocks) are left alone. A few terms are also everyday words
(``kernel``, ``reference``, ``stream``): those are linked only where a page
says so with a ``{term}`` role.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx import addnodes

from _glossary_terms import GLOSSARY, NOT_AUTOMATIC, term_pattern

#: Nodes whose text is never prose: code, titles, links, captions.
SKIP = (nodes.literal, nodes.literal_block, nodes.reference, nodes.title, nodes.rubric, nodes.caption,
        nodes.raw, nodes.term, addnodes.pending_xref, addnodes.desc_signature, nodes.FixedTextElement)


def _terms(env) -> list[tuple[str, str, re.Pattern]]:
    """(term, anchor, pattern) for every glossary term, longest first (``device time`` before ``device``)."""
    std = env.get_domain("std")
    found = [(name, anchor) for (kind, name), (docname, anchor) in std.objects.items()
             if kind == "term" and docname == GLOSSARY and name.lower() not in NOT_AUTOMATIC]
    return [(name, anchor, term_pattern(name)) for name, anchor in sorted(found, key=lambda t: -len(t[0]))]


def _in_skipped(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, SKIP):
            return True
        parent = parent.parent
    return False


def link_first_uses(app, doctree, docname: str) -> None:
    if docname == GLOSSARY or app.builder.format != "html":
        return
    terms = _terms(app.env)
    if not terms:
        return
    uri = app.builder.get_relative_uri(docname, GLOSSARY)
    linked = {anchor for ref in doctree.findall(nodes.reference)
              for anchor in [ref.get("refuri", "").partition("#")[2]] if anchor}
    for paragraph in list(doctree.findall(nodes.paragraph)):
        if _in_skipped(paragraph):
            continue
        for text in list(paragraph.findall(nodes.Text)):
            if _in_skipped(text):
                continue
            _link_in(text, terms, linked, uri)


def _link_in(text: nodes.Text, terms, linked: set, uri: str) -> None:
    """Replace ``text`` by pieces with a link at the first use of each term not linked yet on the page."""
    source = str(text)
    hits = []
    for name, anchor, pattern in terms:
        if anchor in linked:
            continue
        match = pattern.search(source)
        if match and not any(match.start() < end and start < match.end() for start, end, _ in hits):
            hits.append((match.start(), match.end(), anchor))
            linked.add(anchor)
    if not hits:
        return
    pieces, at = [], 0
    for start, end, anchor in sorted(hits):
        pieces.append(nodes.Text(source[at:start]))
        pieces.append(nodes.reference(source[start:end], source[start:end], internal=True,
                                      refuri=f"{uri}#{anchor}", classes=["pg-term"]))
        at = end
    pieces.append(nodes.Text(source[at:]))
    text.parent.replace(text, pieces)


def setup(app):
    app.connect("doctree-resolved", link_first_uses)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
