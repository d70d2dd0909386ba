"""Where the built site is and which pages it has (shared by the browser tests)."""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("PROFILING_GUIDE_SITE", ROOT / "docs" / "_build" / "html"))
CHROMIUM = os.environ.get("PROFILING_GUIDE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
UNDER_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str):
    """Skip on a developer's machine; fail under CI, where a skipped browser test would hide a broken site."""
    if UNDER_CI:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def pages() -> list[str]:
    """Every HTML page of the built site (every GPU's build), relative to its root."""
    if not SITE.is_dir():
        return []
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if not {"_sources", "_static", "_downloads"} & set(p.parts))


def builds() -> list[dict]:
    """The site's builds, one per GPU, from the built ``_static/switcher.json``.

    Each has ``name`` (``"H200"``), ``version`` (its recordings folder) and
    ``prefix``: its folder in the site (``""`` for the default build, ``"h200/"``).
    """
    switcher = SITE / "_static" / "switcher.json"
    if not switcher.is_file():
        return []
    return [{**b, "prefix": "" if b["url"] in ("", "./") else b["url"]} for b in json.loads(switcher.read_text())]


def build_pages(build: dict) -> list[str]:
    """The pages of one build, relative to that build's root (other builds' folders left out)."""
    others = [b["prefix"] for b in builds() if b["prefix"] and b["prefix"] != build["prefix"]]
    return [p.removeprefix(build["prefix"]) for p in pages()
            if p.startswith(build["prefix"]) and not any(p.startswith(o) for o in others)]


def example_pages() -> list[str]:
    """The example pages of every build, relative to the site's root."""
    prefixes = [b["prefix"] for b in builds()] or [""]
    return [p for p in pages() if any(p.startswith(prefix + "auto_examples/plot_") for prefix in prefixes)]


def build_chapter_pages(build: dict) -> list[str]:
    """One build's chapter pages, deep dives included, relative to that build's root."""
    return [p for p in build_pages(build) if p.startswith("auto_examples/") and p.rsplit("/", 1)[-1].startswith("plot_")]


def chapter_pages() -> list[str]:
    """Every chapter's page of every build, deep dives (``auto_examples/deep_dives/``) included, from the site's root."""
    prefixes = [b["prefix"] for b in builds()] or [""]
    return [p for p in pages() if any(p.startswith(prefix + "auto_examples/") for prefix in prefixes)
            and p.rsplit("/", 1)[-1].startswith("plot_")]


#: What differs between two writes of the same report: its timeline's element id, drawn at random.
_RANDOM_IDS = re.compile(r"pg-itl-[0-9a-f]{8}-\d+")


@functools.cache
def same_as_in_the_default_build(path: str) -> bool:
    """Whether ``path`` (from the site's root) lies in another GPU's build and is, but for its timelines' random
    ids, the default build's page at the same place (a sample report, written the same from the same trace):
    a browser that reads one reads the other."""
    found = builds()
    build = next((b for b in found[1:] if b["prefix"] and path.startswith(b["prefix"])), None)
    if build is None:
        return False
    default = SITE / found[0]["prefix"] / path.removeprefix(build["prefix"])
    if not default.is_file():
        return False
    read = lambda p: _RANDOM_IDS.sub("", p.read_text(encoding="utf-8", errors="replace"))  # noqa: E731
    return read(SITE / path) == read(default)
