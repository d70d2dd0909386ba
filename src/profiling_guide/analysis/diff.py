"""What changed between two traces of one program, beyond the noise.

:func:`diff` lines up the device work of trace A and trace B (each a trace,
or several traces of the same program recorded again: repeats) through what
launched it, and says which differences are larger than the step-to-step
spread.

**Rows.** Every kernel, memset and memcpy of a profiled step becomes part of a
row, keyed by where it ran and what it computed:

* the *phase* (forward, backward, optimizer: from the ``record_function``
  labels ``forward``/``backward``/``optimizer``, the autograd engine's ops and
  ``Optimizer.step``) and the innermost user label around it (``mlp_fwd``;
  ``torch.compile``'s own annotations are not labels);
* what it computes: a GEMM by the shapes its ``aten::mm``-like op received
  (``gemm 8192×768 · 768×3072``), a memset or memcpy by the op it belongs to,
  another kernel by the outermost ``aten::`` op that launched it
  (``aten::gelu``), or, for a kernel inductor generated, by the ops its name
  says it fuses (``triton_poi_fused_gelu_mul_0`` fuses ``gelu`` and ``mul``).

**Matching**, in three passes, each on what the one before left unmatched:

1. the same row on both sides (same phase, label and computation);
2. a fused kernel to the rows of the other side whose ops it fuses, in the same
   phase and label (eager's ``aten::gelu`` and ``aten::mul`` against compile's
   one Triton kernel): one row, A's side the sum of the ops, B's the kernel;
3. what is left under the same phase and label on both sides, matched at that
   label, the lowest parent the two share (as TraceLens matches differing
   kernels): one row, named ``other work in 'mlp_fwd'``.

What is still unmatched is listed, never dropped. The *matched share* is the
device time in matched rows over all device time, both sides together.

**Beyond the noise.** Every profiled step (of every repeat) is a sample: a row
holds its device µs per step on each side. A difference is *significant* only
when each side has at least :data:`MIN_SAMPLES` samples and the two
interquartile ranges do not overlap; with fewer the diff says so and calls
nothing. The step time per step is the longer of the step's CPU span and its
device work's span; a caller with better samples of the step (a benchmark's
repeats) can pass them.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from profiling_guide.spread import Spread
from profiling_guide.trace.kernel_names import decode
from profiling_guide.trace.model import CpuOp, DeviceEvent, Step, Trace

SCHEMA = "profiling-guide.diff/1"
#: The fewest samples per side for a difference to be called beyond the noise.
MIN_SAMPLES = 5
#: Ops whose input shapes name a GEMM.
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::matmul")
#: Annotations torch.compile adds around its graphs: not the user's labels.
COMPILE_ANNOTATIONS = re.compile(r"^(## |Torch-Compiled Region|CompiledFunction|ProfilerStep#|nccl:)")
#: An inductor kernel's name: its kind, the ops it fuses, its index.
INDUCTOR = re.compile(r"^triton_(?:poi|red|per|tem|for)_fused_(?P<ops>.+?)_\d+$")


# ------------------------------------------------------------------- rows
def _ancestors(op: CpuOp | None):
    while op is not None:
        yield op
        op = op.parent


def phase_of(op: CpuOp | None) -> str:
    """forward, backward or optimizer, from the labels and ops around ``op``."""
    for o in _ancestors(op):
        name = o.name.lower()
        if o.name.startswith("autograd::engine::evaluate_function") or (o.annotation and name == "backward"):
            return "backward"
        if o.name.startswith("Optimizer.") or (o.annotation and name in ("optimizer", "optimizer_step")):
            return "optimizer"
    return "forward"


def label_of(op: CpuOp | None) -> str | None:
    """The innermost user ``record_function`` label around ``op`` (not torch.compile's own annotations)."""
    for o in _ancestors(op):
        if o.annotation and not COMPILE_ANNOTATIONS.match(o.name):
            return o.name
    return None


def _gemm_shape(op: CpuOp | None) -> str | None:
    for o in _ancestors(op):
        if o.name in GEMM_OPS:
            dims = o.args.get("Input Dims") or []
            shapes = [d for d in dims if isinstance(d, list) and len(d) >= 2][:2]
            if len(shapes) == 2:
                return " · ".join("×".join(str(x) for x in d) for d in shapes)
            return o.name
    return None


def fused_ops(name: str) -> str | None:
    """The ops an inductor kernel's name says it fuses (``_unsafe_view_gelu_mul``), or None for another kernel.

    The name joins the ops' own names with ``_``, and those hold ``_`` too: it is kept whole, and an op is
    found in it by :func:`fuses`.
    """
    m = INDUCTOR.match(name)
    return m.group("ops") if m is not None else None


def fuses(ops: str, op: str) -> bool:
    """Whether the fused ``ops`` (:func:`fused_ops`) name ``op`` (``aten::gelu`` or ``gelu``) as one of them."""
    bare = op.removeprefix("aten::").strip("_")
    return bool(bare) and re.search(rf"(?:^|_){re.escape(bare)}(?:_|$)", ops) is not None


def _outer_aten(op: CpuOp | None) -> str | None:
    found = None
    for o in _ancestors(op):
        if not o.annotation and o.name.startswith("aten::"):
            found = o.name
    return found


def computation(ev: DeviceEvent) -> tuple[str, str]:
    """What a piece of device work computes, as a row names it: (kind, what)."""
    op = ev.launch.op if ev.launch is not None else None
    if ev.kind in ("memset", "memcpy"):
        owner = _gemm_shape(op) or _outer_aten(op) or (op.name if op is not None and not op.annotation else "")
        return ev.kind, f"{ev.kind} of {owner}" if owner else ev.kind
    fused = fused_ops(ev.name)
    if fused is not None:
        return "fused", fused
    shape = _gemm_shape(op)
    if shape is not None:
        return "gemm", f"gemm {shape}"
    outer = _outer_aten(op)
    if outer is not None:
        return decode(ev.name).kind, outer
    return decode(ev.name).kind, decode(ev.name).short


@dataclass(frozen=True)
class RowKey:
    phase: str
    label: str | None
    kind: str
    what: str

    def words(self) -> str:
        where = f" in '{self.label}'" if self.label else ""
        return f"{self.what}{where} ({self.phase})"


@dataclass
class Side:
    """One side of a diff: its device µs per step for each row, its step times, and its sources."""

    name: str
    sources: list[str]
    rows: dict[RowKey, list[float]]  # one value per sample (step), 0 where the row ran nothing in it
    step: Spread  # the step's time (µs): over the profiled steps, or as given (a timing with the profiler off)
    samples: int  # profiled steps, over every trace of the side
    steps_source: str = "the traces' profiler steps"

    @property
    def device_us(self) -> float:
        return sum(statistics.median(v) for v in self.rows.values())


def _step_time(step: Step) -> float:
    if not step.device_events:
        return step.dur_us
    span = max(ev.end_us for ev in step.device_events) - min(ev.start_us for ev in step.device_events)
    return max(step.dur_us, span)


def side_of(traces: list[Trace], name: str) -> Side:
    """The rows and step times of one side: every profiled step of every trace is a sample."""
    per_step: list[dict[RowKey, float]] = []
    steps_us = []
    for trace in traces:
        for step in trace.steps:
            rows: dict[RowKey, float] = defaultdict(float)
            for ev in step.device_events:
                op = ev.launch.op if ev.launch is not None else None
                kind, what = computation(ev)
                rows[RowKey(phase_of(op), label_of(op), kind, what)] += ev.dur_us
            per_step.append(rows)
            steps_us.append(_step_time(step))
    keys = {k for rows in per_step for k in rows}
    return Side(name, [t.source for t in traces], {k: [rows.get(k, 0.0) for rows in per_step] for k in keys},
                Spread.of(steps_us), len(per_step))


# --------------------------------------------------------------- matching
@dataclass
class Row:
    """A matched (or unmatched) row: what each side spent on it per step (µs samples)."""

    a_keys: list[RowKey]
    b_keys: list[RowKey]
    how: str  # "same", "fused", "parent", "only in A", "only in B"
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)

    @property
    def matched(self) -> bool:
        return self.how in ("same", "fused", "parent")

    def words(self) -> str:
        keys = self.a_keys or self.b_keys
        if self.how == "parent":
            k = keys[0]
            return f"other work in '{k.label}' ({k.phase})" if k.label else f"other work ({k.phase})"
        if self.how == "fused":
            fused = next(k for k in (*self.a_keys, *self.b_keys) if k.kind == "fused")
            ops = " · ".join(k.what.removeprefix("aten::") for k in (*self.a_keys, *self.b_keys) if k.kind != "fused")
            return f"{ops}, fused in one kernel{f' in {fused.label!r}' if fused.label else ''} ({fused.phase})"
        return keys[0].words()


