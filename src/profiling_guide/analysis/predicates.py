"""What the pages' predictions look for: one predicate per claim a page makes.

Each function returns (or is) the predicate of an :class:`~profiling_guide.analysis.expect.Prediction`:
``predicate(data) -> (holds, seen)``, ``seen`` saying in a few words what was there.
The claim's words stay on the page; how it is tested lives here.
:mod:`profiling_guide.analysis.expect` holds the predicates every page can use.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from profiling_guide.analysis.backward import phase_of
from profiling_guide.analysis.expect import same_kernels
from profiling_guide.analysis.pace import pace_of
from profiling_guide.analysis.pace_verdict import PaceVerdict
from profiling_guide.analysis.trace_report import GEMM_OPERANDS, gemm_flops
from profiling_guide.spread import Spread, compare, ratio_words
from profiling_guide.trace.model import Trace

Predicate = Callable[..., tuple[bool, str]]


def _per_step(trace: Trace, op_name: str) -> float:
    return len(trace.ops_named(op_name)) / len(trace.steps)


def gemm_kernels(trace: Trace) -> list:
    """The GEMM kernels of the first active step, in launch order."""
    return [k for k in trace.steps[0].kernels if k.decoded.kind == "gemm"]


def triton_kernels(trace: Trace) -> list:
    """The Triton kernels of the first active step (Inductor's or a hand-written one)."""
    return [k for k in trace.steps[0].kernels if k.decoded.library == "triton"]


# ------------------------------------------------------------------ timings
def compares(a: str, b: str, want: str) -> Predicate:
    """Time ``data[a]`` is ``want`` ("faster", "slower" or "tie") against ``data[b]``, both Spreads."""
    def _predicate(data: dict[str, Spread]):
        if a not in data or b not in data:
            return False, f"not measured: {', '.join(n for n in (a, b) if n not in data)}"
        verdict = compare(data[a], data[b])
        return verdict == want, (f"{a} {data[a]:.1f} µs against {b} {data[b]:.1f} µs: "
                                 f"{ratio_words(data[a], data[b])}")
    return _predicate


def never_pays_back(first_call_s: float) -> Predicate:
    """The compiled call saves no CPU time per call (``data``: "compiled" and "eager" issue times)."""
    def _predicate(data: dict[str, Spread]):
        c, e = data["compiled"], data["eager"]
        saved = e.median - c.median
        if compare(c, e) == "faster":
            return False, (f"saved per call: {saved:.1f} µs; first call: {first_call_s:.1f} s; "
                           f"calls to pay back: {first_call_s * 1e6 / saved:,.0f}")
        return True, f"compiled against eager: {ratio_words(c, e)}; saved per call: none"
    return _predicate


def faster_than_each(ours: str, others: list[str]) -> Predicate:
    """Time ``data[ours]`` beats every one of ``others`` outside the spreads."""
    def _predicate(data: dict[str, Spread]):
        verdicts = {n: compare(data[ours], data[n]) for n in others}
        return all(v == "faster" for v in verdicts.values()), "; ".join(
            f"{n}: {v}, {data[n].median / data[ours].median:.2f}×" for n, v in verdicts.items())
    return _predicate


def closer_to_fp64(ours: str, than: str = "eager") -> Predicate:
    """A benchmark result's ``max_rel_error_fp64`` of ``ours`` is at most that of ``than``."""
    def _predicate(result: dict):
        err = result["max_rel_error_fp64"]
        return err[ours] <= err[than], f"{err[ours]:.2e} against {than}'s {err[than]:.2e}"
    return _predicate


def gemm_share_above(share: float, breakdown: dict[str, dict[str, float]]) -> Predicate:
    """Every variant spends more than ``share`` of its median device time in GEMM kernels."""
    def _predicate(times: dict[str, Spread]):
        shares = {n: kinds.get("gemm", 0.0) / times[n].median for n, kinds in breakdown.items() if n in times}
        return all(s > share for s in shares.values()), ", ".join(
            f"{n} {100 * s:.0f}%" for n, s in shares.items())
    return _predicate


# ------------------------------------------------------------------ dispatch and launches
def dispatches_to(parent: str, child: str) -> Predicate:
    """Every ``child`` op runs inside a ``parent`` op; ``seen`` lists what the first parent called."""
    def _predicate(trace: Trace):
        children, parents = trace.ops_named(child), trace.ops_named(parent)
        holds = bool(children) and all(op.parent is not None and op.parent.name == parent
                                       for op in children)
        if not parents:
            return holds, f"no {parent}"
        return holds, f"{parent} calls, in time order: " + ", ".join(
            op.name for op in parents[0].children)
    return _predicate


def gemms_query_occupancy(trace: Trace) -> tuple[bool, str]:
    """Each GEMM's op asks the runtime for occupancy before its launch (as on the post's A100)."""
    kernels = gemm_kernels(trace)
    queried = sum(any("Occupancy" in c.name for c in k.launch.op.runtime_calls) for k in kernels)
    launches = ", ".join(sorted({k.launch.name for k in kernels}))
    return queried == len(kernels), (f"{queried} of {len(kernels)} GEMMs query occupancy; "
                                     f"launched with {launches}")


def launched_with(kind: str, call: str) -> Predicate:
    """Every kernel of decoded ``kind`` is launched by runtime call ``call``; ``seen`` names each kind's."""
    def _predicate(trace: Trace):
        by_kind: dict[str, set[str]] = {}
        for k in trace.steps[0].kernels:
            by_kind.setdefault(k.decoded.kind, set()).add(k.launch.name if k.launch else "?")
        return by_kind.get(kind) == {call}, "; ".join(
            f"{kd}: {', '.join(sorted(calls))}" for kd, calls in by_kind.items())
    return _predicate


def bare_mm(trace: Trace) -> tuple[bool, str]:
    """No ``linear``/``t``/``matmul`` left: three ``aten::mm`` per step, called by the compiled graph."""
    wrappers = sum(_per_step(trace, op) for op in ("aten::linear", "aten::t", "aten::matmul"))
    return wrappers == 0 and _per_step(trace, "aten::mm") == 3, (
        f"{_per_step(trace, 'aten::mm'):g} aten::mm, {_per_step(trace, 'aten::linear'):g} aten::linear, "
        f"{_per_step(trace, 'aten::t'):g} aten::t per step")


def same_gemms_as(other: Trace) -> Predicate:
    """The GEMM kernels of a step, in order, are byte-identical to ``other``'s."""
    def _predicate(trace: Trace):
        mine, theirs = gemm_kernels(trace), gemm_kernels(other)
        if [k.name for k in mine] == [k.name for k in theirs]:
            return True, "identical"
        return False, (f"the other: {[k.decoded.short for k in theirs]}; "
                       f"this one: {[k.decoded.short for k in mine]}")
    return _predicate


def one_triton_kernel_fusing(*ops: str) -> Predicate:
    """One Triton kernel per step, whose name says it absorbed ``ops``."""
    def _predicate(trace: Trace):
        found = triton_kernels(trace)
        holds = len(found) == 1 and set(ops) <= set(found[0].decoded.fused_ops)
        return holds, ", ".join(k.name for k in found) or "no Triton kernel"
    return _predicate


def kernels_named(fragment: str, expected: list[str]) -> Predicate:
    """The kernels of a step whose names contain ``fragment`` are exactly ``expected``."""
    def _predicate(trace: Trace):
        names = [k.name for k in trace.steps[0].kernels if fragment in k.name]
        return names == expected, ", ".join(names) or "none"
    return _predicate


def no_compiler_ops(trace: Trace) -> tuple[bool, str]:
    """No TorchDynamo or compiled-graph rows on the CPU."""
    found = sorted({op.name for op in trace.step_ops if "Dynamo" in op.name or "Compiled" in op.name})
    return not found, ", ".join(found) or "none"


def geglu_and_gemms_under(label: str) -> Predicate:
    """Under the first ``label`` annotation: one geglu kernel and three GEMMs."""
    def _predicate(trace: Trace):
        labels = trace.annotations_named(label)
        if not labels:
            return False, f"no {label} label in the trace"
        kernels = [e for e in labels[0].device_events if e.kind == "kernel"]
        geglu = [k.name for k in kernels if "geglu" in k.name]
        gemms = [k for k in kernels if k.decoded.kind == "gemm"]
        libraries = ", ".join(sorted({k.decoded.library for k in gemms})) or "no library"
        return len(geglu) == 1 and len(gemms) == 3, (
            f"{', '.join(geglu) or 'no geglu kernel'} and {len(gemms)} GEMMs ({libraries}) under {label}")
    return _predicate


def gemm_of_library(trace: Trace, library: str) -> dict[str, str]:
    """The distinct names of the GEMM kernels of ``library`` ("cublas", "triton") in a trace: name → short name."""
    return {k.name: k.decoded.short for k in trace.kernels
            if k.decoded.kind == "gemm" and k.decoded.library == library}


def has_kernel_named(fragment: str, library: str = "triton") -> Predicate:
    """Some kernel's name contains ``fragment``; ``seen`` lists the ``library`` kernels."""
    def _predicate(trace: Trace):
        shown = sorted({k.decoded.short for k in trace.kernels if k.decoded.library == library})
        return any(fragment in k.name for k in trace.kernels), ", ".join(shown) or "none"
    return _predicate


def cublas_gemms_within(other: Trace) -> Predicate:
    """The cuBLAS GEMMs of a trace are among those of ``other`` (and there is at least one)."""
    def _predicate(trace: Trace):
        mine = gemm_of_library(trace, "cublas")
        return bool(mine) and mine.keys() <= gemm_of_library(other, "cublas").keys(), (
            ", ".join(mine[n] for n in sorted(mine)) or "none")
    return _predicate


def template_reads_one(hidden: int) -> Predicate:
    """A Triton GEMM template is launched with a single 3-D ``[..., hidden]`` tensor (``h``, not ``g`` and ``u``)."""
    def _predicate(trace: Trace):
        found = [k for k in gemm_kernels(trace) if k.decoded.library == "triton" and k.launch
                 and k.launch.op and sum(1 for d in k.launch.op.input_dims
                                         if d and d[-1] == hidden and len(d) == 3) == 1]
        return bool(found), ", ".join(k.decoded.short for k in found) or "no such template"
    return _predicate


def paced_by(bound: str) -> Predicate:
    """The pace verdict is ``bound``, e.g. ``"overhead-bound"``; ``seen`` is the verdict and the GPU's busy share.

    Given a :class:`~profiling_guide.analysis.pace_verdict.PaceVerdict`, the verdict a page
    states (profiler off); given a trace, :func:`~profiling_guide.analysis.pace.pace_of` its
    profiled steps; given a report of :func:`~profiling_guide.analysis.trace_report.analyse`,
    the report's own (which also weighs the step's CPU time with the profiler off).
    """
    def _predicate(data):
        if isinstance(data, PaceVerdict):
            return data.bound.value == bound, f"{data.bound.value}, profiler off"
        pace = data.pace if hasattr(data, "pace") else pace_of(data)
        return pace.bound == bound, f"{pace.bound}: GPU busy {pace.share:.0%} of the step, idle {pace.idle:.0%} of its span"
    return _predicate


def same_kernels_as(other: Trace) -> Predicate:
    """A trace launches byte-identical kernel names to ``other`` (as sets)."""
    def _predicate(trace: Trace):
        return same_kernels(other, trace)
    return _predicate


def ops_per_step(op_name: str, n: float) -> Predicate:
    """``op_name`` is called ``n`` times per step."""
    def _predicate(trace: Trace):
        seen = _per_step(trace, op_name)
        return seen == n, f"{seen:g} per step"
    return _predicate


def gemms_per_step(n: int) -> Predicate:
    """A step runs ``n`` GEMM kernels (kernels whose decoded kind is a GEMM)."""
    def _predicate(trace: Trace):
        seen = len(gemm_kernels(trace))
        return seen == n, f"{seen} GEMM kernels in a step"
    return _predicate


# ------------------------------------------------------------------ launches and CUDA graphs
def launch_calls_per_step(trace: Trace) -> dict[str, float]:
    """The runtime calls per step that put work on the GPU (kernel and graph launches), by name."""
    return {call: n for call, n in trace.runtime_calls_per_step().items() if "Launch" in call}


def kernel_launches_per_step(trace: Trace) -> float:
    """Kernel launch calls per step (``cudaLaunchKernel``, ``cuLaunchKernelEx``...), graph launches left out."""
    return sum(n for call, n in launch_calls_per_step(trace).items() if "Graph" not in call)


def graph_launches_per_step(trace: Trace) -> float:
    """``cudaGraphLaunch`` calls per step."""
    return sum(n for call, n in launch_calls_per_step(trace).items() if "Graph" in call)


def one_launch_per_kernel(trace: Trace) -> tuple[bool, str]:
    """Every kernel of a step has a launch call of its own: as many launch calls as kernels."""
    launches, kernels = kernel_launches_per_step(trace), trace.kernels_per_step()
    return launches == kernels, f"launch calls: {launches:g}, kernels: {kernels:g} per step"


def one_graph_launch_only(trace: Trace) -> tuple[bool, str]:
    """A step is one ``cudaGraphLaunch`` and no kernel launch: its kernels come from a graph."""
    holds = graph_launches_per_step(trace) == 1 and kernel_launches_per_step(trace) == 0
    return holds, ", ".join(f"{call} ×{n:g}" for call, n in launch_calls_per_step(trace).items()) or "no launch"


def launches_a_graph(trace: Trace) -> tuple[bool, str]:
    """A step launches at least one CUDA graph."""
    n = graph_launches_per_step(trace)
    return n >= 1, f"{n:g} cudaGraphLaunch per step"


def copies_on_device(trace: Trace) -> tuple[bool, str]:
    """Some copy op of a step launches device work (e.g. an input copied into a graph's static buffer)."""
    ops = [op for op in trace.step_ops if "copy" in op.name and op.device_events]
    names = sorted({op.name for op in ops})
    return bool(ops), (", ".join(names) + " launch device work" if ops else "no copy op launches work")


# ------------------------------------------------------------------ a training step
def in_backward(op) -> bool:
    """The op runs in the backward pass (:func:`~profiling_guide.analysis.backward.phase_of`)."""
    return phase_of(op) == "backward"


def gemm_flops_by_phase(trace: Trace) -> dict[str, float]:
    """The FLOPs of the GEMM ops that launched device work, forward and backward, over all steps."""
    flops = {"forward": 0.0, "backward": 0.0}
    for op in trace.step_ops:
        if gemm_flops(op) and op.self_device_events:
            flops["backward" if in_backward(op) else "forward"] += gemm_flops(op)
    return flops


def backward_twice_forward(trace: Trace) -> tuple[bool, str]:
    """The backward's GEMM FLOPs are twice the forward's, ±5 % (dX and dW for each forward product)."""
    flops = gemm_flops_by_phase(trace)
    ratio = flops["backward"] / flops["forward"] if flops["forward"] else float("nan")
    forward = flops["forward"] / 1e9 / len(trace.steps)
    return 1.9 <= ratio <= 2.1, f"{forward:,.0f} GFLOP forward per step, ratio {ratio:.2f}"


def fewer_optimizer_kernels_than_parameters(trace: Trace) -> tuple[bool, str]:
    """The optimizer step launches some kernels, but fewer than there are parameter tensors (a fused optimizer)."""
    steps = [op for s in trace.steps for op in s.ops if op.name.startswith("Optimizer.step#")]
    kernels = sum(len(op.device_events) for op in steps) / len(trace.steps)
    # the backward accumulates each parameter's gradient once: one AccumulateGrad per tensor
    parameters = len(trace.ops_named("torch::autograd::AccumulateGrad")) / len(trace.steps)
    return 0 < kernels < parameters, f"{kernels:g} kernels per step for {parameters:g} parameter tensors"


def no_score_matrix(seq: int) -> Predicate:
    """No GEMM takes a ``[seq, seq]`` operand: attention never builds its score matrix through a GEMM."""
    def _predicate(trace: Trace):
        big = [op.name for op in trace.step_ops if gemm_flops(op) and op.input_dims
               and any(d[-2:] == [seq, seq] for d in op.input_dims if isinstance(d, list))]
        attention = sorted({op.name for op in trace.step_ops if "attention" in op.name})
        return not big, f"{len(big)} GEMMs with a [{seq}, {seq}] operand; attention ops: {', '.join(attention)}"
    return _predicate


def gemm_ops_share_above(share: float) -> Predicate:
    """The kernels launched by GEMM ops take more than ``share`` of a trace's device time."""
    def _predicate(trace: Trace):
        kernels = [k for step in trace.steps for k in step.kernels]
        gemm = sum(k.dur_us for k in kernels if k.launch and k.launch.op and k.launch.op.name in GEMM_OPERANDS)
        seen = gemm / sum(k.dur_us for k in kernels)
        return seen > share, f"kernels launched by GEMM ops: {100 * seen:.0f}% of the device time"
    return _predicate


def more_device_time(phase: str, than: str) -> Predicate:
    """In a table of :func:`~profiling_guide.analysis.backward.phase_shares`, ``phase`` takes more device time than ``than``."""
    def _predicate(phases):
        mine, theirs = phases["device_us"].get(phase, 0.0), phases["device_us"].get(than, 0.0)
        return mine > theirs, f"{phase} {mine:,.0f} µs against {than} {theirs:,.0f} µs per step"
    return _predicate


# ------------------------------------------------------------------ numbers in a table row
def below_fraction_of(key: str, fraction: float, reference: float, unit: str) -> Predicate:
    """``data[key]`` is below ``fraction`` of ``reference``; ``seen``: the value against the reference."""
    def _predicate(data: dict):
        return data[key] < fraction * reference, f"{data[key]:.0f} of {reference:.0f} {unit}"
    return _predicate


def less_after(key: str, before: str, after: str, unit: str) -> Predicate:
    """``data[after][key]`` is less than ``data[before][key]`` (one measurement each, no spread)."""
    def _predicate(data: dict):
        was, now = data[before][key], data[after][key]
        return now < was, f"{was:,.0f} {unit} → {now:,.0f} {unit}"
    return _predicate


# ------------------------------------------------------------------ a training step
def median_at_most(name: str, times_floor: float, floor: str) -> Predicate:
    """``data[name]``'s median is at most ``times_floor`` × ``data[floor]``'s (both Spreads)."""
    def _predicate(data: dict[str, Spread]):
        if name not in data:
            return False, f"{name} not measured"
        ratio = data[name].median / data[floor].median
        return ratio <= times_floor, f"{name} {data[name]:.1f} µs = {ratio:.3f}× {floor} {data[floor]:.1f} µs"
    return _predicate


def gemm_work_per_step(n: float) -> Predicate:
    """Each run's GEMMs (a table per run from :func:`~profiling_guide.analysis.training.step_gemms`) add up to
    ``n`` linears' FLOPs."""
    def _predicate(tables: dict):
        done = {name: float(t["gemms"].sum()) for name, t in tables.items()}
        seen = ", ".join(f"{name} {v:g}" for name, v in done.items())
        return all(abs(v - n) < 1e-9 for v in done.values()), f"GEMM FLOPs in linears' units: {seen}"
    return _predicate


def saved_tensors(name: str, count: int, elements: int, dtype: str) -> Predicate:
    """``data[name]`` (the tensors a variant saved for backward) holds ``count`` tensors of ``elements`` elements
    and ``dtype``, whatever their shapes (``[batch, seq, hidden]`` or ``[rows, hidden]``)."""
    def _predicate(data: dict):
        found = [t for t in data.get(name, []) if math.prod(t["shape"]) == elements and t["dtype"] == dtype]
        shapes = ", ".join("×".join(map(str, t["shape"])) for t in data.get(name, [])) or "none"
        return len(found) == count, f"{name} saved {shapes} ({dtype})"
    return _predicate


def at_most_as_much(key: str, name: str, than: str, unit: str = "MB") -> Predicate:
    """``data[name][key] <= data[than][key]`` (one measurement each, no spread)."""
    def _predicate(data: dict):
        a, b = data[name][key], data[than][key]
        return a <= b, f"{name} {a:,.0f} {unit} against {than} {b:,.0f} {unit}"
    return _predicate


# ------------------------------------------------------------------ attribution
def share_at_least(key: str, share: float) -> Predicate:
    """``data[key]`` (a fraction) is at least ``share``."""
    def _predicate(data: dict):
        return data[key] >= share, f"{data[key]:.1%}"
    return _predicate
