"""The verdict engine on small hand-made traces: each cause found from the trace's facts alone."""

from profiling_guide.analysis.causes import Cause
from profiling_guide.analysis.verdict import verdict_of
from profiling_guide.pages.verdict_sentences import verdict_sentence
from profiling_guide.trace.model import Trace


def _events(steps: int, step_us: float, body) -> list[dict]:
    """``steps`` ProfilerSteps of ``step_us`` on thread 1, each filled by ``body(start, corr)`` → events."""
    events, corr = [], [100]
    for i in range(steps):
        start = 1000.0 + i * step_us
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "ts": start,
                       "dur": step_us, "tid": 1, "pid": 1})
        events += body(start, corr)
    return events


def _launch(t: float, corr: list, kernel_us: float, stream: int = 7, delay: float = 5.0,
            name: str = "void gemm_kernel(float*)") -> list[dict]:
    corr[0] += 1
    c = corr[0]
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t, "dur": 10.0, "tid": 1, "pid": 1, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 2, "dur": 6.0, "tid": 1, "pid": 1,
         "args": {"correlation": c}},
        {"ph": "X", "cat": "kernel", "name": name, "ts": t + 2 + delay, "dur": kernel_us, "tid": stream, "pid": 0,
         "args": {"correlation": c, "stream": stream}},
    ]


def _device_sync(ts: float, dur: float, corr: list) -> dict:
    """A cudaDeviceSynchronize on thread 1 (the host waits for the GPU)."""
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": ts, "dur": dur, "tid": 1,
            "pid": 1, "args": {"correlation": corr[0] + 500}}


def test_a_trace_without_device_work_says_what_to_record():
    trace = Trace(_events(3, 500.0, lambda start, corr: [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": start + 10, "dur": 50.0, "tid": 1, "pid": 1}]))
    v = verdict_of(trace, trace.steps)
    assert v.verdict is None and "ProfilerActivity.CUDA" in v.missing
    assert verdict_sentence(v).startswith("No verdict: the trace holds no device activity")


def test_a_sync_after_each_kernel_is_the_cause_and_removing_it_lets_the_host_run_ahead():
    # each step: the host issues two kernels of 300 µs, waits for them (cudaStreamSynchronize), then spends
    # 250 µs in Python before the next step: with the sync the GPU idles those 250 µs, without it it does not
    def body(start, corr):
        out = _launch(start + 10, corr, 300.0) + _launch(start + 30, corr, 300.0, delay=290.0)
        gpu_end = start + 30 + 2 + 290 + 300
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": start + 45,
                    "dur": gpu_end + 3 - (start + 45), "tid": 1, "pid": 1, "args": {"correlation": corr[0] + 500}})
        return out

    trace = Trace(_events(3, 900.0, body))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.HOST_SYNC
    assert v.verdict.saving_ms > 0.2  # the 250 µs of Python now overlap the next step's kernels
    assert v.verdict.predicted_step_ms < v.verdict.step_ms


def _kernel_sync_launches(kernel_us: float, sync: tuple[float, float], small: int, first_at: float):
    """A step's body: one kernel of ``kernel_us`` at 10 µs, a cudaDeviceSynchronize (start, length), then
    ``small`` 5 µs kernels issued 50 µs apart from ``first_at``."""
    def body(start, corr):
        out = _launch(start + 10, corr, kernel_us)
        out.append(_device_sync(start + sync[0], sync[1], corr))
        for k in range(small):
            out += _launch(start + first_at + 50 * k, corr, 5.0)
        return out

    return body


def test_a_sync_in_a_step_the_host_paces_is_charged_only_its_wait():
    # each step: one 20 µs kernel, a sync that waits a few µs for it, then twenty 5 µs kernels issued 50 µs
    # apart. The host sets the pace: without the sync it would have issued the same twenty launches as slowly,
    # so the refill after the sync is the host's pace (launch overhead), not the sync's, beyond the sync's wait
    trace = Trace(_events(3, 1100.0, _kernel_sync_launches(20.0, (30.0, 10.0), 20, 50.0)))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.LAUNCH_OVERHEAD
    assert v.path_ms.get(Cause.HOST_SYNC, 0.0) < 0.05 < v.path_ms[Cause.LAUNCH_OVERHEAD], v.path_ms
    assert "Faster kernels would barely shorten this step" in verdict_sentence(v)


def test_a_sync_that_gets_half_as_far_as_graphing_the_step_is_named_first():
    # each step: a 400 µs kernel, a sync that waits for it, then twelve 5 µs kernels issued 50 µs apart. Without
    # the sync the host issues those twelve while the long kernel runs (about 0.4 ms saved); graphing the whole
    # step saves more (about 0.5 ms: the twelve launches cost nothing, the sync stays). The sync is the smaller
    # change and gets more than half as far: it comes first, the graphs after it as the larger change.
    from profiling_guide.analysis.verdict import PLACE_SHARE

    def body(start, corr, label="train_step"):
        out = [{"ph": "X", "cat": "user_annotation", "name": label, "ts": start + 5, "dur": 1040.0, "tid": 1,
                "pid": 1}] if label else []
        return out + _kernel_sync_launches(400.0, (20.0, 394.0), 12, 430.0)(start, corr)

    trace = Trace(_events(3, 1100.0, body))
    v = verdict_of(trace, trace.steps)
    graphs = next(w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD)  # the step's, named for its label
    assert v.verdict.cause is Cause.HOST_SYNC and v.verdict.where.label == "train_step", v.what_if
    assert PLACE_SHARE * graphs.saving_ms <= v.verdict.saving_ms < graphs.saving_ms, (v.verdict, graphs)
    assert "More, with a larger change: launch overhead in 'train_step'" in verdict_sentence(v)
    # outside every label the synchronize is the loop's own, the harness that times the step: the larger saving
    # comes first
    bare = Trace(_events(3, 1100.0, lambda start, corr: body(start, corr, label=None)))
    assert verdict_of(bare, bare.steps).verdict.cause is Cause.LAUNCH_OVERHEAD


def test_kernels_back_to_back_with_the_host_ahead_are_the_gpus_own_work():
    # the host issues a step's four 400 µs kernels in 100 µs and goes on: they queue, and run back to back
    gpu = [1005.0]

    def body(start, corr):
        out = []
        for k in range(4):
            t = start + 10 + 20 * k
            out += _launch(t, corr, 400.0, delay=max(gpu[0] - (t + 2), 5.0))
            gpu[0] = max(gpu[0], t + 7) + 400.0
        return out

    trace = Trace(_events(3, 100.0, body))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.GPU_COMPUTE and len(v.what_if) == 1
    assert "GPU's own work sets the pace" in verdict_sentence(v)


def _compute_then_all_reduce(grid: list | None) -> list[dict]:
    # each step: a 400 µs GEMM, then a 400 µs all-reduce after it on the same stream, the host far ahead
    gpu = [1005.0]
    name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

    def body(start, corr):
        out = []
        for k, kernel in enumerate(("void gemm_kernel(float*)", name)):
            t = start + 10 + 20 * k
            out += _launch(t, corr, 400.0, delay=max(gpu[0] - (t + 2), 5.0), name=kernel)
            gpu[0] = max(gpu[0], t + 7) + 400.0
            if grid is not None and kernel == name:
                out[-1]["args"]["grid"] = grid
        return out

    return _events(3, 100.0, body)


def test_hidden_communication_keeps_the_share_of_the_gpu_its_blocks_hold():
    # 25 blocks of 100 multiprocessors: hidden behind compute, the all-reduce still takes a quarter of the GPU
    # for its 400 µs, so the step goes from 800 to about 500 µs, not to the 400 of the GEMM alone
    trace = Trace({"traceEvents": _compute_then_all_reduce([25, 1, 1]), "deviceProperties": [{"numSms": 100}]})
    v = verdict_of(trace, trace.steps)
    exposed = next(w for w in v.what_if if w.cause is Cause.EXPOSED_COMMUNICATION)
    assert abs(exposed.step_ms - 0.8) < 0.02 and abs(exposed.predicted_step_ms - 0.5) < 0.02
    # without the multiprocessors or the grid in the trace, hiding it is taken as free (the most it can save)
    for events, props in ((_compute_then_all_reduce([25, 1, 1]), []), (_compute_then_all_reduce(None), [{"numSms": 100}])):
        trace = Trace({"traceEvents": events, "deviceProperties": props})
        exposed = next(w for w in verdict_of(trace, trace.steps).what_if if w.cause is Cause.EXPOSED_COMMUNICATION)
        assert abs(exposed.predicted_step_ms - 0.4) < 0.02


def test_two_fixes_that_save_about_as_much_are_named_as_a_tie():
    # the corpus's H200 step with .item() after every second block: the syncs and the host's launches each cost
    # about 1.7 ms of a 6 ms step, closer than the estimate's precision, so the sentence names both, the fix at one
    # place (the syncs) first
    from pathlib import Path

    from profiling_guide.analysis.verdict import TIE

    path = Path(__file__).resolve().parent / "data" / "corpus" / "h200" / "host_sync_every2.trace.json.gz"
    trace = Trace.load(path)
    v = verdict_of(trace, trace.steps)
    first, second = v.what_if[:2]
    assert abs(first.saving_ms - second.saving_ms) <= TIE * first.step_ms
    assert (first.cause, second.cause) == (Cause.HOST_SYNC, Cause.LAUNCH_OVERHEAD)
    text = verdict_sentence(v)
    assert "About as much: launch overhead" in text and "a tie" in text, text


def test_a_harness_synchronize_after_each_step_is_not_the_programs():
    # chapter 6b's eager step on the H200: the chapter synchronizes after each step, outside the step's label; its
    # run record says which label is the step, so that synchronize is the harness's, not a fix for the program
    from pathlib import Path

    from profiling_guide.analysis.trace_report import analyse
    from profiling_guide.trace.run_record import run_record_beside

    path = (Path(__file__).resolve().parents[1] / "docs" / "recordings" / "nvidia-h200"
            / "06b_training_step.eager.trace.json.gz")
    trace = Trace.load(path)
    assert any(c.name == "cudaDeviceSynchronize" for s in trace.steps for c in s.runtime_calls)
    v = analyse(trace, run_record=run_record_beside(path)).verdict
    assert v.what_if and not any(w.cause is Cause.HOST_SYNC for w in v.what_if), v.what_if
    assert "cudaDeviceSynchronize" not in verdict_sentence(v)


def _two_regions(start, corr):
    # 'forward': 4 launches; the optimizer's step: 12, each 50 µs of host for a 5 µs kernel (host-bound)
    out = [{"ph": "X", "cat": "user_annotation", "name": "forward", "ts": start + 5, "dur": 205.0, "tid": 1,
            "pid": 1}]
    for k in range(4):
        out += _launch(start + 10 + 50 * k, corr, 5.0)
    out.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": start + 215,
                "dur": 605.0, "tid": 1, "pid": 1})
    for k in range(12):
        out += _launch(start + 220 + 50 * k, corr, 5.0)
    return out


