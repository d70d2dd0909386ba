"""The verdict: what makes a step slow, where, and what fixing it would save.

For each profiled step, :func:`verdict_of` builds the step's graph
(:mod:`.step_graph`), takes the profiler's own cost out of it first (an
estimate per recorded op and runtime call, :data:`PROFILER_OP_US` and
:data:`PROFILER_CALL_US`, or calibrated from a run record's profiler-off CPU
time), then re-times it once per cause with that cause fixed
(:mod:`.critical_path`):

=========================  =====================================================
cause                      what the what-if changes
=========================  =====================================================
``host_sync``              synchronizing calls no longer wait, and cost nothing
``memcpy``                 pageable copies run at pinned bandwidth, without blocking the host or the op's sync
``allocator``              cudaMalloc/cudaFree calls cost nothing and do not wait
``host_gap``               runs of untraced time and ops that launch nothing cost nothing
``launch_overhead``        the host issues work at no cost (CUDA graphs)
``exposed_communication``  collective kernels take no time on the path (hidden)
``gpu_compute``            the kernels of the op that takes the most path time removed
=========================  =====================================================

The verdict is the fix that saves the most, then the next two; where two save
about the same (:data:`TIE`), both are named as a tie, a fix at one place
first (before CUDA graphs for the whole step), else the one with more time on
the critical path. A fix at one place that saves at least :data:`PLACE_SHARE` of what graphing the whole step
saves is named before the graphs, the smaller change; a step's own syncs that count at all are named before
the graphs whatever these save (a CUDA graph cannot hold a sync: taking them out comes first either way), and
are also read with the host faster than estimated (:data:`FAST_HOST`), since the profiler hides what they
cost. A saving
under :data:`MIN_SAVING` of the step does not count; when none counts, the
step is the GPU's own work, and the verdict names the kernels that take most
of the path, with what removing them would save (the most a faster kernel
could). The verdict never sends the reader back to the timeline for a cause: where the trace lacks
what it needs, :attr:`Verdict.missing` says what, and how to record it.

Everything here returns records; :mod:`profiling_guide.pages.verdict_sentences`
words them.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from profiling_guide.analysis.align import ENGINE_PREFIX
from profiling_guide.analysis.causes import FIXES, Cause, Where
from profiling_guide.analysis.launch_sources import called_in_a_loop, launch_python, loops_words
from profiling_guide.analysis.critical_path import (
    PathShare,
    Timing,
    by_cause,
    critical_path,
    observed_timing,
    simulate,
    top_where,
)
from profiling_guide.analysis.step_graph import (
    DATA_SHAPE_OPS,
    OPTIMIZER_LABEL,
    StepGraph,
    blocks,
    is_compiled_triton_launch,
    step_graph,
)
from profiling_guide.trace.model import Step, Trace

#: The profiler's cost per recorded CPU op and per runtime call (µs), with ``record_shapes=True``: fitted to two
#: CPU-bound workloads timed with the profiler off and on (the references.json of tests/data/corpus/h100 and
#: h200; H100: 1.50 and 2.66, H200: 1.33 and 2.58).
PROFILER_OP_US, PROFILER_CALL_US = 1.4, 2.6
#: The profiler's cost per traced Python call (µs), with ``with_stack=True``: a small GPT's eager training step
#: on the H200 took 13.2 ms (IQR 12.5–14.0) with ``record_shapes`` and 16.0 ms (IQR 14.5–17.4) with
#: ``with_stack`` and ``with_modules`` too, for 1,243 traced Python calls a step, on a host that recorded an op
#: 2.0× as slowly as the reference (:func:`host_speed`; tests/data/attribution/h200: timings.json and
#: eager.trace.json.gz).
PROFILER_PY_US = 1.1
#: Ops that do no work but set a tensor's metadata: how long the host takes to record one (nested in another, or
#: alone) scales the costs above (:func:`host_speed`). Alone they took 0.37 µs (H100) and 0.31 µs (H200) as the
#: profiler's cost was measured.
TRIVIAL_OPS = frozenset({"aten::view", "aten::as_strided", "aten::_reshape_alias", "aten::detach", "aten::alias",
                         "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::permute", "aten::slice",
                         "aten::select", "aten::_unsafe_view", "aten::lift_fresh", "aten::detach_",
                         "aten::transpose", "aten::t", "aten::reshape"})
TRIVIAL_REF_US = 0.34
#: A trivial op's length less the one trivial op it wraps (µs): the profiler's cost of recording an op
#: (:func:`host_speed`). 1.30 and 1.24 µs (H100), 1.12 and 1.05 µs (H200) in the corpus's launch-overhead
#: cases (tests/data/corpus), each scaled to the machine's trivial-op length when the cost was measured.
RECORDING_REF_US = 1.2
#: ``aten::detach`` less the ``detach`` it wraps (µs): the same gauge for traces with too few trivial pairs
#: (compiled code keeps its autograd's detaches). On the single-GPU traces that have both (the corpus of
#: tests/data/corpus/h100 and h200, held by tests/test_profiler_cost.py) it measured a median 0.53× the trivial
#: pairs' gap, so 0.53 × 1.2.
DETACH_REF_US = 0.64
#: The profiler's extra cost per Triton launch of torch.compile's code (µs, on top of its op's): only while the
#: profiler runs does inductor's launcher leave its fast path, format the launch's config and record its
#: arguments from Python (``torch._inductor.runtime.triton_heuristics``: ``get_profiler_kwargs``,
#: ``_RecordFunctionFast``). Fitted to a small GPT's compiled training step, 91 such launches a step, timed with
#: the profiler off and on on two H200 machines: about 8 and 15 µs at the reference host speed
#: (tests/data/profiler_cost); checked on the corpus's compiled GPT steps (tests/data/corpus), recorded apart.
PROFILER_TRITON_US = 12.0
#: The profiler never takes more than this share of a stretch it is estimated in.
PROFILER_MAX_SHARE = 0.9
#: A what-if must save at least this share of the step to be a cause.
MIN_SAVING = 0.05
#: Fixes whose savings are this close (share of the step) are a tie, and the verdict's sentence names both. The
#: one named first: a fix at one place (any cause but launch overhead: a sync, a copy, an allocator call, a host
#: stretch, the communication) before the step's launches graphed (it is the smaller change, and a sync it
#: removes would split the graphs anyway); between two such fixes, the one with more time on the critical path.
#: One region's launches are part of the step's, so they never tie with it: they are listed after.
TIE = 0.02
#: A fix at one place (a copy, a host stretch, an optimizer's launches) that saves at least this share of what
#: graphing the whole step saves is named first: it is the smaller change, and it gets at least half as far. A
#: sync of the step's own is named first whenever it counts (:data:`MIN_SAVING`), however much more the graphs
#: would save: a graph cannot hold it, so taking it out is the first step of that fix too. Not the loop's own
#: synchronize after each step (:func:`is_loop_sync`): that is the harness that times the step, not the step.
PLACE_SHARE = 0.5
#: How much faster than estimated the host may run without the profiler, for the syncs' what-if
#: (:func:`_fast_host_sync`). A host the profiler slows arrives late at each sync and finds the GPU drained, so the
#: trace shows the sync waiting little; without the profiler the host runs ahead and the same sync waits for the
#: work queued before it. The profiler's cost per op is known within a wide spread: a loop of 300 ``torch.add``
#: timed with the profiler off and on, in nine recording sessions on H100 and H200 machines here (the
#: references.json beside the verdict's corpus and held-out traces), cost 0.3× to 1.8× the estimate that session's
#: traces gave (:func:`host_speed`, their median). So a sync is also read with the profiler's cost doubled, just
#: past the upper end of that spread.
FAST_HOST = 2.0
#: A place (op, label) that copies from or to pageable memory this many times a step or more, each copy small
#: (:data:`SMALL_COPY_BYTES`), is told to copy once (:data:`SMALL_COPIES_FIX`): one call per tensor costs the host
#: more than the bytes cost the link.
MANY_COPIES = 16
#: Under this many bytes a copy's fixed cost (its call, a wait on pageable memory) outweighs its transfer: 1 MiB
#: takes about 20 µs at pinned bandwidth, about what a pageable copy's call takes.
SMALL_COPY_BYTES = 1 << 20
#: Host↔device bandwidth from pinned memory (GB/s) when the trace has no pinned copy to read it from:
#: 52.6 (H100) and 54.7 (H200) measured here (references.json of tests/data/corpus/h100 and h200).
PINNED_GBPS = 53.0
#: The gap between kernels that one CUDA graph launches (µs): 0.22 to 0.29 µs in the guide's graph replays
#: (chapter 7's recordings, H100).
GRAPH_GAP_US = 0.3
#: The host's cost of one cudaGraphLaunch (µs): 5.6 to 18 µs in those recordings.
GRAPH_LAUNCH_US = 10.0
#: The removable causes, each with its what-if (see the module docstring).
REMOVABLE = (Cause.HOST_SYNC, Cause.MEMCPY, Cause.ALLOCATOR, Cause.HOST_GAP, Cause.LAUNCH_OVERHEAD,
             Cause.EXPOSED_COMMUNICATION)


@dataclass(frozen=True)
class WhatIf:
    """One cause, fixed: the step predicted without it (ms), and what that saves."""

    cause: Cause
    where: Where
    step_ms: float  # the step as the program runs it, profiler's cost taken out
    predicted_step_ms: float
    path_ms: float  # the cause's time on the critical path
    fix: str = ""

    @property
    def saving_ms(self) -> float:
        return self.step_ms - self.predicted_step_ms

    def to_dict(self) -> dict:
        return {"cause": self.cause.value, "where": self.where.to_dict(), "rank": self.where.rank,
                "step_ms": round(self.step_ms, 4), "predicted_step_ms": round(self.predicted_step_ms, 4),
                "saving_ms": round(self.saving_ms, 4), "path_ms": round(self.path_ms, 4), "fix": self.fix}


@dataclass
class Verdict:
    """A trace's (or a rank's) verdict: the largest saving first, and the numbers behind it."""

    verdict: WhatIf | None
    what_if: list[WhatIf]  # every cause that saves at least MIN_SAVING, largest first; then gpu_compute's
    profiler: WhatIf | None  # the profiler's own cost: the step as profiled → without the profiler
    profiled_step_ms: float  # the step as profiled (re-timed from the trace)
    path_ms: dict[Cause, float]  # the critical path per cause, profiler's cost taken out
    steps: int
    #: what the trace lacks for a verdict, and how to record it (None when it has what it needs)
    missing: str | None = None
    notes: list[str] = field(default_factory=list)
    profiler_scale: float = 1.0  # the per-op cost's factor (1 unless calibrated from a run record)
    #: the profiled step label's host work re-timed at this share of its length (a run record's calibration)
    profiler_factor: float | None = None

    @property
    def step_ms(self) -> float | None:
        return self.verdict.step_ms if self.verdict is not None else None

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
            "what_if": [w.to_dict() for w in self.what_if],
            "profiler_overhead": self.profiler.to_dict() if self.profiler is not None else None,
            "profiled_step_ms": round(self.profiled_step_ms, 4),
            "critical_path_ms": {c.value: round(v, 4) for c, v in self.path_ms.items()},
            "steps": self.steps, "missing": self.missing, "notes": self.notes,
        }


# ----------------------------------------------------------- the what-ifs
@dataclass(frozen=True)
class ProfilerCost:
    """How the profiler's cost is taken out of a step's host stretches.

    ``scale`` multiplies the per-op estimate (:data:`PROFILER_OP_US`,
    :data:`PROFILER_CALL_US`). Where a run record measured the CPU time of the
    ``record_function`` label that spans the step with the profiler off, every
    host stretch inside that ``label`` (recorded ops, runtime calls and the
    untraced Python between them alike) is instead scaled by ``factor``, the
    profiler-off time over the profiled one: the step re-timed without the
    profiler then issues its work in the time that was measured.
    """

    scale: float = 1.0
    label: str | None = None
    factor: float | None = None


def without_profiler(g: StepGraph, timing: Timing, cost: ProfilerCost) -> Timing:
    """``timing`` with the profiler's cost taken out of every host stretch it falls in (see :class:`ProfilerCost`)."""
    out = timing.copy()
    for i, seg in enumerate(g.host):
        if cost.factor is not None and seg.where.label == cost.label:
            out.host_us[i] = out.host_us[i] * cost.factor
            continue
        cost_us = cost.scale * (PROFILER_OP_US * seg.prof_ops + PROFILER_CALL_US * seg.prof_calls
                                + PROFILER_PY_US * seg.prof_py + PROFILER_TRITON_US * seg.prof_triton)
        if cost_us > 0:
            out.host_us[i] = max(out.host_us[i] - cost_us, (1 - PROFILER_MAX_SHARE) * out.host_us[i])
    return out


