"""What any ``torch.profiler`` trace says, as plain data: the analysis behind ``profiling-guide report``.

:func:`analyse` reads a :class:`~profiling_guide.trace.model.Trace` (and, where there
is one, the run record written beside it) and returns a :class:`TraceReport`:

* the **environment** the trace was recorded in (GPU, CUDA versions, ranks);
* the **steps** it found (``ProfilerStep#N``; a trace without them is read as
  one step spanning the whole trace);
* the **top kernels** by device time, decoded, with launch counts and, given
  measured reference rates, the fraction of them each GEMM or memory-bound
  kernel reached;
* the **top CPU ops**, the **memsets and memcpys**;
* **who sets the pace**, CPU or GPU, with the evidence;
* **health findings**: events the profiler dropped or could not place, uneven steps, the
  profiler's own cost.

Everything here is pure arithmetic over the typed events, linear in their
number (one pass or one sort per question), so the report costs little beside
loading the trace. The HTML is :mod:`profiling_guide.report.html`'s job.
"""

from __future__ import annotations

import datetime as _dt
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pandas as pd

from profiling_guide.analysis.attribution import Attribution, attribute
from profiling_guide.analysis.backward import forward_backward, phase_shares
from profiling_guide.analysis.collectives import calls_table, collective_calls
from profiling_guide.analysis.pace import Pace, StepSummary, pace, summarize_step
from profiling_guide.analysis.verdict import Verdict, verdict_of
from profiling_guide.errors import GuideError
from profiling_guide.trace.model import DeviceEvent, Step, Trace
from profiling_guide.trace.run import rank_info
from profiling_guide.trace.run_record import is_number, rates_from_record

#: The aten ops whose ``Input Dims`` give a GEMM's M, K, N: op → (index of A, index of B).
GEMM_OPERANDS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2),
                 "aten::_scaled_mm": (0, 1)}
# Bytes per element of the types torch writes into "Input type".
#: In-place ops that write their first argument without reading it: no extra output to count.
WRITE_ONLY_OPS = {"aten::fill_", "aten::zero_", "aten::copy_"}
_ELEMENT_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "long int": 8, "int": 4,
                  "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1, "c10::Float8_e4m3fn": 1,
                  "c10::Float8_e5m2": 1, "c10::complex<float>": 8}
_LAUNCH_CALLS = re.compile(r"LaunchKernel|GraphLaunch|^cu(da)?Memcpy|^cu(da)?Memset|LaunchCooperative")
UNEVEN_STEPS = 1.25  # slowest / fastest step above this is worth a warning


@dataclass
class Finding:
    """One health finding: ``kind`` names what was looked at, ``level`` is ``"ok"``, ``"info"`` or ``"warn"``,
    and ``facts`` holds its numbers (the report words them: :func:`profiling_guide.report.html.finding_detail`)."""

    kind: str
    level: str
    facts: dict = field(default_factory=dict)


@dataclass
class TraceReport:
    """Everything ``profiling-guide report`` shows, as data."""

    source: str
    environment: dict[str, str]
    steps: list[StepSummary]
    whole_trace: bool  # True when the trace had no ProfilerStep markers and is read as one step
    chosen_step: int
    pace: Pace
    top_kernels: pd.DataFrame
    top_ops: pd.DataFrame
    memory_ops: pd.DataFrame
    findings: list[Finding]
    rates: dict | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: device time per step in forward, backward and optimizer (:func:`~profiling_guide.analysis.backward.phase_shares`)
    phases: pd.DataFrame | None = None
    #: forward op → backward op → kernels (:func:`~profiling_guide.analysis.backward.forward_backward`);
    #: empty where the trace has no backward
    backward: pd.DataFrame | None = None
    #: the collective calls of a rank of a distributed job, by kind (:func:`~profiling_guide.analysis.collectives.calls_table`)
    collectives: pd.DataFrame | None = None
    #: ``(rank, world size)`` from the trace's ``distributedInfo``, for a rank of a job of two or more
    rank: tuple[int, int] | None = None
    #: what makes the step slow, where, and what fixing it would save (:mod:`~profiling_guide.analysis.verdict`)
    verdict: Verdict | None = None
    #: True when the trace had no ProfilerStep markers and each CUDA graph replay is a step (:func:`graph_replay_steps`)
    graph_replays: bool = False
    #: each kernel, memset and memcpy by module and source line (:mod:`~profiling_guide.analysis.attribution`)
    attribution: Attribution | None = None