def test_launch_overhead_is_re_timed_per_region_and_an_optimizers_gets_its_own_fix():
    from profiling_guide.analysis.verdict import OPTIMIZER_FIX, PLACE_SHARE

    trace = Trace(_events(3, 850.0, _two_regions))
    v = verdict_of(trace, trace.steps)
    launch = [w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD]
    whole = next(w for w in launch if w.where.label is None)
    optimizer = next(w for w in launch if w.where.label == "Optimizer.step#SGD.step")
    # the optimizer's launches alone: most of the saving, not all of it (the forward's stay)
    assert PLACE_SHARE * whole.saving_ms < optimizer.saving_ms < 0.9 * whole.saving_ms, (whole, optimizer)
    assert optimizer.fix == OPTIMIZER_FIX and "fused=True" in optimizer.fix
    # at least half as far with one flag: the smaller change is named first, the whole step's graphs after it
    assert v.verdict is optimizer and v.what_if[1] is whole
    assert "More, with a larger change: launch overhead across the step" in verdict_sentence(v)
    # the same saving behind the generic fix (CUDA graphs for one region) is no smaller a change: the step first
    generic = Trace(_events(3, 850.0, lambda start, corr: [
        {**e, "name": "update"} if e.get("name") == "Optimizer.step#SGD.step" else e
        for e in _two_regions(start, corr)]))
    assert verdict_of(generic, generic.steps).verdict.where.label is None
    # an optimizer that runs for-each kernels already is not told to fuse: the plain fix, and the step first
    def foreach(start, corr):
        return [{**e, "name": "aten::_foreach_add_"} if e.get("cat") == "cpu_op" and e["ts"] >= start + 215 else e
                for e in _two_regions(start, corr)]

    fused = Trace(_events(3, 850.0, foreach))
    v = verdict_of(fused, fused.steps)
    region = next(w for w in v.what_if if w.where.label == "Optimizer.step#SGD.step")
    assert region.fix != OPTIMIZER_FIX and v.verdict.where.label is None, v.what_if


def test_a_region_that_holds_the_steps_launch_overhead_is_named_for_it():
    def body(start, corr):
        out = [{"ph": "X", "cat": "user_annotation", "name": "mlp_fwd", "ts": start + 5, "dur": 810.0, "tid": 1,
                "pid": 1}]
        for k in range(16):
            out += _launch(start + 10 + 50 * k, corr, 5.0)
        return out

    trace = Trace(_events(3, 850.0, body))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.LAUNCH_OVERHEAD and v.verdict.where.label == "mlp_fwd"
    assert sum(w.cause is Cause.LAUNCH_OVERHEAD for w in v.what_if) == 1


def test_a_sync_to_learn_a_shape_is_named_for_the_op_and_gets_its_fix():
    # boolean-mask indexing: aten::index runs aten::nonzero, which waits for the GPU (the two kernels before it)
    # to learn how many elements it keeps; then 250 µs of Python before the next step
    from profiling_guide.analysis.verdict import DATA_SHAPE_FIX

    def body(start, corr):
        out = _launch(start + 10, corr, 300.0) + _launch(start + 30, corr, 300.0, delay=290.0)
        gpu_end = start + 30 + 2 + 290 + 300
        out.append({"ph": "X", "cat": "cpu_op", "name": "aten::index", "ts": start + 44, "dur": gpu_end + 6 - (start + 44),
                    "tid": 1, "pid": 1, "args": {}})
        out.append({"ph": "X", "cat": "cpu_op", "name": "aten::nonzero", "ts": start + 45,
                    "dur": gpu_end + 4 - (start + 45), "tid": 1, "pid": 1, "args": {}})
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": start + 46,
                    "dur": gpu_end + 3 - (start + 46), "tid": 1, "pid": 1, "args": {"correlation": corr[0] + 500}})
        return out

    trace = Trace(_events(3, 900.0, body))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.HOST_SYNC and v.verdict.where.op == "aten::nonzero", v.verdict
    assert v.verdict.fix == DATA_SHAPE_FIX and "torch.where" in verdict_sentence(v)