def _drop_host(g: StepGraph, timing: Timing, cause: Cause) -> Timing:
    out = timing.copy()
    for i, seg in enumerate(g.host):
        if seg.cause is cause:
            out.host_us[i] = 0.0
            out.blocking[i] = False
    return out


def _graphed(g: StepGraph, timing: Timing, label: str | None = None) -> Timing:
    """The step's work as CUDA graphs: the host issues it at no cost but one graph launch per stretch between
    blocking calls (a graph cannot hold a sync: each one splits it), and the GPU runs a graph's kernels
    :data:`GRAPH_GAP_US` apart. With ``label``, only that ``record_function`` region's launches (a fused
    optimizer, one region captured), the rest of the step as it was."""
    out = timing.copy()
    new_graph = True
    # an optimizer's step fused (its fix) drops its per-parameter Python with its launches: its host gaps go too;
    # elsewhere a host gap is not launch work (input loading, a hook's Python), and stays
    fused = label is not None and label.startswith(OPTIMIZER_LABEL) and per_parameter(g, label)
    issued = (Cause.LAUNCH_OVERHEAD, Cause.HOST_GAP) if fused else (Cause.LAUNCH_OVERHEAD,)
    for i, seg in enumerate(g.host):
        if out.blocking[i] or (label is not None and seg.where.label != label):
            new_graph = True
        if seg.cause in issued and (label is None or seg.where.label == label):
            out.host_us[i] = GRAPH_LAUNCH_US if new_graph and seg.launches else 0.0
            new_graph = new_graph and not seg.launches
    if label is None:
        out.gap_us = min(out.gap_us, GRAPH_GAP_US)
    return out


def _loop_as_one(g: StepGraph, timing: Timing, calls: frozenset) -> Timing:
    """The launches of a loop's ``calls`` (the id() of each: :func:`called_in_a_loop`) and of the backward nodes
    the trace links to them (one op over all the loop's tensors has one backward node) issued as one call per run
    of them, with the loop's body between two of them gone too (its Python, the indexing that feeds each call):
    what the host does from one to the next, where that is launch work only (no sync, no host gap)."""
    out = timing.copy()
    mine = [seg.cause is Cause.LAUNCH_OVERHEAD and (seg.owner in calls or g.backward_of.get(seg.owner) in calls)
            for seg in g.host]
    ours = [i for i, m in enumerate(mine) if m]
    for a, b in zip(ours, ours[1:], strict=False):  # the loop's body: what the host does from one of its calls to
        if b > a + 1 and not any(g.host[i].cause is not Cause.LAUNCH_OVERHEAD for i in range(a + 1, b)):
            for i in range(a + 1, b):  # the next (its Python, the indexing that feeds it), where nothing else is
                mine[i] = True
    new_call = True
    for i, seg in enumerate(g.host):
        if mine[i]:
            out.host_us[i] = GRAPH_LAUNCH_US if new_call and seg.launches else 0.0
            new_call = new_call and not seg.launches
        elif seg.launches or out.blocking[i]:
            new_call = True
    return out


def cpu_after_copy(g: StepGraph) -> Where | None:
    """Where the step copies device data to the host and then computes on it there, inside one label: a host
    gap at one of torch's ops (it ran on the CPU) after a device→host copy in the same ``record_function``
    region (``logits.cpu().argmax(-1)`` for a metric). The op with the most host time names it; None where
    there is none."""
    copied: set = set()
    gaps: dict = defaultdict(float)
    for seg in g.host:
        label = seg.where.label
        if label is None:
            continue
        if any(g.dev[d].direction == "d2h" for d in seg.launches):
            copied.add(label)
        elif seg.cause is Cause.HOST_GAP and seg.where.op and label in copied:
            gaps[seg.where.op, label] += seg.dur_us
    if not gaps:
        return None
    op, label = max(gaps, key=gaps.get)
    return Where(op=op, label=label)


def _on_cpu(g: StepGraph, timing: Timing) -> tuple[Where, float] | None:
    """:func:`cpu_after_copy`'s place, and the step with that region's work done on the GPU: its host gaps and
    its device→host copies gone, their calls not blocking."""
    where = cpu_after_copy(g)
    if where is None:
        return None
    out = timing.copy()
    for i, seg in enumerate(g.host):
        if seg.where.label != where.label:
            continue
        copies = [d for d in seg.launches if g.dev[d].direction == "d2h"]
        if seg.cause is Cause.HOST_GAP or copies or (seg.sync == "stream" and seg.cause is Cause.HOST_SYNC):
            out.host_us[i], out.blocking[i] = 0.0, False
        for d in copies:
            out.dev_us[d] = 0.0
    return where, simulate(g, out).period_us


#: The ops of torch.optim's fused and for-each implementations: an optimizer that runs them is fused already.
MULTI_TENSOR_OPS = ("aten::_fused_", "aten::_foreach_")


def per_parameter(g: StepGraph, label: str) -> bool:
    """Whether the optimizer step in ``label`` works one parameter at a time: none of its ops is a fused or for-each
    kernel's (:data:`MULTI_TENSOR_OPS`)."""
    return not any((seg.where.op or "").startswith(MULTI_TENSOR_OPS) for seg in g.host if seg.where.label == label)


#: The regions (innermost ``record_function`` labels) whose launch overhead is re-timed alone: the few whose
#: launching stretches take the most host time.
REGIONS = 4
#: A region whose launches, graphed alone, save this share of what the whole step graphed saves is named for it.
REGION_SHARE = 0.9


def launch_regions(g: StepGraph) -> list[str]:
    """The labels of the :data:`REGIONS` regions with the most host time in launch overhead, most first."""
    time_in: dict[str, float] = {}
    for seg in g.host:
        if seg.cause is Cause.LAUNCH_OVERHEAD and seg.where.label is not None:
            time_in[seg.where.label] = time_in.get(seg.where.label, 0.0) + seg.dur_us
    return sorted(time_in, key=time_in.get, reverse=True)[:REGIONS]


def small_copies(g: StepGraph) -> dict[tuple, tuple[int, float]]:
    """The places (op, label) that copy from or to pageable memory :data:`MANY_COPIES` times a step or more, each
    copy under :data:`SMALL_COPY_BYTES` on average: their count and mean bytes. A list of tensors moved one by
    one (``[t.to("cuda") for t in batch]``): each copy is a call, and a wait, of its own."""
    found: dict[tuple, list[float]] = defaultdict(list)
    for seg in g.host:
        if seg.cause is Cause.MEMCPY and seg.pageable:
            found[(seg.where.op, seg.where.label)].append(sum(g.dev[d].nbytes or 0 for d in seg.launches))
    return {place: (len(sizes), statistics.mean(sizes)) for place, sizes in found.items()
            if len(sizes) >= MANY_COPIES and statistics.mean(sizes) < SMALL_COPY_BYTES}


def _bytes_words(nbytes: float) -> str:
    return f"{nbytes / 2**10:,.0f} KiB" if nbytes >= 2**10 else f"{nbytes:,.0f} bytes"


def _merged_copies(g: StepGraph) -> set[int]:
    """The ops (their ``owner`` ids) whose small copies become the first one's (:func:`small_copies`): every op that
    copies at such a place but the first."""
    stacked, owners_at = small_copies(g), defaultdict(list)  # the ops that copy, per place, in order
    for seg in g.host:
        place = (seg.where.op, seg.where.label)
        if seg.cause is Cause.MEMCPY and seg.pageable and place in stacked and seg.owner \
                and seg.owner not in owners_at[place]:
            owners_at[place].append(seg.owner)
    return {owner for owners in owners_at.values() for owner in owners[1:]}


