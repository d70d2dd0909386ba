"""Time every GeGLU MLP variant on one GPU, in one run, against cuBLAS's GEMMs alone and the datasheet bound.

Variants (all with the same bf16 weights, checked against eager first):

* ``eager``: :class:`~profiling_guide.kernels.models.SimpleGeGLUMLP`, five kernels.
* ``compile``: ``torch.compile(mlp)``; Inductor fuses GeLU·mul into one kernel.
* ``compile-max-autotune``: ``torch.compile(mlp, mode="max-autotune-no-cudagraphs")``;
  Inductor also benchmarks its own Triton GEMM templates against cuBLAS.
  CUDA graphs are left off (the plain ``"max-autotune"`` mode turns them on)
  so every variant is timed the same way: kernel launches from Python, one
  forward after another; a CUDA graph would remove launch gaps that the other
  variants pay.
* ``liger``: Liger's ``LigerGEGLUMLP`` (a Triton GeLU·mul kernel between cuBLAS GEMMs).
* ``fused``, ``fused-dual``, ``fused-packed``, ``fused-packed-tma``,
  ``fused-pingpong``: our :class:`~profiling_guide.kernels.fused_mlp.FusedGeGLUMLP`
  (``fused`` is its default design, ``"auto"``: pingpong on Hopper, packed
  elsewhere), gate and up in one GEMM with GeLU·mul in its epilogue (Triton;
  Gluon for pingpong).

Timing: device µs per forward under ``torch.no_grad()``, cycling through
several fresh random inputs whose total size exceeds the L2 cache, with the
GPU's queue kept full; each variant is timed in ``repeats`` interleaved
passes and reported as the median and interquartile range of those passes.
The CPU time to issue one forward is measured separately, profiler off.

A reference and a bound, both in the result:

* **cuBLAS GEMMs alone** (``gemms_alone_us``): the MLP's three bare GEMMs,
  timed the same way. What a perfect fusion of everything else would reach
  with the library's own GEMMs: a reference, not a floor, since a better GEMM
  (ours) can beat it. Beside it,
  ``gate_up_gemms_alone_us``: cuBLAS's gate and up GEMMs only, the work our
  fused kernel does (it adds the GeLU·mul and stores h instead of g and u).
* **the datasheet bound** (``datasheet_bound_us``): the MLP's FLOPs at the
  vendor's dense bf16 peak, or its least HBM traffic at the datasheet
  bandwidth, whichever takes longer: nothing runs faster.

Its records (:class:`~profiling_guide.measure.bench_records.ShapeResult`,
:class:`~profiling_guide.measure.bench_records.BenchmarkRun`, their JSON) are in
:mod:`~profiling_guide.measure.bench_records`, its tables in
:mod:`~profiling_guide.measure.bench_format`, its command line in
:mod:`~profiling_guide.measure.bench_cli`.

Command line::

    profiling-guide bench-mlp [--batch 64 --seq 128 --dim 768 --hidden 3072]
        [--variants eager,compile,...] [--rounds 20] [--json OUT.json]
    profiling-guide bench-mlp --sweep [--rows 1024,4096 --hiddens 3072,8192] [--json OUT.json]
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence

import torch

from profiling_guide.analysis.roofline import datasheet_bound_us, datasheet_for
from profiling_guide.errors import GuideError
from profiling_guide.kernels.models import (
    SimpleGeGLUMLP,
    load_liger_geglu_mlp,
    mlp_flops,
)
from profiling_guide.measure.bench_records import BenchmarkRun, ShapeResult
from profiling_guide.measure.capture import (
    gpu_facts,
    median_rotating_us,
    require_cuda_memory,
    software_versions,
)
from profiling_guide.measure.timing import (
    REPEATS,
    Spread,
    cost_key,
    cpu_issue_time,
    reference_rates,
)

VARIANTS = ("eager", "compile", "compile-max-autotune", "liger", "fused", "fused-dual", "fused-packed",
            "fused-packed-tma", "fused-pingpong")  # fmt: skip
# "fused" ("auto") runs one of the designs below: left out of the default list so it is not timed twice.
DEFAULT_VARIANTS = ("eager", "compile", "compile-max-autotune", "liger", "fused-dual", "fused-packed",
                    "fused-packed-tma", "fused-pingpong")  # fmt: skip
SWEEP_ROWS = (1024, 2048, 4096, 8192, 16384, 32768)
SWEEP_HIDDENS = (3072, 8192)
DTYPE = torch.bfloat16
DEVICE = "cuda"
# max|y - y_eager| / max|y_eager| above this is a wrong kernel, not rounding: in
# bf16 the variants differ from eager by a few bf16 ulps of the largest output
# (~0.4 % each); a bad tile or mask gives errors of order 1.
WRONG_OUTPUT = 3e-2
L2_FALLBACK_BYTES = 50 * 2**20  # H100: 50 MB


# ---------------------------------------------------------------- variants
# Its imports stay in its body: chapters 5 and 6's recordings fingerprint this function's code, and moving them
# would make those recordings stale.
def build_variant(name: str, mlp: SimpleGeGLUMLP) -> tuple[Callable, str | None]:
    """The forward callable of variant ``name`` sharing ``mlp``'s weights, and a note (or None)."""
    dim, hidden = mlp.gate_proj.in_features, mlp.gate_proj.out_features
    if name == "eager":
        return mlp, None
    if name in ("compile", "compile-max-autotune"):
        # A fresh Dynamo cache for each compiled variant and each shape, and
        # static shapes: without dynamic=False the second shape of a sweep
        # would get a dynamic-shape kernel instead of one tuned to it.
        import torch._dynamo

        torch._dynamo.reset()
        if name == "compile":
            return torch.compile(mlp, dynamic=False), None
        return torch.compile(mlp, mode="max-autotune-no-cudagraphs", dynamic=False), "CUDA graphs off"
    if name == "liger":
        liger = load_liger_geglu_mlp(dim, hidden, device=DEVICE, dtype=DTYPE)
        liger.module.load_state_dict(mlp.state_dict())
        return liger.module, liger.note
    if name.startswith("fused"):
        from profiling_guide.kernels import fused_mlp

        design = fused_mlp.AUTO if name == "fused" else name.removeprefix("fused-")
        return fused_mlp.FusedGeGLUMLP.from_mlp(mlp, design=design), f"design={design!r}"
    raise GuideError(f"unknown variant {name!r}: choose from {', '.join(VARIANTS)}")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def _rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """``max |got - want| / max |want|`` in float64."""
    want = want.double()
    scale = want.abs().max().item() or 1.0
    return (got.double() - want).abs().max().item() / scale


