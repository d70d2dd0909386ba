"""The Gluon ping-pong design on the CPU: when it is chosen, how it is launched, and that it compiles for sm_90.

Gluon kernels do not run in Triton's interpreter; the kernel's numbers are
checked on a Hopper GPU (``tests/test_fused_mlp_gpu.py``). Here: the design
choice (with the GPU's answers stood in for), the ring depth that fits, the
launch plan (grid, descriptors, constants), and the kernel compiled to PTX and
a cubin for an H100 by this Triton, no GPU needed.
"""

import re

import pytest
import torch

from conftest import run_pytest_in_fresh_process
from hopper import H100_SHARED, compile_gluon_for_h100, cuda_like, ptxas_report

import profiling_guide.kernels.fused_mlp as fm
from profiling_guide.errors import GuideError
from profiling_guide.kernels import geglu_pingpong as gp
from profiling_guide.kernels.geglu_kernels import INTERPRETED

@pytest.mark.parametrize("capability,dtype,dim,want", [
    ((9, 0), torch.bfloat16, 768, "pingpong"),  # H100, H200
    ((9, 0), torch.float16, 768, "pingpong"),
    ((9, 0), torch.float32, 768, "packed-tma"),  # wgmma's fp32 path is TF32: the exact design is packed-tma
    ((10, 0), torch.bfloat16, 768, "packed-tma"),  # Blackwell: TMA, but no wgmma
    ((8, 0), torch.bfloat16, 768, "packed"),  # A100: no TMA unit
    ((9, 0), torch.bfloat16, 36, "packed"),  # 72-byte rows: the TMA unit cannot address them
])  # fmt: skip
def test_auto_picks_pingpong_only_on_hopper_for_16_bit_rows_the_tma_unit_can_address(gpu, capability, dtype, dim, want):
    gpu(*capability)
    assert fm.choose_design(cuda_like(64, dim, dtype), 3072) == want


def test_pingpong_s_refusals_say_what_to_use_instead(gpu):
    gpu(10, 0, name="NVIDIA B200")
    assert "wgmma" in fm._pingpong_problem(cuda_like(64, 768)) and "B200" in fm._pingpong_problem(cuda_like(64, 768))
    gpu(9, 0)
    assert "use 'packed-tma'" in fm._pingpong_problem(cuda_like(64, 768, torch.float32))
    assert "interpreter" in fm._pingpong_problem(torch.empty(4, 768, dtype=torch.bfloat16))
    assert fm._tma_problem(cuda_like(64, 36), 3072, design="pingpong").startswith("design 'pingpong' needs rows")


@pytest.mark.parametrize("config,shared,want", [
    (gp.DEFAULT_CONFIG, H100_SHARED, 6),  # 6 × 32 KiB slots + 2 × 16 KiB staging tiles
    (gp._config(128, 64, 64, 4, stages=8), H100_SHARED, 6),  # asks for more than fits: lowered
    (gp.DEFAULT_CONFIG, 166912, 4),  # an A100-sized budget (163 KiB)
    (gp._config(128, 64, 64, 4, stages=6, consumers=1), H100_SHARED, 6),
    (gp.DEFAULT_CONFIG, 40000, 2),  # never fewer than two: one loading while one is read
])  # fmt: skip
def test_the_ring_is_as_deep_as_the_config_asks_and_shared_memory_allows(config, shared, want):
    assert gp.fit_stages(config, 2, shared) == want


def test_storing_g_and_u_keeps_room_for_a_tile_more_per_consumer():
    assert gp.fit_stages(gp.DEFAULT_CONFIG, 2, H100_SHARED, save_gu=True) == 5
    assert gp.fit_stages(gp.DEFAULT_CONFIG, 2, 166912, save_gu=True) == 3  # A100-sized: 3 × 32 + 4 × 16 KiB


GUIDE = (8192, 768, 3072)  # rows, dim, hidden


def bf16(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype)


