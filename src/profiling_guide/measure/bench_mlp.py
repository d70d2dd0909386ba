"""Time every GeGLU MLP variant on one GPU, in one run, against two floors.

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
* ``fused``, ``fused-dual``, ``fused-packed``, ``fused-packed-tma``: our
  :class:`~profiling_guide.kernels.fused_mlp.FusedGeGLUMLP` (``fused`` is its default
  design, ``"auto"``: packed-tma on Hopper, packed elsewhere), gate and up in one Triton GEMM with GeLU·mul in its epilogue.

Timing: device µs per forward under ``torch.no_grad()``, cycling through
several fresh random inputs whose total size exceeds the L2 cache, with the
GPU's queue kept full; each variant is timed in ``repeats`` interleaved
passes and reported as the median and interquartile range of those passes.
The CPU time to issue one forward is measured separately, profiler off.

Two floors, both in the result:

* **cuBLAS GEMMs alone** (``gemms_alone_us``): the MLP's three bare GEMMs,
  timed the same way. What a perfect fusion of everything else would reach
  with the library's own GEMMs; a better GEMM (ours) can beat it. Beside it,
  ``gate_up_gemms_alone_us``: cuBLAS's gate and up GEMMs only, the work our
  fused kernel does (it adds the GeLU·mul and stores h instead of g and u).
* **the datasheet bound** (``datasheet_bound_us``): the MLP's FLOPs at the
  vendor's dense bf16 peak, or its least HBM traffic at the datasheet
  bandwidth, whichever takes longer. Nothing runs faster.

Command line::

    python -m profiling_guide.measure.bench_mlp [--batch 64 --seq 128 --dim 768 --hidden 3072]
        [--variants eager,compile,...] [--rounds 20] [--json OUT.json]
    python -m profiling_guide.measure.bench_mlp --sweep [--rows 1024,4096 --hiddens 3072,8192] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from profiling_guide import files
from profiling_guide.analysis.roofline import datasheet_bound_us
from profiling_guide.errors import GuideError
from profiling_guide.kernels.models import (
    SimpleGeGLUMLP,
    load_liger_geglu_mlp,
    mlp_flops,
)
from profiling_guide.measure.capture import (
    gpu_facts,
    median_rotating_us,
    require_cuda_memory,
    software_versions,
)
from profiling_guide.measure.timing import (
    REPEATS,
    Spread,
    compare,
    cost_key,
    cpu_issue_time,
    reference_rates,
)
from profiling_guide.sizes import MAX_SIZE

VARIANTS = ("eager", "compile", "compile-max-autotune", "liger", "fused", "fused-dual", "fused-packed", "fused-packed-tma")
# "fused" ("auto") runs one of the designs below: left out of the default list so it is not timed twice.
DEFAULT_VARIANTS = ("eager", "compile", "compile-max-autotune", "liger", "fused-dual", "fused-packed", "fused-packed-tma")
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
FLOORS = (GEMMS_ALONE, GATE_UP_GEMMS_ALONE)  # timed in the same passes as the variants, reported apart


# ---------------------------------------------------------------- results
def _spreads(d: dict) -> dict[str, Spread]:
    return {name: Spread.from_dict(t) for name, t in d.items()}


def _dicts(d: dict[str, Spread]) -> dict[str, dict]:
    return {name: t.to_dict() for name, t in d.items()}


@dataclass
class ShapeResult:
    """One shape of the benchmark: the workload, both floors, and each variant's times, errors and config.

    :meth:`to_json` gives the dict the recordings and ``--sweep``'s JSON hold
    (spreads as ``{median, q1, q3, repeats}``); :meth:`from_json` reads one
    back, also one written before ``gate_up_gemms_alone_us`` existed.
    """

    rows: int
    dim: int
    hidden: int
    flops: int
    min_bytes: int  # weights, x and y once each
    datasheet_bound_us: float | None
    inputs: int  # rotating inputs, together at least twice the L2 cache
    inputs_mb: float
    gemms_alone_us: Spread | None = None  # cuBLAS's three GEMMs, nothing between them
    gate_up_gemms_alone_us: Spread | None = None  # cuBLAS's gate and up GEMMs only
    variants_us: dict[str, Spread] = field(default_factory=dict)  # device µs per forward
    cpu_issue_us: dict[str, Spread] = field(default_factory=dict)  # host µs to issue one forward
    errors: dict[str, str] = field(default_factory=dict)  # variant → one line: unavailable, failed, wrong output
    wrong: list[str] = field(default_factory=list)
    max_rel_error: dict[str, float | None] = field(default_factory=dict)  # vs eager
    max_rel_error_fp64: dict[str, float | None] = field(default_factory=dict)  # vs a float64 reference
    notes: dict[str, str] = field(default_factory=dict)
    fused_configs: dict[str, str | None] = field(default_factory=dict)  # fused variant → the tile config it ran
    references: dict | None = None  # in a sweep, the first shape carries the run's reference rates

    def to_json(self) -> dict:
        data = {
            "rows": self.rows, "dim": self.dim, "hidden": self.hidden, "flops": self.flops,
            "min_bytes": self.min_bytes, "datasheet_bound_us": self.datasheet_bound_us,
            "inputs": self.inputs, "inputs_mb": self.inputs_mb,
            "gemms_alone_us": self.gemms_alone_us.to_dict() if self.gemms_alone_us else None,
            "gate_up_gemms_alone_us": self.gate_up_gemms_alone_us.to_dict() if self.gate_up_gemms_alone_us else None,
            "variants_us": _dicts(self.variants_us), "cpu_issue_us": _dicts(self.cpu_issue_us),
            "errors": dict(self.errors), "wrong": list(self.wrong), "max_rel_error": dict(self.max_rel_error),
            "max_rel_error_fp64": dict(self.max_rel_error_fp64), "notes": dict(self.notes),
            "fused_configs": dict(self.fused_configs),
        }  # fmt: skip
        if self.references is not None:
            data["references"] = self.references
        return data

    @classmethod
    def from_json(cls, data: dict) -> ShapeResult:
        alone, gate_up = data.get("gemms_alone_us"), data.get("gate_up_gemms_alone_us")
        return cls(
            rows=data["rows"], dim=data["dim"], hidden=data["hidden"], flops=data["flops"],
            min_bytes=data["min_bytes"], datasheet_bound_us=data.get("datasheet_bound_us"),
            inputs=data["inputs"], inputs_mb=data["inputs_mb"],
            gemms_alone_us=Spread.from_dict(alone) if alone else None,
            gate_up_gemms_alone_us=Spread.from_dict(gate_up) if gate_up else None,
            variants_us=_spreads(data.get("variants_us", {})), cpu_issue_us=_spreads(data.get("cpu_issue_us", {})),
            errors=dict(data.get("errors", {})), wrong=list(data.get("wrong", [])),
            max_rel_error=dict(data.get("max_rel_error", {})),
            max_rel_error_fp64=dict(data.get("max_rel_error_fp64", {})),
            notes=dict(data.get("notes", {})), fused_configs=dict(data.get("fused_configs", {})),
            references=data.get("references"),
        )  # fmt: skip


# The measurement method, as run_benchmark's JSON states it.
TIMING_METHOD = ("device time: median over repeats (each the median of CUDA-event times per forward), "
                 "torch.no_grad(), inputs rotated through 2× the L2, GPU queue kept full, variants interleaved")
# ShapeResult fields that run_benchmark's JSON holds at its top level (rows, dim, hidden: under "shape";
# inputs, inputs_mb: under "timing").
_TOP_LEVEL = ("flops", "min_bytes", "datasheet_bound_us", "gemms_alone_us", "gate_up_gemms_alone_us", "variants_us",
              "cpu_issue_us", "errors", "wrong", "max_rel_error", "max_rel_error_fp64", "fused_configs", "notes")


@dataclass
class BenchmarkRun:
    """One run of :func:`run_benchmark`: the GPU, the versions, the reference rates and one shape's results.

    :meth:`to_json` gives the layout of ``bench_mlp.json`` (the headlines of
    the docs read it) and of the chapters' ``bench`` recordings.
    """

    gpu: dict
    versions: dict
    batch: int
    seq: int
    references: dict
    result: ShapeResult
    rounds: int
    repeats: int

    def to_json(self) -> dict:
        m = self.result.to_json()
        return {
            "gpu": self.gpu,
            "versions": self.versions,
            "shape": {"batch": self.batch, "seq": self.seq, "rows": m["rows"], "dim": m["dim"], "hidden": m["hidden"],
                      "dtype": "bfloat16"},
            "references": self.references,
            **{k: m[k] for k in _TOP_LEVEL},
            "timing": {"method": TIMING_METHOD, "rounds": self.rounds, "repeats": self.repeats,
                       "inputs": m["inputs"], "inputs_mb": m["inputs_mb"]},
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> BenchmarkRun:
        shape, timing = data["shape"], data["timing"]
        fields = {k: data[k] for k in _TOP_LEVEL if k in data}
        result = ShapeResult.from_json({**fields, "rows": shape["rows"], "dim": shape["dim"], "hidden": shape["hidden"],
                                        "inputs": timing["inputs"], "inputs_mb": timing["inputs_mb"]})  # fmt: skip
        return cls(gpu=data["gpu"], versions=data["versions"], batch=shape["batch"], seq=shape["seq"],
                   references=data["references"], result=result, rounds=timing["rounds"],
                   repeats=timing["repeats"])  # fmt: skip


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
) -> ShapeResult:
    """Check and time ``variants`` on inputs of ``shape`` (last dim = dim).

    Every variant is built and checked first; then ``repeats`` passes time each
    variant in turn (interleaved, so a drift of the clock touches all alike),
    and each variant's device time is a :class:`~profiling_guide.measure.timing.Spread`
    over those passes. The same passes time the :data:`FLOORS`: the
    workload's three bare cuBLAS GEMMs (what a perfect fusion of everything
    else would reach with the library's GEMMs), and its gate and up GEMMs
    alone (the products our fused kernel computes).
    """
    dim = shape[-1]
    rows = math.prod(shape[:-1])
    x_bytes = rows * dim * DTYPE.itemsize
    n_inputs = _input_count(x_bytes)
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
            with torch.no_grad():
                sizes = {"batch": shape[0], "seq": shape[1]} if len(shape) == 3 else {"rows": rows}
                key = cost_key(name, sizes | {"dim": dim, "hidden": hidden, "dtype": "bfloat16"})
                result.cpu_issue_us[name] = cpu_issue_time(lambda: fn(x), key=key)
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


def run_benchmark(*args, **kwargs) -> dict:
    """:func:`benchmark` (same arguments) as JSON: ``BenchmarkRun.to_json()``, what the chapters record.

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
    return benchmark(*args, **kwargs).to_json()


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
) -> list[dict]:
    """Every variant at every (rows, hidden): one ``ShapeResult.to_json()`` per shape, the first with the references.

    ``torch.compile`` variants recompile for every shape (static shapes), and
    the fused kernels autotune once per shape: the first sweep takes minutes.
    """
    _require_cuda()
    variants = _check_variants(variants)
    table = []
    for hidden in hiddens:
        for rows in rows_list:
            references = _references(rows, dim, hidden, progress) if not table else table[0]["references"]
            result = measure_shape((rows, dim), hidden, variants, references=references, rounds=rounds,
                                   repeats=repeats, seed=seed, progress=progress)  # fmt: skip
            if not table:
                result.references = references
            table.append(result.to_json())
    return table


