"""The GeGLU's backward in the epilogue of one GEMM: from dy to the gradients of g and u.

The MLP's forward is ``g, u = x @ Wg.T, x @ Wu.T``, ``h = gelu_tanh(g) * u``,
``y = h @ Wd.T``. Its backward, given dy ``[M, dim]``:

* ``dh = dy @ Wd`` (a GEMM, ``[M, hidden]``), then
* ``dg = dh · u · gelu_tanh'(g)`` and ``du = dh · gelu_tanh(g)`` (elementwise),
* the weights' gradients ``dWd = dy.T @ h``, ``dWg = dg.T @ x``, ``dWu = du.T @ x``,
  and the input's ``dx = dg @ Wg + du @ Wu``.

Eager runs the elementwise part as separate kernels that read dh, g, u and
gelu(g) back from memory and write dg and du. Here it is the epilogue of the
dh GEMM: each program computes one ``[BLOCK_M, BLOCK_N]`` tile of dh in fp32
registers, loads the matching tiles of g and u (saved by the forward side by
side, ``gu = [g | u]``, ``[M, 2·hidden]``), and stores dg and du the same
way, ``dgu = [dg | du]``. dh itself never reaches memory.

That layout is what the rest of the backward wants: ``dgu @ [Wg; Wu]`` (the
two weights stacked, ``[2·hidden, dim]``) is dx for gate and up in one GEMM
(``K = 2·hidden``), and ``dgu.T @ x`` is ``[dWg; dWu]`` in one GEMM, whose
two halves are already the weights' gradients, contiguous: nothing to copy.

Three designs, as for the forward: ``"packed"`` (pointers, one program per
tile, any shape), ``"packed-tma"`` (Hopper: persistent, tiles moved by the
TMA unit), both in Triton's language, and ``"pingpong"``, in Gluon for Hopper
(:mod:`~profiling_guide.kernels.geglu_backward_pingpong`): two warpgroups
take turns, so one tile's epilogue (g and u in, dg and du out) runs while the
other tile's MMAs do.

Inputs are bfloat16 or float16 (fp32 accumulation), or float32 (true fp32
products), on a CUDA device or on the CPU under ``TRITON_INTERPRET=1``, as
for the forward kernels (:mod:`profiling_guide.kernels.geglu_kernels`, whose
configs, tile order and launcher this module shares).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from profiling_guide.kernels.geglu_backward_pingpong import geglu_backward_pingpong
from profiling_guide.kernels.geglu_common import geglu_grads, tile_coordinates
from profiling_guide.kernels.geglu_kernels import (
    CONFIGS,
    INTERPRETED,
    even_k,
    fast_tanh,
    input_precision,
    launch,
    pinned_config,
)

# ---------------------------------------------------------------- design "packed": pointers, one program per tile
def _with_prefetch(configs: list[triton.Config]) -> list[triton.Config]:
    """Each config twice: g and u loaded after the K loop, and loaded before it (PREFETCH).

    The epilogue moves as many bytes as the GEMM's own operands: at the
    guide's shape an SM spends about as long loading g and u and storing dg
    and du as computing its dh tile. Loaded before the K loop, g and u arrive
    while the tensor cores work, at the cost of holding them in registers
    through it; the autotuner measures which wins.
    """
    # the interpreter runs one config (the tests pin the other)
    choices = (True,) if INTERPRETED else (False, True)
    return [triton.Config({**c.kwargs, "PREFETCH": p}, num_warps=c.num_warps, num_stages=c.num_stages)
            for c in configs for p in choices]  # fmt: skip


@triton.autotune(configs=_with_prefetch(CONFIGS), key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": even_k})
@triton.jit
def _geglu_backward_gemm_kernel(
    dy_ptr, wd_ptr, gu_ptr, dgu_ptr,  #
    M, N, K,  #
    stride_dym, stride_dyk,  #
    stride_wdk, stride_wdn,  #
    stride_gum, stride_dgum,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr, FAST_TANH: tl.constexpr, PREFETCH: tl.constexpr,
):
    """dgu = [dg | du] ``[M, 2N]`` from dh = dy[M, K] @ Wd[K, N] and the saved gu = [g | u]."""
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of dh
    offs_k = tl.arange(0, BLOCK_K)
    rows = offs_m % M  # wrapped, not masked, as in the forward kernels: the masked store drops them
    cols = offs_n % N
    dy_ptrs = dy_ptr + rows[:, None] * stride_dym + offs_k[None, :] * stride_dyk  # [BLOCK_M, BLOCK_K]
    wd_ptrs = wd_ptr + offs_k[:, None] * stride_wdk + cols[None, :] * stride_wdn  # [BLOCK_K, BLOCK_N]

    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    gu_ptrs = gu_ptr + offs_m[:, None] * stride_gum + offs_n[None, :]
    if PREFETCH:  # issued now, waited for at their first use, after the K loop
        g = tl.load(gu_ptrs, mask=mask, other=0.0)
        u = tl.load(gu_ptrs + N, mask=mask, other=0.0)
    dh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(dy_ptrs)
            b = tl.load(wd_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(dy_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(wd_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        dh = tl.dot(a, b, dh, input_precision=INPUT_PRECISION)
        dy_ptrs += BLOCK_K * stride_dyk
        wd_ptrs += BLOCK_K * stride_wdk

    # The epilogue: this tile's g and u, the GeGLU's derivative on the fp32 dh, dg and du stored.
    if not PREFETCH:
        g = tl.load(gu_ptrs, mask=mask, other=0.0)
        u = tl.load(gu_ptrs + N, mask=mask, other=0.0)
    dg, du = geglu_grads(g.to(tl.float32), u.to(tl.float32), dh, FAST_TANH)
    dgu_ptrs = dgu_ptr + offs_m[:, None] * stride_dgum + offs_n[None, :]
    tl.store(dgu_ptrs, dg.to(dgu_ptr.dtype.element_ty), mask=mask)
    tl.store(dgu_ptrs + N, du.to(dgu_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------- design "packed-tma": TMA, persistent
def _set_block_shapes(nargs) -> None:
    """Pre-hook: the descriptors' tile shapes follow the config being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["dy_desc"].block_shape = [bm, bk]
    nargs["wd_desc"].block_shape = [bk, bn]
    for name in ("g_desc", "u_desc", "dg_desc", "du_desc"):
        nargs[name].block_shape = [bm, bn]


