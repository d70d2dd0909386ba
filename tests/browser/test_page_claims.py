"""What a page claims about its own recording, read from the built HTML of every build.

Deep dive 9 times the written-out attention variants only up to a length:
each point it leaves out is printed with the memory it would need, from
that build's GPU's recording, and the page says why it was left out.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from site_pages import ROOT, SITE, builds

DEEP_DIVE_9 = "auto_examples/deep_dives/plot_09_deep_attention.html"


@pytest.mark.parametrize("build", builds() or [pytest.param(None, marks=pytest.mark.skip("no built site"))],
                         ids=[b["name"] for b in builds()] or None)
def test_deep_dive_9_says_what_each_untimed_point_would_need(build):
    page = SITE / build["prefix"] / DEEP_DIVE_9
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
    sweep = json.loads((ROOT / "docs" / "recordings" / build["version"] / "09b_attention_sweep.sweep.run.json")
                       .read_text())["values"]["rows"]
    skipped = [r for r in sweep if "skipped" in r]
    assert skipped, "the recording skips no point: the page's sentence on skipped lengths has nothing to show"
    for r in skipped:
        line = (f"{r['variant']} at {r['seq']:,} tokens, head dim {r['head_dim']}, "
                f"{'causal' if r['causal'] else 'no mask'}: {r['skipped']}")
        assert line in text, f"{build['prefix']}{DEEP_DIVE_9} does not show: {line}"
        assert re.search(r"would need about \d+ GiB|needs about \d+ GiB", r["skipped"]), r
    assert "minutes of build time" in text and "less FlexAttention" in text
