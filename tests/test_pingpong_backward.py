"""The backward's Gluon ping-pong kernel on the CPU: when it runs, how it is launched, and that it compiles for sm_90.

Its numbers are checked on a Hopper GPU (``tests/test_fused_mlp_gpu.py``:
every shape of CHECK_SHAPES against float64 autograd, the same bits with one
consumer or other tiles, the fused MLP's training step). Here: which backward
a training step runs (the GPU's answers stood in for), the ring depth that
fits beside the g/u tiles, the launch plan, and the kernel compiled by this
Triton for an H100, registers and shared memory included.
"""

import re
from pathlib import Path

import pytest
import torch

from conftest import run_pytest_in_fresh_process
from hopper import H100_SHARED, compile_gluon_for_h100, cuda_like, ptxas_report

import profiling_guide.kernels.fused_mlp as fm
from profiling_guide.errors import GuideError
from profiling_guide.kernels import geglu_backward_pingpong as bp
from profiling_guide.kernels.geglu_kernels import INTERPRETED

GUIDE = (8192, 768, 3072)  # rows, dim, hidden


@pytest.mark.parametrize("capability,dtype,saving,want", [
    ((9, 0), torch.bfloat16, "pingpong", "pingpong"),  # H100, H200: what a training step of design="auto" runs
    ((9, 0), torch.float16, "pingpong", "pingpong"),
    ((9, 0), torch.bfloat16, "packed-tma", "pingpong"),  # a module built with design="packed-tma"
    ((9, 0), torch.float32, "packed-tma", "packed-tma"),  # wgmma takes 16-bit inputs
    ((10, 0), torch.bfloat16, "packed-tma", "packed-tma"),  # Blackwell: no wgmma
    ((9, 0), torch.bfloat16, "packed", "packed"),  # rows the TMA unit cannot address ran "packed" forward
])  # fmt: skip
def test_a_training_step_runs_the_ping_pong_backward_on_hopper_after_a_tma_forward(gpu, capability, dtype, saving, want):
    gpu(*capability)
    assert fm.backward_design(saving, cuda_like(64, 768, dtype)) == want


def test_on_the_cpu_the_backward_keeps_the_forward_s_design():
    # the interpreter runs Triton designs only: a CPU tensor never gets the Gluon kernel
    assert fm.backward_design("packed-tma", torch.empty(4, 768, dtype=torch.bfloat16)) == "packed-tma"


@pytest.mark.parametrize("config,shared,want", [
    (bp.DEFAULT_CONFIG, H100_SHARED, 6),  # 6 × 24 KiB slots + 2 consumers × 2 chunks × 16 KiB of g and u
    (bp._config(128, 128, 64, 1, stages=6, gu_bufs=2), H100_SHARED, 5),  # 32 KiB slots beside 2 of 4 chunks
    (bp._config(128, 128, 64, 8, stages=6), H100_SHARED, 3),  # all 4 chunks held, 64 KiB each: lowered
    (bp._config(128, 128, 64, 1, stages=6, gu_bufs=1), H100_SHARED, 6),  # one chunk held: 6 slots fit
    (bp.DEFAULT_CONFIG, 166912, 4),  # an A100-sized budget (163 KiB)
    (bp._config(128, 64, 64, 1, stages=6, consumers=1), H100_SHARED, 6),
    (bp._config(128, 64, 64, 1, stages=6, gu_bufs=4), H100_SHARED, 6),  # more chunks than a tile has: its 2
    (bp.DEFAULT_CONFIG, 60000, 2),  # never fewer than two: one loading while one is read
])  # fmt: skip
def test_the_ring_is_as_deep_as_the_config_asks_and_the_held_g_u_chunks_leave_room_for(config, shared, want):
    assert bp.fit_stages(config, 2, shared) == want


def plan(config=bp.DEFAULT_CONFIG, rows=GUIDE[0]):
    _, dim, hidden = GUIDE
    dy, wd = torch.empty(rows, dim, dtype=torch.bfloat16), torch.empty(dim, hidden, dtype=torch.bfloat16)
    gu, dgu = torch.empty(rows, 2 * hidden, dtype=torch.bfloat16), torch.empty(rows, 2 * hidden, dtype=torch.bfloat16)
    return (gu, dgu), bp.launch_plan(dy, wd, gu, dgu, config, H100_SHARED, 132)


def test_the_launch_plan_reads_wd_as_stored_and_gu_s_halves_in_chunks():
    (gu, dgu), (grid, args, meta) = plan()
    rows, dim, hidden = GUIDE
    assert grid == (132,)
    # dy [BLOCK_M, BLOCK_K]; Wd as the down projection stores it, [BLOCK_K, BLOCK_N]; g, u, dg, du in 32-column chunks
    assert [d.block_shape for d in args[:6]] == [[128, 64], [64, 64]] + [[128, 32]] * 4
    g, u, dg, du = args[2:6]
    assert (g.base.data_ptr(), u.base.data_ptr()) == (gu.data_ptr(), gu.data_ptr() + 2 * hidden)
    assert (dg.base.data_ptr(), du.base.data_ptr()) == (dgu.data_ptr(), dgu.data_ptr() + 2 * hidden)
    assert list(g.shape) == [rows, hidden] and list(g.strides) == [2 * hidden, 1], "a tile is clipped at its own half"
    assert args[6:] == (rows, hidden, dim)
    assert "SUB_N" not in meta, "the chunk width travels in the descriptors' tiles, not as a constant"
    assert meta["NUM_STAGES"] == 6 and meta["CONSUMERS"] == 2 and meta["num_warps"] == 4
    assert meta["GU_BUFS"] == 2, "both of a tile's chunks of g and u held"
    assert meta["launch_pdl"] is True, "launched to overlap its set-up with the kernel before it"
    dy, wd = torch.empty(rows, dim, dtype=torch.bfloat16), torch.empty(dim, hidden, dtype=torch.bfloat16)
    ordinary = bp.launch_plan(dy, wd, gu, dgu, bp.DEFAULT_CONFIG, H100_SHARED, 132, dependent=False)[2]
    assert ordinary["launch_pdl"] is False and {**ordinary, "launch_pdl": True} == meta
    assert plan(rows=100)[1][0] == (48,), "fewer tiles than SMs: one program per tile"


