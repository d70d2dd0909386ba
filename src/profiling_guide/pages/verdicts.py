"""The pace verdict a chapter states, in words: one per variant and GPU, never contradicted.

Several chapters profile the same variant (the eager MLP appears in chapters
2 to 5); each measured it with the profiler off in its own run. The verdict a
page states pools every such measurement of the variant on the page's GPU
(:func:`~profiling_guide.analysis.pace_verdict.pooled_bound`): where they
disagree it is a tie, so no two pages of one GPU say different things about
one variant. :data:`VARIANTS` says which recording measured which variant.

:func:`pace_facts` composes the page's sentences: the verdict with the
profiler off first, then what the profiled trace's idle time waited for and
the action it calls for, and, where another GPU's recordings give the variant
another verdict, why, in one sentence.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from profiling_guide.analysis.gaps import Cause, Gaps, step_gaps
from profiling_guide.analysis.pace_verdict import Bound, Measurement, PaceVerdict, pace_verdict, pooled_bound
from profiling_guide.analysis.trace_report import unprofiled_label
from profiling_guide.analysis.verdict import MIN_SAVING, Verdict, is_loop_sync
from profiling_guide.analysis.verdict import verdict_of as verdict_of_trace
from profiling_guide.errors import GuideError
from profiling_guide.pages.facts import Facts
from profiling_guide.pages.recordings import recorded_trace
from profiling_guide.analysis.causes import Cause as VerdictCause
from profiling_guide.pages.verdict_sentences import NAMES, ms, place
from profiling_guide.pages.verdict_sentences import verdict_sentence as verdict_sentence_of
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run_record import read_run_record

#: Which variant each recording measured (``<example>.<capture>`` → a name for the variant). Recordings of
#: one variant run the same code at the same sizes, so one GPU's verdict on them must agree.
VARIANTS = {
    "01_linear.eager": "nn.Linear, eager",
    "07_cuda_graphs.linear.eager": "nn.Linear, eager",
    "01_linear.compiled": "nn.Linear, torch.compile",
    "02_mlp_eager.eager": "MLP, eager",
    "03_mlp_compile.eager": "MLP, eager",
    "04_liger.eager": "MLP, eager",
    "05_compare.eager": "MLP, eager",
    "03_mlp_compile.compiled": "MLP, torch.compile",
    "05_compare.compile": "MLP, torch.compile",
    "06_fused.compiled": "MLP, torch.compile",
    "05_compare.compile-max-autotune": "MLP, torch.compile max-autotune",
    "04_liger.liger": "MLP, Liger",
    "05_compare.liger": "MLP, Liger",
    "04_liger.kernelized": "MLP, Liger through kernelize",
    "06_fused.fused": "MLP, epilogue-fused",
    "06b_training_step.eager": "training step, eager",
    "06b_training_step.compile": "training step, torch.compile",
    "06b_training_step.liger": "training step, Liger",
    "06b_training_step.fused": "training step, epilogue-fused",
    "07_cuda_graphs.linear.reduce-overhead": "nn.Linear, reduce-overhead",
    "07_cuda_graphs.linear.replay": "nn.Linear, CUDA graph",
    "07_cuda_graphs.linear.copy_in_replay": "nn.Linear, copy in + CUDA graph",
    "07_cuda_graphs.mlp.eager": "MLP at 16 tokens, eager",
    "07_cuda_graphs.mlp.reduce-overhead": "MLP at 16 tokens, reduce-overhead",
    "07_cuda_graphs.mlp.replay": "MLP at 16 tokens, CUDA graph",
    "07_cuda_graphs.mlp.copy_in_replay": "MLP at 16 tokens, copy in + CUDA graph",
    "08_own_model.train": "GPT-2 training step",
    "08_own_model.padded": "GPT-2 training step, vocabulary padded",
    "08b_your_lines.eager": "small GPT training step, eager, profiled with stacks and modules",
    "08b_your_lines.compiled": "small GPT training step, torch.compile, profiled with stacks and modules",
    "08b_your_lines.graphed": "small GPT training step, reduce-overhead, profiled with stacks and modules",
    "09b_attention_sweep.fa4_step": "attention training step, FlashAttention-4",
}
#: Where chapter 1 explains what the profiler does to the host's time (the anchor of its section).
PROFILER_COST = "plot_01_linear.html#profiler-cost"


def chapter_of(recording: str) -> str:
    """``"chapter 6b"`` for ``"06b_training_step.fused"``."""
    m = re.match(r"0*(\d+[a-z]?)_", recording)
    return f"chapter {m.group(1)}" if m else recording


def gpu_name(run: dict) -> str:
    """The GPU's short name, ``"H100"`` for ``"NVIDIA H100 80GB HBM3"``."""
    name = (run.get("gpu") or {}).get("name", "")
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Za-z]?)\b", name)
    return m.group(1) if m else (name or "this GPU")


