"""What a new input shape costs: the first call at each shape against the steady state.

``torch.compile`` specialises its kernels to the shapes it has seen and
compiles again when a new one arrives (unless told ``dynamic=True``); a Triton
kernel such as Liger's is compiled once per value of its ``constexpr``
arguments. :func:`shape_sweep` makes that visible: for each shape in turn, the
wall time of the first call (which pays any compiling), the device time of
the calls after it, and how many compilations the first call caused.

:func:`recompile_in_fresh_process` runs one ``torch.compile`` setting over
the shapes in a process of its own, with empty compiler caches, so no setting
reuses what another compiled before it; :func:`recompile_in_fresh_processes`
runs several such processes, their start-ups side by side and their timed
calls one process at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

import torch

from profiling_guide.errors import GuideError
from profiling_guide.kernels.models import SimpleGeGLUMLP

SETTINGS = {"dynamic=False": False, "default": None, "dynamic=True": True}


def dynamo_graphs_compiled() -> int:
    """How many graphs TorchDynamo has compiled in this process so far."""
    # Lazy: importing TorchDynamo takes seconds, and only this function needs it.
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


# liger-kernel is optional; its import stays in the body also because chapter 4's recordings
# fingerprint this function's code.
def liger_geglu_kernels_compiled() -> int:
    """How many variants of Liger's GeGLU forward kernel (``_geglu_tanh_forward_kernel``) Triton has compiled."""
    from liger_kernel.ops.geglu import _geglu_tanh_forward_kernel

    return triton_kernels_compiled(_geglu_tanh_forward_kernel)()


# Its imports stay in its body: chapters 3 and 4's recordings fingerprint this function's code, and moving them
# would make those recordings stale.
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
        # noqa below: the lambda runs inside this iteration, before x changes
        steady = device_time(lambda: forward(x), [()] * 8, repeats=5, rounds=5)  # noqa: B023
        row |= {"device_us": steady.median, "device_us_q1": steady.q1, "device_us_q3": steady.q3}
        rows.append(row)
        if progress:
            progress(f"  shape {row['shape']}: first call {first_ms:,.1f} ms, device {steady:.1f} µs")
    return rows


def _fresh_cache_env(cache: str) -> dict:
    """This process's environment for a child whose compiles start from nothing: an empty cache folder."""
    return os.environ | {"TORCHINDUCTOR_CACHE_DIR": cache, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
                         "TORCHINDUCTOR_AUTOGRAD_CACHE": "0", "TRITON_CACHE_DIR": os.path.join(cache, "triton")}


def _child_command(setting: str, shapes: Sequence[tuple[int, ...]], hidden: int, dtype: str,
                   wait_for_turn: bool) -> list[str]:
    cmd = [sys.executable, "-m", "profiling_guide.measure.shape_sweeps", "--setting", setting,
           "--hidden", str(hidden), "--dtype", dtype, "--shapes", ";".join(",".join(map(str, s)) for s in shapes)]
    return cmd + (["--wait-for-turn"] if wait_for_turn else [])


def _child_error(setting: str, stderr: str) -> str:
    last = (stderr.strip().splitlines() or ["no output"])[-1]
    return f"the {setting} recompilation run failed: {last}"


def recompile_in_fresh_process(setting: str, shapes: Sequence[tuple[int, ...]], hidden: int, *,
                               dtype: str = "bfloat16", timeout_s: float = 600) -> list[dict]:
    """:func:`shape_sweep` of ``torch.compile(SimpleGeGLUMLP, dynamic=...)`` in a new Python process.

    The child gets an empty Inductor cache folder and Inductor's FX-graph and
    autograd caches off, so its first calls pay every compile in full, as a
    user's first run would.
    """
    return recompile_in_fresh_processes([setting], shapes, hidden, dtype=dtype, side_by_side=False,
                                        timeout_s=timeout_s)[setting]


