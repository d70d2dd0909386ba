"""What each chapter printed as the docs build ran it, read from the built HTML of every build (no browser).

The docs build is where every chapter replays, once per GPU, and the page
shows what it printed: no recording it read was stale (a build allowed to go
on past one, ``PROFILING_GUIDE_STALE=warn``, says so on the page), and nothing
it printed, its sentences of facts and its verdicts, calls a measured
reference a floor (``tests/test_vocabulary.py`` checks the sources).
"""

from __future__ import annotations

import html
import re
import sys

import pytest
from site_pages import ROOT, SITE, build_chapter_pages, builds

sys.path.insert(0, str(ROOT / "tests"))
from vocabulary import floor_misuses  # noqa: E402 - the words the tests hold the sources to


def _cases():
    cases = [pytest.param(build, page, id=f"{build['name']}:{page}")
             for build in builds() for page in build_chapter_pages(build)]
    return cases or [pytest.param(None, None, marks=pytest.mark.skip("no built site: run nox -s docs"))]


def page_text(path) -> str:
    """The page's text as a reader sees it: tags, scripts and styles left out."""
    source = re.sub(r"<(script|style)\b.*?</\1>", " ", path.read_text(encoding="utf-8"), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", source))


@pytest.mark.parametrize("build, page", _cases())
def test_the_chapter_replayed_no_stale_recording_and_calls_no_reference_a_floor(build, page):
    text = page_text(SITE / build["prefix"] / page)
    stale = re.findall(r"recording \S+ is stale", text)
    assert not stale, f"{build['prefix']}{page}: {stale}: re-record on a GPU (DEVELOPING.md)"
    assert not floor_misuses(text), f"{build['prefix']}{page}: {floor_misuses(text)}"


def test_the_checks_see_a_stale_recording_and_a_floor(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<pre>WARNING: recording 01_linear.eager is stale: its code changed</pre>"
                    "<p>cuBLAS&#39;s rate is the floor</p><script>Math.floor(x)</script>")
    text = page_text(page)
    assert re.findall(r"recording \S+ is stale", text) and len(floor_misuses(text)) == 1
