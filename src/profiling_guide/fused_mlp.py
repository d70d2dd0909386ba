"""Our epilogue-fused GeGLU MLP: gate and up in one Triton GEMM, GeLU·mul in its epilogue.

The GeGLU MLP is ``down(gelu_tanh(x @ Wg.T) * (x @ Wu.T))``. Run eagerly it is
five kernels, and the two intermediates ``g = x @ Wg.T`` and ``u = x @ Wu.T``
(each ``[M, hidden]``, M = batch·seq, 2 bytes an element in bf16) make round
trips through HBM. Counting only the bytes of intermediates, in units of
``M·hidden·2`` bytes:

* eager: the gate and up GEMMs write g and u (2), the GeLU reads g and writes
  gelu(g) (2), the mul reads gelu(g) and u and writes h (3), the down GEMM
  reads h (1): 8 units.
* ``torch.compile``: one pointwise kernel does GeLU and mul, but it still
  reads back the g and u the GEMMs wrote: g and u written and read once each
  (4), h written and read (2): 6 units.
* this module: h written and read (2). g and u never leave the chip.

The 4 units saved over the compiled version are, at the original write-up's
shape (M = 64·128 = 8192, hidden = 3072), 2 · 8192 · 3072 · 2 B ≈ 101 MB
written plus 101 MB read: about 67 µs at a 3 TB/s copy bandwidth, spent on
numbers nobody keeps.

This module's kernel never writes g or u. A GEMM computes its output tile in
fp32 *accumulators* held in registers; whatever the kernel does to them after
the last K step and before the store is its **epilogue** (cuBLAS's bias add is
one). Here the epilogue is the GeGLU itself: one program computes the same
``[BLOCK_M, BLOCK_N]`` tile of g *and* of u from one pass over the x tile,
applies ``gelu_tanh(g) * u`` to the two fp32 accumulators and stores only h.
HBM traffic for the first half of the MLP drops to: read x once, read Wg and
Wu, write h (``M·hidden·2`` bytes), which the down projection reads back.

The GeLU is applied to the fp32 accumulator *before* rounding to bf16. Eager
rounds g and u to bf16 (8 significant bits: each rounding may be off by up to
2^-9 ≈ 0.2 %), then rounds gelu(g), then the product: three roundings on the
way to h. The fused kernel rounds once, when it stores h, so its h is closer
to the exact answer than the unfused one (the benchmark's comparison with a
float64 reference measures it).

Three designs of the same idea, selectable with ``design=``:

``"dual"``
    Two accumulators. Each K step loads the x tile once and the Wg and Wu
    tiles separately, and issues two ``tl.dot`` (two MMAs of width BLOCK_N).
``"packed"``
    Wg and Wu interleaved once into one ``[2·hidden, dim]`` matrix (row 2j is
    gate row j, row 2j+1 is up row j: :func:`pack_gate_up`). Each K step is
    one ``tl.dot`` twice as wide (2·BLOCK_N). On Hopper one wgmma can be up
    to 256 wide, and a wider instruction reuses the x tile it reads from
    shared memory for twice the output. The epilogue splits the accumulator
    back into g and u (``tl.reshape`` + ``tl.split``); with the row-pair
    interleave each thread already holds columns 2j and 2j+1 side by side in
    its registers (every NVIDIA MMA layout gives a thread pairs of adjacent
    columns), so the split moves no data. A blockwise interleave (BLOCK_N gate
    rows, then BLOCK_N up rows) would need a permute that, on some layouts,
    goes through shared memory.
``"packed-tma"`` (Hopper and later)
    The packed kernel again, with two Hopper features: tiles are fetched by
    the TMA copy engine through tensor descriptors (no address arithmetic or
    masks in registers: the hardware zero-fills what lies past an edge), and
    the kernel is persistent (one program per SM looping over tiles), so the
    loads of the next tile overlap the epilogue of this one.

``"auto"`` (default)
    ``"packed-tma"`` where the TMA unit can serve the shapes (compute
    capability 9.0+, rows 16-byte aligned), ``"packed"`` elsewhere; decided
    per call and reported by :func:`last_design`.

All designs share one list of autotuning configs, so comparing them compares
the instruction shape and the data movement, not the tile sizes. The down projection stays
with cuBLAS (:func:`torch.nn.functional.linear`): after the epilogue there is
nothing left to fuse into it (its epilogue would just store y), and fusing it
into *this* kernel would need a whole row of h (all hidden columns, spread
over many programs) per output tile. cuBLAS runs a plain GEMM near the
ceiling; that is the right tool.

Supported: bfloat16 and float16 (the fast path, fp32 accumulation), and
float32 (computed in true fp32, no TF32, with one fixed conservative config:
correct but slow; useful to check the logic). Tensors on a CUDA device, or
CPU tensors when ``TRITON_INTERPRET=1`` was set before this module was
imported (Triton's interpreter, used by the tests). Forward only.

``python -m profiling_guide.fused_mlp --check`` runs a correctness sweep on a
GPU against a float64 reference.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import weakref

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

from .errors import GuideError

# Whether the kernels run in Triton's interpreter is decided when triton and
# this module are imported (triton.jit reads TRITON_INTERPRET as it decorates).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

DESIGNS = ("packed", "dual", "packed-tma")
# "auto": packed-tma where the TMA unit can serve the shapes (Hopper or later,
# 16-byte aligned rows), packed elsewhere. The choice is made per call and
# reported by last_design("auto"); it is never silent.
AUTO = "auto"
DEFAULT_DESIGN = AUTO
PACKED_DESIGNS = ("packed", "packed-tma")  # the ones that read pack_gate_up(w_gate, w_up)
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_SUPPORTED_TEXT = "bfloat16, float16 or float32 (float32 is exact fp32, slow)"

# 32-bit offsets inside the kernel: every tensor must have fewer elements.
_MAX_ELEMENTS = 2**31 - 1


# ---------------------------------------------------------------- configs
def _config(bm, bn, bk, group_m, warps, stages) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
        num_warps=warps,
        num_stages=stages,
    )


# BLOCK_N counts columns of h (gate/up outputs). The "packed" design's dot is
# 2·BLOCK_N wide, the "dual" design issues two dots BLOCK_N wide: the same
# accumulator registers (2·BLOCK_M·BLOCK_N fp32) and the same shared-memory
# tiles per stage (x: BLOCK_M·BLOCK_K, weights: 2·BLOCK_N·BLOCK_K), so one
# list serves both. Shared memory per stage in bf16 is
# 2·BLOCK_K·(BLOCK_M + 2·BLOCK_N) bytes: 48 KiB for 128/128/64, so 4 stages
# use 192 KiB of the H100's 227 KiB. A config a GPU cannot fit (A100: 164 KiB)
# is refused at launch (OutOfResources) and the autotuner skips it; the last
# one fits anywhere. The packed-tma kernel adds a [BLOCK_M, BLOCK_N] staging
# tile for its TMA store (32 KiB at 128/128).
# Autotuning runs every config once per new (M, N, K): keep the list short.
GPU_CONFIGS = [
    # Measured on an H100 at the guide's shape (M=8192, dim 768, hidden 3072),
    # each design's fastest pinned configs: 128×128 tiles for the packed
    # kernels (one 128×256 MMA per K step); a GROUP_M of 4 keeps the weight
    # tiles of 4 tile rows hot in L2 instead of 8 and was faster there.
    # Warp specialization (WARP_SPECIALIZE=True, packed-tma only) was slower
    # than these in every config tried with Triton 3.6 on Hopper, and some
    # configs fail to compile with it: it is left out of the list.
    _config(128, 128, 64, 4, warps=8, stages=3),  # 2×(128×128) fp32 acc over 256 threads: 128 regs each
    _config(128, 128, 64, 4, warps=8, stages=4),
    _config(128, 128, 64, 8, warps=8, stages=3),
    _config(256, 64, 64, 8, warps=8, stages=4),
    _config(128, 64, 64, 8, warps=4, stages=5),
    # 96 KiB and ≤ 256 registers × 128 threads: two programs fit on one SM, so
    # one's epilogue (GeLU, store) can overlap the other's main loop.
    _config(128, 64, 64, 8, warps=4, stages=3),
    _config(128, 64, 128, 8, warps=8, stages=3),
    _config(64, 128, 64, 8, warps=4, stages=4),
    _config(64, 64, 32, 8, warps=4, stages=3),  # small: fits any GPU, good for small M
]
# float32 runs tl.dot as IEEE fp32 FMAs (no tensor cores, 4-byte tiles): one
# small config that needs no register spills in any design.
FP32_CONFIG = _config(32, 32, 32, 8, warps=4, stages=2)
# The interpreter runs each program in numpy: tiny tiles keep tests fast and
# still give several tiles and K steps on the tests' small ragged shapes.
INTERPRETER_CONFIG = _config(16, 16, 16, 2, warps=1, stages=1)


# ---------------------------------------------------------------- device code
@triton.jit
def _tile_coordinates(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Program id → (tile row, tile column), GROUP_M rows of tiles at a time.

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
def _gelu_tanh_times(g, u):
    """``gelu_tanh(g) * u`` on fp32 values: the GeGLU epilogue.

    gelu_tanh(g) = 0.5·g·(1 + tanh(z)) with z = √(2/π)·(g + 0.044715·g³), and
    0.5·(1 + tanh(z)) = sigmoid(2z), so gelu_tanh(g) = g / (1 + exp(-2z)):
    one exp and one divide, and no overflow trouble (exp → inf gives -0).
    """
    two_z = 1.5957691216057308 * (g + 0.044715 * g * g * g)  # 2·√(2/π) = 1.5957…
    return g / (1.0 + tl.exp(-two_z)) * u


@triton.jit
def _geglu_dual_gemm_kernel(
    x_ptr, wg_ptr, wu_ptr, h_ptr,  #
    M, N, K,  #
    stride_xm, stride_xk,  #
    stride_gn, stride_gk,  #
    stride_un, stride_uk,  #
    stride_hm, stride_hn,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    """h[M, N] = gelu_tanh(x @ Wg.T) * (x @ Wu.T), two accumulators, two dots per K step."""
    pid_m, pid_n = _tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows past M (columns past N) are wrapped back into range instead of
    # masked: they load real, finite numbers whose results the masked store
    # drops, and the loads in the hot loop need no M/N mask.
    rows = offs_m % M
    cols = offs_n % N
    x_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk  # [BLOCK_M, BLOCK_K]
    # Weights are stored [N, K] (nn.Linear's layout); we read [BLOCK_K, BLOCK_N] tiles of W.T.
    wg_ptrs = wg_ptr + offs_k[:, None] * stride_gk + cols[None, :] * stride_gn
    wu_ptrs = wu_ptr + offs_k[:, None] * stride_uk + cols[None, :] * stride_un

    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            x = tl.load(x_ptrs)
            wg = tl.load(wg_ptrs)
            wu = tl.load(wu_ptrs)
        else:  # the last K step runs past K: zeros there add nothing to the sums
            k_left = K - k * BLOCK_K
            x = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            wg = tl.load(wg_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            wu = tl.load(wu_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        # One x tile, two products: x is read from memory once for both.
        acc_g = tl.dot(x, wg, acc_g, input_precision=INPUT_PRECISION)
        acc_u = tl.dot(x, wu, acc_u, input_precision=INPUT_PRECISION)
        x_ptrs += BLOCK_K * stride_xk
        wg_ptrs += BLOCK_K * stride_gk
        wu_ptrs += BLOCK_K * stride_uk

    # The epilogue: GeGLU on the fp32 accumulators, one rounding, one store.
    h = _gelu_tanh_times(acc_g, acc_u)
    h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _geglu_packed_gemm_kernel(
    x_ptr, w_ptr, h_ptr,  #
    M, N, K,  #
    stride_xm, stride_xk,  #
    stride_wn, stride_wk,  #
    stride_hm, stride_hn,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    """h[M, N] = gelu_tanh(g) * u from one dot per K step against the packed [2N, K] weight.

    Packed row 2j is gate row j and row 2j+1 is up row j, so the tile of h
    columns [n0, n0 + BLOCK_N) needs packed rows [2·n0, 2·n0 + 2·BLOCK_N).
    """
    pid_m, pid_n = _tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of h
    offs_w = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)  # rows of the packed weight
    offs_k = tl.arange(0, BLOCK_K)
    rows = offs_m % M  # wrapped, not masked: see the dual kernel
    w_rows = offs_w % (2 * N)
    x_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk  # [BLOCK_M, BLOCK_K]
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + w_rows[None, :] * stride_wn  # [BLOCK_K, 2·BLOCK_N]

    acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            x = tl.load(x_ptrs)
            w = tl.load(w_ptrs)
        else:
            k_left = K - k * BLOCK_K
            x = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(x, w, acc, input_precision=INPUT_PRECISION)  # one MMA, 2·BLOCK_N wide
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    # acc[:, 2j] is g[:, j] and acc[:, 2j+1] is u[:, j]: view the pairs as a
    # last axis of size 2 and split it. Each thread already holds both columns
    # of a pair, so this is a renaming of registers, not a data movement.
    g, u = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
    h = _gelu_tanh_times(g, u)
    h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _geglu_packed_tma_gemm_kernel(
    x_desc, w_desc, h_desc,  #
    M, N, K,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    NUM_PROGRAMS: tl.constexpr, INPUT_PRECISION: tl.constexpr,  #
    FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):
    """The packed design, persistent, with tiles moved by the TMA unit (Hopper and later).

    Two changes from ``_geglu_packed_gemm_kernel``:

    * Tensor descriptors: the host describes x, the packed weight and h once
      (base, shape, strides, tile shape) and ``desc.load([row, col])`` asks the
      TMA copy engine for a whole tile. No per-element address arithmetic in
      registers, and tiles hanging over the edge of a tensor are filled with
      zeros on load and clipped on store by the hardware: no masks at all.
    * Persistent: one program per SM, each looping over output tiles. With
      ``flatten=True`` the compiler pipelines the tile loop and the K loop as
      one, so the loads of the next tile are in flight while this tile's
      epilogue runs; with only dim/BLOCK_K = 12 K steps per tile at dim=768,
      that overlap is a large part of the time.
    """
    start_pid = tl.program_id(0)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    # The epilogue recomputes its tile's coordinates from a second counter
    # instead of reusing the loads' ones, as Triton's persistent-matmul
    # tutorial does to work around a limitation of pipelining flattened loops
    # (a value used both where the next tile's loads start and in this
    # tile's epilogue).
    tile_id_c = start_pid - NUM_PROGRAMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_PROGRAMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coordinates(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_w = pid_n * 2 * BLOCK_N  # packed rows: 2 per column of h
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for ki in range(k_steps):
            x = x_desc.load([off_m, ki * BLOCK_K])  # [BLOCK_M, BLOCK_K]
            w = w_desc.load([off_w, ki * BLOCK_K])  # [2·BLOCK_N, BLOCK_K], as stored
            acc = tl.dot(x, w.T, acc, input_precision=INPUT_PRECISION)

        tile_id_c += NUM_PROGRAMS
        pid_m, pid_n = _tile_coordinates(tile_id_c, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        g, u = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        h = _gelu_tanh_times(g, u)
        h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], h.to(h_desc.dtype))


def _set_tma_block_shapes(nargs) -> None:
    """Autotune pre-hook: the descriptors' tile shapes follow the config being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [2 * bn, bk]
    nargs["h_desc"].block_shape = [bm, bn]


