"""The ``"pingpong"`` design of the gate/up kernel, written in Gluon for Hopper.

Why a fourth design, in another language. The ``"packed-tma"`` kernel runs
the GeGLU epilogue (split, GeLU·mul, store of h) in the same warps that issue
the tensor-core instructions, so while a program runs its epilogue its SM's
tensor cores wait. Triton's language has no way to say "these warps compute
while those warps run the epilogue of the previous tile": its compiler picks
the schedule. Gluon (``triton.experimental.gluon``, shipped with Triton) is
the same compiler one level lower: the kernel allocates shared memory,
initializes mbarriers, issues TMA copies and ``wgmma`` instructions and splits
its warps into partitions itself. The schedule is ours to write, and this one
is the *ping-pong* schedule of CUTLASS's Hopper GEMMs:

* one **producer** warp streams x tiles and packed-weight tiles into a ring of
  ``NUM_STAGES`` shared-memory slots with the TMA unit; a pair of mbarriers
  per slot says "full" (the copy landed) and "empty" (its MMA finished);
* two **consumer** warpgroups (4 warps each) take the program's output tiles
  in turn: consumer 0 the program's tiles 0, 2, 4…, consumer 1 tiles 1, 3,
  5…. A pair of *turn* mbarriers passes the tensor cores between them: a
  consumer starts its K loop once the other has issued its last ``wgmma``,
  then runs its epilogue while the other's MMAs run. The tensor cores stop
  only when both wait. The producer fills the ring in tile order, so the
  next tile's operands are already there at each hand-over. (``CONSUMERS=1``
  keeps the producer, the ring and the epilogue and drops the turns: what
  chapter 6c measures the schedule against.)

Each consumer's tile is ``[BLOCK_M, 2·BLOCK_N]`` of the packed product (rows
2j and 2j+1 of the packed weight are gate row j and up row j, as for
``"packed"``), an fp32 accumulator of ``BLOCK_M·2·BLOCK_N / 128`` registers
per thread (128 at 128×128), so two of them fit one SM's register file with
room for the epilogue. The epilogue is the other designs' one: split the
column pairs (a renaming of registers), ``gelu_tanh(g)·u`` with the hardware
tanh for 16-bit inputs, one rounding to x's dtype, and a TMA store of the h
tile through a staging tile in shared memory.

A training forward (``gu=``) also stores g and u, rounded to x's dtype, for
the backward (``fused_mlp.GeGLUFunction``): from registers, regrouped by the
compiler into rows, 16 bytes a thread, streaming (``.cs``), not through
staging tiles and the TMA unit as h goes, which kept the tensor pipe idle
half the time. The measurements behind this and the default config, dated,
with their GPU and versions, are in ``docs/notes/gluon_kernels_2026_11.md``.

The code follows Gluon's tutorials: the consumer partition (``_consumer``)
reads everything through one ``@aggregate`` bundle (``GateUpPartitions``:
the tile shape, the operand ring and its mbarriers, the turns, where h goes)
and counts its ring steps with a ``RingCounter``; the producer partition,
the ring and the launch of the partitions (``ping_pong``) are shared with
the backward's kernel in :mod:`~profiling_guide.kernels.geglu_common`.

Gluon has no interpreter: this design runs on Hopper GPUs only and its
numbers are tested there (``tests/test_fused_mlp_gpu.py``); what needs no GPU
(the design choice, the ring depth, the launch plan) is tested on the CPU, and
there the kernel is also compiled for sm_90, to PTX and a cubin
(``tests/test_pingpong.py``).
"""

# No `from __future__ import annotations`: the aggregates below need real annotations (geglu_common says why).
import torch
import triton
import triton.profiler.language as pl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from profiling_guide.errors import GuideError
from profiling_guide.kernels.geglu_common import (
    OperandRing,
    RingCounter,
    Tiles,
    aggregate,
    descriptor,
    gelu_tanh_times,
    gluon_dtype,
    on_device,
    ping_pong,
    ring_slots,
    tma_store,
)

# Registers per thread asked for the second consumer warpgroup (setmaxnreg): what
# the accumulator and the epilogue need; the producer warp gives back the rest.
CONSUMER_REGISTERS = gl.constexpr(232)


# ---------------------------------------------------------------- configs
def _config(bm, bn, bk, group_m, stages, consumers=2) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "NUM_STAGES": stages,
                          "CONSUMERS": consumers}, num_warps=4)  # fmt: skip


