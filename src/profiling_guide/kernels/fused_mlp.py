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

The kernels, three designs of the same idea in Triton (``"dual"``,
``"packed"``, ``"packed-tma"``), are in :mod:`profiling_guide.kernels.geglu_kernels`,
one kernel and one thin launching function each; a fourth, ``"pingpong"``,
is written in Gluon for Hopper (:mod:`profiling_guide.kernels.geglu_pingpong`):
two warpgroups take turns on the tensor cores, so one tile's epilogue runs
while the other tile's MMAs do. This module is what a caller uses:
:func:`geglu` checks its inputs and runs one design, and
:class:`FusedGeGLUMLP` is the whole MLP as an ``nn.Module``.

``design="auto"`` (the default) runs ``"pingpong"`` on Hopper (compute
capability 9.x, the GPUs with ``wgmma``) for bf16 and fp16 inputs whose rows
the TMA unit can address (16-byte aligned), ``"packed-tma"`` where only the
TMA part holds (float32, or a later GPU), and ``"packed"`` elsewhere:
:func:`choose_design` says which for given inputs, and :func:`tuned_config`
which tile config a design runs at a shape.

The down projection stays with cuBLAS (:func:`torch.nn.functional.linear`):
after the epilogue there is nothing left to fuse into it (its epilogue would
just store y), and fusing it into *this* kernel would need a whole row of h
(all hidden columns, spread over many programs) per output tile. cuBLAS runs a
plain GEMM near the ceiling; that is the right tool.

Issuing one forward costs the CPU tens of µs in Triton's Python launcher
(binding and specializing arguments, the autotuner's cache, tensor
descriptors). :meth:`FusedGeGLUMLP.captured` records one forward into a CUDA
graph (:class:`~profiling_guide.kernels.graphs.CapturedForward`), which replays every
kernel of it with one call.

Supported: bfloat16 and float16 (the fast path, fp32 accumulation), and
float32 (computed in true fp32, no TF32: correct but slow; useful to check the
logic). Tensors on a CUDA device, or CPU tensors when ``TRITON_INTERPRET=1``
was set before this module was imported (Triton's interpreter, used by the
tests). Trainable: :class:`GeGLUFunction` is the forward and the fused backward
(:mod:`profiling_guide.kernels.geglu_backward`).

``python -m profiling_guide.kernels.fused_mlp --check`` runs the GPU tests
(``tests/test_fused_mlp_gpu.py``): every design against a float64 reference
on many shapes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from profiling_guide.errors import GuideError, argument_check, missing_dependency

try:  # Triton comes with torch's CUDA builds, and with the liger extra; say so rather than fail in a traceback
    import triton
except ModuleNotFoundError as exc:
    raise missing_dependency(exc, "our fused MLP (profiling_guide.kernels.fused_mlp)") from None
from profiling_guide.kernels.geglu_backward import geglu_backward
from profiling_guide.kernels.geglu_kernels import (
    INTERPRETED,
    KERNELS,
    autotuned_config,
    geglu_dual,
    geglu_packed,
    geglu_packed_tma,
    pinned_config,
)
from profiling_guide.kernels.geglu_pingpong import full_config as pingpong_config
from profiling_guide.kernels.geglu_pingpong import geglu_pingpong
from profiling_guide.kernels.graphs import CapturedForward

# Design name → the function that launches its kernel. "auto" is not a
# design: it names whichever of these choose_design picks.
LAUNCHERS = {"dual": geglu_dual, "packed": geglu_packed, "packed-tma": geglu_packed_tma, "pingpong": geglu_pingpong}
DESIGNS = tuple(LAUNCHERS)
AUTO = "auto"
PACKED_DESIGNS = ("packed", "packed-tma", "pingpong")  # the ones that read pack_gate_up(w_gate, w_up)
TMA_DESIGNS = ("packed-tma", "pingpong")
TRITON_DESIGNS = tuple(KERNELS)  # the ones written in Triton's language, which its interpreter runs
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_SUPPORTED_TEXT = "bfloat16, float16 or float32 (float32 is exact fp32, slow)"

