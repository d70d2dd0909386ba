"""What the GeGLU kernels share: the device math of every design, and the Gluon kernels' Hopper machinery.

Device code written once for both languages: the tile order
(:func:`tile_coordinates`), GELU-tanh (:func:`gelu_tanh_times`) and its
derivative (:func:`geglu_grads`), and their constants. They are
``@triton.jit`` functions, which a ``@gluon.jit`` kernel calls as its own (the
compiled PTX is the same as from a Gluon copy of them).

The rest serves the Gluon ping-pong kernels
(:mod:`~profiling_guide.kernels.geglu_pingpong`,
:mod:`~profiling_guide.kernels.geglu_backward_pingpong`), in the idiom of
Gluon's tutorials: the partitions take ``@aggregate`` bundles
(:class:`Tiles`, :class:`OperandRing`), a :class:`RingCounter` says which
ring slot and mbarrier phase a step uses, one :func:`producer` partition
feeds both kernels, and :func:`ping_pong` launches the partitions.

Everything here works in Triton 3.6 (what the GPU machines run) and in the
newer Triton the CPU tests compile with (``scripts/gluon_ptx_digest.py``
compiles both ways). Where they differ: Triton's ``aggregate`` is
``triton.aggregate`` in the newer one and only
``triton.language.core._aggregate`` in 3.6 (where Gluon's own tutorials
import it from); 3.6 needs the class to write its ``__init__``, which
:func:`aggregate` here writes for it; the newer one forbids changing a field
after ``__init__``, so a counter moves on by making a new one; and the TMA
copies were renamed. The modules that define aggregates do without
``from __future__ import annotations``: Triton 3.6 checks a field against its
annotation as written, which must then be a class, not a string.
"""

import contextlib
import math

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

_triton_aggregate = getattr(triton, "aggregate", None) or triton.language.core._aggregate
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


def on_device(device: torch.device):
    """Launch on ``device``'s GPU; the common case (already current, or the CPU) costs nothing."""
    if device.type == "cuda" and device.index is not None and device.index != torch.cuda.current_device():
        return torch.cuda.device(device)
    return contextlib.nullcontext()


def aggregate(cls):
    """Triton's ``@aggregate``, given the ``__init__`` Triton 3.6 needs: one argument per field, in order.

    Newer Tritons write that ``__init__`` themselves; 3.6 calls the class's
    own. Fields annotated ``gl.constexpr`` are stored as constants.
    """
    names = tuple(cls.__annotations__)
    constants = {name for name, kind in cls.__annotations__.items() if kind is gl.constexpr}

    @gluon.constexpr_function
    def __init__(self, *values):
        for name, value in zip(names, values, strict=True):
            setattr(self, name, gl.constexpr(value) if name in constants else value)

    cls.__init__ = __init__
    return _triton_aggregate(cls)


# ---------------------------------------------------------------- device math of every design
# gelu_tanh(g) = 0.5·g·(1 + tanh(z)), z = √(2/π)·(g + 0.044715·g³) = g·(SQRT_2_OVER_PI + Z_CUBIC·g²);
# dz/dg = √(2/π)·(1 + 3·0.044715·g²) = SQRT_2_OVER_PI + DZ_SQUARE·g².
SQRT_2_OVER_PI = tl.constexpr(math.sqrt(2 / math.pi))  # 0.7978845608028654
GELU_CUBIC = tl.constexpr(0.044715)
Z_CUBIC = tl.constexpr(SQRT_2_OVER_PI.value * GELU_CUBIC.value)  # 0.035677408136300125
DZ_SQUARE = tl.constexpr(3 * GELU_CUBIC.value * SQRT_2_OVER_PI.value)  # 0.10703222440890037


@triton.jit
def tile_coordinates(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Program (or tile) id → (tile row, tile column), GROUP_M rows of tiles at a time.

    Launched in plain row-major order, consecutive programs would walk along one
    row of output tiles and each would need a different weight tile. Grouped
    ("swizzled") order walks down GROUP_M tile rows first, so programs running
    at the same time share weight tiles and x tiles in L2.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def gelu_tanh_times(g, u, FAST_TANH: tl.constexpr):
    """``gelu_tanh(g) * u`` on fp32 values: the GeGLU epilogue.

    gelu_tanh(g) = 0.5·g·(1 + tanh(z)) with z = √(2/π)·(g + 0.044715·g³).

    With ``FAST_TANH`` (16-bit inputs on a GPU), tanh is the hardware's
    ``tanh.approx.f32``: one instruction of the SM's special-function unit per
    element. Its maximum relative error, 2⁻¹¹ (PTX ISA, "tanh"), is far below
    the bf16 rounding of the result (2⁻⁸), and the epilogue, which the tensor
    cores wait for, runs on half the special-function instructions and fewer
    FMAs: it took the gate/up kernel from 1.02× to 0.94× the time of cuBLAS's
    gate and up GEMMs at the guide's shape on an H100
    (``scripts/probe_gate_up.py``).
    Otherwise (fp32 inputs, and Triton's interpreter, which cannot run inline
    PTX) the same function is written with exp only:
    0.5·(1 + tanh(z)) = sigmoid(2z), so gelu_tanh(g) = g / (1 + exp(-2z)),
    with no overflow trouble (exp → inf gives -0).
    """
    if FAST_TANH:
        z = g * (SQRT_2_OVER_PI + Z_CUBIC * g * g)  # √(2/π)·(g + 0.044715·g³)
        t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [z], dtype=tl.float32,
                                      is_pure=True, pack=1)  # fmt: skip
        half_g = 0.5 * g
        return (half_g + half_g * t) * u
    else:
        two_z = (2 * SQRT_2_OVER_PI) * (g + GELU_CUBIC * g * g * g)  # 2·√(2/π)·(g + 0.044715·g³)
        return g / (1.0 + tl.exp(-two_z)) * u


