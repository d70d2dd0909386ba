"""The ``"pingpong"`` design of the backward's epilogue-fused GEMM, written in Gluon for Hopper.

The backward's first kernel (:mod:`profiling_guide.kernels.geglu_backward`)
computes a tile of ``dh = dy @ Wd`` and, in its epilogue, reads the tile's g
and u and writes dg and du. At the guide's shape (K = dim = 768: 12 K steps
of 64) the epilogue's memory takes about as long as the GEMM's tensor-core
work: 8 bytes of g, u, dg and du per element of dh, 201 MB in all, against
39 GFLOP (on an H100, 67 µs at a 3 TB/s copy rate against about 60 µs at
cuBLAS's GEMM rate). Run one after the other in the same warps, as ``"packed-tma"``
runs them, the two add up. Here one tile's epilogue runs while another
tile's MMAs do, with the ping-pong schedule of the forward's Gluon kernel
(:mod:`profiling_guide.kernels.geglu_pingpong`, whose docstring explains the
producer, the ring and the turns):

* the **producer** warp streams dy tiles and Wd tiles into the ring;
* two **consumer** warpgroups take the program's dh tiles in turn. Each one,
  as it takes a tile, asks the TMA unit for the first ``GU_BUFS`` chunks of
  the tile's g and u (``SUB_N`` columns each, into its own shared-memory
  tiles, on its own mbarrier), then waits for its turn and runs its K loop;
  the copies arrive meanwhile. Its epilogue, while the other consumer's
  ``wgmma`` run, goes chunk by chunk: the GeGLU's derivative on the chunk of
  the fp32 dh tile (``geglu_common.geglu_grads``, the function the Triton
  designs call), dg and du written over g and u in shared memory, TMA stores from
  there, and, once those stores have read the chunk's tiles, a copy of a
  later chunk's g and u into them (a *refill*), which lands while the next
  chunk is computed.

Wd is read as the down projection stores it (``[dim, hidden]``, N-major):
``wgmma`` takes its B operand in either major order, so no transposed copy.
The epilogue runs in chunks of ``SUB_N`` columns (32 by default), one TMA
copy each way per chunk: with 64-column chunks the accumulator, g and u of a
chunk do not fit the consumer's registers beside the rest of the tile, and
the compiler spills.

Why it is shaped so (the measurements behind each choice, dated, with their
GPU and versions, are in ``docs/notes/gluon_kernels_2026_11.md``):

* it takes about three quarters of ``"packed-tma"``'s time, yet most of the
  epilogue's traffic still adds to the GEMM's: each consumer waits for its
  previous tile's dg and du to leave shared memory before it asks for its
  next g and u, so an SM has at most two tiles of g and u in flight. Holding
  more sets, other K steps, copies from registers, L2 prefetches, 256-row
  tiles shared by both consumers and three consumers were each slower in a
  training step;
* it is launched as a *programmatic dependent* (``launch_plan``'s
  ``launch_pdl``, ``griddepcontrol.wait`` in the kernel before anything
  reads or writes global memory), so its launch and set-up overlap the end of
  the down GEMM before it;
* its default tiles are 128×64 holding both chunks: 128×128 tiles holding two
  of four chunks (``GU_BUFS=2``) win alone but lose inside a training step,
  and the default is the config fastest where it runs
  (``scripts/probe_backward.py --sweep`` times every config both ways).

g, u, dg and du are ``[M, hidden]`` views of gu's and dgu's halves, so a tile
hanging over column ``hidden`` is clipped at its own half's edge, as in the
Triton designs. bf16 and fp16 only (``wgmma``'s 16-bit inputs); the hardware
tanh, as the forward's epilogue uses.

The code is laid out as the forward's: the consumers read one bundle
(``GradPartitions``, with g and u's tiles, descriptors and mbarriers in
``GateUpChunks``), and the producer, the ring and the launch of the
partitions are the forward's own (``geglu_common``).

Gluon has no interpreter: the numbers are tested on Hopper GPUs
(``tests/test_fused_mlp_gpu.py``), the launch plan and the compiled kernel's
shape on the CPU (``tests/test_pingpong_backward.py``).
"""

