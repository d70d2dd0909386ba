"""Our per-kernel device time against two independent sums of the same traces.

1. A plain sum over the JSON (every ``kernel``/``gpu_memcpy``/``gpu_memset``
   event, by name), with none of our code in between.
2. HolisticTraceAnalysis's ``get_gpu_kernel_breakdown`` (``pip install
   traceinsight``), where it is installed. HTA counts only device work whose
   launch it can see, as does the column we compare with; and it rounds
   nanosecond timestamps unless told not to, which we tell it.

One difference is known and checked as such: HTA counts Inductor's launcher,
a CPU op named after its Triton kernel and carrying a ``stream`` argument, as
a GPU kernel of that name; its total for such a kernel exceeds ours by exactly
the launchers' CPU time.
"""

import functools
import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import H100, load_trace

from profiling_guide.analysis.trace_report import (
    device_time_by_name,
    report_steps,
    top_kernels,
)

HTA_SAMPLES = sorted((Path(__file__).parent / "data" / "hta").glob("*.json.gz"))
OURS = sorted(H100.glob("*.trace.json.gz"))
TRACES = HTA_SAMPLES + OURS
# HTA's own use of pandas warns under pandas 3 (inplace=..., chained assignment); that is HTA's to fix.
HTA_WARNINGS = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@functools.cache
def _raw(path: Path) -> dict:
    """The trace's JSON, read once per test process: the tests only read it."""
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _by_name(df) -> dict[str, float]:
    return dict(zip(df["name"], df["total_us"], strict=True))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_device_time_by_name_equals_a_plain_sum_of_the_json(path):
    plain: dict[str, float] = defaultdict(float)
    for ev in _raw(path)["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in DEVICE_CATS:
            plain[ev["name"]] += float(ev["dur"])
    ours = _by_name(device_time_by_name(load_trace(path).device_events))
    assert ours.keys() == plain.keys()
    for name, us in plain.items():
        assert ours[name] == pytest.approx(us, abs=1e-6), name


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_the_reports_kernel_table_covers_all_device_time_of_its_steps(path):
    trace = load_trace(path)
    steps = report_steps(trace)
    table = _by_name(top_kernels(steps, top=None))
    inside = _by_name(device_time_by_name([ev for s in steps for ev in s.device_events]))
    assert table == pytest.approx(inside)


@pytest.fixture(scope="module")
def hta():
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed: pip install -e '.[hta]'")
    from hta.configs.env_options import HTAEnvOptions
    from hta.trace_analysis import TraceAnalysis

    HTAEnvOptions.instance().set_disable_ns_rounding(True)  # compare the recorded times, not floored ones
    return TraceAnalysis


def _hta_kernel_totals(TraceAnalysis, path: Path) -> dict[str, float]:
    analysis = TraceAnalysis(trace_files={0: str(path)}, trace_dir=str(path.parent), include_last_profiler_step=True)
    _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, num_kernels=10**9, duration_ratio=1.0,
                                                   include_memory_kernels=True)
    return kernels.groupby("name")["sum (us)"].sum().to_dict()


def _inductor_launchers_us(path: Path) -> dict[str, float]:
    """CPU time of CPU ops that carry a ``stream`` argument (Inductor's kernel launchers), by name."""
    launchers: dict[str, float] = defaultdict(float)
    for ev in _raw(path)["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") == "cpu_op" and "stream" in (ev.get("args") or {}):
            launchers[ev["name"]] += float(ev["dur"])
    return launchers


@HTA_WARNINGS
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_per_kernel_totals_agree_with_holistic_trace_analysis(hta, path):
    theirs = _hta_kernel_totals(hta, path)
    trace = load_trace(path)
    ours = _by_name(device_time_by_name([ev for ev in trace.device_events if ev.launch is not None]))
    launchers = _inductor_launchers_us(path)
    assert theirs.keys() == ours.keys()
    for name, us in ours.items():
        assert theirs[name] == pytest.approx(us + launchers.get(name, 0.0), abs=1e-3), name