def _pinned(g: StepGraph, timing: Timing, gbps: float) -> Timing:
    """Pageable copies at pinned bandwidth, their calls asynchronous; and the stream sync the same op makes after a
    copy to pageable memory (``.cpu()`` copies, then waits for the copy) gone: a copy into pinned memory with
    ``non_blocking=True`` does not wait. Many small copies from one place (:func:`small_copies`) become one: the
    first op of each such place stays, the others (their calls and the rest of their host work) cost nothing."""
    out = timing.copy()
    copying = {seg.owner for seg in g.host if seg.cause is Cause.MEMCPY and seg.pageable and seg.owner}
    merged = _merged_copies(g)
    for i, seg in enumerate(g.host):
        if seg.owner in merged:
            out.blocking[i] = False
            out.host_us[i] = 0.0
        elif seg.cause is Cause.MEMCPY:
            out.blocking[i] = False
            out.host_us[i] = min(out.host_us[i], 10.0)
            for d in seg.launches:
                node = g.dev[d]
                if node.pageable and node.nbytes:
                    out.dev_us[d] = min(out.dev_us[d], node.nbytes / (gbps * 1e3))
        elif seg.cause is Cause.HOST_SYNC and seg.sync == "stream" and seg.owner in copying:
            out.blocking[i] = False
            out.host_us[i] = 0.0
    return out


def _ahead(g: StepGraph, timing: Timing) -> Timing:
    """Host→device copies already pinned and asynchronous, but on the stream that computes, copied a step ahead
    on a side stream (a prefetcher): off the compute stream's path, overlapped with the work before them, as
    much of them as that work can hide (at most the step's other device time)."""
    out = timing.copy()
    copies = [d for d, node in enumerate(g.dev) if node.cause is Cause.MEMCPY and node.direction == "h2d"]
    copy_us = sum(out.dev_us[d] for d in copies)
    other_us = sum(us for d, us in enumerate(out.dev_us) if g.dev[d].cause is not Cause.MEMCPY)
    hidden = min(1.0, other_us / copy_us) if copy_us > 0 else 0.0
    for d in copies:
        out.dev_us[d] *= 1.0 - hidden
    return out


def copies_pinned(g: StepGraph) -> bool:
    """Whether the step copies host→device, all of it from pinned memory (the copy-ahead what-if, :func:`_ahead`,
    stands for its memcpy fix; a pageable copy is pinned first, :func:`_pinned`)."""
    h2d = [node for node in g.dev if node.cause is Cause.MEMCPY and node.direction == "h2d"]
    return bool(h2d) and not any(node.pageable for node in g.dev if node.cause is Cause.MEMCPY)


def no_collectives(g: StepGraph, timing: Timing) -> Timing:
    """The step with its collectives taking no time: a rank's own work alone."""
    out = timing.copy()
    for d, node in enumerate(g.dev):
        if node.cause is Cause.EXPOSED_COMMUNICATION:
            out.dev_us[d] = 0.0
    return out


def held_share(g: StepGraph, node) -> float:
    """The share of the GPU a collective's kernel holds while it runs: its blocks over the GPU's multiprocessors
    (NCCL runs one block per multiprocessor, each a channel), at most 1; 0 where the trace lacks either."""
    n = blocks(node.event)
    return min(n / g.sm_count, 1.0) if n is not None and g.sm_count else 0.0


def hidden_collectives(g: StepGraph, timing: Timing) -> Timing:
    """The step with its communication hidden behind compute: a collective overlapped with compute still holds
    its multiprocessors for as long as it transfers, which the compute beside it loses; so each collective keeps
    :func:`held_share` of its time, where it is, and gives up the rest."""
    out = timing.copy()
    for d, node in enumerate(g.dev):
        if node.cause is Cause.EXPOSED_COMMUNICATION:
            out.dev_us[d] = out.dev_us[d] * held_share(g, node)
    return out


def _without_kernels(g: StepGraph, timing: Timing, nodes: set[int], fused: bool) -> Timing:
    """``nodes`` taking no time (:func:`_kernels_at`): the most a faster kernel, or a fused one, could save. Where
    the fix fuses them (``fused``: :data:`UNFUSED`, SDPA's math backend), their ops' host work (dispatch, launches)
    goes too: the fused kernel is one op where they were many."""
    out = timing.copy()
    for d in nodes:
        out.dev_us[d] = 0.0
    if fused:
        owners = {g.host[g.dev[d].host].owner for d in nodes if g.dev[d].host >= 0}
        for i, seg in enumerate(g.host):
            if seg.owner in owners and seg.kind != "untraced" and not seg.sync:
                out.host_us[i] = 0.0
    return out


def _kernels_at(g: StepGraph, timing: Timing, where: Where) -> tuple[set[int], bool]:
    """The GPU-compute nodes at ``where``: its op's in its label; every float32 GEMM for :data:`FP32_GEMMS`; every
    elementwise op's outside the optimizer for :data:`UNFUSED` (:func:`_elementwise`); and for SDPA on its math
    backend, the backward nodes the trace links to it too. And whether the fix fuses them (the elementwise ops,
    SDPA's math backend)."""
    compute = [d for d, node in enumerate(g.dev) if node.cause is Cause.GPU_COMPUTE]
    if where is FP32_GEMMS:
        return {d for d in compute if _fp32_gemm(g.dev[d])}, False
    places = {(where.op, where.label)}
    if where is UNFUSED:
        groups: dict = defaultdict(lambda: defaultdict(float))
        for d in compute:
            groups[(g.dev[d].where.op, g.dev[d].where.label)][g.dev[d].where.kind] += timing.dev_us[d]
        places = _elementwise(groups)
    found = {d for d in compute if (g.dev[d].where.op, g.dev[d].where.label) in places}
    if where.op == SDPA and _math_sdpa(g, found):  # its backward is the decomposed ops' nodes
        return found | _backward_of_nodes(g, compute, found), True
    return found, where is UNFUSED


def _backward_of_nodes(g: StepGraph, candidates: list[int], nodes: set[int]) -> set[int]:
    """Of ``candidates``, the nodes launched by the backward ops the trace links to the ops that launched ``nodes``."""
    owners = {g.host[g.dev[d].host].owner for d in nodes if g.dev[d].host >= 0}
    return {d for d in candidates if g.dev[d].host >= 0 and g.backward_of.get(g.host[g.dev[d].host].owner) in owners}


#: The step's float32 GEMMs together (:func:`_fp32_gemm`), where they are most of its GEMMs' time
#: (:data:`FP32_SHARE`): autocast or TF32, their fix, is one switch for the whole step. Told apart by identity
#: (``is``), as :data:`UNFUSED` is: a step replayed from a CUDA graph has kernels of no op and no label too.
FP32_GEMMS = Where(kind="gemm")
SDPA = "aten::scaled_dot_product_attention"
SDPA_MATH = "aten::_scaled_dot_product_attention_math"


def _math_sdpa(g: StepGraph, nodes) -> bool:
    """Whether the scaled_dot_product_attention calls that launched ``nodes`` ran PyTorch's math backend (the op
    holds ``aten::_scaled_dot_product_attention_math``: softmax(QKᵀ)V as separate kernels, and so its backward)."""
    for d in nodes:
        launch = g.dev[d].event.launch
        op = launch.op if launch is not None else None
        while op is not None and op.name != SDPA:
            if op.name == SDPA_MATH:
                return True
            op = op.parent
    return False


def pinned_gbps(graphs: list[StepGraph]) -> float:
    """Host↔device GB/s of the trace's own pinned copies of 1 MiB or more, else :data:`PINNED_GBPS`."""
    rates = [n.nbytes / n.dur_us / 1e3 for g in graphs for n in g.dev
             if n.direction in ("h2d", "d2h") and not n.pageable and n.nbytes >= 1 << 20 and n.dur_us > 0]
    return statistics.median(rates) if rates else PINNED_GBPS


def _fixes(g: StepGraph, gbps: float) -> dict[Cause, Callable[[Timing], Timing]]:
    return {
        Cause.HOST_SYNC: lambda t: _drop_host(g, t, Cause.HOST_SYNC),
        Cause.MEMCPY: (lambda t: _ahead(g, t)) if copies_pinned(g) else (lambda t: _pinned(g, t, gbps)),
        Cause.ALLOCATOR: lambda t: _drop_host(g, t, Cause.ALLOCATOR),
        Cause.HOST_GAP: lambda t: _drop_host(g, t, Cause.HOST_GAP),
        Cause.LAUNCH_OVERHEAD: lambda t: _graphed(g, t),
        Cause.EXPOSED_COMMUNICATION: lambda t: hidden_collectives(g, t),
    }


# -------------------------------------------------------------- per step
@dataclass
class StepWhatIfs:
    """One step re-timed: as profiled, without the profiler, and with each cause fixed (µs)."""

    profiled_us: float
    base_us: float
    fixed_us: dict[Cause, float]
    region_fixed_us: dict[str, float]  # launch overhead removed in one region alone, per region's label
    path: list[PathShare]
    compute_where: Where | None
    compute_fixed_us: float | None
    #: with the host :data:`FAST_HOST` times faster than estimated, where the step holds a sync of its own and no
    #: run record measured the host: the step, and the step with its syncs gone
    fast: tuple[float, float] | None = None
    #: the step's own syncs (not the loop's after it), counted per place (the op, its label)
    syncs: dict[Where, int] = field(default_factory=dict)
    #: its host→device copies are all pinned already (:func:`copies_pinned`): the memcpy fix is to copy ahead
    pinned: bool = False
    #: the share of its GEMM kernels' device time launched by ops whose inputs are float32 (:func:`fp32_gemm_share`)
    fp32_gemms: float = 0.0
    #: the ops (and labels) whose host gap is setup before their launches (:attr:`HostSeg.setup`)
    setup: frozenset = frozenset()
    #: the ops (and labels) whose host gap ran Python hooked into the op (:attr:`HostSeg.python_in_op`)
    python_in_ops: frozenset = frozenset()
    #: the optimizer labels (``Optimizer.step#…``) whose step is fused or for-each already (:func:`per_parameter`)
    multi_tensor: frozenset = frozenset()
    #: ops the program calls one at a time many times a step (:func:`called_in_a_loop`), and the step with the
    #: launches of each issued as one call each run
    loops: list = field(default_factory=list)
    loop_fixed_us: float | None = None
    #: its syncs that read back a backward node's NaN check (:attr:`HostSeg.nan_check`)
    nan_checks: int = 0
    #: the program's function that holds most of its launch overhead, and its share (:func:`launch_python`)
    launch_python: tuple | None = None
    #: CPU work fed by a copy from the GPU in one label (:func:`cpu_after_copy`), and the step without both
    on_cpu: tuple | None = None
    #: the places that make many small pageable copies (:func:`small_copies`): their count and mean bytes
    small_copies: dict = field(default_factory=dict)
    #: its GPU-compute what-if is scaled_dot_product_attention on the math backend (:func:`_math_sdpa`)
    math_sdpa: bool = False
    #: the places (op, label) whose pageable copies all go device→host (``.cpu()``: a snapshot, a metric)
    to_host: frozenset = frozenset()