def test_a_small_read_back_to_pageable_memory_is_a_sync_and_a_large_one_a_copy():
    # .cpu() of a metric after two 300 µs kernels: the copy call waits for them, then moves its bytes. Of 16 KiB
    # it is a sync (the bytes take a microsecond); of 64 MiB it is a copy (the bytes take milliseconds)
    def make(nbytes, copy_us):
        def body(start, corr):
            out = _launch(start + 10, corr, 300.0) + _launch(start + 30, corr, 300.0, delay=290.0)
            gpu_end = start + 30 + 2 + 290 + 300
            corr[0] += 1
            out += [
                {"ph": "X", "cat": "cpu_op", "name": "aten::to", "ts": start + 44, "dur": gpu_end + copy_us + 8 - (start + 44),
                 "tid": 1, "pid": 1, "args": {}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": start + 45,
                 "dur": gpu_end + copy_us + 4 - (start + 45), "tid": 1, "pid": 1, "args": {"correlation": corr[0]}},
                {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "ts": gpu_end + 1,
                 "dur": copy_us, "tid": 7, "pid": 0, "args": {"correlation": corr[0], "stream": 7, "bytes": nbytes}},
            ]
            return out
        trace = Trace(_events(3, 900.0 + copy_us, body))
        return verdict_of(trace, trace.steps)

    small = make(16 << 10, 2.0)
    assert small.verdict.cause is Cause.HOST_SYNC and small.verdict.where.op == "aten::to", small.verdict
    large = make(64 << 20, 3500.0)
    assert large.verdict.cause is Cause.MEMCPY, large.verdict


def test_where_every_region_saves_what_the_step_saves_the_step_is_named_and_no_region_ties_with_it():
    # a 600 µs kernel first caps what any launch fix saves: graphing either region alone saves as much as
    # graphing the whole step, so neither is "the" step's launch overhead, and neither is a rival fix to it
    def body(start, corr):
        return _launch(start + 2, corr, 600.0) + _two_regions(start, corr)

    trace = Trace(_events(3, 850.0, body))
    v = verdict_of(trace, trace.steps)
    launch = [w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD]
    assert [w.where.label for w in launch] == [None], launch  # across the step, said once
    assert "a tie" not in verdict_sentence(v), verdict_sentence(v)


def _cpu_ops_then_kernels(name):
    # each step: thirty CPU ops of 100 µs in a row that launch nothing (a DataLoader's transforms on the training
    # thread, each far under the 1 ms of a host gap), then four 300 µs kernels issued 10 µs apart
    def body(start, corr):
        out = [{"ph": "X", "cat": "cpu_op", "name": name, "ts": start + 10 + 101 * k, "dur": 100.0, "tid": 1,
                "pid": 1, "args": {}} for k in range(30)]
        for k in range(4):
            out += _launch(start + 3100 + 10 * k, corr, 300.0)
        return out

    return Trace(_events(3, 4400.0, body))


def test_many_short_cpu_ops_in_a_row_are_a_host_gap_not_launch_overhead():
    from profiling_guide.analysis.verdict import CPU_OP_FIX

    trace = _cpu_ops_then_kernels("aten::normal_")
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.HOST_GAP and v.verdict.where.op == "aten::normal_", v.what_if
    assert v.verdict.predicted_step_ms < 0.5 * v.verdict.step_ms
    assert v.verdict.fix == CPU_OP_FIX and "device='cuda'" in verdict_sentence(v)  # torch's op, on the CPU
    # the autograd engine's own ops in a row are its bookkeeping (a compiled backward's AccumulateGrad): the pace
    # of the framework, launch overhead, unless one alone is long
    trace = _cpu_ops_then_kernels("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad")
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.LAUNCH_OVERHEAD
    assert not any(w.cause is Cause.HOST_GAP and (w.where.op or "").startswith("autograd::") for w in v.what_if)


def test_a_stall_in_one_step_of_three_is_averaged_over_the_steps_as_a_timer_sees_it():
    # three steps of four 300 µs kernels issued 10 µs apart, then the loop's synchronize; before the third step's
    # launches the host waits 20 ms
    # with nothing recorded (a DataLoader whose workers fell behind). The median step hides it; a timer over many
    # such steps counts a third of it in each
    def events(stall_us):
        out, corr, start = [], [100], 1000.0
        for i in range(3):
            pause = stall_us if i == 2 else 0.0
            dur = 1300.0 + pause
            out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "ts": start,
                        "dur": dur, "tid": 1, "pid": 1})
            for k in range(4):
                out += _launch(start + pause + 10 + 10 * k, corr, 300.0)
            # the loop's synchronize after each step waits for the four kernels
            out.append(_device_sync(start + pause + 60, 1235.0, corr))
            start += dur
        return out

    trace = Trace(events(20000.0))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.HOST_GAP, v.what_if
    assert v.verdict.where.op is None and "(with_stack=True names it)" in v.verdict.fix  # nothing recorded there
    assert abs(v.verdict.step_ms - (3 * 1.3 + 20) / 3) < 0.3, v.verdict  # the mean step, stall included
    assert abs(v.verdict.predicted_step_ms - 1.3) < 0.15, v.verdict
    assert any("1 of 3 steps took much longer" in n for n in v.notes), v.notes
    # the same steps without the stall: alike, pooled by their median, no host gap
    trace = Trace(events(0.0))
    v = verdict_of(trace, trace.steps)
    assert not any(w.cause is Cause.HOST_GAP for w in v.what_if) and abs(v.verdict.step_ms - 1.3) < 0.1, v.what_if
    assert not any("much longer" in n for n in v.notes)


def test_a_dataloaders_host_gap_gets_the_fix_its_iterator_calls_for():
    # the corpus's two input stalls (H200): the batch made on the training thread, or workers behind
    from pathlib import Path

    from profiling_guide.analysis.verdict import LOADER_FIXES

    corpus = Path(__file__).parent / "data" / "corpus" / "h200"
    for case, iterator in (("loader_on_main_thread", "_SingleProcessDataLoaderIter"),
                           ("loader_workers_behind", "_MultiProcessingDataLoaderIter")):
        trace = Trace.load(corpus / f"{case}.trace.json.gz")
        v = verdict_of(trace, trace.steps).verdict
        assert v.cause is Cause.HOST_GAP and v.where.label.startswith(f"enumerate(DataLoader)#{iterator}"), v
        assert v.fix == LOADER_FIXES[f"enumerate(DataLoader)#{iterator}"], v.fix


def _sync_between_launches(kernel_us: float, label: str | None = "train_step"):
    """A step's body: a kernel of ``kernel_us``, ten 5 µs kernels, a cudaDeviceSynchronize that finds the GPU done
    or nearly, then twelve 5 µs kernels; every launch in a 28 µs aten::mm, 30 µs apart (the host sets the pace)."""
    def op(t, corr, dur, at):
        corr[0] += 1
        return [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t, "dur": 28.0, "tid": 1, "pid": 1, "args": {}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 10, "dur": 6.0, "tid": 1,
                 "pid": 1, "args": {"correlation": corr[0]}},
                {"ph": "X", "cat": "kernel", "name": "void gemm_kernel(float*)", "ts": at, "dur": dur, "tid": 7,
                 "pid": 0, "args": {"correlation": corr[0], "stream": 7}}]

    def body(start, corr):
        out = [{"ph": "X", "cat": "user_annotation", "name": label, "ts": start + 1, "dur": 898.0, "tid": 1,
                "pid": 1}] if label else []
        t, free = start + 5, start + 25 + kernel_us
        out += op(t, corr, kernel_us, start + 25)
        for k in range(22):
            t += 30
            if k == 10:
                wait = max(free + 3 - t, 4.0)
                out.append(_device_sync(t, wait, corr))
                t += wait + 1
            at = max(t + 20, free + 1)
            out += op(t, corr, 5.0, at)
            free = at + 5
        return out

    return body