def _even_k(args) -> bool:
    # When K is a multiple of BLOCK_K the K mask is always true: compile it away.
    return args["K"] % args["BLOCK_K"] == 0


def _with_tma_hook(config: triton.Config) -> triton.Config:
    """``config`` for the packed-tma kernel: descriptor shapes set by a pre-hook, loop options filled in.

    FLATTEN pipelines the tile loop and the K loop as one; WARP_SPECIALIZE
    instead gives loads and MMAs their own warps (on Hopper the two do not
    combine: a warp-specialized loop is not flattened).
    """
    kwargs = {"FLATTEN": not config.kwargs.get("WARP_SPECIALIZE", False), "WARP_SPECIALIZE": False, **config.kwargs}
    return triton.Config(kwargs, num_warps=config.num_warps, num_stages=config.num_stages,
                         pre_hook=_set_tma_block_shapes)  # fmt: skip


def _autotuned(kernel, *, tma: bool = False):
    """``kernel`` with tile sizes tuned per (M, N, K) (and EVEN_K derived per call)."""
    configs = [INTERPRETER_CONFIG] if INTERPRETED else GPU_CONFIGS
    if tma:  # TMA zero-fills past the edges: no K mask to compile away
        return triton.autotune(configs=[_with_tma_hook(c) for c in configs], key=["M", "N", "K"])(kernel)
    with_heuristics = triton.heuristics({"EVEN_K": _even_k})(kernel)
    return triton.autotune(configs=configs, key=["M", "N", "K"])(with_heuristics)