def step_what_ifs(g: StepGraph, *, gbps: float, cost: ProfilerCost = ProfilerCost()) -> StepWhatIfs:
    observed = observed_timing(g)
    profiled = simulate(g, observed)
    base_timing = without_profiler(g, observed, cost)
    base = simulate(g, base_timing)
    path = critical_path(base)
    fixed = {cause: simulate(g, fix(base_timing)).period_us for cause, fix in _fixes(g, gbps).items()}
    regions = {label: simulate(g, _graphed(g, base_timing, label)).period_us for label in launch_regions(g)}
    fp32_share = fp32_gemm_share(g)
    where, compute, math_sdpa = _compute_what_if(g, path, base_timing, base.period_us, fp32_share)
    loops = called_in_a_loop(g)
    loop_fixed = (simulate(g, _loop_as_one(g, base_timing, frozenset().union(*(lp.owners for lp in loops))))
                  .period_us if loops else None)
    return StepWhatIfs(profiled.period_us, base.period_us, fixed, regions, path, where, compute,
                       _fast(g, observed, cost), own_syncs(g), copies_pinned(g), fp32_share,
                       _places(g, "setup"), _places(g, "python_in_op"), _multi_tensor(g),
                       loops, loop_fixed, sum(1 for seg in g.host if seg.nan_check), launch_python(g),
                       _on_cpu(g, base_timing), small_copies(g), math_sdpa, _to_host(g))


def _compute_what_if(g: StepGraph, path: list[PathShare], timing: Timing, base_us: float,
                     fp32_share: float) -> tuple[Where | None, float | None, bool]:
    """Where the GPU's own work is heaviest (:func:`_compute_group`; every float32 GEMM, :data:`FP32_GEMMS`, where
    they are most of the GEMMs; the forward recomputed in the backward, :data:`RECOMPUTE`, where removing it saves
    :data:`MIN_SAVING` of the step), the step without those kernels, and whether they are SDPA's math backend."""
    where = _compute_group(path)
    if where is None:
        return None, None, False
    again = recomputed(g)
    if again:  # work the program chose to do twice comes first, where it counts
        without = simulate(g, _without_kernels(g, timing, again, fused=False)).period_us
        if base_us - without >= MIN_SAVING * base_us:
            return RECOMPUTE, without, False
    if where.kind == "gemm" and fp32_share >= FP32_SHARE:
        where = FP32_GEMMS
    nodes, fused = _kernels_at(g, timing, where)
    return where, simulate(g, _without_kernels(g, timing, nodes, fused)).period_us, fused and where.op == SDPA


#: Forward ops that no backward formula calls: found inside a backward node, they are its forward run again
#: (activation checkpointing recomputes a checkpointed region's forward when the backward needs its activations).
FORWARD_ONLY = frozenset({"aten::linear", "aten::gelu", "aten::silu", "aten::relu", "aten::layer_norm",
                          "aten::rms_norm", "aten::group_norm", "aten::conv1d", "aten::conv2d", "aten::conv3d",
                          "aten::embedding", "aten::dropout", "aten::scaled_dot_product_attention",
                          "aten::softmax", "aten::log_softmax"})
#: The step's recomputed forward, together (:func:`recomputed`); told apart by identity, as :data:`UNFUSED` is.
RECOMPUTE = Where(kind="recompute")


def recomputed(g: StepGraph) -> set[int]:
    """The GPU-compute nodes a forward op launched inside a backward node (:data:`FORWARD_ONLY`): the forward
    recomputed for the backward."""
    found = set()
    for d, node in enumerate(g.dev):
        op = node.event.launch.op if node.cause is Cause.GPU_COMPUTE and node.event.launch is not None else None
        forward = False
        while op is not None:
            forward = forward or op.name in FORWARD_ONLY
            if op.name.startswith(ENGINE_PREFIX) and forward:
                found.add(d)
                break
            op = op.parent
    return found



def _to_host(g: StepGraph) -> frozenset:
    """The places (op, label) whose pageable copies all go device→host."""
    directions: dict = defaultdict(set)
    for seg in g.host:
        if seg.cause is Cause.MEMCPY and seg.pageable:
            directions[(seg.where.op, seg.where.label)] |= {g.dev[d].direction for d in seg.launches}
    return frozenset(place for place, found in directions.items() if found == {"d2h"})


def _places(g: StepGraph, flag: str) -> frozenset:
    """The (op, label) of the host stretches whose ``flag`` is set (:attr:`HostSeg.setup`, ``python_in_op``)."""
    return frozenset((seg.where.op, seg.where.label) for seg in g.host if getattr(seg, flag))


def _multi_tensor(g: StepGraph) -> frozenset:
    """The optimizer labels (``Optimizer.step#…``) whose step is fused or for-each already (:func:`per_parameter`)."""
    return frozenset(label for label in {seg.where.label for seg in g.host}
                     if (label or "").startswith(OPTIMIZER_LABEL) and not per_parameter(g, label))


def launch_python_in(per_step: list[StepWhatIfs]) -> str:
    """What the whole step's launch-overhead fix adds where one function of the program's holds most of it."""
    found = _middle(per_step).launch_python
    if found is None:
        return ""
    source, share = found
    return (f"; {share:.0%} of it on the threads that run Python is inside {source}, which torch calls around the "
            "program's calls (a TorchFunctionMode, a hook, a tensor subclass): its Python costs on every call, so "
            "take it out of the training loop first")


#: What the launch-overhead fix adds where a loop of the program's leads (:func:`loops_in`): not a fix of its own.
LOOP_HINT = "; most of them come from a loop of the program's"
#: How to make a loop's launches few (:func:`called_in_a_loop`).
LOOP_FIX = ("where the calls are independent of one another, one op over all their tensors (a torch._foreach_ op, "
            "or torch.stack or cat and one call); else the loop compiled or captured in a CUDA graph: either makes "
            "the launches a few")


def loops_in(per_step: list[StepWhatIfs], label: str | None = None) -> str:
    """What the launch-overhead fix adds where the program calls one op in a loop (:func:`called_in_a_loop`), in
    ``label``'s region if given: the loop named, and how to make its launches few. Empty where there is none."""
    loops = [lp for lp in _middle(per_step).loops if label is None or lp.label == label][:2]
    if not loops:
        return ""
    return f"{LOOP_HINT}, {loops_words(loops)}: {LOOP_FIX}"


def _loop_candidates(per_step: list[StepWhatIfs], path, base: float, rank, pool) -> list[WhatIf]:
    """The launches of the program's loops (:func:`called_in_a_loop`) issued as one call each run, where every
    step has them: a what-if of its own, beside the regions'."""
    loops = _middle(per_step).loops[:2]
    if not loops or any(s.loop_fixed_us is None for s in per_step):
        return []
    ops = {(lp.op, lp.label) for lp in loops}
    on_path = sum(p.us for p in path if p.cause is Cause.LAUNCH_OVERHEAD and (p.where.op, p.where.label) in ops)
    top = loops[0]
    return [WhatIf(Cause.LAUNCH_OVERHEAD, Where(op=top.op, label=top.label, rank=rank), base,
                   pool([s.loop_fixed_us for s in per_step]), on_path / 1e3,
                   f"{loops_words(loops)}: {LOOP_FIX}")]


def fp32_gemm_share(g: StepGraph) -> float:
    """The share of the step's GEMM kernels' device time whose launching op took float32 inputs only (its
    ``Input type``, which ``record_shapes=True`` records: ``float``) and whose kernel computes in fp32, not TF32 (its
    name, decoded)."""
    total = fp32 = 0.0
    for node in g.dev:
        if node.where.kind == "gemm":
            total += node.dur_us
            fp32 += node.dur_us if _fp32_gemm(node) else 0.0
    return fp32 / total if total else 0.0


def _fp32_gemm(node) -> bool:
    """Whether a GEMM kernel's launching op took float32 inputs only and its name says it computes in fp32 (both
    facts: not TF32)."""
    op = node.event.launch.op if node.event.launch is not None else None
    types = [t for t in ((op.args or {}).get("Input type") or []) if t] if op is not None else []
    return (node.where.kind == "gemm" and bool(types) and all(t == "float" for t in types)
            and getattr(node.event.decoded, "dtype", None) == "fp32")


#: The labels of framework code whose syncs are its own, not the program's to take out (DDP's forward waits on an
#: event of its reducer's).
FRAMEWORK_LABELS = ("DistributedDataParallel.",)


def own_syncs(g: StepGraph) -> dict[Where, int]:
    """The step's own syncs (not the loop's :data:`LOOP_SYNCS` after it, nor those inside
    :data:`FRAMEWORK_LABELS`), counted per op and label."""
    counts: dict[Where, int] = {}
    for seg in g.host:
        if (seg.cause is Cause.HOST_SYNC and not _loop_sync_at(seg.where)
                and not (seg.where.label or "").startswith(FRAMEWORK_LABELS)):
            place = Where(op=seg.where.op, label=seg.where.label)
            counts[place] = counts.get(place, 0) + 1
    return counts


def _fast(g: StepGraph, observed: Timing, cost: ProfilerCost) -> tuple[float, float] | None:
    """The step as it is and without its syncs, each re-timed with the host :data:`FAST_HOST` times faster than
    estimated: only where a sync of the step's own (not the loop's) is in it and no run record measured the
    host's speed."""
    if cost.factor is not None or not own_syncs(g):
        return None
    timing = without_profiler(g, observed, replace(cost, scale=cost.scale * FAST_HOST))
    return simulate(g, timing).period_us, simulate(g, _drop_host(g, timing, Cause.HOST_SYNC)).period_us


def _compute_group(path: list[PathShare]) -> Where | None:
    """The (op, label) whose kernels take the most GPU-compute time on the path, with their main kind; or the
    step's elementwise ops (:data:`UNFUSED`, :func:`_elementwise`), two or more, where together they take more."""
    groups = _compute_groups(path)
    if not groups:
        return None
    (op, label), kinds = max(groups.items(), key=lambda kv: sum(kv[1].values()))
    elementwise = _elementwise(groups)
    if len(elementwise) >= 2 and sum(sum(groups[key].values()) for key in elementwise) > sum(kinds.values()):
        return UNFUSED
    return Where(op=op, label=label, kind=max(kinds, key=kinds.get), rank=None)


