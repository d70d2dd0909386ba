"""Inside the gate/up kernels: Nsight Compute's counters, and Proton's timeline of the ping-pong kernel.

The profiler's trace says how long a kernel ran; it cannot say why. Nsight
Compute (``ncu``) replays each kernel and reads the SM's hardware counters:
how many cycles the tensor pipe was busy, how many bytes went through L2 and
DRAM, how many warps were resident. :func:`measure_with_ncu` runs one
workload (:func:`workload`: each kernel once, after a warm-up, inside an NVTX
range) under ``ncu`` in a child process and returns, per kernel, the metrics
that this ``ncu`` knows of :data:`METRICS`, with their units.

Kernels measured, in launch order (the ``label`` of each row): cuBLAS's gate
GEMM and up GEMM (``x @ Wg.T``, ``x @ Wu.T``), our ``packed-tma`` Triton
kernel, our ``pingpong`` Gluon kernel with two consumer warpgroups, and the
same kernel with one (the ping-pong schedule taken away, all else equal).

Nsight Compute locks the GPU's clocks at their base frequency while it
measures (its default ``--clock-control base``), so its durations are longer
than the benchmark's and are compared with each other, not with it.

:func:`proton_phases` looks inside one kernel instead: the ping-pong kernel
marks two scopes in each consumer warpgroup (``"mma"`` around its K loop,
``"epilogue"`` around the GeLU·mul and the store of h), which compile to
nothing unless Proton's instrumentation (``triton.profiler``, shipped with
Triton) is on. In a child process it is: Proton records the SM's cycle
counter at each scope's entry and exit, for the first warp of each consumer,
in every program, and this module turns its Chrome trace into each
program's phases (:func:`scope_intervals`) and the share of the kernel's
time in which 2, 1 or 0 consumers were in their K loop (:func:`phase_shares`).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

import pandas as pd

from profiling_guide.errors import GuideError

# What is asked of ncu, where it knows the metric (base name before the first "."), with the
# column counter_table shows it in and the factor from ncu's base unit to the column's.
METRICS = {
    "gpu__time_duration.sum": ("ncu µs", 1e-3),  # ns
    # the tensor pipe's share of active cycles: the "hmma" metric counts Hopper's wgmma too;
    # an ncu that offers the wgmma-only "gmma" one gets its own column
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": ("tensor busy %", 1.0),
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": ("wgmma pipe busy %", 1.0),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("occupancy %", 1.0),  # achieved occupancy
    "lts__t_bytes.sum": ("L2 MB", 1e-6),
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": ("L2 busy %", 1.0),
    "dram__bytes_read.sum": ("DRAM read MB", 1e-6),
    "dram__bytes_write.sum": ("DRAM write MB", 1e-6),
}
LABELS = ("cuBLAS gate GEMM", "cuBLAS up GEMM", "packed-tma", "pingpong", "pingpong, one consumer")
NVTX_RANGE = "inside"


def find_ncu() -> str:
    """The ``ncu`` executable: on PATH, or in the CUDA toolkit's usual places; one actionable line if none."""
    for candidate in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu", os.path.join(os.environ.get("CUDA_HOME", "/nonexistent"), "bin", "ncu")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise GuideError("Nsight Compute (ncu) is not on PATH nor in /usr/local/cuda/bin: install it with the CUDA "
                     "toolkit, or build the docs in replay mode")  # fmt: skip


def known_metrics(ncu: str) -> set[str]:
    """The base metric names this ``ncu`` knows on this GPU (``ncu --query-metrics``)."""
    out = _run([ncu, "--query-metrics", "--csv"], "list its metrics")
    names = set()
    for row in csv.reader(io.StringIO(out)):
        if row and row[0] and not row[0].startswith(("Metric", "==")):
            names.add(row[0].strip().strip('"'))
    return names


def base_name(metric: str) -> str:
    return metric.split(".", 1)[0]


def parse_ncu_csv(text: str, metrics: list[str]) -> list[dict]:
    """Rows of ``ncu --csv --page raw``: per kernel its name and each metric as ``{"value", "unit"}``.

    The first row names the columns, the second gives their units; lines ncu
    prints around the table (``==PROF==``) are skipped.
    """
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 2:
        raise GuideError("ncu printed no kernel table: was any kernel inside the NVTX range? (see its console output)")
    header, units, data = rows[0], rows[1], rows[2:]
    column = {name: i for i, name in enumerate(header)}
    out = []
    for row in data:
        entry = {"kernel": row[column["Kernel Name"]], "metrics": {}}
        for metric in metrics:
            if metric in column and row[column[metric]] not in ("", "n/a"):
                value = float(row[column[metric]].replace(",", ""))
                entry["metrics"][metric] = {"value": value, "unit": units[column[metric]]}
        out.append(entry)
    return out