# ------------------------------------------------------------------- steps
def whole_trace_step(trace: Trace) -> Step:
    """The whole trace as one step (number 0), for traces recorded without a profiler schedule."""
    cpu = [*trace.ops, *trace.runtime_calls]
    everything = [*cpu, *trace.device_events]
    if not everything:
        raise GuideError(f"{trace.source} holds no CPU ops, runtime calls or device events to report on")
    start = min(e.start_us for e in everything)
    end = max(e.end_us for e in (cpu or everything))
    ops = [op for op in trace.ops if not op.name.startswith("ProfilerStep#")]
    return Step(0, start, end, ops, list(trace.runtime_calls), list(trace.device_events))


GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
#: Share of a trace's device time CUDA graph replays must hold for each replay to be read as a step.
REPLAYED_SHARE = 0.9


def graph_replay_steps(trace: Trace) -> list[Step]:
    """One step per CUDA graph replay, for a trace without ProfilerStep markers whose device work is replays.

    A graph's capture runs no device work, and what ran before the first
    replay (the warm-up, the capture) is no step: read as one step with its
    replays, the trace would count that time as the GPU idling. A replay's
    step runs from its ``cudaGraphLaunch`` to the next one's (the last, as
    long as the median of the others) and holds the work it replayed. Empty
    (not replays) where there are fewer than two launches or they replayed
    less than :data:`REPLAYED_SHARE` of the device time.
    """
    launches = [c for c in trace.runtime_calls if c.name.startswith(GRAPH_LAUNCHES) and c.device_events]
    total = sum(ev.dur_us for ev in trace.device_events)
    replayed = sum(ev.dur_us for c in launches for ev in c.device_events)
    if len(launches) < 2 or not total or replayed < REPLAYED_SHARE * total:
        return []
    spans = [b.start_us - a.start_us for a, b in zip(launches, launches[1:])]  # noqa: B905 (neighbouring launches: one pair fewer)
    ends = [b.start_us for b in launches[1:]]
    ends.append(max(launches[-1].end_us, launches[-1].start_us + sorted(spans)[len(spans) // 2]))
    steps = [Step(i + 1, call.start_us, end) for i, (call, end) in enumerate(zip(launches, ends))]  # noqa: B905 (one end per launch, built just above)
    starts = [s.start_us for s in steps]

    def step_at(t: float) -> Step | None:
        i = bisect_right(starts, t) - 1
        return steps[i] if i >= 0 and t < steps[i].end_us else None

    for op in trace.ops:
        s = step_at(op.start_us)
        if s is not None:
            s.ops.append(op)
    for call in trace.runtime_calls:
        s = step_at(call.start_us)
        if s is not None:
            s.runtime_calls.append(call)
            s.device_events.extend(call.device_events)
    return steps


def report_steps(trace: Trace) -> list[Step]:
    """The trace's profiler steps; without them its CUDA graph replays (:func:`graph_replay_steps`), else the
    whole trace as one step."""
    if trace.steps:
        return list(trace.steps)
    return graph_replay_steps(trace) or [whole_trace_step(trace)]


# ----------------------------------------------------- work of one kernel
def _dims(value) -> list[int] | None:
    return value if isinstance(value, list) and value and all(isinstance(d, int) for d in value) else None


def gemm_shape(op) -> tuple[int, int, int, int] | None:
    """``(batch, M, K, N)`` of a GEMM op from its recorded shapes (batch 1 but for ``bmm``), else None."""
    where = GEMM_OPERANDS.get(op.name)
    dims = op.input_dims
    if where is None or len(dims) <= max(where):
        return None
    a, b = _dims(dims[where[0]]), _dims(dims[where[1]])
    if a is None or b is None or len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2]:
        return None
    return (a[0] if len(a) == 3 else 1), a[-2], a[-1], b[-1]


def gemm_flops(op) -> float | None:
    """FLOPs of a GEMM op from its recorded shapes (``2·M·K·N``, times the batch for ``bmm``), else None."""
    shape = gemm_shape(op)
    if shape is None:
        return None
    batch, m, k, n = shape
    return 2.0 * batch * m * k * n


def _tensor_bytes(op) -> list[int]:
    types = op.args.get("Input type") or []
    sizes = []
    for dims, kind in zip(op.input_dims, types, strict=False):  # a trace may list fewer types
        shape = _dims(dims)
        if shape is not None and kind in _ELEMENT_BYTES:
            count = 1
            for d in shape:
                count *= d
            sizes.append(count * _ELEMENT_BYTES[kind])
    return sizes


def _gemm_op(ev: DeviceEvent):
    op = ev.launch.op if ev.launch is not None else None
    for _ in range(3):  # the GEMM op launches directly, or through a thin wrapper
        if op is None or op.name in GEMM_OPERANDS:
            return op
        op = op.parent
    return None


def _launched_only_one(op) -> bool:
    # Stops at the second piece of work: a foreach op launching hundreds of kernels stays linear.
    count = 0
    for call in op.runtime_calls:
        count += len(call.device_events)
        if count > 1:
            return False
    return count == 1


def kernel_work(ev: DeviceEvent, kind: str) -> tuple[float | None, float | None]:
    """``(flops, bytes)`` one device event did, where the trace says so; ``(None, None)`` otherwise.

    * GEMM kernels: FLOPs from the launching ``aten::mm``/``addmm``/``bmm``
      op's ``Input Dims`` (recorded with ``record_shapes=True``).
    * Device-to-device copies: the bytes the profiler recorded (a copy reads
      and writes each byte, so twice its size). Memsets are left out: they
      are a few bytes each, too short to time a rate.
    * Pointwise and reduction kernels whose op launched only them: an
      estimate, every tensor argument read once, plus, for pointwise
      kernels, one output the size of the largest argument; for ops that
      only write their first argument (``fill_``, ``zero_``, ``copy_``),
      that argument is the output, written once and never read.
    """
    if kind == "gemm":
        op = _gemm_op(ev)
        return (gemm_flops(op) if op is not None else None), None
    nbytes = ev.args.get("bytes")
    if ev.kind == "memcpy" and isinstance(nbytes, (int, float)) and "DtoD" in ev.name:
        return None, 2.0 * nbytes
    if kind in ("pointwise", "reduction") and ev.launch is not None and ev.launch.op is not None:
        op = ev.launch.op
        if op.annotation or not _launched_only_one(op):
            return None, None
        sizes = _tensor_bytes(op)
        if sizes:
            output = max(sizes) if kind == "pointwise" and op.name not in WRITE_ONLY_OPS else 0
            return None, float(sum(sizes) + output)
    return None, None


# ---------------------------------------------------------------- tables
def device_time_by_name(events) -> pd.DataFrame:
    """Per device event name: launches and summed device µs, largest first (the HTA cross-check reads this)."""
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for ev in events:
        row = totals[ev.name]
        row[0] += 1
        row[1] += ev.dur_us
    df = pd.DataFrame([(name, n, us) for name, (n, us) in totals.items()], columns=["name", "launches", "total_us"])
    return df.sort_values("total_us", ascending=False, ignore_index=True)


def top_kernels(steps: list[Step], *, rates: dict | None = None, top: int | None = 20) -> pd.DataFrame:
    """Device work by total time over ``steps``: decoded name, launches, µs, share, and achieved rate.

    With ``rates`` (``{"gemm_tflops": ..., "copy_tbps": ...}``, measured on
    the same GPU), ``achieved`` and ``of_reference`` say how close each kernel
    came: summed FLOPs (or bytes) over the summed time of the launches whose
    work is known (:func:`kernel_work`).
    """
    n = max(len(steps), 1)
    groups: dict[str, dict] = {}
    for step in steps:
        for ev in step.device_events:
            g = groups.get(ev.name)
            if g is None:
                k = ev.decoded
                g = groups[ev.name] = {"k": k, "events": 0, "us": 0.0, "flops": 0.0, "flops_us": 0.0,
                                       "bytes": 0.0, "bytes_us": 0.0, "by": Counter()}
            g["events"] += 1
            g["us"] += ev.dur_us
            op = ev.launch.op if ev.launch is not None else None
            g["by"][op.name if op is not None else "?"] += 1
            flops, nbytes = kernel_work(ev, g["k"].kind)
            if flops:
                g["flops"] += flops
                g["flops_us"] += ev.dur_us
            if nbytes:
                g["bytes"] += nbytes
                g["bytes_us"] += ev.dur_us
    total_us = sum(g["us"] for g in groups.values()) or 1.0
    rows = []
    for name, g in groups.items():
        k = g["k"]
        achieved, of_reference = "", float("nan")
        if g["flops_us"]:
            tflops = g["flops"] / g["flops_us"] / 1e6
            achieved = f"{tflops:,.1f} TFLOP/s"
            if rates and rates.get("gemm_tflops"):
                of_reference = tflops / rates["gemm_tflops"]
        elif g["bytes_us"]:
            tbps = g["bytes"] / g["bytes_us"] / 1e6
            achieved = f"{tbps:,.2f} TB/s" + ("" if k.kind == "memcpy" else " (est.)")
            if rates and rates.get("copy_tbps"):
                of_reference = tbps / rates["copy_tbps"]
        rows.append({
            "kernel": k.short, "kind": k.kind, "library": k.library, "launches": g["events"],
            "per_step": g["events"] / n, "total_us": g["us"], "us_per_step": g["us"] / n,
            "mean_us": g["us"] / g["events"], "share": g["us"] / total_us,
            "launched_by": g["by"].most_common(1)[0][0], "achieved": achieved, "of_reference": of_reference,
            "name": name,
        })
    columns = ["kernel", "kind", "library", "launches", "per_step", "total_us", "us_per_step", "mean_us", "share",
               "launched_by", "achieved", "of_reference", "name"]
    df = pd.DataFrame(rows, columns=columns).sort_values("total_us", ascending=False, ignore_index=True)
    return df.head(top) if top else df


def top_ops(steps: list[Step], *, top: int | None = 20) -> pd.DataFrame:
    """CPU ops by self CPU time per step, with their total CPU time and the device time they launched.

    *Self* excludes nested ops. Device time counts the work launched by the op
    and everything nested in it; it is summed bottom-up in one pass, children
    before parents.
    """
    n = max(len(steps), 1)
    rows: dict[str, list] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0, False])
    for step in steps:
        below: dict[int, float] = defaultdict(float)  # id(op) → device µs launched by its descendants
        for op in reversed(step.ops):  # sorted by start: a child always comes after its parent
            own = sum(ev.dur_us for call in op.runtime_calls for ev in call.device_events)
            device = own + below[id(op)]
            if op.parent is not None:
                below[id(op.parent)] += device
            row = rows[op.name]
            row[0] += 1
            row[1] += op.dur_us - sum(c.dur_us for c in op.children)
            row[2] += op.dur_us
            row[3] += device
            row[4] += sum(1 for call in op.runtime_calls if call.device_events)
            row[5] = op.annotation
    df = pd.DataFrame(
        [(name, calls / n, self_us / n, total / n, device / n, launches / n, note)
         for name, (calls, self_us, total, device, launches, note) in rows.items()],
        columns=["op", "calls_per_step", "self_cpu_us", "cpu_total_us", "device_us", "launches_per_step",
                 "annotation"],
    ).sort_values("self_cpu_us", ascending=False, ignore_index=True)
    return df.head(top) if top else df