def _compute_groups(path: list[PathShare]) -> dict:
    """The path's GPU-compute time by (op, label), then by kernel kind (µs)."""
    groups: dict = defaultdict(lambda: defaultdict(float))
    for p in path:
        if p.cause is Cause.GPU_COMPUTE:
            groups[(p.where.op, p.where.label)][p.where.kind] += p.us
    return groups


def _elementwise(groups: dict) -> set:
    """Of ``{(op, label): {kind: µs}}``, the elementwise ops outside an optimizer (:func:`_unfused`): those whose
    kernels are pointwise (:data:`ELEMENTWISE_SHARE` of their time or more). Not a convolution's layout
    transforms, nor a GEMM's epilogue: one op, which fusing the program's ops leaves as it is."""
    return {key for key, kinds in groups.items()
            if _unfused(key[1]) and kinds.get("pointwise", 0.0) >= ELEMENTWISE_SHARE * sum(kinds.values()) > 0}


#: An op whose pointwise kernels take this share of its device time or more is an elementwise op.
ELEMENTWISE_SHARE = 0.9


#: The step's elementwise ops outside its optimizer, together (:func:`_compute_group`): each elementwise op of
#: an eager program reads and writes its whole tensor, so a chain of them costs what one fused kernel would,
#: as many times over as it has ops.
UNFUSED = Where(kind="pointwise")


def _pointwise_ops(path: list[PathShare]) -> str:
    """The three elementwise ops (:func:`_elementwise`) that take the most of the path, and how many there are."""
    groups = _compute_groups(path)
    ops: dict = defaultdict(float)
    for key in _elementwise(groups):
        ops[key[0]] += sum(groups[key].values())
    top = sorted(ops, key=ops.get, reverse=True)
    named = ", ".join(op for op in top[:3] if op)
    return f"{named} and {len(top) - 3} other ops" if len(top) > 3 else named


def _unfused(label: str | None) -> bool:
    """Whether pointwise kernels in ``label`` count as the step's unfused ones: not an optimizer's (``_fused_`` and
    ``_foreach_`` kernels are one pass over many tensors already)."""
    return not (label or "").startswith(OPTIMIZER_LABEL)


# ------------------------------------------------------------ the verdict
def verdict_of(trace: Trace, steps: list[Step], *, rank: int | None = None,
               unprofiled: dict | None = None) -> Verdict:
    """The verdict of ``steps`` of ``trace`` (see the module docstring).

    ``unprofiled`` is ``{"label": ..., "cpu_us": ...}``: a run record's
    profiler-off CPU time of the ``record_function`` label that spans the step,
    which calibrates the profiler's cost per op on this machine.
    """
    missing = _missing(trace, steps)
    if missing is not None:
        return Verdict(None, [], None, 0.0, {}, len(steps), missing=missing)
    steps, cut = complete_steps(steps)
    graphs = [step_graph(trace, s, rank=rank) for s in steps]
    cost, notes = _calibration(trace, steps, unprofiled)
    if cut:
        notes.append(f"left out {', '.join(f'ProfilerStep#{s.number}' for s in cut)}, cut short: {'it holds' if len(cut) == 1 else 'they hold'} "
                     "less than half the device work of the median step (the profiler stopped, or the trace was "
                     "exported, before it ended); stop the profiler only after the last step's prof.step()")
    gbps = pinned_gbps(graphs)
    per_step = [step_what_ifs(g, gbps=gbps, cost=cost) for g in graphs]
    return _pooled(per_step, rank, cost, notes)


#: A step with less than this share of the median step's device events is taken as cut short.
CUT_SHORT = 0.5


def complete_steps(steps: list[Step]) -> tuple[list[Step], list[Step]]:
    """The steps to re-time, and those left out as cut short: fewer device events than :data:`CUT_SHORT` of the
    median step's, the first or last of the window (where a recording starts or stops). One step alone is kept."""
    if len(steps) < 2:
        return steps, []
    median = statistics.median(len(s.device_events) for s in steps)
    cut = [s for s in (steps[0], steps[-1]) if len(s.device_events) < CUT_SHORT * median]
    kept = [s for s in steps if s not in cut]
    return (kept, cut) if kept else (steps, [])


def _missing(trace: Trace, steps: list[Step]) -> str | None:
    if not any(s.device_events for s in steps):
        return ("the trace holds no device activity: record with activities=[ProfilerActivity.CPU, "
                "ProfilerActivity.CUDA] so that kernels and their launches are in it")
    if not any(ev.launch is not None for s in steps for ev in s.device_events):
        return ("no device work in the trace is linked to the call that launched it (no correlation ids): record "
                "with a torch.profiler that traces CUDA activity (CUPTI)")
    return None


def _recording_gaps(steps: list[Step]) -> list[float]:
    """Per trivial op that wraps one other trivial op (``aten::t`` around ``aten::transpose``): its length less
    its child's (µs)."""
    return [op.dur_us - op.children[0].dur_us for s in steps for op in s.ops
            if op.name in TRIVIAL_OPS and len(op.children) == 1 and not op.runtime_calls
            and op.children[0].name in TRIVIAL_OPS and not op.children[0].children
            and not op.children[0].runtime_calls]


def _recording_pairs(steps: list[Step]) -> list[tuple[str, str]]:
    """The (parent, child) names of :func:`_recording_gaps`' pairs, in the same order."""
    return [(op.name, op.children[0].name) for s in steps for op in s.ops
            if op.name in TRIVIAL_OPS and len(op.children) == 1 and not op.runtime_calls
            and op.children[0].name in TRIVIAL_OPS and not op.children[0].children
            and not op.children[0].runtime_calls]


#: The pair :data:`RECORDING_REF_US` was measured on, and the gauge where a trace has 20 of them or more: another
#: parent does more work of its own (FSDP2's all-gather slices each took 7 to 11 µs over their ``as_strided``
#: where transposes took 1.7 to 2.9 µs over theirs, and pulled the median up by a fifth).
GAUGE_PAIR = ("aten::transpose", "aten::as_strided")


def detach_gaps(steps: list[Step]) -> list[float]:
    """Per ``aten::detach`` that wraps one ``detach`` and nothing else: its length less its child's (µs)."""
    return [op.dur_us - op.children[0].dur_us for s in steps for op in s.ops
            if op.name == "aten::detach" and len(op.children) == 1 and op.children[0].name == "detach"
            and not op.runtime_calls and not op.children[0].children]


def host_speed(steps: list[Step]) -> float | None:
    """How much slower this trace's host records an op than the machines the profiler's cost was measured on.

    Where a trivial op wraps one other (``aten::t`` around ``aten::transpose``,
    ``aten::reshape`` around ``aten::view``), the parent's length less its
    child's is the child's recording (its start and end events) and a few
    instructions of the parent's own: the profiler's cost of an op, nearly
    alone. Their median over :data:`RECORDING_REF_US`, where the trace has at
    least 20 of them (only ``aten::transpose`` around ``aten::as_strided``,
    :data:`GAUGE_PAIR`, where it has 20 of those: the pair the reference was
    measured on); else, the same of ``aten::detach`` around ``detach``
    over :data:`DETACH_REF_US` (compiled code keeps those); else the median length of the trivial ops with nothing
    nested (:data:`TRIVIAL_OPS`) over :data:`TRIVIAL_REF_US`, a weaker gauge:
    a leaf's length mixes the profiler's part with the op's own work, which a
    tensor subclass's dispatch (FSDP2's DTensor) or a busy host lengthens
    while the profiler's part stays. Between 0.5 and 4; None where the trace
    has fewer than 20 of either.
    """
    gaps = _recording_gaps(steps)
    gauge = [gap for gap, pair in zip(gaps, _recording_pairs(steps), strict=True) if pair == GAUGE_PAIR]  # see there
    if len(gauge) >= 20:
        gaps = gauge
    if len(gaps) >= 20:
        return min(max(statistics.median(gaps) / RECORDING_REF_US, 0.5), 4.0)
    detaches = detach_gaps(steps)
    if len(detaches) >= 20:
        return min(max(statistics.median(detaches) / DETACH_REF_US, 0.5), 4.0)
    lengths = [op.dur_us for s in steps for op in s.ops
               if op.name in TRIVIAL_OPS and not op.children and not op.runtime_calls]
    if len(lengths) < 20:
        return None
    return min(max(statistics.median(lengths) / TRIVIAL_REF_US, 0.5), 4.0)


def _calibration(trace: Trace, steps: list[Step], unprofiled: dict | None) -> tuple[ProfilerCost, list[str]]:
    """How to take the profiler's cost out: from a run record's profiler-off CPU time where there is one (the
    label's stretches scaled to it), else the per-op estimate scaled by how long the trace's trivial ops took
    (:func:`host_speed`)."""
    notes = []
    if not trace.steps and len(steps) > 1:
        notes.append("the trace has no ProfilerStep markers: each CUDA graph replay is read as a step")
    elif not trace.steps:
        notes.append("the trace has no ProfilerStep markers: it is read as one step; record with "
                     "torch.profiler.schedule(...) and prof.step() once per step for a steady-state verdict")
    if not unprofiled or not unprofiled.get("cpu_us") or not unprofiled.get("label"):
        speed = host_speed(steps)
        if speed is None:
            return ProfilerCost(), notes
        notes.append(f"the profiler's cost per op scaled by {speed:.2f}: this trace's host took that many times as "
                     "long to record an op (a trivial op, or a detach, nested in another) as where the cost was "
                     "measured")
        return ProfilerCost(scale=speed), notes
    return _from_run_record(trace, steps, unprofiled, notes)


