"""The sample ``profiling-guide report`` pages of the built site, in headless Chromium.

The docs build writes them into ``_reports/``: one from an H100 recording of
ours, one for each trace recorded on a GPU by ``scripts/record_report_samples.py``
(a transformers training step among them), one for each trace of
HolisticTraceAnalysis's test data. Each must open
without a console error or a failed request, from the site (test_pages.py
loads every page of the site so) and straight from disk (it is one
self-contained file), show its tables and its timeline, and the timeline must
answer: hovering a kernel names it, the zoom buttons zoom.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_SAMPLES = sorted(p.name.removesuffix(".trace.json.gz") for p in (ROOT / "tests/data/gpu_samples").glob("*.trace.json.gz"))
HTA_SAMPLES = sorted(p.name.removesuffix(".json.gz") for p in (ROOT / "tests/data/hta").glob("*.json.gz"))
REPORTS = ["_reports/02_mlp_eager.eager.report.html",
           *(f"_reports/{name}.report.html" for name in GPU_SAMPLES),
           *(f"_reports/hta_{name}.report.html" for name in HTA_SAMPLES)]

LONGEST_GPU_BAR = """
() => {
  const root = document.querySelector(".pg-itl");
  const data = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  const lane = data.lanes.findIndex(l => l.kind === "gpu");
  const bars = data.lanes[lane].bars;
  let best = 0;
  bars.forEach((b, i) => { if (b[1] > bars[best][1]) best = i; });
  const [x, y] = root.pgTimeline.barCenter(lane, best);
  const box = root.querySelector("canvas").getBoundingClientRect();
  return {x: box.left + x, y: box.top + y, label: data.strings[bars[best][2]]};
}
"""


def view_width(page) -> float:
    start, end = (float(v) for v in page.locator(".pg-itl").get_attribute("data-view").split(","))
    return end - start


# Hover and zoom are checked where the timeline has a GPU lane with long bars: our recording, the
# transformers training step and a 128-rank job's trace; every report is opened and read.
INTERACTIVE = ["_reports/02_mlp_eager.eager.report.html", "_reports/llama_train_step.report.html",
               "_reports/hta_sampled_rank-0.report.html"]


@pytest.mark.parametrize("path", REPORTS)
def test_every_report_opens_from_disk_with_its_sections_and_nothing_to_fetch(page, site, path):
    assert (site / path).is_file(), f"{path} is missing: the docs build writes it (docs/conf.py)"
    page.goto((site / path).resolve().as_uri(), wait_until="load")
    # environment, steps, kernels and ops; memsets and memcpys where the trace has any
    assert page.locator("table.pg-table").count() >= 4, "environment, steps, kernels and ops tables"
    for section in ("pace", "timeline", "kernels", "ops", "health"):
        assert page.locator(f"section#{section}").is_visible()
    assert page.locator(".pg-itl canvas").count() == 1
    assert not page.errors, "; ".join(page.errors)


@pytest.mark.parametrize("path", INTERACTIVE)
def test_report_page_shows_its_tables_and_an_interactive_timeline(page, site, base_url, path):
    assert (site / path).is_file(), f"{path} is missing: the docs build writes it (docs/conf.py)"
    page.goto(f"{base_url}/{path}", wait_until="load")
    canvas = page.locator(".pg-itl canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 30, box

    bar = page.evaluate(LONGEST_GPU_BAR)
    page.mouse.move(bar["x"], bar["y"])
    tip = page.locator(".pg-itl-tip")
    tip.wait_for(state="visible", timeout=5_000)
    assert_inside_viewport(page, tip)
    # Where bars overlap (a training step's kernels on several streams), the tip names the topmost one.
    assert "µs" in tip.inner_text() and tip.inner_text().strip()
    if path in REPORTS[:1] or "hta_sampled" in path:
        assert bar["label"] in tip.inner_text()

    before = view_width(page)
    page.locator('.pg-itl button[data-act="in"]').click()
    assert view_width(page) == pytest.approx(before / 2, rel=1e-3)
    page.locator('.pg-itl button[data-act="reset"]').click()
    assert view_width(page) == pytest.approx(before, rel=1e-3)
    assert not page.errors, "; ".join(page.errors)


def assert_inside_viewport(page, locator):
    box, size = locator.bounding_box(), page.viewport_size
    assert box and box["x"] >= 0 and box["y"] >= 0, box
    assert box["x"] + box["width"] <= size["width"] and box["y"] + box["height"] <= size["height"], (box, size)


def test_on_a_phone_a_tap_shows_the_tip_whole_and_the_canvas_is_drawn_at_its_size(page, site, base_url):
    page.set_viewport_size({"width": 390, "height": 700})
    page.goto(f"{base_url}/{REPORTS[0]}", wait_until="load")
    canvas = page.locator(".pg-itl canvas")
    canvas.scroll_into_view_if_needed()
    # The backing store is the displayed width times the pixel ratio: nothing is scaled, nothing blurs.
    widths = page.evaluate("() => { const c = document.querySelector('.pg-itl canvas');"
                           " return [c.width, Math.round(c.clientWidth * devicePixelRatio)]; }")
    assert widths[0] == widths[1], widths
    # A real touch (through the DevTools protocol): touch pointers cannot hover.
    bar = page.evaluate(LONGEST_GPU_BAR)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 1})
    point = [{"x": bar["x"], "y": bar["y"]}]
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": point})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    tip = page.locator(".pg-itl-tip")
    tip.wait_for(state="visible", timeout=5_000)
    assert bar["label"] in tip.inner_text()
    assert_inside_viewport(page, tip)
    assert not page.errors, "; ".join(page.errors)