def _float64_reference(mlp: SimpleGeGLUMLP, x: torch.Tensor) -> torch.Tensor:
    wg, wu, wd = (m.weight.double() for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))
    x = x.double()
    return (torch.nn.functional.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)) @ wd.T


def _input_count(x_bytes: int) -> int:
    """How many inputs to rotate through: together at least twice the L2 cache, at least 3."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 0) or L2_FALLBACK_BYTES
    return max(3, min(256, math.ceil(2 * l2 / x_bytes)))


def _finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _bare_gemms(mlp: SimpleGeGLUMLP) -> Callable:
    """cuBLAS's three GEMMs of the MLP back to back, nothing between them (down reads g in place of h)."""
    wg, wu, wd = mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight
    linear = torch.nn.functional.linear

    def gemms_alone(x: torch.Tensor) -> torch.Tensor:
        g = linear(x, wg)
        linear(x, wu)
        return linear(g, wd)

    return gemms_alone


def _bare_gate_up_gemms(mlp: SimpleGeGLUMLP) -> Callable:
    """cuBLAS's gate and up GEMMs only: the products the fused kernel computes, without its epilogue."""
    wg, wu = mlp.gate_proj.weight, mlp.up_proj.weight
    linear = torch.nn.functional.linear

    def gate_up_gemms_alone(x: torch.Tensor) -> torch.Tensor:
        linear(x, wg)
        return linear(x, wu)

    return gate_up_gemms_alone


