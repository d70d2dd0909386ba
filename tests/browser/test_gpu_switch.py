"""Two GPUs, one switch: every page exists in the H100 and the H200 build of the site.

In headless Chromium, with the site served below a folder (``/any/prefix/``):
the navbar's GPU switch (the theme's version switcher) names this page's GPU,
and following it to the other GPU lands on the same page of the other build,
computed from that GPU's recordings. The switch is the theme's one script,
which computes the other build's address from the page's own: it is followed
from a page at each depth (the landing page, a chapter, a deep dive) of each
build. What differs from page to page is read from the built HTML of every
page: each build has every page (test_links.py), each page is marked as its
build's GPU for the switch to name, names that GPU in its one banner
(test_banners.py) and links that GPU's recordings. The landing page of each
build shows both GPUs' headline figures, as their ``bench_mlp.json`` holds them.
"""

from __future__ import annotations

import json
import re

import pytest
from site_pages import ROOT, SITE, build_pages, builds

BUILDS = builds()
RECORDINGS = ROOT / "docs" / "recordings"


#: A page at each depth of a build: the switch computes the other build's address from the page's own.
FOLLOWED = ["index.html", "auto_examples/plot_01_linear.html", "auto_examples/deep_dives/plot_09_deep_attention.html"]


def _cases():
    """(build, other build, page) for a page at each depth of every build."""
    cases = []
    for build in BUILDS:
        pages = [p for p in FOLLOWED if p in build_pages(build)]
        for other in BUILDS:
            if other is not build:
                cases += [pytest.param(build, other, p, id=f"{build['name']}->{other['name']}:{p}") for p in pages]
    return cases or [pytest.param(None, None, "", marks=pytest.mark.skip("the site has no second GPU build"))]


def _every_page():
    cases = [pytest.param(build, p, id=f"{build['name']}:{p}") for build in BUILDS
             for p in ["index.html", *(p for p in build_pages(build) if p.startswith("auto_examples/plot_"))]]
    return cases or [pytest.param(None, "", marks=pytest.mark.skip("the site has no GPU builds"))]


@pytest.mark.parametrize("build, path", _every_page())
def test_every_page_is_its_builds_gpu_and_links_that_gpus_recordings(build, path):
    """What the switch shows and lands on, page by page, read from the built HTML."""
    html = (SITE / build["prefix"] / path).read_text(encoding="utf-8")
    match = re.search(r"theme_switcher_version_match = '([^']*)'", html)
    assert match and match.group(1) == build["version"], f"{build['prefix']}{path}: the switch would name another GPU"
    if not path.startswith("auto_examples/"):
        return
    if "numbers, not the" in html:
        # a chapter not yet recorded on that GPU (or a set of several ranks): the banner names whose it replays
        assert "_recordings/" in html, f"{build['prefix']}{path}: links no recordings"
        return
    version = re.escape(build["version"])
    assert re.search(rf'class="pg-downloads".*?href="[^"]*_recordings/{version}(-x\d+)?/', html, re.S), (
        f"{build['prefix']}{path}: does not link {build['name']} recordings")


def open_page(page, url: str):
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: HTTP {response.status if response else 'no response'}"


def switcher(page):
    """The visible GPU switch's button, once the theme has filled its menu."""
    button = page.locator(".version-switcher__button:visible").first
    button.wait_for()
    page.wait_for_function("document.querySelector('.version-switcher__button').dataset.activeVersionName")
    return button