def _sum(side: Side, keys: list[RowKey]) -> list[float]:
    if not keys:
        return [0.0] * side.samples
    return [sum(side.rows[k][i] for k in keys) for i in range(side.samples)]


def match(a: Side, b: Side) -> list[Row]:
    """Line up the rows of A and B (see the module docstring: same row, fused kernel, lowest shared label)."""
    rows: list[Row] = []
    left_a, left_b = set(a.rows), set(b.rows)
    for key in sorted(left_a & left_b, key=lambda k: (k.phase, str(k.label), k.what)):
        rows.append(Row([key], [key], "same"))
    left_a -= left_b
    left_b -= {r.b_keys[0] for r in rows}
    for fused_side, other, left_f, left_o in ((b, a, left_b, left_a), (a, b, left_a, left_b)):
        for key in sorted((k for k in left_f if k.kind == "fused"), key=lambda k: k.what):
            covered = [k for k in left_o if (k.phase, k.label) == (key.phase, key.label) and k.kind != "fused"
                       and k.what.startswith("aten::") and fuses(key.what, k.what)]
            if covered:
                row = Row(covered, [key], "fused") if fused_side is b else Row([key], covered, "fused")
                rows.append(row)
                left_f.discard(key)
                left_o.difference_update(covered)
    places = {(k.phase, k.label) for k in left_a} & {(k.phase, k.label) for k in left_b}
    for place in sorted(places, key=lambda p: (p[0], str(p[1]))):
        ka = sorted((k for k in left_a if (k.phase, k.label) == place), key=lambda k: k.what)
        kb = sorted((k for k in left_b if (k.phase, k.label) == place), key=lambda k: k.what)
        rows.append(Row(ka, kb, "parent"))
        left_a.difference_update(ka)
        left_b.difference_update(kb)
    rows += [Row([k], [], "only in A") for k in sorted(left_a, key=lambda k: k.words())]
    rows += [Row([], [k], "only in B") for k in sorted(left_b, key=lambda k: k.words())]
    for row in rows:
        row.a, row.b = _sum(a, row.a_keys), _sum(b, row.b_keys)
    return rows


