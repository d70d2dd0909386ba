"""The training-step chapter's analysis, on its recorded traces of both GPUs: GEMM roles, memory, owners, checks."""

import gzip
import json

import pytest

from conftest import GPUS
from profiling_guide.analysis import predicates
from profiling_guide.analysis.backward import phase_shares
from profiling_guide.analysis.trace_report import analyse
from profiling_guide.analysis.training import gemm_role, kernel_owner, snapshot_summary, step_gemms, step_memory
from profiling_guide.errors import GuideError
from profiling_guide.measure.bench_step import format_training_step
from profiling_guide.report.html import render_html
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace

VARIANTS = ("eager", "compile", "liger", "fused")
ROWS, DIM, HIDDEN = 8192, 768, 3072


@pytest.fixture(scope="module", params=[(gpu, v) for gpu in GPUS for v in VARIANTS],
                ids=lambda p: f"{p[0].name}-{p[1]}")
def step(request):
    gpu, variant = request.param
    return variant, Trace.load(gpu / f"06b_training_step.{variant}.trace.json.gz")


def test_every_variant_s_gemms_add_up_to_nine_linears_with_each_role_accounted_for(step):
    variant, trace = step
    gemms = step_gemms(trace, rows=ROWS, dim=DIM, hidden=HIDDEN)
    assert gemms["gemms"].sum() == pytest.approx(9)
    assert "other" not in set(gemms["role"])
    assert list(gemms["phase"]).count("forward") == (2 if variant == "fused" else 3)
    if variant == "fused":  # gate and up in one kernel, their dX in one GEMM, their dW in one GEMM
        assert {r for r in gemms["role"] if "in one" in r} == {
            "gate and up in one: x·[Wg; Wu]ᵀ", "gate's and up's dX in one: [dg | du]·[Wg; Wu]",
            "gate's and up's dW in one: [dg | du]ᵀ·x"}
        assert len(gemms) == 6
    else:
        assert len(gemms) == 9


@pytest.mark.parametrize("gpu", GPUS, ids=lambda p: p.name)
def test_ours_computes_dh_in_the_gluon_ping_pong_kernel_one_program_per_sm_three_warpgroups(gpu):
    path = gpu / "06b_training_step.fused.trace.json.gz"
    trace = Trace.load(path)
    sms = json.loads(gzip.open(path).read())["deviceProperties"][0]["numSms"]
    gemms = step_gemms(trace, rows=ROWS, dim=DIM, hidden=HIDDEN)
    dh = gemms[gemms["role"] == "down's dX: dh = dy·Wd"]
    assert len(dh) == 1 and "_geglu_backward_pingpong_gemm" in dh["kernel"].iloc[0]
    launches = [k for k in trace.kernels if k.name == "_geglu_backward_pingpong_gemm_kernel"]
    assert len(launches) == len(trace.steps) > 0, "one launch per profiled step"
    for k in launches:  # persistent: one program per SM; two consumer warpgroups and the producer's warp (padded)
        assert k.grid == (sms, 1, 1) and k.block == (384, 1, 1)
        assert k.args["shared memory"] > 200 * 1024, "the ring and both consumers' g and u tiles"


def test_the_forward_leaves_its_saved_tensors_and_output_for_the_backward(step):
    variant, trace = step
    mb = ROWS * HIDDEN * 2 / 1e6  # one [rows, hidden] bf16 tensor
    y = ROWS * DIM * 2 / 1e6
    saved = {"eager": 4, "compile": 3, "liger": 3, "fused": 3}[variant]
    memory = step_memory(trace, trace.steps[0])
    assert memory["held_at_backward_mb"] == pytest.approx(saved * mb + y, rel=0.01)
    assert memory["peak_mb"] > memory["held_at_backward_mb"]


def test_every_kernel_but_gradient_accumulation_has_a_forward_op(step):
    variant, trace = step
    owners = [kernel_owner(k) for k in trace.steps[0].kernels]
    phases = {phase for phase, _ in owners}
    assert phases == {"forward", "backward"}
    orphans = [k.name for k, (_, op) in zip(trace.steps[0].kernels, owners, strict=True) if op is None]
    assert all("elementwise" in name or "add" in name for name in orphans), orphans
    assert set(phase_shares(trace.steps).index) == {"forward", "backward"}


def test_gemm_roles_follow_the_shapes_and_the_phase():
    assert gemm_role("forward", (ROWS, DIM, HIDDEN), ROWS, DIM, HIDDEN).startswith("gate or up")
    assert gemm_role("backward", (ROWS, DIM, HIDDEN), ROWS, DIM, HIDDEN).startswith("down's dX")
    assert gemm_role("backward", (DIM, ROWS, HIDDEN), ROWS, DIM, HIDDEN).startswith("down's dW")
    assert gemm_role("forward", (5, 6, 7), ROWS, DIM, HIDDEN) == "other"