@pytest.mark.parametrize("x,w,gu,says", [
    (bf16(64, 768), bf16(6144, 512), None, "packed weight [2·hidden, dim]"),  # dim 768 against 512
    (bf16(64, 768), bf16(6143, 768), None, "packed weight [2·hidden, dim]"),  # an odd row count: not packed
    (bf16(768), bf16(6144, 768), None, "x [M, dim]"),
    (bf16(64, 768, dtype=torch.float32), bf16(6144, 768, dtype=torch.float32), None, "use design 'packed-tma'"),
    (bf16(64, 768), bf16(6144, 768, dtype=torch.float16), None, "of one dtype"),
    (bf16(0, 768), bf16(6144, 768), None, "non-empty"),
    (bf16(64, 768), bf16(6144, 768), bf16(64, 3072), "gu [64, 6144]"),  # h's shape, not [g | u]'s
    (bf16(64, 768), bf16(6144, 768), bf16(64, 6144, dtype=torch.float32), "in torch.bfloat16"),
    (bf16(64, 768), bf16(6144, 768), bf16(6144, 64).t(), "not contiguous"),
])  # fmt: skip
def test_the_kernel_refuses_operands_it_cannot_take_in_one_line_saying_what_it_needs(x, w, gu, says):
    # checked before anything touches a GPU: these are CPU tensors
    with pytest.raises(GuideError, match=re.escape(says)) as refusal:
        gp.geglu_pingpong(x, w, gu=gu)
    assert "\n" not in str(refusal.value)


def guide_operands():
    """x, the packed weight, h and gu at the guide's shape in bf16: CPU tensors, for launch plans and compiles."""
    M, dim, hidden = GUIDE
    return tuple(torch.empty(shape, dtype=torch.bfloat16) for shape in
                 ((M, dim), (2 * hidden, dim), (M, hidden), (M, 2 * hidden)))  # fmt: skip


def test_the_launch_plan_gives_one_program_per_sm_and_descriptors_of_the_config_s_tiles():
    M, dim, hidden = GUIDE
    x, w, h, _ = guide_operands()
    grid, args, meta = gp.launch_plan(x, w, h, gp.DEFAULT_CONFIG, H100_SHARED, 132)
    assert grid == (132,)
    assert [d.block_shape for d in args[:3]] == [[128, 64], [128, 64], [128, 64]]  # x, packed w (2·BLOCK_N rows), h
    assert args[3] is h, "no gu to store: the kernel's unused gu pointer is h's"
    assert args[4:] == (M, hidden, dim)
    assert meta["NUM_STAGES"] == 6 and meta["CONSUMERS"] == 2 and meta["num_warps"] == 4 and not meta["SAVE_GU"]
    small = gp.launch_plan(x[:100], w, h[:100], gp.DEFAULT_CONFIG, H100_SHARED, 132)[0]
    assert small == (48,), "fewer tiles than SMs: one program per tile"


def test_a_training_forward_stores_g_and_u_to_gu_with_one_ring_slot_fewer():
    x, w, h, gu = guide_operands()
    _, args, meta = gp.launch_plan(x, w, h, gp.DEFAULT_CONFIG, H100_SHARED, 132, gu=gu)
    assert args[3] is gu and meta["SAVE_GU"]
    # 5 × 32 KiB slots, the h staging tiles and room for regrouping g and u into rows: 6 slots would not fit
    assert meta["NUM_STAGES"] == 5


def test_a_pinned_pingpong_config_is_reported_as_it_runs():
    x = torch.empty(64, 768, dtype=torch.bfloat16)
    assert fm.tuned_config("pingpong", x, 3072) == (
        "BLOCK_M=128 BLOCK_N=64 BLOCK_K=64 GROUP_M=4 NUM_STAGES=6 CONSUMERS=2 num_warps=4")
    pinned = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "NUM_STAGES": 4, "CONSUMERS": 1}
    assert fm.tuned_config("pingpong", x, 3072, pinned).endswith("NUM_STAGES=4 CONSUMERS=1 num_warps=4")
    tiles_only = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}  # as the Triton designs are pinned
    assert fm.tuned_config("pingpong", x, 3072, tiles_only) == (
        "BLOCK_M=64 BLOCK_N=128 BLOCK_K=64 GROUP_M=8 NUM_STAGES=6 CONSUMERS=2 num_warps=4")