def memory_ops(steps: list[Step]) -> pd.DataFrame:
    """Memsets and memcpys per step: count, bytes, µs, bandwidth, and who asked for them."""
    n = max(len(steps), 1)
    groups: dict[str, dict] = {}
    for step in steps:
        for ev in step.device_events:
            if ev.kind not in ("memset", "memcpy"):
                continue
            g = groups.setdefault(ev.name, {"kind": ev.kind, "count": 0, "bytes": 0.0, "us": 0.0, "by": Counter(),
                                            "via": Counter()})
            g["count"] += 1
            g["bytes"] += float(ev.args.get("bytes") or 0)
            g["us"] += ev.dur_us
            g["by"][ev.launch.op.name if ev.launch is not None and ev.launch.op is not None else "?"] += 1
            g["via"][ev.launch.name if ev.launch is not None else "?"] += 1
    rows = [{
        "name": name, "kind": g["kind"], "per_step": g["count"] / n, "bytes_per_step": g["bytes"] / n,
        "us_per_step": g["us"] / n, "gb_per_s": g["bytes"] / g["us"] / 1e3 if g["us"] else float("nan"),
        "launched_by": g["by"].most_common(1)[0][0], "via": g["via"].most_common(1)[0][0],
    } for name, g in groups.items()]
    return pd.DataFrame(rows, columns=["name", "kind", "per_step", "bytes_per_step", "us_per_step", "gb_per_s",
                                       "launched_by", "via"]).sort_values("us_per_step", ascending=False,
                                                                          ignore_index=True)