# No `from __future__ import annotations`: the aggregates below need real annotations (geglu_common says why).
import torch
import triton
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
    geglu_grads,
    on_device,
    ping_pong,
    ring_slots,
    tma_load,
    tma_store,
)
from profiling_guide.kernels.geglu_pingpong import full_config

# Registers per thread for each consumer warpgroup (setmaxnreg). Eight more than
# the forward's: a 128×128 fp32 accumulator and a chunk's epilogue need them,
# and at 232 ptxas spilled. The producer warp's warpgroup gives back what the
# two consumers take: 2·128·240 + 128·24 is the 12 warps' 168 registers each.
CONSUMER_REGISTERS = gl.constexpr(240)


def _config(bm, bn, bk, group_m, stages, consumers=2, sub_n=32, gu_bufs=None) -> triton.Config:
    """A config; ``gu_bufs`` (chunks of g and u held per consumer) defaults to the whole tile's."""
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "NUM_STAGES": stages,
                          "CONSUMERS": consumers, "SUB_N": sub_n,
                          "GU_BUFS": bn // sub_n if gu_bufs is None else gu_bufs},
                         num_warps=4)  # fmt: skip


# BLOCK_N counts columns of dh. Shared memory in bf16 at 128/64/64: a ring
# slot holds a dy tile and a Wd tile, 2·BLOCK_K·(BLOCK_M + BLOCK_N) bytes
# (24 KiB); each consumer holds GU_BUFS chunks of g and u, 4·BLOCK_M·SUB_N
# bytes each (16 KiB), here both of a tile's. Six slots and two consumers: 208
# KiB of the H100's 227. Chosen by the training step's time, not the kernel's
# alone (the docstring says why); tiles taken along a row of dh (GROUP_M=1)
# beat grouped orders. Not autotuned, for the reason geglu_pingpong.DEFAULT_CONFIG gives.
DEFAULT_CONFIG = _config(128, 64, 64, 1, stages=6)


def fit_stages(config: triton.Config, element_bytes: int, shared_bytes: int) -> int:
    """The ring slots ``config`` runs with: its NUM_STAGES, or fewer where they and the g/u chunks would not fit."""
    k = config.kwargs
    slot = element_bytes * k["BLOCK_K"] * (k["BLOCK_M"] + k["BLOCK_N"])
    held = k["CONSUMERS"] * held_chunks(config) * 2 * element_bytes * k["BLOCK_M"] * k["SUB_N"]
    return ring_slots(k["NUM_STAGES"], slot, held, shared_bytes)


