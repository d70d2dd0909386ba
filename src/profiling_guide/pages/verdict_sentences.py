"""The verdict in words: what makes the step slow, where, and what fixing it would save.

The records come from :mod:`profiling_guide.analysis.verdict` (one trace) and
:mod:`profiling_guide.analysis.run_verdict` (a run); the report's page, its
terminal line and the chapters' boxes all say them with these functions.
"""

from __future__ import annotations

from profiling_guide.analysis.causes import FIXES, Cause
from profiling_guide.analysis.verdict import MIN_SAVING, TIE, Verdict, WhatIf

#: How each cause opens a sentence.
NAMES = {
    Cause.GPU_COMPUTE: "GPU compute",
    Cause.LAUNCH_OVERHEAD: "Launch overhead",
    Cause.HOST_GAP: "A host gap",
    Cause.HOST_SYNC: "A host sync",
    Cause.MEMCPY: "A host↔device copy",
    Cause.ALLOCATOR: "The allocator",
    Cause.EXPOSED_COMMUNICATION: "Exposed communication",
    Cause.WAITING_FOR_RANK: "Waiting for another rank",
    Cause.LOAD_IMBALANCE: "Load imbalance",
    Cause.PROFILER_OVERHEAD: "The profiler's own cost",
}


def ms(x: float) -> str:
    """``"12.3 ms"``, ``"0.46 ms"``, ``"0.012 ms"``: three significant figures at most."""
    if abs(x) >= 10:
        return f"{x:,.1f} ms"
    if abs(x) >= 0.1:
        return f"{x:.2f} ms"
    return f"{x:.3f} ms"


def place(w: WhatIf) -> str:
    """Where, as a sentence continues after the cause: "at aten::item in 'forward'", "in 'forward'"."""
    words = w.where.words()
    if words.startswith(("in ", "before ")):
        return words
    return "across the step" + words[len("the step"):] if words.startswith("the step") else f"at {words}"


def what_if_sentence(w: WhatIf) -> str:
    """One cause with where it is and what fixing it would save."""
    where = place(w)
    if w.cause is Cause.GPU_COMPUTE:
        # the fix less its note on the what-if, which the sentence says in its own words
        lead = "faster or fewer kernels there" if w.fix == FIXES[w.cause] else w.fix.split(" (the what-if")[0]
        return (f"{NAMES[w.cause]} {where}: {ms(w.path_ms)} of the {ms(w.step_ms)} step's critical path. "
                f"{lead[0].upper()}{lead[1:]}; without them the step would take about "
                f"{ms(w.predicted_step_ms)}, the most a faster kernel could save.")
    return (f"{NAMES[w.cause]} {where}: about {ms(w.saving_ms)} of the {ms(w.step_ms)} step. "
            f"Fix: {w.fix}; that would bring the step to about {ms(w.predicted_step_ms)}.")


def _listed(intro: str, whats: list[WhatIf], tail: str = ".") -> str:
    """`` Next: host sync at aten::item (−0.12 ms); …`` for the what-ifs listed after the verdict."""
    return (f" {intro}: " + "; ".join(f"{NAMES[w.cause].lower()} {place(w)} "
                                      f"({'−' if w.saving_ms >= 0 else '+'}{ms(abs(w.saving_ms))})" for w in whats)
            + tail)


def _rest_sentences(v: Verdict) -> str:
    """The next two fixes after the verdict: a tie said as a tie, a larger change after a smaller one, then the
    rest; a GPU-compute what-if under MIN_SAVING says faster kernels would barely help."""
    first, rest, text = v.verdict, list(v.what_if[1:3]), ""
    tied = [w for w in rest if w.cause is not Cause.GPU_COMPUTE and abs(first.saving_ms - w.saving_ms) <= TIE * w.step_ms
            and not (w.cause is first.cause is Cause.LAUNCH_OVERHEAD)]  # a region is part of the step
    if tied:  # inside the estimate's precision the two are one: say so, rather than pick
        text += _listed("About as much", tied, ", a tie.")
    # the GPU-compute what-if is listed whatever it saves: under MIN_SAVING, it says faster kernels would not help
    idle = [w for w in rest if w.cause is Cause.GPU_COMPUTE and w.saving_ms < MIN_SAVING * w.step_ms]
    # a fix named first as the smaller change (verdict.PLACE_SHARE) leaves a larger one that saves more
    larger = [w for w in rest if w not in tied and w.saving_ms - first.saving_ms > TIE * w.step_ms]
    if larger:
        text += _listed("More, with a larger change", larger)
    rest = [w for w in rest if w not in tied and w not in idle and w not in larger]
    if rest:
        text += _listed("Next", rest)
    for w in idle:
        text += (f" Faster kernels would barely shorten this step: removing the heaviest ({w.where.words()}) saves "
                 f"{ms(max(w.saving_ms, 0.0))}, under {MIN_SAVING:.0%} of it.")
    return text


def verdict_sentence(v: Verdict) -> str:
    """The verdict, then the next two fixes; or what the trace lacks for one."""
    if v.verdict is None:
        return f"No verdict: {v.missing}." if v.missing else "No verdict: the trace holds no step to re-time."
    text = what_if_sentence(v.verdict)
    if v.verdict.cause is Cause.GPU_COMPUTE and len(v.what_if) == 1:
        text += f" No other fix would save {MIN_SAVING:.0%} of the step: the GPU's own work sets the pace."
    return text + _rest_sentences(v)


def profiler_sentence(v: Verdict) -> str:
    """What the profiler's own cost was estimated at, and how."""
    p = v.profiler
    if p is None:
        return ""
    how = (f"calibrated from the run record: the step's host work at {v.profiler_factor:.2f}× its profiled length"
           if v.profiler_factor is not None else
           f"estimated per recorded op and runtime call, ×{v.profiler_scale:.2f} for this host")
    return (f"As profiled, the step re-times to {ms(p.step_ms)}; without the profiler's own cost ({how}) to "
            f"{ms(p.predicted_step_ms)}. The causes are ranked on that second figure.")
