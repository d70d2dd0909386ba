"""``profiling-guide report``: one self-contained HTML page from a trace.

:func:`write_report` loads a trace, runs :func:`~profiling_guide.analysis.trace_report.analyse`
and writes :func:`render_html`'s page: the verdict on who sets the pace, the
environment, the steps, an interactive timeline of one step
(:mod:`profiling_guide.pages.interactive_timeline`), the top kernels and CPU ops,
memsets and memcpys, and the health findings. The page has no external
resources (no CDN, no fonts, no requests): it opens from disk, offline, and
can be mailed as one file.
"""

from __future__ import annotations

import html
import math
import re
import sys
import time
from pathlib import Path

from profiling_guide import __version__
from profiling_guide.analysis.trace_report import (
    Finding,
    TraceReport,
    analyse,
    choose_step,
    report_steps,
)
from profiling_guide.errors import GuideError
from profiling_guide.files import check_writable, write_text_atomic
from profiling_guide.pages.interactive_timeline import timeline_html
from profiling_guide.trace.run_record import read_rates, run_record_beside, run_record_path, trace_stem
from profiling_guide.pages.pace_sentences import evidence, fmt_us, headline
from profiling_guide.report.html_parts import cell as _cell
from profiling_guide.report.html_parts import table as _table
from profiling_guide.report.attribution_html import CSS as _ATTRIBUTION_CSS
from profiling_guide.report.attribution_html import attribution_section
from profiling_guide.report.verdict_html import verdict_section
from profiling_guide.trace.kernel_information import kernel_information_beside, kernel_information_path
from profiling_guide.trace.model import Trace

PROGRESS_BYTES = 8 << 20  # traces larger than this on disk get a progress line on stderr