def measure_with_ncu(rows: int, dim: int, hidden: int, *, timeout_s: int = 900) -> dict:
    """Each gate/up kernel's counters at ``[rows, dim] → hidden`` (bf16), measured by ``ncu`` in a child process."""
    ncu = find_ncu()
    known = known_metrics(ncu)
    metrics = [m for m in METRICS if base_name(m) in known]
    if not any("tensor_op" in m for m in metrics):
        raise GuideError("this ncu knows no tensor-pipe metric (sm__pipe_tensor_op_*): it cannot show what this "
                         "chapter measures")  # fmt: skip
    command = [ncu, "--csv", "--page", "raw", "--print-units", "base", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
               "--metrics", ",".join(metrics), sys.executable, "-m", "profiling_guide.measure.inside_kernel",
               str(rows), str(dim), str(hidden)]  # fmt: skip
    print(f"inside_kernel: ncu measuring {len(LABELS)} kernels, {len(metrics)} metrics (a minute or two)",
          file=sys.stderr, flush=True)  # fmt: skip
    table = parse_ncu_csv(_run(command, "measure the kernels", timeout_s), metrics)
    if len(table) != len(LABELS):
        names = ", ".join(r["kernel"][:40] for r in table)
        raise GuideError(f"ncu measured {len(table)} kernels where the workload launches {len(LABELS)}: {names}")
    # noqa below: the lengths are checked equal just above
    for label, row in zip(LABELS, table):  # noqa: B905
        row["label"] = label
    version = _run([ncu, "--version"], "say its version").strip().splitlines()[-1]
    return {"kernels": table, "metrics": {m: METRICS[m] for m in metrics}, "missing": [m for m in METRICS if m not in metrics],
            "ncu": version, "clocks": "locked at base (ncu --clock-control base, its default)",
            "shape": {"rows": rows, "dim": dim, "hidden": hidden, "dtype": "bfloat16"}}  # fmt: skip


def _run(command: list[str], what: str, timeout_s: int = 120) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise GuideError(f"ncu did not {what} within {timeout_s} s: {' '.join(command[:3])} …") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise GuideError(f"ncu could not {what} (exit {done.returncode}): {' / '.join(tail)}")
    return done.stdout


# ---------------------------------------------------------------- reading the counters
CUBLAS_BOTH = "cuBLAS gate + up GEMMs"


def counter_table(measured: dict) -> pd.DataFrame:
    """One row per kernel of a :func:`measure_with_ncu` result, and one for cuBLAS's two GEMMs together.

    The two GEMMs' row adds their times and bytes; its percentages are the
    two kernels' weighted by their durations.
    """
    rows = {}
    for kernel in measured["kernels"]:
        values = kernel["metrics"]
        rows[kernel["label"]] = {column: values[metric]["value"] * factor
                                 for metric, (column, factor) in METRICS.items() if metric in values}  # fmt: skip
    table = pd.DataFrame.from_dict(rows, orient="index")
    gemms = table.loc[["cuBLAS gate GEMM", "cuBLAS up GEMM"]]
    both = {c: gemms[c].sum() if not c.endswith("%") else (gemms[c] * gemms["ncu µs"]).sum() / gemms["ncu µs"].sum()
            for c in table.columns}  # fmt: skip
    table.loc[CUBLAS_BOTH] = both
    return table.loc[[CUBLAS_BOTH, *LABELS]]


def busier(a: str, b: str):
    """A predicate: the tensor pipe was busy a larger share of ``a``'s cycles than of ``b``'s (a :func:`counter_table`)."""
    def _predicate(table):
        column = "tensor busy %"
        return table.loc[a, column] > table.loc[b, column], (
            f"{a} {table.loc[a, column]:.1f} %, {b} {table.loc[b, column]:.1f} %")
    return _predicate


def written_at_most(a: str, b: str, factor: float):
    """A predicate: ``a`` wrote at most ``factor`` × the DRAM bytes ``b`` wrote."""
    def _predicate(table):
        written = table["DRAM write MB"]
        return written[a] <= factor * written[b], (
            f"{a} {written[a]:.1f} MB, {b} {written[b]:.1f} MB: {written[a] / written[b]:.2f}×")
    return _predicate


def share_at_most(phase: str, limit: float):
    """A predicate: in every program, ``phase`` took at most ``limit`` of its time (a table of :func:`phase_shares`)."""
    def _predicate(shares):
        worst = shares[phase].max()
        return worst <= limit, f"at most {worst:.1%} of a program's time, over {len(shares)} programs"
    return _predicate


def share_at_least(phase: str, limit: float):
    """A predicate: in every program, ``phase`` took at least ``limit`` of its time."""
    def _predicate(shares):
        least = shares[phase].min()
        return least >= limit, f"at least {least:.1%} of a program's time, over {len(shares)} programs"
    return _predicate