GEMMS_ALONE = "cuBLAS GEMMs alone"
GATE_UP_GEMMS_ALONE = "cuBLAS gate/up GEMMs alone"
GEMM_REFERENCES = (GEMMS_ALONE, GATE_UP_GEMMS_ALONE)  # timed in the same passes as the variants, reported apart


# ---------------------------------------------------------------- timing
# Its imports stay in its body: chapters 5 and 6's recordings fingerprint this function's code, and moving them
# would make those recordings stale.
def measure_shape(
    shape: tuple[int, ...],
    hidden: int,
    variants: Sequence[str],
    *,
    references: dict,
    rounds: int = 20,
    repeats: int = REPEATS,
    seed: int = 0,
    progress: Callable[[str], object] = print,
    cpu_issue: bool = True,
    calls_per_repeat: int | None = None,
) -> ShapeResult:
    """Check and time ``variants`` on inputs of ``shape`` (last dim = dim).

    Every variant is built and checked first; then ``repeats`` passes time each
    variant in turn (interleaved, so a drift of the clock touches all alike),
    and each variant's device time is a :class:`~profiling_guide.spread.Spread`
    over those passes. The same passes time the :data:`GEMM_REFERENCES`: the
    workload's three bare cuBLAS GEMMs (what a perfect fusion of everything
    else would reach with the library's GEMMs), and its gate and up GEMMs
    alone (the products our fused kernel computes). ``cpu_issue`` also times
    each variant's CPU cost to issue one forward (profiler off).
    ``calls_per_repeat`` times at least that many forwards per repeat, in
    whole rounds over the rotating inputs, in place of ``rounds`` rounds: a
    small shape rotates through many inputs, and needs fewer rounds.
    """
    dim = shape[-1]
    rows = math.prod(shape[:-1])
    x_bytes = rows * dim * DTYPE.itemsize
    n_inputs = _input_count(x_bytes)
    if calls_per_repeat:
        rounds = max(1, math.ceil(calls_per_repeat / n_inputs))
    # inputs, eager's g, u, h and y, and the float64 reference (x, g, u, y)
    need = n_inputs * x_bytes + rows * hidden * (4 * 2 + 3 * 8) + 3 * dim * hidden * (2 + 8)
    require_cuda_memory(need, f"the MLP benchmark at {rows} rows, dim {dim}, hidden {hidden}")
    torch.manual_seed(seed)
    mlp = SimpleGeGLUMLP(dim, hidden, device=DEVICE, dtype=DTYPE)
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    inputs = [(torch.randn(*shape, device=DEVICE, dtype=DTYPE, generator=gen),) for _ in range(n_inputs)]
    flops = mlp_flops(rows, dim, hidden)
    min_bytes = DTYPE.itemsize * (3 * dim * hidden + 2 * rows * dim)  # weights, x and y once each
    sheet = references.get("datasheet")
    with torch.no_grad():
        y_eager = mlp(inputs[0][0])
        y_exact = _float64_reference(mlp, inputs[0][0])
    result = ShapeResult(rows=rows, dim=dim, hidden=hidden, flops=flops, min_bytes=min_bytes,
                         datasheet_bound_us=datasheet_bound_us(flops, min_bytes, sheet) if sheet else None,
                         inputs=n_inputs, inputs_mb=round(n_inputs * x_bytes / 1e6, 1))  # fmt: skip
    progress(f"shape {list(shape)} hidden {hidden}: {n_inputs} rotating inputs ({result.inputs_mb} MB)")
    ready: dict[str, Callable] = {GEMMS_ALONE: _bare_gemms(mlp), GATE_UP_GEMMS_ALONE: _bare_gate_up_gemms(mlp)}
    for name in variants:
        try:
            fn, note = build_variant(name, mlp)
            if note:
                result.notes[name] = note
            with torch.no_grad():
                y = fn(inputs[0][0])  # compiles / autotunes on first call
            torch.cuda.synchronize()
            err, err64 = _rel_error(y, y_eager), _rel_error(y, y_exact)
            result.max_rel_error[name] = _finite_or_none(err)
            result.max_rel_error_fp64[name] = _finite_or_none(err64)
            del y
            if not err <= WRONG_OUTPUT:  # NaN too
                result.errors[name] = f"wrong output: max rel error vs eager {err:.2e} > {WRONG_OUTPUT:.0e}"
                result.wrong.append(name)
                progress(f"  {name}: WRONG OUTPUT, max rel error vs eager {err:.2e} (float64 reference: {err64:.2e})")
                continue
            ready[name] = fn
            progress(f"  {name}: ready, max rel error vs eager {err:.1e}, vs float64 {err64:.1e}")
        except Exception as exc:  # one variant's failure is recorded, the run goes on
            result.errors[name] = _one_line(exc)
            progress(f"  {name}: error: {result.errors[name]}")
    samples: dict[str, list[float]] = {name: [] for name in ready}
    with torch.no_grad():
        for _ in range(repeats):
            for name, fn in ready.items():
                samples[name].append(median_rotating_us(fn, inputs, rounds=rounds))
    x = inputs[0][0]
    for name, fn in ready.items():
        spread = Spread.of(samples[name])
        if name == GEMMS_ALONE:
            result.gemms_alone_us = spread
        elif name == GATE_UP_GEMMS_ALONE:
            result.gate_up_gemms_alone_us = spread
        else:
            result.variants_us[name] = spread
            if cpu_issue:
                with torch.no_grad():
                    sizes = {"batch": shape[0], "seq": shape[1]} if len(shape) == 3 else {"rows": rows}
                    key = cost_key(name, sizes | {"dim": dim, "hidden": hidden, "dtype": "bfloat16"})
                    # noqa below: the lambda runs inside this iteration, before fn changes
                    result.cpu_issue_us[name] = cpu_issue_time(lambda: fn(x), key=key)  # noqa: B023
        if name.startswith("fused"):
            from profiling_guide.kernels import fused_mlp

            result.fused_configs[name] = fused_mlp.tuned_config(fn.design_ran, x.reshape(-1, dim), hidden)
            if fn.design == fused_mlp.AUTO:
                result.notes[name] = f"design='auto' ran {fn.design_ran!r}"
        progress(f"  {name}: {spread:.1f} µs device time per forward")
    del ready
    torch.cuda.empty_cache()
    return result


