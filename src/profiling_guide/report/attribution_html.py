"""The report's section "Where your step's device time goes in your code" (:mod:`profiling_guide.analysis.attribution`).

Per phase (forward, backward, optimizer), the module tree as nested
``<details>`` (the top two levels open) and the top source lines, each with
its device µs per step, its share of the step's device time and its kernels
by kind; above them, the share attributed and what is missing, with the
arguments that would attribute it. Nothing here needs script: the page stays
one offline file.
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict

from profiling_guide.analysis import attribution as why
from profiling_guide.analysis.attribution import LABEL, PROVENANCE, STACK, Attribution
from profiling_guide.report.html_parts import cell, table

#: The profiler arguments and the command that record what attribution reads.
PROFILER_ARGS = "torch.profiler.profile(..., with_stack=True, with_modules=True)"
PROFILE_CALL = "profiling-guide profile MODULE:CALLABLE -o DIR (with_stack and with_modules are on by default)"
PROVENANCE_FIX = ("set torch._inductor.config.trace.provenance_tracking_level = 1 before the first compiled call and "
                  "save what inductor records for every graph as <trace name>.kernel_information.json beside the "
                  "trace (profiling-guide profile --compile does both)")
#: Each reason work was not attributed (:mod:`profiling_guide.analysis.attribution`): what it means, what would fix it.
REASONS = {
    why.NO_LAUNCH: ("no launch recorded", "none: the profiler did not record the call that launched it"),
    why.REPLAY_UNMAPPED: ("replayed by a CUDA graph whose capture is not in the trace",
                          "profile the capture too (start the profiler before the graph is captured), or, for "
                          "torch.compile(mode='reduce-overhead'), " + PROVENANCE_FIX),
    why.INDUCTOR_MADE: ("a compiled kernel whose nodes inductor made itself (no source line recorded for them)",
                        "none: inductor's own passes made these nodes"),
    why.NO_KERNEL_INFORMATION: ("a compiled kernel, attributed to its compiled region only: no kernel information "
                                "beside the trace", PROVENANCE_FIX),
    why.NOT_IN_KERNEL_INFORMATION: ("a compiled kernel that the kernel information beside the trace does not hold",
                                    "record every graph's kernel information in the run that recorded the trace: "
                                    + PROVENANCE_FIX),
    why.WRAPPER: ("work of a compiled graph's call that is none of its kernels (the wrapper's own: copying inputs "
                  "into a CUDA graph's memory, say)", "none: torch.compile's own code launched it"),
    why.NO_STACKS: ("no Python stacks in the trace", f"record with {PROFILER_ARGS}, or run {PROFILE_CALL}"),
    why.NO_MODULES: ("no modules in the trace", f"record with {PROFILER_ARGS} (with_modules=True is missing)"),
    why.OUTSIDE_MODULES: ("outside every nn.Module (the loss's seed gradient, gradient accumulation, code between "
                          "modules)", "none needed: this work belongs to no module"),
    why.COMPILED_TOP: ("a compiled kernel of code in no submodule, where the trace records no module around it "
                       "(a step compiled whole)", "compile the model rather than the whole step "
                       "(model = torch.compile(model)): the trace then records the module around its code"),
    why.LIBRARY_ONLY: ("no line of your code on the stack", "none: only library code called it"),
}
TOP_LINES = 10  # source lines listed per phase
OPEN_DEPTH = 2  # module tree levels open when the page opens
_HOW_WORDS = {STACK: "the trace's Python stacks and modules", PROVENANCE: "inductor's kernel information",
              "compiled region": "only the compiled region", LABEL: "record_function labels only",
              "none": "nothing"}


def _us(value: float) -> str:
    return f"{value:,.1f} µs"


def _share(value: float, total: float) -> str:
    return f"{value / total:.1%}" if total else "–"


def _kinds(kinds) -> str:
    """``8 gemm · 12 pointwise``: kernels (memsets, memcpys) per step by kind, most first."""
    parts = []
    for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        count = f"{n:g}" if abs(n - round(n)) < 1e-6 else f"{n:.2f}"
        parts.append(f"{count} {kind}")
    return " · ".join(parts) or "–"


def _first(counter, shown: int = 2) -> str:
    names = [name for name, _ in counter.most_common() if name]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more if names else "–"


def _in_order(node: dict) -> list[dict]:
    return sorted(node["children"].values(), key=lambda c: c["first_us"])


def _node(node: dict, total: float, depth: int) -> str:
    """One module (or, under a compiled region, one call) and what nests in it, as a ``<details>``."""
    code = f' <code>{html.escape(node["code"])}</code>' if node["code"] else ""
    head = (f'<span class="pg-mod">{html.escape(node["name"])}{code}</span>'
            f'<span class="pg-num">{_us(node["device_us"])}</span>'
            f'<span class="pg-num">{_share(node["device_us"], total)}</span>'
            f'<span class="pg-kinds">{html.escape(_kinds(node["kinds"]))}</span>')
    children = _in_order(node)
    if not children:
        return f'<div class="pg-leaf">{head}</div>'
    inner = "".join(_node(c, total, depth + 1) for c in children)
    return f'<details{" open" if depth < OPEN_DEPTH else ""}><summary>{head}</summary>{inner}</details>'


def _tree(attribution: Attribution, phase: str) -> str:
    root = attribution.module_tree(phase)
    if not root["children"]:
        return ('<p class="pg-note">No work of this phase was attributed to a module.</p>'
                if attribution.attributed_us else "")
    head = ('<div class="pg-tree-head"><span class="pg-mod">module, in the order they ran</span>'
            '<span class="pg-num">device / step</span><span class="pg-num">share</span>'
            '<span class="pg-kinds">kernels by kind / step</span></div>')
    nodes = "".join(_node(c, attribution.device_us, 0) for c in _in_order(root))
    return f'<div class="pg-tree">{head}{nodes}</div>'


def _lines(attribution: Attribution, phase: str) -> str:
    lines = attribution.sources(phase)
    if not lines:
        return ""
    with_code = any(line["code"] for line in lines[:TOP_LINES])
    rows = []
    for line in lines[:TOP_LINES]:
        callers = _first(line["callers"], 1)
        where = line["file"] + ("" if callers == "–" else f" (called from {callers})")
        rows.append(cell(line["source"], title=where, cls="pg-src") + cell(line["function"] or "–", cls="name")
                    + (cell(line["code"] or "–", cls="name pg-code") if with_code else "")
                    + cell(f"{line['device_us']:,.1f}", num=True)
                    + cell(_share(line["device_us"], attribution.device_us), num=True)
                    + cell(_kinds(line["kinds"]), title=_first(line["kernels"], 6))
                    + cell(_first(line["modules"]), cls="name"))
    more = (f'<p class="pg-note">{len(lines) - TOP_LINES} more source lines of this phase in '
            "<code>--json</code>.</p>" if len(lines) > TOP_LINES else "")
    return table(["source line (hover: file)", "function", *(["code"] if with_code else []), "device µs / step",
                  "share", "kernels by kind / step", "modules"], rows) + more


def _labels(attribution: Attribution, phase: str) -> str:
    """What a bare trace still says: device time by record_function label and the top op under it."""
    spent: Counter = Counter()
    kinds: dict[str, Counter] = defaultdict(Counter)
    for r in attribution.rows:
        if r.phase == phase and not r.site.attributed:
            key = r.site.label or "?"
            spent[key] += r.device_us
            kinds[key].update(r.kinds)
    rows = [cell(label, cls="name") + cell(f"{us:,.1f}", num=True) + cell(_share(us, attribution.device_us), num=True)
            + cell(_kinds(kinds[label])) for label, us in sorted(spent.items(), key=lambda kv: -kv[1])[:TOP_LINES]]
    if not rows:
        return ""
    return ('<p class="pg-note">Not attributed to a module and a line, by <code>record_function</code> label and '
            "the op under it (a backward op's: the forward op it differentiates):</p>"
            + table(["label › op", "device µs / step", "share", "kernels by kind / step"], rows))


def _summary(a: Attribution) -> str:
    share = a.attributed_share
    how = [f"{_HOW_WORDS.get(k, k)}: {_us(v)}" for k, v in sorted(a.by_how.items(), key=lambda kv: -kv[1])
           if k in (STACK, PROVENANCE) and v > 0]
    text = (f"<p><b>{share:.1%}</b> of the step's {_us(a.device_us)} of device time (per step, mean of "
            f"{a.steps} step{'s' * (a.steps != 1)}) is attributed to a module and a line of your code"
            + (f" (from {'; '.join(how)})" if how else "") + ".</p>")
    if a.replayed_us:
        captured = a.captured_us / a.replayed_us
        how = ("each replayed kernel is attributed as the launch captured at its node, from the capture in the trace"
               if captured > 0.99 else
               "the capture is not in the trace: each replayed kernel is matched to inductor's kernel information by "
               "its name and place" if captured < 0.01 else
               f"{captured:.0%} of it through the launch captured at its node, from the capture in the trace, the "
               "rest through inductor's kernel information")
        text += (f'<p class="pg-note">Replayed by CUDA graphs: {a.graph_launches:g} <code>cudaGraphLaunch</code> per '
                 f"step launched {_us(a.replayed_us)} of that work, every kernel of it at once, with no launch of "
                 f"its own; {html.escape(how)}.</p>")
    if a.graphs_matched is not None:
        found, given = a.graphs_matched
        text += (f'<p class="pg-note">Inductor\'s kernel information beside the trace: {found} of its {given} '
                 f"compiled graph{'s' * (given != 1)} found in the steps.</p>")
    if a.unattributed:
        items = "".join(f"<li>{_us(us)} ({_share(us, a.device_us)}): {html.escape(REASONS[reason][0])}. "
                        f"<i>{html.escape(REASONS[reason][1][0].upper() + REASONS[reason][1][1:])}.</i></li>"
                        for reason, us in a.unattributed)
        text += f'<p>Not attributed:</p><ul class="pg-missing">{items}</ul>'
    return text


def attribution_section(a: Attribution) -> str:
    """The section's HTML."""
    if not a.device_us:
        return "<p>The steps hold no device work to attribute.</p>"
    parts = [_summary(a)]
    for phase in a.phases():
        us = a.phase_us(phase)
        parts.append(f'<h3 class="pg-phase">{html.escape(phase)} · {_us(us)} per step '
                     f"({_share(us, a.device_us)})</h3>")
        parts.append(_tree(a, phase) + _lines(a, phase) + _labels(a, phase))
    parts.append('<p class="pg-note">Modules as the profiler names them: class and instance, in the order it first '
                 "saw each (<code>Linear_3</code>), nested as they ran. An eager source line is where the function of "
                 "your code that ran the op starts (a Python frame records no more); a compiled kernel's is the line "
                 "inductor recorded for the graph nodes it fuses, and a kernel fusing nodes of several lines splits "
                 "its time evenly among them (counting in each line's kernels). A backward kernel counts at its "
                 "forward op's module and line; optimizer work at the optimizer's step.</p>")
    return "".join(parts)


