"""The built site, served on 127.0.0.1, and a headless Chromium to read it.

These tests read an existing ``docs/_build/html`` (``nox -s docs`` builds it)
and drive Debian's Chromium (``/usr/bin/chromium``) through Playwright; no
browser is downloaded. Run them with ``nox -s browser``.

Where Chromium or Playwright is missing the browser tests are skipped with the
package to install, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from site_pages import CHROMIUM, CHROMIUM_ARGS, SITE, unavailable
from site_visits import Visits


def pytest_configure(config):
    # pytest-xdist's mark (site_visits.visiting), known without pytest-xdist too: there it does nothing
    config.addinivalue_line("markers", "xdist_group(name): the tests of one group run on one pytest-xdist worker")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's, on the process that hands out the tests
def pytest_xdist_node_collection_finished(node, ids):
    """Stop if ``--dist loadgroup`` lost the visits' groups (a pytest this pytest-xdist does not know)."""
    if node.config.getoption("dist") == "loadgroup" and ids and not any("@visit " in nodeid for nodeid in ids):
        pytest.exit("pytest-xdist's loadgroup lost the tests' groups: install the pytest noxfile.py names", returncode=4)


@pytest.fixture(scope="session")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site in {SITE}: run nox -s docs first")
    return SITE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """``folder`` served over HTTP on 127.0.0.1, on a free port the OS picks; yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def base_url(site: Path):
    """The site served at the server's root."""
    with serve(site) as url:
        yield url


@pytest.fixture(scope="session")
def prefixed_url(site: Path):
    """The site served below a folder (``/any/prefix/``), as a reader's own server may put it."""
    root = Path(tempfile.mkdtemp(prefix="pg-served-"))
    (root / "any").mkdir()
    (root / "any" / "prefix").symlink_to(site.resolve(), target_is_directory=True)
    with serve(root) as url:
        yield f"{url}/any/prefix"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def playwright_api():
    """Playwright, started once for the session (it drives every Chromium the tests open)."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"Chromium not found at {CHROMIUM}: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright for Python is not installed: pip install playwright (or run nox -s browser)")
    with sync_playwright() as pw:
        yield pw


def _did_not_start(err: Exception):
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    unavailable(f"Chromium at {CHROMIUM} did not start ({first}): apt-get install chromium")


@pytest.fixture(scope="session")
def chromium(playwright_api):
    """Debian's Chromium, headless, with a fresh profile and no background network traffic."""
    profile = tempfile.mkdtemp(prefix="pg-chromium-")
    try:
        context = playwright_api.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1280, "height": 900},
        )
    except Exception as err:  # noqa: BLE001 - the message names the fix either way
        _did_not_start(err)
    yield context
    context.close()
    shutil.rmtree(profile, ignore_errors=True)


#: A phone as Chromium emulates one: 390×844 CSS px (an iPhone 12 to 14), 3 device pixels to the CSS
#: pixel (so the browser picks a figure's 2x image), touch, and the page's mobile viewport.
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "is_mobile": True, "has_touch": True}


@pytest.fixture(scope="session")
def phone(playwright_api):
    """Chromium as a phone (:data:`PHONE`): taps are touches, not clicks."""
    try:
        browser = playwright_api.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    except Exception as err:  # noqa: BLE001 - the message names the fix either way
        _did_not_start(err)
    context = browser.new_context(**PHONE)
    yield context
    context.close()
    browser.close()


_SCREENSHOTS: list[Path] = []


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where the browser tests save screenshots: ``$PROFILING_GUIDE_SCREENSHOTS``, else a new temporary folder."""
    chosen = os.environ.get("PROFILING_GUIDE_SCREENSHOTS")
    folder = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="pg-screenshots-"))
    folder.mkdir(parents=True, exist_ok=True)
    _SCREENSHOTS.append(folder)
    return folder


def pytest_terminal_summary(terminalreporter):
    for folder in _SCREENSHOTS:
        count = len(list(folder.glob("*.png")))
        terminalreporter.write_line(f"screenshots: {count} in {folder}")


def _recording_tab(context):
    """A new tab of ``context`` that records console errors, uncaught exceptions and failed requests."""
    tab = context.new_page()
    tab.errors = []
    # which test's page issued each request: a request the page before issued (its favicon, fetched after its
    # load) is cut off when a reused tab (ReusedTab) leaves it, and is not this page's failure
    tab.generation, issued = 0, {}
    tab.on("request", lambda req: issued.__setitem__(req, tab.generation))
    tab.on("requestfinished", lambda req: issued.pop(req, None))
    tab.on("console", lambda msg: tab.errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: tab.errors.append(f"uncaught: {exc}"))
    tab.on("requestfailed", lambda req: tab.errors.append(f"request failed: {req.method} {req.url} ({req.failure})")
           if issued.pop(req, tab.generation) == tab.generation else None)
    return tab


@pytest.fixture
def page(chromium):
    """A new tab that records console errors and uncaught exceptions."""
    tab = _recording_tab(chromium)
    yield tab
    tab.close()


class ReusedTab:
    """One recording tab of a browser context, navigated from page to page.

    Opening a tab costs about as much as loading a page into it (0.53 s a
    visit with a new tab, 0.28 s reusing one, on the 2-core CI machine), and
    a navigation leaves nothing of the page before it but the history. For
    tests that only load a page, read it and click in it; a test that adds
    listeners or changes the tab's settings takes a new tab (:func:`page`).
    """

    def __init__(self, context):
        self.context, self.tab = context, None

    def fresh(self):
        """The tab, its recorded errors cleared (a new one if the last test left it closed or crashed)."""
        if self.tab is None or self.tab.is_closed():
            self.tab = _recording_tab(self.context)
        self.tab.errors.clear()
        self.tab.generation += 1
        return self.tab


@pytest.fixture(scope="session")
def _reused_laptop(chromium):
    return ReusedTab(chromium)


@pytest.fixture(scope="session")
def _reused_phone(phone):
    return ReusedTab(phone)


@pytest.fixture
def laptop_tab(_reused_laptop):
    """:func:`page`, but the worker's one reused tab (:class:`ReusedTab`)."""
    return _reused_laptop.fresh()


@pytest.fixture
def phone_tab(_reused_phone):
    """The worker's one reused tab on the phone (:data:`PHONE`; :class:`ReusedTab`), recording errors as
    :func:`page` does."""
    return _reused_phone.fresh()


@pytest.fixture(scope="session")
def visit(_reused_laptop, base_url):
    """``visit(path, size)``: what every registered check saw there, each (page, size) loaded once per run."""
    return Visits(_reused_laptop, base_url)
