"""``profiling-guide diff``: the page and the JSON of what changed between two recordings (:mod:`~profiling_guide.analysis.diff`)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from profiling_guide import __version__
from profiling_guide.analysis import provenance
from profiling_guide.analysis.diff import MIN_SAMPLES, TOTALS, Diff, diff, to_dict
from profiling_guide.errors import GuideError
from profiling_guide.files import check_writable, finite_or_null, write_text_atomic
from profiling_guide.pages.diff_sentences import verdict_text
from profiling_guide.report.html import _CSS
from profiling_guide.report.html_parts import cell, table
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run import trace_files
from profiling_guide.trace.run_record import run_record_beside

ROWS_SHOWN = 40
CALLED = {True: "yes", False: "no (a tie)", None: f"too few samples (< {MIN_SAMPLES})"}
TOTAL_HEADS = {"phase": "Per phase", "kind": "Per kernel kind", "module": "Per module"}


def _num(x: float | None, fmt: str = "{:+,.1f}") -> str:
    return "–" if x is None else fmt.format(x)


def _side_line(label: str, side, report: dict) -> str:
    sp = side.step
    own = report.get("report")
    verdict = (f"; the report's verdict on <code>{html.escape(Path(own['source']).name)}</code>: "
               f"{html.escape(str(own['cause']))}, {html.escape(own['bound'])}") if own else ""
    what = {"trace": "one trace", "repeats": f"{len(side.sources)} traces of one program, each step a sample",
            "ranks": f"the {len(side.sources)} ranks of one run, each step number a sample"}[side.kind]
    return (f"<li><b>{html.escape(label)}</b> ({what}): step {sp.median / 1e3:.3f} ms "
            f"(IQR {sp.q1 / 1e3:.3f}–{sp.q3 / 1e3:.3f}), <b>{sp.repeats} samples</b> "
            f"({html.escape(side.steps_source)}); device work {side.device_us:,.1f} µs per step over "
            f"{side.samples} profiled sample{'s' if side.samples != 1 else ''}{verdict}. Traces: "
            + ", ".join(f"<code>{html.escape(Path(s).name)}</code>" for s in side.sources) + "</li>")


def _totals(d: Diff, rows: list[dict]) -> str:
    body = [cell(r["name"] or "–") + cell(f"{r['a']:,.1f}", num=True) + cell(f"{r['b']:,.1f}", num=True)
            + cell(_num(r["delta_us"]), num=True) + cell(_num(100 * r["delta_share"]), num=True)
            + cell(_num(r["delta_flop"] / 1e9 if r["delta_flop"] is not None else None, "{:+,.2f}"), num=True)
            + cell(_num(r["delta_bytes"] / 1e6 if r["delta_bytes"] is not None else None, "{:+,.2f}"), num=True)
            + cell(CALLED[r["significant"]]) for r in rows]
    return table(["", f"{d.a.name} µs", f"{d.b.name} µs", "Δ µs", "Δ share, points", "Δ GEMM GFLOP", "Δ MB",
                  "beyond the noise"], body)


def _module_note(d: Diff) -> str:
    note = ("Modules as each trace recorded them (<code>with_modules=True</code>), three deep at most; a backward op "
            "counts in the module of the forward op it differentiates.")
    for side, other in ((d.a, d.b), (d.b, d.a)):
        deepest = max((name.count(".") for name in d.modules(side)), default=-1)
        if deepest < max((name.count(".") for name in d.modules(other)), default=-1):
            note += (f" {html.escape(side.name)}'s trace records fewer modules than {html.escape(other.name)}'s"
                     + (" (none)" if deepest < 0 else "") + ": a compiled graph runs as one call of the module it "
                     "compiled, and a trace without <code>with_modules</code> records none, so its work counts "
                     "higher up.")
    return f'<p class="pg-note">{note}</p>'


def _rows(d: Diff, rows: list[dict]) -> str:
    out = []
    for r in rows[:ROWS_SHOWN]:
        work = "A: " + "; ".join(r["a_kernels"][:6]) + " | B: " + "; ".join(r["b_kernels"][:6])
        out.append(cell(r["row"], cls="name", title=work) + cell(r["match"])
                   + cell(f"{r['a_count']:g} → {r['b_count']:g}", num=True)
                   + cell(f"{r['a']:,.1f}", num=True) + cell(f"{r['b']:,.1f}", num=True)
                   + cell(_num(r["delta_us"]), num=True) + cell(_num(100 * r["delta_share"]), num=True)
                   + cell(CALLED[r["significant"]]))
    note = (f'<p class="pg-note">{len(rows) - ROWS_SHOWN} smaller rows left out here; the JSON has every row.</p>'
            if len(rows) > ROWS_SHOWN else "")
    return table(["work", "matched", "kernels per step", f"{d.a.name} µs/step", f"{d.b.name} µs/step", "Δ µs",
                  "Δ share, points", "beyond the noise"], out) + note


def report_json(d: Diff) -> dict:
    """The diff's JSON (schema ``profiling-guide.diff/1``): its data, and its verdict in words (``verdict.text``)."""
    report = to_dict(d)
    report["verdict"] = {"text": verdict_text(d), **report["verdict"], "steps_source": d.a.steps_source
                         if d.a.steps_source == d.b.steps_source else {"a": d.a.steps_source, "b": d.b.steps_source}}
    return report


