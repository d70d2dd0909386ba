"""Run code under ``torch.profiler`` and time it: the only module that touches the profiler.

``profile_to_trace`` writes the Chrome trace that everything else in the guide
reads; ``median_gpu_us`` and friends time a callable with CUDA events so the
numbers on a page are medians of many runs, not one profiled step.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from profiling_guide.errors import GuideError
from profiling_guide.files import atomic_output

# The original write-up's schedule: skip one step, warm up one, record three.
WAIT, WARMUP, ACTIVE = 1, 1, 3


def profile_to_trace(
    step: Callable[[], object],
    trace_path: Path,
    *,
    label: str,
    wait: int = WAIT,
    warmup: int = WARMUP,
    active: int = ACTIVE,
    with_stack: bool = False,
) -> Path:
    """Profile ``step`` for ``wait + warmup + active`` iterations and write the trace.

    Each iteration runs ``step()`` inside ``record_function(label)`` and then
    synchronizes, so every kernel of step *n* finishes inside ProfilerStep#n.
    The trace is written to a temporary file and renamed into place: an
    interrupted run never leaves half a trace behind. ``with_stack`` records
    the Python frames and ``nn.Module`` calls too (``with_stack=True,
    with_modules=True``), for attribution to modules and source lines.
    """
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    trace_path = Path(trace_path)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    # The profiler warns once per process about events it clears between
    # cycles; on a page that would print a stray block of stderr, and the trace
    # is complete either way.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.profiler")
        # and where the warning is attributed to the caller's frame instead:
        warnings.filterwarnings("ignore", message=r".*Profiler clears events", category=UserWarning)
        with profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=active),
            record_shapes=True,
            with_stack=with_stack,
            with_modules=with_stack,
        ) as prof:
            for _ in range(wait + warmup + active):
                with record_function(label):
                    step()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                prof.step()
    # export_chrome_trace gzips when the name ends in .gz
    with atomic_output(trace_path, suffix=".json.gz") as tmp:
        prof.export_chrome_trace(str(tmp))
    return trace_path


def median_gpu_us(step: Callable[[], object], *, warmup: int = 10, repeat: int = 100) -> float:
    """Median device time of one ``step()`` in µs, from a pair of CUDA events per call."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    # noqa below: both lists hold `repeat` events (so at the return too)
    for start, end in zip(starts, ends):  # noqa: B905
        start.record()
        step()
        end.record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))  # noqa: B905 (as above)


def median_rotating_us(fn: Callable, inputs: Sequence[tuple], *, warmup: int = 5, rounds: int = 20) -> float:
    """Median device µs of ``fn(*args)`` cycling through ``inputs``.

    Rotating through several freshly made inputs whose total size exceeds the
    L2 cache keeps a benchmark from timing a warm cache that real use never sees.

    Each round of forwards is queued behind a sleep kernel long enough for the
    CPU to issue the whole round, so the GPU never waits for Python: the events
    time the device's work per forward (kernels and the gaps between them on
    the GPU), not how fast this host can launch. The CPU's cost is a separate
    number (:func:`profiling_guide.measure.timing.cpu_issue_time`); on a slow or busy host it would otherwise
    leak into every variant's time in proportion to how many launches it makes.
    """
    for args in inputs[:warmup]:
        fn(*args)
    # How long the host takes to issue one call, warm: the warm-up again, timed.
    torch.cuda.synchronize()
    start = time.perf_counter()
    for args in inputs[:warmup]:
        fn(*args)
    issue_ms = 1e3 * (time.perf_counter() - start) / len(inputs[:warmup])
    # Events made before timing starts: creating them inside the loop would add
    # the harness's own CPU time to every forward's, and on a slow host that
    # can be enough to let the GPU run dry between forwards.
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(rounds * len(inputs))]
    calls = [args for _ in range(rounds) for args in inputs]
    # Room to issue one round: half again what the host took per call, plus 1 ms, at
    # least 2 ms (at ≤ 2 GHz, 2e6 cycles ≥ 1 ms). The host issues while the GPU sleeps:
    # a longer sleep only keeps the GPU idle longer.
    sleep_cycles = int(2e6 * max(2.0, 1.5 * issue_ms * len(inputs) + 1.0))
    torch.cuda.synchronize()
    # noqa below: both lists hold rounds * len(inputs) entries
    for i, ((start, end), args) in enumerate(zip(pairs, calls)):  # noqa: B905
        if i % len(inputs) == 0:
            torch.cuda._sleep(sleep_cycles)
        start.record()
        fn(*args)
        end.record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(s.elapsed_time(e) for s, e in pairs)


def require_cuda_memory(nbytes: int, what: str) -> None:
    """Fail in one line, before allocating, when ``what`` cannot fit on the GPU."""
    free, total = torch.cuda.mem_get_info()
    if nbytes > free:
        raise GuideError(
            f"{what} needs {nbytes / 2**30:.1f} GiB of GPU memory but only {free / 2**30:.1f} GiB of "
            f"{total / 2**30:.1f} GiB is free: use smaller sizes"
        )


def gpu_facts() -> dict:
    """Name, compute capability and memory of the current GPU."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
    }


def software_versions() -> dict:
    """torch, CUDA, cuBLAS, Triton and Python versions of this process."""
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cublas": _cublaslt_version(),
        "triton": None,
    }
    try:  # Triton is optional (torch's CPU builds come without it)
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    return versions


def _cublaslt_version() -> str | None:
    # cublasLtGetVersion() needs no handle: ask the library torch loaded.
    lib_dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
    try:  # the nvidia-* wheels' libraries, where pip installed CUDA; optional
        import nvidia

        lib_dirs += [os.path.join(p, "*", "lib") for p in nvidia.__path__]
    except ImportError:
        pass
    for pattern in lib_dirs:
        for path in sorted(glob.glob(os.path.join(pattern, "libcublasLt.so*"))):
            try:
                lib = ctypes.CDLL(path)
                lib.cublasLtGetVersion.restype = ctypes.c_size_t
                v = lib.cublasLtGetVersion()
                return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
            except OSError:
                continue
    return None
