"""The fused GeGLU kernels: three designs, each a ``@triton.jit`` kernel and the thin wrapper that launches it.

Laid out as Triton's persistent-matmul tutorial is: the shared device
helpers, then per design the kernel followed by a plain Python function that
allocates h, builds the grid and launches it. The wrappers only assert what
they assume; :func:`profiling_guide.kernels.fused_mlp.geglu` is the public entry that
checks its inputs, explains what is wrong with them, and picks a design.

Each kernel computes ``h = gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` for one
``[BLOCK_M, BLOCK_N]`` tile of h: the tiles of g *and* of u from one pass over
the x tile, into fp32 accumulators, then ``gelu_tanh(g) * u`` on those
accumulators (the GEMM's *epilogue*), and one store of h. The three designs:

``"dual"`` (:func:`geglu_dual`)
    Two accumulators. Each K step loads the x tile once and the Wg and Wu
    tiles separately, and issues two ``tl.dot`` (two MMAs of width BLOCK_N).
``"packed"`` (:func:`geglu_packed`)
    Wg and Wu interleaved once into one ``[2·hidden, dim]`` matrix (row 2j is
    gate row j, row 2j+1 is up row j:
    :func:`~profiling_guide.kernels.fused_mlp.pack_gate_up`). Each K step is one
    ``tl.dot`` twice as wide (2·BLOCK_N). On Hopper one wgmma can be up to 256
    wide, and a wider instruction reuses the x tile it reads from shared
    memory for twice the output. The epilogue splits the accumulator back
    into g and u (``tl.reshape`` + ``tl.split``); with the row-pair interleave
    each thread already holds columns 2j and 2j+1 side by side in its
    registers (every NVIDIA MMA layout gives a thread pairs of adjacent
    columns), so the split moves no data. A blockwise interleave (BLOCK_N gate
    rows, then BLOCK_N up rows) would need a permute that, on some layouts,
    goes through shared memory.
``"packed-tma"`` (:func:`geglu_packed_tma`, Hopper and later)
    The packed kernel again, with two Hopper features: tiles are fetched by
    the TMA copy engine through tensor descriptors (no address arithmetic or
    masks in registers: the hardware zero-fills what lies past an edge), and
    the kernel is persistent (one program per SM looping over tiles), so the
    loads of the next tile overlap the epilogue of this one.

All designs share one list of autotuning configs, so comparing them compares
the instruction shape and the data movement, not the tile sizes. Inputs are
bfloat16 or float16 (fp32 accumulation), or float32 (true fp32 products, no
TF32, one fixed conservative config: correct but slow; useful to check the
logic). Tensors on a CUDA device, or CPU tensors when ``TRITON_INTERPRET=1``
was set before triton was imported (Triton's interpreter, used by the tests).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from profiling_guide.kernels.geglu_common import gelu_tanh_times, on_device, tile_coordinates

# Whether the kernels run in Triton's interpreter is decided when triton and
# this module are imported (triton.jit reads TRITON_INTERPRET as it decorates).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


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


# What the autotuner tries: the GPU list, or in the interpreter its one small config.
CONFIGS = [INTERPRETER_CONFIG] if INTERPRETED else GPU_CONFIGS


def even_k(args) -> bool:
    """Whether K is a multiple of BLOCK_K (the heuristic EVEN_K): then the K mask is always true and compiled away."""
    return args["K"] % args["BLOCK_K"] == 0


def _set_tma_block_shapes(nargs) -> None:
    """Pre-hook of the packed-tma configs: the descriptors' tile shapes follow the config being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [2 * bn, bk]
    nargs["h_desc"].block_shape = [bm, bn]


def tma_config(config: triton.Config) -> triton.Config:
    """``config`` for the packed-tma kernel: descriptor shapes set by a pre-hook, loop options filled in.

    FLATTEN pipelines the tile loop and the K loop as one; WARP_SPECIALIZE
    instead gives loads and MMAs their own warps (on Hopper the two do not
    combine: a warp-specialized loop is not flattened).
    """
    kwargs = {"FLATTEN": not config.kwargs.get("WARP_SPECIALIZE", False), "WARP_SPECIALIZE": False, **config.kwargs}
    return triton.Config(kwargs, num_warps=config.num_warps, num_stages=config.num_stages,
                         pre_hook=_set_tma_block_shapes)  # fmt: skip


