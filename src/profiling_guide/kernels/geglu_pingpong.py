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

Gluon has no interpreter: this design runs on Hopper GPUs only and its
numbers are tested there (``tests/test_fused_mlp_gpu.py``); what needs no GPU
(the design choice, the ring depth, the launch plan) is tested on the CPU, and
there the kernel is also compiled for sm_90, to PTX and a cubin
(``tests/test_pingpong.py``).
"""

from __future__ import annotations

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
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from profiling_guide.kernels.geglu_kernels import _on_device

# The TMA copies were renamed after Triton 3.6 (async_load / async_store);
# the GPU machines run 3.6, the CPU tests a newer Triton that compiles this
# kernel for sm_90 without a GPU. Same operations, either name.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

# Registers per thread asked for each worker partition (setmaxnreg): the
# second consumer warpgroup gets what the accumulator and the epilogue need,
# the producer warp, which only issues copies, gives the rest back.
CONSUMER_REGISTERS = gl.constexpr(232)
PRODUCER_REGISTERS = gl.constexpr(24)


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


def ring_slots(stages: int, slot_bytes: int, reserved_bytes: int, shared_bytes: int) -> int:
    """``stages`` ring slots of ``slot_bytes``, or as many as fit beside ``reserved_bytes``; never fewer than two.

    Both Gluon kernels size their rings so (the backward's reserves its g/u tiles).
    """
    # 1 KiB for the mbarriers and what the compiler reserves
    fits = (shared_bytes - reserved_bytes - 1024) // slot_bytes
    return max(2, min(stages, fits))


_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


# ---------------------------------------------------------------- device code
@gluon.jit
def _tile_coordinates(tile_id, M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """Tile id → (tile row, tile column), GROUP_M rows of tiles at a time (as geglu_kernels._tile_coordinates)."""
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = gl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@gluon.jit
def _gelu_tanh_times(g, u):
    """``gelu_tanh(g) * u`` with the hardware tanh (``tanh.approx.f32``): geglu_kernels._gelu_tanh_times's FAST_TANH branch."""
    z = g * (0.7978845608028654 + 0.035677408136300125 * g * g)  # √(2/π)·(g + 0.044715·g³)
    t = gl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [z], dtype=gl.float32, is_pure=True, pack=1)
    half_g = 0.5 * g
    return (half_g + half_g * t) * u