@HTA_WARNINGS
def test_hta_counts_inductors_launcher_op_as_a_kernel(hta):
    path = next(p for p in HTA_SAMPLES if p.name == "triton_example.json.gz")
    theirs = _hta_kernel_totals(hta, path)
    (kernel,) = load_trace(path).kernels
    assert theirs[kernel.name] == pytest.approx(kernel.dur_us + _inductor_launchers_us(path)[kernel.name])
    assert theirs[kernel.name] > 50 * kernel.dur_us  # a 1.8 µs kernel; the launcher took ~96 µs of CPU


# ------------------------------------------------ several ranks: time breakdown and overlap
H100X4 = Path(__file__).resolve().parents[1] / "docs" / "samples" / "h100x4"
RUNS = ("ddp", "ddp_straggler", "fsdp2")
#: Our sweep and HTA's pandas agree to this many µs, and the overlap to this many percentage points
#: (HTA rounds it to two decimals). The timestamps are floats near 4.8e12 µs, each good to about
#: 0.001 µs; summing hundreds of intervals in another order than HTA's moves the last digits.
BREAKDOWN_TOLERANCE_US = 0.1
OVERLAP_TOLERANCE_PCT = 0.006


@pytest.fixture(scope="module")
def hta_runs(hta):
    """HTA's temporal breakdown and comm/comp overlap of every fixture run, all ranks at once."""
    found = {}
    for run in RUNS:
        folder = H100X4 / run
        analysis = hta(trace_files={r: str(folder / f"rank{r}.trace.json.gz") for r in range(4)},
                       trace_dir=str(folder), include_last_profiler_step=True)
        found[run] = (analysis.get_temporal_breakdown(visualize=False).set_index("rank"),
                      analysis.get_comm_comp_overlap(visualize=False).set_index("rank"))
    return found


@HTA_WARNINGS
@pytest.mark.parametrize("run, rank", [(run, rank) for run in RUNS for rank in range(4)])
def test_time_breakdown_and_overlap_agree_with_hta_on_every_rank(hta_runs, run, rank):
    """Our compute, idle and overlap over the whole trace against HTA's, on the same events.

    Definitions, the same on both sides: the span runs from the first to the
    last device event launched inside the profiler's steps (HTA keeps device
    work whose launch it finds among the steps' CPU events; work launched
    before the profiler began recording is left out by both); compute is the
    time with any kernel running that is neither communication (NCCL) nor a
    memset or memcpy; idle is the span minus the time anything runs; HTA's
    non-compute time is the rest (exposed communication, copies and fills
    alone); overlap is the time compute and communication run together over
    the time communication runs. Different on purpose: the report measures
    each step over its own span, where HTA measures one span for the whole
    trace (the gap between two steps is idle there and not here); the
    numbers compared here are over the whole trace, as HTA has them.
    """
    from profiling_guide.analysis.overlap import time_breakdown

    temporal, overlap = hta_runs[run]
    trace = load_trace(H100X4 / run / f"rank{rank}.trace.json.gz")
    ours = time_breakdown([ev for step in trace.steps for ev in step.device_events])
    theirs = temporal.loc[rank]
    assert ours.span_us == pytest.approx(theirs["kernel_time(us)"], abs=BREAKDOWN_TOLERANCE_US)
    assert ours.idle_us == pytest.approx(theirs["idle_time(us)"], abs=BREAKDOWN_TOLERANCE_US)
    assert ours.compute_us == pytest.approx(theirs["compute_time(us)"], abs=BREAKDOWN_TOLERANCE_US)
    assert ours.busy_us - ours.compute_us == pytest.approx(theirs["non_compute_time(us)"],
                                                           abs=BREAKDOWN_TOLERANCE_US)
    assert 100 * ours.overlap_share == pytest.approx(overlap.loc[rank, "comp_comm_overlap_pctg"],
                                                     abs=OVERLAP_TOLERANCE_PCT)


def test_the_per_step_spans_leave_out_only_the_gaps_between_steps():
    from profiling_guide.analysis.overlap import time_breakdown

    trace = load_trace(H100X4 / "ddp" / "rank0.trace.json.gz")
    whole = time_breakdown([ev for step in trace.steps for ev in step.device_events])
    steps = [time_breakdown(step.device_events) for step in trace.steps]
    assert sum(s.busy_us for s in steps) == pytest.approx(whole.busy_us)
    assert sum(s.compute_us for s in steps) == pytest.approx(whole.compute_us)
    assert sum(s.span_us for s in steps) <= whole.span_us