def pinned_config(config: triton.Config | None, dtype: torch.dtype) -> triton.Config | None:
    """The config a launch is pinned to: ``config``, FP32_CONFIG for float32 on a GPU, else None (autotune)."""
    if config is None and dtype == torch.float32 and not INTERPRETED:
        return FP32_CONFIG
    return config


def autotuned_config(kernel, M: int, N: int, K: int, dtype: torch.dtype) -> triton.Config | None:
    """The config ``kernel``'s autotuner picked for this problem, or None if it has not met it yet.

    Read from the autotuner's own cache (``kernel.cache``), whose key is the
    values of ``key=["M", "N", "K"]`` followed by the dtype of each argument
    that has one (tensors do, tensor descriptors do not).
    """
    if len(kernel.configs) == 1:  # nothing to choose: the autotuner runs it without caching
        return kernel.configs[0]
    for key, config in kernel.cache.items():
        if key[:3] == (M, N, K) and all(d == str(dtype) for d in key[3:]):
            return config
    return None


# ---------------------------------------------------------------- device code shared by the designs
@triton.jit
def _store_gate_up(gu_ptr, g, u, offs_m, offs_n, M, N, stride_gum):
    """Store this tile's g and u to gu ``[M, 2·N]`` = ``[g | u]``: g in columns [0, N), u in [N, 2N); masked."""
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ptrs = gu_ptr + offs_m[:, None] * stride_gum + offs_n[None, :]
    tl.store(ptrs, g.to(gu_ptr.dtype.element_ty), mask=mask)
    tl.store(ptrs + N, u.to(gu_ptr.dtype.element_ty), mask=mask)


def _check_gate_up_out(gu: torch.Tensor | None, M: int, N: int, x2d: torch.Tensor) -> None:
    if gu is not None:
        assert gu.shape == (M, 2 * N) and gu.stride(1) == 1 and gu.dtype == x2d.dtype, "gu must be [M, 2N] rows"


# ---------------------------------------------------------------- design "dual"
@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": even_k})
@triton.jit
def _geglu_dual_gemm_kernel(
    x_ptr, wg_ptr, wu_ptr, h_ptr,  #
    M, N, K,  #
    stride_xm, stride_xk,  #
    stride_gn, stride_gk,  #
    stride_un, stride_uk,  #
    stride_hm, stride_hn,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr, FAST_TANH: tl.constexpr,
):
    """h[M, N] = gelu_tanh(x @ Wg.T) * (x @ Wu.T), two accumulators, two dots per K step."""
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
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
    h = gelu_tanh_times(acc_g, acc_u, FAST_TANH)
    h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def geglu_dual(x2d: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, *,
               config: triton.Config | None = None) -> torch.Tensor:
    """h ``[M, hidden]`` from x ``[M, dim]`` and the two ``[hidden, dim]`` weights; ``config`` pins the tiles."""
    assert x2d.shape[1] == w_gate.shape[1] and w_gate.shape == w_up.shape, "incompatible dimensions"
    assert x2d.dtype == w_gate.dtype == w_up.dtype, "incompatible dtypes"
    M, K = x2d.shape
    N = w_gate.shape[0]
    assert M > 0 and N > 0, "empty output"
    h = torch.empty((M, N), device=x2d.device, dtype=x2d.dtype)

    def grid(META):
        return (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)

    launch(_geglu_dual_gemm_kernel, grid, pinned_config(config, x2d.dtype),
            x2d, w_gate, w_up, h,  #
            M, N, K,  #
            x2d.stride(0), x2d.stride(1),  #
            w_gate.stride(0), w_gate.stride(1),  #
            w_up.stride(0), w_up.stride(1),  #
            h.stride(0), h.stride(1),  #
            INPUT_PRECISION=input_precision(x2d.dtype), FAST_TANH=fast_tanh(x2d.dtype))  # fmt: skip
    return h