@gluon.jit
def _producer(a_desc, b_desc, a_ring, b_ring, full, empty, M, N, K,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
              NUM_STAGES: gl.constexpr, B_KN: gl.constexpr):  # fmt: skip
    """One warp: every K step of every tile of this program, in order, into the ring.

    A's tiles are ``[BLOCK_M, BLOCK_K]`` (x here, dy in the backward's
    kernel); B's are ``[n, BLOCK_K]`` as the packed weight stores them (n =
    2·BLOCK_N) or, with B_KN, ``[BLOCK_K, n]`` as the down weight does.
    """
    num_tiles = gl.cdiv(M, BLOCK_M) * gl.cdiv(N, BLOCK_N)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    b_cols: gl.constexpr = b_desc.block_type.shape[1 if B_KN else 0]  # B's tile extent along n
    step = 0  # how many ring slots this program has filled
    for tile_id in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        pid_m, pid_n = _tile_coordinates(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        for k in range(0, K, BLOCK_K):
            slot = step % NUM_STAGES
            # Wait until the MMA that last read this slot is done. A fresh
            # mbarrier counts as having completed the phase before its first,
            # so the first pass over the ring (parity 1) does not wait.
            mbarrier.wait(empty.index(slot), ((step // NUM_STAGES) & 1) ^ 1)
            mbarrier.expect(full.index(slot), nbytes)
            _tma_load(a_desc, [pid_m * BLOCK_M, k], full.index(slot), a_ring.index(slot))
            if B_KN:
                _tma_load(b_desc, [k, pid_n * b_cols], full.index(slot), b_ring.index(slot))
            else:
                _tma_load(b_desc, [pid_n * b_cols, k], full.index(slot), b_ring.index(slot))
            step += 1


@gluon.jit
def _consumer(x_ring, w_ring, full, empty, turn, h_desc, gu_ptr, M, N, K,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
              NUM_STAGES: gl.constexpr, WHICH: gl.constexpr, CONSUMERS: gl.constexpr, SAVE_GU: gl.constexpr):
    """One warpgroup: the program's tiles WHICH, WHICH + CONSUMERS, …: K loop of wgmma, then the GeGLU epilogue."""
    dtype: gl.constexpr = h_desc.dtype
    # The accumulator's register layout: one warpgroup (4 warps down M), one
    # wgmma of the whole tile width per K step of 16.
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 2 * BLOCK_N, 16])  # fmt: skip
    staging = gl.allocate_shared_memory(dtype, h_desc.block_type.shape, h_desc.layout)
    # With SAVE_GU, g and u leave in rows: 8 elements (16 bytes) per thread, a warp's 32 threads on
    # 32·8/BLOCK_N rows of BLOCK_N columns, so each row of a tile is written by whole 16-byte stores.
    rows_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BLOCK_N, BLOCK_N // 8], [4, 1], [1, 0])
    num_tiles = gl.cdiv(M, BLOCK_M) * gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    first = gl.program_id(0)
    programs = gl.num_programs(0)
    j = 0  # how many tiles this consumer has taken
    for tile_id in range(first + WHICH * programs, num_tiles, CONSUMERS * programs):
        pid_m, pid_n = _tile_coordinates(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        step = (tile_id - first) // programs * k_steps  # the ring slot this tile's first K step was loaded into
        if CONSUMERS == 2:
            # Wait for our turn on the tensor cores: the other consumer has
            # issued its K loop's last wgmma (consumer 0's first turn is free:
            # a fresh mbarrier passes a wait on parity 1). Besides setting the
            # ping-pong's rhythm, the turns keep each consumer within one
            # phase of the ring's mbarriers, which a parity wait needs: without
            # them consumer 1 would wait on slots a whole tile ahead.
            mbarrier.wait(turn.index(WHICH), (j & 1) ^ (1 - WHICH))
        # Proton's intra-kernel scopes (measure.inside_kernel.proton_phases): compiled
        # away unless Proton's instrumentation is on.
        pl.enter_scope("mma")
        acc = gl.zeros([BLOCK_M, 2 * BLOCK_N], gl.float32, acc_layout)
        for ki in range(k_steps):
            slot = step % NUM_STAGES
            mbarrier.wait(full.index(slot), (step // NUM_STAGES) & 1)
            acc = warpgroup_mma(x_ring.index(slot), w_ring.index(slot).permute((1, 0)), acc, is_async=True)
            # Keep one wgmma in flight: when this returns, the previous step's
            # is done and its slot can be refilled.
            acc, _, _ = warpgroup_mma_wait(1, deps=(acc, x_ring.index(slot), w_ring.index(slot)))
            mbarrier.arrive(empty.index((step + NUM_STAGES - 1) % NUM_STAGES), pred=ki > 0)
            step += 1
        if CONSUMERS == 2:  # the other consumer's turn: it issues its wgmmas while ours drain and we run the epilogue
            mbarrier.arrive(turn.index(1 - WHICH))
        j += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((step + NUM_STAGES - 1) % NUM_STAGES))
        pl.exit_scope("mma")
        pl.enter_scope("epilogue")

        # The epilogue, while the other warpgroup's wgmmas run. acc[:, 2j] is
        # g[:, j] and acc[:, 2j+1] is u[:, j]: each thread holds both.
        g, u = acc.reshape([BLOCK_M, BLOCK_N, 2]).split()
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        tma.store_wait(0)  # the staging tile's store of this consumer's previous tile has left
        if SAVE_GU:
            # g and u as the GEMM computed them, rounded to x's dtype, for the backward: regrouped
            # from the accumulator's layout into rows (through shared memory, by the compiler) and
            # stored from registers, faster than staging them for the TMA unit as h is. Streaming
            # stores (.cs): the backward reads g and u only after the down GEMM, so holding them in
            # L2 serves nothing (docs/notes/gluon_kernels_2026_11.md).
            rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, rows_layout))
            cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, rows_layout))
            ptrs = gu_ptr + rows.to(gl.int64)[:, None] * (2 * N) + cols[None, :]
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            gl.store(ptrs, gl.convert_layout(g.to(dtype), rows_layout), mask=mask, cache_modifier=".cs")
            gl.store(ptrs + N, gl.convert_layout(u.to(dtype), rows_layout), mask=mask, cache_modifier=".cs")
        h = _gelu_tanh_times(g, u).to(dtype)
        staging.store(h)
        fence_async_shared()
        _tma_store(h_desc, [off_m, off_n], staging)
        pl.exit_scope("epilogue")
    tma.store_wait(0)


