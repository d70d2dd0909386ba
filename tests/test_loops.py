"""A loop of the program's: one op called many times a step, each call its own launches.

The verdict names it in the launch-overhead fix and re-times the step with the
loop's launches issued as one call each run (its Python between the calls gone
too). ``tests/data/loops/ema_per_parameter`` is an H200 training step followed by
a weight average kept one parameter at a time (200 calls a step); timed with the
profiler off, the loop cost 5.32 ms a step against one ``torch._foreach_lerp_``
(IQR 3.07 to 6.23).
"""

import json
from pathlib import Path

import pytest

from profiling_guide.analysis import launch_sources as L
from profiling_guide.analysis import verdict as V
from profiling_guide.analysis.causes import Cause
from profiling_guide.analysis.step_graph import step_graph
from profiling_guide.trace.model import Trace

DATA = Path(__file__).parent / "data"
EMA = DATA / "loops" / "ema_per_parameter.trace.json.gz"


def _loops(path: Path) -> list[list[L.Loop]]:
    trace = Trace.load(path)
    steps, _ = V.complete_steps(trace.steps)
    return [L.called_in_a_loop(step_graph(trace, s)) for s in steps]


def test_a_per_parameter_loop_is_found_with_its_calls_and_launches():
    for loops in _loops(EMA):
        assert [(lp.op, lp.label, lp.calls, lp.launches) for lp in loops] == [
            ("aten::mul_", None, 200, 200), ("aten::add_", None, 200, 200)]
    # a loop of 300 torch.add in a label
    for loops in _loops(DATA / "corpus" / "h200" / "profiler_cost_add.trace.json.gz"):
        assert [(lp.op, lp.label, lp.calls) for lp in loops] == [("aten::add", "work", 300)]


def test_a_model_whose_ops_are_each_called_a_few_times_has_no_loop():
    # a small GPT: 4 blocks, each op a handful of times a step; its backward's nodes are the autograd engine's
    assert _loops(DATA / "corpus" / "h200" / "gpt_eager.trace.json.gz") == [[], [], []]


def test_the_loops_launches_issued_as_one_call_save_about_what_foreach_saved():
    trace = Trace.load(EMA)
    verdict = V.verdict_of(trace, V.complete_steps(trace.steps)[0])
    loop = next(w for w in verdict.what_if if w.cause is Cause.LAUNCH_OVERHEAD and w.where.op == "aten::mul_")
    label = json.loads(EMA.with_name("ema_per_parameter.label.json").read_text())
    saving = label["saving_ms"]
    # measured 5.32 ms (IQR 3.07 to 6.23); its Python between the calls counts: the launches alone save less
    assert saving["q1"] <= loop.saving_ms <= saving["q3"], (loop.saving_ms, saving)
    assert "torch._foreach_" in loop.fix and "200 times a step" in loop.fix
    # the whole step's launch overhead (CUDA graphs) is larger still, and its fix names the loop first
    assert verdict.what_if[0].cause is Cause.LAUNCH_OVERHEAD and verdict.what_if[0].saving_ms > loop.saving_ms
    assert "a loop of the program's, aten::mul_ and aten::add_, each called 200 times a step (400 launches" \
        in verdict.what_if[0].fix


def test_a_loop_over_a_models_layers_gets_the_compiled_or_graphed_fix_too():
    # 64 Linear + ReLU layers in a Python loop: each call needs the one before, so one op over all their tensors
    # cannot stand for it; the fix says so
    trace = Trace.load(DATA / "corpus" / "h200" / "launch_overhead_64.trace.json.gz")
    verdict = V.verdict_of(trace, V.complete_steps(trace.steps)[0])
    first = verdict.what_if[0]
    assert first.cause is Cause.LAUNCH_OVERHEAD and first.where.op == "aten::linear"
    assert "independent of one another" in first.fix and "compiled or captured in a CUDA graph" in first.fix


@pytest.mark.parametrize("calls", [L.LOOP_CALLS - 1, L.LOOP_CALLS])
def test_a_loop_is_an_op_called_at_least_loop_calls_times(calls):
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0, "dur": 20.0 * calls + 100,
               "tid": 1, "pid": 1}]
    for i in range(calls):
        t, c = 10.0 + 20 * i, 1000 + i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mul_", "ts": t, "dur": 8.0, "tid": 1, "pid": 1, "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 2, "dur": 4.0, "tid": 1,
             "pid": 1, "args": {"correlation": c}},
            {"ph": "X", "cat": "kernel", "name": "void mul_kernel(float*)", "ts": t + 8, "dur": 2.0, "tid": 7,
             "pid": 0, "args": {"correlation": c, "stream": 7}},
        ]
    trace = Trace({"traceEvents": events})
    loops = L.called_in_a_loop(step_graph(trace, trace.steps[0]))
    assert [(lp.op, lp.calls) for lp in loops] == ([("aten::mul_", calls)] if calls >= L.LOOP_CALLS else [])


def test_a_loops_what_if_takes_the_backward_nodes_linked_to_its_calls():
    # a loss computed sample by sample (128 cross-entropies in 'loss'): each call's backward nodes are linked to it
    # in the trace, and one call over the batch would have one; without those links the what-if keeps the
    # backward's 128 × their launches
    from profiling_guide.analysis.critical_path import observed_timing, simulate

    path = DATA / "loops" / "per_sample_loss.trace.json.gz"
    trace = Trace.load(path)
    steps, _ = V.complete_steps(trace.steps)
    g = step_graph(trace, steps[0])
    loops = L.called_in_a_loop(g)
    assert (loops[0].op, loops[0].label, loops[0].calls) == ("aten::cross_entropy_loss", "loss", 128)
    calls = frozenset().union(*(lp.owners for lp in loops))
    assert sum(1 for forward in g.backward_of.values() if forward in calls) >= 128
    timing = observed_timing(g)
    with_backward = simulate(g, V._loop_as_one(g, timing, calls)).period_us
    g.backward_of = {}
    forward_only = simulate(g, V._loop_as_one(g, timing, calls)).period_us
    assert with_backward < forward_only - 1000.0 and forward_only < simulate(g, timing).period_us
    # the verdict names the loop, where the reader put it
    verdict = V.verdict_of(trace, steps).verdict
    assert (verdict.cause, verdict.where.op, verdict.where.label) == (
        Cause.LAUNCH_OVERHEAD, "aten::cross_entropy_loss", "loss")
    label = json.loads(path.with_name("per_sample_loss.label.json").read_text())
    assert label["saving_ms"]["median"] > 25.0
