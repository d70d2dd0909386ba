"""Where the built site is and which pages it has (shared by the browser tests)."""

from __future__ import annotations

import os
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
    """Every HTML page of the built site, relative to its root."""
    if not SITE.is_dir():
        return []
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if not {"_sources", "_static", "_downloads"} & set(p.parts))


def example_pages() -> list[str]:
    return [p for p in pages() if p.startswith("auto_examples/plot_")]