def test_a_sync_the_profiler_hid_is_read_with_a_faster_host_and_named_first():
    # the host sets the pace under the profiler, so the sync finds the GPU nearly done: read as the trace shows it,
    # graphing the launches saves the most. Without the profiler the host runs ahead and the sync waits for the
    # long kernel: read with the host FAST_HOST times faster than estimated, the sync saves over half of what the
    # graphs then save, so it is named first, with that saving and a note
    from profiling_guide.analysis.verdict import FAST_HOST

    trace = Trace(_events(3, 900.0, _sync_between_launches(360.0)))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.HOST_SYNC and v.verdict.where.label == "train_step", v.what_if
    assert any(f"{FAST_HOST:g}× as fast as estimated" in note for note in v.notes), v.notes
    assert [w.cause for w in v.what_if].count(Cause.HOST_SYNC) == 1
    graphs = next(w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD)
    assert v.verdict.saving_ms < graphs.saving_ms
    assert "More, with a larger change: launch overhead" in verdict_sentence(v)
    # a shorter kernel leaves the sync nothing to wait for even with the faster host: the graphs lead (at 250 µs
    # the sync, read so, still saves 10 % of the step, and is named first)
    short = Trace(_events(3, 900.0, _sync_between_launches(150.0)))
    graphed = verdict_of(short, short.steps).verdict
    assert graphed.cause is Cause.LAUNCH_OVERHEAD
    # ... and their fix says that the step's own sync must go first: a CUDA graph cannot hold it
    assert "first take out its sync at cudaDeviceSynchronize in 'train_step'" in graphed.fix, graphed.fix
    # the loop's own synchronize outside every label is not the step's: never read so, nor in the graphs' way
    bare = Trace(_events(3, 900.0, _sync_between_launches(360.0, label=None)))
    loop = verdict_of(bare, bare.steps).verdict
    assert loop.cause is Cause.LAUNCH_OVERHEAD and "take out" not in loop.fix, loop.fix
    # a run record that measured the host's speed leaves nothing to guess: no second reading
    measured = verdict_of(trace, trace.steps, unprofiled={"label": "train_step", "cpu_us": 700.0})
    assert not any("as fast as estimated" in note for note in measured.notes)


def test_a_copy_to_pageable_memory_fixed_runs_ahead_without_its_stream_sync():
    # .cpu() of 64 MiB after two 300 µs kernels issued 250 µs apart, as torch does it: a pageable cudaMemcpyAsync
    # that holds the host until its bytes have moved, then a cudaStreamSynchronize. Copied into pinned memory with
    # non_blocking=True, neither waits: the copy runs at pinned bandwidth behind the kernels while the host issues
    # the next step's, so the step is the GPU's: the two kernels and the copy (about 1.87 ms), not the kernels, the
    # copy and the host's 250 µs between launches one after the other
    from profiling_guide.analysis.verdict import PINNED_GBPS

    copy_us, nbytes = 3500.0, 64 << 20

    def body(start, corr):
        out = _launch(start + 10, corr, 300.0) + _launch(start + 260, corr, 300.0, delay=50.0)
        gpu_end = start + 262 + 50 + 300
        corr[0] += 1
        end = gpu_end + copy_us + 4
        out += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::to", "ts": start + 280, "dur": end + 30 - (start + 280),
             "tid": 1, "pid": 1, "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": start + 281, "dur": end - (start + 281),
             "tid": 1, "pid": 1, "args": {"correlation": corr[0]}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "ts": gpu_end + 1,
             "dur": copy_us, "tid": 7, "pid": 0, "args": {"correlation": corr[0], "stream": 7, "bytes": nbytes}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": end + 5, "dur": 20.0, "tid": 1,
             "pid": 1, "args": {"correlation": corr[0] + 500}},
        ]
        return out

    trace = Trace(_events(3, 4500.0, body))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.MEMCPY and v.verdict.where.op == "aten::to", v.verdict
    gpu_bound = (600.0 + nbytes / (PINNED_GBPS * 1e3)) / 1e3
    assert abs(v.verdict.predicted_step_ms / gpu_bound - 1) < 0.05, (v.verdict.predicted_step_ms, gpu_bound)


def test_a_pinned_copy_in_line_with_the_compute_is_copied_ahead_and_hidden():
    # each step: a 2 ms copy of a pinned batch on the compute stream (non_blocking: cudaMemcpyAsync returns at
    # once), then three 1 ms kernels that wait for it. Pinning has nothing left to give; copied a step ahead on a
    # side stream, the copy overlaps the kernels before it: the step saves the copy's 2 ms. A copy longer than the
    # kernels can hide keeps what they cannot (5 ms of copy behind 3 ms of kernels: 3 ms saved)
    from profiling_guide.analysis.verdict import COPY_AHEAD_FIX

    def body_for(copy_us):
        def body(start, corr):
            corr[0] += 1
            out = [
                {"ph": "X", "cat": "user_annotation", "name": "load_batch", "ts": start + 5, "dur": 30.0, "tid": 1,
                 "pid": 1},
                {"ph": "X", "cat": "cpu_op", "name": "aten::to", "ts": start + 10, "dur": 20.0, "tid": 1, "pid": 1,
                 "args": {}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": start + 12, "dur": 8.0,
                 "tid": 1, "pid": 1, "args": {"correlation": corr[0]}},
                {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": start + 25,
                 "dur": copy_us, "tid": 7, "pid": 0,
                 "args": {"correlation": corr[0], "stream": 7, "bytes": copy_us * 50e3}},
            ]
            for k in range(3):  # each kernel starts as the one before it ends, the first as the copy ends
                out += _launch(start + 40 + 20 * k, corr, 1000.0, delay=copy_us + 980.0 * k - 17.0)
            # the loop's synchronize after the step: the host waits for the GPU's work
            out.append(_device_sync(start + 110, copy_us + 2918.0, corr))
            return out
        return body

    trace = Trace(_events(3, 5200.0, body_for(2000.0)))
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.MEMCPY and v.verdict.fix == COPY_AHEAD_FIX, v.verdict
    assert abs(v.verdict.saving_ms - 2.0) < 0.05, v.verdict  # the whole copy, hidden behind 3 ms of kernels
    long = Trace(_events(3, 8200.0, body_for(5000.0)))
    assert abs(verdict_of(long, long.steps).verdict.saving_ms - 3.0) < 0.05  # 3 ms of its 5, no more


