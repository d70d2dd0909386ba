"""Guess first, then look: predictions stated as data and judged against a trace.

An example lists its :class:`Prediction` objects *before* it opens the trace,
then calls :func:`judge`, which returns the :class:`Verdicts` as data; the page
shows them as a ✓/✗ table with what the trace showed
(:func:`profiling_guide.pages.tables.verdict_table`). A prediction marked
``must_hold`` is a claim the page's prose relies on: if it fails,
:meth:`Verdicts.require` stops the build rather than let the text say
something the recording contradicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from profiling_guide.errors import GuideError
from profiling_guide.trace.model import Trace

# Where the expectations come from; the page links each source it names.
POST = "original post (A100)"
POST_URL = "https://huggingface.co/blog/torch-mlp-fusion"
PART1_URL = "https://huggingface.co/blog/torch-profiler"


class ClaimFailed(GuideError):
    """A claim the page relies on does not hold on the recording."""


@dataclass
class Prediction:
    """A claim about the trace and the predicate that tests it.

    ``predicate(data) -> (holds, seen)``: ``seen`` says in a few words what was
    actually there, whether or not the claim holds.
    """

    claim: str
    predicate: Callable[..., tuple[bool, str]]
    source: str = ""  # where the expectation comes from, e.g. "original post (A100)"
    must_hold: bool = True
    #: what the predicate reads, where it is not the data :func:`judge` is given (one list may
    #: then hold claims about several traces, or about a trace and some timings)
    of: object = None


@dataclass
class Verdict:
    claim: str
    holds: bool
    seen: str
    source: str
    must_hold: bool


class Verdicts(list):
    """The judged predictions (a page shows them with :func:`profiling_guide.pages.tables.verdict_table`).

    ``seen_header`` heads the column of what was seen: a trace by default,
    or whatever else the claims were judged against (counters, timings).
    """

    seen_header = "what the trace shows"

    @property
    def all_hold(self) -> bool:
        return all(v.holds for v in self)

    def failed(self) -> list[Verdict]:
        return [v for v in self if not v.holds]

    def require(self) -> None:
        """Raise :class:`ClaimFailed` if a ``must_hold`` prediction failed.

        Returns nothing, so a page that ends a cell with it does not show the table a second time.
        """
        broken = [v for v in self if v.must_hold and not v.holds]
        if broken:
            raise ClaimFailed("; ".join(f"claim {v.claim!r} fails on this recording: {v.seen}" for v in broken))


def judge(predictions: list[Prediction], data, *, seen_header: str | None = None) -> Verdicts:
    """Run every prediction's predicate on ``data`` (a Trace, or whatever the predicates take),
    or on the prediction's own ``of`` where it names one; ``seen_header`` names what
    ``data`` is where it is not a trace (e.g. "what the counters show")."""
    out = Verdicts()
    if seen_header:
        out.seen_header = seen_header
    for p in predictions:
        holds, seen = p.predicate(data if p.of is None else p.of)
        out.append(Verdict(p.claim, bool(holds), seen, p.source, p.must_hold))
    return out


# --------------------------------------------------------------- common predicates
def kernels_per_step(n: float) -> Callable[[Trace], tuple[bool, str]]:
    """The trace launches ``n`` kernels per step (memsets and copies not counted)."""
    def _predicate(trace: Trace):
        seen = trace.kernels_per_step()
        kinds = ", ".join(sorted({k.decoded.kind for k in trace.kernels}))
        return seen == n, f"{seen:g} kernels per step ({kinds})"
    return _predicate


def launches_nothing(op_name: str) -> Callable[[Trace], tuple[bool, str]]:
    """``op_name`` runs in every step yet launches no device work."""
    def _predicate(trace: Trace):
        ops = trace.ops_named(op_name)
        if not ops:
            return False, f"no {op_name} in the trace"
        device_us = sum(ev.dur_us for op in ops for ev in op.device_events)
        return device_us == 0 and not any(op.device_events for op in ops), (
            f"{len(ops) / len(trace.steps):g} call(s) per step, {device_us:.1f} µs of device time")
    return _predicate


def no_op(op_name: str) -> Callable[[Trace], tuple[bool, str]]:
    """``op_name`` does not appear in the active steps."""
    def _predicate(trace: Trace):
        n = len(trace.ops_named(op_name))
        return n == 0, f"{op_name}: {n / len(trace.steps):g} call(s) per step"
    return _predicate


def no_kernel_of_kind(kind: str, *, name_has: str = "") -> Callable[[Trace], tuple[bool, str]]:
    """No kernel of decoded ``kind`` (and containing ``name_has``) runs."""
    def _predicate(trace: Trace):
        hits = sorted({k.decoded.short for k in trace.kernels
                       if k.decoded.kind == kind and name_has in k.name})
        return not hits, ("none" if not hits else ", ".join(hits))
    return _predicate


def kernel_names(trace: Trace) -> list[str]:
    """The distinct kernel names of a trace, in first-launch order."""
    return list(dict.fromkeys(k.name for k in trace.kernels))


def same_kernels(a: Trace, b: Trace) -> tuple[bool, str]:
    """Do two runs launch byte-identical kernel names (as sets)?"""
    short = {k.name: k.decoded.short for k in (*a.kernels, *b.kernels)}
    ka, kb = set(kernel_names(a)), set(kernel_names(b))
    if ka == kb:
        return True, "identical: " + ", ".join(short[k] for k in sorted(ka))
    return False, (f"only in the first: {', '.join(short[k] for k in sorted(ka - kb)) or '–'}; "
                   f"only in the second: {', '.join(short[k] for k in sorted(kb - ka)) or '–'}")
