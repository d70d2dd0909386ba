"""The report's analysis, read against the H100 recordings and traces of our own making."""

import gzip
import json
import time
from types import SimpleNamespace

import pytest
from conftest import GPUS, H100, recording

from profiling_guide.analysis.pace import verdict
from profiling_guide.analysis.trace_report import (
    analyse,
    gemm_flops,
    kernel_work,
    report_steps,
)
from profiling_guide.errors import GuideError
from profiling_guide.pages.pace_sentences import evidence, headline
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run_record import read_rates
from profiling_guide.trace.run_record import run_record_beside as read_run_record

REFERENCES = H100 / "02_mlp_eager.references.run.json"


def raw_of(name: str) -> dict:
    with gzip.open(recording(name), "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def eager_report(mlp_eager):
    path = recording("02_mlp_eager.eager")
    return analyse(mlp_eager, rates=read_rates(REFERENCES), run_record=read_run_record(path))


def test_the_report_covers_the_three_profiler_steps_and_shows_the_median_one(eager_report, mlp_eager):
    assert [s.number for s in eager_report.steps] == [2, 3, 4]
    durations = {s.number: s.dur_us for s in mlp_eager.steps}
    assert durations[eager_report.chosen_step] == sorted(durations.values())[1]
    assert not eager_report.whole_trace


def test_the_environment_names_the_gpu_and_the_versions(eager_report):
    env = eager_report.environment
    assert env["GPU"] == "NVIDIA H100 80GB HBM3"
    assert env["compute capability"] == "9.0" and env["CUDA runtime"] == "13.0"
    assert env["torch"].startswith("2.11")  # from the run record beside the trace
    # baseTimeNanoseconds + the first event's time: the day the run record says it was made
    assert env["recorded"][:10] == read_run_record(recording("02_mlp_eager.eager"))["date"][:10]


def test_the_eager_mlp_gemms_reach_most_of_the_measured_gemm_rate(eager_report):
    gemms = eager_report.top_kernels[eager_report.top_kernels.kind == "gemm"]
    assert gemms.per_step.sum() == 3
    assert all(0.8 < f < 1.1 for f in gemms.of_reference), gemms[["kernel", "achieved", "of_reference"]]


def test_gelu_and_mul_are_memory_bound_near_the_copy_bandwidth(eager_report):
    pointwise = eager_report.top_kernels[eager_report.top_kernels.kind == "pointwise"]
    assert len(pointwise) == 2
    assert all(s.endswith("TB/s (est.)") for s in pointwise.achieved)
    assert all(0.8 < f < 1.1 for f in pointwise.of_reference)


def test_kernel_shares_add_up_and_launches_are_counted(eager_report, mlp_eager):
    table = eager_report.top_kernels
    assert table.share.sum() == pytest.approx(1.0)
    assert table.total_us.sum() == pytest.approx(sum(ev.dur_us for s in mlp_eager.steps for ev in s.device_events))
    assert table.launches.sum() == sum(len(s.device_events) for s in mlp_eager.steps)


def test_top_ops_count_three_matrix_products_and_their_device_time(eager_report):
    ops = eager_report.top_ops.set_index("op")
    assert ops.loc["aten::mm", "calls_per_step"] == 3
    gemm_and_memsets = eager_report.top_kernels.query("kind in ['gemm', 'memset']").us_per_step.sum()
    assert ops.loc["aten::mm", "device_us"] == pytest.approx(gemm_and_memsets)
    # the record_function label holds all of the step's device work
    assert ops.loc["mlp_fwd", "device_us"] == pytest.approx(eager_report.top_kernels.us_per_step.sum())
    assert ops.loc["mlp_fwd", "annotation"] and ops.loc["aten::t", "device_us"] == 0


def test_memsets_of_cublas_are_listed_with_their_bytes(eager_report):
    memsets = eager_report.memory_ops
    assert list(memsets.kind) == ["memset"] and memsets.per_step[0] == 2
    assert memsets.launched_by[0] == "aten::mm" and memsets.bytes_per_step[0] > 0


def chapter_reports():
    """The report of every chapter recording of both GPUs, with its run record."""
    for folder in GPUS:
        for path in sorted(folder.glob("0*.trace.json.gz")):
            yield path, analyse(Trace.load(path), run_record=read_run_record(path))


@pytest.fixture(scope="module")
def reports():
    return list(chapter_reports())


def test_a_step_paced_by_the_cpu_under_the_profiler_but_not_without_it_says_so(reports):
    # The profiler slows the CPU, not the GPU: where the run record's profiler-off CPU time per step
    # is less than the step's GPU work, a verdict other than "GPU" says the unprofiled run would differ.
    flipped = 0
    for path, report in reports:
        busy = sum(s.device_busy_us for s in report.steps) / len(report.steps)
        unprofiled = (read_run_record(path).get("timings", {}).get("cpu_issue_us") or {}).get("median")
        says = report.pace.gpu_bound_unprofiled
        assert says == bool(report.pace.verdict != "GPU" and unprofiled and unprofiled < busy), path.name
        assert ("Without the profiler" in headline(report.pace)) == says
        if says and report.pace.verdict == "CPU":
            flipped += 1
            overhead = next(f for f in report.findings if f.kind == "profiler overhead")
            assert overhead.level == "warn" and overhead.facts["profiled_us"] > 1.25 * overhead.facts["unprofiled_us"]
    assert flipped  # the recordings hold such a step


def test_a_tiny_linear_is_paced_by_the_cpu(linear_eager):
    report = analyse(linear_eager)
    assert report.pace.verdict == "CPU" and all(s.verdict == "CPU" for s in report.steps)
    assert report.steps[0].busy_share < 0.05


def test_a_step_the_gpu_paces_queues_work_ahead_of_a_busy_gpu(reports):
    # Which runs the GPU paces changes from one recording to the next; in every one of them the GPU
    # ran back to back over its steps (idle under BACK_TO_BACK of their spans together: one step
    # alone may idle more) while the launch→start delay grew along the step.
    from profiling_guide.analysis.pace import BACK_TO_BACK

    gpu_paced = [report for _, report in reports if report.pace.verdict == "GPU"]
    assert gpu_paced
    for report in gpu_paced:
        idle_us = sum(s.gpu_idle_fraction * s.gpu_span_us for s in report.steps)
        assert idle_us < BACK_TO_BACK * sum(s.gpu_span_us for s in report.steps)
        assert report.pace.delay_grows and any("the wait grows" in e for e in evidence(report.pace))


def test_uneven_steps_are_reported_with_the_slowest_step(eager_report):
    uneven = next(f for f in eager_report.findings if f.kind == "uneven steps")
    assert uneven.level == "warn" and uneven.facts["slow"] == 2 and uneven.facts["ratio"] > 1.25


def test_the_verdict_asks_the_queue_before_the_busy_share():
    # back to back with a queue: the GPU, even when only half of the step's window is busy
    assert verdict(0.5, 0.02, 80_000.0, False) == "GPU"
    assert verdict(0.9, 0.3, 10.0, False) == "GPU"
    assert verdict(0.3, 0.4, 12.0, False) == "CPU"
    assert verdict(0.45, 0.55, 11_000.0, False) == "mixed"  # queued work while the GPU idled
    assert verdict(0.6, 0.3, 10.0, False) == "mixed"
    assert verdict(0.0, 0.0, None, False, any_work=False) == "no GPU work"


@pytest.mark.parametrize("name, dims, flops", [
    ("aten::mm", [[8192, 768], [768, 3072]], 2 * 8192 * 768 * 3072),
    ("aten::mm", [[8192, 768], [768, 3072], [8192, 3072]], 2 * 8192 * 768 * 3072),  # out= variant
    ("aten::addmm", [[64], [1024, 32], [32, 64], [], []], 2 * 1024 * 32 * 64),
    ("aten::bmm", [[4, 128, 64], [4, 64, 256]], 2 * 4 * 128 * 64 * 256),
    ("aten::mm", [[8, 3], [4, 5]], None),  # inner dimensions disagree
    ("aten::mm", [], None),
    ("aten::gelu", [[64, 128]], None),
])
def test_gemm_flops_come_from_the_recorded_shapes(name, dims, flops):
    assert gemm_flops(SimpleNamespace(name=name, input_dims=dims)) == flops


def test_a_trace_without_profiler_steps_is_read_as_one_step():
    raw = raw_of("02_mlp_eager.eager")
    raw["traceEvents"] = [ev for ev in raw["traceEvents"] if not str(ev.get("name", "")).startswith("ProfilerStep")]
    trace = Trace(raw, "no-steps")
    assert trace.steps == []
    (step,) = report_steps(trace)
    assert len(step.device_events) == len(trace.device_events)
    report = analyse(trace)
    assert report.whole_trace and report.chosen_step == 0
    assert report.top_kernels.launches.sum() == len(trace.device_events)
    assert any(f.kind == "profiler steps" and f.level == "info" and not f.facts["steps"] for f in report.findings)


def test_kernels_whose_launch_is_missing_and_launches_whose_kernel_is_missing_are_flagged():
    raw = raw_of("02_mlp_eager.eager")
    events = raw["traceEvents"]
    launch = next(ev for ev in events if ev.get("name") == "cuLaunchKernelEx")
    kernel = next(ev for ev in events
                  if ev.get("cat") == "kernel" and ev["args"]["correlation"] != launch["args"]["correlation"])
    orphaned_launch = next(ev for ev in events if ev.get("cat") in ("cuda_runtime", "cuda_driver")
                           and ev["args"].get("correlation") == kernel["args"]["correlation"])
    raw["traceEvents"] = [ev for ev in events if ev is not launch and ev is not kernel]
    report = analyse(Trace(raw, "damaged"))
    found = {f.kind: f for f in report.findings}
    assert found["device work with no launch"].level == "warn" and found["device work with no launch"].facts["orphans"] == 1
    dropped = found["launches with no device work"]
    assert dropped.level == "warn" and dropped.facts["most_common"] == [(orphaned_launch["name"], 1)]


def test_a_cpu_only_trace_says_there_was_no_gpu_work(tmp_path):
    import torch

    from profiling_guide.measure.capture import profile_to_trace

    x = torch.randn(64, 64)
    path = profile_to_trace(lambda: torch.relu(x @ x), tmp_path / "cpu.trace.json.gz", label="cpu_step")
    report = analyse(Trace.load(path))
    assert report.pace.verdict == "no GPU work"
    assert [s.verdict for s in report.steps] == ["no GPU work"] * 3
    assert "aten::mm" in set(report.top_ops.op) and report.top_kernels.empty


def test_rates_are_read_from_a_references_record_and_bad_files_are_one_line(tmp_path):
    values = json.loads(REFERENCES.read_text())["values"]
    assert read_rates(REFERENCES) == {"gemm_tflops": values["gemm_tflops"]["rate"], "copy_tbps": values["copy_tbps"]["rate"]}
    profile_record = tmp_path / "own.run.json"
    profile_record.write_text(json.dumps({"rates": {"gemm_tflops": {"median": 700.0}, "copy_tbps": {"median": 3.1}}}))
    assert read_rates(profile_record) == {"gemm_tflops": 700.0, "copy_tbps": 3.1}
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(GuideError, match="no gemm_tflops"):
        read_rates(empty)
    with pytest.raises(GuideError, match="cannot read"):
        read_rates(tmp_path / "missing.json")


def _synthetic_trace(steps: int, kernels_per_step: int) -> Trace:
    """A trace of ``steps`` steps, each one op launching ``kernels_per_step`` kernels one after another."""
    events, t, corr = [], 0.0, 0
    for number in range(steps):
        step_start = t
        op_start = t + 1
        for _ in range(kernels_per_step):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 2, "dur": 3,
                           "tid": 1, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{corr % 7}", "ts": t + 10, "dur": 4,
                           "tid": 7, "args": {"correlation": corr, "stream": 7}})
            t += 6
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::work", "ts": op_start, "dur": t - op_start + 1,
                       "tid": 1, "args": {}})
        t += 20
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "ts": step_start,
                       "dur": t - step_start, "tid": 1, "args": {}})
    return Trace({"traceEvents": events}, f"synthetic-{steps}")