# The autotuned launchers; ``.best_config`` holds the config of the last call.
dual_kernel = _autotuned(_geglu_dual_gemm_kernel)
packed_kernel = _autotuned(_geglu_packed_gemm_kernel)
packed_tma_kernel = _autotuned(_geglu_packed_tma_gemm_kernel, tma=True)
_KERNELS = {"dual": dual_kernel, "packed": packed_kernel, "packed-tma": packed_tma_kernel}
# The JIT functions themselves: their parameter names order a launch plan's arguments.
_KERNEL_FNS = {"dual": _geglu_dual_gemm_kernel, "packed": _geglu_packed_gemm_kernel, "packed-tma": _geglu_packed_tma_gemm_kernel}
_last_config: dict[str, triton.Config] = {}
_last_auto_design: dict[str, str] = {}


# ---------------------------------------------------------------- host code
def pack_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """Interleave gate and up rows into one ``[2·hidden, dim]`` weight: row 2j = gate j, 2j+1 = up j."""
    if w_gate.shape != w_up.shape or w_gate.dim() != 2:
        raise GuideError(
            f"pack_gate_up needs two [hidden, dim] weights of one shape, got {tuple(w_gate.shape)} and {tuple(w_up.shape)}"
        )
    if w_gate.dtype != w_up.dtype or w_gate.device != w_up.device:
        raise GuideError(
            f"pack_gate_up needs weights of one dtype on one device, got {w_gate.dtype} on {w_gate.device} "
            f"and {w_up.dtype} on {w_up.device}"
        )
    hidden, dim = w_gate.shape
    with torch.no_grad():
        return torch.stack((w_gate, w_up), dim=1).reshape(2 * hidden, dim).contiguous()