# 32-bit offsets inside the kernels: every tensor must have fewer elements.
_MAX_ELEMENTS = 2**31 - 1


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


def choose_design(x2d: torch.Tensor, hidden: int) -> str:
    """What ``design="auto"`` runs for ``x2d`` (``[M, dim]``) and ``hidden``: pingpong, else packed-tma, else packed."""
    if x2d.device.type == "cuda" and _tma_problem(x2d, hidden) is None:
        return "pingpong" if _pingpong_problem(x2d) is None else "packed-tma"
    return "packed"


def _pingpong_problem(x2d: torch.Tensor) -> str | None:
    """Why the Gluon ping-pong kernel cannot run this call, or None: a Hopper GPU and 16-bit inputs."""
    if x2d.device.type != "cuda":
        return "design 'pingpong' is a Gluon kernel, which Triton's interpreter cannot run: use 'packed-tma' on a GPU or 'packed'"
    if torch.cuda.get_device_capability(x2d.device)[0] != 9:
        name = torch.cuda.get_device_name(x2d.device)
        return f"design 'pingpong' issues Hopper's wgmma (compute capability 9.x), {name} has none: use 'packed-tma' or 'packed'"
    if x2d.dtype not in (torch.bfloat16, torch.float16):
        return f"design 'pingpong' takes bfloat16 or float16 inputs, got {x2d.dtype}: use 'packed-tma'"
    return None


def backward_design(forward_design: str, dy2d: torch.Tensor) -> str:
    """The design of :class:`GeGLUFunction`'s backward kernel after a forward of ``forward_design``.

    After a forward of a TMA design (``"packed-tma"``, ``"pingpong"``), whose
    rows the TMA unit can address: the Gluon ``"pingpong"`` kernel where it
    runs (a Hopper GPU, 16-bit gradients), else ``"packed-tma"``; after a
    ``"packed"`` forward, ``"packed"``. At the guide's shape the
    ping-pong backward kernel took 0.77× the time of ``"packed-tma"``'s on an
    H100 and 0.74× on an H200 (``scripts/probe_backward.py``, committed as
    ``docs/recordings/<gpu>/probe_backward_dependent.json``): one tile's epilogue (g and
    u in, dg and du out: 201 MB over the step) runs while another tile's MMAs
    do.
    """
    if forward_design in TMA_DESIGNS:
        return "pingpong" if _pingpong_problem(dy2d) is None else "packed-tma"
    return forward_design


def _tma_problem(x2d: torch.Tensor, hidden: int, packed_weight: torch.Tensor | None = None,
                 design: str = "packed-tma") -> str | None:  # fmt: skip
    """Why the TMA unit cannot serve this call, or None: Hopper or later, rows contiguous and 16-byte aligned."""
    if x2d.device.type == "cuda" and torch.cuda.get_device_capability(x2d.device)[0] < 9:
        name = torch.cuda.get_device_name(x2d.device)
        return f"design {design!r} needs the TMA unit of compute capability 9.0+ (Hopper), {name} has none: use 'packed'"
    size = x2d.element_size()
    dim = x2d.shape[1]
    # (name, row stride, column stride, address); h and a packed weight still to be made are new, contiguous tensors
    w = (packed_weight.stride(0), packed_weight.stride(1), packed_weight.data_ptr()) if packed_weight is not None else (dim, 1, 0)
    rows = [("x", x2d.stride(0), x2d.stride(1), x2d.data_ptr()), ("the packed weight", *w), ("h", hidden, 1, 0)]
    for name, row_stride, column_stride, address in rows:
        if column_stride != 1 or (row_stride * size) % 16 or address % 16:
            return (f"design {design!r} needs rows of {name} contiguous and 16-byte aligned (dim and hidden multiples "
                    f"of {16 // size} for {x2d.dtype}, x.stride(-1) == 1): use 'packed' for shape {list(x2d.shape)}, "
                    f"hidden {hidden}")  # fmt: skip
    return None