# ------------------------------------------------------------ environment
# The run record's "versions" keys, as the report labels them.
_VERSION_LABELS = {"torch": "torch", "cuda": "CUDA (torch built for)", "cublas": "cuBLAS", "triton": "Triton",
                   "python": "Python", "transformers": "transformers"}


def environment(trace: Trace, run_record: dict | None = None) -> dict[str, str]:
    """The recording's GPU and versions, from the trace's top-level fields and the run record if any."""
    meta, env = trace.metadata, {}
    env.update(_gpu_fields(meta, run_record))
    env.update(_runtime_versions(meta))
    for name, version in ((run_record or {}).get("versions") or {}).items():
        if version:
            env[_VERSION_LABELS.get(name, name)] = str(version)
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and dist:
        env["distributed"] = ", ".join(f"{k} {dist[k]}" for k in ("backend", "rank", "world_size", "nccl_version")
                                       if k in dist)
    options = [k for k in ("record_shapes", "profile_memory", "with_stack", "with_flops") if meta.get(k)]
    if options:
        env["profiler options"] = ", ".join(options)
    date = _recorded_at(trace) or (str(run_record["date"]) if run_record and run_record.get("date") else None)
    if date:
        env["recorded"] = date
    return env


def _gpu_fields(meta: dict, run_record: dict | None) -> dict[str, str]:
    """The first GPU's name (and how many are visible), memory, compute capability and multiprocessors."""
    devices = [d for d in meta.get("deviceProperties") or [] if isinstance(d, dict)]
    if not devices:
        if run_record and isinstance(run_record.get("gpu"), dict):
            return {"GPU": str(run_record["gpu"].get("name", "?"))}
        return {}
    d = devices[0]
    env = {"GPU": str(d.get("name", "?")) + (f" (×{len(devices)} visible)" if len(devices) > 1 else "")}
    if is_number(d.get("totalGlobalMem")) and d["totalGlobalMem"] > 0:
        env["GPU memory"] = f"{d['totalGlobalMem'] / 2**30:.1f} GiB"
    if "computeMajor" in d:
        env["compute capability"] = f"{d['computeMajor']}.{d.get('computeMinor', 0)}"
    if d.get("numSms"):
        env["multiprocessors"] = str(d["numSms"])
    return env


