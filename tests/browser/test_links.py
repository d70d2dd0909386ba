"""Every relative link, image and script of the built site resolves to a file (and anchor).

No browser and no network: the HTML is parsed and each ``href``/``src``/``srcset``
checked against the files of ``docs/_build/html``, the other GPUs' builds in
its subfolders included. Links to other sites are left alone. Each build has
the same pages and the same GPU switcher JSON, whose folders hold the builds.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from site_pages import SITE, build_pages, builds, example_pages, pages


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None and not (tag == "link" and attrs.get("rel") in ("preconnect", "dns-prefetch")):
                self.refs.append((tag, key, attrs[key]))
        if attrs.get("srcset"):
            for candidate in attrs["srcset"].split(","):
                if candidate.strip():
                    self.refs.append((tag, "srcset", candidate.split()[0]))


@cache
def parse(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def broken_links(page: str) -> list[str]:
    here = SITE / page
    problems = []
    for tag, attr, value in parse(here).refs:
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme or parts.netloc or value.startswith(("mailto:", "javascript:", "data:")):
            continue  # another site, or not a file
        if not parts.path:
            target = here
        else:
            target = (SITE / parts.path.lstrip("/")) if parts.path.startswith("/") else (here.parent / unquote(parts.path))
            target = Path(*target.parts)  # keep '..' for resolve()
            target = target.resolve()
            if target.is_dir():
                target = target / "index.html"
            if SITE.resolve() not in target.parents and target != SITE.resolve():
                problems.append(f"<{tag} {attr}={value!r}> leaves the site")
                continue
            if not target.is_file():
                problems.append(f"<{tag} {attr}={value!r}>: no file {target.relative_to(SITE.resolve())}")
                continue
        fragment = unquote(parts.fragment)
        if fragment and target.suffix == ".html" and fragment not in parse(target).ids:
            problems.append(f"<{tag} {attr}={value!r}>: no id {fragment!r} in {target.name}")
    return problems


@pytest.fixture(scope="module")
def all_pages(site):
    found = pages()
    assert found, f"no HTML pages in {site}"
    return found


def test_the_site_has_its_pages(all_pages):
    for prefix in [b["prefix"] for b in builds()] or [""]:
        for page in ("index.html", "api.html", "about.html", "search.html", "auto_examples/index.html"):
            assert prefix + page in all_pages, f"{prefix + page} is missing from the built site"


def test_every_gpu_build_has_the_same_pages_and_switcher(site):
    found = builds()
    assert len(found) >= 2, f"{site}/_static/switcher.json lists {len(found)} build(s): one per GPU expected"
    switcher = (SITE / "_static" / "switcher.json").read_text()
    default = set(build_pages(found[0]))
    for build in found:
        root = SITE / build["prefix"]
        assert (root / "_static" / "switcher.json").read_text() == switcher, f"{build['prefix']}: another switcher.json"
        assert set(build_pages(build)) == default, (
            f"{build['name']} build: pages differ from the {found[0]['name']} build's: "
            f"{sorted(set(build_pages(build)) ^ default)[:10]}")
        match = re.search(r"theme_switcher_version_match = '([^']*)'", (root / "index.html").read_text())
        assert match and match.group(1) == build["version"], f"{build['prefix']}index.html is not the {build['name']} build"
    assert [b["version"] for b in found] == [b["version"] for b in json.loads(switcher)]


# Half the site's pages each (its every other page): two workers of `nox -s browser` parse them at once.
HALVES = [pytest.param(half, id=f"half{half + 1}") for half in (0, 1)]


@pytest.mark.parametrize("half", HALVES)
def test_every_relative_link_resolves(all_pages, half):
    problems = defaultdict(list)
    for page in all_pages[half::2]:
        for problem in broken_links(page):
            problems[page].append(problem)
    report = "\n".join(f"{page}: {p}" for page, ps in problems.items() for p in ps[:10])
    assert not problems, f"{sum(map(len, problems.values()))} broken internal link(s):\n{report}"


def test_every_example_links_its_traces(all_pages):
    """Each example page links the recordings it was computed from under _recordings/: every trace of its
    build's recordings named after it, and, for a page of measurements alone (chapter 6c's counters), its run records."""
    examples = example_pages()
    if not examples:
        pytest.skip("no example pages were built")
    problems = []
    for page in examples:
        here = (SITE / page).parent
        linked = [(here / unquote(value)).resolve() for _, attr, value in parse(SITE / page).refs
                  if attr == "href" and "_recordings/" in value]  # fmt: skip
        stem = Path(page).stem.removeprefix("plot_")
        # the page's build's recordings named after it: every trace among them must be linked
        folders = {path.parent for path in linked}
        traces = {p for folder in folders for p in folder.glob(f"{stem}.*.trace.json.gz")}
        if not linked or not traces <= set(linked):
            problems.append(f"{page}: links {len(linked)} recordings, misses {sorted(p.name for p in traces - set(linked))}")
    assert not problems, "example pages that do not link their recordings under _recordings/:\n" + "\n".join(problems)