def config_text(config: triton.Config | None) -> str | None:
    """A config in one line, e.g. ``BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 GROUP_M=8 num_warps=8 num_stages=4``."""
    if config is None:
        return None
    # the loop options show only when they leave the default (a flattened loop, no warp specialization)
    shown = {k: v for k, v in config.kwargs.items() if k != "FLATTEN" and (k != "WARP_SPECIALIZE" or v)}
    tiles = " ".join(f"{k}={v}" for k, v in shown.items())
    return f"{tiles} num_warps={config.num_warps} num_stages={config.num_stages}"


def last_config(design: str = DEFAULT_DESIGN) -> str | None:
    """The config the last :func:`geglu_dual_gemm` call of ``design`` ran with (autotuned or pinned)."""
    if design == AUTO:
        design = _last_auto_design.get(AUTO, AUTO)
    return config_text(_last_config.get(design))


def last_design(design: str = AUTO) -> str | None:
    """The design the last call asking for ``design`` ran: what ``"auto"`` chose, or ``design`` itself."""
    return _last_auto_design.get(AUTO) if design == AUTO else design


def choose_design(x2d: torch.Tensor, hidden: int) -> str:
    """What ``design="auto"`` runs for ``x2d`` (``[M, dim]``) and ``hidden``: packed-tma where it can, else packed."""
    if x2d.device.type == "cuda" and torch.cuda.get_device_capability(x2d.device)[0] >= 9:
        size = x2d.element_size()
        aligned = all((n * size) % 16 == 0 for n in (x2d.shape[1], hidden)) and x2d.stride(1) == 1
        if aligned and (x2d.stride(0) * size) % 16 == 0 and x2d.data_ptr() % 16 == 0:
            return "packed-tma"
    return "packed"


def _check_device(*tensors: torch.Tensor) -> None:
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        raise GuideError(
            "geglu_dual_gemm needs x and the weights on one device, got " + ", ".join(str(t.device) for t in tensors)
        )
    if device.type == "cuda":
        return
    if device.type == "cpu" and INTERPRETED:
        return
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        raise GuideError(
            "CPU tensors run only in Triton's interpreter, and TRITON_INTERPRET=1 was set after "
            "triton was imported: set it before importing triton and profiling_guide.fused_mlp"
        )
    raise GuideError(
        f"the fused GeGLU kernel runs on a CUDA device (or on the CPU with TRITON_INTERPRET=1 set "
        f"before triton is imported), got a tensor on {device}"
    )


