"""The verdict's section of the report's pages: the sentence, the what-ifs, the critical path.

The same section heads the page of one trace and the page of a run; the JSON
of ``report --json`` (:mod:`profiling_guide.report.json_report`) carries the
same records.
"""

from __future__ import annotations

import html

from profiling_guide.analysis.causes import MEANINGS, Cause
from profiling_guide.analysis.run_verdict import RunVerdict
from profiling_guide.analysis.verdict import Verdict, WhatIf
from profiling_guide.pages.verdict_sentences import (
    NAMES,
    ms,
    place,
    profiler_sentence,
    verdict_sentence,
    what_if_sentence,
)
from profiling_guide.report.html_parts import cell, table


def _what_if_rows(what_if: list[WhatIf]) -> list[str]:
    return [cell(w.cause.value, title=MEANINGS[w.cause]) + cell(place(w)) + cell(ms(w.saving_ms), num=True)
            + cell(ms(w.predicted_step_ms), num=True) + cell(w.fix) for w in what_if]


_WHAT_IF_HEAD = ["cause", "where", "saves", "step with it fixed", "fix"]


def verdict_section(v: Verdict) -> str:
    """The page's first section for one trace (or one rank read alone)."""
    out = f'<p class="pg-verdict pg-v-main">{html.escape(verdict_sentence(v))}</p>'
    if v.verdict is None:
        return out
    out += table(_WHAT_IF_HEAD, _what_if_rows(v.what_if))
    path = sorted(v.path_ms.items(), key=lambda kv: -kv[1])
    total = sum(us for _, us in path) or 1.0
    out += ("<p>The step's critical path (profiler's cost taken out), by cause:</p>"
            + table(["cause", "ms on the path", "share"],
                    [cell(c.value, title=MEANINGS[c]) + cell(ms(us), num=True) + cell(f"{us / total:.0%}", num=True)
                     for c, us in path]))
    notes = [profiler_sentence(v), *v.notes]
    out += "".join(f'<p class="pg-note">{html.escape(n)}</p>' for n in notes if n)
    return out


def run_verdict_sentence(rv: RunVerdict) -> str:
    """The run's verdict in words: the culprit first where there is one."""
    f, w = rv.finding, rv.verdict
    if w is None:
        return "No verdict: the ranks share no step to re-time."
    if w.cause is not Cause.GPU_COMPUTE:
        text = (f"{NAMES[w.cause]} {place(w)}: about {ms(w.saving_ms)} of the run's {ms(w.step_ms)} step. "
                f"Fix: {w.fix}; that would bring the step to about {ms(w.predicted_step_ms)}.")
    else:
        text = what_if_sentence(w)
    if f.culprit is None and w.where.rank is None and rv.rank_read is not None and w.cause is not \
            Cause.EXPOSED_COMMUNICATION:
        text += (f" No rank keeps the others waiting: the ranks run the same step, and this is what it spends its "
                 f"time on (read from rank {rv.rank_read}'s trace).")
    if f.culprit is not None:
        many = f" (and {len(f.slow) - 1} more rank{'s' if len(f.slow) > 2 else ''} like it)" if len(f.slow) > 1 else ""
        text = (f"Rank {f.culprit} keeps the others waiting{many}: on its own it needs "
                f"{ms(f.standalone_ms[f.culprit])} a step, {ms(f.excess_ms)} more than any other rank. " + text)
    return text


def run_verdict_section(rv: RunVerdict) -> str:
    """The page's first section for a run of several ranks."""
    f = rv.finding
    out = f'<p class="pg-verdict pg-v-main">{html.escape(run_verdict_sentence(rv))}</p>'
    if rv.verdict is None:
        return out
    out += table(_WHAT_IF_HEAD, _what_if_rows(rv.what_if))
    rows = [cell(r) + cell(ms(f.standalone_ms.get(r, float("nan"))), num=True) + cell(ms(f.own_ms.get(r, float("nan"))),
                                                                                      num=True)
            + cell(rv.ranks[r].cause.value if r in rv.ranks and rv.ranks[r] is not None else "–")
            for r in sorted(f.standalone_ms)[:16]]
    out += ("<p>Each rank re-timed on its own (profiler's cost taken out): its step with each collective at its "
            "transfer time and no one to wait for, and with no communication at all.</p>"
            + table(["rank", "standalone step", "own work only", "its verdict"], rows))
    if len(f.standalone_ms) > 16:
        out += f'<p class="pg-note">The first 16 of {len(f.standalone_ms)} ranks; the JSON has them all.</p>'
    out += "".join(f'<p class="pg-note">{html.escape(n)}</p>' for n in rv.notes)
    return out
