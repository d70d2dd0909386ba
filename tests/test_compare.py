"""The comparison pieces of chapters 5 and 6 on the committed H100 recordings: work tables, charts, benchmark."""

import json
import subprocess

import matplotlib
import pytest

matplotlib.use("Agg")

from quick_python import quick_python
from conftest import GPUS, H100

from profiling_guide.analysis.roofline import (
    CEILING_COLUMN,
    REFERENCE_COLUMN,
    intermediate_passes,
    kernel_work_table,
)
from profiling_guide.measure import bench_format, bench_records
from profiling_guide.spread import Spread
from profiling_guide.pages import charts
from profiling_guide.trace.model import Trace

ROWS, HIDDEN = 64 * 128, 3072


@pytest.fixture(scope="module")
def bench():
    return json.loads((H100 / "06_fused.bench.run.json").read_text())["values"]


@pytest.mark.parametrize("name, passes", [
    ("triton_poi_fused__unsafe_view_gelu_mul_0", 3),
    ("_geglu_tanh_forward_kernel", 3),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)>", 2),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
     "c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >", 3),
    ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", None),
])
def test_intermediate_passes_from_kernel_names(name, passes):
    assert intermediate_passes(name) == passes


def test_work_table_puts_gemms_against_flops_and_the_fused_kernel_against_bytes(bench):
    trace = Trace.load(H100 / "05_compare.compile.trace.json.gz")
    table = kernel_work_table(trace, rows=ROWS, dim=768, hidden=HIDDEN, element=2, references=bench["references"])
    assert table.loc[table["kind"] == "gemm", "per forward"].sum() == 3
    pointwise = table[table["kind"] == "pointwise"]
    assert len(pointwise) == 1
    assert pointwise["work"].iloc[0] == f"{3 * ROWS * HIDDEN * 2 / 1e6:.0f} MB (3 passes)"
    # every kernel under the datasheet ceiling; against the measured reference a kernel may pass 100 %
    assert (table[CEILING_COLUMN] > 30).all() and (table[CEILING_COLUMN] <= 100).all()
    assert (table[REFERENCE_COLUMN] > 30).all()


def test_work_table_counts_max_autotune_templates_and_our_fused_gemm(bench):
    refs = bench["references"]
    auto = Trace.load(H100 / "05_compare.compile-max-autotune.trace.json.gz")
    table = kernel_work_table(auto, rows=ROWS, dim=768, hidden=HIDDEN, element=2, references=refs)
    assert table.loc[table["kind"] == "gemm", "per forward"].sum() == 3
    fused = Trace.load(H100 / "06_fused.fused.trace.json.gz")
    table = kernel_work_table(fused, rows=ROWS, dim=768, hidden=HIDDEN, element=2, references=refs)
    ours = table[table["kernel"].str.contains("geglu")]
    assert ours["work"].iloc[0] == f"{4 * ROWS * 768 * HIDDEN / 1e9:.1f} GFLOP"


def test_the_fused_trace_has_our_gemm_and_cublas_only():
    trace = Trace.load(H100 / "06_fused.fused.trace.json.gz")
    names = {k.name for k in trace.kernels}
    assert trace.kernels_per_step() == 2
    # design="auto" on a Hopper GPU: the Gluon ping-pong kernel
    assert "_geglu_pingpong_gemm_kernel" in names


@pytest.mark.parametrize("gpu", GPUS)
def test_every_variant_is_slower_than_the_datasheet_bound_and_has_a_spread(gpu):
    bench = json.loads((gpu / "06_fused.bench.run.json").read_text())["values"]
    assert set(bench["variants_us"]) >= {"eager", "compile", "compile-max-autotune", "liger", "fused-packed-tma",
                                         "fused-pingpong"}
    spreads = [Spread.from_dict(t) for t in [*bench["variants_us"].values(), bench["gemms_alone_us"]]]
    assert all(t.repeats >= 5 and t.q1 <= t.median <= t.q3 for t in spreads)
    assert all(t.median > bench["datasheet_bound_us"] for t in spreads)
    assert not bench["wrong"]


@pytest.mark.parametrize("gpu", GPUS)
def test_the_reference_rates_sit_under_the_datasheet_peaks(gpu):
    refs = json.loads((gpu / "bench_mlp.json").read_text())["references"]
    sheet = refs["datasheet"]
    assert refs["gemm_tflops"]["rate"] < sheet["bf16_tflops"] and refs["copy_tbps"]["rate"] < sheet["hbm_tbps"]
    assert refs["gemm_tflops"]["rate"] == max(c["median"] for c in refs["gemm_tflops"]["candidates"].values())
    assert len(refs["gemm_tflops"]["candidates"]) == 3  # 8192³, gate/up, down