@gluon.jit
def _geglu_pingpong_gemm_kernel(x_desc, w_desc, h_desc, gu_ptr, M, N, K,
                                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                                GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
                                SAVE_GU: gl.constexpr):  # fmt: skip
    """h[M, N] = gelu_tanh(g)·u, g and u from one wgmma per K step against the packed [2N, K] weight; persistent.

    With SAVE_GU, g and u are stored too, to gu_ptr (``[M, 2N]``, ``[g | u]``;
    otherwise unused).
    """
    dtype: gl.constexpr = x_desc.dtype
    x_ring = gl.allocate_shared_memory(dtype, [NUM_STAGES] + x_desc.block_type.shape, x_desc.layout)
    w_ring = gl.allocate_shared_memory(dtype, [NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    full = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(full.index(i), count=1)  # the producer's expect + the TMA's bytes
        mbarrier.init(empty.index(i), count=1)  # the consumer that read the slot
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)  # consumer i may start its K loop
    if CONSUMERS == 2:  # ping-pong
        gl.warp_specialize([
            # The default partition is the kernel's own 4 warps: consumer 0.
            (_consumer, (x_ring, w_ring, full, empty, turn, h_desc, gu_ptr, M, N, K,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, 0, 2, SAVE_GU)),
            (_consumer, (x_ring, w_ring, full, empty, turn, h_desc, gu_ptr, M, N, K,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, 1, 2, SAVE_GU)),
            (_producer, (x_desc, w_desc, x_ring, w_ring, full, empty, M, N, K,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, False)),
        ], [4, 1], [CONSUMER_REGISTERS, PRODUCER_REGISTERS])  # fmt: skip
    else:  # one consumer and the producer: warp-specialized, without the ping-pong (to measure what it adds)
        gl.warp_specialize([
            (_consumer, (x_ring, w_ring, full, empty, turn, h_desc, gu_ptr, M, N, K,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, 0, 1, SAVE_GU)),
            (_producer, (x_desc, w_desc, x_ring, w_ring, full, empty, M, N, K,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, False)),
        ], [1], [PRODUCER_REGISTERS])  # fmt: skip


# ---------------------------------------------------------------- the wrapper
def descriptor(t: torch.Tensor, block_shape: list[int]) -> TensorDescriptor:
    """A Gluon tensor descriptor of ``t`` with the default swizzled shared layout for ``block_shape``."""
    return TensorDescriptor.from_tensor(t, block_shape, gl.NVMMASharedLayout.get_default_for(block_shape, _GL_DTYPES[t.dtype]))


def geglu_pingpong(x2d: torch.Tensor, w_packed: torch.Tensor, *, config: triton.Config | None = None,
                   gu: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """h ``[M, hidden]`` from x ``[M, dim]`` and ``pack_gate_up(w_gate, w_up)``, ping-pong scheduled (Hopper).

    Rows must be 16-byte aligned (the TMA unit's rule), inputs bf16 or fp16.
    With ``gu`` (``[M, 2·hidden]``, x's dtype), g and u are also stored there
    side by side, ``[g | u]``, as ``"packed-tma"`` stores them for the backward.
    """
    assert x2d.shape[1] == w_packed.shape[1] and w_packed.shape[0] % 2 == 0, "incompatible dimensions"
    assert x2d.dtype == w_packed.dtype and x2d.dtype in _GL_DTYPES, "bf16 or fp16 inputs"
    M, K = x2d.shape
    N = w_packed.shape[0] // 2
    assert M > 0 and N > 0 and K > 0, "a tensor descriptor needs a non-empty tensor"
    h = torch.empty((M, N), device=x2d.device, dtype=x2d.dtype)
    props = torch.cuda.get_device_properties(x2d.device)
    grid, args, meta = launch_plan(x2d, w_packed, h, full_config(config),
                                   props.shared_memory_per_block_optin, props.multi_processor_count, gu=gu)
    with _on_device(x2d.device):  # as the Triton designs launch: nothing to do when x's GPU is current
        _geglu_pingpong_gemm_kernel[grid](*args, **meta)
    return h


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