def test_a_config_naming_only_tiles_runs_with_the_backward_s_own_ring_chunks_and_consumers():
    import triton

    from profiling_guide.kernels.geglu_pingpong import full_config

    tiles_only = triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8)
    config = full_config(tiles_only, bp.DEFAULT_CONFIG)
    assert config.kwargs == {**bp.DEFAULT_CONFIG.kwargs, "BLOCK_N": 128, "GROUP_M": 8} and config.num_warps == 4
    _, (_, args, meta) = plan(config)
    assert [d.block_shape for d in args[:6]] == [[128, 64], [64, 128]] + [[128, 32]] * 4
    assert meta["GU_BUFS"] == 2, "the default's 2 chunks held, of the 128-column tile's 4"
    assert meta["NUM_STAGES"] == 5, "the default 6 slots of 32 KiB do not fit beside them: lowered"


def test_a_config_holding_no_chunk_of_g_and_u_is_refused():
    with pytest.raises(GuideError, match="at least one chunk"):
        plan(bp._config(128, 128, 64, 1, 5, gu_bufs=-1))


def test_a_tile_split_into_other_than_1_2_or_4_chunks_is_refused():
    with pytest.raises(GuideError, match="1, 2 or 4 chunks"):
        plan(bp._config(128, 64, 64, 1, 6, sub_n=8))


def compile_for_h100(config):
    """The backward's kernel compiled for sm_90 at the guide's shape."""
    _, (_, args, meta) = plan(config)
    return compile_gluon_for_h100(bp._geglu_backward_pingpong_gemm_kernel, args, meta)


if INTERPRETED:
    # this process's kernels run in Triton's interpreter, which cannot lower a Gluon kernel: the
    # compile tests run in a fresh process without it
    def test_the_kernel_compiles_in_a_fresh_process():
        run_pytest_in_fresh_process(__file__, "-m", "compiled", interpreted=False, timeout=900)


@pytest.mark.compiled
@pytest.mark.skipif(INTERPRETED, reason="Triton's interpreter is on in this process: run in a fresh one (above)")
@pytest.mark.parametrize("config,consumers,warps,width,refills", [
    (bp.DEFAULT_CONFIG, 2, 12, 64, 0),  # 64-column tiles, both chunks held
    (bp._config(128, 64, 64, 1, stages=6, consumers=1), 1, 8, 64, 0),
    (bp._config(128, 128, 64, 1, stages=5, gu_bufs=2), 2, 12, 128, 2),  # 128-column tiles, 2 of 4 chunks held, 2 refilled
])  # fmt: skip
def test_the_kernel_compiles_for_an_h100_with_its_partitions_in_its_shared_memory_and_registers(
        config, consumers, warps, width, refills, tmp_path):  # fmt: skip
    compiled = compile_for_h100(config)
    ptx = compiled.asm["ptx"]
    assert compiled.metadata.shared <= H100_SHARED
    assert compiled.metadata.num_warps == warps  # 4 per consumer and the producer's warp, padded to a warpgroup
    # each consumer's K step of 64: 4 substeps × 2 row halves of m64n{width}k16, B read N-major from Wd as stored
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{width}k16\.f32\.bf16\.bf16", ptx)
    assert len(re.findall(r"wgmma\.mma_async", ptx)) == 8 * consumers
    # per consumer: dg and du out of every chunk; g and u into the held chunks and each refill (and the producer's loads)
    chunks = width // 32
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared", ptx)) == 2 * chunks * consumers
    loads = len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::\w+\.global", ptx))
    assert loads - 2 * chunks * consumers in (2, 3), f"{loads} TMA loads"  # the producer's dy and Wd copies
    assert len(re.findall(r"mbarrier\.try_wait", ptx)) >= consumers * (3 + refills)  # turn, full, g/u ready, refills
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)
    assert consumers == 1 or re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+240;", ptx)
    # launched as a programmatic dependent: one wait for the kernel before, ahead of every copy to or from global memory
    assert ptx.count("griddepcontrol.wait") == 1 and ptx.count("griddepcontrol.launch_dependents") == 1
    assert ptx.index("griddepcontrol.wait") < min(m.start() for m in re.finditer(r"cp\.async\.bulk", ptx))
    report = ptxas_report(ptx, tmp_path)
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", report), report


def test_every_config_the_probe_checks_or_sweeps_runs_as_its_name_says_on_an_h100(monkeypatch):
    # the probe names each timing by its config's constants: a ring lowered to fit, or fewer
    # chunks held than asked, would time something other than what the name says
    monkeypatch.syspath_prepend(Path(__file__).resolve().parents[1] / "scripts")  # as the script runs
    import probe_backward

    configs = probe_backward.CHECKED + probe_backward.sweep_configs()
    assert bp.DEFAULT_CONFIG in configs
    for config in configs:
        _, (_, _, meta) = plan(config)
        assert (meta["NUM_STAGES"], meta["GU_BUFS"]) == (config.kwargs["NUM_STAGES"], config.kwargs["GU_BUFS"]), config
