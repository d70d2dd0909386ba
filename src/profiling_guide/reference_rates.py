"""Reference rates of the GPU at hand, each measured several times: what ``profile`` compares kernels with.

A kernel's achieved TFLOP/s or TB/s means little alone; next to what the same
GPU reaches with the best code there is, it becomes a fraction. Two
references, from :mod:`profiling_guide.roofline`:

* a settled 8192³ bf16 cuBLAS GEMM, in TFLOP/s;
* a 1 GiB device-to-device copy, in TB/s (bytes read plus bytes written).

Each is measured ``repeats`` times (each time the median of many runs) and
reported as the median of those, with the lowest, the highest and the spread,
so a noisy GPU shows as a wide spread instead of a wrong number. This is the
only part of ``profile`` besides the profiler itself that touches CUDA.
"""

from __future__ import annotations

import statistics

from .roofline import COPY_BYTES, GEMM_N, SETTLE_S, measure_copy_tbps, measure_gemm_tflops

REPEATS = 5


def _summary(runs: list[float]) -> dict:
    median = statistics.median(runs)
    return {"median": median, "min": min(runs), "max": max(runs),
            "spread": (max(runs) - min(runs)) / median if median else 0.0, "runs": runs}


def measure_reference_rates(repeats: int = REPEATS) -> dict:
    """Both reference rates, JSON-ready.

    Returns ``{"gemm_tflops": {"median", "min", "max", "spread", "runs"},
    "copy_tbps": {...}, "gemm_n", "gemm_dtype", "copy_bytes", "repeats"}``;
    :func:`~profiling_guide.trace_report.rates_from_record` reads the medians.
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    # The first GEMM measurement settles the clock for SETTLE_S; the GPU stays
    # at that clock between the repeats, so they settle briefly.
    gemm = [measure_gemm_tflops(repeat=20, settle_s=SETTLE_S if i == 0 else 0.1) for i in range(repeats)]
    copy = [measure_copy_tbps(repeat=20) for _ in range(repeats)]
    return {"gemm_tflops": _summary(gemm), "copy_tbps": _summary(copy), "gemm_n": GEMM_N, "gemm_dtype": "bfloat16",
            "copy_bytes": COPY_BYTES, "repeats": repeats}