# ---------------------------------------------------------------- design "packed"
@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": even_k})
@triton.jit
def _geglu_packed_gemm_kernel(
    x_ptr, w_ptr, h_ptr, gu_ptr,  #
    M, N, K,  #
    stride_xm, stride_xk,  #
    stride_wn, stride_wk,  #
    stride_hm, stride_hn,  #
    stride_gum,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr, FAST_TANH: tl.constexpr, SAVE_GU: tl.constexpr,
):
    """h[M, N] = gelu_tanh(g) * u from one dot per K step against the packed [2N, K] weight.

    Packed row 2j is gate row j and row 2j+1 is up row j, so the tile of h
    columns [n0, n0 + BLOCK_N) needs packed rows [2·n0, 2·n0 + 2·BLOCK_N).
    """
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
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
    if SAVE_GU:  # training: keep g and u for the backward
        _store_gate_up(gu_ptr, g, u, offs_m, offs_n, M, N, stride_gum)
    h = gelu_tanh_times(g, u, FAST_TANH)
    h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def geglu_packed(x2d: torch.Tensor, w_packed: torch.Tensor, *, config: triton.Config | None = None,
                 gu: torch.Tensor | None = None) -> torch.Tensor:
    """h ``[M, hidden]`` from x ``[M, dim]`` and ``pack_gate_up(w_gate, w_up)`` ``[2·hidden, dim]``.

    ``gu`` (``[M, 2·hidden]``, contiguous rows), if given, also receives g and
    u as the GEMM computed them, side by side: ``gu = [g | u]`` (g in the first
    hidden columns): what the backward reads.
    """
    assert x2d.shape[1] == w_packed.shape[1] and w_packed.shape[0] % 2 == 0, "incompatible dimensions"
    assert x2d.dtype == w_packed.dtype, "incompatible dtypes"
    M, K = x2d.shape
    N = w_packed.shape[0] // 2
    assert M > 0 and N > 0, "empty output"
    h = torch.empty((M, N), device=x2d.device, dtype=x2d.dtype)

    def grid(META):
        return (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)

    _check_gate_up_out(gu, M, N, x2d)
    launch(_geglu_packed_gemm_kernel, grid, pinned_config(config, x2d.dtype),
            x2d, w_packed, h, gu,  #
            M, N, K,  #
            x2d.stride(0), x2d.stride(1),  #
            w_packed.stride(0), w_packed.stride(1),  #
            h.stride(0), h.stride(1),  #
            0 if gu is None else gu.stride(0),  #
            INPUT_PRECISION=input_precision(x2d.dtype), FAST_TANH=fast_tanh(x2d.dtype),  #
            SAVE_GU=gu is not None)  # fmt: skip
    return h