def recompile_in_fresh_processes(settings: Sequence[str], shapes: Sequence[tuple[int, ...]], hidden: int, *,
                                 dtype: str = "bfloat16", side_by_side: bool = True,
                                 timeout_s: float = 600) -> dict[str, list[dict]]:
    """:func:`recompile_in_fresh_process` for each setting: ``{setting: rows}``, rows in the order they ran.

    Side by side, the children start together: each starts Python, imports
    torch, makes its CUDA context and builds its model, then waits. When all
    are ready they take turns: one runs its shapes and exits, then the next.
    So no child's first calls or timings overlap another's compiles, GPU work,
    start-up or exit; only the start-ups, which are never timed, run at once.
    ``side_by_side=False`` runs each child from start to exit, one after another.
    """
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise GuideError(f"unknown compile setting {unknown[0]!r}: use one of {', '.join(SETTINGS)}")
    with tempfile.TemporaryDirectory(prefix="recompile-") as tmp:
        jobs, results = {}, {}

        def start(setting: str) -> None:
            cache = os.path.join(tmp, setting)
            os.makedirs(cache)
            # stderr to a file, not a pipe: a child that writes much to a pipe nobody reads would block
            err = open(os.path.join(tmp, f"{setting}.err"), "w+")
            job = subprocess.Popen(_child_command(setting, shapes, hidden, dtype, side_by_side),
                                   env=_fresh_cache_env(cache), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=err, text=True)
            jobs[setting] = (job, err)

        def stderr_of(setting: str) -> str:
            err = jobs[setting][1]
            err.seek(0)
            return err.read()

        def finish(setting: str) -> None:
            job = jobs[setting][0]
            try:
                stdout, _ = job.communicate("go\n" if side_by_side else None, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise GuideError(f"the {setting} recompilation run took over {timeout_s:.0f} s") from None
            if job.returncode != 0:
                raise GuideError(_child_error(setting, stderr_of(setting)))
            results[setting] = json.loads(stdout.strip().splitlines()[-1])

        try:
            for setting in settings:
                start(setting)
                if not side_by_side:
                    finish(setting)
            if side_by_side:
                for setting in settings:  # every start-up done before the first turn
                    job = jobs[setting][0]
                    if not select.select([job.stdout], [], [], timeout_s)[0]:
                        raise GuideError(f"the {setting} recompilation run did not start within {timeout_s:.0f} s")
                    if job.stdout.readline().strip() != "ready":
                        job.wait()
                        raise GuideError(_child_error(setting, stderr_of(setting)))
                for setting in settings:
                    finish(setting)
        finally:
            for job, err in jobs.values():
                if job.poll() is None:
                    job.kill()
                    job.wait()
                err.close()
    return results


def _child(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="one torch.compile setting over several shapes (a fresh process)")
    p.add_argument("--setting", choices=list(SETTINGS), required=True)
    p.add_argument("--shapes", required=True, help="'B,S,D;B,S,D;...'")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--wait-for-turn", action="store_true",
                   help="once the model is built, print 'ready' and wait for a line on stdin before the first call")
    args = p.parse_args(argv)
    shapes = [tuple(int(n) for n in s.split(",")) for s in args.shapes.split(";")]
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(shapes[0][-1], args.hidden, device="cuda", dtype=dtype)
    model = torch.compile(mlp, dynamic=SETTINGS[args.setting])
    torch.cuda.synchronize()
    if args.wait_for_turn:
        print("ready", flush=True)
        sys.stdin.readline()
    with torch.no_grad():
        rows = shape_sweep(model, shapes, dtype=dtype, compiles=dynamo_graphs_compiled)
    print(json.dumps(rows), flush=True)
    sys.stderr.flush()
    # Skip the interpreter's teardown (the compile workers' shutdown, atexit hooks): the
    # result is out, and the next process's turn starts only once this one has exited.
    os._exit(0)


if __name__ == "__main__":
    _child()
