"""What a new input shape costs: the first call at each shape against the steady state.

``torch.compile`` specialises its kernels to the shapes it has seen and
compiles again when a new one arrives (unless told ``dynamic=True``); a Triton
kernel such as Liger's is compiled once per value of its ``constexpr``
arguments. :func:`shape_sweep` makes that visible: for each shape in turn, the
wall time of the first call (which pays any compiling) and the median of the
calls after it, plus how many compilations the first call caused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from .capture import median_gpu_us


def dynamo_graphs_compiled() -> int:
    """How many graphs TorchDynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def triton_kernels_compiled(jit_function) -> Callable[[], int]:
    """A counter of the compiled variants a Triton ``@jit`` function holds (all devices)."""
    def count() -> int:
        cache = getattr(jit_function, "device_caches", None)
        if cache is not None:  # Triton >= 3.2: {device: (kernel_cache, ...)}
            return sum(len(entry[0]) for entry in cache.values())
        return sum(len(c) for c in getattr(jit_function, "cache", {}).values())
    return count


def shape_sweep(
    forward: Callable[[torch.Tensor], object],
    shapes: Sequence[tuple[int, ...]],
    *,
    dtype: torch.dtype,
    compiles: Callable[[], int] | None = None,
    progress: Callable[[str], None] | None = print,
) -> list[dict]:
    """Call ``forward`` on a fresh input of each shape, in order; time first and steady calls.

    Returns one row per shape: ``shape``, ``first_call_ms`` (wall, synchronized),
    ``steady_us`` (median GPU µs afterwards) and, with a ``compiles`` counter,
    ``compilations`` (how many the first call caused).
    """
    rows = []
    for shape in shapes:
        x = torch.randn(*shape, device="cuda", dtype=dtype)
        before = compiles() if compiles else None
        torch.cuda.synchronize()
        start = time.perf_counter()
        forward(x)
        torch.cuda.synchronize()
        first_ms = 1e3 * (time.perf_counter() - start)
        row = {"shape": "×".join(map(str, shape)), "first_call_ms": first_ms}
        if compiles:
            row["compilations"] = compiles() - before
        row["steady_us"] = median_gpu_us(lambda: forward(x), warmup=3, repeat=30)
        rows.append(row)
        if progress:
            progress(f"  shape {row['shape']}: first call {first_ms:,.1f} ms, steady {row['steady_us']:.1f} µs")
    return rows
