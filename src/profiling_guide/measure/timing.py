"""Timings with their spread, and the reference rates every page compares against.

Three quantities, one method each, and a label that says which:

* **device time** (:func:`device_time`): µs the GPU spends per call, with its
  queue kept full so the host's speed does not leak in;
* **CPU issue time** (:func:`cpu_issue_time`): µs the host spends issuing one
  call, with the profiler off and the GPU drained between calls;
* **wall time per call** (:func:`wall_time_per_call`): one call at a time,
  synchronized; whichever of host or device is slower sets it.

Each is measured as several *repeats* (each the median of many calls) and
reported as a :class:`Spread`: the median of the repeats and their
interquartile range. :func:`compare` calls one time faster than another only
when the two ranges do not overlap; otherwise it is a tie.

:func:`reference_rates` measures the GEMM rate and the copy bandwidth once per
process, so every number of a page (and of every page in one docs build)
divides by the same reference.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch

from profiling_guide.errors import GuideError
from profiling_guide.measure.capture import (
    median_gpu_us,
    median_rotating_us,
    require_cuda_memory,
)
from profiling_guide.spread import Spread

REPEATS = 7  # repeats behind every spread: enough for a quartile to mean something


# ------------------------------------------------------------------ timing
def cost_key(variant: str, args: dict) -> tuple:
    """What makes two CPU-cost measurements the same: the variant and the workload's sizes."""
    return (variant, *(args.get(k) for k in ("batch", "seq", "dim", "hidden", "in_dim", "out_dim", "dtype")))


def device_time(fn: Callable, inputs: Sequence[tuple], *, repeats: int = REPEATS, rounds: int = 20) -> Spread:
    """Device µs per ``fn(*args)``, the GPU's queue kept full: a :class:`Spread` over ``repeats``.

    Each repeat is :func:`~profiling_guide.measure.capture.median_rotating_us`: rounds
    of calls queued behind a sleep kernel, cycling through ``inputs``.
    """
    return Spread.of([median_rotating_us(fn, inputs, rounds=rounds) for _ in range(repeats)])


def device_times(candidates: dict[str, tuple[Callable, Sequence[tuple]]], *, repeats: int = REPEATS,
                 rounds: int = 20, progress: Callable[[str], object] | None = None) -> dict[str, Spread]:
    """:func:`device_time` of each candidate (name → ``(fn, inputs)``), the repeats interleaved: name → Spread.

    Each repeat times every candidate once, in order, so a drift of the
    GPU's clocks or temperature over the run falls on all of them alike, not
    on whichever ran last. ``progress`` hears one line per repeat.
    """
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for r in range(repeats):
        for name, (fn, inputs) in candidates.items():
            samples[name].append(median_rotating_us(fn, inputs, rounds=rounds))
        if progress is not None:
            progress(f"repeat {r + 1}/{repeats}")
    return {name: Spread.of(xs) for name, xs in samples.items()}


_CPU_ISSUE_CACHE: dict[tuple, Spread] = {}


def cpu_issue_time(fn: Callable[[], object], *, key: tuple | None = None, repeats: int = REPEATS,
                   calls: int = 50) -> Spread:
    """Host µs to issue one ``fn()``, profiler off: a :class:`Spread` over ``repeats`` of ``calls`` calls.

    The GPU is drained before each call, outside the timed interval, so the
    number is the CPU's work alone (Python, the dispatcher, the launches).
    With a ``key`` the result is kept for the rest of the process: every page
    of one docs build then quotes the same figure for the same forward.
    """
    if key is not None and key in _CPU_ISSUE_CACHE:
        return _CPU_ISSUE_CACHE[key]
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def one_call() -> float:
        sync()  # outside the interval: the GPU's backlog is not the host's cost
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    spread = _host_spread(fn, one_call, repeats, calls)
    sync()
    if key is not None:
        _CPU_ISSUE_CACHE[key] = spread
    return spread


def wall_time_per_call(fn: Callable[[], object], *, repeats: int = REPEATS, calls: int = 50) -> Spread:
    """µs from the start of one ``fn()`` until the GPU has finished it, one call at a time.

    This is what a caller that waits for each result sees: host-paced for
    small work, device-paced for large. Not a device time.
    """
    def one_call() -> float:
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    return _host_spread(fn, one_call, repeats, calls)


def _host_spread(fn: Callable[[], object], one_call: Callable[[], float], repeats: int, calls: int) -> Spread:
    """Warm ``fn`` up, then ``repeats`` medians of ``calls`` host-timed calls (seconds → µs) as a spread."""
    for _ in range(10):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # the warm-up's backlog is no call's time
    return Spread.of([1e6 * statistics.median(one_call() for _ in range(calls)) for _ in range(repeats)])


# ------------------------------------------------------------ reference rates
GEMM_N = 8192
SETTLE_S = 0.5  # seconds of GEMMs before the GEMM rate is timed
COPY_SIZES = (1 << 28, 1 << 30)  # bytes per copy tried: 256 MiB and 1 GiB


def _require_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise GuideError(f"measuring {what} needs a CUDA GPU and none is visible")


def _settle(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, seconds: float) -> None:
    # A GPU fresh from idle runs at its boost clock for tens of milliseconds,
    # then slows as it reaches its power limit: time the rate it sustains.
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            torch.mm(a, b, out=out)
        torch.cuda.synchronize()