def test_gemms_on_float32_inputs_are_told_to_use_the_tensor_cores():
    # the GPU sets the pace with back-to-back GEMMs; their launching ops' input types (record_shapes) say float and
    # their kernels compute in fp32: the fix names bf16 autocast and TF32. On bf16 inputs, the plain fix
    from profiling_guide.analysis.causes import FIXES
    from profiling_guide.analysis.verdict import FP32_GEMM_FIX

    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_execute_kernel"
    tf32 = "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_stage3_warpsize2x2x1_tensor16x8x8_execute_kernel"

    def body_for(dtype, name=gemm):
        def body(start, corr):
            out = []
            for k in range(4):
                events = _launch(start + 10 + 20 * k, corr, 500.0, delay=500.0 * k - 20.0 * k, name=name)
                events[0]["args"] = {"Input type": [dtype, dtype], "Input Dims": [[4096, 4096], [4096, 4096]]}
                out += events
            out.append(_device_sync(start + 100, 1920.0, corr))
            return out
        return body

    # float32 inputs on a TF32 kernel (allow_tf32): on the tensor cores already, the plain fix
    for dtype, name, fix in (("float", gemm, FP32_GEMM_FIX), ("c10::BFloat16", gemm, FIXES[Cause.GPU_COMPUTE]),
                             ("float", tf32, FIXES[Cause.GPU_COMPUTE])):
        trace = Trace(_events(3, 2100.0, body_for(dtype, name)))
        v = verdict_of(trace, trace.steps)
        assert v.verdict.cause is Cause.GPU_COMPUTE and v.verdict.fix == fix, (dtype, v.verdict)
    fp32 = Trace(_events(3, 2100.0, body_for("float")))
    assert "torch.autocast('cuda', dtype=torch.bfloat16)" in verdict_sentence(verdict_of(fp32, fp32.steps))


def test_ddps_own_syncs_are_not_the_programs_to_take_out():
    # DDP's forward waits on its reducer's events (cudaEventSynchronize in 'DistributedDataParallel.forward', 8 a
    # step on this rank): the graphs' fix does not ask the program to take them out
    from pathlib import Path

    path = Path(__file__).parent / "data" / "corpus" / "h200x2" / "ddp_host_stall_last" / "rank1.trace.json.gz"
    trace = Trace.load(path)
    syncs = [c for s in trace.steps for c in s.runtime_calls if c.name == "cudaEventSynchronize"]
    assert syncs, "the trace holds DDP's event syncs"
    v = verdict_of(trace, trace.steps, rank=1)
    graphs = [w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD]
    assert graphs and not any("take out" in w.fix for w in graphs), [w.fix for w in graphs]


def test_a_run_records_calibration_counts_the_traced_python_calls():
    # a step labelled 'step' with a 'forward' label nested in it: 20 ops of 40 µs, each launching a 5 µs kernel,
    # 25 µs apart, and 400 Python calls traced (with_stack=True). The run record says the label took 520 µs less
    # without the profiler: what the per-op estimate gives for those ops, their launches and the Python calls. The
    # nested stretches are re-timed at that estimate, all of it: the step without the profiler is the host's
    # profiler-off time (not less: counting the ops alone, 80 µs, would take the Python calls' cost out of them
    # again, five times over)
    from profiling_guide.analysis.verdict import PROFILER_CALL_US, PROFILER_OP_US, PROFILER_PY_US

    cost = 20 * (PROFILER_OP_US + PROFILER_CALL_US) + 400 * PROFILER_PY_US

    def body(start, corr):
        out = [{"ph": "X", "cat": "user_annotation", "name": "step", "ts": start + 1, "dur": 1300.0, "tid": 1, "pid": 1},
               {"ph": "X", "cat": "user_annotation", "name": "forward", "ts": start + 2, "dur": 1290.0, "tid": 1,
                "pid": 1}]
        for k in range(20):
            corr[0] += 1
            t = start + 10 + 65 * k
            out += [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": t, "dur": 40.0, "tid": 1, "pid": 1,
                     "args": {}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 20, "dur": 6.0, "tid": 1,
                     "pid": 1, "args": {"correlation": corr[0]}},
                    {"ph": "X", "cat": "kernel", "name": "void add_kernel(float*)", "ts": t + 30, "dur": 5.0, "tid": 7,
                     "pid": 0, "args": {"correlation": corr[0], "stream": 7}}]
        out += [{"ph": "X", "cat": "python_function", "name": f"model.py({k}): f", "ts": start + 5 + 3.2 * k,
                 "dur": 0.5, "tid": 1, "pid": 1, "args": {}} for k in range(400)]
        return out

    trace = Trace(_events(3, 1400.0, body))
    assert sum(len(s) for s in trace.python_starts.values()) == 1200
    v = verdict_of(trace, trace.steps, unprofiled={"label": "step", "cpu_us": 1300.0 - cost})
    base = v.profiler.predicted_step_ms * 1e3
    assert abs(base - (1400.0 - cost)) < 0.1 * (1400.0 - cost), (base, 1400.0 - cost, v.notes)


def _gap_then_kernels(op: str | None, frames: list[tuple[float, float, str]]):
    """Each step: 3 ms of host work that launches nothing (untraced, or inside one op ``op``), then four 300 µs
    kernels; ``frames``: Python calls recorded (with_stack=True) as (offset, length, name) from the step's start."""
    def body(start, corr):
        out = [{"ph": "X", "cat": "cpu_op", "name": op, "ts": start + 10, "dur": 3000.0, "tid": 1, "pid": 1,
                "args": {}}] if op else []
        out += [{"ph": "X", "cat": "python_function", "name": name, "ts": start + at, "dur": dur, "tid": 1, "pid": 1,
                 "args": {}} for at, dur, name in frames]
        for k in range(4):
            out += _launch(start + 3100 + 10 * k, corr, 300.0)
        return out

    return Trace(_events(3, 4400.0, body))


def test_a_host_gap_names_the_programs_python_that_ran_in_it():
    from profiling_guide.analysis.verdict import HOOK_FIX, UNTRACED_GAP_FIX

    # the innermost of the program's own frames open over the gap: not torch's, not Python's library
    frames = [(1, 4300, "train.py(10): main"), (5, 3010, "train.py(42): log_metrics"),
              (20, 2900, "torch/utils/_pytree.py(88): tree_map"), (30, 2800, "json/encoder.py(180): encode")]
    v = verdict_of(trace := _gap_then_kernels(None, frames), trace.steps)
    assert v.verdict.cause is Cause.HOST_GAP and v.verdict.where.source == "train.py:42 log_metrics", v.verdict
    assert "train.py:42 log_metrics ran there" in v.verdict.fix and v.verdict.where.to_dict()["source"]
    # a frame open over less than half the gap is not what ran there; no frames: the trace cannot say
    short = [(1, 4300, "train.py(10): main"), (5, 1000, "train.py(42): log_metrics")]
    assert verdict_of(trace := _gap_then_kernels(None, short), trace.steps).verdict.where.source == "train.py:10 main"
    bare = verdict_of(trace := _gap_then_kernels(None, []), trace.steps).verdict
    assert bare.where.source is None and bare.fix == UNTRACED_GAP_FIX
    # inside the autograd node that runs a module's backward hooks: the hook's fix, and its Python
    hook = verdict_of(trace := _gap_then_kernels("autograd::engine::evaluate_function: BackwardHookFunctionBackward",
                                                 [(12, 2990, "train.py(77): grad_logger")]), trace.steps).verdict
    assert hook.cause is Cause.HOST_GAP and hook.fix.startswith(HOOK_FIX) and "train.py:77 grad_logger" in hook.fix


