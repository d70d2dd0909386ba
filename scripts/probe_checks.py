"""What the GPU probes share: one config of a kernel checked against float64, and twice for the same bits."""

from __future__ import annotations

import time
from typing import Callable

import torch


def checked(label: str, run: Callable[[], torch.Tensor], error_of: Callable[[torch.Tensor], float],
            baseline_error: float) -> bool:  # fmt: skip
    """``run()`` once, its error against the float64 reference, and again for the same bits; one line printed.

    Good where the error is at most twice ``baseline_error`` (the Triton
    ``packed-tma`` design's on the same inputs) or 1e-2, and the second call
    gives the same bits.
    """
    t0 = time.perf_counter()
    out = run()
    torch.cuda.synchronize()
    err = error_of(out)
    same = torch.equal(out, run())
    good = err <= max(2 * baseline_error, 1e-2) and same
    print(f"{label}: {err:.1e} (packed-tma {baseline_error:.1e}), same twice {same}, "
          f"{time.perf_counter() - t0:.1f} s {'ok' if good else 'WRONG'}", flush=True)  # fmt: skip
    return good


GUIDE_SHAPE = (8192, 768, 3072)  # rows, dim, hidden: the post's MLP at batch 64 × seq 128


def guide_weights(dtype=torch.bfloat16):
    """The MLP's gate, up and down weights at the guide's shape (seed 0), and the packed gate/up weight."""
    from profiling_guide.kernels.fused_mlp import pack_gate_up

    torch.manual_seed(0)
    _, dim, hidden = GUIDE_SHAPE
    wg = torch.randn(hidden, dim, device="cuda", dtype=dtype) / dim**0.5
    wu = torch.randn(hidden, dim, device="cuda", dtype=dtype) / dim**0.5
    wd = torch.randn(dim, hidden, device="cuda", dtype=dtype) / hidden**0.5
    return wg, wu, wd, pack_gate_up(wg, wu)
