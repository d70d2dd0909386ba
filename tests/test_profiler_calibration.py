"""The verdict's step without the profiler, against the step timed with the profiler off.

Every chapter recording whose run record timed the profiled loop with the
profiler off (``timings.wall_us_per_call``: the same forward or step, the same
``synchronize`` per call) is re-timed from its trace with the profiler's cost
taken out, calibrated by the record's profiler-off CPU time of the step's
label. That re-timed step must be nearer the measured wall time than the
profiled step is (or within 10 % of it), on every recording, and within 15 % on most of them. CUDA
graph replays stay the furthest off: their few host stretches carry the
profiler's cost of the graph launch, which the calibration spreads thin.
"""

import statistics
from pathlib import Path

import pytest

from profiling_guide.analysis.trace_report import unprofiled_label
from profiling_guide.analysis.verdict import verdict_of
from profiling_guide.pages.recordings import recorded_trace
from profiling_guide.trace.run_record import read_run_record

RECORDINGS = Path(__file__).resolve().parents[1] / "docs" / "recordings"


def _timed(gpu: str) -> list[tuple[str, float, float, float]]:
    """(recording, profiler-off wall µs, re-timed µs without the profiler, profiled µs) per timed recording."""
    rows = []
    for record in sorted((RECORDINGS / gpu).glob("*.run.json")):
        trace_path = record.with_name(record.name.replace(".run.json", ".trace.json.gz"))
        run = read_run_record(record)
        wall = (run.get("timings") or {}).get("wall_us_per_call")
        if not wall or not trace_path.is_file():
            continue
        trace = recorded_trace(trace_path)
        v = verdict_of(trace, trace.steps, unprofiled=unprofiled_label(run))
        if v.verdict is not None:
            rows.append((record.name, wall["median"], 1e3 * v.verdict.step_ms, 1e3 * v.profiled_step_ms))
    return rows


@pytest.mark.parametrize("gpu", ["nvidia-h100-80gb-hbm3", "nvidia-h200"])
def test_the_step_without_the_profiler_is_near_the_step_timed_without_it(gpu):
    rows = _timed(gpu)
    assert len(rows) >= 20, rows
    for name, wall, base, profiled in rows:
        # nearer than the profiled step, or within 10 % where the profiler cost little to begin with
        assert abs(base - wall) < abs(profiled - wall) or abs(base / wall - 1) <= 0.10, (name, wall, base, profiled)
    errors = [abs(base / wall - 1) for _, wall, base, _ in rows]
    assert statistics.median(errors) <= 0.15, sorted(zip(errors, rows))
    assert sum(e <= 0.15 for e in errors) >= len(errors) / 2, sorted(zip(errors, rows))