def test_one_of_torchs_ops_that_works_on_the_host_before_it_launches_is_a_host_gap_of_setup():
    # each step: one op that runs 3 ms on the host and then launches its kernel (cuDNN building a plan for a shape
    # it has not seen, inside scaled_dot_product_attention), then three 300 µs kernels: a host gap at that op, with
    # the setup's fix, though the op launches work. The same stretch in compiled code's region, with none of torch's
    # ops open in it, is not named so
    from profiling_guide.analysis.verdict import SETUP_FIX

    def trace_of(name, inner=None):
        def body(start, corr):
            corr[0] += 1
            out = [{"ph": "X", "cat": "cpu_op", "name": name, "ts": start + 10, "dur": 3020.0, "tid": 1, "pid": 1,
                    "args": {}}]
            if inner:  # the op that ran the stretch, nested in the one the autograd engine records
                out.append({"ph": "X", "cat": "cpu_op", "name": inner, "ts": start + 12, "dur": 3000.0, "tid": 1,
                            "pid": 1, "args": {}})
            out += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": start + 3015, "dur": 6.0,
                     "tid": 1, "pid": 1, "args": {"correlation": corr[0]}},
                    {"ph": "X", "cat": "kernel", "name": "void attention_kernel(float*)", "ts": start + 3025,
                     "dur": 300.0, "tid": 7, "pid": 0, "args": {"correlation": corr[0], "stream": 7}}]
            for k in range(3):
                out += _launch(start + 3040 + 10 * k, corr, 300.0, delay=290.0 + 290.0 * k)
            return out
        return Trace(_events(3, 4400.0, body))

    v = verdict_of(trace := trace_of("aten::scaled_dot_product_attention"), trace.steps).verdict
    assert v.cause is Cause.HOST_GAP and v.where.op == "aten::scaled_dot_product_attention" and v.fix == SETUP_FIX, v
    compiled = verdict_of(trace := trace_of("Torch-Compiled Region: 0/0"), trace.steps).verdict
    assert compiled.cause is not Cause.HOST_GAP, compiled
    # cuDNN benchmarking a convolution's algorithms for a new shape, in the backward: named at torch's op inside
    backward = verdict_of(trace := trace_of("autograd::engine::evaluate_function: ConvolutionBackward0",
                                            inner="aten::convolution_backward"), trace.steps).verdict
    assert backward.cause is Cause.HOST_GAP and backward.where.op == "aten::convolution_backward", backward
    assert backward.fix == SETUP_FIX


def test_a_fused_optimizer_drops_its_python_with_its_launches():
    # the optimizer's step of _two_regions, with 1.5 ms of Python in it before its launches (a per-parameter loop):
    # fused (its fix), the optimizer drops that Python as it drops the launches' host cost; the whole step's graphs
    # keep it (a host gap is not launch work)
    def body(start, corr):
        out = _two_regions(start, corr)
        for e in out:
            if e.get("name") == "Optimizer.step#SGD.step":
                e["dur"] += 1500.0
            elif e.get("ts", 0) >= start + 220 and e.get("cat") != "user_annotation":
                e["ts"] += 1500.0
        return out

    trace = Trace(_events(3, 2350.0, body))
    v = verdict_of(trace, trace.steps)
    optimizer = next(w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD
                     and w.where.label == "Optimizer.step#SGD.step")
    whole = next(w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD and w.where.label is None)
    assert optimizer.saving_ms > 1.5 > whole.saving_ms, (optimizer, whole)


def test_the_graphs_fix_says_how_to_take_out_a_sync_that_learns_a_shape():
    from profiling_guide.analysis.causes import Where
    from profiling_guide.analysis.verdict import StepWhatIfs, syncs_in_the_way

    def step(op, n):
        return StepWhatIfs(1000.0, 1000.0, {}, {}, [], None, None, syncs={Where(op=op, label="forward"): n})

    shape = syncs_in_the_way([step("aten::nonzero", 32)])
    assert shape.startswith("; first take out its 32 syncs at aten::nonzero in 'forward', keeping shapes independent")
    assert "keeping shapes" not in syncs_in_the_way([step("aten::item", 1)])
    assert syncs_in_the_way([step("aten::item", 1)], label="backward") == ""  # none in that region


def test_python_inside_one_of_torchs_ops_is_named_for_its_call_not_taken_for_setup():
    # the setup trace's 3 ms stretch inside aten::t, but covered by a traced Python call: autograd's anomaly
    # detection formatting a stack trace for the node it records. Named at the op with that call, and its fix
    from profiling_guide.analysis.verdict import ANOMALY_FIX, PYTHON_IN_OP_FIX, SETUP_FIX

    def trace_of(frame):
        def body(start, corr):
            corr[0] += 1
            return [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": start + 10, "dur": 3020.0, "tid": 1,
                     "pid": 1, "args": {}},
                    {"ph": "X", "cat": "cpu_op", "name": "aten::t", "ts": start + 12, "dur": 3000.0, "tid": 1,
                     "pid": 1, "args": {}},
                    {"ph": "X", "cat": "python_function", "name": frame, "ts": start + 20, "dur": 2900.0,
                     "tid": 1, "pid": 1, "args": {}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": start + 3015, "dur": 6.0,
                     "tid": 1, "pid": 1, "args": {"correlation": corr[0]}},
                    {"ph": "X", "cat": "kernel", "name": "void gemm_kernel(float*)", "ts": start + 3025,
                     "dur": 300.0, "tid": 7, "pid": 0, "args": {"correlation": corr[0], "stream": 7}}] + \
                [e for k in range(3) for e in _launch(start + 3040 + 10 * k, corr, 300.0, delay=290.0 + 290.0 * k)]
        return Trace(_events(3, 4400.0, body))

    anomaly = verdict_of(trace := trace_of("torch/fx/traceback.py(415): format_stack"), trace.steps).verdict
    assert anomaly.cause is Cause.HOST_GAP and anomaly.where.op == "aten::t", anomaly
    assert anomaly.where.source == "torch/fx/traceback.py:415 format_stack" and anomaly.fix == ANOMALY_FIX
    mode = verdict_of(trace := trace_of("my_mode.py(12): __torch_function__"), trace.steps).verdict
    assert mode.where.source == "my_mode.py:12 __torch_function__" and mode.fix == PYTHON_IN_OP_FIX
    assert SETUP_FIX not in (anomaly.fix, mode.fix)


def test_anomaly_detections_nan_checks_are_named_in_the_sync_fix():
    # an H200 step under detect_anomaly(check_nan=True): each backward node checks its outputs for NaN and reads
    # the answer (aten::isnan, aten::_is_any_true, aten::item inside the node), 73 syncs a step
    from pathlib import Path

    from profiling_guide.analysis.step_graph import step_graph
    from profiling_guide.analysis.verdict import NAN_CHECK_FIX, complete_steps

    trace = Trace.load(Path(__file__).parent / "data" / "hooks" / "anomaly_mode.trace.json.gz")
    steps, _ = complete_steps(trace.steps)
    for s in steps:
        g = step_graph(trace, s)
        syncs = [seg for seg in g.host if seg.cause is Cause.HOST_SYNC and seg.where.op == "aten::item"]
        assert len(syncs) == 73 and all(seg.nan_check for seg in syncs)
    v = verdict_of(trace, steps)
    sync = next(w for w in v.what_if if w.cause is Cause.HOST_SYNC)
    assert sync.fix == NAN_CHECK_FIX
    assert "autograd's anomaly detection" in v.verdict.fix  # the graphs' fix says to take its syncs out first
    # a step whose .item() reads a loss is not taken for one
    plain = Trace.load(Path(__file__).parent / "data" / "corpus" / "h200" / "host_sync_every2.trace.json.gz")
    assert not any(seg.nan_check for s in complete_steps(plain.steps)[0] for seg in step_graph(plain, s).host)