def measurement(run: dict, source: str, trace=None) -> Measurement | None:
    """The profiler-off measurement a run record holds: CPU issue time against device time per call.

    A run of ``profile_callable`` times only the host; its device time is then the device's busy time
    per profiled step of ``trace`` (the profiler slows the host, not the kernels), its spread over the steps.
    """
    timings = run.get("timings") or {}
    if not isinstance(timings.get("cpu_issue_us"), dict):
        return None
    cpu = Spread.from_dict(timings["cpu_issue_us"])
    if isinstance(timings.get("device_us"), dict):
        return Measurement(source, cpu, Spread.from_dict(timings["device_us"]))
    if trace is None:
        return None
    return Measurement(source, cpu, Spread.of([step_gaps(s).busy_us for s in trace.steps]), device_from_trace=True)


def measurements(folder: Path, variant: str) -> list[Measurement]:
    """Every profiler-off measurement of ``variant`` among the recordings in ``folder`` (one GPU)."""
    found = []
    for name, its_variant in VARIANTS.items():
        path = folder / f"{name}.run.json"
        if its_variant != variant or not path.is_file():
            continue
        run = read_run_record(path)
        trace_path = folder / f"{name}.trace.json.gz"
        trace = None
        if "device_us" not in (run.get("timings") or {}) and trace_path.is_file():
            trace = recorded_trace(trace_path)
        m = measurement(run, name, trace)
        if m is not None:
            found.append(m)
    return found


def verdict_of(rec) -> PaceVerdict:
    """The pace verdict of recording ``rec``'s variant on its GPU, with ``rec``'s trace's idle time."""
    variant = VARIANTS.get(rec.name)
    if variant is None:
        raise GuideError(f"recording {rec.name} measures no variant named in pages/verdicts.py VARIANTS: "
                         "add it there")
    found = measurements(rec.folder, variant)
    if not any(m.source == rec.name for m in found):
        own = measurement(rec.run, rec.name, rec.trace)
        found += [own] if own else []
    if not found:
        raise GuideError(f"recording {rec.name} holds no profiler-off timings (cpu_issue_us): re-record it")
    return pace_verdict(found, rec.trace)


# ------------------------------------------------------------------ sentences
def _us(x: float) -> str:
    return f"{x / 1e3:,.1f} ms" if x >= 1e4 else f"{x:,.1f} µs"


def _span(lo: float, hi: float) -> str:
    """``"150.7–206.0 µs"``, or one figure when both ends round alike."""
    if _us(lo) == _us(hi):
        return _us(lo)
    if (lo >= 1e4) == (hi >= 1e4):
        return _us(lo).rsplit(" ", 1)[0] + "–" + _us(hi)
    return f"{_us(lo)}–{_us(hi)}"


def _spread(s: Spread) -> str:
    return f"{_us(s.median)} (IQR {_span(s.q1, s.q3)})"


def _pooled(spreads: list[Spread]) -> str:
    """Several measurements of one time: the range of their medians and of their quartiles."""
    return (f"{_span(min(s.median for s in spreads), max(s.median for s in spreads))} "
            f"(medians; quartiles {_span(min(s.q1 for s in spreads), max(s.q3 for s in spreads))})")


def _sources(measured: tuple[Measurement, ...]) -> str:
    return ", ".join(dict.fromkeys(chapter_of(m.source) for m in measured))


