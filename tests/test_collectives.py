"""Collectives read from real 4-rank traces (H100 ×4, NCCL 2.28.9): calls, matching, waits, bandwidth, overlap.

The traces are in ``docs/samples/h100x4`` (its README says what each case ran):
DDP, FSDP2, and DDP where rank 3 runs 24 extra 4096³ matmuls before its
backward, so that the other ranks wait for it in their all-reduces.
"""

import json
from functools import cache
from pathlib import Path

import pytest

from profiling_guide.analysis.bandwidth import (
    bus_factor,
    busbw_gbps,
    read_sweep,
    sent_bytes,
    sweep_from_data,
)
from profiling_guide.analysis.collectives import (
    OFFSET_SPREAD_US,
    calls_table,
    clock_offsets,
    collective_calls,
    collective_kind,
    match_calls,
    unmatched_kernels,
)
from profiling_guide.analysis.overlap import time_breakdown
from profiling_guide.errors import GuideError
from profiling_guide.trace.kernel_names import decode
from profiling_guide.trace.model import DeviceEvent
from profiling_guide.trace.model import Trace

H100X4 = Path(__file__).resolve().parents[1] / "docs" / "samples" / "h100x4"
CASES = ("ddp", "ddp_straggler", "fsdp2")
SWEEP = H100X4 / "nccl_sweep.json"
ALL_RANKS = [(case, rank) for case in CASES for rank in range(4)]


@cache
def trace(case: str, rank: int) -> Trace:
    return Trace.load(H100X4 / case / f"rank{rank}.trace.json.gz")


@cache
def matched(case: str):
    return match_calls([c for r in range(4) for c in collective_calls(trace(case, r), r)])


def nccl_kernels(t: Trace):
    return [ev for ev in t.device_events if decode(ev.name).kind == "collective"]


# ---------------------------------------------------------------- one rank
def test_ddps_missing_launches_are_kernels_launched_before_the_profiled_window():
    # The CPU runs a whole step ahead of the GPU: the first profiled step's time holds the previous
    # step's all-reduces, whose launches came before the profiler began recording.
    t = trace("ddp", 0)
    early = [ev for ev in nccl_kernels(t) if ev.launch is None]
    assert len(early) == 11
    first_call = min(c.correlation for c in t.runtime_calls if c.correlation is not None)
    assert all(ev.before_window and ev.correlation < first_call and ev.step is None for ev in early)
    launched = [ev for ev in nccl_kernels(t) if ev.launch is not None]
    assert len(launched) == 24 and all(ev.step in (2, 3) for ev in launched)


@pytest.mark.parametrize("case, rank", ALL_RANKS)
def test_every_nccl_kernel_of_a_step_was_launched_by_a_record_param_comms_op(case, rank):
    t = trace(case, rank)
    assert unmatched_kernels(t) == []
    calls = collective_calls(t, rank)
    assert calls and all(c.kernel is not None and c.kernels == 1 for c in calls)
    in_steps = [ev for s in t.steps for ev in s.kernels if decode(ev.name).kind == "collective"]
    assert sorted(c.kernel_start_us for c in calls) == sorted(ev.start_us for ev in in_steps)


def test_a_ddp_bucket_is_a_32_mib_bf16_all_reduce_of_the_whole_group():
    calls = collective_calls(trace("ddp", 1), 1)
    assert len(calls) == 24  # 12 buckets per step, 2 steps
    c = calls[0]
    assert (c.collective, c.dtype, c.in_elements, c.out_elements) == ("all_reduce", "BFloat16", 16777216, 16777216)
    assert c.buffer_bytes == 32 * 2**20 and c.group == "0" and c.group_ranks == (0, 1, 2, 3)
    assert [c.index for c in calls if c.step == 3] == list(range(12))


def test_an_fsdp2_all_gather_counts_the_gathered_buffer_and_a_reduce_scatter_its_input():
    calls = collective_calls(trace("fsdp2", 0), 0)
    gather = next(c for c in calls if c.collective == "all_gather")
    scatter = next(c for c in calls if c.collective == "reduce_scatter")
    assert (gather.in_elements, gather.out_elements, gather.buffer_bytes) == (4194304, 16777216, 32 * 2**20)
    assert (scatter.in_elements, scatter.out_elements, scatter.buffer_bytes) == (16777216, 4194304, 32 * 2**20)
    assert sum(c.collective == "all_gather" for c in calls) == 48


@pytest.mark.parametrize("name, kind", [("allreduce", "all_reduce"), ("_allgather_base", "all_gather"),
                                        ("_reduce_scatter_base", "reduce_scatter"),
                                        ("allgather_into_tensor_coalesced", "all_gather"),
                                        ("all_to_allv", "all_to_all"), ("broadcast", "broadcast"),
                                        ("reduce", "reduce"), ("barrier", "barrier"), ("send", "send")])
def test_collective_names_are_read_in_one_spelling(name, kind):
    assert collective_kind(name) == kind