def test_python_that_torch_calls_around_every_op_is_named_in_the_launch_fix():
    # 40 ops a step, each launched from inside a program's function: called by a builtin (a TorchFunctionMode's
    # __torch_function__, which torch calls around each call) it is named; called by the program's own code
    # (the step function calling its ops) it is not
    def trace_of(caller):
        def body(start, corr):
            out = [{"ph": "X", "cat": "python_function", "name": "train.py(10): step", "ts": start + 1,
                    "dur": 1990.0, "tid": 1, "pid": 1, "args": {"Python id": 1}}]
            for k in range(40):
                t = start + 10 + 45 * k
                if caller == "builtin":
                    out.append({"ph": "X", "cat": "python_function", "name": "<built-in method add of Tensor>",
                                "ts": t - 4, "dur": 44.0, "tid": 1, "pid": 1,
                                "args": {"Python id": 1000 + 2 * k, "Python parent id": 1}})
                out.append({"ph": "X", "cat": "python_function", "name": "mode.py(7): __torch_function__",
                            "ts": t - 3, "dur": 42.0, "tid": 1, "pid": 1,
                            "args": {"Python id": 1001 + 2 * k,
                                     "Python parent id": 1000 + 2 * k if caller == "builtin" else 1}})
                out += _launch(t, corr, 5.0, delay=4.0)
            return out
        return Trace(_events(3, 2000.0, body))

    named = verdict_of(trace := trace_of("builtin"), trace.steps).verdict
    assert named.cause is Cause.LAUNCH_OVERHEAD and "inside mode.py:7 __torch_function__" in named.fix, named.fix
    plain = verdict_of(trace := trace_of("program"), trace.steps).verdict
    assert plain.cause is Cause.LAUNCH_OVERHEAD and "__torch_function__" not in plain.fix, plain.fix


def test_a_modules_forward_is_not_python_torch_calls_around_the_program():
    from profiling_guide.analysis.launch_sources import called_by_torch
    from profiling_guide.trace.model import PythonFrame

    module = PythonFrame("torch/nn/modules/module.py(1783): _call_impl", 0.0, 10.0, 1)
    hook = PythonFrame("train.py(20): log_activation", 1.0, 2.0, 1, parent=module)
    forward = PythonFrame("model.py(62): forward", 3.0, 5.0, 1, parent=module)
    mode = PythonFrame("mode.py(7): __torch_function__", 3.0, 5.0, 1,
                       parent=PythonFrame("<built-in method add of Tensor>", 2.0, 7.0, 1))
    mine = PythonFrame("train.py(30): step", 0.0, 10.0, 1, parent=PythonFrame("train.py(40): main", 0.0, 20.0, 1))
    assert [called_by_torch(f) for f in (hook, forward, mode, mine)] == [True, False, True, False]


def test_a_metric_computed_on_the_cpu_after_its_copy_is_one_fix_with_the_copy():
    # logits.cpu().argmax(-1) in 'metrics': a 16 MiB device→host copy, then the argmax on the CPU. Done on the GPU,
    # both go: one what-if, where each alone saves less (measured, the fix saved 5.85 ms, IQR 5.48 to 6.39)
    import json
    from pathlib import Path

    from profiling_guide.analysis.step_graph import step_graph
    from profiling_guide.analysis.verdict import complete_steps, cpu_after_copy

    path = Path(__file__).parent / "data" / "metrics" / "logits_metrics_cpu.trace.json.gz"
    trace = Trace.load(path)
    steps, _ = complete_steps(trace.steps)
    for s in steps:
        where = cpu_after_copy(step_graph(trace, s))
        assert (where.op, where.label) == ("aten::argmax", "metrics")
    v = verdict_of(trace, steps)
    first = v.what_if[0]
    assert first.cause is Cause.HOST_GAP and first.where.label == "metrics" and "on the GPU" in first.fix
    assert not any(w.where.label == "metrics" for w in v.what_if[1:])  # the copy and the CPU work are one fix
    label = json.loads(path.with_name("logits_metrics_cpu.label.json").read_text())
    fixed = label["fixed_step_ms"]["median"]
    assert abs(first.predicted_step_ms - fixed) <= 0.15 * fixed, (first.predicted_step_ms, fixed)
    # a step that reads back a scalar and does nothing with it on the CPU has no such region
    plain = Trace.load(Path(__file__).parent / "data" / "corpus" / "h200" / "host_sync_every2.trace.json.gz")
    assert all(cpu_after_copy(step_graph(plain, s)) is None for s in complete_steps(plain.steps)[0])


def test_a_sync_that_counts_is_named_before_the_graphs_even_where_they_save_more():
    # an H200 step with seven cudaEventSynchronize in its forward (tests/data/syncs): in the trace the host, slowed
    # by the profiler, finds each event done, so graphing the step leads; read with the host as fast as it runs
    # without the profiler, the syncs save more than MIN_SAVING, and a graph cannot hold them: they come first.
    # Measured: 4.16 ms a step, 3.23 ms without them.
    import json
    from pathlib import Path

    from profiling_guide.analysis.verdict import MIN_SAVING, PLACE_SHARE

    data = Path(__file__).parent / "data" / "syncs"
    trace = Trace.load(data / "event_timing.trace.json.gz")
    v = verdict_of(trace, trace.steps)
    graphs = next(w for w in v.what_if if w.cause is Cause.LAUNCH_OVERHEAD)
    assert v.verdict.cause is Cause.HOST_SYNC and v.verdict.where.op == "cudaEventSynchronize", v.what_if
    assert v.verdict.where.label == "forward"
    assert MIN_SAVING * v.verdict.step_ms <= v.verdict.saving_ms < PLACE_SHARE * graphs.saving_ms, (v.verdict, graphs)
    label = json.loads((data / "event_timing.label.json").read_text())
    assert v.verdict.predicted_step_ms > label["fixed_step_ms"]["median"]  # the saving read is the least it saves
    # a host-bound step whose six .item() save under MIN_SAVING measured (0.37 of 8.41 ms): the launches lead
    bound = Trace.load(data / "item_host_bound.trace.json.gz")
    first = verdict_of(bound, bound.steps).verdict
    assert first.cause is Cause.LAUNCH_OVERHEAD and "6 syncs at aten::item" in first.fix, first


def test_many_small_copies_are_told_to_copy_once():
    # an H200 step that moves 200 pageable 1 KiB tensors to the GPU one by one (tests/data/copies): each copy is
    # an op, a call and a wait of its own; stacked on the host and copied once the step went from 7.00 to 3.04 ms
    import json
    from pathlib import Path

    from profiling_guide.analysis.step_graph import step_graph
    from profiling_guide.analysis.verdict import complete_steps, small_copies

    path = Path(__file__).parent / "data" / "copies" / "many_small_copies.trace.json.gz"
    trace = Trace.load(path)
    steps, _ = complete_steps(trace.steps)
    for s in steps:
        assert small_copies(step_graph(trace, s)) == {("aten::to", "load_batch"): (200, 1024)}
    v = verdict_of(trace, steps)
    assert v.verdict.cause is Cause.MEMCPY and v.verdict.where.label == "load_batch"
    assert v.verdict.fix.startswith("copy once: its 200 copies a step, about 1 KiB each")
    fixed = json.loads(path.with_name("many_small_copies.label.json").read_text())["fixed_step_ms"]["median"]
    assert abs(v.verdict.predicted_step_ms - fixed) <= 0.25 * fixed, (v.verdict.predicted_step_ms, fixed)
    # a step with one large pageable copy is not told to stack it
    one = Trace.load(Path(__file__).parent / "data" / "corpus" / "h200" / "memcpy_64mib.trace.json.gz")
    assert all(not small_copies(step_graph(one, s)) for s in complete_steps(one.steps)[0])
    assert not verdict_of(one, one.steps).verdict.fix.startswith("copy once")