def test_variant_bars_draw_one_bar_per_variant_and_each_mark(bench):
    times = {n: Spread.from_dict(t) for n, t in bench["variants_us"].items()}
    marks = {"cuBLAS GEMMs alone": bench["gemms_alone_us"]["median"], "datasheet bound": bench["datasheet_bound_us"]}
    fig = charts.variant_bars(times, marks, breakdown={"eager": {"gemm": 170.0, "pointwise": 80.0}})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(times)
    assert sum(t.get_text().strip().endswith("µs") for t in ax.texts) == len(times)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("cuBLAS GEMMs alone") for label in labels)
    assert any(label.startswith("datasheet bound") for label in labels)


def test_roofline_and_sweep_charts_plot_every_point(bench):
    fig = charts.roofline({"eager": (50.0, 400.0), "fused": (150.0, 600.0)}, references=bench["references"])
    assert len(fig.axes[0].collections) == 2
    assert len(fig.axes[0].get_lines()) == 2  # the datasheet ceiling and the measured reference
    sweep = json.loads((H100 / "06_fused.sweep.run.json").read_text())["values"]
    fig = charts.sweep_lines(sweep, ["eager", "fused"])
    assert len(fig.axes) == 2 and all(len(ax.get_lines()) == 3 for ax in fig.axes)  # 2 variants + GEMMs alone


def test_bench_cli_refuses_bad_flags_in_one_line():
    for flag in (["--variants", "eager,turbo"], ["--rows", "0"], ["--batch", "-1"]):
        result = subprocess.run([quick_python(), "-m", "profiling_guide.measure.bench_cli", *flag],
                                capture_output=True, text=True)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr and "error:" in result.stderr


def test_bench_without_a_gpu_says_so_in_one_line():
    result = subprocess.run([quick_python(), "-m", "profiling_guide.measure.bench_cli"], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: the MLP benchmark runs on a CUDA GPU and none is visible"


@pytest.mark.parametrize("gpu", GPUS)
def test_the_committed_benchmark_json_has_the_documented_keys(gpu):
    data = json.loads((gpu / "bench_mlp.json").read_text())
    for key in ("references", "gemms_alone_us", "datasheet_bound_us", "variants_us", "cpu_issue_us", "timing"):
        assert key in data
    table = bench_format.format_table(bench_records.BenchmarkRun.from_json(data).result).splitlines()
    assert table[1].startswith("cuBLAS GEMMs alone") and table[-1].startswith("datasheet bound")
    assert table[2].startswith("cuBLAS gate/up GEMMs alone")  # a reference: no verdict
    assert all(("(faster)" in line or "(slower)" in line or "(tie with GEMMs alone)" in line) for line in table[3:-1])


@pytest.mark.parametrize("gpu", GPUS)
def test_the_typed_benchmark_records_read_and_write_the_committed_json_unchanged(gpu):
    data = json.loads((gpu / "bench_mlp.json").read_text())
    run = bench_records.BenchmarkRun.from_json(data)
    assert run.result.variants_us["eager"] == Spread.from_dict(data["variants_us"]["eager"])
    assert run.result.gate_up_gemms_alone_us == Spread.from_dict(data["gate_up_gemms_alone_us"])
    # bench-mlp --backward keeps the training step beside the forward's run, under its own key
    assert "training_step" in data
    assert run.to_json() == {k: v for k, v in data.items() if k != "training_step"}
    # a file written before the gate/up reference existed still reads, with no such reference
    older = {k: v for k, v in data.items() if k != "gate_up_gemms_alone_us"}
    assert bench_records.BenchmarkRun.from_json(older).result.gate_up_gemms_alone_us is None
    sweep = json.loads((gpu / "06_fused.sweep.run.json").read_text())["values"]
    rows = [bench_records.ShapeResult.from_json(r) for r in sweep]
    assert rows[0].references == sweep[0]["references"] and rows[1].references is None
    assert [r.to_json() for r in rows] == sweep


def test_the_gate_up_reference_is_a_row_of_the_table_without_a_verdict():
    data = json.loads((GPUS[0] / "bench_mlp.json").read_text())
    run = bench_records.BenchmarkRun.from_json(data)
    run.result.gate_up_gemms_alone_us = Spread(120.0, 119.0, 121.0, 7)
    again = bench_records.BenchmarkRun.from_json(run.to_json())
    assert again.result.gate_up_gemms_alone_us == Spread(120.0, 119.0, 121.0, 7)
    table = bench_format.format_table(again.result).splitlines()
    assert table[2].startswith("cuBLAS gate/up GEMMs alone")
    assert f"{120.0 / run.result.gemms_alone_us.median:.3f}" in table[2] and not table[2].endswith(")"), "no verdict"
