"""Ceilings measured on the GPU at hand, and how close a kernel comes to them.

A kernel is either limited by arithmetic (it cannot do FLOPs faster than the
GPU's matrix units) or by memory (it cannot move bytes faster than HBM). The
guide does not take either limit from a data sheet: datasheet peaks assume
clocks and data that a real run does not see. It measures them in the same
run as the kernels it compares, with the best code there is for each:

* the **GEMM rate**: a large square bf16 matrix product (8192³ by default)
  through cuBLAS, in TFLOP/s, once the GPU has settled at the clock it
  sustains (:func:`measure_gemm_tflops`);
* the **copy bandwidth**: a device-to-device copy of 1 GiB, counting the
  bytes read and the bytes written, in TB/s.

A *floor* is the least time a piece of work can take at a ceiling
(``compute_floor_us``, ``memory_floor_us``); the *achieved fraction* is how
much of a ceiling a measured time reached (``achieved_fraction``).
"""

from __future__ import annotations

import time

import torch

from .capture import median_gpu_us, require_cuda_memory
from .errors import GuideError

GEMM_N = 8192
SETTLE_S = 0.5  # seconds of GEMMs before the GEMM rate is timed
COPY_BYTES = 1 << 30


def _require_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise GuideError(f"measuring {what} needs a CUDA GPU and none is visible")


def measure_gemm_tflops(dtype: torch.dtype = torch.bfloat16, n: int = GEMM_N, *, repeat: int = 50,
                        settle_s: float = SETTLE_S) -> float:
    """Median rate of an ``n×n @ n×n`` matrix product in ``dtype``, in TFLOP/s (``2·n³`` FLOPs each).

    The products first run back to back for ``settle_s`` seconds. A GPU that
    was idle starts at its boost clock and slows within tens of milliseconds
    as it reaches its power limit: on an H100 the first few dozen 8192³ GEMMs
    ran up to a tenth faster than the rate it then sustains, so an unsettled
    measurement is a coin toss between the two. The settled rate is the one
    the benchmark's back-to-back forwards run at.
    """
    _require_cuda("the GEMM rate")
    size = torch.empty((), dtype=dtype).element_size()
    require_cuda_memory(3 * n * n * size, f"the {n}³ GEMM ceiling")
    gen = torch.Generator(device="cuda").manual_seed(0)
    # Random operands: all-zero matrices draw less power and run at higher clocks than real data.
    a = torch.randn(n, n, device="cuda", generator=gen).to(dtype)
    b = torch.randn(n, n, device="cuda", generator=gen).to(dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    start = time.perf_counter()
    while time.perf_counter() - start < settle_s:
        for _ in range(10):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
    us = median_gpu_us(lambda: torch.mm(a, b, out=c), warmup=10, repeat=repeat)
    del a, b, c
    torch.cuda.empty_cache()
    return 2 * n**3 / us / 1e6


def measure_copy_tbps(nbytes: int = COPY_BYTES, *, repeat: int = 50) -> float:
    """Median device-to-device copy bandwidth in TB/s, counting bytes read plus bytes written."""
    _require_cuda("the copy bandwidth")
    require_cuda_memory(2 * nbytes, f"the {nbytes / 2**30:.1f} GiB copy ceiling")
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = median_gpu_us(lambda: dst.copy_(src), warmup=5, repeat=repeat)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / us / 1e6


def measure_ceilings() -> dict:
    """Both ceilings, JSON-ready: ``{"gemm_tflops", "copy_tbps", "gemm_n", "copy_bytes", "gemm_dtype"}``."""
    return {
        "gemm_tflops": measure_gemm_tflops(),
        "copy_tbps": measure_copy_tbps(),
        "gemm_n": GEMM_N,
        "copy_bytes": COPY_BYTES,
        "gemm_dtype": "bfloat16",
    }


def compute_floor_us(flops: float, gemm_tflops: float) -> float:
    """Least time for ``flops`` at the measured GEMM rate, in µs."""
    return flops / gemm_tflops / 1e6


def memory_floor_us(nbytes: float, copy_tbps: float) -> float:
    """Least time to move ``nbytes`` (reads plus writes) at the measured copy bandwidth, in µs."""
    return nbytes / copy_tbps / 1e6


def achieved_tflops(flops: float, us: float) -> float:
    """The rate ``flops`` done in ``us`` microseconds amounts to, in TFLOP/s."""
    return flops / us / 1e6


def achieved_fraction(achieved: float, ceiling: float) -> float:
    """``achieved / ceiling`` (e.g. TFLOP/s over the GEMM rate, or floor µs over measured µs)."""
    if not ceiling:
        raise GuideError("a ceiling of zero: measure the ceilings before comparing with them")
    return achieved / ceiling


# ------------------------------------------------------- kernels of a trace
def intermediate_passes(kernel_name: str) -> int | None:
    """Passes over the MLP's ``[rows, hidden]`` intermediate a pointwise kernel makes, from its name.

    GeLU alone reads g and writes gelu(g): 2. A mul reads two tensors and writes
    one: 3. A fused GeLU·mul (Inductor's ``..._gelu_mul_...``, Liger's
    ``_geglu_...``) reads g and u and writes h: 3. None for anything else.
    """
    name = kernel_name.lower()
    if "geglu" in name or ("gelu" in name and "mul" in name):
        return 3
    if "gelu" in name:
        return 2
    if "mul" in name:
        return 3
    return None


def kernel_work_table(trace, *, rows: int, dim: int, hidden: int, element: int, ceilings: dict) -> "pd.DataFrame":
    """Each kernel of one MLP forward against its ceiling: GEMMs in TFLOP/s, pointwise kernels in TB/s.

    Every GEMM of the GeGLU MLP (gate, up, down; or a fused gate/up one) is
    ``2·rows·dim·hidden`` FLOPs per output it computes, whichever library ran
    it: a kernel decoded as a GEMM is counted that way, times 2 when its name
    says it computes gate and up together (``geglu``). A pointwise kernel's
    bytes are its passes over the ``[rows, hidden]`` intermediate
    (:func:`intermediate_passes`) times ``rows·hidden·element``.
    """
    import pandas as pd

    from .kernel_names import decode

    by_name: dict[str, list[float]] = {}
    for step in trace.steps:
        for ev in step.kernels:
            by_name.setdefault(ev.name, []).append(ev.dur_us)
    n_steps = max(len(trace.steps), 1)
    out = []
    for name, durations in by_name.items():
        k = decode(name)
        us = sum(durations) / len(durations)
        row = {"kernel": k.short, "kind": k.kind, "per forward": len(durations) / n_steps, "avg_us": us}
        if k.kind == "gemm":
            flops = 2 * rows * dim * hidden * (2 if "geglu" in name.lower() else 1)
            tflops = flops / us / 1e6
            row |= {"work": f"{flops / 1e9:.1f} GFLOP", "achieved": f"{tflops:.0f} TFLOP/s",
                    "% of ceiling": 100 * tflops / ceilings["gemm_tflops"]}  # fmt: skip
        elif (passes := intermediate_passes(name)) is not None:
            nbytes = passes * rows * hidden * element
            tbps = nbytes / us / 1e6
            row |= {"work": f"{nbytes / 1e6:.0f} MB ({passes} passes)", "achieved": f"{tbps:.2f} TB/s",
                    "% of ceiling": 100 * tbps / ceilings["copy_tbps"]}  # fmt: skip
        else:
            continue
        out.append(row)
    return pd.DataFrame(out)