def config_text(config: triton.Config | None) -> str | None:
    """A config in one line, e.g. ``BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 GROUP_M=8 num_warps=8 num_stages=4``."""
    if config is None:
        return None
    # the loop options show only when they leave the default (a flattened loop, no warp specialization)
    shown = {k: v for k, v in config.kwargs.items() if k != "FLATTEN" and (k != "WARP_SPECIALIZE" or v)}
    tiles = " ".join(f"{k}={v}" for k, v in shown.items())
    if "NUM_STAGES" in shown:  # a Gluon kernel's ring depth is its own constant, not Triton's pipelining option
        return f"{tiles} num_warps={config.num_warps}"
    return f"{tiles} num_warps={config.num_warps} num_stages={config.num_stages}"


def tuned_config(design: str, x2d: torch.Tensor, hidden: int, config: dict | triton.Config | None = None) -> str | None:
    """The tile config :func:`geglu` runs ``design`` with on ``x2d`` and ``hidden``, in one line.

    A pinned ``config`` is itself the answer (float32 on a GPU always runs one
    fixed config); otherwise the autotuner's choice for this (M, dim, hidden)
    and dtype, read from its cache: None until a call has tuned that shape.
    """
    if design == AUTO:
        design = choose_design(x2d, hidden)
    if design == "pingpong":  # one measured config, no autotuner (geglu_pingpong.DEFAULT_CONFIG says why)
        return config_text(pingpong_config(None if config is None else _as_config(config)))
    if design not in KERNELS:
        raise GuideError(f"unknown design {design!r}: use one of {', '.join((*DESIGNS, AUTO))}")
    pinned = pinned_config(None if config is None else _as_config(config), x2d.dtype)
    if pinned is not None:
        return config_text(pinned)
    M, dim = x2d.shape
    return config_text(autotuned_config(KERNELS[design], M, hidden, dim, x2d.dtype))