def test_a_config_naming_only_tiles_launches_with_the_default_ring_and_consumers():
    import triton

    x, w = torch.empty(1024, 768, dtype=torch.bfloat16), torch.empty(6144, 768, dtype=torch.bfloat16)
    tiles_only = triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8)
    _, args, meta = gp.launch_plan(x, w, torch.empty(1024, 3072, dtype=torch.bfloat16), gp.full_config(tiles_only),
                                   H100_SHARED, 132)  # fmt: skip
    assert [d.block_shape for d in args[:3]] == [[64, 64], [256, 64], [64, 128]]
    assert meta["CONSUMERS"] == 2 and meta["num_warps"] == 4, "one warpgroup per consumer, whatever was asked"
    assert meta["NUM_STAGES"] == 4, "the default 6 slots of 40 KiB do not fit beside the staging tiles: lowered"


def compile_for_h100(config, save_gu=False):
    """The gate/up kernel compiled for sm_90 at the guide's shape (storing g and u too, with ``save_gu``)."""
    x, w, h, gu = guide_operands()
    _, args, meta = gp.launch_plan(x, w, h, config, H100_SHARED, 132, gu=gu if save_gu else None)
    return compile_gluon_for_h100(gp._geglu_pingpong_gemm_kernel, args, meta)


if INTERPRETED:
    # this process's kernels run in Triton's interpreter, which cannot lower a Gluon kernel: the
    # compile tests run in a fresh process without it
    def test_the_kernel_compiles_in_a_fresh_process():
        run_pytest_in_fresh_process(__file__, "-m", "compiled", interpreted=False, timeout=600)


@pytest.mark.parametrize("consumers,warps", [(2, 12), (1, 8)])
@pytest.mark.compiled
@pytest.mark.skipif(INTERPRETED, reason="Triton's interpreter is on in this process: run in a fresh one (above)")
def test_the_kernel_compiles_for_an_h100_with_its_partitions_and_fits_its_shared_memory(consumers, warps):
    config = gp._config(128, 64, 64, 4, stages=6, consumers=consumers)
    compiled = compile_for_h100(config)
    ptx = compiled.asm["ptx"]
    assert compiled.metadata.shared <= H100_SHARED
    # 4 warps per consumer warpgroup and the producer's warp, padded to whole warpgroups
    assert compiled.metadata.num_warps == warps
    # each consumer's K step: two m64 wgmmas (BLOCK_M = 128) 2·BLOCK_N = 128 wide, in bf16
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16", ptx)
    assert len(re.findall(r"wgmma\.mma_async", ptx)) == 8 * consumers  # 4 K-substeps of 16 × 2 row halves, per consumer
    # the partitions trade registers: the producer gives some back, the consumers take them
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+\d+;", ptx)
    assert len(compiled.asm["cubin"]) > 0, "ptxas assembled it for sm_90a"


@pytest.mark.compiled
@pytest.mark.skipif(INTERPRETED, reason="Triton's interpreter is on in this process: run in a fresh one (above)")
def test_the_kernel_compiles_for_one_row_which_a_launch_passes_as_a_constant():
    # Triton specializes an integer argument of 1 into a constant: the kernel's tile bundle takes it as a tensor
    x, w, h, _ = guide_operands()
    config = gp._config(128, 64, 64, 4, stages=6, consumers=1)
    _, args, meta = gp.launch_plan(x[:1], w, h[:1], config, H100_SHARED, 132)
    assert args[4] == 1
    compiled = compile_gluon_for_h100(gp._geglu_pingpong_gemm_kernel, args, meta)
    assert len(re.findall(r"wgmma\.mma_async", compiled.asm["ptx"])) == 8


@pytest.mark.compiled
@pytest.mark.skipif(INTERPRETED, reason="Triton's interpreter is on in this process: run in a fresh one (above)")
def test_the_training_forward_compiles_with_g_and_u_stored_from_registers_without_spills(tmp_path):
    compiled = compile_for_h100(gp.DEFAULT_CONFIG, save_gu=True)
    ptx = compiled.asm["ptx"]
    assert compiled.metadata.shared <= H100_SHARED
    # the TMA unit copies x and w in and h out (one store per consumer); g and u leave by plain
    # stores, streaming (.cs): nothing reads them before the backward
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared", ptx)) == 2
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared", ptx)) == 2
    stores = re.findall(r"\bst\.global\.[\w.]+", ptx)
    assert stores and all(s.startswith("st.global.cs.") for s in stores), set(stores)
    report = ptxas_report(ptx, tmp_path)
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", report), report
