"""Spreads and ties, the datasheet table, and who sets the pace, read from real H100 and H200 traces."""

import json
from pathlib import Path

import pytest
from conftest import GPUS, H100

from profiling_guide.analysis.pace import (
    pace_of,
    summarize_step,
    unprofiled_bound,
)
from profiling_guide.analysis.roofline import datasheet_bound_us, datasheet_for
from profiling_guide.spread import Spread, compare, ratio_words
from profiling_guide.trace.model import Trace


def test_a_spread_is_the_median_and_quartiles_of_its_repeats():
    s = Spread.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.q1, s.q3, s.repeats) == (3.0, 2.0, 4.0, 5)
    assert Spread.from_dict(s.to_dict()) == s
    assert format(s, ".1f") == "3.0 (IQR 2.0–4.0)"


def test_a_difference_inside_either_spread_is_a_tie():
    a, b = Spread.of([10, 11, 12, 13]), Spread.of([11.5, 12, 13, 14])
    assert compare(a, b) == "tie" and compare(b, a) == "tie"
    assert ratio_words(a, b).startswith("a tie")


def test_only_disjoint_spreads_make_a_win():
    fast, slow = Spread.of([10, 10.2, 10.4]), Spread.of([11, 11.1, 11.3])
    assert compare(fast, slow) == "faster" and compare(slow, fast) == "slower"
    assert ratio_words(fast, slow) == f"{slow.median / fast.median:.2f}× faster"


def test_device_times_interleaves_the_candidates_in_every_repeat(monkeypatch):
    from profiling_guide.measure import timing

    order, lines = [], []

    def fake_median(fn, inputs, rounds):  # stands in for the CUDA-event timing: which ran when, and a time
        order.append(fn())
        return {"a": 10.0, "b": 20.0}[order[-1]] + len(order)

    monkeypatch.setattr(timing, "median_rotating_us", fake_median)
    spreads = timing.device_times({"a": (lambda: "a", [()]), "b": (lambda: "b", [()])}, repeats=3,
                                  progress=lines.append)  # fmt: skip
    assert order == ["a", "b"] * 3, "each repeat times every candidate once, in order"
    assert spreads["a"].median == 10.0 + 3 and spreads["b"].median == 20.0 + 4 and spreads["a"].repeats == 3
    assert lines == ["repeat 1/3", "repeat 2/3", "repeat 3/3"]


def test_a_time_turned_into_a_rate_swaps_its_quartiles():
    rate = Spread.of([100.0, 200.0, 400.0]).inverse(1000.0)
    assert rate.median == 5.0 and rate.q1 <= rate.median <= rate.q3


@pytest.mark.parametrize("name, model, tbps", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 3.35), ("NVIDIA H200", "H200 SXM", 4.8),
    ("NVIDIA H100 PCIe", "H100 PCIe", 2.0), ("NVIDIA H200 NVL", "H200 NVL", 4.8),
])
def test_datasheet_peaks_are_looked_up_by_the_name_torch_reports(name, model, tbps):
    sheet = datasheet_for(name)
    assert sheet["model"] == model and sheet["hbm_tbps"] == tbps and sheet["source"].startswith("https://")


def test_a_gpu_missing_from_the_datasheet_table_has_no_ceiling():
    assert datasheet_for("NVIDIA GeForce RTX 4090") is None


def test_the_datasheet_bound_is_the_longer_of_compute_and_memory_time():
    sheet = {"bf16_tflops": 1000.0, "hbm_tbps": 2.0}
    assert datasheet_bound_us(1e12, 1e6, sheet) == pytest.approx(1000.0)  # compute: 1 TFLOP at 1000 TFLOP/s
    assert datasheet_bound_us(1e6, 4e9, sheet) == pytest.approx(2000.0)  # memory: 4 GB at 2 TB/s


def test_the_tiny_linear_is_overhead_bound_on_both_gpus():
    for gpu in GPUS:
        trace = Trace.load(gpu / "01_linear.eager.trace.json.gz")
        assert pace_of(trace).bound == "overhead-bound"
        assert all(summarize_step(s).busy_share < 0.5 for s in trace.steps)


EAGER_MLP = ["02_mlp_eager.eager", "03_mlp_compile.eager", "04_liger.eager", "05_compare.eager"]


def test_where_the_gpu_sets_the_pace_it_idles_less_than_where_the_host_does():
    # One eager forward, recorded eight times (four chapters, two GPUs), and the corpus's training steps whose
    # extra GEMMs keep the GPU busy (tests/data/corpus, both GPUs). The verdict follows the evidence: where the GPU
    # sets the pace, it idled less than in any run the host paced, and each launch waited longer than the one
    # before. (Which side paces the eager forward under the profiler depends on how far the host ran ahead in that
    # run: the H200's first recordings of chapters 2 and 4 were device-bound, their re-recordings are not.)
    paced: dict[str, list] = {"device-bound": [], "overhead-bound": []}
    corpus = Path(__file__).parent / "data" / "corpus"
    paths = [folder / f"{name}.trace.json.gz" for folder in GPUS for name in EAGER_MLP]
    paths += sorted(corpus.glob("h*/gpu_compute_*.trace.json.gz"))
    for path in paths:
        trace = Trace.load(path)
        steps, bound = [summarize_step(s) for s in trace.steps], pace_of(trace).bound
        if bound in paced:
            paced[bound].append(steps)
    assert paced["device-bound"] and paced["overhead-bound"]

    def idle(steps):
        return sum(s.gpu_idle_fraction * s.gpu_span_us for s in steps) / sum(s.gpu_span_us for s in steps)

    assert max(idle(steps) for steps in paced["device-bound"]) < min(idle(steps) for steps in paced["overhead-bound"])
    for steps in paced["device-bound"]:
        assert all(s.delay_end_us > s.delay_start_us for s in steps)


def test_without_the_profiler_the_timings_decide_the_pace():
    run = json.loads((H100 / "01_linear.eager.run.json").read_text())["timings"]
    cpu, device = Spread.from_dict(run["cpu_issue_us"]), Spread.from_dict(run["device_us"])
    assert [unprofiled_bound(cpu, device), unprofiled_bound(device, cpu), unprofiled_bound(cpu, cpu)] == [
        "overhead-bound", "device-bound", "tie"]