def _from_run_record(trace: Trace, steps: list[Step], unprofiled: dict,
                     notes: list[str]) -> tuple[ProfilerCost, list[str]]:
    """The profiler's cost from a run record's profiler-off CPU time of the label that spans the step: that
    label's host work re-timed at the measured ratio, the rest (the loop's own calls between steps) at the per-op
    estimate scaled to the measured cost."""
    label = unprofiled["label"]
    spans = [op for s in steps for op in s.ops if op.annotation and op.name == label]
    if not spans:
        return ProfilerCost(), notes
    profiled = statistics.mean(op.dur_us for op in spans)
    def per_span(count) -> float:  # count(step, span), the mean over the spans
        return sum(count(s, sp) for s in steps for sp in spans if sp in s.ops) / len(spans)

    ops = per_span(lambda s, sp: sum(1 for o in s.ops if not o.annotation and o.start_us >= sp.start_us
                                     and o.end_us <= sp.end_us))
    calls = per_span(lambda s, sp: sum(1 for c in s.runtime_calls if sp.start_us <= c.start_us <= sp.end_us))
    triton = per_span(lambda s, sp: sum(1 for o in s.ops if is_compiled_triton_launch(o)
                                        and sp.start_us <= o.start_us <= sp.end_us))
    python = per_span(lambda s, sp: sum(bisect.bisect_right(starts, sp.end_us) - bisect.bisect_left(starts, sp.start_us)
                                        for starts in trace.python_starts.values()))
    estimate = (PROFILER_OP_US * ops + PROFILER_CALL_US * calls + PROFILER_TRITON_US * triton
                + PROFILER_PY_US * python)
    off = float(unprofiled["cpu_us"])
    measured = profiled - off
    # outside the label (the loop's own calls between steps) the per-op estimate, at this host's measured rate
    scale = min(max(measured / estimate, 0.0), 5.0) if estimate > 0 else 1.0
    factor = min(max(off / profiled, 0.0), 1.0) if profiled > 0 else None
    notes.append(f"the profiler's cost calibrated from the run record: '{label}' took {profiled:,.0f} µs of CPU "
                 f"per step profiled and {off:,.0f} µs without the profiler, so its host work is re-timed at "
                 f"{factor:.2f}× its profiled length ({measured:,.0f} µs of profiler cost against {estimate:,.0f} "
                 "µs estimated per op)")
    return ProfilerCost(scale=scale, label=label, factor=factor), notes


#: Steps whose mean is this many times their median differ by more than noise (a step that stalled)...
STALL_MEAN = 1.5
#: ... the long ones are those over the median step by more than this share of it ...
STALL_FIT = 0.1
#: ... and the cause whose what-if removes the most of their excess over the median step, at least this share of
#: it, holds the difference (a checkpoint's copy made pinned still takes a few ms: most of the stall, not all).
STALL_SHARE = 0.5


def stalled(per_step: list[StepWhatIfs]) -> Cause | None:
    """The cause that only some steps hold, where one does: the steps differ (:data:`STALL_MEAN`), and fixing
    it removes most of what the long steps take over the typical one (:data:`STALL_SHARE`): a DataLoader whose
    workers fall behind now and then, a periodic checkpoint. Those steps are real: a timer over many steps
    counts them."""
    bases = [s.base_us for s in per_step]
    typical = statistics.median(bases)
    if len(bases) < 2 or statistics.fmean(bases) < STALL_MEAN * typical:
        return None
    long = [s for s in per_step if s.base_us > (1 + STALL_FIT) * typical]
    excess = sum(s.base_us - typical for s in long)
    removed = {c: sum(s.base_us - s.fixed_us[c] for s in long) for c in STALL_CAUSES}
    best = max(STALL_CAUSES, key=removed.get)
    return best if removed[best] >= STALL_SHARE * excess else None


#: What a program does in some steps only (a checkpoint, a batch late, a sync to log): not launch overhead, whose
#: what-if (no host cost per launch) would hide any host stretch, stalled or not.
STALL_CAUSES = (Cause.HOST_SYNC, Cause.MEMCPY, Cause.ALLOCATOR, Cause.HOST_GAP)


def _pooling(per_step: list[StepWhatIfs], notes: list[str]) -> Callable[[list[float]], float]:
    """How the steps' figures become one (µs → ms): their median, which noise in one step does not move; where a
    cause holds some steps only (:func:`stalled`), their mean, what a run of such steps takes per step (a stall in
    one step of three costs a third of it in each), and a note says so."""
    stall = stalled(per_step)
    if stall is None:
        return lambda values: statistics.median(values) / 1e3
    typical = statistics.median(s.base_us for s in per_step)
    slow = sum(s.base_us > (1 + STALL_FIT) * typical for s in per_step)
    notes.append(f"{slow} of {len(per_step)} steps took much longer than the others, with {stall.value} in them: "
                 "each figure is the mean over the steps, as a timer over many steps would see it")
    return lambda values: statistics.fmean(values) / 1e3


def _cause_candidates(per_step: list[StepWhatIfs], path: list[PathShare], path_ms: dict[Cause, float], base: float,
                      rank, pool) -> list[WhatIf]:
    """Each removable cause on the path, fixed: where it takes the most path time, and the step without it."""
    candidates = []
    for cause in REMOVABLE:
        where = top_where(path, cause)
        if where is None:
            continue
        if cause is Cause.LAUNCH_OVERHEAD:  # the whole step graphed: across the step, whatever region leads
            where = Where()
        fix = step_fix(cause, where, per_step)
        if cause is Cause.LAUNCH_OVERHEAD:
            fix += launch_python_in(per_step) + loops_in(per_step) + syncs_in_the_way(per_step)
        candidates.append(WhatIf(cause, _ranked(where, rank), base, pool([s.fixed_us[cause] for s in per_step]),
                                 path_ms.get(cause, 0.0), fix))
    return candidates