@triton.jit
def geglu_grads(g, u, dh, FAST_TANH: tl.constexpr):
    """``(dh · u · gelu_tanh'(g), dh · gelu_tanh(g))`` on fp32 values: the backward's epilogue.

    With t = tanh(z), z = √(2/π)·(g + 0.044715·g³):
    gelu_tanh(g) = 0.5·g·(1 + t) and
    gelu_tanh'(g) = 0.5·(1 + t) + 0.5·g·(1 - t²)·√(2/π)·(1 + 3·0.044715·g²).
    ``FAST_TANH`` uses the hardware's ``tanh.approx.f32`` as the forward does;
    otherwise t = 2·sigmoid(2z) - 1 from exp alone (the interpreter, fp32).
    """
    z = g * (SQRT_2_OVER_PI + Z_CUBIC * g * g)
    if FAST_TANH:
        t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [z], dtype=tl.float32,
                                      is_pure=True, pack=1)  # fmt: skip
    else:
        t = 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0
    half_one_plus_t = 0.5 + 0.5 * t
    gelu = g * half_one_plus_t
    dgelu = half_one_plus_t + 0.5 * g * (1.0 - t * t) * (SQRT_2_OVER_PI + DZ_SQUARE * g * g)  # dz/dg
    return dh * u * dgelu, dh * gelu


# ---------------------------------------------------------------- the Gluon kernels' machinery
# Registers per thread the producer warp asks for (setmaxnreg): it only issues copies, and gives
# the rest back to the consumer warpgroups (each kernel sets theirs).
PRODUCER_REGISTERS = gl.constexpr(24)

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def gluon_dtype(dtype: torch.dtype):
    """Gluon's name for a 16-bit torch dtype (the only ones ``wgmma`` takes here), or None."""
    return _GL_DTYPES.get(dtype)


def descriptor(t: torch.Tensor, block_shape: list[int]) -> TensorDescriptor:
    """A Gluon tensor descriptor of ``t`` with the default swizzled shared layout for ``block_shape``."""
    return TensorDescriptor.from_tensor(t, block_shape, gl.NVMMASharedLayout.get_default_for(block_shape, _GL_DTYPES[t.dtype]))


def ring_slots(stages: int, slot_bytes: int, reserved_bytes: int, shared_bytes: int) -> int:
    """``stages`` ring slots of ``slot_bytes``, or as many as fit beside ``reserved_bytes``; never fewer than two.

    Both Gluon kernels size their rings so (the backward's reserves its g/u tiles).
    """
    # 1 KiB for the mbarriers and what the compiler reserves
    fits = (shared_bytes - reserved_bytes - 1024) // slot_bytes
    return max(2, min(stages, fits))


@aggregate
class Tiles:
    """The GEMM's extent and how it is cut: M×N outputs in BLOCK_M×BLOCK_N tiles, K in steps of BLOCK_K."""

    M: gl.tensor
    N: gl.tensor
    K: gl.tensor
    BLOCK_M: gl.constexpr
    BLOCK_N: gl.constexpr
    BLOCK_K: gl.constexpr
    GROUP_M: gl.constexpr  # tile rows taken together (tile_coordinates)

    @gluon.jit
    def count(self):
        """How many output tiles."""
        return gl.cdiv(self.M, self.BLOCK_M) * gl.cdiv(self.N, self.BLOCK_N)

    @gluon.jit
    def k_steps(self):
        """How many K steps a tile takes."""
        return gl.cdiv(self.K, self.BLOCK_K)

    @gluon.jit
    def coordinates(self, tile_id):
        """Tile id → (tile row, tile column)."""
        return tile_coordinates(tile_id, self.M, self.N, self.BLOCK_M, self.BLOCK_N, self.GROUP_M)


