"""The comparison pieces of chapters 5 and 6 on the committed H100 recordings: work tables, charts, benchmark."""

import json
import subprocess
import sys

import matplotlib
import pytest

matplotlib.use("Agg")

from conftest import H100
from profiling_guide import bench_mlp, charts
from profiling_guide.roofline import intermediate_passes, kernel_work_table
from profiling_guide.trace import Trace

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
    table = kernel_work_table(trace, rows=ROWS, dim=768, hidden=HIDDEN, element=2, ceilings=bench["ceilings"])
    assert table.loc[table["kind"] == "gemm", "per forward"].sum() == 3
    pointwise = table[table["kind"] == "pointwise"]
    assert len(pointwise) == 1
    assert pointwise["work"].iloc[0] == f"{3 * ROWS * HIDDEN * 2 / 1e6:.0f} MB (3 passes)"
    # GEMMs at a plausible fraction of the GEMM ceiling, the fused kernel of the copy bandwidth
    assert (table["% of ceiling"] > 30).all() and (table["% of ceiling"] < 130).all()


def test_work_table_counts_max_autotune_templates_and_our_fused_gemm(bench):
    auto = Trace.load(H100 / "05_compare.compile-max-autotune.trace.json.gz")
    table = kernel_work_table(auto, rows=ROWS, dim=768, hidden=HIDDEN, element=2, ceilings=bench["ceilings"])
    assert table.loc[table["kind"] == "gemm", "per forward"].sum() == 3
    fused = Trace.load(H100 / "06_fused.fused.trace.json.gz")
    table = kernel_work_table(fused, rows=ROWS, dim=768, hidden=HIDDEN, element=2, ceilings=bench["ceilings"])
    ours = table[table["kernel"].str.contains("geglu")]
    assert ours["work"].iloc[0] == f"{4 * ROWS * 768 * HIDDEN / 1e9:.1f} GFLOP"


def test_the_fused_trace_has_our_gemm_and_cublas_only():
    trace = Trace.load(H100 / "06_fused.fused.trace.json.gz")
    names = {k.name for k in trace.kernels}
    assert trace.kernels_per_step() == 2
    assert any(n.startswith("_geglu_packed") and n.endswith("gemm_kernel") for n in names)


def test_the_benchmark_record_has_floor_and_every_variant(bench):
    assert set(bench["variants_us"]) >= {"eager", "compile", "compile-max-autotune", "liger", "fused-packed-tma"}
    assert all(us > bench["floor_us"] for us in bench["variants_us"].values())
    assert not bench["wrong"]


def test_variant_bars_draw_one_bar_label_per_variant_and_the_floor(bench):
    times = bench["variants_us"]
    fig = charts.variant_bars(times, bench["floor_us"], breakdown={"eager": {"gemm": 170.0, "pointwise": 80.0}})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(times)
    texts = [t.get_text() for t in ax.texts]
    assert any("compute floor" in t for t in texts)
    assert sum("× floor" in t for t in texts) == len(times)


def test_roofline_and_sweep_charts_plot_every_point(bench):
    fig = charts.roofline({"a": (50.0, 400.0), "b": (150.0, 600.0)}, bench["ceilings"]["gemm_tflops"],
                          bench["ceilings"]["copy_tbps"])
    assert len(fig.axes[0].collections) == 2
    sweep = json.loads((H100 / "06_fused.sweep.run.json").read_text())["values"]
    fig = charts.sweep_lines(sweep, ["eager", "fused"])
    assert len(fig.axes) == 2 and all(len(ax.get_lines()) == 3 for ax in fig.axes)  # 2 variants + floor line


def test_bench_cli_refuses_bad_flags_in_one_line():
    for flag in (["--variants", "eager,turbo"], ["--rows", "0"], ["--batch", "-1"]):
        result = subprocess.run([sys.executable, "-m", "profiling_guide.bench_mlp", *flag],
                                capture_output=True, text=True)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr and "error:" in result.stderr


def test_bench_without_a_gpu_says_so_in_one_line():
    result = subprocess.run([sys.executable, "-m", "profiling_guide.bench_mlp"], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: the MLP benchmark runs on a CUDA GPU and none is visible"


def test_the_committed_benchmark_json_has_the_documented_keys():
    data = json.loads((H100 / "bench_mlp.json").read_text())
    assert data["floor_us"] > 0 and data["variants_us"]["fused-packed-tma"] > 0
    assert bench_mlp.format_table(data).splitlines()[1].startswith("floor (GEMM rate)")