# The functions below that import torch, triton and our kernels in their bodies do so because
# chapter 6c's recordings fingerprint their code (moving an import would make them stale), and
# this module's counter parsing runs without torch.
# ---------------------------------------------------------------- the benchmark's way
def gate_up_kernels(x, wg, wu, packed) -> dict:
    """The gate/up work four ways, each a callable of x: :data:`LABELS`, with cuBLAS's two GEMMs as one entry."""
    import torch.nn.functional as F
    import triton

    from profiling_guide.kernels import geglu_pingpong
    from profiling_guide.kernels.geglu_kernels import geglu_packed_tma

    one = triton.Config({**geglu_pingpong.DEFAULT_CONFIG.kwargs, "CONSUMERS": 1}, num_warps=4)
    return {"cuBLAS gate + up GEMMs": lambda x: (F.linear(x, wg), F.linear(x, wu)),
            "packed-tma": lambda x: geglu_packed_tma(x, packed),
            "pingpong": lambda x: geglu_pingpong.geglu_pingpong(x, packed),
            "pingpong, one consumer": lambda x: geglu_pingpong.geglu_pingpong(x, packed, config=one)}  # fmt: skip


def time_gate_up(rows: int, dim: int, hidden: int, *, repeats: int = 7, inputs: int = 10) -> dict:
    """Device µs of each of :func:`gate_up_kernels`, the benchmark's way: median and IQR of interleaved repeats.

    Each timing keeps the GPU's queue full and rotates through ``inputs``
    fresh x's (more bytes than L2 holds at the guide's shape):
    :func:`~profiling_guide.measure.capture.median_rotating_us`.
    """
    import torch

    from profiling_guide.kernels.fused_mlp import pack_gate_up
    from profiling_guide.measure.capture import median_rotating_us
    from profiling_guide.spread import Spread

    torch.manual_seed(0)
    wg, wu = (torch.randn(hidden, dim, device="cuda", dtype=torch.bfloat16) / dim**0.5 for _ in range(2))
    xs = [(torch.randn(rows, dim, device="cuda", dtype=torch.bfloat16),) for _ in range(inputs)]
    kernels = gate_up_kernels(xs[0][0], wg, wu, pack_gate_up(wg, wu))
    for run in kernels.values():  # compile and autotune before anything is timed
        run(xs[0][0])
    runs: dict[str, list[float]] = {name: [] for name in kernels}
    for i in range(repeats):
        print(f"inside_kernel: timing repeat {i + 1} of {repeats}", file=sys.stderr, flush=True)
        for name, run in kernels.items():
            runs[name].append(median_rotating_us(run, xs))
    return {"device_us": {name: Spread.of(v).to_dict() for name, v in runs.items()}, "repeats": repeats,
            "inputs": inputs, "shape": {"rows": rows, "dim": dim, "hidden": hidden, "dtype": "bfloat16"}}  # fmt: skip


# ---------------------------------------------------------------- Proton
SCOPES = ("mma", "epilogue")
PHASES = ("both in their K loop", "one in its K loop, the other in its epilogue",
          "one in its K loop, the other waiting for its turn", "neither in its K loop")  # fmt: skip


def scope_intervals(trace: dict | list) -> dict[str, dict[str, list[tuple[str, float, float]]]]:
    """``{program: {warp: [(scope, start, end), …]}}`` from Proton's Chrome trace (complete events, ``ph`` "X").

    Proton writes each program as a process (``pid``, e.g. "… Core0 CTA76")
    and each recorded warp as a thread (``tid``); its timestamps are cycles of
    the SM's clock divided by 1000 (it labels them µs at an assumed 1 GHz):
    thousands of cycles.
    """
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    out: dict[str, dict[str, list]] = {}
    for ev in events:
        if ev.get("ph") != "X" or ev.get("name") not in SCOPES:
            continue
        start = float(ev["ts"])
        out.setdefault(str(ev["pid"]), {}).setdefault(str(ev["tid"]), []).append((ev["name"], start, start + float(ev["dur"])))
    for warps in out.values():
        for spans in warps.values():
            spans.sort(key=lambda span: span[1])
    return out