LEAD = {
    Bound.DEVICE: "The GPU sets the pace",
    Bound.OVERHEAD: "The CPU sets the pace",
    Bound.TIE: "Neither side clearly sets the pace",
}
#: The report's cause each profiler-off pace stands for (``docs/report.md``, "The verdict"), and how a box
#: names it: one vocabulary on every page.
PACE_CAUSE = {Bound.DEVICE: VerdictCause.GPU_COMPUTE, Bound.OVERHEAD: VerdictCause.LAUNCH_OVERHEAD}
CAUSE_OF = {bound: cause.value for bound, cause in PACE_CAUSE.items()} | {
    Bound.TIE: f"{PACE_CAUSE[Bound.OVERHEAD].value} and {PACE_CAUSE[Bound.DEVICE].value} within each other's spread"}
ACTION = {
    Bound.DEVICE: "The CPU runs ahead and the GPU works back to back: faster kernels, or fewer, are what helps.",
    Bound.OVERHEAD: ("The GPU waits for the host: less Python and fewer launches per {what} (torch.compile, "
                     "CUDA graphs, larger batches) shorten it. A faster kernel still shortens the GPU's time, "
                     "but not the {what}'s, until the host issues it faster than the GPU runs it."),
    Bound.TIE: "Both matter here: faster kernels and less host work per {what} would each show.",
}


def _device_words(m: Measurement) -> str:
    return "its kernels keep the GPU busy" if m.device_from_trace else "running it takes the GPU"


def verdict_sentence(v: PaceVerdict, what: str = "forward") -> str:
    """The profiler-off verdict in one sentence, with its numbers and the action it calls for."""
    if len(v.measurements) == 1:
        m = v.measurements[0]
        numbers = (f"with the profiler off, issuing one {what} takes the CPU {_spread(m.cpu_issue)}, and "
                   f"{_device_words(m)} {_spread(m.device)}")
        if m.device_from_trace:
            numbers += " (its profiled steps: the profiler slows the host, not the kernels)"
        if v.bound is Bound.TIE:
            numbers += ": inside each other's spread"
    else:
        numbers = (f"the {len(v.measurements)} profiler-off measurements of this {what} on this GPU "
                   f"({_sources(v.measurements)}) {'agree' if v.agree else 'disagree'}. Issuing one took the CPU "
                   f"{_pooled([m.cpu_issue for m in v.measurements])}, running it the GPU "
                   f"{_pooled([m.device for m in v.measurements])}")
    return f"{LEAD[v.bound]} ({v.bound.value}: {CAUSE_OF[v.bound]}): {numbers}. {ACTION[v.bound].format(what=what)}"


GAP_WORDS = {
    Cause.HOST: "waiting for the host to launch the next kernel (launch_overhead)",
    Cause.SYNC: "after a synchronizing call had emptied its queue (host_sync)",
    Cause.QUEUED: "with its next kernel already launched (waiting on another stream or an event)",
    Cause.COLLECTIVE: "in collective kernels with no compute beside them (exposed_communication)",
}
HOST_GAPS = {
    Bound.OVERHEAD: "Those gaps are what an overhead-bound {what} looks like, profiled or not.",
    Bound.DEVICE: ("Those gaps are the profiler's own: the profiler slows the host and not the GPU, and with it "
                   "off the host keeps ahead."),
    Bound.TIE: "The profiler widens those gaps: the profiler slows the host and not the GPU.",
}


def agreement_sentence(engine: Verdict | None, bound: Bound | None) -> str:
    """Why the profiled loop's critical path names another cause than the profiler-off pace, where it does."""
    if engine is None or engine.verdict is None or bound not in PACE_CAUSE:
        return ""
    w = engine.verdict
    if w.cause is PACE_CAUSE[bound] or is_loop_sync(w):
        return ""
    sync = next((x for x in engine.what_if[:3] if is_loop_sync(x)), None)
    side = "GPU" if bound is Bound.DEVICE else "CPU"
    if sync is not None:
        return (f"Profiler off the {side} is the slower side, yet the profiled loop's path names "
                f"{w.cause.value}: the loop's own torch.cuda.synchronize() after each step empties the GPU's queue, "
                f"so each step starts with the GPU waiting for its first launches. Without that sync (host_sync, "
                f"−{ms(max(sync.saving_ms, 0.0))}) the loop would take about {ms(sync.predicted_step_ms)} a step.")
    return (f"Profiler off the {side} is the slower side, yet the profiled loop's path names {w.cause.value}: the "
            "profiler-off numbers time the host's issue and the GPU's run apart, while the path re-times the loop "
            "as the trace ran it, each wait where it was.")