CSS = """
.pg-phase{font-size:1.05em;margin:1.2em 0 .4em}
.pg-tree{font-size:.85em;margin:.3em 0 .8em;border-top:1px solid #e3e6eb}
.pg-tree details{margin-left:1em}.pg-tree>details{margin-left:0}
.pg-tree summary,.pg-leaf,.pg-tree-head{display:flex;flex-wrap:wrap;gap:.2em .8em;padding:.15em 0 .15em 1.1em;
border-bottom:1px solid #f0f1f4;cursor:pointer;position:relative}
.pg-tree summary::before{content:"▸";position:absolute;left:.1em;color:#5f6368}
.pg-tree details[open]>summary::before{content:"▾"}
.pg-leaf{margin-left:1em;cursor:default}.pg-tree-head{font-weight:600;background:#f6f7f9;cursor:default}
.pg-mod code{font-size:.9em;color:#3c4043}
.pg-table td.pg-src{white-space:nowrap}.pg-table td.pg-code{min-width:16em}
@media (max-width:600px){.pg-tree .pg-mod{flex-basis:100%}.pg-tree .pg-num{flex:0 0 auto;text-align:left}
.pg-tree-head .pg-kinds{display:none}}
.pg-mod{flex:1 1 12em;min-width:8em;overflow-wrap:anywhere}
.pg-num{flex:0 0 6.5em;text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.pg-kinds{flex:1 1 14em;color:#5f6368}
.pg-code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.95em}
.pg-missing{font-size:.9em;overflow-wrap:anywhere}
"""
