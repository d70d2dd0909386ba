"""The landing page of every build marks the short path for readers profiling their own model.

Read from the built HTML: the sentence above the ladder links each rung of
the path in order, and exactly those rungs carry the "short path" tag.
"""

from __future__ import annotations

import re

import pytest
from site_pages import SITE, builds

SHORT_PATH = ["1", "2", "7", "8", "9", "10"]


@pytest.mark.parametrize("build", builds() or [pytest.param(None, marks=pytest.mark.skip("no built site"))],
                         ids=[b["name"] for b in builds()] or None)
def test_the_short_path_is_said_and_marked(build):
    html = (SITE / build["prefix"] / "index.html").read_text(encoding="utf-8")
    said = re.search(r'<p class="pg-short-path">(.*?)</p>', html, re.S)
    assert said, "the landing page does not say the short path"
    linked = re.findall(r'<a class="reference internal" href="auto_examples/[^"]+"><span[^>]*>([^<]+)</span>', said.group(1))
    assert linked == SHORT_PATH, f"the short path links {linked}"
    rungs = re.findall(r'<li class="([^"]*pg-rung[^"]*)"><p><span class="pg-rung-number">([^<]+)</span>', html)
    marked = [number for classes, number in rungs if "pg-rung-short" in classes.split()]
    assert marked == SHORT_PATH, f"the rungs marked 'short path': {marked}"
