"""What a new input shape costs: the first call at each shape against the steady state.

``torch.compile`` specialises its kernels to the shapes it has seen and
compiles again when a new one arrives (unless told ``dynamic=True``); a Triton
kernel such as Liger's is compiled once per value of its ``constexpr``
arguments. :func:`shape_sweep` makes that visible: for each shape in turn, the
wall time of the first call (which pays any compiling), the device time of
the calls after it, and how many compilations the first call caused.

:func:`recompile_in_fresh_process` runs one ``torch.compile`` setting over
the shapes in a process of its own, with empty compiler caches, so no setting
reuses what another compiled before it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

import torch

from profiling_guide.errors import GuideError

SETTINGS = {"dynamic=False": False, "default": None, "dynamic=True": True}


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


def liger_geglu_kernels_compiled() -> int:
    """How many variants of Liger's GeGLU forward kernel (``_geglu_tanh_forward_kernel``) Triton has compiled."""
    from liger_kernel.ops.geglu import _geglu_tanh_forward_kernel

    return triton_kernels_compiled(_geglu_tanh_forward_kernel)()


def shape_sweep(
    forward: Callable[[torch.Tensor], object],
    shapes: Sequence[tuple[int, ...]],
    *,
    dtype: torch.dtype,
    compiles: Callable[[], int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Call ``forward`` on a fresh input of each shape, in order; time first and steady calls.

    Returns one row per shape, in the order they ran: ``shape``,
    ``first_call_ms`` (wall time of the first call, synchronized, compiling
    included), ``compilations`` (with a ``compiles`` counter: how many the
    first call caused) and ``device_us`` / ``device_us_q1`` / ``device_us_q3``
    (device time per call afterwards, the GPU's queue kept full).
    """
    from profiling_guide.measure.timing import device_time

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
        steady = device_time(lambda: forward(x), [()] * 8, repeats=5, rounds=5)
        row |= {"device_us": steady.median, "device_us_q1": steady.q1, "device_us_q3": steady.q3}
        rows.append(row)
        if progress:
            progress(f"  shape {row['shape']}: first call {first_ms:,.1f} ms, device {steady:.1f} µs")
    return rows


def recompile_in_fresh_process(setting: str, shapes: Sequence[tuple[int, ...]], hidden: int, *,
                               dtype: str = "bfloat16", timeout_s: float = 600) -> list[dict]:
    """:func:`shape_sweep` of ``torch.compile(SimpleGeGLUMLP, dynamic=...)`` in a new Python process.

    The child gets an empty Inductor cache folder and Inductor's FX-graph and
    autograd caches off, so its first calls pay every compile in full, as a
    user's first run would.
    """
    if setting not in SETTINGS:
        raise GuideError(f"unknown compile setting {setting!r}: use one of {', '.join(SETTINGS)}")
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": cache, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
                            "TORCHINDUCTOR_AUTOGRAD_CACHE": "0", "TRITON_CACHE_DIR": os.path.join(cache, "triton")}
        cmd = [sys.executable, "-m", "profiling_guide.measure.sweep", "--setting", setting, "--hidden", str(hidden),
               "--dtype", dtype, "--shapes", ";".join(",".join(map(str, s)) for s in shapes)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise GuideError(f"the {setting} recompilation run failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child(argv: Sequence[str] | None = None) -> None:
    from profiling_guide.kernels.models import SimpleGeGLUMLP

    p = argparse.ArgumentParser(description="one torch.compile setting over several shapes (a fresh process)")
    p.add_argument("--setting", choices=list(SETTINGS), required=True)
    p.add_argument("--shapes", required=True, help="'B,S,D;B,S,D;...'")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args(argv)
    shapes = [tuple(int(n) for n in s.split(",")) for s in args.shapes.split(";")]
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(shapes[0][-1], args.hidden, device="cuda", dtype=dtype)
    model = torch.compile(mlp, dynamic=SETTINGS[args.setting])
    with torch.no_grad():
        rows = shape_sweep(model, shapes, dtype=dtype, compiles=dynamo_graphs_compiled)
    print(json.dumps(rows))


if __name__ == "__main__":
    _child()
