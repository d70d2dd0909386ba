"""One pace verdict per variant and GPU: every page that profiles a variant states the same one.

Built from the recordings the pages read (``docs/recordings/<gpu>/``), through
the function the pages call (:func:`profiling_guide.pages.verdicts.verdict_of`).
"""

import ast
import functools
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

from profiling_guide.analysis.gaps import Cause, gaps_of
from profiling_guide.analysis.pace_verdict import Bound, Measurement, PaceVerdict, pooled_bound
from profiling_guide.pages import verdicts
from profiling_guide.pages.recordings import Recording, default_root
from profiling_guide.spread import Spread
from profiling_guide.trace.run_record import read_run_record

ROOT = default_root()
# One GPU's recordings: a chapter of several ranks (<gpu>-x<n>/) states each rank's pace from the run analysis.
GPUS = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not re.search(r"-x\d+$", p.name))
EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").rglob("plot_*.py"))


@functools.cache
def recording(gpu: str, name: str) -> Recording:
    folder = ROOT / gpu
    return Recording(name, folder, read_run_record(folder / f"{name}.run.json"))


@functools.cache
def verdict(gpu: str, name: str) -> PaceVerdict:
    """:func:`verdicts.verdict_of` the recording, worked out once for every test here."""
    return verdicts.verdict_of(recording(gpu, name))


def timed_recordings(gpu: str) -> list[str]:
    """The recordings of ``gpu`` with a trace and a profiler-off CPU issue time: each is a pace verdict's evidence."""
    names = []
    for run in sorted((ROOT / gpu).glob("*.run.json")):
        name = run.name.removesuffix(".run.json")
        timings = read_run_record(run).get("timings") or {}
        if "cpu_issue_us" in timings and (ROOT / gpu / f"{name}.trace.json.gz").is_file():
            names.append(name)
    return names


def test_there_are_recordings_of_two_gpus():
    assert len(GPUS) >= 2 and all(timed_recordings(gpu) for gpu in GPUS)


@pytest.mark.parametrize("gpu", GPUS)
def test_every_timed_recording_names_the_variant_it_measures(gpu):
    unnamed = [name for name in timed_recordings(gpu) if name not in verdicts.VARIANTS]
    assert not unnamed, f"{gpu}: add these recordings to pages/verdicts.py VARIANTS: {unnamed}"


@pytest.mark.parametrize("gpu", GPUS)
def test_a_variant_gets_one_verdict_on_every_page_of_a_gpu(gpu):
    by_variant = defaultdict(dict)
    for name in timed_recordings(gpu):
        by_variant[verdicts.VARIANTS[name]][name] = verdict(gpu, name).bound
    assert any(len(pages) > 1 for pages in by_variant.values()), "no variant is profiled on two pages"
    split = {variant: pages for variant, pages in by_variant.items() if len(set(pages.values())) > 1}
    assert not split, f"{gpu}: pages disagree about {split}"


@pytest.mark.parametrize("gpu", GPUS)
def test_a_verdict_is_never_firmer_than_every_measurement_of_it(gpu):
    for name in timed_recordings(gpu):
        v = verdict(gpu, name)
        if v.bound is not Bound.TIE:
            assert all(m.bound is v.bound for m in v.measurements), (name, [m.bound for m in v.measurements])
        assert any(m.source == name for m in v.measurements), f"{name}'s own measurement was left out"


def _spread(median, q1, q3):
    return Spread(median, q1, q3, 7)


def test_measurements_that_disagree_pool_into_a_tie():
    device = _spread(220.0, 219.0, 221.0)
    ahead = Measurement("a", _spread(150.0, 148.0, 152.0), device)
    behind = Measurement("b", _spread(260.0, 255.0, 265.0), device)
    assert (ahead.bound, behind.bound) == (Bound.DEVICE, Bound.OVERHEAD)
    assert pooled_bound([ahead]) is Bound.DEVICE
    assert pooled_bound([ahead, behind]) is Bound.TIE
    assert pooled_bound([]) is Bound.TIE