def _gemm_candidates(shapes: Sequence[tuple[int, int, int]], dtype: torch.dtype, repeats: int) -> dict:
    """TFLOP/s of cuBLAS on the square GEMM and on each (M, K, N), as spreads, timed like the benchmark."""
    size = torch.empty((), dtype=dtype).element_size()
    require_cuda_memory(3 * GEMM_N * GEMM_N * size, f"the {GEMM_N}³ GEMM reference")
    gen = torch.Generator(device="cuda").manual_seed(0)
    # Random operands: all-zero matrices draw less power and run at higher clocks than real data.
    a = torch.randn(GEMM_N, GEMM_N, device="cuda", generator=gen).to(dtype)
    b = torch.randn(GEMM_N, GEMM_N, device="cuda", generator=gen).to(dtype)
    c = torch.empty(GEMM_N, GEMM_N, device="cuda", dtype=dtype)
    _settle(a, b, c, SETTLE_S)
    # Each product takes over a millisecond: the host stays ahead of the GPU without help.
    # noqa below: the lambda runs before the `del` that follows
    square = Spread.of([median_gpu_us(lambda: torch.mm(a, b, out=c), warmup=3, repeat=20) for _ in range(repeats)])  # noqa: F821
    out = {f"{GEMM_N}³": square.inverse(2 * GEMM_N**3 / 1e6)}
    del a, b, c
    for m, k, n in dict.fromkeys(shapes):
        # Operands rotated through at least twice the L2 cache, as the benchmark rotates its inputs.
        x_bytes = m * k * size
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 * 2**20
        count = max(3, min(64, -(-2 * l2 // x_bytes)))
        require_cuda_memory(count * x_bytes + (k * n + m * n) * size, f"the {m}·{k}·{n} GEMM reference")
        w = torch.randn(n, k, device="cuda", generator=gen).to(dtype)
        xs = [(torch.randn(m, k, device="cuda", generator=gen).to(dtype),) for _ in range(count)]
        # noqa below: the lambda runs inside this iteration, before the `del` that ends it
        spread = device_time(lambda x: torch.nn.functional.linear(x, w), xs, repeats=repeats, rounds=10)  # noqa: B023, F821
        out[f"{m}·{k}·{n}"] = spread.inverse(2 * m * k * n / 1e6)
        del w, xs
    torch.cuda.empty_cache()
    return out


def _copy_candidates(repeats: int) -> dict:
    """TB/s of device-to-device copies (bytes read plus bytes written), as spreads."""
    out = {}
    for nbytes in COPY_SIZES:
        require_cuda_memory(2 * nbytes, f"the {nbytes / 2**30:g} GiB copy reference")
        src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        # noqa below: the lambda runs inside this iteration, before the `del` that ends it
        spread = Spread.of([median_gpu_us(lambda: dst.copy_(src), warmup=3, repeat=20) for _ in range(repeats)])  # noqa: B023, F821
        out[f"{nbytes / 2**30:g} GiB copy"] = spread.inverse(2 * nbytes / 1e6)
        del src, dst
    torch.cuda.empty_cache()
    return out


def _best(candidates: dict) -> dict:
    label = max(candidates, key=lambda k: candidates[k].median)
    best = candidates[label]
    return {"rate": best.median, "spread": best.to_dict(), "source": label,
            "candidates": {k: v.to_dict() for k, v in candidates.items()}}


_REFERENCE_CACHE: dict[tuple, dict] = {}


# Its imports stay in its body: the chapters' reference-rate recordings fingerprint this function's
# code, and moving them would make those recordings stale.
def reference_rates(gemm_shapes: Sequence[tuple[int, int, int]] = (), *, dtype: torch.dtype = torch.bfloat16,
                    repeats: int = REPEATS) -> dict:
    """The GEMM and copy reference rates of this GPU, measured once per process; JSON-ready.

    ``gemm``: the best cuBLAS rate (TFLOP/s) seen over the settled ``8192³``
    product and each ``(M, K, N)`` of ``gemm_shapes``, each a median of
    ``repeats`` repeats; ``copy``: the best device-to-device copy bandwidth
    (TB/s) of the sizes tried; ``datasheet``: the vendor's peaks for this GPU
    (None where the name is not in :data:`~profiling_guide.analysis.roofline.DATASHEETS`).
    Each has its ``spread`` and every candidate it was chosen from. A page
    compares its kernels with these, and only calls the datasheet peaks a
    *ceiling*: a measured rate is a reference, which a kernel can beat.
    """
    _require_cuda("the reference rates")
    from profiling_guide.analysis.roofline import datasheet_for

    key = (tuple(gemm_shapes), dtype, repeats)
    if key not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[key] = {
            "gemm_tflops": _best(_gemm_candidates(gemm_shapes, dtype, repeats)),
            "copy_tbps": _best(_copy_candidates(repeats)),
            "datasheet": datasheet_for(torch.cuda.get_device_name()),
            "dtype": str(dtype).removeprefix("torch."),
            "method": f"median of {repeats} repeats, GPU queue kept full, operands rotated through 2× the L2",
        }
    return _REFERENCE_CACHE[key]