def engine_sentence(engine: Verdict | None) -> list[str]:
    """The verdict engine's answer for the profiled loop, in the report's words (one sentence, or none).

    Where its largest saving is the loop's own ``torch.cuda.synchronize()`` after each step, the sentence says
    so: that call is there to time each step, and what removing it predicts is the loop whose pace the
    profiler-off numbers give; the program's own causes are the ones after it.
    """
    if engine is None or engine.verdict is None:
        return []
    lead = "Re-timed from the trace with the profiler's cost taken out, the profiled loop's critical path says: "
    w = engine.verdict
    if not is_loop_sync(w):
        return [lead + verdict_sentence_of(engine)]
    # a GPU-compute what-if under MIN_SAVING says nothing here: faster kernels would not shorten this loop
    rest = [x for x in engine.what_if[1:3]
            if x.cause is not VerdictCause.GPU_COMPUTE or x.saving_ms >= MIN_SAVING * x.step_ms]
    text = (f"{lead}the largest saving, about {ms(w.saving_ms)} of the {ms(w.step_ms)} step, is the loop's own "
            f"torch.cuda.synchronize() after each step (host_sync): each step starts "
            "on an empty GPU queue, so the host's time to issue it and the GPU's time to run it add up. Without it "
            f"the loop would take about {ms(w.predicted_step_ms)} a step; the sync is there to time each step, "
            "and a training loop leaves it out.")
    if rest:
        text += " Then: " + "; ".join(f"{NAMES[x.cause].lower()} {place(x)} (−{ms(max(x.saving_ms, 0.0))})"
                                      for x in rest) + "."
    return [text]


def engine_verdict(rec) -> Verdict:
    """The report's verdict on ``rec``'s trace, its profiler cost calibrated by the recording's profiler-off timing."""
    return verdict_of_trace(rec.trace, rec.trace.steps, unprofiled=unprofiled_label(rec.run))


def trace_sentences(v: PaceVerdict, what: str = "forward", engine: Verdict | None = None) -> list[str]:
    """What the profiled trace's idle time waited for, and what the verdict engine makes of it (profiler on)."""
    g: Gaps = v.gaps
    if not g.steps:
        return []
    lines = [f"In the trace (profiler on), the GPU ran work {_us(g.busy_us)} of each {_us(g.step_us)} profiled "
             f"step; the step's last device work ended {_us(g.last_device_us)} after its start."]
    idle = g.total_idle_us
    if idle > 0:
        parts = [f"{_us(us)} {GAP_WORDS[c]}" for c, us in sorted(g.idle_us.items(), key=lambda kv: -kv[1])
                 if us >= max(0.5, 0.02 * idle)]
        lines.append(f"It sat idle {_us(idle)} per step: " + "; ".join(parts) + ".")
    if g.main is Cause.HOST:
        lines.append(HOST_GAPS[v.bound].format(what=what))
    return lines + engine_sentence(engine) + [agreement_sentence(engine, v.bound)]


def other_gpu_sentence(v: PaceVerdict, other: str, theirs: list[Measurement], what: str = "forward",
                       subject: str | None = None) -> str:
    """Why the ``other`` GPU's verdict on the variant differs, from its numbers; '' where it agrees.

    ``subject`` names the variant in the sentence (default: "the same <what>").
    """
    if not theirs or pooled_bound(theirs) is v.bound:
        return ""
    bound = pooled_bound(theirs)
    how = {Bound.DEVICE: "device-bound", Bound.OVERHEAD: "overhead-bound",
           Bound.TIE: "a tie" if len({m.bound for m in theirs}) == 1 else "a tie, its measurements disagreeing"}
    cpu = _spread(theirs[0].cpu_issue) if len(theirs) == 1 else _pooled([m.cpu_issue for m in theirs])
    dev = _spread(theirs[0].device) if len(theirs) == 1 else _pooled([m.device for m in theirs])
    return (f"On the {other} {subject or 'the same ' + what} is {how[bound]}: there the CPU took {cpu} to issue "
            f"it and the GPU {dev} to run it, profiler off.")