def test_a_chain_of_elementwise_ops_is_named_as_one_where_it_outweighs_the_heaviest_op():
    # an H200 step (tests/data/compute) whose hand-written activation runs six elementwise ops in float32 per
    # block: no single op's kernels take as much as the backward's GEMMs, but the elementwise ops together take
    # half the step. They are named together, with the fix of fusing them; measured, one bf16 gelu instead took
    # the step from 10.52 to 5.51 ms
    import json
    from pathlib import Path

    from profiling_guide.analysis.verdict import UNFUSED

    data = Path(__file__).parent / "data" / "compute"
    trace = Trace.load(data / "unfused_chain.trace.json.gz")
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.GPU_COMPUTE and v.verdict.where.kind == UNFUSED.kind and v.verdict.where.op is None
    assert v.verdict.fix.startswith("fuse them (autograd::engine::evaluate_function: MulBackward0, aten::mul")
    fixed = json.loads((data / "unfused_chain.label.json").read_text())["fixed_step_ms"]["median"]
    assert abs(v.verdict.predicted_step_ms - fixed) <= 0.15 * fixed, (v.verdict.predicted_step_ms, fixed)
    # a convolution's own layout transforms (pointwise kernels inside aten::conv2d, with its GEMMs) are one op:
    # not an elementwise chain to fuse
    assert "scaled_dot_product_attention" not in v.verdict.fix
    # attention written out op by op (matmuls, a masked_fill, a float32 softmax): the same fix, and SDPA named
    # (measured: 20.27 ms a step, 3.40 with F.scaled_dot_product_attention)
    by_hand = Trace.load(data / "attention_by_hand.trace.json.gz")
    first = verdict_of(by_hand, by_hand.steps).verdict
    assert first.where.kind == UNFUSED.kind and first.where.op is None
    assert "F.scaled_dot_product_attention runs as one fused kernel" in first.fix
    conv = Trace.load(data / "conv_nchw.trace.json.gz")
    first = verdict_of(conv, conv.steps).verdict
    assert first.cause is Cause.GPU_COMPUTE and first.where.op is not None
    assert "ConvolutionBackward0" in (first.where.op or ""), first


def test_float32_gemms_are_one_fix_for_the_step_and_sdpas_math_backend_is_named():
    # H200 steps (tests/data/compute). float32 GEMMs without TF32 in every linear, forward and backward: autocast
    # or TF32 is one switch for the step, so the what-if takes every fp32 GEMM, not the heaviest op's alone
    # (measured: 63.79 ms a step, 5.50 in bf16). Attention on SDPA's math backend: the fix says why a fused backend
    # was not used, and the what-if takes its backward nodes too (22.99 ms a step, 3.29 on flash)
    from pathlib import Path

    import json

    from profiling_guide.analysis.verdict import FP32_GEMM_FIX, SDPA_MATH_FIX

    data = Path(__file__).parent / "data" / "compute"
    fp32 = Trace.load(data / "fp32_no_autocast.trace.json.gz")
    v = verdict_of(fp32, fp32.steps)
    assert v.verdict.cause is Cause.GPU_COMPUTE and v.verdict.fix == FP32_GEMM_FIX, v.verdict
    assert v.verdict.where.kind == "gemm" and v.verdict.where.op is None  # every fp32 GEMM, not one op's
    assert v.verdict.predicted_step_ms < 0.1 * v.verdict.step_ms  # they are 97 % of the step
    math = Trace.load(data / "attention_math.trace.json.gz")
    first = verdict_of(math, math.steps).verdict
    assert first.cause is Cause.GPU_COMPUTE and first.where.op == "aten::scaled_dot_product_attention"
    assert first.fix == SDPA_MATH_FIX
    # forward and backward: more than the forward's own kernels (11 ms of the 23 ms step); and their ops' host work
    # too, which one fused op does not have (without it the re-timed step was host-bound at 6.6 ms)
    assert first.saving_ms > 0.6 * first.step_ms, first
    fixed = json.loads((data / "attention_math.label.json").read_text())["fixed_step_ms"]["median"]
    assert first.predicted_step_ms < 1.5 * fixed, (first.predicted_step_ms, fixed)


def test_a_copy_made_every_third_step_is_the_stall_a_timer_sees():
    # an H200 step that copies its weights to the CPU every third step (tests/data/copies): one profiled step takes
    # 156 ms, the others 5. Pinned, that copy would still take a few ms, so its what-if leaves the stalled step
    # above the others; it removes most of the excess, and that is enough: the figures are means, the copy is
    # named, and its fix is the one for a copy to the host. Measured: 52.12 ms a step over ten, 5.39 without it
    import json
    from pathlib import Path

    from profiling_guide.analysis.verdict import TO_HOST_FIX

    path = Path(__file__).parent / "data" / "copies" / "periodic_checkpoint.trace.json.gz"
    trace = Trace.load(path)
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.MEMCPY and v.verdict.where.label == "checkpoint", v.verdict
    assert v.verdict.fix == TO_HOST_FIX
    assert any("each figure is the mean over the steps" in note for note in v.notes), v.notes
    label = json.loads(path.with_name("periodic_checkpoint.label.json").read_text())
    assert abs(v.verdict.step_ms - label["step_ms"]["median"]) <= 0.15 * label["step_ms"]["median"]
    # graphing the launches would hide any host stretch, a stall or not: it never holds a stall
    recorded = Path(__file__).parent.parent / "docs" / "recordings" / "nvidia-h100-80gb-hbm3"
    padded = Trace.load(recorded / "08_own_model.padded.trace.json.gz")
    assert not any("mean over the steps" in note for note in verdict_of(padded, padded.steps).notes)


def test_a_forward_recomputed_in_the_backward_is_named_as_checkpointing():
    # an H200 step checkpointing its four blocks (tests/data/compute): inside the backward nodes the trace holds
    # aten::linear and aten::gelu, forward ops no backward formula calls. Their kernels are named together, with the
    # checkpointing fix; measured, checkpointing off took the step from 6.80 to 5.80 ms
    import json
    from pathlib import Path

    from profiling_guide.analysis.step_graph import step_graph
    from profiling_guide.analysis.verdict import RECOMPUTE_FIX, complete_steps, recomputed

    data = Path(__file__).parent / "data" / "compute"
    trace = Trace.load(data / "checkpoint_recompute.trace.json.gz")
    v = verdict_of(trace, trace.steps)
    assert v.verdict.cause is Cause.GPU_COMPUTE and v.verdict.where.kind == "recompute" and v.verdict.fix == RECOMPUTE_FIX
    fixed = json.loads((data / "checkpoint_recompute.label.json").read_text())["fixed_step_ms"]["median"]
    assert abs(v.verdict.predicted_step_ms - fixed) <= 0.15 * fixed, (v.verdict.predicted_step_ms, fixed)
    # a step without checkpointing has no recomputed kernel: its backward nodes run backward formulas only
    plain = Trace.load(data / "unfused_chain.trace.json.gz")
    assert all(not recomputed(step_graph(plain, s)) for s in complete_steps(plain.steps)[0])
