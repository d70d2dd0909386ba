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

SIZES = {"laptop": (1366, 768), "phone": (390, 844)}

#: name → JavaScript function source, run at every visit, in registration order.
CHECKS: dict[str, str] = {}


def check(name: str, script: str) -> str:
    """Run ``script`` (a JavaScript function of no arguments) at every visit; its result is ``visit[name]``."""
    CHECKS[name] = script
    return name


class Visits:
    def __init__(self, chromium, base_url: str):
        self.chromium, self.base_url = chromium, base_url
        self.seen: dict[tuple[str, str], dict] = {}

    def __call__(self, path: str, size: str = "laptop") -> dict:
        """What the checks saw on ``path`` at ``size``; ``status``, ``errors`` (console, uncaught, failed requests)."""
        if (path, size) not in self.seen:
            self.seen[(path, size)] = self._visit(path, size)
        return self.seen[(path, size)]

    def _visit(self, path: str, size: str) -> dict:
        tab = self.chromium.new_page()
        errors: list[str] = []
        tab.on("console", lambda msg: errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None)
        tab.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
        tab.on("requestfailed", lambda req: errors.append(f"request failed: {req.method} {req.url} ({req.failure})"))
        width, height = SIZES[size]
        tab.set_viewport_size({"width": width, "height": height})
        try:
            response = tab.goto(f"{self.base_url}/{path}", wait_until="load")
            # The page's own scripts ran at load; wait for its fonts, which set the widths the checks read
            # (waiting for the network to idle would cost half a second a page, for nothing a page fetches late).
            tab.evaluate("document.fonts.ready.then(() => true)")
            seen = {"status": response.status if response else None, "errors": errors}
            for name, script in CHECKS.items():
                try:
                    seen[name] = tab.evaluate(script)
                except Exception as err:  # noqa: BLE001 - kept for the test that asks for this check
                    seen[name] = {"check_failed": str(err).splitlines()[0]}
            return seen
        finally:
            tab.close()