def render(d: Diff, report: dict | None = None) -> str:
    """The page of a diff (``report``: its :func:`report_json`, computed if not given)."""
    report = report or report_json(d)
    unmatched = [r for r in report["rows"] if r["match"].startswith("only")]
    by = report["matched_by"]
    matched = (f"<p>Matched: <b>{100 * report['matched_share']:.1f} %</b> of the device time of both sides ("
               + ", ".join(f"{how} {100 * share:.1f} %" for how, share in by.items() if share)
               + f"). A difference is called beyond the noise only where each side has at least {MIN_SAMPLES} "
               "samples and the interquartile ranges do not overlap; with fewer, nothing is called.</p>")
    few = [s for s in (d.a, d.b) if s.samples < MIN_SAMPLES]
    if few:
        matched += ("<p class=\"pg-note\">" + "; ".join(
            f"{html.escape(s.name)}'s traces hold {s.samples} profiled sample{'s' if s.samples != 1 else ''}"
            for s in few) + f": too few to call any row's change (record at least {MIN_SAMPLES} active steps, "
            "or the program again into a folder).</p>")
    sections = [
        ("verdict", "What changed", f'<p class="pg-verdict">{html.escape(report["verdict"]["text"])}</p>'),
        ("sides", "The two sides", "<ul>" + _side_line("A · " + d.a.name, d.a, report["a"])
         + _side_line("B · " + d.b.name, d.b, report["b"]) + "</ul>" + matched),
        *((by_name, TOTAL_HEADS[by_name], _totals(d, report["totals"][by_name])
           + (_module_note(d) if by_name == "module" else ""))
          for by_name in TOTALS if by_name in report["totals"]),
        ("rows", "The work, row by row", _rows(d, report["rows"]) + '<p class="pg-note">Matched: <i>same</i> (the '
         "same computation in the same place), <i>fused</i> (ops against the kernels whose names say they fuse "
         "them), <i>source</i> (kernels inductor's provenance puts in the program's function the ops ran in), "
         "<i>parent</i> (what is left in a place both share, matched there), <i>only in A/B</i>. Δ share: the "
         "row's share of its side's device time, B's minus A's. Hover a row for its kernels.</p>"),
        ("unmatched", f"Not matched ({len(unmatched)})",
         "<ul>" + "".join(f"<li>{html.escape(r['match'])}: {html.escape(r['row'])}, "
                          f"{r['a'] + r['b']:,.1f} µs per step</li>" for r in unmatched) + "</ul>"
         if unmatched else "<p>Everything was matched.</p>"),
    ]
    nav = " · ".join(f'<a href="#{sid}">{html.escape(head.split(" (")[0])}</a>' for sid, head, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{html.escape(head)}</h2>{content}</section>'
                   for sid, head, content in sections)
    title = f"{d.a.name} → {d.b.name}"
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>Trace diff: {html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f'<main class="pg-report"><h1>Trace diff <span class="pg-file">{html.escape(title)}</span></h1>'
            f"<nav>{nav}</nav>{body}<footer>Written by profiling-guide {html.escape(__version__)} "
            "(<code>profiling-guide diff</code>). Device time counts kernels, memsets and memcpys on every stream, "
            "per profiled step, the median over the samples; the step times come from where each side says. GEMM "
            "FLOP counts the matrix products from their recorded shapes; MB, the bytes the trace lets one count "
            "(– where it does not).</footer></main></body></html>\n")


def _side_name(names: list[str]) -> str:
    name = Path(names[0]).name
    for suffix in (".json.gz", ".json"):
        name = name.removesuffix(suffix)
    return name.removesuffix(".trace")


def _provenance(paths: list[Path]) -> dict | None:
    """The kernel information kept beside any of ``paths`` (one program's traces: merged)."""
    found = None
    for p in paths:
        info = provenance.provenance_beside(p)
        if info is not None:
            found = {**(found or {}), **info}
    return found


def write_diff(a: list[str], b: list[str], out: str | Path | None, json_out: str | None = None,
               on_verdict=None) -> Path | None:
    """Diff the traces ``a`` stands for (files, folders of repeats or ranks, globs) against ``b``'s; write the page
    and JSON. A run record (``.run.json``) and inductor's kernel information kept beside a trace are read too."""
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
    prov = (_provenance(paths_a), _provenance(paths_b))
    records = (run_record_beside(paths_a[0]), run_record_beside(paths_b[0]))
    d = diff([Trace.load(p, python_calls=True) for p in paths_a], [Trace.load(p, python_calls=True) for p in paths_b],
             a_name=name_a, b_name=name_b, provenance=prov, run_records=records)
    report = report_json(d)
    if on_verdict is not None:
        on_verdict(report["verdict"]["text"])
    if out_path is not None:
        write_text_atomic(out_path, render(d, report), inputs=inputs)
    if json_out is not None:
        text = json.dumps(finite_or_null(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        if json_out == "-":
            print(text, end="")
        else:
            write_text_atomic(json_out, text, inputs=inputs)
    return out_path