def test_one_rank_alone_lists_its_collectives_by_kind():
    table = calls_table(collective_calls(trace("fsdp2", 2), 2), 2)
    rows = {r.collective: r for r in table.itertuples()}
    assert rows["all_gather"].per_step == 24 and rows["reduce_scatter"].per_step == 12
    assert (rows["all_gather"].algorithm, rows["all_gather"].protocol) == ("RING", "LL")
    total = sum(ev.dur_us for ev in nccl_kernels(trace("fsdp2", 2)) if ev.step is not None) / 2
    assert table["us_per_step"].sum() == pytest.approx(total)


# ---------------------------------------------------------- across ranks
def test_fsdp2_calls_match_across_ranks_although_their_kernel_counts_differ():
    # 72, 72, 73 and 77 NCCL kernels: the k-th kernel is not the k-th call on every rank.
    assert [len(nccl_kernels(trace("fsdp2", r))) for r in range(4)] == [72, 72, 73, 77]
    calls = matched("fsdp2")
    assert len(calls) == 72 and all(m.complete for m in calls)
    kinds = {(m.step, m.index): m.collective for m in calls}
    assert sum(k == "all_gather" for k in kinds.values()) == 48


def test_the_transfer_is_the_shortest_kernel_and_every_other_rank_waited_the_difference():
    for m in matched("fsdp2"):
        durations = {r: d for r, (_, d) in m.kernels.items()}
        assert m.transfer_us == min(durations.values())
        assert m.wait_us(m.last_rank) == 0.0
        assert all(m.wait_us(r) == pytest.approx(d - m.transfer_us) for r, d in durations.items())


def test_rank_3_arrived_last_at_every_all_reduce_of_the_straggler_run():
    calls = matched("ddp_straggler")
    assert len(calls) == 24 and {m.last_rank for m in calls} == {3}
    first = calls[0]  # the first bucket of a step waits for rank 3's extra matmuls
    assert all(first.wait_us(r) > 5000 for r in (0, 1, 2))


def test_the_last_by_duration_is_the_last_to_start_on_one_clock():
    # Durations need no shared clock; on one host the latest start names the same rank (to within the
    # few µs the kernels' ends differ by).
    for m in matched("ddp_straggler"):
        starts = {r: s for r, (s, _) in m.kernels.items()}
        assert max(starts, key=starts.get) == m.last_rank
        assert max(starts.values()) - min(starts.values()) == pytest.approx(m.max_wait_us, abs=40)


def test_ranks_of_one_host_share_a_clock():
    for case in CASES:
        offsets = clock_offsets(matched(case))
        assert set(offsets) == {0, 1, 2, 3} and all(abs(v) < 50 for v in offsets.values())


def test_a_host_whose_clock_differs_is_found_from_where_its_collectives_end():
    calls = [c for r in range(4) for c in collective_calls(trace("ddp", r), r)]
    for c in calls:
        if c.rank == 2:
            c.kernel_start_us += 3_600_000_000.0  # an hour off
    offsets = clock_offsets(match_calls(calls))
    assert offsets[2] == pytest.approx(3_600_000_000.0, abs=50)
    assert abs(offsets[1]) < 50


def test_traces_of_two_runs_are_refused_by_the_ends_of_their_collectives():
    # DDP's rank 0 with the straggler run's ranks 1-3: the same calls, but not one run.
    calls = collective_calls(trace("ddp", 0), 0)
    calls += [c for r in (1, 2, 3) for c in collective_calls(trace("ddp_straggler", r), r)]
    with pytest.raises(GuideError, match="not of one run") as err:
        clock_offsets(match_calls(calls))
    assert "\n" not in str(err.value) and OFFSET_SPREAD_US == 1000.0


def test_traces_of_two_runs_are_refused_when_their_calls_differ():
    calls = collective_calls(trace("ddp", 0), 0) + collective_calls(trace("fsdp2", 1), 1)
    with pytest.raises(GuideError, match="rank 0 and rank 1 are not of one run: call 1 of process group 0"):
        match_calls(calls)


# -------------------------------------------------------------- bandwidth
def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 4) == 1.5
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == 0.75
    assert bus_factor("broadcast", 8) == 1.0 and bus_factor("send", 2) is None


def test_each_rank_sends_the_buffer_times_the_bus_factor():
    # A ring all-reduce of S bytes on n ranks: 2(n-1) sends of S/n per rank; an all-gather of S gathered bytes or
    # a reduce-scatter of S input bytes: n-1 sends of S/n. Not S: an all-gather's rank already holds its S/n.
    assert sent_bytes("all_reduce", 2, 100) == 100 and sent_bytes("all_reduce", 4, 100) == 150
    assert sent_bytes("all_gather", 2, 100) == sent_bytes("reduce_scatter", 2, 100) == 50
    assert sent_bytes("all_gather", 4, 100) == 75 and sent_bytes("send", 2, 100) is None
    gather = next(m for m in matched("fsdp2") if m.collective == "all_gather")
    assert (gather.buffer_bytes, gather.group_size, gather.sent_bytes) == (32 * 2**20, 4, 24 * 2**20)
    bucket = next(m for m in matched("ddp") if m.collective == "all_reduce")
    assert bucket.sent_bytes == 48 * 2**20