def geglu_dual_gemm(
    x2d: torch.Tensor,
    w_gate: torch.Tensor,
    w_up: torch.Tensor,
    *,
    design: str = DEFAULT_DESIGN,
    packed_weight: torch.Tensor | None = None,
    config: dict | triton.Config | None = None,
) -> torch.Tensor:
    """``gelu_tanh(x2d @ w_gate.T) * (x2d @ w_up.T)`` in one kernel: returns h ``[M, hidden]``.

    ``x2d`` is ``[M, dim]``, the weights ``[hidden, dim]`` as ``nn.Linear``
    stores them; h has x's dtype. ``design="packed"`` uses ``packed_weight``
    (which must be ``pack_gate_up(w_gate, w_up)``; the weights then serve only
    to check shapes) or packs the weights on every call when it is None, a
    copy :class:`FusedGeGLUMLP` caches. ``config`` pins the tile sizes
    (``{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8,
    "num_warps": 8, "num_stages": 4}`` or a ``triton.Config``) instead of
    autotuning. Any M ≥ 0 and any dim/hidden work; loads and stores are masked.
    """
    if design not in (*DESIGNS, AUTO):
        raise GuideError(f"unknown design {design!r}: use one of {', '.join((*DESIGNS, AUTO))}")
    for name, t in (("x2d", x2d), ("w_gate", w_gate), ("w_up", w_up)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise GuideError(f"geglu_dual_gemm needs a 2-D {name}, got {got}")
    if w_gate.shape != w_up.shape:
        raise GuideError(
            f"gate and up weights must have one shape [hidden, dim], got {tuple(w_gate.shape)} and {tuple(w_up.shape)}"
        )
    hidden, dim = w_gate.shape
    M = x2d.shape[0]
    if x2d.shape[1] != dim:
        raise GuideError(f"x has {x2d.shape[1]} features but the weights expect dim={dim} ([hidden, dim] = {[hidden, dim]})")
    if x2d.dtype not in SUPPORTED_DTYPES:
        raise GuideError(f"the fused GeGLU kernel supports {_SUPPORTED_TEXT}, got {x2d.dtype}")
    if w_gate.dtype != x2d.dtype or w_up.dtype != x2d.dtype:
        raise GuideError(
            f"x and the weights must share one dtype ({_SUPPORTED_TEXT}), got x {x2d.dtype}, "
            f"gate {w_gate.dtype}, up {w_up.dtype}"
        )
    _check_device(x2d, w_gate, w_up)
    if design == AUTO:
        design = _last_auto_design[AUTO] = choose_design(x2d, hidden)
    packed = design in PACKED_DESIGNS
    if packed:
        if packed_weight is None:
            packed_weight = pack_gate_up(w_gate, w_up)
        elif (
            tuple(packed_weight.shape) != (2 * hidden, dim)
            or packed_weight.dtype != x2d.dtype
            or packed_weight.device != x2d.device
        ):
            raise GuideError(
                f"packed_weight must be pack_gate_up(w_gate, w_up): [{2 * hidden}, {dim}] {x2d.dtype} on "
                f"{x2d.device}, got {list(packed_weight.shape)} {packed_weight.dtype} on {packed_weight.device}"
            )
    for name, t in (("x", x2d), ("weight", packed_weight if packed else w_gate)):
        if t.numel() > _MAX_ELEMENTS:
            raise GuideError(f"the fused GeGLU kernel uses 32-bit offsets: {name} has {t.numel()} elements, more than 2**31 - 1")
    if M * hidden > _MAX_ELEMENTS:
        raise GuideError(f"the fused GeGLU kernel uses 32-bit offsets: h would have {M * hidden} elements, more than 2**31 - 1")

    h = torch.empty((M, hidden), device=x2d.device, dtype=x2d.dtype)
    if M == 0 or hidden == 0:
        return h
    if dim == 0:  # no K steps: g = u = 0 and gelu(0)·0 = 0
        return h.zero_()
    weights = (packed_weight,) if packed else (w_gate, w_up)
    plan_key = _plan_key(design, config, x2d, weights, h)
    plan = _PLANS.get(plan_key)
    if plan is not None:
        plan.launch(x2d, weights, h)
        _last_config[design] = plan.config
        return h
    _launch_and_plan(design, config, x2d, weights, h, plan_key)
    return h


# ---------------------------------------------------------------- launching
# Triton's Python launcher binds and specializes every argument, consults the
# autotuner's cache and builds tensor descriptors on each call: tens of µs of
# CPU per launch, which on a slow host is as long as the kernel itself at
# small shapes. The first call for a given shape goes through all of it (and
# autotunes); it leaves a *launch plan* (the compiled kernel, its grid and its
# constants) that every later call with the same shapes, strides and pointer
# alignment replays with one call into the compiled launcher.
class _LaunchPlan:
    def __init__(self, design, compiled, grid, config, constants, tma_blocks):
        self.design, self.compiled, self.grid, self.config = design, compiled, grid, config
        self.constants = constants  # values of the parameters after the runtime ones, in order
        self.tma_blocks = tma_blocks  # descriptor tile shapes (packed-tma) or None
        self._weight_desc = None  # ((data_ptr, version), descriptor) of the packed weight

    def launch(self, x2d, weights, h):
        if self.tma_blocks is None:
            args = _runtime_args(self.design, x2d, weights, h)
        else:  # the weight's descriptor is made once; x and h are new tensors on every call
            (w,) = weights
            if self._weight_desc is None or self._weight_desc[0] != (w.data_ptr(), w._version):
                self._weight_desc = ((w.data_ptr(), w._version), _descriptor(w, self.tma_blocks[1]))
            args = (_descriptor(x2d, self.tma_blocks[0]), self._weight_desc[1], _descriptor(h, self.tma_blocks[2]),
                    h.shape[0], h.shape[1], x2d.shape[1])  # fmt: skip
        compiled, (g0, g1, g2) = self.compiled, self.grid
        stream = torch.cuda.current_stream(x2d.device).cuda_stream
        # Hooks a tool such as Triton's profiler may have installed: honoured as Triton's launcher does.
        enter, leave = _RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook
        meta = compiled.launch_metadata(self.grid, stream, *args, *self.constants) if enter else None
        with _on_device(x2d.device):
            compiled.run(g0, g1, g2, stream, compiled.function, compiled.packed_metadata, meta,
                         enter, leave, *args, *self.constants)  # fmt: skip


_PLANS: dict[tuple, _LaunchPlan | None] = {}
# Set to False to launch through Triton's launcher on every call (to measure what the plans save).
USE_LAUNCH_PLANS = True
# triton.knobs (Triton 3.4+) holds the launch hooks; without it, no plans are made.
_RUNTIME_KNOBS = getattr(getattr(triton, "knobs", None), "runtime", None)


def _plan_key(design, config, x2d, weights, h) -> tuple | None:
    """What the compiled kernel was specialized on: shapes, strides, 16-byte alignment of pointers."""
    if not USE_LAUNCH_PLANS or INTERPRETED or _RUNTIME_KNOBS is None or x2d.device.type != "cuda" or x2d.dtype == torch.float32:
        return None  # the interpreter has no compiled kernel; fp32 is the slow, checking path anyway
    if config is not None:
        config = config_text(_as_config(config))
    tensors = (x2d, *weights, h)
    return (design, config, x2d.dtype, x2d.device, *(t.shape for t in tensors),
            *(t.stride() for t in tensors), *(t.data_ptr() % 16 == 0 for t in tensors))  # fmt: skip


def _on_device(device: torch.device):
    if device.type == "cuda" and device.index is not None and device.index != torch.cuda.current_device():
        return torch.cuda.device(device)
    return contextlib.nullcontext()


def _runtime_args(design, x2d, weights, h) -> tuple:
    """The kernel's non-constexpr arguments, in its parameter order."""
    M, K = x2d.shape
    N = h.shape[1]
    if design == "dual":
        wg, wu = weights
        return (x2d, wg, wu, h, M, N, K, x2d.stride(0), x2d.stride(1), wg.stride(0), wg.stride(1),
                wu.stride(0), wu.stride(1), h.stride(0), h.stride(1))  # fmt: skip
    (w,) = weights
    if design == "packed":
        return (x2d, w, h, M, N, K, x2d.stride(0), x2d.stride(1), w.stride(0), w.stride(1), h.stride(0), h.stride(1))
    # tile shapes are placeholders until the config's pre-hook sets them
    return tuple(_descriptor(t, [16, 16]) for t in (x2d, w, h)) + (M, N, K)


def _descriptor(t: torch.Tensor, block: list[int]):
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor.from_tensor(t, block)


def _launch_and_plan(design, config, x2d, weights, h, plan_key) -> None:
    """Launch through Triton's launcher (autotuning on a new shape) and keep a plan for next time."""
    if design == "packed-tma":
        _check_tma(x2d, weights[0], h)
    M, hidden = h.shape
    # fp32 inputs: true fp32 products, as torch's matmul does by default (no TF32).
    # For 16-bit inputs the setting is unused: the MMA takes them as they are.
    precision = "ieee" if x2d.dtype == torch.float32 else "tf32"
    if config is None and x2d.dtype == torch.float32 and not INTERPRETED:
        config = FP32_CONFIG
    kernel = _KERNELS[design]
    args = _runtime_args(design, x2d, weights, h)
    extra = {"INPUT_PRECISION": precision}
    num_programs = None
    if design == "packed-tma":
        extra["NUM_PROGRAMS"] = num_programs = _num_programs(x2d.device)

    def grid(meta):
        tiles = triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(hidden, meta["BLOCK_N"])
        return (min(tiles, num_programs),) if design == "packed-tma" else (tiles,)

    with _on_device(x2d.device):
        if config is None:
            compiled = kernel[grid](*args, **extra)
            config = kernel.best_config
        else:
            config = _as_config(config)
            if design == "packed-tma":
                config = _with_tma_hook(config)
                _set_tma_block_shapes({"x_desc": args[0], "w_desc": args[1], "h_desc": args[2], **config.kwargs})
            # kernel.fn skips the autotuner (for dual/packed it is the heuristics wrapper: EVEN_K still derived)
            compiled = kernel.fn[grid](*args, **extra, **config.all_kwargs())
    _last_config[design] = config
    if plan_key is None or not all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
        return
    constants = {**config.kwargs, **extra}
    if design != "packed-tma":
        constants["EVEN_K"] = _even_k({"K": x2d.shape[1], **config.kwargs})
    names = _KERNEL_FNS[design].arg_names
    try:
        values = tuple(constants[name] for name in names[len(args):])
    except KeyError:  # a parameter this module does not know: keep using Triton's launcher
        _PLANS[plan_key] = None
        return
    bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    tma_blocks = ([bm, bk], [2 * bn, bk], [bm, bn]) if design == "packed-tma" else None
    grid_size = grid(config.kwargs)
    _PLANS[plan_key] = _LaunchPlan(design, compiled, (grid_size[0], 1, 1), config, values, tma_blocks)


def _num_programs(device: torch.device) -> int:
    """Programs of the persistent kernel: one per SM (3 in the interpreter, so each loops over tiles)."""
    if device.type != "cuda":
        return 3
    return torch.cuda.get_device_properties(device).multi_processor_count


def _check_tma(x2d: torch.Tensor, packed_weight: torch.Tensor, h: torch.Tensor) -> None:
    """The TMA unit's rules: Hopper or later, 16-byte aligned bases and row strides, unit last stride."""
    if x2d.device.type == "cuda" and torch.cuda.get_device_capability(x2d.device)[0] < 9:
        name = torch.cuda.get_device_name(x2d.device)
        raise GuideError(f"design 'packed-tma' needs the TMA unit of compute capability 9.0+ (Hopper), {name} has none: use 'packed'")
    size = x2d.element_size()
    for name, t in (("x", x2d), ("the packed weight", packed_weight), ("h", h)):
        if t.stride(1) != 1 or (t.stride(0) * size) % 16 or t.data_ptr() % 16:
            raise GuideError(
                f"design 'packed-tma' needs rows of {name} contiguous and 16-byte aligned (dim and hidden multiples "
                f"of {16 // size} for {x2d.dtype}, x.stride(-1) == 1): use 'packed' for shape {list(x2d.shape)}, "
                f"hidden {h.shape[1]}"
            )


def _as_config(config: dict | triton.Config) -> triton.Config:
    if isinstance(config, triton.Config):
        return config
    config = dict(config)
    try:
        warps, stages = config.pop("num_warps", 4), config.pop("num_stages", 3)
        tiles = {k: int(config.pop(k)) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        tiles |= {k: bool(config.pop(k)) for k in ("FLATTEN", "WARP_SPECIALIZE") if k in config}
    except KeyError as exc:
        raise GuideError(f"a pinned config needs BLOCK_M, BLOCK_N, BLOCK_K and GROUP_M, missing {exc.args[0]}") from None
    if config:
        raise GuideError(f"unknown config keys {sorted(config)}: use BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages (and WARP_SPECIALIZE for packed-tma)")
    return triton.Config(tiles, num_warps=warps, num_stages=stages)


class FusedGeGLUMLP(nn.Module):
    """``down(gelu_tanh(gate(x)) * up(x))`` with gate, up and the GeGLU in one Triton kernel.

    Same parameters as :class:`~profiling_guide.models.SimpleGeGLUMLP`
    (``gate_proj``, ``up_proj``, ``down_proj``, bias-free), so
    ``fused.load_state_dict(simple.state_dict())`` works. ``design="packed"``
    keeps an interleaved copy of the gate and up weights (not in the state
    dict), rebuilt when either weight changes. Forward only: calling it where
    autograd would need gradients of the fused part is an error.
    """

    def __init__(self, dim: int, hidden: int, device=None, dtype=None, design: str = DEFAULT_DESIGN):
        super().__init__()
        if design not in (*DESIGNS, AUTO):
            raise GuideError(f"unknown design {design!r}: use one of {', '.join((*DESIGNS, AUTO))}")
        self.dim, self.hidden, self.design = dim, hidden, design
        self.gate_proj = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
        self.up_proj = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
        self.down_proj = nn.Linear(hidden, dim, bias=False, device=device, dtype=dtype)
        self._packed: torch.Tensor | None = None
        self._packed_key: tuple | None = None

    @classmethod
    def from_mlp(cls, mlp: nn.Module, design: str = DEFAULT_DESIGN) -> FusedGeGLUMLP:
        """A fused MLP with a copy of ``mlp``'s weights (any module with gate_proj/up_proj/down_proj)."""
        try:
            w = mlp.gate_proj.weight
            hidden, dim = w.shape
        except AttributeError:
            raise GuideError(
                f"from_mlp needs a GeGLU MLP with gate_proj, up_proj and down_proj Linear layers, got {type(mlp).__name__}"
            ) from None
        fused = cls(dim, hidden, device=w.device, dtype=w.dtype, design=design)
        fused.load_state_dict(mlp.state_dict())
        return fused

    def extra_repr(self) -> str:
        return f"dim={self.dim}, hidden={self.hidden}, design={self.design!r}"

    def packed_weight(self) -> torch.Tensor:
        """``pack_gate_up(gate, up)``, cached until either weight changes.

        A weight changes in place (``load_state_dict``, an optimizer step, a
        ``copy_``: its ``_version`` counter moves) or is replaced (``.to()``,
        a new Parameter: another tensor, another address). Both are checked
        on every call; the weak references make sure a freed weight whose
        address was reused is not mistaken for the old one.
        """
        wg, wu = self.gate_proj.weight, self.up_proj.weight
        key = self._packed_key
        fresh = (
            key is not None
            and key[0]() is wg and key[1] == (wg._version, wg.data_ptr())
            and key[2]() is wu and key[3] == (wu._version, wu.data_ptr())
        )  # fmt: skip
        if not fresh:
            self._packed = pack_gate_up(wg.detach(), wu.detach())
            self._packed_key = (weakref.ref(wg), (wg._version, wg.data_ptr()), weakref.ref(wu), (wu._version, wu.data_ptr()))
        return self._packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wg, wu = self.gate_proj.weight, self.up_proj.weight
        if torch.is_grad_enabled() and (x.requires_grad or wg.requires_grad or wu.requires_grad):
            raise GuideError(
                "FusedGeGLUMLP is forward-only (its Triton kernel has no backward): call it under "
                "torch.no_grad() or torch.inference_mode()"
            )
        if x.shape[-1:] != (self.dim,):
            raise GuideError(f"FusedGeGLUMLP(dim={self.dim}) needs inputs [..., {self.dim}], got {list(x.shape)}")
        leading = x.shape[:-1]
        packed = self.packed_weight() if self.design in (*PACKED_DESIGNS, AUTO) else None
        h = geglu_dual_gemm(x.reshape(-1, self.dim), wg, wu, design=self.design, packed_weight=packed)
        # The down projection is a plain GEMM with nothing to fuse: cuBLAS (see the module docstring).
        y = F.linear(h, self.down_proj.weight)
        return y.reshape(*leading, self.dim)


# ---------------------------------------------------------------- self check (GPU)
def reference_h(x2d: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` in float64."""
    x, wg, wu = x2d.double(), w_gate.double(), w_up.double()
    return F.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)


def max_rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """``max |got - want| / max |want|``: one number per tensor, robust to entries near zero."""
    want = want.double()
    scale = want.abs().max().item() or 1.0
    return (got.double() - want).abs().max().item() / scale


# Tolerances on max_rel_error of h: one rounding of h to the output dtype
# (half an ulp: 2^-9 for bf16, 2^-12 for fp16) with margin. A wrong tile or
# mask gives errors of order 1.
CHECK_TOLERANCE = {torch.bfloat16: 8e-3, torch.float16: 2e-3, torch.float32: 1e-5}

CHECK_SHAPES = [  # (M, dim, hidden)
    (1, 768, 3072),
    (7, 64, 128),
    (17, 100, 200),
    (64, 768, 3072),
    (333, 320, 1000),
    (1000, 1000, 520),
    (1024, 768, 3072),
    (2048, 4096, 11008),
    (4097, 768, 3072),
    (8192, 768, 3072),
    (8192, 768, 8192),
    (12345, 200, 777),
    (32768, 768, 3072),
]
QUICK_CHECK_SHAPES = [(1, 768, 3072), (17, 100, 200), (4097, 768, 3072), (8192, 768, 3072)]
FP32_CHECK_SHAPES = [(17, 100, 200), (1000, 768, 3072)]


def run_check(shapes=None, dtypes=(torch.bfloat16, torch.float16), designs=DESIGNS, seed: int = 0, progress=print) -> bool:
    """Compare every design with the float64 reference on many shapes; True if all pass."""
    if not torch.cuda.is_available():
        raise GuideError("--check runs the kernels on a CUDA GPU and none is visible")
    shapes = list(shapes or CHECK_SHAPES)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cases = [(s, dt) for dt in dtypes for s in shapes]
    if torch.float32 not in dtypes:
        cases += [(s, torch.float32) for s in FP32_CHECK_SHAPES]
    ok_all, worst = True, 0.0
    for (M, dim, hidden), dtype in cases:
        x = torch.randn(M, dim, device="cuda", dtype=dtype, generator=gen)
        # nn.Linear's scale, so g and u are O(1) like in a real model
        wg = torch.randn(hidden, dim, device="cuda", dtype=dtype, generator=gen) / dim**0.5
        wu = torch.randn(hidden, dim, device="cuda", dtype=dtype, generator=gen) / dim**0.5
        want = reference_h(x, wg, wu)
        packed = pack_gate_up(wg, wu)
        for design in designs:
            what = f"{design:<10} {str(dtype).removeprefix('torch.'):<8} M={M:<6} dim={dim:<5} hidden={hidden:<6}"
            if design == "packed-tma" and choose_design(x, hidden) != "packed-tma":
                progress(f"skip {what} rows not 16-byte aligned: the TMA unit cannot read them (auto runs 'packed')")
                continue
            try:
                weight = packed if design in PACKED_DESIGNS else None
                h = geglu_dual_gemm(x, wg, wu, design=design, packed_weight=weight)
                # the second call replays the launch plan the first one left: it must give the same bits
                replayed = torch.equal(geglu_dual_gemm(x, wg, wu, design=design, packed_weight=weight), h)
                torch.cuda.synchronize()
                err = max_rel_error(h, want) if replayed else float("nan")
            except Exception as exc:  # report and go on: one line per shape
                ok_all = False
                progress(f"FAIL {what} {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                continue
            tol = CHECK_TOLERANCE[dtype]
            ok = err <= tol  # NaN compares False
            ok_all &= ok
            worst = max(worst, err) if err == err else float("nan")
            progress(f"{'ok  ' if ok else 'FAIL'} {what} max rel err {err:.2e} (tol {tol:.0e})  {last_config(design)}"
                     + ("" if replayed else "  (a replayed launch gave different output)"))
    # The whole module, against the same MLP computed in float64.
    shape, hidden = (4, 333, 768), 3072
    for design in designs:
        torch.manual_seed(seed)
        fused = FusedGeGLUMLP(shape[-1], hidden, device="cuda", dtype=torch.bfloat16, design=design)
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            y = fused(x)
        h = reference_h(x.reshape(-1, shape[-1]), fused.gate_proj.weight, fused.up_proj.weight)
        err = max_rel_error(y, F.linear(h, fused.down_proj.weight.double()).reshape(shape))
        ok = err <= 2e-2  # two bf16 roundings (h, y) and a bf16 GEMM
        ok_all &= ok
        progress(f"{'ok  ' if ok else 'FAIL'} FusedGeGLUMLP(design={design!r}) {list(shape)} → {hidden} bf16 "
                 f"vs float64: max rel err {err:.2e} (tol 2e-02)")  # fmt: skip
    progress(f"{'PASS' if ok_all else 'FAIL'}: worst max rel error of h {worst:.2e}")
    return ok_all


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m profiling_guide.fused_mlp", description="Self check of the fused GeGLU kernel on a CUDA GPU."
    )
    parser.add_argument("--check", action="store_true", help="compare every design with a float64 reference on many shapes")
    parser.add_argument("--design", choices=DESIGNS, action="append", help="check only this design (repeatable)")
    parser.add_argument("--quick", action="store_true", help=f"only {len(QUICK_CHECK_SHAPES)} shapes instead of {len(CHECK_SHAPES)}")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    shapes = QUICK_CHECK_SHAPES if args.quick else CHECK_SHAPES
    try:
        return 0 if run_check(shapes, designs=tuple(args.design or DESIGNS), seed=args.seed) else 1
    except GuideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