# ------------------------------------------------------------- the noise
def significant(a: list[float] | Spread, b: list[float] | Spread) -> bool | None:
    """True/False: the IQRs do not/do overlap; None: fewer than MIN_SAMPLES on a side, nothing called."""
    sa, sb = (x if isinstance(x, Spread) else Spread.of(x) for x in (a, b))
    if sa.repeats < MIN_SAMPLES or sb.repeats < MIN_SAMPLES:
        return None
    return sa.q3 < sb.q1 or sb.q3 < sa.q1


@dataclass
class Diff:
    a: Side
    b: Side
    rows: list[Row]
    a_verdict: object = None  # the report's verdicts on each side (analysis.verdict.Verdict), where computed
    b_verdict: object = None

    @property
    def matched_share(self) -> float:
        matched = sum(statistics.median(r.a) + statistics.median(r.b) for r in self.rows if r.matched)
        total = sum(statistics.median(r.a) + statistics.median(r.b) for r in self.rows)
        return matched / total if total > 0 else 0.0

    def totals(self, by: str) -> dict[str, tuple[float, float]]:
        """Device µs per step (medians summed) on each side, per phase or per kernel kind."""
        out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for side, i in ((self.a, 0), (self.b, 1)):
            for key, values in side.rows.items():
                out[getattr(key, by)][i] += statistics.median(values)
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    @property
    def step_significant(self) -> bool | None:
        return significant(self.a.step, self.b.step)

    def explaining(self) -> Row | None:
        """The row whose change explains most of the step's, in the step's direction."""
        delta = self.b.step.median - self.a.step.median
        rows = [r for r in self.rows if (statistics.median(r.b) - statistics.median(r.a)) * delta > 0]
        return max(rows, key=lambda r: abs(statistics.median(r.b) - statistics.median(r.a)), default=None)


def diff(a: list[Trace], b: list[Trace], *, a_name: str = "A", b_name: str = "B",
         a_step: Spread | list[float] | None = None, b_step: Spread | list[float] | None = None,
         step_source: str | None = None, verdicts: bool = True) -> Diff:
    """The diff of A's traces against B's (see the module docstring).

    ``a_step``/``b_step``: the step's time measured otherwise (µs: a
    :class:`~profiling_guide.spread.Spread` of its repeats, or the repeats
    themselves; a run record's profiler-off timing, a benchmark's), used for
    the step-level comparison in place of the traces' steps; ``step_source``
    says what they are.
    """
    from profiling_guide.errors import GuideError

    for name, traces in ((a_name, a), (b_name, b)):
        if not traces or not any(t.steps for t in traces):
            raise GuideError(f"{name} has no profiler steps to compare: record it with torch.profiler.schedule(...) "
                             "and prof.step() once per step")
        if not any(s.device_events for t in traces for s in t.steps):
            raise GuideError(f"{name}'s steps hold no device work: record with activities=[ProfilerActivity.CPU, "
                             "ProfilerActivity.CUDA]")
    sa, sb = side_of(a, a_name), side_of(b, b_name)
    for side, given in ((sa, a_step), (sb, b_step)):
        if given is not None:
            side.step = given if isinstance(given, Spread) else Spread.of(list(given))
            side.steps_source = step_source or "timings given"
    out = Diff(sa, sb, match(sa, sb))
    if verdicts:
        from profiling_guide.analysis.verdict import verdict_of

        out.a_verdict = verdict_of(a[0], a[0].steps)
        out.b_verdict = verdict_of(b[0], b[0].steps)
    return out