def test_the_analysis_grows_linearly_with_the_trace():
    from profiling_guide.pages.interactive_timeline import timeline_data

    def seconds(trace):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            analyse(trace)
            timeline_data(trace.steps[0])
            best = min(best, time.perf_counter() - start)
        return best

    small, large = _synthetic_trace(10, 400), _synthetic_trace(40, 400)  # 4× the events
    ratio = seconds(large) / seconds(small)
    assert ratio < 8, f"4× the events took {ratio:.1f}× as long: something in the analysis is not linear"


@pytest.mark.parametrize("op_name, nbytes", [
    ("aten::fill_", 2000.0),  # writes its argument, reads nothing
    ("aten::copy_", 4000.0),  # reads the source, writes the destination
    ("aten::add_", 6000.0),  # reads both, writes the first
])
def test_in_place_ops_count_what_they_write_once(op_name, nbytes):
    sizes = {"aten::fill_": [[1000]], "aten::copy_": [[1000], [1000]], "aten::add_": [[1000], [1000]]}
    dims = sizes[op_name]
    op = SimpleNamespace(name=op_name, annotation=False, input_dims=dims, args={"Input type": ["c10::BFloat16"] * len(dims)},
                         runtime_calls=[SimpleNamespace(device_events=[object()])])
    ev = SimpleNamespace(args={}, kind="kernel", name="k", launch=SimpleNamespace(op=op))
    assert kernel_work(ev, "pointwise") == (None, nbytes)
