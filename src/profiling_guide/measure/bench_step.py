"""Time the GeGLU MLP's training step per variant, against cuBLAS's nine bare GEMMs of that step.

A training step here is one forward and one backward of the MLP with the
input's gradient (the MLP sits inside a network) and every weight's gradient,
no optimizer. Its GEMMs are nine: gate, up and down in the forward; in the
backward, for each of the three linears, the gradient of its input (dX) and of
its weight (dW). Variants, sharing one set of bf16 weights:

* ``eager``: :class:`~profiling_guide.kernels.models.SimpleGeGLUMLP` and autograd.
* ``compile``: ``torch.compile`` of it (AOTAutograd compiles the backward too).
* ``liger``: Liger's ``LigerGEGLUMLP``, whose GeLU·mul has its own backward kernel.
* ``fused``: our :class:`~profiling_guide.kernels.fused_mlp.FusedGeGLUMLP` through
  :class:`~profiling_guide.kernels.fused_mlp.GeGLUFunction`.

**The reference** (``nine_gemms_us``): cuBLAS's nine GEMMs of the step, timed
alone back to back, with nothing between them, the same way. A reference, not
a floor: our kernels can beat it (the forward's gate/up kernel is faster than
cuBLAS's two GEMMs), and inside a profiled eager step the same nine GEMMs
have summed to less than it.

Each variant's gradients are first checked against eager's; device time per
step is the median over ``repeats`` interleaved passes cycling through
rotating inputs larger than the L2 cache (:func:`~profiling_guide.measure.capture.median_rotating_us`).
Memory, per variant, from the CUDA caching allocator's counters, one step
after warm-up: ``saved_mb``, what the forward leaves allocated for the
backward (allocated after the forward, less before it, less the output y),
and ``peak_mb``, the step's peak above what was allocated when it began (the
gradients included).

**Clocks** (``clocks``): after the timing, each variant's timing loop and
the nine GEMMs' run again, over and over for a second and a half, while ``nvidia-smi``
samples the SM clock, the power draw and why the clock was held down
(:mod:`~profiling_guide.measure.clocks`): the clocks the times were taken
at. Where a loop draws the GPU to its power limit, the driver lowers the SM
clock for every kernel in it.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from profiling_guide.errors import GuideError
from profiling_guide.kernels.models import SimpleGeGLUMLP, mlp_flops
from profiling_guide.measure.bench_mlp import DTYPE, _rel_error, build_variant
from profiling_guide.measure.capture import median_rotating_us, require_cuda_memory
from profiling_guide.measure.clocks import clocks_while, describe
from profiling_guide.measure.timing import REPEATS
from profiling_guide.spread import Spread

STEP_VARIANTS = ("eager", "compile", "liger", "fused")
NINE_GEMMS = "cuBLAS's nine GEMMs alone"
# max|grad - grad_eager| / max|grad_eager| above this is a wrong backward: bf16
# gradients of two correct implementations differ by a few bf16 ulps (~1 %).
WRONG_GRADIENT = 5e-2
GRADIENTS = ("x", "gate", "up", "down")


def _build(name: str, mlp: SimpleGeGLUMLP) -> tuple[torch.nn.Module, str | None]:
    """Variant ``name`` (one of :data:`STEP_VARIANTS`) sharing ``mlp``'s weights, as the forward benchmark builds it."""
    return build_variant(name, mlp)