# ---------------------------------------------------------------- command line
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"{value} is larger than any size this benchmark can run (at most {MAX_SIZE})")
    return value


def _int_list(text: str) -> list[int]:
    values = [_positive_int(part) for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def _variant_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated variants from {', '.join(VARIANTS)}")
    for name in names:
        if name not in VARIANTS:
            raise argparse.ArgumentTypeError(f"unknown variant {name!r}: choose from {', '.join(VARIANTS)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m profiling_guide.measure.bench_mlp",
        description="Time the GeGLU MLP variants (bf16) against cuBLAS's bare GEMMs and the datasheet bound, in one run.",
    )
    p.add_argument("--batch", type=_positive_int, default=64)
    p.add_argument("--seq", type=_positive_int, default=128)
    p.add_argument("--dim", type=_positive_int, default=768)
    p.add_argument("--hidden", type=_positive_int, default=3072)
    p.add_argument("--variants", type=_variant_list, default=None,
                   help=f"comma-separated, from {','.join(VARIANTS)} (default: {','.join(DEFAULT_VARIANTS)})")
    p.add_argument("--rounds", type=_positive_int, default=None,
                   help="passes over the rotating inputs in one timing (default 20; 10 with --sweep)")
    p.add_argument("--repeats", type=_positive_int, default=None,
                   help="interleaved timings per variant behind each median and IQR (default 7; 5 with --sweep)")
    p.add_argument("--sweep", action="store_true", help="all variants over --rows × --hiddens at --dim")
    p.add_argument("--rows", type=_int_list, default=list(SWEEP_ROWS), help="sweep rows (batch·seq), comma-separated")
    p.add_argument("--hiddens", type=_int_list, default=list(SWEEP_HIDDENS), help="sweep hidden sizes, comma-separated")
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json", help="write the results here (atomically)")
    return p  # fmt: skip


def write_json_atomic(path: Path, data) -> list[str]:
    """Write ``data`` as JSON whole or not at all; returns where NaN or infinity was written as null."""
    return files.write_json_atomic(path, data)


def format_table(result: ShapeResult) -> str:
    """variant | device µs (median, IQR) | × GEMMs alone | × datasheet bound, then the errors."""
    alone, bound = result.gemms_alone_us, result.datasheet_bound_us
    lines = [f"{'variant':<26} {'device µs (median, IQR)':>28} {'× GEMMs alone':>14} {'× datasheet bound':>18}"]
    floors = [(GEMMS_ALONE, alone)]
    if result.gate_up_gemms_alone_us:
        floors.append((GATE_UP_GEMMS_ALONE, result.gate_up_gemms_alone_us))
    for name, t in [*floors, *result.variants_us.items()]:
        vs_bound = f"{t.median / bound:>18.2f}" if bound else f"{'–':>18}"
        verdict = "" if name in FLOORS else f"  ({compare(t, alone).replace('tie', 'tie with GEMMs alone')})"
        lines.append(f"{name:<26} {format(t, '.1f'):>28} {t.median / alone.median:>14.3f} {vs_bound}{verdict}")
    if bound:
        lines.append(f"{'datasheet bound':<26} {bound:>28.1f}")
    for name, msg in result.errors.items():
        lines.append(f"{name:<26} error: {msg}")
    return "\n".join(lines)


def format_sweep(rows: Sequence[ShapeResult], variants: Sequence[str]) -> str:
    """rows | hidden | GEMMs alone | each variant's median device µs ('-' where it failed)."""
    head = f"{'rows':>6} {'hidden':>6} {'GEMMs':>8} " + " ".join(f"{v:>12}" for v in variants)
    lines = [head, "(median device µs per forward)"]
    for r in rows:
        cells = " ".join(f"{r.variants_us[v].median:>12.1f}" if v in r.variants_us else f"{'-':>12}" for v in variants)
        lines.append(f"{r.rows:>6} {r.hidden:>6} {r.gemms_alone_us.median:>8.1f} {cells}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def progress(line: str) -> None:
        print(line, flush=True)

    try:
        if args.json:  # before any GPU work: a path that cannot be written fails now, not after the run
            files.check_writable(args.json)
        _require_cuda()
        variants = _check_variants(args.variants)
        if args.sweep:
            rows = sweep(args.rows, args.hiddens, args.dim, variants, rounds=args.rounds or 10,
                         progress=progress, repeats=args.repeats or 5)  # fmt: skip
            result = {"gpu": gpu_facts(), "versions": software_versions(), "references": rows[0]["references"],
                      "dim": args.dim, "dtype": "bfloat16", "variants": variants, "sweep": rows}  # fmt: skip
            print()
            print(format_sweep([ShapeResult.from_json(r) for r in rows], variants))
            wrong = sorted({name for r in rows for name in r["wrong"]})
        else:
            run = benchmark(args.batch, args.seq, args.dim, args.hidden, variants, rounds=args.rounds or 20,
                            progress=progress, repeats=args.repeats or REPEATS)  # fmt: skip
            print()
            refs = run.references
            print(f"{run.gpu['name']}, [{args.batch}, {args.seq}, {args.dim}] → {args.hidden}, bf16; "
                  f"references {refs['gemm_tflops']['rate']:.0f} TFLOP/s, {refs['copy_tbps']['rate']:.2f} TB/s")
            print(format_table(run.result))
            for name, config in run.result.fused_configs.items():
                print(f"{name} config: {config}")
            wrong = run.result.wrong
            result = run.to_json()
        if args.json:
            nulls = write_json_atomic(args.json, result)
            print(f"wrote {args.json}" + (f" (NaN or infinity written as null at {', '.join(nulls)})" if nulls else ""))
    except GuideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if wrong:
        print(f"error: wrong output from {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
