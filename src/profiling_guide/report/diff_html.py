"""``profiling-guide diff A B``: the page and the JSON of what changed between two traces (:mod:`~profiling_guide.analysis.diff`)."""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

from profiling_guide import __version__
from profiling_guide.analysis.diff import MIN_SAMPLES, Diff, diff, significant, to_dict, verdict_words
from profiling_guide.errors import GuideError
from profiling_guide.files import check_writable, finite_or_null, write_text_atomic
from profiling_guide.report.html import _CSS
from profiling_guide.report.html_parts import cell, table
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run import trace_files

ROWS_SHOWN = 40


def _us(x: float) -> str:
    return f"{x:,.1f}"


def _called(flag: bool | None) -> str:
    return {True: "yes", False: "no (a tie)", None: f"too few samples (< {MIN_SAMPLES})"}[flag]


def _side_line(name: str, d: Diff, side) -> str:
    sp = side.step
    return (f"<li><b>{html.escape(name)}</b>: step {sp.median / 1e3:.3f} ms (IQR {sp.q1 / 1e3:.3f}–{sp.q3 / 1e3:.3f}), "
            f"{sp.repeats} samples ({html.escape(side.steps_source)}); device work {side.device_us:,.1f} µs "
            f"per step; {len(side.sources)} trace{'s' if len(side.sources) != 1 else ''}: "
            + ", ".join(f"<code>{html.escape(Path(s).name)}</code>" for s in side.sources) + "</li>")


def _totals(d: Diff, by: str) -> str:
    rows = [cell(k) + cell(_us(a), num=True) + cell(_us(b), num=True) + cell(f"{b - a:+,.1f}", num=True)
            for k, (a, b) in d.totals(by).items()]
    return table([by, f"{d.a.name} µs", f"{d.b.name} µs", "Δ µs"], rows)


def _rows(d: Diff) -> str:
    ordered = sorted(d.rows, key=lambda r: -abs(statistics.median(r.b) - statistics.median(r.a)))
    a_dev, b_dev = d.a.device_us or 1.0, d.b.device_us or 1.0
    out = []
    for r in ordered[:ROWS_SHOWN]:
        a, b = statistics.median(r.a), statistics.median(r.b)
        work = "; ".join(k.what for k in (*r.a_keys, *r.b_keys)) if r.how == "parent" else ""
        out.append(cell(r.words(), cls="name", title=work or None) + cell(r.how) + cell(_us(a), num=True)
                   + cell(_us(b), num=True) + cell(f"{b - a:+,.1f}", num=True)
                   + cell(f"{100 * (b / b_dev - a / a_dev):+.1f}", num=True) + cell(_called(significant(r.a, r.b))))
    note = (f'<p class="pg-note">{len(ordered) - ROWS_SHOWN} smaller rows left out here; the JSON has every row.</p>'
            if len(ordered) > ROWS_SHOWN else "")
    return table(["work", "matched", f"{d.a.name} µs/step", f"{d.b.name} µs/step", "Δ µs", "Δ share, points",
                  "beyond the noise"], out) + note


def render(d: Diff) -> str:
    unmatched = [r for r in d.rows if not r.matched]
    sections = [
        ("verdict", "What changed", f'<p class="pg-verdict">{html.escape(verdict_words(d))}</p>'),
        ("sides", "The two sides", "<ul>" + _side_line("A · " + d.a.name, d, d.a) + _side_line("B · " + d.b.name, d, d.b)
         + f"</ul><p>Matched: {100 * d.matched_share:.1f} % of the device time of both sides. A difference is "
         f"called beyond the noise only where each side has at least {MIN_SAMPLES} samples (profiler steps, or "
         "repeats) and the interquartile ranges do not overlap.</p>"),
        ("phases", "Per phase", _totals(d, "phase")),
        ("kinds", "Per kernel kind", _totals(d, "kind")),
        ("rows", "The work, row by row", _rows(d) + '<p class="pg-note">Rows: <i>same</i> (the same computation '
         "in the same place), <i>fused</i> (the other side's ops against the one kernel that fuses them), "
         "<i>parent</i> (what is left under one label, matched there), <i>only in A/B</i>. Δ share: the row's "
         "share of its side's device time, B's minus A's.</p>"),
        ("unmatched", f"Not matched ({len(unmatched)})",
         "<ul>" + "".join(f"<li>{html.escape(r.how)}: {html.escape(r.words())}, "
                          f"{_us(statistics.median(r.a) + statistics.median(r.b))} µs per step</li>"
                          for r in unmatched) + "</ul>" if unmatched else "<p>Everything was matched.</p>"),
    ]
    nav = " · ".join(f'<a href="#{sid}">{html.escape(head.split(" (")[0])}</a>' for sid, head, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{html.escape(head)}</h2>{content}</section>' for sid, head, content in sections)
    title = f"{d.a.name} → {d.b.name}"
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>Trace diff: {html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f'<main class="pg-report"><h1>Trace diff <span class="pg-file">{html.escape(title)}</span></h1>'
            f"<nav>{nav}</nav>{body}<footer>Written by profiling-guide {html.escape(__version__)} "
            "(<code>profiling-guide diff</code>). Device time counts kernels, memsets and memcpys on every stream; "
            "every µs is per profiled step, the median over the samples.</footer></main></body></html>\n")


def _side_name(names: list[str]) -> str:
    first = Path(names[0])
    name = first.name if first.is_dir() or len(names) > 1 else first.name
    for suffix in (".json.gz", ".json"):
        name = name.removesuffix(suffix)
    return name.removesuffix(".trace")


def write_diff(a: list[str], b: list[str], out: str | Path | None, json_out: str | None = None,
               on_verdict=None) -> Path | None:
    """Diff the traces ``a`` stands for (files, folders of repeats, globs) against ``b``'s; write the page and JSON."""
    paths_a, paths_b = trace_files(a), trace_files(b)
    if {p.resolve() for p in paths_a} & {p.resolve() for p in paths_b}:
        raise GuideError("A and B name the same trace file: give two different recordings")
    inputs = [*paths_a, *paths_b]
    out_path = None
    if out is not None:
        out_path = check_writable(out, inputs=inputs)
    if json_out not in (None, "-"):
        if out is not None and Path(json_out).resolve() == Path(out).resolve():
            raise GuideError(f"-o and --json both name {out}: give two files")
        check_writable(json_out, inputs=inputs)
    name_a, name_b = _side_name(a), _side_name(b)
    if name_a == name_b:
        name_a, name_b = f"A ({name_a})", f"B ({name_b})"
    d = diff([Trace.load(p) for p in paths_a], [Trace.load(p) for p in paths_b], a_name=name_a, b_name=name_b)
    if on_verdict is not None:
        on_verdict(verdict_words(d))
    if out_path is not None:
        write_text_atomic(out_path, render(d), inputs=inputs)
    if json_out is not None:
        text = json.dumps(finite_or_null(to_dict(d)), indent=1, allow_nan=False) + "\n"
        if json_out == "-":
            print(text, end="")
        else:
            write_text_atomic(json_out, text, inputs=inputs)
    return out_path