def held_chunks(config: triton.Config) -> int:
    """The chunks of g and u a consumer holds: the config's GU_BUFS, or a whole tile's where that is fewer."""
    k = config.kwargs
    return min(k["GU_BUFS"], max(1, k["BLOCK_N"] // k["SUB_N"]))


# ---------------------------------------------------------------- device code
@gluon.jit
def _grid_dependency_wait():
    """``griddepcontrol.wait``: until the grids this one depends on have finished and their writes are visible."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _launch_dependents():
    """``griddepcontrol.launch_dependents``: the next kernel, if launched for it, may start its own set-up."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                              pack=1)  # fmt: skip


@gluon.jit
def _halves(t):
    """Columns [0, n/2) and [n/2, n) of a [BLOCK_M, n] accumulator: each thread holds both, so no data moves."""
    BLOCK_M: gl.constexpr = t.shape[0]
    HALF: gl.constexpr = t.shape[1] // 2
    return t.reshape([BLOCK_M, 2, HALF]).permute((0, 2, 1)).split()


@aggregate
class GateUpChunks:
    """The saved g and u, read in SUB_N-column chunks, and dg and du written over them: descriptors, tiles, mbarriers.

    Per consumer, GU_BUFS shared-memory tiles of g and of u (consumer c's tile
    j is index c·GU_BUFS + j); ``ready[c]`` completes when consumer c's first
    chunks of a tile have landed, ``refilled[c·CHUNKS + k]`` when chunk k,
    copied in as a refill, has.
    """

    g_desc: tma.tensor_descriptor
    u_desc: tma.tensor_descriptor
    dg_desc: tma.tensor_descriptor
    du_desc: tma.tensor_descriptor
    g_tiles: gl.shared_memory_descriptor
    u_tiles: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor
    refilled: gl.shared_memory_descriptor

    @gluon.jit
    def load(self, first, bar, off_m, off_n, COUNT: gl.constexpr):
        """Ask the TMA unit for COUNT chunks of g and u from (off_m, off_n) on, into tiles first, first + 1, …

        One ``expect`` for all of them: ``bar`` completes when every chunk has landed.
        """
        SUB_N: gl.constexpr = self.g_desc.block_type.shape[1]
        mbarrier.expect(bar, 2 * COUNT * self.g_desc.block_type.nbytes)
        for c in gl.static_range(COUNT):
            tma_load(self.g_desc, [off_m, off_n + c * SUB_N], bar, self.g_tiles.index(first + c))
            tma_load(self.u_desc, [off_m, off_n + c * SUB_N], bar, self.u_tiles.index(first + c))

    @gluon.jit
    def store_grads(self, dh, buf, off_m, off_n):
        """One chunk: g and u from tiles ``buf``, dg and du over them, stored by the TMA unit.

        Each thread reads and then overwrites the same elements (one layout for
        both), so no thread can clobber another's g or u before it is read.
        """
        g_tile = self.g_tiles.index(buf)
        u_tile = self.u_tiles.index(buf)
        g = g_tile.load(dh.type.layout).to(gl.float32)
        u = u_tile.load(dh.type.layout).to(gl.float32)
        dg, du = geglu_grads(g, u, dh, True)  # the hardware tanh: 16-bit inputs only
        g_tile.store(dg.to(self.dg_desc.dtype))
        u_tile.store(du.to(self.du_desc.dtype))
        fence_async_shared()
        tma_store(self.dg_desc, [off_m, off_n], g_tile)
        tma_store(self.du_desc, [off_m, off_n], u_tile)


@gluon.jit
def _chunk_of(acc, c: gl.constexpr, CHUNKS: gl.constexpr):
    """Chunk ``c`` of CHUNKS (1, 2 or 4) of the accumulator's columns, by halving: no data moves."""
    if CHUNKS == 1:
        chunk = acc
    elif CHUNKS == 2:
        lo, hi = _halves(acc)
        chunk = lo if c == 0 else hi
    else:
        left, right = _halves(acc)
        lo, hi = _halves(left if c < 2 else right)
        chunk = lo if c % 2 == 0 else hi
    return chunk


@aggregate
class GradPartitions:
    """What the backward kernel's consumers read: the tiles, the operand ring, the turns, and g/u's chunks."""

    tiles: Tiles
    ring: OperandRing
    turn: gl.shared_memory_descriptor
    chunks: GateUpChunks
    CONSUMERS: gl.constexpr
    GU_BUFS: gl.constexpr  # chunks of g and u each consumer holds


@gluon.jit
def _consumer(p, WHICH: gl.constexpr):
    """One warpgroup: tiles WHICH, WHICH + CONSUMERS, … of this program: g/u copies, K loop, epilogue."""
    BLOCK_M: gl.constexpr = p.tiles.BLOCK_M
    BLOCK_N: gl.constexpr = p.tiles.BLOCK_N
    GU_BUFS: gl.constexpr = p.GU_BUFS
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BLOCK_N, 16])  # fmt: skip
    SUB_N: gl.constexpr = p.chunks.g_desc.block_type.shape[1]
    CHUNKS: gl.constexpr = BLOCK_N // SUB_N
    num_tiles = p.tiles.count()
    k_steps = p.tiles.k_steps()
    first = gl.program_id(0)
    programs = gl.num_programs(0)
    ready = p.chunks.ready.index(WHICH)
    base = WHICH * GU_BUFS  # this consumer's first g/u tile
    i = 0  # how many tiles this consumer has taken
    for tile_id in range(first + WHICH * programs, num_tiles, p.CONSUMERS * programs):
        pid_m, pid_n = p.tiles.coordinates(tile_id)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        read = RingCounter((tile_id - first) // programs * k_steps, p.ring.a.shape[0])
        # This tile's first GU_BUFS chunks of g and u, copied in while we wait for
        # our turn and run the K loop. The previous tile's dg and du stores read
        # the same shared tiles: wait until they have.
        tma.store_wait(0)
        p.chunks.load(base, ready, off_m, off_n, GU_BUFS)
        if p.CONSUMERS == 2:
            mbarrier.wait(p.turn.index(WHICH), (i & 1) ^ (1 - WHICH))  # see geglu_pingpong's _consumer
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        for ki in range(k_steps):
            slot = read.index()
            mbarrier.wait(p.ring.full.index(slot), read.phase())
            dy_tile, wd_tile = p.ring.a.index(slot), p.ring.b.index(slot)
            acc = warpgroup_mma(dy_tile, wd_tile, acc, is_async=True)
            acc, _, _ = warpgroup_mma_wait(1, deps=(acc, dy_tile, wd_tile))
            mbarrier.arrive(p.ring.empty.index(read.previous_index()), pred=ki > 0)
            read = read.next()
        if p.CONSUMERS == 2:
            mbarrier.arrive(p.turn.index(1 - WHICH))
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(p.ring.empty.index(read.previous_index()))

        mbarrier.wait(ready, i & 1)
        for c in gl.static_range(CHUNKS):
            buf = base + c % GU_BUFS
            if c >= GU_BUFS:  # this chunk's g and u came in as a refill (below): each mbarrier serves one chunk
                mbarrier.wait(p.chunks.refilled.index(WHICH * CHUNKS + c), i & 1)
            p.chunks.store_grads(_chunk_of(acc, c, CHUNKS), buf, off_m, off_n + c * SUB_N)
            if c + GU_BUFS < CHUNKS:
                # refill: once this chunk's dg and du stores have read its tiles, chunk
                # c + GU_BUFS's g and u go into them, landing while chunk c + 1 is computed
                tma.store_wait(0)
                p.chunks.load(buf, p.chunks.refilled.index(WHICH * CHUNKS + c + GU_BUFS),
                              off_m, off_n + (c + GU_BUFS) * SUB_N, 1)
        i += 1
    tma.store_wait(0)


_partitions = ping_pong(_consumer)


@gluon.jit
def _geglu_backward_pingpong_gemm_kernel(dy_desc, wd_desc, g_desc, u_desc, dg_desc, du_desc, M, N, K,
                                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                                    GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
                                    GU_BUFS: gl.constexpr):  # fmt: skip
    """dg, du ``[M, N]`` from dh = dy[M, K] @ Wd[K, N] and the saved g, u; persistent, ping-pong scheduled."""
    dtype: gl.constexpr = dy_desc.dtype
    CHUNKS: gl.constexpr = BLOCK_N // g_desc.block_type.shape[1]
    # a size of 1 arrives as a constant (Triton specializes it): the bundle holds tensors
    tiles = Tiles(gl.to_tensor(M), gl.to_tensor(N), gl.to_tensor(K), BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    ring = OperandRing.allocate(dy_desc, wd_desc, NUM_STAGES, True)  # Wd read as stored, [BLOCK_K, BLOCK_N]
    # per consumer, GU_BUFS SUB_N-column tiles of g and of u: consumer c's tile j is index c·GU_BUFS + j
    g_tiles = gl.allocate_shared_memory(dtype, [CONSUMERS * GU_BUFS] + g_desc.block_type.shape, g_desc.layout)
    u_tiles = gl.allocate_shared_memory(dtype, [CONSUMERS * GU_BUFS] + u_desc.block_type.shape, u_desc.layout)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    gu_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
        mbarrier.init(gu_ready.index(i), count=1)  # consumer i's expect + the TMA's bytes of its first chunks
    # per consumer and chunk of a tile, the mbarrier its refill lands on (chunks past GU_BUFS use theirs)
    refilled = gl.allocate_shared_memory(gl.int64, [2 * CHUNKS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * CHUNKS):
        mbarrier.init(refilled.index(i), count=1)
    # Programmatic dependent launch (the launch asks for it: launch_plan's launch_pdl): this program
    # may start while the kernel before it (the down GEMM, in a step) finishes, and set up its
    # shared memory and mbarriers meanwhile; it reads and writes global memory only after the wait,
    # which returns once that kernel has finished and its writes are visible. The trigger lets the
    # kernel after this one do the same, if it was launched asking for it.
    _grid_dependency_wait()
    _launch_dependents()
    chunks = GateUpChunks(g_desc, u_desc, dg_desc, du_desc, g_tiles, u_tiles, gu_ready, refilled)
    p = GradPartitions(tiles, ring, turn, chunks, CONSUMERS, GU_BUFS)
    _partitions(p, CONSUMERS, CONSUMER_REGISTERS)


# ---------------------------------------------------------------- the wrapper
def geglu_backward_pingpong(dy2d: torch.Tensor, w_down: torch.Tensor, gu: torch.Tensor,
                            dgu: torch.Tensor, *, config: triton.Config | None = None,
                            dependent: bool = True) -> torch.Tensor:  # fmt: skip
    """Fills ``dgu`` = ``[dg | du]`` from dy ``[M, dim]``, the down weight ``[dim, hidden]`` and ``gu`` = ``[g | u]``.

    The caller (:func:`~profiling_guide.kernels.geglu_backward.geglu_backward`)
    checks shapes, dtypes and the TMA unit's alignment. ``dependent=False``
    launches without programmatic dependent launch (the kernel's wait is
    then a no-op): what ``scripts/probe_backward.py`` times it against.
    """
    props = torch.cuda.get_device_properties(dy2d.device)
    grid, args, meta = launch_plan(dy2d, w_down, gu, dgu, full_config(config, DEFAULT_CONFIG),
                                   props.shared_memory_per_block_optin, props.multi_processor_count,
                                   dependent=dependent)  # fmt: skip
    with on_device(dy2d.device):
        _geglu_backward_pingpong_gemm_kernel[grid](*args, **meta)
    return dgu


def launch_plan(dy2d, w_down, gu, dgu, config: triton.Config, shared_bytes: int, sms: int,
                dependent: bool = True):
    """The grid, the arguments and the constants of one launch: what runs, decided without a GPU."""
    M, K = dy2d.shape
    N = w_down.shape[1]
    meta = {**config.kwargs, "NUM_STAGES": fit_stages(config, dy2d.element_size(), shared_bytes),
            "num_warps": config.num_warps, "launch_pdl": dependent}
    bm, bn, bk, sub_n = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"], meta.pop("SUB_N")
    if bn // sub_n not in (1, 2, 4) or bn % sub_n:
        raise GuideError(f"the backward's ping-pong kernel runs its epilogue in 1, 2 or 4 chunks of a tile, got "
                         f"BLOCK_N {bn} in chunks of SUB_N {sub_n}: use SUB_N = BLOCK_N, BLOCK_N/2 or BLOCK_N/4")  # fmt: skip
    if meta["GU_BUFS"] < 1:
        raise GuideError(f"the backward's ping-pong kernel holds at least one chunk of g and u per consumer, "
                         f"got GU_BUFS {meta['GU_BUFS']}: use GU_BUFS 1 or more")  # fmt: skip
    meta["GU_BUFS"] = held_chunks(config)
    halves = (gu[:, :N], gu[:, N:], dgu[:, :N], dgu[:, N:])
    args = (descriptor(dy2d, [bm, bk]), descriptor(w_down, [bk, bn]),
            *(descriptor(t, [bm, sub_n]) for t in halves), M, N, K)  # fmt: skip
    grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    return grid, args, meta
