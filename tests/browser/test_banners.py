"""Every chapter and deep dive of every GPU's build says where its numbers come from, once, naming its GPU.

Read from the built HTML (no browser needed): a page whose ``chapter.banner()``
is not the last expression of its cell shows no banner, and a page that
replays another GPU's recording must say so in the banner, by GPU name.
"""

from __future__ import annotations

import re

import pytest
from site_pages import SITE, build_chapter_pages, builds

BANNER = re.compile(r'<div class="admonition (\w+) pg-banner"><p class="admonition-title">([^<]*)</p><p>([^<]*)</p>')


def _cases():
    cases = [pytest.param(build, page, id=f"{build['name']}:{page}")
             for build in builds() for page in build_chapter_pages(build)]
    return cases or [pytest.param(None, None, marks=pytest.mark.skip("no built site: run nox -s docs"))]


@pytest.mark.parametrize("build, page", _cases())
def test_each_example_page_has_one_banner_naming_its_gpu(build, page):
    html = (SITE / build["prefix"] / page).read_text(encoding="utf-8")
    found = BANNER.findall(html)
    assert len(found) == 1, f"{build['prefix']}{page}: {len(found)} recording banners, expected 1"
    kind, title, text = found[0]
    article = html.find("<article")
    first_section = html.find("<h2", article)
    assert 0 <= article < html.find("pg-banner") < first_section, (
        f"{build['prefix']}{page}: the banner is not above the first section")
    assert build["name"] in text, f"{build['prefix']}{page}: the banner does not name the {build['name']}: {text[:160]}"
    if "numbers, not the" in text:  # another GPU's recording stands in: a warning, by GPU names
        assert kind == "warning" and title == "Another GPU's numbers", f"{build['prefix']}{page}: {kind} {title}"
