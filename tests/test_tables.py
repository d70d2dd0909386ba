"""The tables a page renders, computed from recordings."""

import pytest

from profiling_guide.analysis.roofline import CEILING_COLUMN, REFERENCE_COLUMN
from profiling_guide.pages import tables


def test_op_table_shows_aten_t_with_zero_device_time(linear_eager):
    ops = tables.op_table(linear_eager)
    assert ops.loc["aten::t", "cuda_total_us"] == 0
    assert ops.loc["aten::addmm", "self_cuda_us"] > 0
    assert ops.loc["aten::linear", "calls"] == 1
    # total CPU time includes nested ops, self time does not
    assert ops.loc["aten::linear", "cpu_total_us"] > ops.loc["aten::linear", "self_cpu_us"]


def test_op_table_by_input_shape_keeps_the_mlp_gemms_of_two_shapes_apart(mlp_eager):
    # as key_averages(group_by_input_shape=True): gate and up share a shape, down has another
    mm = tables.op_table(mlp_eager, by_input_shape=True).loc["aten::mm"]
    assert sorted(mm["calls"]) == [1, 2]
    assert tables.op_table(mlp_eager).loc["aten::mm", "calls"] == 3
    assert mm["cuda_total_us"].sum() == pytest.approx(tables.op_table(mlp_eager).loc["aten::mm", "cuda_total_us"])


def test_kernel_table_counts_calls_per_step(mlp_eager):
    kt = tables.kernel_table(mlp_eager)
    assert kt["calls_per_step"].sum() == 7  # 5 kernels + 2 memsets
    gemm = kt[kt["kind"] == "gemm"]
    assert gemm["calls_per_step"].sum() == 3
    assert set(gemm["via"]) == {"cuLaunchKernelEx"}
    assert set(gemm["launched_by"]) == {"aten::mm"}


def test_gemm_table_reads_m_k_n_from_the_recorded_shapes(mlp_eager):
    refs = {"gemm_tflops": {"rate": 700.0}, "datasheet": {"bf16_tflops": 989.4}}
    g = tables.gemm_table(mlp_eager, references=refs)
    assert list(g["M·K·N"]) == ["8192·768·3072", "8192·768·3072", "8192·3072·768"]
    assert g["GFLOP"].round(1).tolist() == [38.7, 38.7, 38.7]
    row = g.iloc[0]
    assert row["TFLOP/s"] == pytest.approx(2 * 8192 * 768 * 3072 / row["avg_us"] / 1e6)
    assert row[REFERENCE_COLUMN] == pytest.approx(100 * row["TFLOP/s"] / 700.0)
    assert row[CEILING_COLUMN] == pytest.approx(100 * row["TFLOP/s"] / 989.4)


def test_gemm_time_leaves_out_the_memset_its_op_launches(mlp_eager):
    g = tables.gemm_table(mlp_eager)
    first = mlp_eager.steps[0]
    mms = [op for op in first.ops if op.name == "aten::mm"]
    assert any(ev.kind == "memset" for op in mms for ev in op.device_events)
    kernel_us = sum(ev.dur_us for ev in mms[0].device_events if ev.kind == "kernel")
    same = [[o for o in s.ops if o.name == "aten::mm"][0] for s in mlp_eager.steps]
    mean = sum(sum(ev.dur_us for ev in o.device_events if ev.kind == "kernel") for o in same) / len(same)
    assert g["avg_us"].iloc[0] == pytest.approx(mean) and kernel_us > 0


def test_dispatch_chain_unfolds_one_linear(linear_eager):
    chain = tables.dispatch_chain(linear_eager, "linear_fwd")
    names = [op.replace("\u00a0", "").removeprefix("└ ") for op in chain["op"]]
    assert names == ["linear_fwd", "aten::linear", "aten::t", "aten::transpose", "aten::as_strided", "aten::addmm"]
    addmm = chain.iloc[-1]
    assert addmm["runtime_calls"] == "cuLaunchKernelEx" and addmm["device_us"] > 0
    with pytest.raises(ValueError, match="no op named"):
        tables.dispatch_chain(linear_eager, "nope")


def test_launch_table_has_one_row_per_device_event(mlp_eager):
    lt = tables.launch_table(mlp_eager)
    assert len(lt) == 7
    memsets = lt[lt["kind"] == "memset"]
    assert set(memsets["launch call"]) == {"cudaMemsetAsync"}
    assert (lt["launch → start µs"] >= 0).all()


def test_readable_fraction_headers_keep_the_percentage_format():
    import pandas as pd

    df = pd.DataFrame({"device-time share": [0.206], "of reference": [0.17], "µs per step": [3304.4]})
    out = tables.styled(df).to_html()
    assert "20.6%" in out and "17%" in out and "3,304.4" in out and "0.206" not in out


def test_a_styled_table_sits_in_the_scrolling_box_and_keeps_its_styler_methods():
    import pandas as pd

    from profiling_guide.output import SCROLL_CLASS

    st = tables.styled(pd.DataFrame({"kernel": ["a", "b"], "µs": [1.25, 2.5]}), caption="two kernels")
    st = st.hide(axis="columns", subset=["µs"])  # a Styler method still returns the scrolling Styler
    out = st._repr_html_()
    assert out.startswith(f'<div class="{SCROLL_CLASS}">') and out.rstrip().endswith("</div>")
    assert out.count("<table") == 1 and 'class="pg-table"' in out and "two kernels" in out
    assert "1.25" not in out  # the hidden column stays hidden inside the box
