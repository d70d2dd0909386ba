"""One load of a page per screen size, shared by every browser test that reads that page at that size.

Loading a page in Chromium is most of a browser test's time, and several
tests read the same page at the same size (does it load cleanly, does its
prose scroll sideways, are its tables clipped). A test module registers the
checks it needs with :func:`check` (a JavaScript function that reads the
page and returns JSON); :class:`Visits` loads each (page, size) once, runs
every registered check there, and keeps the results for the tests to assert
on. A check that throws on a page keeps its error, so only a test that asks
for it fails. Checks that click or scroll (a figure opened, a screenshot)
stay in their own tests.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

SIZES = {"laptop": (1366, 768), "phone": (390, 844)}

#: name → (JavaScript function source, which visits run it), run in registration order.
CHECKS: dict[str, tuple[str, Callable[[str, str], bool]]] = {}


def check(name: str, script: str, where: Callable[[str, str], bool] = lambda path, size: True) -> str:
    """Run ``script`` (a JavaScript function of no arguments) at every visit ``where(path, size)`` holds for;
    its result is ``visit[name]``."""
    CHECKS[name] = (script, where)
    return name


def visiting(path: str, size: str, *, size_given: bool = True):
    """A test case that reads ``visit(path, size)``: its parameters ``(path, size)``, or ``path`` alone.

    Run on several pytest-xdist workers (``nox -s browser``), the tests that read one visit go to the
    same worker (the public ``xdist_group`` mark), which loads the page once for all of them.
    """
    group = pytest.mark.xdist_group(f"visit {path}@{size}")
    if size_given:
        return pytest.param(path, size, id=f"{path}@{size}", marks=group)
    return pytest.param(path, id=path, marks=group)


class Visits:
    def __init__(self, tab, base_url: str):
        self.tab, self.base_url = tab, base_url  # conftest's ReusedTab: one tab navigated from visit to visit
        self.seen: dict[tuple[str, str], dict] = {}

    def __call__(self, path: str, size: str = "laptop") -> dict:
        """What the checks saw on ``path`` at ``size``; ``status``, ``errors`` (console, uncaught, failed requests)."""
        if (path, size) not in self.seen:
            self.seen[(path, size)] = self._visit(path, size)
        return self.seen[(path, size)]

    def _visit(self, path: str, size: str) -> dict:
        tab = self.tab.fresh()
        width, height = SIZES[size]
        tab.set_viewport_size({"width": width, "height": height})
        response = tab.goto(f"{self.base_url}/{path}", wait_until="load")
        # The page's own scripts ran at load; wait for its fonts, which set the widths the checks read
        # (waiting for the network to idle would cost half a second a page, for nothing a page fetches late).
        tab.evaluate("document.fonts.ready.then(() => true)")
        seen = {"status": response.status if response else None}
        for name, (script, where) in CHECKS.items():
            if not where(path, size):
                continue
            try:
                seen[name] = tab.evaluate(script)
            except Exception as err:  # noqa: BLE001 - kept for the test that asks for this check
                seen[name] = {"check_failed": str(err).splitlines()[0]}
        seen["errors"] = list(tab.errors)  # the next visit clears the tab's list
        return seen
