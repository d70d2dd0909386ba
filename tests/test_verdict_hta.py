"""The verdict beside HolisticTraceAnalysis on the corpus's single-GPU cases (H200): where they agree, and why not.

HTA answers with two breakdowns: the GPU's idle time (``host_wait``,
``kernel_wait``, ``other``) and its critical path (``cpu_bound``,
``gpu_compute_bound``, ``gpu_kernel_kernel_overhead``,
``gpu_kernel_launch_overhead``). The report's page (``docs/report.md``,
"Beside HTA") says what this test holds:

* extra GPU work: both put the step on GPU compute;
* launch overhead: both put it on the host (HTA: ``cpu_bound``);
* a host sync, a pageable copy, the allocator: HTA's vocabulary has no such
  cause, and its idle time calls the GPU's wait ``host_wait`` in all three;
  the verdict names the call and what removing it saves;
* a host stall before the step: HTA's critical path starts at the step's first
  recorded op, so the stall is not on it, and its largest bucket is GPU
  compute; the verdict's path runs through the untraced host time;
* CPU ops on the training thread that launch nothing (a DataLoader's
  transforms): ``cpu_bound`` in HTA, its word for launch overhead too; the
  verdict calls them a host gap.

The table prints with ``pytest -s``.
"""

import json
import logging
import warnings
from pathlib import Path

import pytest

from profiling_guide.analysis.verdict import verdict_of
from profiling_guide.trace.model import Trace

CORPUS = Path(__file__).parent / "data" / "corpus" / "h200"
CASES = sorted(p.name.removesuffix(".label.json") for p in CORPUS.glob("*.label.json"))


@pytest.fixture(scope="module")
def hta():
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed: pip install -e '.[hta]'")
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis


def _hta(TraceAnalysis, path: Path) -> tuple[dict, dict]:
    """HTA's idle-time shares and its critical path's µs per bucket, for rank 0 of one trace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            analysis = TraceAnalysis(trace_files={0: str(path)}, trace_dir=str(path.parent),
                                     include_last_profiler_step=True)
            idle, _ = analysis.get_idle_time_breakdown(ranks=[0], visualize=False)
            result = analysis.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=None)
        finally:
            logging.disable(logging.NOTSET)
    idle = idle.groupby("idle_category")["idle_time"].sum()
    shares = {k: float(v) / float(idle.sum()) for k, v in idle.items()}
    path_us = {}
    if result is not None and result[1]:
        breakdown = result[0].get_critical_path_breakdown()
        path_us = {k: float(v) for k, v in breakdown.groupby("bound_by")["duration"].sum().items() if k}
    return shares, path_us


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_beside_hta(hta, case):
    path = CORPUS / f"{case}.trace.json.gz"
    label = json.loads((CORPUS / f"{case}.label.json").read_text())
    trace = Trace.load(path)
    ours = verdict_of(trace, trace.steps).verdict
    idle, cp = _hta(hta, path)
    largest = max(cp, key=cp.get) if cp else None
    print(f"\n{case:22} ours {ours.cause.value:16} | HTA idle {', '.join(f'{k} {v:.0%}' for k, v in idle.items())}"
          f" | HTA path {', '.join(f'{k} {v / 1e3:.2f} ms' for k, v in cp.items())}", end="")
    assert ours.cause.value == label["cause"]
    assert not {"host_sync", "memcpy", "allocator", "host_gap"} & set(cp), "HTA has none of these causes"
    if label["cause"] == "gpu_compute":
        assert largest == "gpu_compute_bound" and idle.get("kernel_wait", 0) > 0.5
    elif label["cause"] == "launch_overhead":
        assert largest == "cpu_bound" and idle.get("host_wait", 0) > 0.9
    elif label["cause"] in ("host_sync", "memcpy", "allocator"):
        assert idle.get("host_wait", 0) > 0.5, "HTA calls the GPU's wait on the call a wait for the host"
    elif label["cause"] == "host_gap" and ours.where.op is not None:
        # CPU ops that launch nothing (a DataLoader's transforms on the training thread): HTA's path holds them,
        # as cpu_bound, its word for launch overhead too
        assert largest == "cpu_bound" and idle.get("host_wait", 0) > 0.5
    elif label["cause"] == "host_gap":
        # the stall is untraced host time before the step's first op: not on HTA's path
        assert largest == "gpu_compute_bound" and sum(cp.values()) < ours.step_ms * 1e3 - 0.5 * ours.saving_ms * 1e3
