"""The predicates behind the chapters' predictions, each against real recorded traces: where it holds and where it must not."""

import pytest

from conftest import GPUS
from profiling_guide.analysis import predicates
from profiling_guide.analysis.trace_report import analyse
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace


def load(folder, name):
    return Trace.load(folder / f"{name}.trace.json.gz")


@pytest.fixture(scope="module", params=GPUS, ids=lambda p: p.name)
def graphs(request):
    """Chapter 7's MLP at 16 tokens: eager, replayed from a CUDA graph, and under reduce-overhead."""
    return {v: load(request.param, f"07_cuda_graphs.mlp.{v}") for v in ("eager", "replay", "reduce-overhead")}


@pytest.fixture(scope="module", params=GPUS, ids=lambda p: p.name)
def gpt2(request):
    return load(request.param, "08_own_model.train")


def holds(predicate, data):
    verdict, seen = predicate(data)
    assert isinstance(seen, str) and seen
    return verdict


def test_the_eager_mlp_calls_three_linears_and_runs_three_gemms_and_the_compiled_one_none_of_its_linears(
        mlp_eager, mlp_compiled):
    assert predicates.ops_per_step("aten::linear", 3)(mlp_eager) == (True, "3 per step")
    assert not holds(predicates.ops_per_step("aten::linear", 3), mlp_compiled)
    assert holds(predicates.gemms_per_step(3), mlp_eager)
    assert not holds(predicates.gemms_per_step(2), mlp_eager)
    assert holds(predicates.bare_mm, mlp_compiled) and not holds(predicates.bare_mm, mlp_eager)


def test_linear_dispatches_to_addmm_with_a_bias_and_to_matmul_without(linear_eager, mlp_eager):
    assert holds(predicates.dispatches_to("aten::linear", "aten::addmm"), linear_eager)
    assert not holds(predicates.dispatches_to("aten::linear", "aten::addmm"), mlp_eager)


def test_compile_keeps_eagers_gemms_and_fuses_gelu_and_mul_into_one_triton_kernel(mlp_eager, mlp_compiled, linear_eager):
    assert holds(predicates.same_gemms_as(mlp_eager), mlp_compiled)
    assert not holds(predicates.same_gemms_as(linear_eager), mlp_compiled)
    assert holds(predicates.one_triton_kernel_fusing("gelu", "mul"), mlp_compiled)
    assert not holds(predicates.one_triton_kernel_fusing("gelu", "mul"), mlp_eager)


def test_liger_runs_its_geglu_kernel_and_no_compiler(mlp_liger, mlp_compiled):
    assert holds(predicates.kernels_named("geglu", ["_geglu_tanh_forward_kernel"]), mlp_liger)
    assert not holds(predicates.kernels_named("geglu", ["_geglu_tanh_forward_kernel"]), mlp_compiled)
    assert holds(predicates.no_compiler_ops, mlp_liger) and not holds(predicates.no_compiler_ops, mlp_compiled)


def test_the_pace_of_a_trace_and_of_a_report(linear_eager):
    assert holds(predicates.paced_by("overhead-bound"), linear_eager)
    assert not holds(predicates.paced_by("device-bound"), linear_eager)
    report = analyse(linear_eager)
    verdict, seen = predicates.paced_by(report.pace.bound)(report)
    assert verdict and seen.startswith(report.pace.bound)


def test_eager_launches_each_kernel_and_a_replay_launches_one_graph(graphs):
    eager, replay = graphs["eager"], graphs["replay"]
    assert holds(predicates.one_launch_per_kernel, eager) and not holds(predicates.one_launch_per_kernel, replay)
    assert holds(predicates.one_graph_launch_only, replay) and not holds(predicates.one_graph_launch_only, eager)
    assert predicates.kernel_launches_per_step(replay) == 0 and predicates.graph_launches_per_step(replay) == 1
    assert predicates.kernel_launches_per_step(eager) == eager.kernels_per_step() > 1
    assert holds(predicates.same_kernels_as(eager), replay)


def test_reduce_overhead_launches_a_graph_and_copies_its_input_where_a_bare_replay_copies_nothing(graphs):
    compiled = graphs["reduce-overhead"]
    assert holds(predicates.launches_a_graph, compiled) and not holds(predicates.launches_a_graph, graphs["eager"])
    assert holds(predicates.copies_on_device, compiled) and not holds(predicates.copies_on_device, graphs["replay"])


def test_a_gpt2_training_step_does_twice_the_forwards_gemm_flops_in_its_backward(gpt2, mlp_eager):
    flops = predicates.gemm_flops_by_phase(gpt2)
    assert flops["forward"] > 0 and flops["backward"] > 0
    assert holds(predicates.backward_twice_forward, gpt2)
    assert not holds(predicates.backward_twice_forward, mlp_eager)  # inference: no backward at all
    assert predicates.gemm_flops_by_phase(mlp_eager)["backward"] == 0


def test_a_gpt2_step_uses_a_fused_optimizer_and_fused_attention(gpt2, mlp_eager):
    assert holds(predicates.fewer_optimizer_kernels_than_parameters, gpt2)
    assert not holds(predicates.fewer_optimizer_kernels_than_parameters, mlp_eager)
    assert holds(predicates.no_score_matrix(512), gpt2)


def test_gemm_ops_share_of_the_device_time(mlp_eager):
    assert holds(predicates.gemm_ops_share_above(0.5), mlp_eager)
    assert not holds(predicates.gemm_ops_share_above(0.999), mlp_eager)


def test_numbers_in_a_table_row():
    rows = {"before": {"µs": 10.0, "rate": 40.0}, "after": {"µs": 4.0, "rate": 90.0}}
    assert predicates.below_fraction_of("rate", 0.5, 100.0, "TFLOP/s")(rows["before"]) == (True, "40 of 100 TFLOP/s")
    assert not holds(predicates.below_fraction_of("rate", 0.5, 100.0, "TFLOP/s"), rows["after"])
    assert predicates.less_after("µs", "before", "after", "µs")(rows) == (True, "10 µs → 4 µs")
    assert not holds(predicates.less_after("µs", "after", "before", "µs"), rows)


def test_timings_compare_only_outside_their_spreads():
    fast, slow, near = Spread.of([1.0, 1.1, 1.2]), Spread.of([2.0, 2.1, 2.2]), Spread.of([1.1, 1.2, 1.3])
    assert holds(predicates.compares("a", "b", "faster"), {"a": fast, "b": slow})
    assert holds(predicates.compares("a", "b", "tie"), {"a": fast, "b": near})
    assert not holds(predicates.compares("a", "b", "faster"), {"a": fast, "b": near})
    assert predicates.compares("a", "c", "faster")({"a": fast}) == (False, "not measured: c")
    assert holds(predicates.faster_than_each("a", ["b"]), {"a": fast, "b": slow})


def test_the_backward_of_a_gpt2_step_takes_more_device_time_than_its_forward(gpt2, mlp_eager):
    from profiling_guide.analysis.backward import phase_shares

    assert holds(predicates.more_device_time("backward", "forward"), phase_shares(gpt2.steps))
    assert not holds(predicates.more_device_time("forward", "backward"), phase_shares(gpt2.steps))
    assert not holds(predicates.more_device_time("backward", "forward"), phase_shares(mlp_eager.steps))