def _middle(per_step: list[StepWhatIfs]) -> StepWhatIfs:
    """The typical step: the median by its length without the profiler (the lower of the two middle ones)."""
    return sorted(per_step, key=lambda s: s.base_us)[(len(per_step) - 1) // 2]


def step_fix(cause: Cause, where: Where, per_step: list[StepWhatIfs]) -> str:
    """The fix for ``cause`` at ``where``: :func:`fix_for`'s, but where the steps' own facts call for another:
    copies pinned already or many small ones (:func:`_copy_fix`), a host gap of setup or of Python inside an op
    (:func:`_host_gap_fix`), syncs that are anomaly detection's NaN checks (:data:`NAN_CHECK_FIX`), an optimizer
    that is fused or for-each already (the graphs' plain fix, not :data:`OPTIMIZER_FIX`), GEMMs on float32, SDPA's
    math backend, elementwise ops to fuse (:func:`_compute_fix`)."""
    special = None
    if cause is Cause.MEMCPY:
        special = _copy_fix(where, per_step)
    elif cause is Cause.HOST_GAP:
        special = _host_gap_fix(where, per_step)
    elif cause is Cause.HOST_SYNC and where.op == "aten::item" and _mostly_nan_checks(per_step):
        special = NAN_CHECK_FIX
    elif cause is Cause.LAUNCH_OVERHEAD and any(where.label in s.multi_tensor for s in per_step):
        special = FIXES[cause]
    elif cause is Cause.GPU_COMPUTE:
        special = _compute_fix(where, per_step)
    return special or fix_for(cause, where)


def _copy_fix(where: Where, per_step: list[StepWhatIfs]) -> str | None:
    """A copy's fix where its facts call for one of its own: pinned already (:data:`COPY_AHEAD_FIX`), or many small
    ones from one place (:data:`SMALL_COPIES_FIX`); None otherwise."""
    if all(s.pinned for s in per_step):
        return COPY_AHEAD_FIX
    place = (where.op, where.label)
    # the typical step's, else any step's: a copy made every few steps is in some only
    holding = [s for s in [_middle(per_step), *per_step] if place in s.small_copies]
    if holding:
        count, nbytes = holding[0].small_copies[place]
        return SMALL_COPIES_FIX.format(count=count, size=_bytes_words(nbytes))
    if any(place in s.to_host for s in per_step):
        return TO_HOST_FIX
    return None


def _compute_fix(where: Where, per_step: list[StepWhatIfs]) -> str | None:
    """The GPU's own work's fix where its facts call for one of its own: GEMMs on float32
    (:data:`FP32_GEMM_FIX`), SDPA on its math backend (:data:`SDPA_MATH_FIX`), the step's elementwise ops
    (:data:`UNFUSED_FIX`); None otherwise."""
    if where.kind == "gemm" and _middle(per_step).fp32_gemms >= FP32_SHARE:
        return FP32_GEMM_FIX
    if where.op == SDPA and any(s.math_sdpa for s in per_step):
        return SDPA_MATH_FIX
    if where is RECOMPUTE:
        return RECOMPUTE_FIX
    if where is UNFUSED:
        path = _middle(per_step).path
        return UNFUSED_FIX.format(ops=_pointwise_ops(path),
                                  attention=ATTENTION_BY_HAND if _by_hand_attention(path) else "")
    return None


def _by_hand_attention(path: list[PathShare]) -> bool:
    """Whether the path's GPU work holds a softmax and a batched matrix product in one label, with elementwise ops
    (the masked fill, the scale): attention written out op by op."""
    ops: dict = defaultdict(set)
    for p in path:
        if p.cause is Cause.GPU_COMPUTE and p.where.op:
            ops[p.where.label].add(p.where.op.removeprefix(ENGINE_PREFIX + ": "))
    return any(any("softmax" in op.lower() for op in names) and names & {"aten::bmm", "aten::matmul", "BmmBackward0"}
               for names in ops.values())


def _host_gap_fix(where: Where, per_step: list[StepWhatIfs]) -> str | None:
    """A host gap's fix where its stretches are setup inside an op (:data:`SETUP_FIX`) or Python hooked into one
    (:data:`ANOMALY_FIX` for anomaly detection's, else :data:`PYTHON_IN_OP_FIX`); None otherwise."""
    place = (where.op, where.label)
    if any(place in s.setup for s in per_step):
        return SETUP_FIX
    if any(place in s.python_in_ops for s in per_step):
        return ANOMALY_FIX if ANOMALY_FRAME in (where.source or "") else PYTHON_IN_OP_FIX
    return None


def _mostly_nan_checks(per_step: list[StepWhatIfs]) -> bool:
    """Whether most of the typical step's own syncs are backward nodes' NaN checks (anomaly detection)."""
    middle = _middle(per_step)
    return middle.nan_checks > 0 and 2 * middle.nan_checks >= sum(middle.syncs.values())


def syncs_in_the_way(per_step: list[StepWhatIfs], label: str | None = None) -> str:
    """What the graphs' fix must say of the step's own syncs (in ``label``'s region, if given): a CUDA graph cannot
    hold one (capturing a sync fails), so the what-if splits the graphs at each, and taking them out comes first.
    Empty where the typical step has none."""
    places = {w: n for w, n in _middle(per_step).syncs.items() if label is None or w.label == label}
    if not places:
        return ""
    top = max(places, key=places.get)
    total = sum(places.values())
    which = (f"its sync at {top.words()}" if total == 1 else f"its {total} syncs at {top.words()}"
             if len(places) == 1 else f"its {total} syncs ({places[top]} at {top.words()})")
    shapes = (", keeping shapes independent of the data (torch.where, or a multiplication by the mask, instead of "
              "boolean-mask indexing, nonzero or unique)") if top.op in DATA_SHAPE_OPS else ""
    if top.op == "aten::item" and _mostly_nan_checks(per_step):
        shapes = (" (backward nodes reading back a NaN check of their outputs: autograd's anomaly detection; turn "
                  "it off)")
    return (f"; first take out {which}{shapes}: "
            "a CUDA graph cannot hold a sync, so the prediction splits the graphs at each one")


def _first(counted: list[WhatIf], regions: list[WhatIf], base: float) -> WhatIf:
    """The fix named first: the largest saving; of two that tie (:data:`TIE`), the smaller change; before the
    graphs, a sync of the step's own that counts (a graph cannot hold it), else a fix at one place that gets at
    least :data:`PLACE_SHARE` as far (not the loop's own sync)."""
    best = counted[0]
    close = [w for w in counted if best.saving_ms - w.saving_ms <= TIE * base]
    best = max(close, key=_smaller_change)
    if best.cause is not Cause.LAUNCH_OVERHEAD:
        return best
    syncs = [w for w in counted if w.cause is Cause.HOST_SYNC and not is_loop_sync(w)]
    if syncs:
        return max(syncs, key=lambda w: w.saving_ms)
    smaller = [w for w in counted + regions if w.saving_ms >= PLACE_SHARE * best.saving_ms and w is not best
               and not is_loop_sync(w)
               and (w.cause is not Cause.LAUNCH_OVERHEAD or w.fix.split(LOOP_HINT)[0] != FIXES[w.cause])]  # own fix
    return max(smaller, key=lambda w: w.saving_ms) if smaller else best


def _in_order(candidates: list[WhatIf], regions: list[WhatIf], base: float) -> list[WhatIf]:
    """The fixes that count (:data:`MIN_SAVING`), the first one first (:func:`_first`), then by saving; one
    region's launches after them: part of the step's, listed after the fixes they could tie with, never rivals."""
    floor = max(MIN_SAVING * base, 0.005)
    counted = sorted((w for w in candidates if w.saving_ms >= floor), key=lambda w: -w.saving_ms)
    if counted:
        best = _first(counted, regions, base)
        counted = [best] + [w for w in counted if w is not best]
        regions = [w for w in regions if w is not best]
    return counted + sorted((w for w in regions if w.saving_ms >= floor), key=lambda w: -w.saving_ms)


def _fast_host_sync(what_if: list[WhatIf], candidates: list[WhatIf], per_step: list[StepWhatIfs], base: float,
                    pool, notes: list[str]) -> list[WhatIf]:
    """``what_if`` with the step's syncs named first where graphing its launches (or the syncs) lead and the syncs,
    read with the host :data:`FAST_HOST` times faster (:attr:`StepWhatIfs.fast`), save more than as the trace
    shows them and at least :data:`MIN_SAVING` of the step: the profiler hid what they cost, and a graph cannot
    hold them. Their saving is the one read with the faster host, and a note says so."""
    sync = next((w for w in candidates if w.cause is Cause.HOST_SYNC and not is_loop_sync(w)), None)
    if (not what_if or what_if[0].cause not in (Cause.LAUNCH_OVERHEAD, Cause.HOST_SYNC) or sync is None
            or (what_if[0].cause is Cause.HOST_SYNC and what_if[0].where != sync.where)
            or any(s.fast is None for s in per_step)):
        return what_if
    fast_base, no_sync = (pool([s.fast[i] for s in per_step]) for i in range(2))
    saving = fast_base - no_sync
    if saving < MIN_SAVING * fast_base or saving <= sync.saving_ms:
        return what_if
    notes.append(f"the syncs' saving is read with the host {FAST_HOST:g}× as fast as estimated without the profiler: "
                 "the profiler slowed the host, so in the trace each sync found the GPU's work done, while without "
                 "it the host runs ahead and waits at the sync for the work queued before it")
    named = replace(sync, predicted_step_ms=base - saving)
    return [named] + [w for w in what_if if w.cause is not Cause.HOST_SYNC or is_loop_sync(w)]


def _pooled(per_step: list[StepWhatIfs], rank, cost: ProfilerCost, notes: list[str]) -> Verdict:
    """The steps' what-ifs as one verdict (:func:`_pooling`). The critical path is every step's, each stretch
    weighted by 1/steps."""
    pool = _pooling(per_step, notes)
    profiled, base = pool([s.profiled_us for s in per_step]), pool([s.base_us for s in per_step])
    path = [replace(p, us=p.us / len(per_step)) for s in per_step for p in s.path]
    path_ms = {c: us / 1e3 for c, us in by_cause(path).items()}
    candidates, regions = _without_repeats(_on_cpu_candidate(_cause_candidates(per_step, path, path_ms, base, rank,
                                                                                pool), per_step, base, rank, pool),
                                           _region_candidates(per_step, path, base, rank, pool)
                                           + _loop_candidates(per_step, path, base, rank, pool))
    what_if = _fast_host_sync(_in_order(candidates, regions, base), candidates, per_step, base, pool, notes)
    if cost.label is not None:  # a run record's harness (profile, a chapter) synchronizes after each step: its own
        what_if = [w for w in what_if if not is_loop_sync(w)]
    middle = _middle(per_step)
    if middle.compute_where is not None:
        # a step without such kernels on its path loses nothing (a stalled step's path may be the stall alone)
        predicted = pool([s.base_us if s.compute_fixed_us is None else s.compute_fixed_us for s in per_step])
        what_if.append(WhatIf(Cause.GPU_COMPUTE, _ranked(middle.compute_where, rank), base, predicted,
                              path_ms.get(Cause.GPU_COMPUTE, 0.0),
                              step_fix(Cause.GPU_COMPUTE, middle.compute_where, per_step)))
    profiler = WhatIf(Cause.PROFILER_OVERHEAD, Where(rank=rank), profiled, base, 0.0, FIXES[Cause.PROFILER_OVERHEAD])
    return Verdict(what_if[0] if what_if else None, what_if, profiler, profiled, path_ms, len(per_step), notes=notes,
                   profiler_scale=cost.scale, profiler_factor=cost.factor)


def _on_cpu_candidate(candidates: list[WhatIf], per_step: list[StepWhatIfs], base: float, rank, pool) -> list[WhatIf]:
    """``candidates`` with the host gap and the copy of a region that copies device data to the host and computes
    on it there (:func:`cpu_after_copy`) made one fix, where every step has it: done on the GPU, both go."""
    found = _middle(per_step).on_cpu
    if found is None or any(s.on_cpu is None for s in per_step):
        return candidates
    where = found[0]
    parts = [w for w in candidates if w.where.label == where.label and w.cause in (Cause.HOST_GAP, Cause.MEMCPY)]
    if not parts:
        return candidates
    joined = WhatIf(Cause.HOST_GAP, _ranked(where, rank), base, pool([s.on_cpu[1] for s in per_step]),
                    sum(w.path_ms for w in parts), CPU_AFTER_COPY_FIX.format(label=where.label, op=where.op))
    return [joined] + [w for w in candidates if w not in parts]


#: The fix for a region that copies device data to the host and computes on it there (:func:`cpu_after_copy`).
CPU_AFTER_COPY_FIX = ("the work in '{label}' ran on the CPU ({op}) on data copied from the GPU just before it: do "
                      "it on the GPU and keep its result there (read back only a scalar, and only when it is shown); "
                      "the copy and the CPU work go together")


def _region_candidates(per_step: list[StepWhatIfs], path, base: float, rank, pool) -> list[WhatIf]:
    """Launch overhead removed in one region alone (its label), for the regions every step re-timed."""
    labels = set.intersection(*(set(s.region_fixed_us) for s in per_step)) if per_step else set()
    on_path = {}
    for p in path:
        if p.cause is Cause.LAUNCH_OVERHEAD and p.where.label in labels:
            on_path[p.where.label] = on_path.get(p.where.label, 0.0) + p.us / 1e3
    return [WhatIf(Cause.LAUNCH_OVERHEAD, Where(label=label, rank=rank), base,
                   pool([s.region_fixed_us[label] for s in per_step]), on_path.get(label, 0.0),
                   step_fix(Cause.LAUNCH_OVERHEAD, Where(label=label), per_step) + loops_in(per_step, label)
                   + syncs_in_the_way(per_step, label))
            for label in sorted(labels)]


#: The fix for a sync inside an op whose output's shape depends on the data (boolean-mask indexing runs
#: aten::nonzero): the host cannot issue what follows until it knows the shape.
DATA_SHAPE_FIX = ("keep shapes independent of the data: torch.where or a multiplication by the mask instead of "
                  "boolean-mask indexing, nonzero or unique (each makes the host wait to learn the shape)")
#: The fix for launch overhead in an optimizer's step (:data:`~.step_graph.OPTIMIZER_LABEL`): its
#: for-each-parameter kernels fused into a few.
OPTIMIZER_FIX = ("launch the optimizer's work in a few kernels: fused=True (or foreach=True) in torch.optim, "
                 "or capture the step in a CUDA graph")


#: GEMMs whose launching ops took float32 inputs for at least this share of their device time get
#: :data:`FP32_GEMM_FIX`: float32 matrix products run without the tensor cores unless TF32 is allowed.
FP32_SHARE = 0.5
FP32_GEMM_FIX = ("the GEMMs there take float32 inputs (the trace's input types), so they run without the tensor "
                 "cores' bf16 rate: bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)) or TF32 "
                 "(torch.set_float32_matmul_precision('high')) runs them several times faster (the what-if removes "
                 "them: the most a faster kernel saves)")
#: scaled_dot_product_attention on its math backend (:func:`_math_sdpa`): why a fused backend was not used.
SDPA_MATH_FIX = ("scaled_dot_product_attention ran PyTorch's math backend (aten::_scaled_dot_product_attention_math: "
                 "the scores, softmax and product as separate kernels, forward and backward): give it what a fused "
                 "backend takes (bf16 or fp16 inputs, a supported head size, is_causal or no mask rather than a "
                 "dense one, no sdpa_kernel(SDPBackend.MATH)); torch.backends.cuda.flash_sdp_enabled() and "
                 "can_use_flash_attention(params, debug=True) say which condition failed (the what-if removes its "
                 "kernels, forward and backward: the most a fused kernel saves)")
#: The step's elementwise ops together (:data:`UNFUSED`), with the three heaviest named.
UNFUSED_FIX = ("fuse them ({ops}): each elementwise op reads and writes its whole tensor, so a chain of them costs as many "
               "passes over memory as it has ops; torch.compile fuses a chain into one kernel, or use the fused op "
               "(F.gelu, F.silu, F.layer_norm) and keep the chain in bf16{attention} (the what-if removes them: the "
               "most fusing saves)")
#: Added to :data:`UNFUSED_FIX` where the chain sits with a softmax and batched matrix products
#: (:func:`_by_hand_attention`).
ATTENTION_BY_HAND = ("; here they sit between batched matrix products and a softmax: attention written out op by "
                     "op, which F.scaled_dot_product_attention runs as one fused kernel, forward and backward")
#: Pageable copies device→host (:func:`_to_host`): the copy's fix is a pinned buffer to copy into, not a
#: DataLoader's pinning.
TO_HOST_FIX = ("copy into pinned memory with non_blocking=True: a buffer allocated once with pin_memory=True and "
               "filled with .copy_(x, non_blocking=True), read only after an event recorded behind the copy says it "
               "is done (or done less often)")
#: The forward recomputed in the backward (:data:`RECOMPUTE`).
RECOMPUTE_FIX = ("the backward runs forward ops again (linear, activations, norms inside backward nodes): activation "
                 "checkpointing (torch.utils.checkpoint) trades that time for memory; checkpoint fewer layers, or "
                 "only the cheap ops (selective checkpointing), where memory allows (the what-if removes the "
                 "recompute)")
#: Many small pageable copies from one place (:func:`small_copies`).
SMALL_COPIES_FIX = ("copy once: its {count} copies a step, about {size} each, are a call and a wait each; stack the "
                    "tensors into one on the host (torch.cat or torch.stack into a pinned buffer) and copy that with "
                    "non_blocking=True, then split it on the GPU")

#: The fix for host→device copies that are pinned and asynchronous already but run on the stream that computes, in
#: line with its kernels: the what-if hides them behind the work before them (:func:`_ahead`).
COPY_AHEAD_FIX = ("the copy is pinned and asynchronous already, but runs on the compute stream between its kernels: "
                  "copy the next batch ahead on a side stream (torch.cuda.Stream, wait_stream, record_stream), so "
                  "it overlaps the step before it")

#: The labels torch.utils.data records around fetching a batch, and the fix for a host gap in each: the batch made
#: on the training thread (``num_workers=0``), or workers that did not have it ready.
LOADER_FIXES = {
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter": (
        "the DataLoader makes each batch on the training thread (num_workers=0): give it workers "
        "(num_workers>0, pin_memory=True, persistent_workers=True) so batches are ready before the step asks"),
    "enumerate(DataLoader)#_MultiProcessingDataLoaderIter": (
        "the DataLoader's workers cannot keep up: more workers, a larger prefetch_factor, or cheaper per-item "
        "work (transforms batched, or moved to the GPU)"),
}

