"""A diff's verdict in words: what changed, whether it is beyond the noise, what explains it, and the pace.

The records come from :mod:`profiling_guide.analysis.diff`; the diff's page,
its JSON's ``verdict.text``, its terminal line and chapter 5 say them with
these functions, in the report's vocabulary
(:mod:`~profiling_guide.pages.verdict_sentences`).
"""

from __future__ import annotations

import statistics

from profiling_guide.analysis.diff import MIN_SAMPLES, Diff, Side, significant, verdict
from profiling_guide.pages.verdict_sentences import NAMES


def us(x: float) -> str:
    """``"12.3 µs"``, ``"1.25 ms"``."""
    return f"{x / 1e3:.2f} ms" if abs(x) >= 1000 else f"{x:.1f} µs"


def noise(sig: bool | None) -> str:
    """How a change stands against the noise, for a sentence to go on."""
    if sig is None:
        return f"too few samples to tell it from the noise (at least {MIN_SAMPLES} a side are needed)"
    if sig:
        return "beyond the noise (the interquartile ranges do not overlap)"
    return "within the noise (the interquartile ranges overlap): a tie"


def verdict_text(d: Diff) -> str:
    """The diff's verdict in one paragraph."""
    v = verdict(d)
    a, b = d.a.step, d.b.step
    sources = v.steps_source or f"{d.a.name}: {d.a.steps_source}; {d.b.name}: {d.b.steps_source}"
    text = (f"{d.b.name}'s step is {us(abs(v.step_delta_us))} {'shorter' if v.step_delta_us < 0 else 'longer'} "
            f"than {d.a.name}'s ({us(a.median)} → {us(b.median)}, medians of {a.repeats} and {b.repeats} samples, "
            f"{sources}): {noise(v.step_significant)}.")
    if v.profiled_unalike:
        more, fewer = (d.a, d.b) if d.a.python_per_step > d.b.python_per_step else (d.b, d.a)
        text += (f" The two were not profiled alike: {more.name}'s trace holds {more.python_per_step:,.0f} traced "
                 f"Python calls a step (with_stack=True), {fewer.name}'s {fewer.python_per_step:,.0f}; the "
                 "profiler's own cost, in the steps as profiled, differs by theirs.")
    if v.on_host:
        way = ("went the other way" if v.device_delta_us * v.step_delta_us < 0
               else f"changed by {us(v.device_delta_us)} in all")
        text += (f" Its device work {way}, {us(d.a.device_us)} → {us(d.b.device_us)} per step: most of the step's "
                 "change is not in the kernels but on the host or in waiting.")
        if v.path_change is not None:
            cause, pa, pb = v.path_change
            text += (f" On the traces' critical paths (the report's), {NAMES[cause].lower()} changed most: "
                     f"{pa:.3f} → {pb:.3f} ms.")
    elif v.explained_by is not None:
        row = v.explained_by
        where = " in the traces" if d.a.steps_source != Side.steps_source else ""
        called = f", {noise(significant(row.a, row.b)).split(' (')[0]}" if v.step_significant is not None else ""
        text += (f" The change that explains most of it: {row.words()}, {us(statistics.median(row.a))} → "
                 f"{us(statistics.median(row.b))} per step{where} ({us(row.delta_us)}{called}).")
    if v.pace is not None:
        (ca, ba), (cb, bb) = v.pace
        bound = f"{d.b.name} is {bb} where {d.a.name} is {ba}" if ba != bb else f"{ba} on both sides"
        cause = (f"the report's verdict is {NAMES[cb].lower()} for {d.b.name} where it is {NAMES[ca].lower()} for "
                 f"{d.a.name}" if ca is not cb else f"the report's verdict is {NAMES[ca].lower()} on both")
        text += f" The pace {'changed' if v.pace_changed else 'did not change'}: {bound}, {cause}."
    return text