def other_gpus(rec) -> dict[str, list[Measurement]]:
    """The measurements of ``rec``'s variant in every other GPU's recordings beside its own, by GPU name."""
    variant = VARIANTS.get(rec.name)
    out = {}
    for folder in sorted(p for p in rec.folder.parent.iterdir() if p.is_dir() and p != rec.folder):
        path = folder / f"{rec.name}.run.json"
        if path.is_file():
            out[gpu_name(read_run_record(path))] = measurements(folder, variant)
    return out


def pace_facts(rec, what: str = "forward") -> Facts:
    """The page's pace verdict for recording ``rec``: profiler off first, then the trace, then other GPUs."""
    v = verdict_of(rec)
    others = [other_gpu_sentence(v, name, theirs, what) for name, theirs in other_gpus(rec).items()]
    return Facts(verdict_sentence(v, what), *trace_sentences(v, what, engine_verdict(rec)), *others,
                 links={"the profiler slows the host": PROFILER_COST})


def profiler_cost(rec, label: str) -> Facts:
    """What the profiler added to the host's time for one call of ``rec``, in the report's words.

    The CPU time of the ``label`` annotation per profiled step against the CPU issue time measured
    with the profiler off (the report's "profiler overhead" check says the same of any trace).
    """
    profiled = rec.trace.cpu_us_per_step(label)
    unprofiled = rec.timings["cpu_issue_us"]
    ops = sum(1 for s in rec.trace.steps for op in s.ops if not op.annotation) / max(len(rec.trace.steps), 1)
    extra = profiled - unprofiled.median
    return Facts(f"'{label}' took {_us(profiled)} of CPU per step under the profiler and {_spread(unprofiled)} "
                 f"without it: the profiler added {_us(extra)} ({extra / unprofiled.median:+.0%}) for "
                 f"{ops:,.0f} recorded CPU ops per step.")


SHORT = {Bound.DEVICE: "the GPU (device-bound)", Bound.OVERHEAD: "the CPU (overhead-bound)",
         Bound.TIE: "neither (a tie)"}
DISAGREE = "neither: the measurements disagree"


def who_sets_the_pace(rec) -> str:
    """A table cell: who sets the pace of ``rec``'s variant on its GPU, profiler off."""
    v = verdict_of(rec)
    return SHORT[v.bound] if v.agree else DISAGREE


def verdict_table(recs: dict) -> pd.DataFrame:
    """One row per named recording: its variant's pace verdict on this GPU, with the numbers behind it."""
    rows = {}
    for name, rec in recs.items():
        v = verdict_of(rec)
        cpu = [m.cpu_issue.median for m in v.measurements]
        dev = [m.device.median for m in v.measurements]
        rows[name] = {"sets the pace, profiler off": who_sets_the_pace(rec),
                      "CPU to issue, medians": _span(min(cpu), max(cpu)),
                      "GPU to run, medians": _span(min(dev), max(dev)),
                      "measured in": _sources(v.measurements)}
    return pd.DataFrame.from_dict(rows, orient="index")


def other_gpu_facts(recs: dict, what: str = "forward") -> Facts:
    """For each named recording whose variant gets another verdict on another GPU: why, in one sentence."""
    sentences = []
    for name, rec in recs.items():
        v = verdict_of(rec)
        sentences += [other_gpu_sentence(v, other, theirs, what, subject=f"the {name} {what}")
                      for other, theirs in other_gpus(rec).items()]
    return Facts(*sentences)


def timed_pace_facts(source: str, cpu_issue: Spread, device: Spread, trace: Trace, what: str = "forward") -> Facts:
    """The pace verdict of one variant timed by its page's own measurement (not a recording's ``timings``).

    ``cpu_issue`` and ``device`` are profiler-off spreads of one call (``what``); ``trace`` its profiled steps.
    """
    v = pace_verdict([Measurement(source, cpu_issue, device)], trace)
    return Facts(verdict_sentence(v, what), *trace_sentences(v, what, verdict_of_trace(trace, trace.steps)),
                 links={"the profiler slows the host": PROFILER_COST})
