"""Reports of hostile traces, opened in headless Chromium: every section renders, nothing from the trace runs.

The traces are made here: kernel, op, runtime-call, GPU and file names built
to end the report's data early (``</script>``), to open a comment or a script
(``<!--<script>``), to inject markup, to break a JavaScript string (U+2028,
U+2029) or UTF-8 (a lone surrogate), and a run record beside the trace that
carries the same. Each payload that could run sets ``window.pwned`` or opens
a dialog; the page must show all of its sections and its timeline, hold each
name as data (the timeline's strings), and never run any of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PAYLOADS = [
    "<!--<script>window.pwned=1</script>",
    "</script><script>window.pwned=1;alert(1)</script>",
    "<script>window.pwned=1</script>",
    '"><img src=x onerror="window.pwned=1;alert(1)">',
    "<svg/onload=window.pwned=1>",
    "a\u2028b\u2029c'\"`${window.pwned=1}",
    "\ud800lone surrogate",
    "]]><!--",
    "--><script>window.pwned=1</script><!--",
]
SECTIONS = ["pace", "environment", "steps", "timeline", "kernels", "ops", "memory", "health"]


def hostile_trace(folder: Path, payload: str, index: int) -> Path:
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "tid": 1, "ts": 0, "dur": 200}
    events = [step]
    for i, name in enumerate([payload, "aten::mm"]):
        t = 10 + 80 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": name, "tid": 1, "ts": t, "dur": 60, "args": {"Input Dims": [[8, 8]]}},
            {"ph": "X", "cat": "cuda_runtime", "name": name, "tid": 1, "ts": t + 5, "dur": 5,
             "args": {"correlation": 100 + i}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 20, "dur": 30,
             "args": {"correlation": 100 + i, "stream": 7, "grid": [1, 1, 1], "block": [32, 1, 1]}},
            {"ph": "X", "cat": "gpu_memset", "name": name, "pid": 0, "tid": 7, "ts": t + 55, "dur": 2,
             "args": {"stream": 7, "bytes": 64}},
        ]
    trace = {"traceEvents": events, "deviceProperties": [{"name": payload, "totalGlobalMem": 2**34}],
             "distributedInfo": {"backend": payload, "rank": payload}}
    path = folder / f"hostile{index}-<script>window.pwned=1<\\script>&amp;.trace.json"  # the page's title
    path.write_text(json.dumps(trace), encoding="utf-8")  # lone surrogates travel as \ud800 escapes
    record = {"versions": {"torch": payload}, "label": payload, "date": payload, "gpu": {"name": payload}}
    path.with_name(path.name.replace(".trace.json", ".run.json")).write_text(json.dumps(record))
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> list[Path]:
    pytest.importorskip("pandas", reason="writing a report needs pandas: nox -s browser installs it")
    from profiling_guide.report.html import write_report

    folder = tmp_path_factory.mktemp("hostile")
    return [write_report(hostile_trace(folder, p, i), folder / f"report{i}.html") for i, p in enumerate(PAYLOADS)]


@pytest.mark.parametrize("index", range(len(PAYLOADS)), ids=[p.encode("ascii", "backslashreplace").decode()[:30]
                                                              for p in PAYLOADS])
def test_a_hostile_report_renders_every_section_and_runs_nothing_from_the_trace(page, reports, index):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(reports[index].resolve().as_uri(), wait_until="load")
    for section in SECTIONS:
        assert page.locator(f"section#{section}").is_visible(), f"section {section} is missing or hidden"
    # every section the navigation names is on the page, and nothing else is
    assert page.locator("section").count() == page.locator("nav a").count() >= len(SECTIONS)
    assert page.locator("section#health li.pg-finding").count() >= 3
    assert page.locator("footer").is_visible()
    assert page.locator("script").count() == 2, "only the page's own data and script"
    assert page.evaluate("() => window.pwned") is None and not dialogs, "a payload ran"
    # The timeline's script ran and holds each name as data, whole.
    assert page.evaluate("() => typeof document.querySelector('.pg-itl').pgTimeline") == "object"
    strings = page.evaluate("""() => JSON.parse(document.querySelector('.pg-itl script[type="application/json"]')
                                                 .textContent).strings""")
    shown = PAYLOADS[index].replace("\ud800", "\ufffd")
    assert shown in strings
    # Where the name is text on the page, it is shown as text.
    assert shown in page.locator("section#ops").inner_text() or shown.strip() in page.locator("section#ops").inner_text()
    assert not page.errors, "; ".join(page.errors)
