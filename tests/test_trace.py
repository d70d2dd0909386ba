"""The trace model, read against real H100 recordings."""

import gzip
import json

import pytest

from profiling_guide.errors import GuideError
from profiling_guide.trace.model import Trace


def test_steps_are_the_three_active_profiler_steps(linear_eager):
    # schedule(wait=1, warmup=1, active=3): steps 0 and 1 are not recorded
    assert [s.number for s in linear_eager.steps] == [2, 3, 4]


def test_the_eager_linear_launches_one_kernel_per_step(linear_eager):
    assert linear_eager.kernels_per_step() == 1
    assert all(len(s.kernels) == 1 for s in linear_eager.steps)


def test_every_kernel_is_linked_to_the_runtime_call_that_launched_it(mlp_eager):
    for ev in mlp_eager.device_events:
        assert ev.launch is not None, ev.name
        assert ev.launch.correlation == ev.correlation
        assert ev in ev.launch.device_events
        # the GPU cannot start work before the CPU asked for it
        assert ev.start_us >= ev.launch.start_us


def test_linear_nests_t_and_addmm_and_only_addmm_launches(linear_eager):
    linear = linear_eager.ops_named("aten::linear")[0]
    assert [c.name for c in linear.children] == ["aten::t", "aten::addmm"]
    t, addmm = linear.children
    assert t.device_events == [] and t.depth == linear.depth + 1
    assert [ev.kind for ev in addmm.self_device_events] == ["kernel"]
    assert addmm.runtime_calls[0].op is addmm


def test_aten_t_records_the_weight_shape_and_strides(linear_eager):
    t = linear_eager.ops_named("aten::t")[0]
    assert t.input_dims == [[64, 32]]
    assert t.input_strides == [[32, 1]]


def test_the_eager_mlp_launches_five_kernels_and_two_memsets_per_step(mlp_eager):
    for step in mlp_eager.steps:
        kinds = [ev.kind for ev in step.device_events]
        assert kinds.count("kernel") == 5
        assert kinds.count("memset") == 2
    assert mlp_eager.kernels_per_step() == 5


def test_metadata_only_ops_of_the_eager_mlp_launch_nothing(mlp_eager):
    for name in ("aten::t", "aten::transpose", "aten::view", "aten::reshape", "aten::as_strided", "aten::_unsafe_view"):
        assert name in mlp_eager.no_device_ops
    for name in ("aten::mm", "aten::gelu", "aten::mul"):
        assert name not in mlp_eager.no_device_ops


def test_runtime_calls_per_step_count_each_launch(mlp_eager):
    calls = mlp_eager.runtime_calls_per_step()
    launches = sum(n for name, n in calls.items() if "Launch" in name or "Memset" in name)
    assert launches == 7  # five kernels and two memsets


def test_cpu_time_per_step_reads_the_label(linear_eager):
    per_label = linear_eager.cpu_us_per_step("linear_fwd")
    assert 0 < per_label <= linear_eager.cpu_us_per_step()
    with pytest.raises(GuideError, match="no 'nope'"):
        linear_eager.cpu_us_per_step("nope")


def test_a_missing_trace_is_a_one_line_error(tmp_path):
    with pytest.raises(GuideError) as err:
        Trace.load(tmp_path / "absent.json.gz")
    assert "no trace file" in str(err.value) and "\n" not in str(err.value)


def test_a_truncated_gzip_trace_is_a_one_line_error(tmp_path, linear_eager):
    data = open(linear_eager.source, "rb").read()
    bad = tmp_path / "cut.trace.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(GuideError, match="not a complete gzip file") as err:
        Trace.load(bad)
    assert "\n" not in str(err.value)


def test_a_truncated_json_trace_is_a_one_line_error(tmp_path):
    bad = tmp_path / "cut.json"
    bad.write_text('{"traceEvents": [{"ph": "X", ')
    with pytest.raises(GuideError, match="not a JSON trace"):
        Trace.load(bad)


def test_json_that_is_not_a_trace_is_refused(tmp_path):
    other = tmp_path / "other.json.gz"
    with gzip.open(other, "wt") as f:
        json.dump({"hello": 1}, f)
    with pytest.raises(GuideError, match="not a Chrome trace"):
        Trace.load(other)