def phase_shares(warps: dict[str, list[tuple[str, float, float]]]) -> dict[str, float]:
    """Shares of one program's time (first scope's start to last scope's end) in each of :data:`PHASES`.

    ``warps`` holds the two consumers' intervals (one warp of each); outside
    its scopes a consumer is waiting (for its turn, or at the kernel's edges).
    """
    if len(warps) != 2:
        raise GuideError(f"a ping-pong program has two consumer warpgroups, the trace recorded {len(warps)} warps")
    edges = sorted({t for spans in warps.values() for _, start, end in spans for t in (start, end)})
    shares = dict.fromkeys(PHASES, 0.0)
    # noqa below: neighbouring edges, one pair fewer than edges
    for lo, hi in zip(edges, edges[1:]):  # noqa: B905
        mid = (lo + hi) / 2
        doing = [next((scope for scope, start, end in spans if start <= mid < end), None) for spans in warps.values()]
        mma, epilogue = doing.count("mma"), doing.count("epilogue")
        phase = PHASES[0] if mma == 2 else PHASES[1] if mma and epilogue else PHASES[2] if mma else PHASES[3]
        shares[phase] += hi - lo
    total = sum(shares.values()) or 1.0
    return {phase: value / total for phase, value in shares.items()}


def proton_phases(rows: int, dim: int, hidden: int, *, programs_kept: int = 2, timeout_s: int = 600) -> dict:
    """The ping-pong kernel's phases at ``[rows, dim] → hidden`` (bf16), recorded by Proton in a child process."""
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "profiling_guide.measure.inside_kernel", "proton",
                   str(rows), str(dim), str(hidden), folder]  # fmt: skip
        print("inside_kernel: Proton recording the ping-pong kernel's phases", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise GuideError(f"Proton's instrumented run did not finish within {timeout_s} s") from None
        traces = sorted(Path(folder).glob("*.chrome_trace"))
        if done.returncode != 0 or not traces:
            tail = (done.stderr or done.stdout).strip().splitlines()[-2:]
            raise GuideError(f"Proton's instrumented run failed (exit {done.returncode}): {' / '.join(tail)}")
        per_program = scope_intervals(json.loads(traces[0].read_text()))
    if not per_program:
        raise GuideError("Proton's trace holds no 'mma' or 'epilogue' scope: was the kernel instrumented?")
    names = sorted(per_program, key=lambda name: (len(name), name))
    return {"shares": {name: phase_shares(per_program[name]) for name in names},
            "programs": {name: per_program[name] for name in names[:programs_kept]},
            "unit": "thousands of SM cycles", "shape": {"rows": rows, "dim": dim, "hidden": hidden, "dtype": "bfloat16"}}


def record_with_proton(rows: int, dim: int, hidden: int, folder: str) -> None:
    """The child process of :func:`proton_phases`: one instrumented forward of the ping-pong kernel."""
    import torch
    import triton
    import triton.profiler as proton

    from profiling_guide.kernels import geglu_pingpong
    from profiling_guide.kernels.fused_mlp import pack_gate_up

    # Proton's instrumentation keeps its buffers in memory Triton asks the caller for
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(0)
    x = torch.randn(rows, dim, device="cuda", dtype=torch.bfloat16)
    wg, wu = (torch.randn(hidden, dim, device="cuda", dtype=torch.bfloat16) / dim**0.5 for _ in range(2))
    packed = pack_gate_up(wg, wu)
    geglu_pingpong.geglu_pingpong(x, packed)  # the ring's first fills and the caches warm, uninstrumented
    # the first warp of each consumer warpgroup: warps 0 and 4
    mode = proton.mode.Default(sampling_strategy="selective", sampling_options="0,4")
    proton.start(f"{folder}/pingpong", data="trace", backend="instrumentation", mode=mode)
    geglu_pingpong.geglu_pingpong(x, packed)
    torch.cuda.synchronize()
    proton.finalize()


# ---------------------------------------------------------------- the child processes
def workload(rows: int, dim: int, hidden: int) -> None:
    """What ncu measures: every kernel of :data:`LABELS` once, warmed up first, inside one NVTX range."""
    import torch

    from profiling_guide.kernels.fused_mlp import pack_gate_up

    torch.manual_seed(0)
    x = torch.randn(rows, dim, device="cuda", dtype=torch.bfloat16)
    wg, wu = (torch.randn(hidden, dim, device="cuda", dtype=torch.bfloat16) / dim**0.5 for _ in range(2))
    kernels = gate_up_kernels(x, wg, wu, pack_gate_up(wg, wu))
    for run in kernels.values():  # compile and autotune outside the range: ncu sees only the launches below
        run(x)
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range(NVTX_RANGE):
        for run in kernels.values():  # cuBLAS's entry launches two GEMMs: five kernels in LABELS' order
            run(x)
        torch.cuda.synchronize()


if __name__ == "__main__":
    # python -m profiling_guide.measure.inside_kernel ROWS DIM HIDDEN: what ncu runs
    # python -m profiling_guide.measure.inside_kernel proton ROWS DIM HIDDEN FOLDER: Proton's instrumented run
    if sys.argv[1] == "proton":
        record_with_proton(*(int(v) for v in sys.argv[2:5]), sys.argv[5])
    else:
        workload(*(int(v) for v in sys.argv[1:4]))