@aggregate
class RingCounter:
    """Where the ``count``-th fill (or read) of a ring of SLOTS goes: its slot, and its mbarrier's phase parity.

    It holds the count, not the slot and phase as Gluon's tutorials' ``Counter``
    does, so the kernels compute ``count % SLOTS`` as they always have (and
    compile to the same instructions).
    """

    count: gl.tensor
    SLOTS: gl.constexpr

    @gluon.jit
    def index(self):
        """The slot this step uses."""
        return self.count % self.SLOTS

    @gluon.jit
    def phase(self):
        """The parity of the mbarrier phase that completes when this step's slot is ready."""
        return (self.count // self.SLOTS) & 1

    @gluon.jit
    def previous_index(self):
        """The slot the step before this one used."""
        return (self.count + self.SLOTS - 1) % self.SLOTS

    @gluon.must_use_result
    @gluon.jit
    def next(self):
        """The counter of the next step."""
        return RingCounter(self.count + 1, self.SLOTS)


@aggregate
class OperandRing:
    """The ring the producer fills and the consumers read: per slot an A tile and a B tile, and two mbarriers.

    ``full`` completes when a slot's copies have landed (the producer's
    ``expect`` and the TMA unit's bytes); ``empty`` when the MMA that read it
    has finished.
    """

    a_desc: tma.tensor_descriptor
    b_desc: tma.tensor_descriptor
    a: gl.shared_memory_descriptor
    b: gl.shared_memory_descriptor
    full: gl.shared_memory_descriptor
    empty: gl.shared_memory_descriptor
    B_KN: gl.constexpr  # B's tiles are [BLOCK_K, n] (the down weight as stored), not [n, BLOCK_K]

    @gluon.jit
    def allocate(a_desc, b_desc, NUM_STAGES: gl.constexpr, B_KN: gl.constexpr):
        """NUM_STAGES slots of A and B tiles as the descriptors copy them, and their mbarriers, initialized."""
        dtype: gl.constexpr = a_desc.dtype
        a = gl.allocate_shared_memory(dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
        b = gl.allocate_shared_memory(dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
        full = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(full.index(i), count=1)  # the producer's expect + the TMA's bytes
            mbarrier.init(empty.index(i), count=1)  # the consumer that read the slot
        return OperandRing(a_desc, b_desc, a, b, full, empty, B_KN)


@gluon.jit
def producer(tiles, ring):
    """One warp: every K step of every tile of this program, in order, into the ring.

    A's tiles are ``[BLOCK_M, BLOCK_K]`` (x in the forward, dy in the
    backward); B's are ``[n, BLOCK_K]`` as the packed weight stores them (n =
    2·BLOCK_N) or, with B_KN, ``[BLOCK_K, n]`` as the down weight does.
    """
    NUM_STAGES: gl.constexpr = ring.a.shape[0]
    nbytes: gl.constexpr = ring.a_desc.block_type.nbytes + ring.b_desc.block_type.nbytes
    b_cols: gl.constexpr = ring.b_desc.block_type.shape[1 if ring.B_KN else 0]  # B's tile extent along n
    num_tiles = tiles.count()
    fill = RingCounter(gl.to_tensor(0), NUM_STAGES)  # how many ring slots this program has filled
    for tile_id in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        pid_m, pid_n = tiles.coordinates(tile_id)
        for k in range(0, tiles.K, tiles.BLOCK_K):
            slot = fill.index()
            # Wait until the MMA that last read this slot is done. A fresh
            # mbarrier counts as having completed the phase before its first,
            # so the first pass over the ring (parity 1) does not wait.
            mbarrier.wait(ring.empty.index(slot), fill.phase() ^ 1)
            mbarrier.expect(ring.full.index(slot), nbytes)
            tma_load(ring.a_desc, [pid_m * tiles.BLOCK_M, k], ring.full.index(slot), ring.a.index(slot))
            if ring.B_KN:
                tma_load(ring.b_desc, [k, pid_n * b_cols], ring.full.index(slot), ring.b.index(slot))
            else:
                tma_load(ring.b_desc, [pid_n * b_cols, k], ring.full.index(slot), ring.b.index(slot))
            fill = fill.next()


def ping_pong(consumer):
    """The launch of a ping-pong kernel's partitions: a jit function ``launch(p, CONSUMERS, CONSUMER_REGISTERS)``.

    ``launch`` runs ``consumer(p, which)`` in each of CONSUMERS warpgroups and
    the :func:`producer` warp beside them, reading ``p.tiles`` and ``p.ring``.
    The default partition is the kernel's own 4 warps: consumer 0. With two
    consumers, consumer 1 gets CONSUMER_REGISTERS per thread and the producer
    warp PRODUCER_REGISTERS; with one, the producer alone runs beside it
    (warp-specialized, without the ping-pong: what the kernels measure the
    schedule against).

    Made per consumer, as a closure, because ``warp_specialize`` takes only a
    function it can name: one passed to a jit function arrives wrapped as a
    constant (Triton 3.6 and later alike).
    """

    @gluon.jit
    def launch(p, CONSUMERS: gl.constexpr, CONSUMER_REGISTERS: gl.constexpr):
        if CONSUMERS == 2:
            gl.warp_specialize([
                (consumer, (p, 0)),
                (consumer, (p, 1)),
                (producer, (p.tiles, p.ring)),
            ], [4, 1], [CONSUMER_REGISTERS, PRODUCER_REGISTERS])  # fmt: skip
        else:
            gl.warp_specialize([
                (consumer, (p, 0)),
                (producer, (p.tiles, p.ring)),
            ], [1], [PRODUCER_REGISTERS])  # fmt: skip

    return launch