@pytest.mark.parametrize("build, other, path", _cases())
def test_the_switch_leads_to_the_same_page_on_the_other_gpu(page, prefixed_url, build, other, path):
    open_page(page, f"{prefixed_url}/{build['prefix']}{path}")
    button = switcher(page)
    assert button.inner_text().strip() == build["name"], f"{path}: the switch does not name this build's GPU"
    button.click()
    menu = page.locator(f"#{button.get_attribute('aria-controls')}")
    target = menu.locator(f"a[data-version='{other['version']}']")
    assert target.count() == 1, f"{path}: the switch offers no {other['name']}"
    with page.expect_navigation(url=f"{prefixed_url}/{other['prefix']}{path}", wait_until="load"):
        target.click()
    assert switcher(page).inner_text().strip() == other["name"], f"{path}: landed on a page of another build"
    # The theme checks that the page exists with a HEAD request, then leaves the
    # page: Chromium reports that request as aborted.
    errors = [e for e in page.errors if not (e.startswith("request failed: HEAD") and "ERR_ABORTED" in e)]
    assert not errors, f"{path}: " + "; ".join(errors)
    if not path.startswith("auto_examples/"):
        return
    banner = page.locator(".pg-banner")
    if banner.count() and "numbers, not the" in banner.first.inner_text():
        # a chapter not yet recorded on that GPU (or a set of several ranks): the banner names whose it replays
        stand_in = page.locator(".pg-downloads a[href*='_recordings/']")
        assert stand_in.count() > 0, f"{other['prefix']}{path}: links no recordings"
        return
    # that GPU's folder, or its folder of several ranks (<gpu>-x<n>)
    links = page.locator(f".pg-downloads a[href*='_recordings/{other['version']}/'], "
                         f".pg-downloads a[href*='_recordings/{other['version']}-x']")
    assert links.count() > 0, f"{other['prefix']}{path}: does not link {other['name']} recordings"
    assert banner.count() == 1, f"{other['prefix']}{path}: {banner.count()} recording banners, expected 1"
    assert other["name"] in banner.first.inner_text(), f"{other['prefix']}{path}: the banner names another GPU"


def _headline_figures(version: str) -> list[str]:
    """What the landing page must show for one GPU, formatted as it does."""
    bench = json.loads((RECORDINGS / version / "bench_mlp.json").read_text())
    refs, variants, alone = bench["references"], bench["variants_us"], bench["gemms_alone_us"]
    # the headline names our fastest design in the run: the Gluon one where the benchmark has it
    fused = variants.get("fused-pingpong", variants["fused-packed-tma"])["median"]
    return [
        bench["gpu"]["name"],
        f"{refs['gemm_tflops']['spread']['median']:,.1f} TFLOP/s (IQR {refs['gemm_tflops']['spread']['q1']:,.1f}",
        f"{refs['copy_tbps']['spread']['median']:,.2f} TB/s",
        f"{alone['median']:,.1f} µs (IQR {alone['q1']:,.1f}–{alone['q3']:,.1f})",
        f"{fused:,.1f} µs, {fused / alone['median']:.3f}× the GEMMs alone at {bench['shape']['rows']:,} rows",
        *(f"{variants[v]['median']:,.1f} µs" for v in ("eager", "compile", "liger")),
    ]


@pytest.mark.parametrize("build", BUILDS or [pytest.param(None, marks=pytest.mark.skip("no builds"))],
                         ids=[b["name"] for b in BUILDS] or None)
def test_landing_page_shows_both_gpus_headline_figures(page, base_url, build):
    open_page(page, f"{base_url}/{build['prefix']}index.html")
    table = page.locator("table.pg-headlines")
    assert table.count() == 1, "the landing page has no headline table"
    heads = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    assert heads[1:] == [b["name"] for b in BUILDS], f"columns {heads[1:]}: one per GPU expected"
    for column, other in enumerate(BUILDS, start=2):
        cells = " | ".join(table.locator(f"tbody tr > td:nth-child({column})").all_inner_texts())
        for figure in _headline_figures(other["version"]):
            assert figure in cells, f"{other['name']} column: {figure!r} not in {cells!r}"
    posts = [page.locator(f"a[href='https://huggingface.co/blog/{slug}']").count()
             for slug in ("torch-profiler", "torch-mlp-fusion")]
    assert all(posts), "the landing page links both posts"