def _parameters(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The gate, up and down weights of any of the variants (compiled ones wrap the module)."""
    inner = getattr(module, "_orig_mod", module)
    return [inner.gate_proj.weight, inner.up_proj.weight, inner.down_proj.weight]


def training_step(module: torch.nn.Module) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """One forward and backward of ``module`` on (x, dy): x's and every weight's gradient, set afresh each time."""
    params = _parameters(module)

    def step(x: torch.Tensor, dy: torch.Tensor) -> None:
        for t in (x, *params):
            t.grad = None  # as optimizer.zero_grad() does: no accumulation kernels
        module(x).backward(dy)

    return step


def nine_gemms(mlp: SimpleGeGLUMLP) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """cuBLAS's nine GEMMs of one training step, back to back, each on the operands autograd would give it.

    Forward: g, u and the down GEMM (which reads g in place of h). Backward:
    dh = dy @ Wd and dWd = dy.T @ h for the down projection; dWg = dg.T @ x,
    dWu = du.T @ x, dX = dg @ Wg and dX = du @ Wu for gate and up, with dh
    standing in for dg and du (same shapes, same layouts).
    """
    wg, wu, wd = (m.weight.detach() for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))

    def gemms_alone(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
            g = F.linear(x2, wg)
            F.linear(x2, wu)
            F.linear(g, wd)
            dh = dy2 @ wd
            dy2.T @ g
            dh.T @ x2
            dh.T @ x2
            dh @ wg
            return dh @ wu

    return gemms_alone


def _gradients(module, x: torch.Tensor, dy: torch.Tensor) -> list[torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    training_step(module)(x, dy)
    return [x.grad, *(p.grad for p in _parameters(module))]


def _memory(step: Callable, module, x: torch.Tensor, dy: torch.Tensor) -> dict:
    """MB the forward leaves for the backward, and the step's peak above its start (one warm step)."""
    step(x, dy)  # warm: compiled, autotuned, the allocator's pools filled
    for t in (x, *_parameters(module)):
        t.grad = None
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    y = module(x)
    torch.cuda.synchronize()
    saved = torch.cuda.memory_allocated() - start - y.numel() * y.element_size()
    y.backward(dy)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - start
    del y
    for t in (x, *_parameters(module)):
        t.grad = None
    return {"saved_mb": round(saved / 1e6, 2), "peak_mb": round(peak / 1e6, 2)}


# Not split, though radon rates it D: a split changes the code chapter 6b's benchmark recording
# fingerprints (plot_06b_training_step.py: code=[bench_step.measure_training_step, ...]), by its
# listed code and by its closure alike, so it would go stale on both GPUs until recorded again on
# a GPU. In order: the checks, the rotating inputs, each variant built and its gradients checked,
# the interleaved timing, the clocks.
def measure_training_step(
    batch: int = 64,
    seq: int = 128,
    dim: int = 768,
    hidden: int = 3072,
    variants: Sequence[str] = STEP_VARIANTS,
    *,
    rounds: int = 10,
    repeats: int = REPEATS,
    seed: int = 0,
    progress: Callable[[str], object] = print,
) -> dict:
    """Check and time the training step of ``variants`` at ``[batch, seq, dim]`` → ``hidden``: a JSON-ready dict.

    Keys: ``shape``, ``flops`` (the nine GEMMs': 3 × the forward's),
    ``variants_us`` (name → device-time spread per step: ``median``, ``q1``,
    ``q3``, ``repeats``), ``nine_gemms_us`` (the nine GEMMs alone, the same way),
    ``ratio_to_nine_gemms`` (name → median ÷ the nine GEMMs' median),
    ``memory`` (name → ``saved_mb``, ``peak_mb``), ``max_rel_error`` (name →
    gradient → vs eager), ``errors`` (name → one line), ``wrong``, ``notes``,
    ``timing``.
    """
    if not torch.cuda.is_available():
        raise GuideError("the training-step benchmark runs on a CUDA GPU and none is visible")
    unknown = [v for v in variants if v not in STEP_VARIANTS]
    if unknown:
        raise GuideError(f"unknown training-step variant {unknown[0]!r}: choose from {', '.join(STEP_VARIANTS)}")
    rows = batch * seq
    x_bytes = rows * dim * DTYPE.itemsize
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 0) or 50 * 2**20
    n_inputs = max(3, min(256, math.ceil(2 * l2 / (2 * x_bytes))))  # (x, dy) pairs: twice the L2 together
    # inputs; eager's g, u, gelu(g), h, dh, dg, du; the gradients, twice (eager's kept for the checks)
    need = 2 * n_inputs * x_bytes + rows * hidden * 2 * 8 + 4 * (rows * dim + 3 * dim * hidden) * 2
    require_cuda_memory(need, f"the training-step benchmark at {rows} rows, dim {dim}, hidden {hidden}")
    torch.manual_seed(seed)
    mlp = SimpleGeGLUMLP(dim, hidden, device="cuda", dtype=DTYPE)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs = [(torch.randn(batch, seq, dim, device="cuda", dtype=DTYPE, generator=gen).requires_grad_(),
               torch.randn(batch, seq, dim, device="cuda", dtype=DTYPE, generator=gen)) for _ in range(n_inputs)]  # fmt: skip
    result: dict = {
        "shape": {"batch": batch, "seq": seq, "rows": rows, "dim": dim, "hidden": hidden, "dtype": "bfloat16"},
        "flops": 3 * mlp_flops(rows, dim, hidden),
        "variants_us": {}, "memory": {}, "max_rel_error": {}, "errors": {}, "wrong": [], "notes": {}, "clocks": {},
        "timing": {"method": "device time per training step (forward + backward, no optimizer), queue kept full, "
                             "rotating inputs", "rounds": rounds, "repeats": repeats, "inputs": n_inputs},
    }  # fmt: skip
    progress(f"training step {[batch, seq, dim]} → {hidden}: {n_inputs} rotating (x, dy) pairs")
    want = _gradients(mlp, *inputs[0])
    ready: dict[str, Callable] = {NINE_GEMMS: nine_gemms(mlp)}
    for name in variants:
        try:
            module, note = _build(name, mlp)
            if note:
                result["notes"][name] = note
            got = _gradients(module, *inputs[0])  # compiles / autotunes the forward and the backward
            # noqa below: _gradients returns one gradient per name of GRADIENTS for both
            errors = {what: _rel_error(g, w) for what, g, w in zip(GRADIENTS, got, want)}  # noqa: B905
            result["max_rel_error"][name] = {k: v if math.isfinite(v) else None for k, v in errors.items()}
            worst = max(errors, key=lambda k: errors[k] if math.isfinite(errors[k]) else math.inf)
            if not errors[worst] <= WRONG_GRADIENT:
                result["errors"][name] = f"wrong gradient of {worst}: max rel error vs eager {errors[worst]:.2e}"
                result["wrong"].append(name)
                progress(f"  {name}: WRONG GRADIENT of {worst}, max rel error vs eager {errors[worst]:.2e}")
                continue
            step = training_step(module)
            result["memory"][name] = _memory(step, module, *inputs[0])
            ready[name] = step
            if name == "fused":
                result["notes"][name] = f"design='auto' ran {module.design_ran!r}"
            progress(f"  {name}: ready, worst gradient error vs eager {errors[worst]:.1e} ({worst}); "
                     f"saved {result['memory'][name]['saved_mb']:.0f} MB, peak {result['memory'][name]['peak_mb']:.0f} MB")
        except Exception as exc:  # one variant's failure is recorded, the run goes on
            text = str(exc).strip().splitlines()
            result["errors"][name] = f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")
            progress(f"  {name}: error: {result['errors'][name]}")
    samples: dict[str, list[float]] = {name: [] for name in ready}
    for _ in range(repeats):
        for name, fn in ready.items():
            samples[name].append(median_rotating_us(fn, inputs, rounds=rounds))
    for name in ready:
        spread = Spread.of(samples[name])
        if name == NINE_GEMMS:
            result["nine_gemms_us"] = spread.to_dict()
        else:
            result["variants_us"][name] = spread.to_dict()
        progress(f"  {name}: {spread:.1f} µs device time per step")
    for name, fn in ready.items():
        # the clocks of the timing loop itself: a bare loop of steps keeps the GPU busier than it did
        summary = clocks_while(lambda fn=fn: median_rotating_us(fn, inputs, rounds=rounds), batch=1)
        if summary is None:
            result["notes"]["clocks"] = "not sampled: nvidia-smi is not on the PATH or gave no reading"
            break
        result["clocks"][name] = summary
        progress(f"  {name}: {describe(summary)}")
    floor = result["nine_gemms_us"]["median"]
    result["ratio_to_nine_gemms"] = {k: round(v["median"] / floor, 4) for k, v in result["variants_us"].items()}
    del ready
    torch.cuda.empty_cache()
    return result