# BLOCK_N counts columns of h, as in geglu_kernels: each consumer's wgmma is
# 2·BLOCK_N wide. Shared memory per ring slot in bf16: 2·BLOCK_K·(BLOCK_M + 2·BLOCK_N)
# bytes (32 KiB at 128/64/64), plus per consumer one [BLOCK_M, BLOCK_N]
# staging tile (16 KiB): 6 slots use 224 KiB of the H100's 227. NUM_STAGES is
# lowered at launch to what fits the GPU at hand (fit_stages).
#
# One config, not an autotuned list: Triton's autotuner times each config on
# one input, again and again, so x and the weights sit in L2 and it ranks
# configs by how they run on a warm cache, not on the benchmark's rotating
# inputs (scripts/probe_pingpong.py --sweep ranks them that way). Wider tiles
# (128×192, as the quack anchor runs them) were no faster, and spilled when
# storing g and u (docs/notes/gluon_kernels_2026_11.md).
DEFAULT_CONFIG = _config(128, 64, 64, 4, stages=6)


def full_config(config: triton.Config | None, default: triton.Config = DEFAULT_CONFIG) -> triton.Config:
    """``config`` with what it leaves out (ring depth, consumers) from ``default``, on 4 warps.

    A pinned config may name only the tiles, as the Triton designs' do; the
    kernel's layouts assume one warpgroup (4 warps) per consumer. The
    backward's ping-pong kernel fills in from its own default.
    """
    if config is None:
        return default
    return triton.Config({**default.kwargs, **config.kwargs}, num_warps=4)


def fit_stages(config: triton.Config, element_bytes: int, shared_bytes: int, save_gu: bool = False) -> int:
    """The ring slots ``config`` runs with: its NUM_STAGES, or fewer where they and the staging tiles would not fit.

    A forward that also stores g and u (``save_gu``) keeps room for one more
    tile per consumer: the shared memory the compiler regroups g and u through
    on their way to global memory (``_consumer``).
    """
    k = config.kwargs
    slot = element_bytes * k["BLOCK_K"] * (k["BLOCK_M"] + 2 * k["BLOCK_N"])
    staging = (1 + save_gu) * k["CONSUMERS"] * element_bytes * k["BLOCK_M"] * k["BLOCK_N"]
    return ring_slots(k["NUM_STAGES"], slot, staging, shared_bytes)


# ---------------------------------------------------------------- device code
@aggregate
class GateUpPartitions:
    """What the gate/up kernel's consumers read: the tiles, the operand ring, the turns, and where h (and g, u) go."""

    tiles: Tiles
    ring: OperandRing
    turn: gl.shared_memory_descriptor  # consumer i may start its K loop when turn[i] completes
    h_desc: tma.tensor_descriptor
    gu_ptr: gl.tensor  # [M, 2N], [g | u], with SAVE_GU (otherwise unused)
    CONSUMERS: gl.constexpr
    SAVE_GU: gl.constexpr