def _runtime_versions(meta: dict) -> dict[str, str]:
    """The CUDA (or HIP) runtime and driver and the CUPTI version the trace states."""
    env = {}
    for key, label in (("cuda_runtime_version", "CUDA runtime"), ("cuda_driver_version", "CUDA driver"),
                       ("hip_runtime_version", "HIP runtime"), ("hip_driver_version", "HIP driver")):
        if isinstance(meta.get(key), int):
            env[label] = f"{meta[key] // 1000}.{meta[key] % 1000 // 10}"
    if meta.get("cupti_version"):
        env["CUPTI"] = str(meta["cupti_version"])
    return env


def _recorded_at(trace: Trace) -> str | None:
    # Event times are µs after baseTimeNanoseconds, where the trace writes it.
    base = trace.metadata.get("baseTimeNanoseconds")
    events = trace.ops or trace.device_events
    if not is_number(base) or not events:
        return None
    try:
        seconds = base / 1e9 + events[0].start_us / 1e6
        return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return None


# ------------------------------------------------------------------ health
def health_findings(trace: Trace, steps: list[Step], summaries: list[StepSummary],
                    run_record: dict | None = None) -> list[Finding]:
    """What in the trace is missing, out of place or uneven: one :class:`Finding` per kind that applies."""
    found = [_profiler_steps(trace, steps), _device_work(trace), _before_window(trace), _dropped_launches(trace),
             _clocks_disagree(trace), _outside_steps(trace), _uneven_steps(summaries),
             _profiler_overhead(steps, run_record), _pageable_copies(steps)]
    return [f for f in found if f is not None]