# ------------------------------------------------------------------ tables
def _num(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _count(value, digits: int = 2) -> str:
    """A per-step count: ``29`` when it is whole (every step did the same), ``1.33`` when it is not."""
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return _num(value, digits)


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


# ---------------------------------------------------------------- sections
def _environment(report: TraceReport) -> str:
    rows = [f"<th>{html.escape(k)}</th>" + _cell(v) for k, v in report.environment.items()]
    if report.rates:
        for key, label, unit in (("gemm_tflops", "reference GEMM rate", "TFLOP/s"),
                                 ("copy_tbps", "reference copy bandwidth", "TB/s")):
            if key in report.rates:
                rows.append(f"<th>{label}</th>" + _cell(f"{report.rates[key]:,.2f} {unit} (measured)"))
    if not rows:
        return "<p>The trace records nothing about the machine it ran on.</p>"
    return _table(None, rows)


def _steps(report: TraceReport) -> str:
    rows = []
    for s in report.steps:
        delay = "–" if s.delay_start_us is None else f"{s.delay_start_us:,.1f} → {s.delay_end_us:,.1f}"
        label = "whole trace" if report.whole_trace else f"replay {s.number}" if report.graph_replays \
            else f"#{s.number}"
        mark = " (timeline)" if s.number == report.chosen_step else ""
        rows.append(_cell(label + mark) + _cell(_num(s.cpu_us), num=True) + _cell(_num(s.device_busy_us), num=True)
                    + _cell(f"{s.busy_share:.0%}", num=True) + _cell(f"{s.gpu_idle_fraction:.0%}", num=True)
                    + _cell(s.kernels, num=True) + _cell(s.launches, num=True) + _cell(s.cpu_ops, num=True)
                    + _cell(_num(s.sync_us), num=True) + _cell(delay, num=True) + _cell(s.verdict))
    return _table(["step", "CPU µs", "GPU busy µs", "GPU busy share", "GPU idle in its span", "kernels", "launches",
                   "CPU ops", "sync µs", "launch→start µs (first → last third)", "pace"], rows)


def _kernels(report: TraceReport) -> str:
    df = report.top_kernels
    rows = []
    for r in df.itertuples():
        rows.append(_cell(r.kernel, title=r.name, cls="name") + _cell(r.kind) + _cell(r.library)
                    + _cell(_count(r.per_step), num=True) + _cell(_num(r.us_per_step), num=True)
                    + _cell(_num(r.mean_us, 2), num=True) + _cell(f"{r.share:.1%}", num=True)
                    + _cell(r.launched_by, title=r.launched_by, cls="name") + _cell(r.achieved or "–", num=True)
                    + _cell("–" if math.isnan(r.of_reference) else f"{r.of_reference:.0%}", num=True))
    note = ("" if report.rates else
            '<p class="pg-note">No reference rates were given, so achieved rates are not compared with a measured reference: '
            "<code>profiling-guide report TRACE --rates RUN.json</code> with rates measured on the same GPU "
            "(<code>profiling-guide profile</code> measures them).</p>")
    return _table(["kernel (hover: full name)", "kind", "library", "launches / step", "µs / step", "mean µs",
                   "share of device time", "launched by", "achieved", "of measured reference"], rows) + note


def _ops(report: TraceReport) -> str:
    rows = [_cell(r.op + (" (annotation)" if r.annotation else ""), title=r.op, cls="name")
            + _cell(_count(r.calls_per_step), num=True) + _cell(_num(r.self_cpu_us), num=True)
            + _cell(_num(r.cpu_total_us), num=True) + _cell(_num(r.device_us), num=True)
            + _cell(_count(r.launches_per_step), num=True) for r in report.top_ops.itertuples()]
    return _table(["op", "calls / step", "self CPU µs / step", "total CPU µs / step", "device µs / step",
                   "launches / step"], rows)


def _memory(report: TraceReport) -> str:
    df = report.memory_ops
    if df.empty:
        return "<p>No memsets or memcpys in the steps.</p>"
    rows = [_cell(r.name, cls="name") + _cell(r.kind) + _cell(_count(r.per_step), num=True)
            + _cell(_bytes(r.bytes_per_step), num=True) + _cell(_num(r.us_per_step, 2), num=True)
            + _cell(_num(r.gb_per_s, 2), num=True) + _cell(r.launched_by, cls="name") + _cell(r.via)
            for r in df.itertuples()]
    return _table(["name", "kind", "per step", "bytes / step", "µs / step", "GB/s", "launched by", "via"], rows)


def _phases(report: TraceReport) -> str:
    rows = [_cell(phase) + _cell(_num(r.device_us), num=True) + _cell(f"{r.share:.1%}", num=True)
            for phase, r in report.phases.iterrows()]
    return (_table(["phase", "device µs / step", "share of device time"], rows)
            + '<p class="pg-note">Each kernel, memset and memcpy counts in the phase of the op that launched it: '
            "optimizer under <code>Optimizer.step#</code> or <code>Optimizer.zero_grad#</code>, backward under the "
            "autograd engine (<code>autograd::engine::evaluate_function</code>), forward otherwise.</p>")


KERNELS_SHOWN = 4  # a backward's kernels named in its row, most time first


def _first_named(names: list[str], shown: int = KERNELS_SHOWN) -> str:
    """``"a, b, c, d and 3 more"``: the first ``shown`` of ``names``, and how many are left out."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more if names else "–"


def _backward(report: TraceReport) -> str:
    rows = [_cell(r.forward_op, cls="name") + _cell(r.shapes, cls="name") + _cell(r.backward_op, cls="name")
            + _cell(_count(r.per_step), num=True) + _cell(_num(r.forward_us), num=True)
            + _cell(_num(r.backward_us), num=True)
            + _cell(_first_named(r.backward_kernels), title=", ".join(r.backward_kernels), cls="name")
            for r in report.backward.itertuples()]
    return (_table(["forward op", "its input shapes", "backward op", "per step", "forward device µs / step",
                    "backward device µs / step", "backward kernels (most time first)"], rows)
            + f'<p class="pg-note">{report.counts.get("backward_links", 0):,} links in the trace: the profiler\'s '
            "<code>fwdbwd</code> flows join each backward op (run on the autograd engine's thread) to the forward "
            "op whose output it differentiates. Device time counts what each op launched, with what nests in it; "
            "rows by backward device time.</p>")


def _collectives(report: TraceReport) -> str:
    rows = []
    for r in report.collectives.itertuples():
        how = " ".join(x for x in (r.algorithm, r.protocol) if x)
        rows.append(_cell(f"{r.collective} {r.dtype}" + (f" ({how})" if how else ""), cls="name")
                    + _cell(_bytes(r.bytes) if r.bytes and not math.isnan(r.bytes) else "–", num=True)
                    + _cell(_count(r.per_step), num=True)
                    + _cell(_num(r.us_per_step), num=True) + _cell(_num(r.mean_us), num=True))
    who = (f"This trace is rank {report.rank[0]} of {report.rank[1]}: " if report.rank else "")
    return (_table(["collective (algorithm, protocol)", "size", "calls / step", "kernel µs / step", "mean kernel µs"],
                   rows)
            + f'<p class="pg-note">{html.escape(who)}a collective\'s kernel runs until every rank of its group has '
            "arrived, so each duration here is the transfer plus the wait for the last rank. The other ranks' "
            "traces tell the two apart and name the rank waited for: <code>profiling-guide report</code> with the "
            "traces of every rank (a folder, or a glob). Sizes from <code>record_param_comms</code>, the full "
            "buffer as nccl-tests counts it.</p>")


# ------------------------------------------------------------------ health
def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _steps_found(f: Finding) -> str:
    steps = f.facts["steps"]
    if not steps and f.facts.get("replays"):
        return (f"No ProfilerStep markers: each of the {f.facts['replays']} CUDA graph replays (one cudaGraphLaunch "
                "and the work it replayed) is read as a step; what ran before the first (the capture) is in none. "
                "Record with a torch.profiler schedule and prof.step() to choose the steps.")
    if not steps:
        return ("No ProfilerStep markers: the whole trace is read as one step. Record with a torch.profiler "
                "schedule and prof.step() to compare steps.")
    return (f"{_plural(len(steps), 'ProfilerStep marker')}: " + ", ".join(f"#{n}" for n in steps[:12])
            + (" …" if len(steps) > 12 else ""))


def _no_launch(f: Finding) -> str:
    if f.level == "ok":
        return f"every one of the {f.facts['linked']} device events launched while the profiler recorded is linked to its launch"
    no_id = f.facts["no_correlation"]
    return (f"{f.facts['orphans']} of {f.facts['events']} device events have no launching runtime call ({no_id} "
            f"without a correlation id, {f.facts['orphans'] - no_id} whose launch was not recorded): they count in "
            "device time but not under any CPU op.")


def _uneven(f: Finding) -> str:
    x = f.facts
    if f.level == "ok":
        return f"steps agree within {x['ratio']:.2f}× ({fmt_us(x['fast_us'])} to {fmt_us(x['slow_us'])})"
    return (f"ProfilerStep#{x['slow']} took {x['ratio']:.2f}× as long as #{x['fast']} ({fmt_us(x['slow_us'])} vs "
            f"{fmt_us(x['fast_us'])}): a step that still warms up (allocator, autotuning, compilation) or a stall; "
            "compare steps before trusting a mean.")


def _overhead(f: Finding) -> str:
    x = f.facts
    if "unprofiled_us" not in x:
        return (f"{x['ops_per_step']:,.0f} CPU ops recorded per step; each costs the CPU extra time while profiled "
                "(more with record_shapes). No unprofiled timing is recorded beside this trace, so the overhead is "
                "not measured: `profiling-guide profile` records one.")
    extra = x["profiled_us"] - x["unprofiled_us"]
    return (f"'{x['label']}' took {fmt_us(x['profiled_us'])} of CPU per step under the profiler and "
            f"{fmt_us(x['unprofiled_us'])} without it (run record): the profiler added {fmt_us(extra)} "
            f"({extra / x['unprofiled_us']:+.0%}) for {x['ops_per_step']:,.0f} recorded CPU ops per step. CPU-side "
            "times in this report are inflated by about that much.")


#: Each health finding's words, from its facts (analysis/trace_report.py health_findings).
_FINDING_WORDS = {
    "profiler steps": _steps_found,
    "device work": lambda f: "The trace holds no device events: it was recorded on a CPU, or without "
                             "ProfilerActivity.CUDA.",
    "device work with no launch": _no_launch,
    "device work launched before the profiled window": lambda f: (
        f"{f.facts['events']} device events ({fmt_us(f.facts['us'])}) ran while the profiler recorded but were "
        "launched before it began (their correlation ids precede the first recorded call's): the CPU ran ahead and "
        "the GPU was still working through earlier steps. They belong to no profiled step and are left out of every "
        "table."),
    "launches with no device work": lambda f: (
        f"{_plural(f.facts['calls'], 'launch call')} with no device event ("
        + ", ".join(f"{n}× {name}" for name, n in f.facts["most_common"])
        + "): the profiler stopped before they ran, or dropped them."),
    "device work before its launch": lambda f: (
        f"{f.facts['events']} device events start before the call that launched them: the CPU and GPU clocks "
        "disagree in this trace, so launch delays are unreliable."),
    "events outside any step": lambda f: (
        f"{f.facts['ops']} CPU ops and {f.facts['device_events']} device events lie outside every ProfilerStep; the "
        "tables count only events inside steps."),
    "uneven steps": _uneven,
    "profiler overhead": _overhead,
    "pageable host copies": lambda f: (
        f"{f.facts['per_step']:g} copies per step from or to pageable host memory: they cannot overlap with "
        "compute; pin the host tensor (pin_memory())."),
    "run record left out": lambda f: f"{f.facts['problem']}. The report is made without it.",
    "kernel information left out": lambda f: (f"{f.facts['problem']}. The report is made without it: compiled "
                                              "kernels are attributed to their compiled region only."),
}


def finding_detail(f: Finding) -> str:
    """What a health finding says, in one or two sentences."""
    return _FINDING_WORDS[f.kind](f)


def _findings(report: TraceReport) -> str:
    items = "".join(f'<li class="pg-finding pg-{f.level}"><span class="pg-badge">{f.level}</span> '
                    f"<b>{html.escape(f.kind)}</b>: {html.escape(finding_detail(f))}</li>" for f in report.findings)
    return f'<ul class="pg-findings">{items}</ul>'


def render_html(report: TraceReport, step, *, title: str | None = None) -> str:
    """The report page as one HTML string; ``step`` is the :class:`~profiling_guide.trace.model.Step` the timeline shows."""
    name = title or Path(report.source).name
    warns = sum(1 for f in report.findings if f.level == "warn")
    counts = report.counts
    steps_line = ("no ProfilerStep markers: the whole trace is one step" if report.whole_trace
                  else f"no ProfilerStep markers: {len(report.steps)} CUDA graph replays, each a step"
                  if report.graph_replays else f"{len(report.steps)} profiler steps")
    step_title = ("the whole trace" if report.whole_trace else f"CUDA graph replay {step.number}"
                  if report.graph_replays else f"ProfilerStep#{step.number}")
    sections = [
        *([("verdict", "What makes the step slow", verdict_section(report.verdict))]
          if report.verdict is not None else []),
        ("pace", "Who sets the pace (profiler on)",
         f'<p class="pg-verdict pg-v-{re.sub(r"[^a-z]", "", report.pace.verdict.lower())}">'
         f"{html.escape(headline(report.pace))}</p><ul>"
         + "".join(f"<li>{html.escape(e)}</li>" for e in evidence(report.pace)) + "</ul>"),
        ("environment", "Environment", _environment(report)),
        ("steps", "Steps", _steps(report)),
        ("timeline", f"Timeline of {step_title}",
         timeline_html(step) + f'<p class="pg-note">{fmt_us(step.dur_us)} on the CPU; lanes: CPU ops by nesting '
         "depth, CUDA runtime calls, one lane per GPU stream. Choose another step with <code>--step N</code>.</p>"),
        *([("attribution", "Where your step's device time goes in your code", attribution_section(report.attribution))]
          if report.attribution is not None else []),
        *([("phases", "Forward, backward, optimizer", _phases(report))]
          if report.phases is not None and len(report.phases) > 1 else []),
        *([("backward", "Forward → backward", _backward(report))]
          if report.backward is not None and not report.backward.empty else []),
        *([("collectives", "Collectives", _collectives(report))]
          if report.collectives is not None and not report.collectives.empty else []),
        ("kernels", "Top kernels by device time", _kernels(report)),
        ("ops", "Top CPU ops by self time", _ops(report)),
        ("memory", "Memsets and memcpys", _memory(report)),
        ("health", f"Health findings ({warns} warning{'s' if warns != 1 else ''})", _findings(report)),
    ]
    nav = " · ".join(f'<a href="#{sid}">{html.escape(head.split(" (")[0])}</a>' for sid, head, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{html.escape(head)}</h2>{content}</section>'
                   for sid, head, content in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # else the browser asks the server for /favicon.ico
        f"<title>Trace report: {html.escape(name)}</title><style>{_CSS}</style></head><body>"
        f'<main class="pg-report"><h1>Trace report <span class="pg-file">{html.escape(name)}</span></h1>'
        f'<p class="pg-lede">{html.escape(steps_line)} · {counts.get("cpu_ops", 0):,} CPU ops · '
        f'{counts.get("runtime_calls", 0):,} runtime calls · {counts.get("device_events", 0):,} device events · '
        f"tables are per-step means</p><nav>{nav}</nav>{body}"
        f'<footer>Written by profiling-guide {html.escape(__version__)} (<code>profiling-guide report</code>). '
        "Device time counts kernels, memsets and memcpys on every stream. Achieved rates: GEMM FLOPs from the "
        "launching op's recorded shapes; bytes of pointwise kernels estimated (est.) as each tensor argument read "
        "once plus one output written.</footer></main></body></html>\n"
    )


# ------------------------------------------------------------ writing it
def default_report_path(trace_path: str | Path) -> Path:
    """``<name>.report.html`` in the current folder for ``<name>.trace.json[.gz]`` (or any ``.json[.gz]``)."""
    return Path(f"{trace_stem(trace_path)}.report.html")


class _Progress:
    """Stage lines on stderr for traces large enough to make a reader wait (never in the HTML)."""

    def __init__(self, enabled: bool):
        self.enabled, self.start = enabled, time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"report: {message} ({time.perf_counter() - self.start:.1f} s)", file=sys.stderr, flush=True)


def write_report(trace_path: str | Path, out_path: str | Path | None = None, *, step: int | None = None,
                 rates: dict | str | Path | None = None, progress: bool | None = None,
                 json_out: str | Path | None = None, on_verdict=None) -> Path:
    """Analyse the trace at ``trace_path`` and write its HTML report; returns the report's path.

    ``out_path`` defaults to ``<name>.report.html`` in the current folder; it
    is written through :mod:`profiling_guide.files` (a regular file or a new
    path, never one of the files read: the trace, the rates file, the run
    record beside the trace). ``step`` picks the timeline's step (default: the
    median one). ``rates`` is a dict or a JSON file of reference rates (see
    :func:`~profiling_guide.trace.run_record.read_rates`); by default they come
    from the trace's ``.run.json`` where it has them. A ``.run.json`` beside
    the trace that is not a run record is left out, with one line on stderr
    and a warning among the health findings. ``progress`` prints stage lines on
    stderr (default: for traces over 8 MiB on disk). ``json_out`` also writes
    the verdict as JSON there (``-``: standard output; schema in
    :mod:`profiling_guide.report.json_report`); ``on_verdict`` is called with
    the verdict's sentence. A ``<name>.kernel_information.json`` beside the
    trace (what inductor recorded each compiled kernel fuses:
    :mod:`profiling_guide.trace.kernel_information`) attributes compiled
    kernels to source lines; one that cannot be read is left out the same way.
    """
    from profiling_guide.report.json_report import trace_json, write_json
    from profiling_guide.pages.verdict_sentences import verdict_sentence

    trace_path = Path(trace_path)
    sibling = run_record_path(trace_path)
    rates_path = rates if isinstance(rates, (str, Path)) else None
    inputs = [trace_path, sibling, rates_path, kernel_information_path(trace_path)]
    out = check_writable(out_path if out_path is not None else default_report_path(trace_path), inputs=inputs)
    if json_out is not None and str(json_out) != "-":
        check_writable(json_out, inputs=[*inputs, out])
    if rates_path is not None:
        rates = read_rates(rates_path)
    size = trace_path.stat().st_size if trace_path.is_file() else 0
    say = _Progress(progress if progress is not None else size >= PROGRESS_BYTES)
    say(f"loading {trace_path.name} ({_bytes(size)})")
    trace = Trace.load(trace_path)
    try:
        run_record, problem = run_record_beside(trace_path), None
    except GuideError as exc:
        run_record, problem = None, str(exc)
        print(f"warning: {problem}; the report leaves it out", file=sys.stderr, flush=True)
    try:
        kernels, kernels_problem = kernel_information_beside(trace_path), None
    except GuideError as exc:
        kernels, kernels_problem = None, str(exc)
        print(f"warning: {kernels_problem}; the report leaves it out", file=sys.stderr, flush=True)
    events = len(trace.ops) + len(trace.runtime_calls) + len(trace.device_events)
    say(f"analysing {events:,} events")
    report = analyse(trace, step=step, rates=rates, run_record=run_record, kernel_information=kernels)
    if problem:
        report.findings.append(Finding("run record left out", "warn", {"problem": problem}))
    if kernels_problem:
        report.findings.append(Finding("kernel information left out", "warn", {"problem": kernels_problem}))
    chosen = choose_step(report_steps(trace), report.chosen_step)
    say(f"writing {out}")
    write_text_atomic(out, render_html(report, chosen, title=trace_path.name), suffix=".html", inputs=inputs)
    if json_out is not None:
        write_json(trace_json(report), json_out, inputs=[*inputs, out])
    if on_verdict is not None and report.verdict is not None:
        on_verdict(verdict_sentence(report.verdict))
    say("done")
    return out


_CSS = """
body{margin:0;background:#fff;color:#1b1b1b;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.pg-report{max-width:1200px;margin:0 auto;padding:1em 1.2em 3em}
h1{font-size:1.5em;margin:.4em 0 .2em}h1 .pg-file{font-weight:400;color:#5f6368;font-size:.75em;overflow-wrap:anywhere}
h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid #e3e6eb;padding-bottom:.2em}
.pg-lede,.pg-note,footer{color:#5f6368;font-size:.9em}nav{margin:.6em 0 1em;font-size:.9em}
a{color:#2457a6}
code{font:.9em ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f4f6;padding:0 .2em;border-radius:3px}
.pg-scroll{overflow-x:auto;max-width:100%}
.pg-table{border-collapse:collapse;font-size:.85em;margin:.3em 0 .6em}
.pg-table th,.pg-table td{padding:.25em .6em;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
.pg-table th{background:#f6f7f9;font-weight:600}
.pg-table td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.pg-table td.name{max-width:28em;overflow-wrap:anywhere}
.pg-verdict{font-size:1.05em;padding:.6em .8em;border-left:4px solid #9aa0a6;background:#f6f7f9;overflow-wrap:anywhere}.pg-note{overflow-wrap:anywhere}
.pg-v-gpu{border-color:#7b4fa6}.pg-v-cpu{border-color:#f0a03c}.pg-v-mixed{border-color:#1f8a9c}
.pg-v-collectives{border-color:#34495e}
.pg-findings{list-style:none;padding:0}.pg-finding{margin:.35em 0}
.pg-badge{display:inline-block;min-width:3.2em;text-align:center;font-size:.75em;font-weight:700;text-transform:uppercase;
border-radius:3px;padding:0 .3em;margin-right:.3em;color:#fff;background:#9aa0a6}
.pg-ok .pg-badge{background:#2e9c6a}.pg-warn .pg-badge{background:#c24d6b}.pg-info .pg-badge{background:#4c78a8}
footer{margin-top:2.5em;border-top:1px solid #e3e6eb;padding-top:.6em}
""" + _ATTRIBUTION_CSS