def geglu(
    x2d: torch.Tensor,
    w_gate: torch.Tensor,
    w_up: torch.Tensor,
    *,
    design: str = AUTO,
    packed_weight: torch.Tensor | None = None,
    config: dict | triton.Config | None = None,
    save_gate_up: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``gelu_tanh(x2d @ w_gate.T) * (x2d @ w_up.T)`` in one kernel: returns h ``[M, hidden]``.

    ``x2d`` is ``[M, dim]``, the weights ``[hidden, dim]`` as ``nn.Linear``
    stores them; h has x's dtype. The packed designs use ``packed_weight``
    (which must be ``pack_gate_up(w_gate, w_up)``; the weights then serve only
    to check shapes) or pack the weights on every call when it is None, a
    copy :class:`FusedGeGLUMLP` caches. ``config`` pins the tile sizes
    (``{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8,
    "num_warps": 8, "num_stages": 4}`` or a ``triton.Config``) instead of
    autotuning. Any M ≥ 0 and any dim/hidden work; loads and stores are masked.
    ``save_gate_up=True`` (the packed designs) returns ``(h, gu)``: gu
    ``[M, 2·hidden]`` holds g and u as the GEMM computed them, side by side
    (``[g | u]``), for the backward (:class:`GeGLUFunction`).
    """
    _check_geglu_inputs(x2d, w_gate, w_up, design)
    hidden, dim = w_gate.shape
    M = x2d.shape[0]
    if design == AUTO:
        design = choose_design(x2d, hidden)
    packed = design in PACKED_DESIGNS
    if packed and packed_weight is None:
        packed_weight = pack_gate_up(w_gate, w_up)
    _check_geglu_plan(x2d, w_gate, design, packed_weight, save_gate_up)
    config = None if config is None else _as_config(config)

    if M == 0 or hidden == 0 or dim == 0:  # no K steps: g = u = 0 and gelu(0)·0 = 0
        h = torch.zeros((M, hidden), device=x2d.device, dtype=x2d.dtype)
        return (h, torch.zeros((M, 2 * hidden), device=x2d.device, dtype=x2d.dtype)) if save_gate_up else h
    weights = (packed_weight,) if packed else (w_gate, w_up)
    if not save_gate_up:
        return LAUNCHERS[design](x2d, *weights, config=config)
    gu = torch.empty((M, 2 * hidden), device=x2d.device, dtype=x2d.dtype)
    return LAUNCHERS[design](x2d, *weights, config=config, gu=gu), gu


@argument_check
def _check_geglu_inputs(x2d: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, design: str) -> None:
    """``geglu``'s checks of its inputs: a known design, 2-D tensors of matching shapes and one supported dtype,
    on one device the kernels run on."""
    if design != AUTO and design not in LAUNCHERS:
        raise GuideError(f"unknown design {design!r}: use one of {', '.join((*DESIGNS, AUTO))}")
    for name, t in (("x2d", x2d), ("w_gate", w_gate), ("w_up", w_up)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise GuideError(f"geglu needs a 2-D {name}, got {got}")
    if w_gate.shape != w_up.shape:
        raise GuideError(
            f"gate and up weights must have one shape [hidden, dim], got {tuple(w_gate.shape)} and {tuple(w_up.shape)}"
        )
    hidden, dim = w_gate.shape
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


@argument_check
def _check_geglu_plan(x2d: torch.Tensor, w_gate: torch.Tensor, design: str, packed_weight: torch.Tensor | None,
                      save_gate_up: bool) -> None:
    """``geglu``'s checks of what it is about to launch, once the design is chosen and the weights packed: the
    packed weight's shape, dtype and device, 32-bit offsets, and what the TMA and ping-pong designs need."""
    hidden, dim = w_gate.shape
    packed = design in PACKED_DESIGNS
    if save_gate_up and not packed:
        raise GuideError(f"save_gate_up needs a packed design ({', '.join(PACKED_DESIGNS)}), got {design!r}")
    if packed and (
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
    if x2d.shape[0] * hidden > _MAX_ELEMENTS:
        raise GuideError(f"the fused GeGLU kernel uses 32-bit offsets: h would have {x2d.shape[0] * hidden} elements, "
                         "more than 2**31 - 1")
    if design in TMA_DESIGNS and (problem := _tma_problem(x2d, hidden, packed_weight, design)):
        raise GuideError(problem)
    if design == "pingpong" and (problem := _pingpong_problem(x2d)):
        raise GuideError(problem)


@argument_check
def _check_device(*tensors: torch.Tensor) -> None:
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        raise GuideError("geglu needs x and the weights on one device, got " + ", ".join(str(t.device) for t in tensors))
    if device.type == "cuda":
        return
    if device.type == "cpu" and INTERPRETED:
        return
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        raise GuideError(
            "CPU tensors run only in Triton's interpreter, and TRITON_INTERPRET=1 was set after "
            "triton was imported: set it before importing triton and profiling_guide.kernels.fused_mlp"
        )
    raise GuideError(
        f"the fused GeGLU kernel runs on a CUDA device (or on the CPU with TRITON_INTERPRET=1 set "
        f"before triton is imported), got a tensor on {device}"
    )


def _as_config(config: dict | triton.Config) -> triton.Config:
    if isinstance(config, triton.Config):
        return config
    config = dict(config)
    try:
        warps, stages = config.pop("num_warps", 4), config.pop("num_stages", 3)
        tiles = {k: int(config.pop(k)) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        tiles |= {k: bool(config.pop(k)) for k in ("FLATTEN", "WARP_SPECIALIZE") if k in config}
        tiles |= {k: int(config.pop(k)) for k in ("NUM_STAGES", "CONSUMERS") if k in config}  # pingpong's
    except KeyError as exc:
        raise GuideError(f"a pinned config needs BLOCK_M, BLOCK_N, BLOCK_K and GROUP_M, missing {exc.args[0]}") from None
    if config:
        raise GuideError(f"unknown config keys {sorted(config)}: use BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages "
                         f"(and WARP_SPECIALIZE for packed-tma; NUM_STAGES and CONSUMERS for pingpong)")
    return triton.Config(tiles, num_warps=warps, num_stages=stages)


class GeGLUFunction(torch.autograd.Function):
    """The fused MLP as one autograd node: forward through our kernels, backward through one more and three GEMMs.

    Forward: the packed gate/up kernel (``"packed"``, ``"packed-tma"`` or
    ``"pingpong"``) stores h *and* gu (``[g | u]``, ``[M, 2·hidden]``), then
    cuBLAS's down GEMM. Saved for backward: x (the
    caller's, no copy), gu and h: 3·M·hidden elements, against eager's 4 (g,
    u, gelu(g) and h). gu is saved rather than recomputed: recomputing it
    would run the gate/up GEMM again, the step's largest, while keeping it
    costs one extra store of 2·M·hidden elements.

    Backward, given dy:

    1. ``dgu = geglu_backward(dy, Wd, gu)`` = ``[dg | du]``: dh = dy @ Wd with
       the GeGLU's derivative in its epilogue
       (:mod:`~profiling_guide.kernels.geglu_backward`); dh never reaches memory.
       On Hopper, after a TMA forward, the Gluon ping-pong kernel
       (:func:`backward_design`).
    2. ``dWd = dy.T @ h`` (cuBLAS).
    3. ``dx = dgu @ stacked`` (cuBLAS, K = 2·hidden; ``stacked`` is
       ``[Wg; Wu]``, ``[2·hidden, dim]``): gate's and up's dx in one GEMM.
    4. ``[dWg; dWu] = dgu.T @ x`` (cuBLAS): both weights' gradients in one
       GEMM, each a contiguous half of its output.

    Seven kernels for the step's nine GEMMs' worth of work, where eager runs
    nine GEMMs and the elementwise kernels between them.
    """

    @staticmethod
    def forward(ctx, x2d, w_gate, w_up, w_down, packed, stacked, design):
        """y = down(h) of x2d ``[M, dim]``; saves x2d, the stacked weights, the down weight, gu and h."""
        h, gu = geglu(x2d, w_gate, w_up, design=design, packed_weight=packed, save_gate_up=True)
        ctx.save_for_backward(x2d, stacked, w_down, gu, h)
        ctx.design = design
        return F.linear(h, w_down)

    @staticmethod
    def backward(ctx, dy):
        """The gradients of x2d, the gate, up and down weights (None where autograd needs none)."""
        x2d, stacked, w_down, gu, h = ctx.saved_tensors
        needs_x, needs_gate, needs_up, needs_down = ctx.needs_input_grad[:4]
        dy = dy.contiguous()
        dgu = geglu_backward(dy, w_down, gu, design=backward_design(ctx.design, dy))
        dx = dgu @ stacked if needs_x else None
        dw_down = dy.T @ h if needs_down else None
        dw_gate = dw_up = None
        if needs_gate or needs_up:
            dw_gate, dw_up = (dgu.T @ x2d).chunk(2)  # [dWg; dWu]: two contiguous halves
        return dx, dw_gate, dw_up, dw_down, None, None, None


class FusedGeGLUMLP(nn.Module):
    """``down(gelu_tanh(gate(x)) * up(x))`` with gate, up and the GeGLU in one Triton kernel.

    Same parameters as :class:`~profiling_guide.kernels.models.SimpleGeGLUMLP`
    (``gate_proj``, ``up_proj``, ``down_proj``, bias-free), so
    ``fused.load_state_dict(simple.state_dict())`` works. ``design="packed"``
    keeps an interleaved copy of the gate and up weights (not in the state
    dict), rebuilt when either weight changes. Trainable with the packed
    designs: where autograd needs gradients, the forward runs through
    :class:`GeGLUFunction` (whose forward kernel also stores g and u for
    its fused backward); under ``torch.no_grad()`` it stores h alone.

    ``design_ran`` is the design the last forward ran (what ``"auto"``
    chose), None before the first.
    """

    def __init__(self, dim: int, hidden: int, device=None, dtype=None, design: str = AUTO):
        super().__init__()
        if design not in (*DESIGNS, AUTO):
            raise GuideError(f"unknown design {design!r}: use one of {', '.join((*DESIGNS, AUTO))}")
        self.dim, self.hidden, self.design = dim, hidden, design
        self.design_ran: str | None = None
        self.gate_proj = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
        self.up_proj = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
        self.down_proj = nn.Linear(hidden, dim, bias=False, device=device, dtype=dtype)
        # copies of the gate and up weights (not in the state dict), rebuilt when either weight changes
        self._copies: dict[str, torch.Tensor] = {}
        self._copy_keys: dict[str, tuple] = {}

    @classmethod
    def from_mlp(cls, mlp: nn.Module, design: str = AUTO) -> FusedGeGLUMLP:
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
        return self._weight_copy("packed", pack_gate_up)

    def stacked_weight(self) -> torch.Tensor:
        """``[Wg; Wu]`` (``[2·hidden, dim]``), what the backward's dx GEMM reads; cached as :meth:`packed_weight` is."""
        return self._weight_copy("stacked", lambda wg, wu: torch.cat((wg, wu)))

    def weight_copies(self) -> list[torch.Tensor]:
        """The cached copies of the gate and up weights (packed, stacked): weights, not activations."""
        return list(self._copies.values())

    def _weight_copy(self, kind: str, build) -> torch.Tensor:
        wg, wu = self.gate_proj.weight, self.up_proj.weight
        key = self._copy_keys.get(kind)
        fresh = (
            key is not None
            and key[0]() is wg and key[1] == (wg._version, wg.data_ptr())
            and key[2]() is wu and key[3] == (wu._version, wu.data_ptr())
        )  # fmt: skip
        if not fresh:
            with torch.no_grad():
                self._copies[kind] = build(wg.detach(), wu.detach())
            self._copy_keys[kind] = (weakref.ref(wg), (wg._version, wg.data_ptr()), weakref.ref(wu), (wu._version, wu.data_ptr()))
        return self._copies[kind]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wg, wu, wd = self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight
        if x.shape[-1:] != (self.dim,):
            raise GuideError(f"FusedGeGLUMLP(dim={self.dim}) needs inputs [..., {self.dim}], got {list(x.shape)}")
        leading = x.shape[:-1]
        x2d = x.reshape(-1, self.dim)
        design = choose_design(x2d, self.hidden) if self.design == AUTO else self.design
        packed = self.packed_weight() if design in PACKED_DESIGNS else None
        if torch.is_grad_enabled() and any(t.requires_grad for t in (x, wg, wu, wd)):
            if design not in PACKED_DESIGNS:  # the ones that can also store g and u for the backward
                raise GuideError(f"FusedGeGLUMLP trains with a packed design ({', '.join(PACKED_DESIGNS)}), "
                                 f"not {design!r}: build it with design='auto', or call it under torch.no_grad()")
            y = GeGLUFunction.apply(x2d, wg, wu, wd, packed, self.stacked_weight(), design)
        else:
            h = geglu(x2d, wg, wu, design=design, packed_weight=packed)
            # The down projection is a plain GEMM with nothing to fuse: cuBLAS (see the module docstring).
            y = F.linear(h, wd)
        self.design_ran = design
        return y.reshape(*leading, self.dim)

    def captured(self, example_x: torch.Tensor) -> CapturedForward:
        """This MLP's forward on inputs shaped like ``example_x``, captured into a CUDA graph.

        Calling the result replays the graph: the same kernels, without
        Triton's Python launcher or PyTorch's dispatcher on the way. The
        graph keeps reading the tensors it was captured with, the packed copy
        of the weights included: capture again after changing the weights.
        """
        return CapturedForward(self, example_x)


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

GPU_TESTS = Path(__file__).resolve().parents[3] / "tests" / "test_fused_mlp_gpu.py"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m profiling_guide.kernels.fused_mlp",
        description="Self check of the fused GeGLU kernels on a CUDA GPU: runs tests/test_fused_mlp_gpu.py with pytest.",
    )
    parser.add_argument("--check", action="store_true", help="compare every design with a float64 reference on many shapes")
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --), e.g. -k packed-tma -x")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    if not GPU_TESTS.is_file():
        print(f"error: --check runs {GPU_TESTS.name} from a checkout of the repository, and there is none at "
              f"{GPU_TESTS.parent}", file=sys.stderr)  # fmt: skip
        return 2
    return subprocess.call([sys.executable, "-m", "pytest", str(GPU_TESTS), "-q", *args.pytest_args])


if __name__ == "__main__":
    sys.exit(main())
