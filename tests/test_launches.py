"""What chapters 5 and 6 say about their kernels' launches and about their two runs, on both GPUs' recordings.

Chapter 5 explains max-autotune's GEMM times from its trace and eager's (the
kernels it ran, their launches, how much of an SM each holds); chapter 6 says
which run each of its numbers comes from and why the two chapters' runs rank
some variants otherwise. Every sentence is computed from the recordings, so
the tests check it against the traces' facts on each GPU, not against words.
"""

import json
import re
from pathlib import Path

import pytest
from conftest import GPUS, H100, H200

from profiling_guide.analysis.launches import (
    KernelLaunch,
    changed_launches,
    kernel_launches,
    mover,
    paired_gemms,
    ranking_changes,
    resident_blocks,
)
from profiling_guide.analysis.step_graph import sm_count
from profiling_guide.errors import GuideError
from profiling_guide.pages import facts
from profiling_guide.pages.recordings import Recording
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace

GATE_UP, DOWN = (8192, 768, 3072), (8192, 3072, 768)


def trace(gpu, name) -> Trace:
    return Trace.load(gpu / f"{name}.trace.json.gz")


def recording(gpu, name) -> Recording:
    return Recording(name, gpu, json.loads((gpu / f"{name}.run.json").read_text()))


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


# ------------------------------------------------------------------ launches
@pytest.mark.parametrize("gpu", GPUS, ids=lambda p: p.name)
def test_max_autotunes_gemms_pair_with_eagers_on_the_same_products(gpu):
    pairs = paired_gemms(trace(gpu, "05_compare.compile-max-autotune"), trace(gpu, "05_compare.eager"))
    assert [a.product for a, _ in pairs] == [b.product for _, b in pairs] == [GATE_UP, GATE_UP, DOWN]
    for _, cublas in pairs:  # eager's: cuBLAS, one block per SM
        assert cublas.library == "cublas" and cublas.blocks == 132 and cublas.threads == 384


def test_resident_blocks_follow_registers_and_shared_memory():
    auto = trace(H100, "05_compare.compile-max-autotune")
    assert sm_count(auto) == 132
    gemms = kernel_launches(auto, "gemm")
    # 202 registers × 128 threads and 96 KiB: two blocks; 163,840 B of shared memory: one
    assert [(k.registers, k.shared_bytes, resident_blocks(k, auto)) for k in gemms] == [
        (202, 98304, 2), (202, 98304, 2), (106, 163840, 1)]
    bare = KernelLaunch("k", "k", "gemm", "triton", 1.0, 10, 128, None, None)
    assert resident_blocks(bare, auto) is None  # no registers in the trace: no claim


def test_a_different_workload_is_refused():
    with pytest.raises(GuideError, match="not the same"):
        paired_gemms(trace(H100, "06_fused.fused"), trace(H100, "05_compare.eager"))


def test_the_sentence_on_max_autotunes_gemms_holds_on_each_gpu():
    eager = recording(H100, "05_compare.eager")
    auto = recording(H100, "05_compare.compile-max-autotune")
    (text,) = facts.autotuned_gemms(auto, eager).sentences
    pairs = paired_gemms(auto.trace, eager.trace)
    mine, theirs = sum(a.us for a, _ in pairs), sum(e.us for _, e in pairs)
    assert "3 of its 3 GEMMs max-autotune ran Triton kernels in place of eager's cuBLAS ones" in text
    assert f"{mine:.1f} µs per profiled forward against {theirs:.1f} µs" in text and mine > theirs
    assert "one block per 16,384 outputs (1,536 blocks of 128 threads, 384 of 256 threads)" in text
    assert "at most 8 warps share an SM" in text and "132 blocks of 384 threads, one per SM, 12 warps each" in text
    # on the H200 max-autotune kept cuBLAS's kernels: the sentence says so, not that its GEMMs are slower
    (kept,) = facts.autotuned_gemms(recording(H200, "05_compare.compile-max-autotune"),
                                    recording(H200, "05_compare.eager")).sentences
    assert kept.startswith("At this shape max-autotune kept eager's cuBLAS kernels for all 3 GEMMs")
    assert "in place of" not in kept
    assert facts.autotuned_gemms(None, eager).sentences == [
        "max-autotune did not run on this GPU: no GEMMs of its own to compare."]