def _check_variants(variants: Sequence[str] | None) -> list[str]:
    variants = list(DEFAULT_VARIANTS if variants is None else variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise GuideError(f"unknown variant {unknown[0]!r}: choose from {', '.join(VARIANTS)}")
    return variants


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        raise GuideError("the MLP benchmark runs on a CUDA GPU and none is visible")


def mlp_gemm_shapes(rows: int, dim: int, hidden: int) -> list[tuple[int, int, int]]:
    """The (M, K, N) of the MLP's GEMMs: gate and up ``rows·dim·hidden``, down ``rows·hidden·dim``."""
    return [(rows, dim, hidden), (rows, hidden, dim)]


def _references(rows: int, dim: int, hidden: int, progress) -> dict:
    progress("reference rates: cuBLAS bf16 GEMMs (8192³ and the MLP's shapes), device-to-device copies")
    refs = reference_rates(mlp_gemm_shapes(rows, dim, hidden))
    gemm, copy = refs["gemm_tflops"], refs["copy_tbps"]
    progress(f"reference rates: {Spread.from_dict(gemm['spread']):.0f} TFLOP/s ({gemm['source']}), "
             f"{Spread.from_dict(copy['spread']):.2f} TB/s ({copy['source']})")
    return refs


def benchmark(
    batch: int = 64,
    seq: int = 128,
    dim: int = 768,
    hidden: int = 3072,
    variants: Sequence[str] | None = None,
    rounds: int = 20,
    progress: Callable[[str], object] = print,
    *,
    repeats: int = REPEATS,
    seed: int = 0,
) -> BenchmarkRun:
    """Check and time the MLP variants at ``[batch, seq, dim]`` → ``hidden``, with this GPU's reference rates."""
    _require_cuda()
    variants = _check_variants(variants)
    references = _references(batch * seq, dim, hidden, progress)
    result = measure_shape((batch, seq, dim), hidden, variants, references=references, rounds=rounds,
                           repeats=repeats, seed=seed, progress=progress)  # fmt: skip
    return BenchmarkRun(gpu=gpu_facts(), versions=software_versions(), batch=batch, seq=seq, references=references,
                        result=result, rounds=rounds, repeats=repeats)  # fmt: skip


#: The benchmark of the chapters at the post's shape: every variant, in one run that each page reads.
CHAPTER_VARIANTS = DEFAULT_VARIANTS
CHAPTER_ROUNDS = 20

_RUNS: dict[str, dict] = {}


def run_benchmark(*args, **kwargs) -> dict:
    """:func:`benchmark` (same arguments) as JSON: ``BenchmarkRun.to_json()``, what the chapters record.

    Measured once per process for the same arguments: every page that shows
    the benchmark in the same process reads the same run (each gets its own
    copy), as every page reads the same
    :func:`~profiling_guide.measure.timing.reference_rates`. Pages recorded in
    different processes hold different runs, and chapter 6 says which
    (:func:`~profiling_guide.pages.facts.two_runs`).

    Keys: ``gpu``, ``versions``, ``shape``, ``references`` (see
    :func:`~profiling_guide.measure.timing.reference_rates`), ``variants_us`` (name →
    device-time spread: ``median``, ``q1``, ``q3``, ``repeats``),
    ``gemms_alone_us`` and ``gate_up_gemms_alone_us`` (the bare cuBLAS GEMMs,
    the same way), ``datasheet_bound_us``, ``cpu_issue_us`` (name → spread of
    the CPU time to issue one forward), ``errors`` (name → one line:
    unavailable, failed or wrong output), ``wrong``, ``max_rel_error`` (vs
    eager) and ``max_rel_error_fp64`` (vs a float64 reference),
    ``fused_configs`` (variant → tile config), ``notes``, ``timing``.
    """
    key = json.dumps([args, kwargs], sort_keys=True, default=repr)
    if key not in _RUNS:
        _RUNS[key] = benchmark(*args, **kwargs).to_json()
    return copy.deepcopy(_RUNS[key])


def sweep(
    rows_list: Sequence[int] = SWEEP_ROWS,
    hiddens: Sequence[int] = SWEEP_HIDDENS,
    dim: int = 768,
    variants: Sequence[str] | None = None,
    rounds: int = 10,
    progress: Callable[[str], object] = print,
    *,
    repeats: int = 5,
    seed: int = 0,
    rates: bool = True,
    cpu_issue: bool = True,
    calls_per_repeat: int | None = None,
) -> list[dict]:
    """Every variant at every (rows, hidden): one ``ShapeResult.to_json()`` per shape, the first with the references.

    ``torch.compile`` variants recompile for every shape (static shapes), and
    the fused kernels autotune once per shape: the first sweep takes minutes.
    ``rates=False`` leaves out the measured reference rates (the references
    then hold the datasheet alone) and ``cpu_issue=False`` each variant's CPU
    cost: what a chart of device times against the GEMMs alone does not need.
    ``calls_per_repeat``: see :func:`measure_shape`.
    """
    _require_cuda()
    variants = _check_variants(variants)
    table = []
    for hidden in hiddens:
        for rows in rows_list:
            if table:
                references = table[0]["references"]
            elif rates:
                references = _references(rows, dim, hidden, progress)
            else:
                references = {"datasheet": datasheet_for(torch.cuda.get_device_name())}
            result = measure_shape((rows, dim), hidden, variants, references=references, rounds=rounds,
                                   repeats=repeats, seed=seed, progress=progress, cpu_issue=cpu_issue,
                                   calls_per_repeat=calls_per_repeat)  # fmt: skip
            if not table:
                result.references = references
            table.append(result.to_json())
    return table