def _tma_configs(configs: list[triton.Config]) -> list[triton.Config]:
    """Each config with one persistent program per SM, and with two (PROGRAMS_PER_SM).

    Two programs on one SM, where their tiles fit in its shared memory and
    registers together, overlap one's epilogue (g and u loaded, dg and du
    stored: memory) with the other's K loop (tensor cores); the autotuner
    measures which wins. The tile loop is flattened, so a program's next loads
    are in flight during its own epilogue.
    """
    choices = (1,) if INTERPRETED else (1, 2)
    return [triton.Config({**c.kwargs, "PROGRAMS_PER_SM": n, "FLATTEN": True}, num_warps=c.num_warps,
                          num_stages=c.num_stages, pre_hook=_set_block_shapes)
            for c in configs for n in choices]  # fmt: skip


def _tma_config(config: triton.Config) -> triton.Config:
    """A pinned config for the TMA kernel: one program per SM unless it says otherwise."""
    kwargs = {"PROGRAMS_PER_SM": 1, **config.kwargs, "FLATTEN": True}
    kwargs.pop("PREFETCH", None)
    return triton.Config(kwargs, num_warps=config.num_warps, num_stages=config.num_stages, pre_hook=_set_block_shapes)


@triton.autotune(configs=_tma_configs(CONFIGS), key=["M", "N", "K"])
@triton.jit
def _geglu_backward_tma_kernel(
    dy_desc, wd_desc, g_desc, u_desc, dg_desc, du_desc,  #
    M, N, K,  #
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,  #
    PROGRAMS_PER_SM: tl.constexpr, INPUT_PRECISION: tl.constexpr, FAST_TANH: tl.constexpr, FLATTEN: tl.constexpr,
):
    """The same tile work, persistent (one program per SM), every tile moved by the TMA unit.

    g, u, dg and du are each described as an ``[M, N]`` view of their half of
    gu or dgu, so a tile hanging over column N is clipped by the hardware at
    its own half's edge and never spills into the other half.
    """
    start_pid = tl.program_id(0)
    num_programs = tl.num_programs(0)  # PROGRAMS_PER_SM per SM (the launcher's grid)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    tile_id_c = start_pid - num_programs  # the epilogue's own counter: see the forward's packed-tma kernel
    for tile_id in tl.range(start_pid, num_tiles, num_programs, flatten=FLATTEN):
        pid_m, pid_n = tile_coordinates(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        dh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_steps):
            a = dy_desc.load([off_m, ki * BLOCK_K])  # [BLOCK_M, BLOCK_K]
            b = wd_desc.load([ki * BLOCK_K, off_n])  # [BLOCK_K, BLOCK_N]
            dh = tl.dot(a, b, dh, input_precision=INPUT_PRECISION)

        tile_id_c += num_programs
        pid_m, pid_n = tile_coordinates(tile_id_c, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        g = g_desc.load([off_m, off_n])
        u = u_desc.load([off_m, off_n])
        dg, du = geglu_grads(g.to(tl.float32), u.to(tl.float32), dh, FAST_TANH)
        dg_desc.store([off_m, off_n], dg.to(dg_desc.dtype))
        du_desc.store([off_m, off_n], du.to(du_desc.dtype))


KERNELS = {"packed": _geglu_backward_gemm_kernel, "packed-tma": _geglu_backward_tma_kernel}
DESIGNS = (*KERNELS, "pingpong")  # and the Gluon design (geglu_backward_pingpong), for Hopper


def geglu_backward(dy2d: torch.Tensor, w_down: torch.Tensor, gu: torch.Tensor, *, design: str = "packed",
                   config: triton.Config | None = None) -> torch.Tensor:
    """dgu = ``[dg | du]`` ``[M, 2·hidden]`` from dy ``[M, dim]``, the down weight ``[dim, hidden]`` and gu.

    ``gu`` is what the forward saved (:func:`~profiling_guide.kernels.geglu_kernels.geglu_packed`'s
    ``gu``): ``[g | u]``, ``[M, 2·hidden]``. ``design`` is ``"packed"`` (any
    shape), ``"packed-tma"`` (Hopper and later; dim and hidden multiples of
    8 in 16-bit dtypes: the TMA unit's 16-byte alignment, for the halves of gu
    and dgu too) or ``"pingpong"`` (Hopper only, bf16 or fp16, the same
    alignment: :mod:`~profiling_guide.kernels.geglu_backward_pingpong`).
    ``config`` pins the tiles (BLOCK_N counts columns of dh); by default the
    autotuner picks them per shape (``"pingpong"``: its one measured config).
    """
    M, K = dy2d.shape
    assert w_down.shape[0] == K and gu.shape == (M, 2 * w_down.shape[1]), "incompatible dimensions"
    assert dy2d.dtype == w_down.dtype == gu.dtype, "incompatible dtypes"
    assert gu.stride(1) == 1 and dy2d.stride(1) == 1, "gu and dy must have contiguous rows"
    assert design in DESIGNS, f"unknown design {design!r}"
    N = w_down.shape[1]
    assert M > 0 and N > 0 and K > 0, "empty operands"
    dgu = torch.empty((M, 2 * N), device=dy2d.device, dtype=dy2d.dtype)
    if design == "pingpong":
        return geglu_backward_pingpong(dy2d, w_down, gu, dgu, config=config)
    config = pinned_config(config, dy2d.dtype)
    if config is not None and "PREFETCH" not in config.kwargs:  # a pinned config of the forward's kind
        config = triton.Config({**config.kwargs, "PREFETCH": False}, num_warps=config.num_warps,
                               num_stages=config.num_stages)  # fmt: skip
    constants = {"INPUT_PRECISION": input_precision(dy2d.dtype), "FAST_TANH": fast_tanh(dy2d.dtype)}
    if design == "packed":

        def grid(META):
            return (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)

        launch(_geglu_backward_gemm_kernel, grid, config,
                dy2d, w_down, gu, dgu,  #
                M, N, K,  #
                dy2d.stride(0), dy2d.stride(1),  #
                w_down.stride(0), w_down.stride(1),  #
                gu.stride(0), dgu.stride(0), **constants)  # fmt: skip
        return dgu
    sms = torch.cuda.get_device_properties(dy2d.device).multi_processor_count if dy2d.is_cuda else 3
    # the tile shapes here are placeholders: each config's pre-hook sets its own
    views = (dy2d, w_down, gu[:, :N], gu[:, N:], dgu[:, :N], dgu[:, N:])
    descs = [TensorDescriptor.from_tensor(t, [16, 16]) for t in views]

    def grid(META):
        tiles = triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])
        return (min(META["PROGRAMS_PER_SM"] * sms, tiles),)

    launch(_geglu_backward_tma_kernel, grid, None if config is None else _tma_config(config),
            *descs, M, N, K, **constants)  # fmt: skip
    return dgu


def reference_grads(dh: torch.Tensor, g: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dg, du)`` in float64 through torch's autograd of ``gelu_tanh(g) * u``: what the epilogue must match."""
    g64 = g.double().requires_grad_()
    u64 = u.double().requires_grad_()
    h = torch.nn.functional.gelu(g64, approximate="tanh") * u64
    return torch.autograd.grad(h, (g64, u64), dh.double())