# ---------------------------------------------------------------- design "packed-tma"
# TMA zero-fills past the edges: no K mask to compile away, so no EVEN_K.
@triton.autotune(configs=[tma_config(c) for c in CONFIGS], key=["M", "N", "K"])
@triton.jit
def _geglu_packed_tma_gemm_kernel(
    x_desc, w_desc, h_desc, gu_ptr,  #
    M, N, K, stride_gum,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    NUM_PROGRAMS: tl.constexpr, INPUT_PRECISION: tl.constexpr, FAST_TANH: tl.constexpr,  #
    FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, SAVE_GU: tl.constexpr,
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
        pid_m, pid_n = tile_coordinates(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_w = pid_n * 2 * BLOCK_N  # packed rows: 2 per column of h
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for ki in range(k_steps):
            x = x_desc.load([off_m, ki * BLOCK_K])  # [BLOCK_M, BLOCK_K]
            w = w_desc.load([off_w, ki * BLOCK_K])  # [2·BLOCK_N, BLOCK_K], as stored
            acc = tl.dot(x, w.T, acc, input_precision=INPUT_PRECISION)

        tile_id_c += NUM_PROGRAMS
        pid_m, pid_n = tile_coordinates(tile_id_c, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        g, u = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        if SAVE_GU:  # training: g and u for the backward, stored from registers (no staging tiles)
            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            _store_gate_up(gu_ptr, g, u, offs_m, offs_n, M, N, stride_gum)
        h = gelu_tanh_times(g, u, FAST_TANH)
        h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], h.to(h_desc.dtype))


def geglu_packed_tma(x2d: torch.Tensor, w_packed: torch.Tensor, *,
                     config: triton.Config | None = None, gu: torch.Tensor | None = None) -> torch.Tensor:
    """As :func:`geglu_packed` (``gu`` too), persistent and fed by the TMA unit: rows must be 16-byte aligned."""
    assert x2d.shape[1] == w_packed.shape[1] and w_packed.shape[0] % 2 == 0, "incompatible dimensions"
    assert x2d.dtype == w_packed.dtype, "incompatible dtypes"
    M, K = x2d.shape
    N = w_packed.shape[0] // 2
    assert M > 0 and N > 0 and K > 0, "a tensor descriptor needs a non-empty tensor"
    h = torch.empty((M, N), device=x2d.device, dtype=x2d.dtype)
    # One program per SM, each looping over tiles (3 in the interpreter, so each loops there too).
    num_programs = torch.cuda.get_device_properties(x2d.device).multi_processor_count if x2d.is_cuda else 3
    # The tile shapes given here are placeholders: each config's pre-hook sets its own (_set_tma_block_shapes).
    x_desc, w_desc, h_desc = (TensorDescriptor.from_tensor(t, [16, 16]) for t in (x2d, w_packed, h))

    def grid(META):
        return (min(num_programs, triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])),)

    config = pinned_config(config, x2d.dtype)
    _check_gate_up_out(gu, M, N, x2d)
    launch(_geglu_packed_tma_gemm_kernel, grid, None if config is None else tma_config(config),
            x_desc, w_desc, h_desc, gu,  #
            M, N, K, 0 if gu is None else gu.stride(0),  #
            NUM_PROGRAMS=num_programs, INPUT_PRECISION=input_precision(x2d.dtype),  #
            FAST_TANH=fast_tanh(x2d.dtype), SAVE_GU=gu is not None)  # fmt: skip
    return h


# The autotuned kernel of each design, for autotuned_config.
KERNELS = {"dual": _geglu_dual_gemm_kernel, "packed": _geglu_packed_gemm_kernel,
           "packed-tma": _geglu_packed_tma_gemm_kernel}  # fmt: skip


# ---------------------------------------------------------------- launching
def input_precision(dtype: torch.dtype) -> str:
    """The kernels' INPUT_PRECISION: true fp32 products for fp32 inputs, as torch's matmul by default (no TF32).

    For 16-bit inputs the setting is unused: the MMA takes them as they are.
    """
    return "ieee" if dtype == torch.float32 else "tf32"


def fast_tanh(dtype: torch.dtype) -> bool:
    """The kernels' FAST_TANH: the hardware tanh for 16-bit inputs on a GPU.

    fp32 inputs keep the exact formula (their check is 1e-5), and the
    interpreter cannot run inline PTX.
    """
    return dtype != torch.float32 and not INTERPRETED


def launch(kernel, grid, config: triton.Config | None, *args, **constants) -> None:
    """``kernel[grid](*args, **constants)``: autotuned per (M, N, K) and dtypes, or with ``config``'s tiles."""
    device = args[0].base.device if isinstance(args[0], TensorDescriptor) else args[0].device
    with on_device(device):
        if config is None:
            kernel[grid](*args, **constants)
            return
        if config.pre_hook is not None:  # what the autotuner does before it runs a config
            # noqa below: arg_names may name more parameters than the positional args given
            config.pre_hook({**dict(zip(kernel.arg_names, args)), **constants, **config.all_kwargs()})  # noqa: B905
        # kernel.fn skips the autotuner (for dual/packed it is the heuristics wrapper: EVEN_K still derived)
        kernel.fn[grid](*args, **constants, **config.all_kwargs())