def _profiler_steps(trace: Trace, steps: list[Step]) -> Finding:
    if trace.steps:
        return Finding("profiler steps", "ok", {"steps": [s.number for s in trace.steps]})
    return Finding("profiler steps", "info", {"steps": [], "replays": len(steps) if len(steps) > 1 else 0})


def _device_work(trace: Trace) -> Finding:
    """Is every device event linked to the runtime call that launched it?"""
    if not trace.device_events:
        return Finding("device work", "info")
    orphans = [ev for ev in trace.device_events if ev.launch is None and not ev.before_window]
    if orphans:
        return Finding("device work with no launch", "warn",
                       {"orphans": len(orphans), "events": len(trace.device_events),
                        "no_correlation": sum(1 for ev in orphans if ev.correlation is None)})
    linked = sum(1 for ev in trace.device_events if not ev.before_window)
    return Finding("device work with no launch", "ok", {"linked": linked})


def _before_window(trace: Trace) -> Finding | None:
    early = [ev for ev in trace.device_events if ev.before_window]
    if not early:
        return None
    return Finding("device work launched before the profiled window", "info",
                   {"events": len(early), "us": sum(ev.dur_us for ev in early)})


def _dropped_launches(trace: Trace) -> Finding | None:
    dropped = [c for c in trace.runtime_calls if _LAUNCH_CALLS.search(c.name) and not c.device_events]
    if not dropped:
        return None
    return Finding("launches with no device work", "warn",
                   {"calls": len(dropped), "most_common": Counter(c.name for c in dropped).most_common(3)})


def _clocks_disagree(trace: Trace) -> Finding | None:
    early = sum(1 for ev in trace.device_events if ev.launch is not None and ev.start_us < ev.launch.start_us - 1)
    return Finding("device work before its launch", "warn", {"events": early}) if early else None


def _outside_steps(trace: Trace) -> Finding | None:
    if not trace.steps:
        return None
    ops = sum(1 for op in trace.ops if op.step is None and not op.name.startswith("ProfilerStep#"))
    device = sum(1 for ev in trace.device_events if ev.step is None)
    return Finding("events outside any step", "info" if ops or device else "ok", {"ops": ops, "device_events": device})


def _uneven_steps(summaries: list[StepSummary]) -> Finding | None:
    if len(summaries) < 2:
        return None
    slow = max(summaries, key=lambda s: s.cpu_us)
    fast = min(summaries, key=lambda s: s.cpu_us)
    ratio = slow.cpu_us / fast.cpu_us if fast.cpu_us > 0 else float("inf")
    return Finding("uneven steps", "warn" if ratio > UNEVEN_STEPS else "ok",
                   {"ratio": ratio, "slow": slow.number, "slow_us": slow.cpu_us, "fast": fast.number,
                    "fast_us": fast.cpu_us})


def _unprofiled_cpu_us(run_record: dict | None) -> float | None:
    timings = (run_record or {}).get("timings") or {}
    # a spread; or the median of the older records of tests/data/gpu_samples (the site's sample reports)
    value = timings.get("cpu_issue_us", timings.get("cpu_us_median"))
    value = value.get("median") if isinstance(value, dict) else value
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _profiler_overhead(steps: list[Step], run_record: dict | None) -> Finding:
    """The CPU time of the labelled step under the profiler against the run record's, without it."""
    n = max(len(steps), 1)
    ops = sum(1 for s in steps for op in s.ops if not op.annotation) / n
    label = (run_record or {}).get("label")
    unprofiled = _unprofiled_cpu_us(run_record)
    profiled = [op.dur_us for s in steps for op in s.ops if op.annotation and op.name == label] if label else []
    if not (profiled and unprofiled):
        return Finding("profiler overhead", "info", {"ops_per_step": ops})
    mean = sum(profiled) / len(profiled)
    return Finding("profiler overhead", "warn" if mean - unprofiled > 0.25 * unprofiled else "info",
                   {"ops_per_step": ops, "label": label, "profiled_us": mean, "unprofiled_us": unprofiled})