@gluon.jit
def _consumer(p, WHICH: gl.constexpr):
    """One warpgroup: the program's tiles WHICH, WHICH + CONSUMERS, …: K loop of wgmma, then the GeGLU epilogue."""
    BLOCK_M: gl.constexpr = p.tiles.BLOCK_M
    BLOCK_N: gl.constexpr = p.tiles.BLOCK_N
    dtype: gl.constexpr = p.h_desc.dtype
    # The accumulator's register layout: one warpgroup (4 warps down M), one
    # wgmma of the whole tile width per K step of 16.
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 2 * BLOCK_N, 16])  # fmt: skip
    staging = gl.allocate_shared_memory(dtype, p.h_desc.block_type.shape, p.h_desc.layout)
    # With SAVE_GU, g and u leave in rows: 8 elements (16 bytes) per thread, a warp's 32 threads on
    # 32·8/BLOCK_N rows of BLOCK_N columns, so each row of a tile is written by whole 16-byte stores.
    rows_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BLOCK_N, BLOCK_N // 8], [4, 1], [1, 0])
    num_tiles = p.tiles.count()
    k_steps = p.tiles.k_steps()
    first = gl.program_id(0)
    programs = gl.num_programs(0)
    j = 0  # how many tiles this consumer has taken
    for tile_id in range(first + WHICH * programs, num_tiles, p.CONSUMERS * programs):
        pid_m, pid_n = p.tiles.coordinates(tile_id)
        # the ring slot this tile's first K step was loaded into
        read = RingCounter((tile_id - first) // programs * k_steps, p.ring.a.shape[0])
        if p.CONSUMERS == 2:
            # Wait for our turn on the tensor cores: the other consumer has
            # issued its K loop's last wgmma (consumer 0's first turn is free:
            # a fresh mbarrier passes a wait on parity 1). Besides setting the
            # ping-pong's rhythm, the turns keep each consumer within one
            # phase of the ring's mbarriers, which a parity wait needs: without
            # them consumer 1 would wait on slots a whole tile ahead.
            mbarrier.wait(p.turn.index(WHICH), (j & 1) ^ (1 - WHICH))
        # Proton's intra-kernel scopes (measure.inside_kernel.proton_phases): compiled
        # away unless Proton's instrumentation is on.
        pl.enter_scope("mma")
        acc = gl.zeros([BLOCK_M, 2 * BLOCK_N], gl.float32, acc_layout)
        for ki in range(k_steps):
            slot = read.index()
            mbarrier.wait(p.ring.full.index(slot), read.phase())
            x_tile, w_tile = p.ring.a.index(slot), p.ring.b.index(slot)
            acc = warpgroup_mma(x_tile, w_tile.permute((1, 0)), acc, is_async=True)
            # Keep one wgmma in flight: when this returns, the previous step's
            # is done and its slot can be refilled.
            acc, _, _ = warpgroup_mma_wait(1, deps=(acc, x_tile, w_tile))
            mbarrier.arrive(p.ring.empty.index(read.previous_index()), pred=ki > 0)
            read = read.next()
        if p.CONSUMERS == 2:  # the other consumer's turn: it issues its wgmmas while ours drain and we run the epilogue
            mbarrier.arrive(p.turn.index(1 - WHICH))
        j += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(p.ring.empty.index(read.previous_index()))
        pl.exit_scope("mma")
        pl.enter_scope("epilogue")

        # The epilogue, while the other warpgroup's wgmmas run. acc[:, 2j] is
        # g[:, j] and acc[:, 2j+1] is u[:, j]: each thread holds both.
        g, u = acc.reshape([BLOCK_M, BLOCK_N, 2]).split()
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        tma.store_wait(0)  # the staging tile's store of this consumer's previous tile has left
        if p.SAVE_GU:
            # g and u as the GEMM computed them, rounded to x's dtype, for the backward: regrouped
            # from the accumulator's layout into rows (through shared memory, by the compiler) and
            # stored from registers, faster than staging them for the TMA unit as h is. Streaming
            # stores (.cs): the backward reads g and u only after the down GEMM, so holding them in
            # L2 serves nothing.
            rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, rows_layout))
            cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, rows_layout))
            N = p.tiles.N
            ptrs = p.gu_ptr + rows.to(gl.int64)[:, None] * (2 * N) + cols[None, :]
            mask = (rows[:, None] < p.tiles.M) & (cols[None, :] < N)
            gl.store(ptrs, gl.convert_layout(g.to(dtype), rows_layout), mask=mask, cache_modifier=".cs")
            gl.store(ptrs + N, gl.convert_layout(u.to(dtype), rows_layout), mask=mask, cache_modifier=".cs")
        h = gelu_tanh_times(g, u, True).to(dtype)  # the hardware tanh: 16-bit inputs only
        staging.store(h)
        fence_async_shared()
        tma_store(p.h_desc, [off_m, off_n], staging)
        pl.exit_scope("epilogue")
    tma.store_wait(0)


_partitions = ping_pong(_consumer)


@gluon.jit
def _geglu_pingpong_gemm_kernel(x_desc, w_desc, h_desc, gu_ptr, M, N, K,
                                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                                GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
                                SAVE_GU: gl.constexpr):  # fmt: skip
    """h[M, N] = gelu_tanh(g)·u, g and u from one wgmma per K step against the packed [2N, K] weight; persistent.

    With SAVE_GU, g and u are stored too, to gu_ptr (``[M, 2N]``, ``[g | u]``;
    otherwise unused).
    """
    # a size of 1 arrives as a constant (Triton specializes it): the bundle holds tensors
    tiles = Tiles(gl.to_tensor(M), gl.to_tensor(N), gl.to_tensor(K), BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    ring = OperandRing.allocate(x_desc, w_desc, NUM_STAGES, False)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)  # consumer i may start its K loop
    p = GateUpPartitions(tiles, ring, turn, h_desc, gu_ptr, CONSUMERS, SAVE_GU)
    _partitions(p, CONSUMERS, CONSUMER_REGISTERS)