#: The fix for a host gap named at one of torch's ops (``aten::rand``, ``aten::mean``): an op that ran for a
#: millisecond or more and launched no GPU work ran on the CPU, on CPU tensors.
CPU_OP_FIX = ("the op ran on the CPU, launching nothing: make its tensors on the GPU (device='cuda') so it runs "
              "there, or do the work ahead of the step, off the training thread (a DataLoader worker)")

#: The fix for a host gap inside an op that launches device work: a millisecond or more on the host before a launch
#: is setup the op repeats for a shape it has not seen (cuDNN's plans for scaled_dot_product_attention, a Triton
#: autotuning run, a compilation).
SETUP_FIX = ("the op ran on the host for a millisecond or more between its launches, calling nothing: most often "
             "setup it repeats for each shape it has not seen (a cuDNN plan, an autotuning run, a compilation); keep "
             "the shapes to a few (pad to fixed sizes) and run each once before the loop, or warm it up before "
             "profiling")

#: The fix for a host gap of Python run inside one of torch's ops (:attr:`HostSeg.python_in_op`).
PYTHON_IN_OP_FIX = ("Python ran inside torch's op, for a millisecond or more between its launches: something hooks "
                    "each op (autograd's anomaly detection, a TorchFunctionMode or TorchDispatchMode, a tensor "
                    "subclass's Python); take it out of the training loop")
#: The Python call autograd's anomaly detection makes inside each op that records a backward node: it stores
#: a stack trace for the node (torch/csrc/autograd/python_anomaly_mode.cpp calls torch.fx.traceback.format_stack).
ANOMALY_FRAME = "torch/fx/traceback.py"
ANOMALY_FIX = ("Python ran inside torch's op, for a millisecond or more between its launches: "
               "torch.fx.traceback.format_stack, which autograd's anomaly detection calls for each op it records "
               "(torch.autograd.detect_anomaly or set_detect_anomaly(True) left on); turn it off in the training loop")

#: The fix for syncs that are mostly backward nodes reading back a NaN check of their outputs
#: (:attr:`HostSeg.nan_check`).
NAN_CHECK_FIX = ("each backward node checks its outputs for NaN (aten::isnan, aten::_is_any_true) and reads the answer "
                 "on the host: autograd's anomaly detection (torch.autograd.detect_anomaly or set_detect_anomaly(True)) "
                 "left on; turn it off in the training loop")

#: The fix for a host gap inside the autograd node that runs a module's backward hooks
#: (``autograd::engine::evaluate_function: BackwardHookFunctionBackward``): the hooks' Python held the backward.
HOOK_FIX = ("a backward hook's Python held the backward there (register_full_backward_hook): make the hook cheap, "
            "run its work every N steps, or keep what it records on the GPU")

#: The fix for a host gap where the trace records no op: Python (or a sleep) ran there, and the trace cannot say
#: which; a profile with ``with_stack=True`` can.
UNTRACED_GAP_FIX = ("take the host work off the step's path, Python the trace does not record (with_stack=True "
                    "names it): a DataLoader with workers and pinned memory, prefetching, or the work moved off "
                    "the training thread")


def fix_for(cause: Cause, where: Where) -> str:
    """The fix a cause stands for, at its place: :data:`FIXES`, but a sync to learn a shape
    (:data:`DATA_SHAPE_FIX`), an optimizer's launches (:data:`OPTIMIZER_FIX`), a DataLoader's host gap
    (:data:`LOADER_FIXES`) and a host gap at one of torch's ops (:data:`CPU_OP_FIX`) have their own; a host gap
    where the trace records no op says how to learn what ran (:data:`UNTRACED_GAP_FIX`)."""
    if cause is Cause.HOST_SYNC and where.op in DATA_SHAPE_OPS:
        return DATA_SHAPE_FIX
    if cause is Cause.LAUNCH_OVERHEAD and (where.label or "").startswith(OPTIMIZER_LABEL):
        return OPTIMIZER_FIX
    if cause is Cause.HOST_GAP:
        loader = next((fix for label, fix in LOADER_FIXES.items() if (where.label or "").startswith(label)), None)
        if loader is not None:
            return loader
        if "BackwardHook" in (where.op or ""):
            return HOOK_FIX + (f" ({where.source} ran there)" if where.source else "")
        if (where.op or "").startswith("aten::"):
            return CPU_OP_FIX
        if where.op is None and where.source:
            return (f"take the host work off the step's path ({where.source} ran there): do it less often or more "
                    "cheaply, or move it off the training thread (a DataLoader's workers, prefetching, a thread of "
                    "its own)")
        if where.op is None:
            return UNTRACED_GAP_FIX
    return FIXES[cause]


#: The synchronizing calls a profiling loop makes after each step, outside the step's label.
LOOP_SYNCS = ("cudaDeviceSynchronize", "cudaStreamSynchronize")


def is_loop_sync(w: WhatIf) -> bool:
    """Whether a what-if is the profiling loop's own ``synchronize`` after each step (outside the step's label)."""
    return w.cause is Cause.HOST_SYNC and _loop_sync_at(w.where)


def _loop_sync_at(where: Where) -> bool:
    return where.label is None and where.op in LOOP_SYNCS


def _smaller_change(w: WhatIf) -> tuple:
    """Among fixes that save about the same, the smaller change first: a fix at one place before the step's
    launches graphed; else more time on the critical path."""
    return w.cause is not Cause.LAUNCH_OVERHEAD, w.path_ms


def _without_repeats(candidates: list[WhatIf], regions: list[WhatIf]) -> tuple[list[WhatIf], list[WhatIf]]:
    """The candidates, and the regions that say something the whole step's launch overhead does not.

    A region whose launches, graphed alone, save at least :data:`REGION_SHARE` of what graphing the whole step
    saves (and not much more: a fused optimizer also drops its Python) is that step's launch overhead said
    again. Where exactly one region does (or one region and a loop of the program's in it), the whole step's
    what-if is named for it (saying what the reader labelled, or the loop, with the loop's fix); where several do (the saving is capped elsewhere), it stays
    "across the step". Either way those regions are not listed again.
    """
    whole = next((w for w in candidates if w.cause is Cause.LAUNCH_OVERHEAD), None)
    if whole is None or whole.saving_ms <= 0:
        return candidates, regions
    # an optimizer's region that saves more than the whole step's launches also drops its Python: a fix of its own
    same = [w for w in regions if REGION_SHARE * whole.saving_ms <= w.saving_ms <= whole.saving_ms / REGION_SHARE]
    rest = [w for w in regions if w not in same]
    # one region, or one region and a loop in it (:func:`called_in_a_loop`): named for the loop, the narrower
    if same and len({w.where.label for w in same}) == 1 and len(same) <= 2:
        narrowest = max(same, key=lambda w: w.where.op is not None)
        named = replace(whole, where=narrowest.where, fix=narrowest.fix if narrowest.where.op else whole.fix)
        candidates = [named if w is whole else w for w in candidates]
    return candidates, rest


def _ranked(where: Where, rank) -> Where:
    return replace(where, rank=rank)