def test_the_factors_reproduce_the_sweeps_own_bus_bandwidths():
    # The sweep was measured and written on the GPU machine; our arithmetic must give its numbers back.
    data = json.loads(SWEEP.read_text())
    for row in data["rows"]:
        assert busbw_gbps(row["op"], data["world_size"], row["bytes"], row["us"]) == pytest.approx(
            row["busbw_GBps"], abs=0.06), row


def test_the_sweep_is_read_at_any_size_and_says_where_latency_ends():
    sweep = read_sweep(SWEEP)
    assert sweep.busbw_at("all_reduce", 2**30) == 355.3
    assert sweep.busbw_at("all_reduce", 16 * 2**20) == 251.9
    between = sweep.busbw_at("all_reduce", 32 * 2**20)
    assert 251.9 < between < 303.1
    assert sweep.busbw_at("all_reduce", 2**40) == 355.3 and not sweep.in_range("all_reduce", 2**40)
    assert sweep.regime("all_reduce", 2**20) == "latency-bound"  # 25 GB/s, far from 355
    assert sweep.regime("all_gather", 256 * 2**20) == "bandwidth-bound"
    assert sweep.busbw_at("all_to_all", 2**20) is None


@pytest.mark.parametrize("data, words", [
    ({}, "no 'rows' list"), ({"rows": []}, "no 'rows' list"), ({"rows": [{"op": "all_reduce"}]}, "row 0 needs"),
    ({"rows": [{"op": "all_reduce", "bytes": 1, "us": -1, "busbw_GBps": 1}]}, "positive numbers"),
    ({"rows": [{"op": "all_reduce", "bytes": 1, "us": float("nan"), "busbw_GBps": 1}]}, "positive numbers"),
])
def test_a_malformed_sweep_is_one_line(data, words):
    with pytest.raises(GuideError, match=words):
        sweep_from_data(data, "s.json")


def test_an_unreadable_sweep_file_is_one_line(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text("{not json")
    with pytest.raises(GuideError, match="is not valid JSON"):
        read_sweep(bad)
    with pytest.raises(GuideError, match="cannot read"):
        read_sweep(tmp_path / "missing.json")


# ---------------------------------------------------------------- overlap
def ev(start, dur, kind="kernel", name="gemm"):
    names = {"gemm": "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNN", "nccl": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
             "copy": "Memcpy DtoD (Device -> Device)"}
    return DeviceEvent(names[name], start, dur, 7, kind, None, {})


def test_overlap_exposed_communication_and_idle_by_hand():
    # compute 0-10 and 15-20; communication 5-18; a copy 22-24 alone; nothing 20-22.
    b = time_breakdown([ev(0, 10), ev(15, 5), ev(5, 13, name="nccl"), ev(22, 2, kind="memcpy", name="copy")])
    assert (b.span_us, b.busy_us, b.compute_us, b.comm_us) == (24, 22, 15, 13)
    assert b.overlap_us == 8 and b.exposed_comm_us == 5 and b.idle_us == 2 and b.other_us == 2
    assert b.overlap_share == pytest.approx(8 / 13) and b.comm_kernels_us == 13


def test_two_collectives_at_once_count_once():
    b = time_breakdown([ev(0, 10, name="nccl"), ev(5, 10, name="nccl")])
    assert (b.comm_us, b.comm_kernels_us, b.overlap_us, b.compute_us) == (15, 20, 0, 0)


def call(rank, collective, index=0, elements=1024, dur=10.0):
    from profiling_guide.analysis.collectives import CollectiveCall

    return CollectiveCall(rank=rank, group="0", group_ranks=(0, 1), step=2, index=index, collective=collective,
                          dtype="Float", in_elements=elements, out_elements=elements, cpu_start_us=0.0,
                          kernel="ncclDevKernel_SendRecv", kernel_start_us=100.0, kernel_us=dur, kernels=1)


def test_a_send_and_its_recv_are_not_one_call_of_the_group():
    assert match_calls([call(0, "send"), call(1, "recv")]) == []


def test_an_all_to_all_may_move_a_different_amount_on_each_rank():
    (m,) = match_calls([call(0, "all_to_all", elements=100), call(1, "all_to_all", elements=300, dur=30.0)])
    assert m.complete and m.last_rank == 0 and m.wait_us(1) == 20.0


def test_sends_do_not_shift_the_place_of_the_collectives_after_them():
    # Pipeline stages send on one rank and receive on another: the all-reduce after them is call 0 of
    # its group on both, whatever each sent or received before it.
    def op(name, ts, **args):
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 5, "tid": 1, "pid": 1,
                "args": {"Collective name": name, "Process Group Name": "0", "dtype": "Float", **args}}

    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 0, "dur": 100, "tid": 1, "pid": 1}
    sender = Trace([step, op("send", 10), op("send", 20), op("allreduce", 30)])
    receiver = Trace([step, op("recv", 10), op("allreduce", 30)])
    for t, rank in ((sender, 0), (receiver, 1)):
        calls = collective_calls(t, rank)
        assert [(c.collective, c.index) for c in calls if c.collective == "all_reduce"] == [("all_reduce", 0)]