# ---------------------------------------------------------------- the wrapper
def geglu_pingpong(x2d: torch.Tensor, w_packed: torch.Tensor, *, config: triton.Config | None = None,
                   gu: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """h ``[M, hidden]`` from x ``[M, dim]`` and ``pack_gate_up(w_gate, w_up)``, ping-pong scheduled (Hopper).

    Rows must be 16-byte aligned (the TMA unit's rule), inputs bf16 or fp16.
    With ``gu`` (``[M, 2·hidden]``, x's dtype), g and u are also stored there
    side by side, ``[g | u]``, as ``"packed-tma"`` stores them for the backward.
    Raises :class:`~profiling_guide.errors.GuideError` for operands it cannot take.
    """
    _check_operands(x2d, w_packed, gu)
    M, K = x2d.shape
    N = w_packed.shape[0] // 2
    h = torch.empty((M, N), device=x2d.device, dtype=x2d.dtype)
    props = torch.cuda.get_device_properties(x2d.device)
    grid, args, meta = launch_plan(x2d, w_packed, h, full_config(config),
                                   props.shared_memory_per_block_optin, props.multi_processor_count, gu=gu)
    with on_device(x2d.device):  # as the Triton designs launch: nothing to do when x's GPU is current
        _geglu_pingpong_gemm_kernel[grid](*args, **meta)
    return h


def _check_operands(x2d: torch.Tensor, w_packed: torch.Tensor, gu: torch.Tensor | None) -> None:
    """Raise a one-line GuideError where x, the packed weight or gu are not what the kernel reads and writes."""
    if x2d.dim() != 2 or w_packed.dim() != 2 or x2d.shape[1] != w_packed.shape[1] or w_packed.shape[0] % 2:
        raise GuideError(f"geglu_pingpong needs x [M, dim] and the packed weight [2·hidden, dim] "
                         f"(pack_gate_up), got {tuple(x2d.shape)} and {tuple(w_packed.shape)}")  # fmt: skip
    if x2d.dtype != w_packed.dtype or gluon_dtype(x2d.dtype) is None:
        raise GuideError(f"geglu_pingpong takes bf16 or fp16 x and weight of one dtype, got {x2d.dtype} and "
                         f"{w_packed.dtype}: use design 'packed-tma' for other dtypes")  # fmt: skip
    if 0 in x2d.shape or 0 in w_packed.shape:
        raise GuideError(f"geglu_pingpong needs non-empty x and weight (a tensor descriptor cannot describe an "
                         f"empty tensor), got {tuple(x2d.shape)} and {tuple(w_packed.shape)}")  # fmt: skip
    if gu is not None:
        _check_gate_up_out(gu, (x2d.shape[0], w_packed.shape[0]), x2d.dtype)


def _check_gate_up_out(gu: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype) -> None:
    if tuple(gu.shape) != shape or gu.dtype != dtype or not gu.is_contiguous():
        layout = "" if gu.is_contiguous() else ", not contiguous"
        raise GuideError(f"geglu_pingpong stores g and u to a contiguous gu {list(shape)} in {dtype}, got "
                         f"{list(gu.shape)} in {gu.dtype}{layout}")  # fmt: skip


def launch_plan(x2d, w_packed, h, config: triton.Config, shared_bytes: int, sms: int, gu=None):
    """The grid, the arguments and the constants of one launch: what runs, decided without a GPU."""
    M, K = x2d.shape
    N = h.shape[1]
    save_gu = gu is not None
    meta = {**config.kwargs, "NUM_STAGES": fit_stages(config, x2d.element_size(), shared_bytes, save_gu),
            "SAVE_GU": save_gu, "num_warps": config.num_warps}
    bm, bn, bk = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
    args = (descriptor(x2d, [bm, bk]), descriptor(w_packed, [2 * bn, bk]), descriptor(h, [bm, bn]),
            gu if save_gu else h, M, N, K)  # fmt: skip
    # Persistent: one program per SM (fewer if there are fewer tiles); its consumers take its tiles in turn.
    grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    return grid, args, meta