def test_chapter_5_shows_the_sentence():
    page = (H100.parents[2] / "examples" / "plot_05_compare.py").read_text()
    assert 'facts.autotuned_gemms(runs.get("compile-max-autotune"), runs["eager"])' in page


# ------------------------------------------------------------------ two runs
# Chapters 5 and 6 of an earlier H200 recording, run in two processes: Inductor's pointwise autotuning picked
# another launch for the compiled MLP's fused GeLU·mul kernel in each (kept from that recording).
TWO_RUNS = Path(__file__).parent / "data" / "two_runs_h200"


def test_the_launch_that_changed_between_two_runs_is_found():
    changed = changed_launches(Trace.load(TWO_RUNS / "05_compare.compile.trace.json.gz"),
                               Trace.load(TWO_RUNS / "06_fused.compiled.trace.json.gz"))
    assert [(a.kind, a.name == b.name, a.blocks, a.threads, b.blocks, b.threads) for a, b in changed] == [
        ("pointwise", True, 24576, 128, 49152, 256)]
    assert changed_launches(trace(H100, "05_compare.compile"), trace(H100, "06_fused.compiled")) == []


def test_a_ranking_change_and_the_variant_that_moved():
    s = lambda m: Spread(m, m - 0.1, m + 0.1, 7)  # noqa: E731
    before = {"a": s(100.0), "b": s(110.0), "c": s(120.0)}
    after = {"a": s(130.0), "b": s(110.3), "c": s(120.0)}
    assert ranking_changes(before, after) == [("a", "b", "faster", "slower"), ("a", "c", "faster", "slower")]
    assert mover("b", "a", before, after) == "a"
    assert ranking_changes(before, before) == []


@pytest.mark.parametrize("gpu", GPUS, ids=lambda p: p.name)
def test_chapter_6_says_which_run_its_numbers_come_from_and_what_moved(gpu):
    earlier = {n: recording(gpu, f"05_compare.{n}")
               for n in ("bench", "eager", "compile", "compile-max-autotune", "liger")}
    mine = {"bench": recording(gpu, "06_fused.bench"), "compile": recording(gpu, "06_fused.compiled")}
    shown = ["eager", "compile", "compile-max-autotune", "liger", "fused-pingpong"]
    lines = facts.two_runs({"chapter 5": earlier, "chapter 6": mine}, shown).sentences
    dates = [r.run["date"] for r in (earlier["bench"], mine["bench"])]
    if earlier["bench"].values["variants_us"] == mine["bench"].values["variants_us"]:
        # recorded in one process, as a live build runs them: chapter 6 reads the benchmark chapter 5 ran
        assert lines == [f"The benchmark above is chapter 5's run itself, recorded {dates[0][:10]} "
                         f"{dates[0][11:16]} UTC: both pages read one run."]
        return
    assert lines[0] == (f"Two runs of one benchmark: chapter 5's, recorded {dates[0][:10]} {dates[0][11:16]} UTC, "
                        f"and chapter 6's, recorded {dates[1][:10]} {dates[1][11:16]} UTC; the table above is "
                        "chapter 6's.")
    if gpu == H100:  # max-autotune slower than eager in chapter 5's run, faster in chapter 6's
        assert lines[1].startswith("Ranked otherwise: compile-max-autotune against eager, slower in chapter 5's "
                                   "run (275.3 against 262.8 µs) and faster in chapter 6's")
        assert lines[2].startswith("Only chapter 5's run kept a trace of compile-max-autotune")
    assert len(lines) == 3


def test_one_run_read_by_both_pages_and_no_run_to_compare_are_said():
    bench = recording(H100, "06_fused.bench")
    same = facts.two_runs({"chapter 5": {"bench": bench}, "chapter 6": {"bench": bench}}, ["eager"]).sentences
    assert same == [f"The benchmark above is chapter 5's run itself, recorded {bench.run['date'][:10]} "
                    f"{bench.run['date'][11:16]} UTC: both pages read one run."]
    missing = facts.two_runs({"chapter 5": {"bench": None}, "chapter 6": {"bench": bench}}, ["eager"]).sentences
    assert missing == ["Chapter 5's benchmark is not recorded on this GPU: no other run to compare this one with."]


def test_no_page_calls_two_runs_one():
    examples = H100.parents[2] / "examples"
    for page in examples.rglob("plot_*.py"):
        assert "the very run" not in page.read_text(), page.name
    assert "facts.two_runs(" in (examples / "plot_06_fused.py").read_text()