# ---------------------------------------------------------------- words
def _ms(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if abs(us) >= 1000 else f"{us:.1f} µs"


def verdict_words(d: Diff) -> str:
    """The diff's verdict in one paragraph, in the report's vocabulary."""
    a, b = d.a.step, d.b.step
    delta = b.median - a.median
    direction = "shorter" if delta < 0 else "longer"
    sig = d.step_significant
    if sig is None:
        noise = f"too few samples to tell it from the noise (at least {MIN_SAMPLES} a side)"
    elif sig:
        noise = "beyond the noise (the interquartile ranges do not overlap)"
    else:
        noise = "within the noise (the interquartile ranges overlap): a tie"
    text = (f"{d.b.name}'s step is {_ms(abs(delta))} {direction} than {d.a.name}'s ({_ms(a.median)} → "
            f"{_ms(b.median)}, medians of {a.repeats} and {b.repeats} samples, "
            f"{d.a.steps_source}): {noise}.")
    device_delta = d.b.device_us - d.a.device_us
    row = d.explaining()
    if device_delta * delta < 0:
        text += (f" Yet its device work went the other way, {_ms(d.a.device_us)} → {_ms(d.b.device_us)} per step: "
                 "the step's change is not in the kernels but on the host or in waiting.")
    elif abs(device_delta) < 0.5 * abs(delta):
        text += (f" Its device work changed by {_ms(device_delta)} per step in all ({_ms(d.a.device_us)} → "
                 f"{_ms(d.b.device_us)}): most of the step's change is not in the kernels but on the host or in "
                 "waiting.")
    elif row is not None:
        text += (f" The change that explains most of it: {row.words()}, "
                 f"{_ms(statistics.median(row.a))} → {_ms(statistics.median(row.b))} per step.")
    va, vb = (getattr(v, "verdict", None) for v in (d.a_verdict, d.b_verdict))
    if va is not None and vb is not None:
        if va.cause is vb.cause:
            text += f" The pace did not change: the report's verdict is {va.cause.value} on both sides."
        else:
            text += (f" The pace changed: the report's verdict is {vb.cause.value} for {d.b.name} where it is "
                     f"{va.cause.value} for {d.a.name}.")
    return text


def to_dict(d: Diff) -> dict:
    """The diff as JSON (schema :data:`SCHEMA`)."""
    def side(s: Side) -> dict:
        sp = s.step
        return {"name": s.name, "sources": s.sources, "samples": sp.repeats, "steps_source": s.steps_source,
                "profiled_steps": s.samples,
                "step_ms": {"median": sp.median / 1e3, "q1": sp.q1 / 1e3, "q3": sp.q3 / 1e3},
                "device_us_per_step": s.device_us}

    def cause(v) -> str | None:
        return v.verdict.cause.value if v is not None and getattr(v, "verdict", None) is not None else None

    rows = []
    for r in sorted(d.rows, key=lambda r: -abs(statistics.median(r.b) - statistics.median(r.a))):
        ma, mb = statistics.median(r.a), statistics.median(r.b)
        rows.append({"row": r.words(), "match": r.how, "a": ma, "b": mb, "delta_us": mb - ma,
                     "significant": significant(r.a, r.b),
                     "a_work": [k.words() for k in r.a_keys], "b_work": [k.words() for k in r.b_keys]})
    return {
        "schema": SCHEMA, "a": side(d.a), "b": side(d.b), "matched_share": d.matched_share,
        "step_significant": d.step_significant, "min_samples": MIN_SAMPLES,
        "phases": {k: {"a": v[0], "b": v[1]} for k, v in d.totals("phase").items()},
        "kinds": {k: {"a": v[0], "b": v[1]} for k, v in d.totals("kind").items()},
        "pace": {"a": cause(d.a_verdict), "b": cause(d.b_verdict)},
        "rows": rows, "verdict": verdict_words(d),
    }
