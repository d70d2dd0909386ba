"""How fast, and in how much memory, a large trace loads: Trace.load against json.load.

The trace is synthetic but shaped like a ``torch.profiler`` export of many
MLP forwards: ``ProfilerStep#N`` and ``record_function`` annotations, nested
``aten::`` ops with recorded shapes, runtime and driver launches with
correlation ids, the kernels and memsets they start on a GPU stream, and the
flow events that link them. Each load runs in a fresh Python process, so its
peak resident memory (``ru_maxrss``, less what the process held before
loading) is its own.

Command line::

    profiling-guide bench-load [--events 2000000] [--runs 3] [--keep trace.json]
    python -m profiling_guide.measure.bench_load ...
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from profiling_guide.files import atomic_output, check_writable

# One layer of the MLP: (op, nested ops, what it launches). Launches: (runtime call, device category, name).
_GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
_GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
         "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
         "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, ...)")
_MUL = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
        "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >(...)")
_KERNEL_ARGS = ('"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {corr}, '
                '"registers per thread": 168, "shared memory": 213188, "blocks per SM": 1.0, "warps per SM": 12.0, '
                '"grid": [2, 66, 1], "block": [384, 1, 1], "est. achieved occupancy %": 0')
_SHAPES = ('"Concrete Inputs": ["", "", ""], "Input type": ["c10::BFloat16", "c10::BFloat16", ""], '
           '"Input Strides": [[98304, 768, 1], [768, 1], []], "Input Dims": [[64, 128, 768], [3072, 768], []]')
_HEADER = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929347584,
                          "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
    "record_shapes": 1,
    "cuda_runtime_version": 13000,
    "displayTimeUnit": "ms",
    "baseTimeNanoseconds": 1759000000000000000,
}
PID, TID, STREAM = 463, 463, 7


class _Writer:
    """Writes events as torch.profiler does (one object per line), counting them."""

    def __init__(self, f, seed: int):
        self.f = f
        self.count = 0
        self.external = 1000
        self.correlation = 20000
        self.rng = random.Random(seed)
        self.first = True

    def emit(self, text: str) -> None:
        self.f.write(("\n  " if self.first else ",\n  ") + text)
        self.first = False
        self.count += 1

    def x(self, cat: str, name: str, ts: float, dur: float, args: str, pid=PID, tid=TID) -> None:
        self.emit(f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
                  f'"ts": {ts:.3f}, "dur": {dur:.3f}, "args": {{{args}}}}}')

    def op(self, name: str, ts: float, dur: float, shapes: bool = False) -> None:
        self.external += 1
        args = f'"External id": {self.external}, "Record function id": 0, "Ev Idx": {self.count % 4096}'
        self.x("cpu_op", name, ts, dur, args + (", " + _SHAPES if shapes else ""))

    def launch(self, call: str, cat: str, device_cat: str, kernel: str, ts: float, gpu_ts: float) -> float:
        """A runtime call at ``ts`` and the device work it starts at ``gpu_ts``; returns the work's end."""
        self.correlation += 1
        corr, ext = self.correlation, self.external
        dur = 4 + 20 * self.rng.random()
        self.x(cat, call, ts, dur, f'"External id": {ext}, "cbid": 652, "correlation": {corr}')
        self.emit(f'{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {TID}, "ts": {ts:.3f}, "cat": "ac2g", "name": "ac2g"}}')
        gpu_dur = 1 + 60 * self.rng.random()
        args = f'"External id": {ext}, ' + (_KERNEL_ARGS.format(corr=corr) if device_cat == "kernel" else
                                              f'"device": 0, "context": 1, "stream": {STREAM}, "correlation": {corr}, "bytes": 4')
        self.x(device_cat, kernel, gpu_ts, gpu_dur, args, pid=0, tid=STREAM)
        self.emit(f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": {STREAM}, "ts": {gpu_ts:.3f}, "cat": "ac2g", '
                  f'"name": "ac2g", "bp": "e"}}')
        return gpu_ts + gpu_dur


def _layer(w: _Writer, t: float, gpu_t: float) -> tuple[float, float]:
    """aten::linear(t, addmm(memset, gemm)), aten::gelu, aten::mul: 23 events. Returns the CPU and GPU clocks."""
    start = t
    t += 2
    w.op("aten::t", t, 6, shapes=True)
    w.op("aten::transpose", t + 1, 4)
    w.op("aten::as_strided", t + 2, 1.5)
    t += 8
    addmm = t
    gpu_t = w.launch("cudaMemsetAsync", "cuda_runtime", "gpu_memset", "Memset (Device)", t + 5, max(gpu_t, t + 10)) + 1
    gpu_t = w.launch("cuLaunchKernelEx", "cuda_driver", "kernel", _GEMM, t + 30, max(gpu_t, t + 40)) + 1
    t += 60
    w.op("aten::addmm", addmm, t - addmm, shapes=True)
    w.op("aten::linear", start, t + 2 - start, shapes=True)
    t += 4
    for op, kernel in (("aten::gelu", _GELU), ("aten::mul", _MUL)):
        gpu_t = w.launch("cudaLaunchKernel", "cuda_runtime", "kernel", kernel, t + 3, max(gpu_t, t + 12)) + 1
        w.op(op, t, 30, shapes=True)
        t += 32
    return t, gpu_t