def _pageable_copies(steps: list[Step]) -> Finding | None:
    pageable = sum(1 for s in steps for ev in s.device_events if ev.kind == "memcpy" and "Pageable" in ev.name)
    return Finding("pageable host copies", "warn", {"per_step": pageable / max(len(steps), 1)}) if pageable else None


# ---------------------------------------------------------------- the report
def choose_step(steps: list[Step], number: int | None) -> Step:
    """Step ``number``, or by default the step of median CPU duration (a typical one)."""
    if number is not None:
        for s in steps:
            if s.number == number:
                return s
        raise GuideError(f"there is no step {number}: the trace has steps {', '.join(str(s.number) for s in steps)}")
    ordered = sorted(steps, key=lambda s: (s.dur_us, s.number))
    return ordered[(len(ordered) - 1) // 2]


def analyse(trace: Trace, *, step: int | None = None, rates: dict | None = None, run_record: dict | None = None,
            top: int = 20, kernel_information: list | None = None) -> TraceReport:
    """The whole report of ``trace`` as data (see the module docstring).

    ``step`` picks the step the timeline shows (default: the median one);
    ``rates`` are measured reference rates for achieved fractions;
    ``run_record`` is the trace's ``.run.json`` (:func:`read_run_record`),
    which adds versions and the unprofiled CPU time to the report;
    ``kernel_information`` is what inductor recorded each compiled kernel
    fuses (:func:`~profiling_guide.trace.kernel_information.read_kernel_information`),
    for the attribution of compiled kernels to source lines.
    """
    steps = report_steps(trace)
    attribution = attribute(trace, steps, kernel_information)
    chosen = choose_step(steps, step)
    summaries = [summarize_step(s) for s in steps]
    who = rank_info(trace.metadata)
    if rates is None and run_record is not None:
        rates = rates_from_record(run_record)
    return TraceReport(
        source=trace.source,
        environment=environment(trace, run_record),
        steps=summaries,
        whole_trace=not trace.steps and len(steps) == 1,
        graph_replays=not trace.steps and len(steps) > 1,
        chosen_step=chosen.number,
        pace=pace(summaries, unprofiled_cpu_us=_unprofiled_cpu_us(run_record),
                  ranks=(who.rank, who.world_size) if who.distributed else None),
        top_kernels=top_kernels(steps, rates=rates, top=top),
        top_ops=top_ops(steps, top=top),
        memory_ops=memory_ops(steps),
        findings=health_findings(trace, steps, summaries, run_record),
        rates=rates,
        counts={"cpu_ops": len(trace.ops), "runtime_calls": len(trace.runtime_calls),
                "device_events": len(trace.device_events), "backward_links": len(trace.backward_links)},
        # the attribution's phases: a replayed kernel's is its captured launch's (else the same as phase_shares)
        phases=attribution.phase_table() if attribution.device_us else phase_shares(steps),
        backward=forward_backward(trace, steps, top=top),
        collectives=calls_table(collective_calls(trace, who.rank if who.rank is not None else 0), len(trace.steps))
        if trace.steps else None,
        rank=(who.rank, who.world_size) if who.distributed else None,
        verdict=verdict_of(trace, steps, rank=who.rank if who.distributed else None,
                           unprofiled=unprofiled_label(run_record)),
        attribution=attribution,
    )


def unprofiled_label(run_record: dict | None) -> dict | None:
    """``{"label", "cpu_us"}``: the run record's profiler-off CPU time of the label that spans its step."""
    label, cpu = (run_record or {}).get("label"), _unprofiled_cpu_us(run_record)
    return {"label": label, "cpu_us": cpu} if label and cpu else None