def test_no_chapter_decides_a_pace_verdict_of_its_own():
    # pages state the verdict through pages.verdicts; a page calling the deciding functions itself
    # could contradict the one another page states for the same variant
    own = {"pace_of", "unprofiled_bound", "pace_unprofiled", "pace", "summarize_step"}
    for example in EXAMPLES:
        for node in ast.walk(ast.parse(example.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "profiling_guide.analysis.pace":
                used = own & {alias.name for alias in node.names}
                assert not used, f"{example.name} imports {used} from analysis.pace: use pages.verdicts.pace_facts"


@pytest.mark.parametrize("gpu", GPUS)
def test_where_another_gpu_differs_the_page_says_why_in_one_sentence(gpu):
    differ = 0
    for name in timed_recordings(gpu):
        rec = recording(gpu, name)
        here = verdict(gpu, name).bound
        sentences = verdicts.pace_facts(rec).sentences
        for other, theirs in verdicts.other_gpus(rec).items():
            said = [s for s in sentences if s.startswith(f"On the {other} ")]
            if theirs and pooled_bound(theirs) is not here:
                differ += 1
                assert len(said) == 1 and pooled_bound(theirs).value.split("-")[0] in said[0], (name, said)
            else:
                assert not said, (name, said)
    assert differ, "no variant's verdict differs between the GPUs: the sentence is untested"


@pytest.mark.parametrize("gpu", GPUS)
def test_a_steps_busy_and_idle_time_add_up_to_its_window(gpu):
    for name in timed_recordings(gpu):
        g = gaps_of(recording(gpu, name).trace)
        idle = g.total_idle_us - g.idle_us[Cause.COLLECTIVE]
        assert math.isclose(g.busy_us + idle, g.window_us, rel_tol=1e-9, abs_tol=1e-3), name
        assert g.last_device_us <= g.window_us + 1e-6 and g.step_us <= g.window_us + 1e-6


def test_chapter_8s_sync_time_is_the_loops_own_synchronize_at_each_steps_end():
    g = gaps_of(recording("nvidia-h100-80gb-hbm3", "08_own_model.train").trace)
    assert g.sync_call_us > 1000 and g.end_sync_us == pytest.approx(g.sync_call_us)
    assert g.idle_us[Cause.SYNC] == 0 and g.main is Cause.HOST


def test_the_pace_line_labels_the_step_and_its_last_device_work_apart():
    # chapter 1's eager step: the profiler step is longer than the time to its last kernel's end
    v = verdict("nvidia-h100-80gb-hbm3", "01_linear.eager")
    assert v.gaps.last_device_us < v.gaps.step_us
    trace_line = verdicts.trace_sentences(v)[0]
    assert f"{v.gaps.step_us:,.1f} µs profiled step" in trace_line
    assert f"ended {v.gaps.last_device_us:,.1f} µs after its start" in trace_line


@pytest.mark.parametrize("gpu", GPUS)
def test_a_page_states_the_profiler_off_verdict_first_and_links_the_profilers_cost(gpu):
    linked = 0
    for name in timed_recordings(gpu):
        rec = recording(gpu, name)
        v = verdict(gpu, name)
        facts = verdicts.pace_facts(rec)
        lead = f"{verdicts.LEAD[v.bound]} ({v.bound.value}: {verdicts.CAUSE_OF[v.bound]})"
        assert facts.sentences[0].startswith(lead), name
        html = facts._repr_html_()
        if v.bound is not Bound.OVERHEAD and v.gaps.main is Cause.HOST:  # the gaps are the profiler's
            assert f'href="{verdicts.PROFILER_COST}"' in html, name
            linked += 1
    assert linked, "no page blames its gaps on the profiler: the link is untested"


@pytest.mark.parametrize("gpu", GPUS)
def test_a_box_whose_critical_path_names_another_cause_than_its_pace_says_why(gpu):
    """The profiler-off pace (gpu_compute or launch_overhead) and the critical path's verdict in one box: where
    they name different causes, the box says why (the loop's own sync, or how the two are timed); where the path
    names the loop's own synchronize, the box says it is the loop's."""
    explained = 0
    for name in timed_recordings(gpu):
        rec = recording(gpu, name)
        v = verdict(gpu, name)
        engine = verdicts.engine_verdict(rec)
        text = " ".join(verdicts.pace_facts(rec).sentences)
        if engine.verdict is None or v.bound not in verdicts.PACE_CAUSE:
            continue
        if verdicts.is_loop_sync(engine.verdict):
            assert "the loop's own torch.cuda.synchronize() after each step" in text, name
        elif engine.verdict.cause is not verdicts.PACE_CAUSE[v.bound]:
            assert "is the slower side, yet the profiled loop's path names" in text, name
            explained += 1
        else:
            assert "is the slower side, yet" not in text, name
    assert gpu != "nvidia-h200" or explained, "no H200 box disagrees: the explanation is untested"


# --------------------------------------------------------------- the idle time's causes, on made-up steps
def _step(*work, syncs=()):
    """A step from 0 to 100 µs: ``work`` is (name, launch start, launch end, kernel start, kernel end)."""
    from profiling_guide.trace.model import DeviceEvent, RuntimeCall, Step

    step = Step(1, 0.0, 100.0)
    for name, l0, l1, k0, k1 in work:
        launch = RuntimeCall("cudaLaunchKernel", l0, l1 - l0, 1, "cuda_runtime", None)
        step.device_events.append(DeviceEvent(name, k0, k1 - k0, 7, "kernel", None, {}, launch=launch))
        step.runtime_calls.append(launch)
    step.runtime_calls += [RuntimeCall("cudaStreamSynchronize", s0, s1 - s0, 1, "cuda_runtime", None)
                           for s0, s1 in syncs]
    return step


def test_a_gap_after_a_synchronizing_call_is_blamed_on_it():
    from profiling_guide.analysis.gaps import step_gaps

    # kernel a runs 10-40; the host waits in a sync until 41, launches b at 50-52; b runs 55-60
    g = step_gaps(_step(("a", 0, 5, 10, 40), ("b", 50, 52, 55, 60), syncs=[(20, 41)]))
    assert g.idle_us[Cause.SYNC] == pytest.approx(15) and g.idle_us[Cause.HOST] == pytest.approx(10 + 40)
    assert g.busy_us == pytest.approx(35) and g.main is Cause.HOST


def test_work_launched_before_the_gpu_idled_waited_on_something_else():
    from profiling_guide.analysis.gaps import step_gaps

    # b's launch returned at 8, long before a ended at 40; b still started only at 70
    g = step_gaps(_step(("a", 0, 5, 10, 40), ("b", 6, 8, 70, 90)))
    assert g.idle_us[Cause.QUEUED] == pytest.approx(30) and g.idle_us[Cause.SYNC] == 0


def test_a_collective_alone_on_the_gpu_counts_apart_from_compute():
    from profiling_guide.analysis.gaps import step_gaps

    g = step_gaps(_step(("gemm", 0, 2, 5, 30), ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 3, 4, 20, 60)))
    assert g.busy_us == pytest.approx(25) and g.idle_us[Cause.COLLECTIVE] == pytest.approx(30)