def test_a_trace_without_memory_events_has_no_memory_figures():
    trace = Trace.load(GPUS[0] / "02_mlp_eager.eager.trace.json.gz")
    assert trace.memory_events == []
    assert step_memory(trace, trace.steps[0]) is None


def test_a_memory_event_without_its_numbers_is_one_line():
    events = [{"ph": "i", "name": "[memory]", "ts": 1.0, "pid": 1, "tid": 1, "args": {"Bytes": 10}}]
    with pytest.raises(GuideError, match="event 0.*Total Allocated"):
        Trace({"traceEvents": events})


def test_a_snapshot_summary_names_what_the_forward_holds_and_replays_the_peak():
    frames = [{"filename": "/x/torch/nn/functional.py", "line": 1, "name": "linear"},
              {"filename": "/src/models.py", "line": 41, "name": "forward"}]
    after_forward = {"segments": [{"blocks": [
        {"state": "active_allocated", "size": 2_000_000, "requested_size": 2_000_000, "frames": frames},
        {"state": "active_allocated", "size": 5_000_000, "frames": []},  # allocated before the recording
        {"state": "inactive", "size": 1_000_000, "frames": frames}]}]}
    after_step = {"device_traces": [[{"action": "alloc", "size": 2_000_000}, {"action": "alloc", "size": 3_000_000},
                                     {"action": "free_requested", "size": 3_000_000},
                                     {"action": "free_completed", "size": 3_000_000},
                                     {"action": "alloc", "size": 1_000_000}]]}
    summary = snapshot_summary(after_forward, after_step)
    assert summary["held"] == [{"mb": 2.0, "where": "models.py:41 forward"}]
    assert summary["held_mb"] == 2.0 and summary["peak_mb"] == 5.0


def test_the_report_shows_the_links_of_the_chapter_s_training_step(step):
    variant, trace = step
    page = render_html(analyse(trace), trace.steps[0])
    assert "Forward → backward" in page
    backward = {"eager": "MmBackward0", "compile": "CompiledFunctionBackward", "fused": "GeGLUFunctionBackward"}
    assert backward.get(variant, "Backward") in page


@pytest.mark.parametrize("gpu", GPUS, ids=lambda p: p.name)
def test_the_committed_training_step_benchmark_is_whole_and_honest(gpu):
    bench = json.loads((gpu / "bench_mlp.json").read_text())["training_step"]
    assert set(bench["variants_us"]) == set(VARIANTS) and not bench["wrong"]
    nine_gemms = Spread.from_dict(bench["nine_gemms_us"])
    for name, spread in bench["variants_us"].items():
        s = Spread.from_dict(spread)
        assert s.repeats >= 5 and s.q1 <= s.median <= s.q3
        assert bench["ratio_to_nine_gemms"][name] == pytest.approx(s.median / nine_gemms.median, abs=1e-4)
        assert bench["memory"][name]["peak_mb"] >= bench["memory"][name]["saved_mb"] > 0
    assert bench["memory"]["fused"]["saved_mb"] <= bench["memory"]["eager"]["saved_mb"]
    table = format_training_step(bench)
    assert all(name in table for name in VARIANTS) and "nine GEMMs" in table


def test_the_training_checks_fail_where_they_must():
    saved = {"eager": [{"shape": [8192, 3072], "dtype": "bfloat16"}] * 3}
    holds, seen = predicates.saved_tensors("eager", 4, ROWS * HIDDEN, "bfloat16")(saved)
    assert not holds and "8192×3072" in seen
    assert not predicates.at_most_as_much("held", "fused", "eager")({"fused": {"held": 2}, "eager": {"held": 1}})[0]
    times = {"fused": Spread.of([110.0] * 5), "nine GEMMs": Spread.of([100.0] * 5)}
    assert predicates.median_at_most("fused", 1.05, "nine GEMMs")(times) == (False, predicates.median_at_most(
        "fused", 1.05, "nine GEMMs")(times)[1])
    assert predicates.median_at_most("fused", 1.2, "nine GEMMs")(times)[0]
    import pandas as pd

    assert not predicates.gemm_work_per_step(9)({"a": pd.DataFrame({"gemms": [1.0] * 8})})[0]


def test_bench_mlp_backward_refuses_a_sweep_and_unknown_variants_in_one_line(capsys):
    from profiling_guide.measure import bench_cli

    assert bench_cli.main(["--backward", "--sweep"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--backward times the training step at one shape" in err
    with pytest.raises(SystemExit):
        bench_cli.main(["--backward", "--step-variants", "eager,max"])
    err = capsys.readouterr().err
    assert "unknown training-step variant 'max'" in err and "Traceback" not in err


def test_the_training_step_benchmark_needs_a_gpu_and_says_so():
    from profiling_guide.measure.bench_step import measure_training_step

    with pytest.raises(GuideError, match="runs on a CUDA GPU and none is visible"):
        measure_training_step()