def write_synthetic_trace(path: str | Path, events: int = 2_000_000, *, layers: int = 8, seed: int = 0) -> int:
    """Write a torch.profiler-shaped trace of about ``events`` events to ``path``; return how many."""
    per_step = 3 + 23 * layers
    steps = max(1, round(events / per_step))
    with atomic_output(path, suffix=".json") as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("{\n" + "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in _HEADER.items()) + '  "traceEvents": [')
        w = _Writer(f, seed)
        t = gpu_t = 4574373018813.972
        for number in range(steps):
            step_start = t
            t += 10
            label_start = t
            for _ in range(layers):
                t, gpu_t = _layer(w, t, gpu_t)
            w.x("user_annotation", "mlp_fwd", label_start, t - label_start, '"External id": 1, "Record function id": 0')
            w.x("gpu_user_annotation", "mlp_fwd", label_start + 10, gpu_t - label_start - 10, '"External id": 1',
                pid=0, tid=STREAM)
            t = max(t, gpu_t) + 5  # synchronize
            w.x("user_annotation", f"ProfilerStep#{number}", step_start, t - step_start,
                '"External id": 0, "Record function id": 0, "Ev Idx": 0')
            t += 20
        f.write(f'\n  ],\n  "traceName": {json.dumps(str(path))}\n}}\n')
    return w.count


_MEASURE = r"""
import json, resource, sys, time
path, how = sys.argv[1], sys.argv[2]
if how == "trace":
    from profiling_guide.trace.model import Trace
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if how == "trace":
    result = Trace.load(path)
else:
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_bytes": (peak - before) * 1024}))
"""


def measure(path: str | Path, how: str) -> dict:
    """One load in a fresh process: ``how`` is ``"trace"`` (Trace.load) or ``"json"`` (json.load)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                         os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path), how], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout)


def run(events: int, runs: int, keep: Path | None, progress=print) -> dict:
    """Write the trace, load it ``runs`` times each way; medians and ratios as a dict."""
    with tempfile.TemporaryDirectory() as tmp:
        path = keep or Path(tmp) / "synthetic.trace.json"
        count = write_synthetic_trace(path, events)
        size = Path(path).stat().st_size
        progress(f"{path}: {count:,} events, {size / 2**20:,.0f} MiB")
        results: dict[str, list[dict]] = {"json": [], "trace": []}
        for i in range(runs):
            for how in ("json", "trace"):
                results[how].append(measure(path, how))
                r = results[how][-1]
                progress(f"  run {i + 1} {how + '.load':<11} {r['seconds']:7.2f} s  {r['peak_bytes'] / 2**20:8,.0f} MiB")
    med = {how: {key: statistics.median(r[key] for r in rs) for key in ("seconds", "peak_bytes")}
           for how, rs in results.items()}
    return {
        "events": count,
        "file_bytes": size,
        "runs": runs,
        "json_load": med["json"],
        "trace_load": med["trace"],
        "time_vs_json_load": _ratio(med["trace"]["seconds"], med["json"]["seconds"]),
        "memory_vs_json_load": _ratio(med["trace"]["peak_bytes"], med["json"]["peak_bytes"]),
        "memory_vs_file": _ratio(med["trace"]["peak_bytes"], size),
    }


def _ratio(a: float, b: float) -> float | None:
    # A small trace may not raise the process's peak at all.
    return a / b if b else None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 0 < value <= 10**9:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 10**9, got {text[:40]!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="profiling-guide bench-load", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=_count, default=2_000_000, help="events in the synthetic trace (default 2,000,000)")
    p.add_argument("--runs", type=_count, default=3, help="loads of each kind; medians are reported (default 3)")
    p.add_argument("--keep", type=Path, default=None, metavar="TRACE.json", help="write the trace here and keep it")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.keep is not None:
        check_writable(args.keep)  # before minutes of writing and loading
    report = run(args.events, args.runs, args.keep, progress=(lambda line: None) if args.json else print)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    j, t = report["json_load"], report["trace_load"]
    print(f"\nmedian of {report['runs']} runs, {report['events']:,} events, {report['file_bytes'] / 2**20:,.0f} MiB of JSON")
    print(f"  json.load   {j['seconds']:7.2f} s  peak {j['peak_bytes'] / 2**20:8,.0f} MiB")
    print(f"  Trace.load  {t['seconds']:7.2f} s  peak {t['peak_bytes'] / 2**20:8,.0f} MiB")
    ratios = {k: "?" if report[k] is None else f"{report[k]:.2f}" for k in report if "_vs_" in k}
    print(f"  Trace.load / json.load: {ratios['time_vs_json_load']}× the time, "
          f"{ratios['memory_vs_json_load']}× the memory ({ratios['memory_vs_file']}× the file's size)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
