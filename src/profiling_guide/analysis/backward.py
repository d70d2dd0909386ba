"""A training step read as forward, backward and optimizer, with each backward op tied to its forward op.

The backward pass runs on the autograd engine's own thread, and its kernels'
names say nothing of the layer they belong to. The profiler ties them back:
each backward op (an autograd node such as ``AddmmBackward0``) carries a flow
to the forward op whose output it differentiates
(:attr:`~profiling_guide.trace.model.Trace.backward_links`).

* :func:`phase_of` puts an op in a phase: ``optimizer`` under an
  ``Optimizer.step#`` or ``Optimizer.zero_grad#`` annotation, ``backward``
  under the autograd engine's ``evaluate_function`` or inside a backward op,
  ``forward`` otherwise.
* :func:`phase_shares`: each phase's device time per step (every kernel,
  memset and memcpy, by the op that launched it) and its share of the step's.
* :func:`forward_backward`: forward op → its backward ops → their kernels and
  device time, one row per kind of link.

A trace with no backward (an inference step) has no links and one phase.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from profiling_guide.trace.model import CpuOp, Step, Trace

PHASES = ("forward", "backward", "optimizer")
UNLINKED = "no launch in the trace"  # device work whose launch the profiler did not record
_OPTIMIZER_MARKS = ("Optimizer.step#", "Optimizer.zero_grad#")
_ENGINE_MARK = "autograd::engine::evaluate_function"


def phase_of(op: CpuOp | None) -> str:
    """``forward``, ``backward`` or ``optimizer``: where ``op`` (or the op around it) belongs."""
    chain = [op, *op.ancestors()] if op is not None else []
    if any(o.name.startswith(_OPTIMIZER_MARKS) for o in chain):
        return "optimizer"
    if any(o.forward_op is not None or o.name.startswith(_ENGINE_MARK) for o in chain):
        return "backward"
    return "forward"


def phase_shares(steps: list[Step]) -> pd.DataFrame:
    """Device µs per step in each phase, and its share of the step's device time.

    Index: the phases that have device work (``forward``, ``backward``,
    ``optimizer``, and :data:`UNLINKED` for work with no recorded launch);
    columns ``device_us`` (per step) and ``share`` (a fraction).
    """
    spent: dict[str, float] = defaultdict(float)
    for step in steps:
        for ev in step.device_events:
            spent[phase_of(ev.launch.op) if ev.launch is not None else UNLINKED] += ev.dur_us
    total = sum(spent.values())
    order = [p for p in (*PHASES, UNLINKED) if p in spent]
    n = max(len(steps), 1)
    return pd.DataFrame({"device_us": [spent[p] / n for p in order],
                         "share": [spent[p] / total if total else 0.0 for p in order]},
                        index=pd.Index(order, name="phase"))


def shapes_text(op: CpuOp) -> str:
    """An op's recorded input shapes in one line, e.g. ``8192×768 · 3072×768`` ('–' when none were recorded)."""
    dims = [d for d in op.input_dims if isinstance(d, list) and d]
    return " · ".join("×".join(map(str, d)) for d in dims) or "–"


def _most_time(kernels: dict[str, float]) -> list[str]:
    return sorted(kernels, key=kernels.get, reverse=True)


def forward_backward(trace: Trace, steps: list[Step], *, top: int | None = 20) -> pd.DataFrame:
    """Each kind of forward → backward link in the steps: what the backward of a forward op costs.

    One row per (forward op, its input shapes, backward op), by backward
    device time: ``forward_op``, ``shapes``, ``backward_op``, ``per_step``
    (links per step), ``forward_us`` and ``backward_us`` (device µs per step
    launched by the forward op and by the backward op, each with what nests
    in it), ``backward_kernels`` (the backward's kernels' short names, most
    time first). Empty for a trace without backward links.
    """
    numbers = {s.number for s in steps}
    rows: dict[tuple, list] = {}
    for forward, backward in trace.backward_links:
        if backward.step not in numbers:
            continue
        key = (forward.name, shapes_text(forward), backward.name)
        row = rows.setdefault(key, [0, 0.0, 0.0, defaultdict(float)])
        row[0] += 1
        row[1] += sum(ev.dur_us for ev in forward.device_events)
        for ev in backward.device_events:
            row[2] += ev.dur_us
            row[3][ev.decoded.short] += ev.dur_us
    n = max(len(steps), 1)
    df = pd.DataFrame(
        [(f, shapes, b, count / n, fwd_us / n, bwd_us / n, _most_time(kernels))
         for (f, shapes, b), (count, fwd_us, bwd_us, kernels) in rows.items()],
        columns=["forward_op", "shapes", "backward_op", "per_step", "forward_us", "backward_us", "backward_kernels"],
    )
    if df.empty:
        return df
    df = df.sort_values(["backward_us", "forward_us"], ascending=False, ignore_index=True)
    return df.head(top) if top else df