_RUNS: dict[str, dict] = {}


def run_training_step(*args, **kwargs) -> dict:
    """:func:`measure_training_step` (same arguments), measured once per process: pages that show it read one run."""
    key = json.dumps([args, kwargs], sort_keys=True, default=repr)
    if key not in _RUNS:
        _RUNS[key] = measure_training_step(*args, **kwargs)
    return copy.deepcopy(_RUNS[key])


def format_training_step(result: dict) -> str:
    """The training-step benchmark as a plain-text table (the CLI prints it), with the clocks where sampled."""
    nine = result.get("nine_gemms_us")
    clocks = result.get("clocks", {})

    def clock_cells(name):
        if not clocks:  # no columns at all where no clocks were sampled
            return ""
        c = clocks.get(name)
        return f"{c['sm_mhz']:>8.0f}{c['power_w']:>7.0f}" if c else f"{'':>8}{'':>7}"

    lines = [f"{'training step':<24}{'device µs (IQR)':>26}{'× nine GEMMs':>14}{'saved MB':>10}{'peak MB':>10}"
             + (f"{'SM MHz':>8}{'W':>7}" if clocks else "")]  # fmt: skip
    if nine:
        lines.append(f"{NINE_GEMMS:<24}{_cell(nine):>26}{1.0:>14.3f}{'':>10}{'':>10}{clock_cells(NINE_GEMMS)}")
    for name, spread in result["variants_us"].items():
        mem = result["memory"].get(name, {})
        lines.append(f"{name:<24}{_cell(spread):>26}{result['ratio_to_nine_gemms'][name]:>14.3f}"
                     f"{mem.get('saved_mb', float('nan')):>10.0f}{mem.get('peak_mb', float('nan')):>10.0f}"
                     f"{clock_cells(name)}")  # fmt: skip
    for name, error in result["errors"].items():
        lines.append(f"{name:<24}{error}")
    if clocks:
        c = next(iter(clocks.values()))
        lines.append(f"SM MHz, W: medians while each timing loop ran again (nvidia-smi; the GPU's maximum "
                     f"{c['max_sm_mhz']:.0f} MHz, limit {c['power_limit_w']:.0f} W)")  # fmt: skip
    return "\n".join(lines)


def _cell(spread: dict) -> str:
    return f"{spread['median']:.1f} ({spread['q1']:.1f}–{spread['q3']:.1f})"
