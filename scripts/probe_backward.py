"""Probe: the backward's epilogue-fused GEMM, Gluon ping-pong against packed-tma and cuBLAS, on a Hopper GPU.

    python scripts/probe_backward.py [--out results.json] [--check-only] [--repeats 7] [--sweep]

First checks ``geglu_backward`` with ``design="pingpong"`` (the default
config, 128-column tiles holding two, four or one of their chunks of g and u,
one consumer, 64-row tiles) against torch's float64 autograd of the GeGLU on
several shapes, ragged ones included, and that a second call gives the same
bits. Then times, the benchmark's way (queue kept full, 10 rotating inputs,
medians and IQR over interleaved repeats): cuBLAS's bare dh = dy @ Wd GEMM,
``packed-tma`` and each ping-pong config; and the forward's gate/up kernels a
training step could run: cuBLAS's gate and up GEMMs, ``packed-tma`` and
``pingpong``, each with and without g and u saved; and, for each ping-pong
config, a training step's six kernels with the dh kernel in that config
(``step_us``): a config that is fastest alone need not be fastest where it
runs; and the step with the default config launched without programmatic
dependent launch (``…, not dependent``). Last, the clocks (``clocks``):
cuBLAS's dh GEMM, the default config and 128×128 tiles holding two chunks,
each alone and inside the step, timed over and over the benchmark's way while
``nvidia-smi`` samples the SM clock, the power draw and what held the clock
down (:mod:`profiling_guide.measure.clocks`). Prints one line per step;
``--out`` writes the timings as JSON, with the GPU, the versions and the
method.
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, "src")
from profiling_guide.kernels import geglu_backward_pingpong as bp  # noqa: E402
from profiling_guide.kernels.fused_mlp import geglu, max_rel_error  # noqa: E402
from profiling_guide.kernels.geglu_backward import geglu_backward, reference_grads  # noqa: E402
from profiling_guide.measure.capture import median_rotating_us  # noqa: E402
from profiling_guide.measure.clocks import clocks_while, describe  # noqa: E402
from profiling_guide.measure.timing import device_times  # noqa: E402
from probe_checks import GUIDE_SHAPE, checked, guide_weights, probe_main  # noqa: E402

SHAPES = [(8192, 768, 3072), (1000, 768, 3072), (257, 264, 520), (4096, 4096, 11008), (77, 64, 8), (130, 200, 136)]
CHECKED = [bp.DEFAULT_CONFIG, bp._config(128, 128, 64, 1, 5, gu_bufs=2), bp._config(128, 128, 64, 8, 3),
           bp._config(128, 128, 64, 1, 6, gu_bufs=1), bp._config(128, 128, 64, 1, 5, consumers=1, gu_bufs=2),
           bp._config(64, 64, 64, 1, 12)]


def check(dtype) -> bool:
    ok = True
    for M, dim, hidden in SHAPES:
        dy = torch.randn(M, dim, device="cuda", dtype=dtype)
        wd = torch.randn(dim, hidden, device="cuda", dtype=dtype) / hidden**0.5
        gu = torch.randn(M, 2 * hidden, device="cuda", dtype=dtype)
        g, u = gu[:, :hidden], gu[:, hidden:]
        want_dg, want_du = reference_grads(dy.double() @ wd.double(), g, u)

        def error(dgu):
            return max(max_rel_error(dgu[:, :hidden], want_dg), max_rel_error(dgu[:, hidden:], want_du))

        base_err = error(geglu_backward(dy, wd, gu, design="packed-tma"))
        for cfg in CHECKED:
            ok &= checked(f"{dtype} {M}x{dim}x{hidden} {cfg.kwargs}: dgu",
                          lambda cfg=cfg: geglu_backward(dy, wd, gu, design="pingpong", config=cfg), error, base_err)
    return ok


def sweep_configs():
    """128×128 tiles of dh holding 1 to 4 of their 32-column chunks of g and u (the ring as deep as fits),
    tile orders; 128×64 tiles holding theirs whole or one chunk; 64-row tiles; 64-column chunks; one consumer."""
    c = bp._config
    out = [c(128, 128, 64, group_m, 5, gu_bufs=2) for group_m in (1, 4, 8)]
    out += [c(128, 128, 64, 1, 6, gu_bufs=1), c(128, 128, 64, 1, 4, gu_bufs=3), c(128, 128, 64, 1, 3, gu_bufs=4)]
    out += [c(128, 64, 64, group_m, 6) for group_m in (1, 4)] + [c(128, 64, 64, 1, 8, gu_bufs=1)]
    out += [c(64, 64, 64, 1, 12), c(64, 128, 64, 1, 6), c(128, 128, 64, 1, 5, sub_n=64, gu_bufs=1)]
    return out + [c(128, 128, 64, 1, 5, consumers=1, gu_bufs=2)]


def timings(repeats: int, sweep: bool) -> dict:
    dt = torch.bfloat16
    M, dim, hidden = GUIDE_SHAPE
    wg, wu, wd, packed = guide_weights(dt)
    # (dy or x, gu): dy and x have one shape, so one rotation serves the backward and the forward
    inputs = [(torch.randn(M, dim, device="cuda", dtype=dt), torch.randn(M, 2 * hidden, device="cuda", dtype=dt))
              for _ in range(10)]  # fmt: skip
    fns = {"cublas dh GEMM": lambda dy, gu: dy @ wd,
           "packed-tma": lambda dy, gu: geglu_backward(dy, wd, gu, design="packed-tma")}
    for design, save in (("packed-tma", False), ("packed-tma", True), ("pingpong", False), ("pingpong", True)):
        fns[f"forward {design}{' saving g, u' if save else ''}"] = (
            lambda x, gu, d=design, s=save: geglu(x, wg, wu, design=d, packed_weight=packed, save_gate_up=s))
    fns["forward cublas gate and up GEMMs"] = lambda x, gu: (x @ wg.T, x @ wu.T)
    configs = sweep_configs() if sweep else [bp.DEFAULT_CONFIG, bp._config(128, 128, 64, 1, 5, gu_bufs=2),
                                             bp._config(128, 64, 64, 1, 6, consumers=1)]
    steps = {}  # the same configs where they run: inside a training step's six kernels
    for cfg in configs:
        name = config_name(cfg)
        fns[name] = lambda dy, gu, cfg=cfg: geglu_backward(dy, wd, gu, design="pingpong", config=cfg)
        steps[f"step with {name}"] = step_kernels(wg, wu, wd, packed, cfg)
    # the default config launched without programmatic dependent launch: what launching it as a dependent saves
    steps[f"step with {config_name(bp.DEFAULT_CONFIG)}, not dependent"] = step_kernels(wg, wu, wd, packed,
                                                                                         bp.DEFAULT_CONFIG, False)
    step_inputs = [(torch.randn(M, dim, device="cuda", dtype=dt), torch.randn(M, dim, device="cuda", dtype=dt))
                   for _ in range(5)]  # (x, dy)  # fmt: skip
    candidates = {**{n: (fn, inputs) for n, fn in fns.items()}, **{n: (fn, step_inputs) for n, fn in steps.items()}}
    for fn, ins in candidates.values():  # compile and autotune outside the timing
        fn(*ins[0])
    torch.cuda.synchronize()
    spreads = device_times(candidates, repeats=repeats, progress=lambda line: print(line, file=sys.stderr, flush=True))
    base = spreads["cublas dh GEMM"].median
    out, step_out = {}, {}
    for name, s in spreads.items():
        if name in steps:
            step_out[name] = {"median": s.median, "q1": s.q1, "q3": s.q3}
            print(f"{name}: {s.median:.1f} ({s.q1:.1f}-{s.q3:.1f}) us per step", flush=True)
            continue
        out[name] = {"median": s.median, "q1": s.q1, "q3": s.q3, "ratio_to_cublas_dh": s.median / base}
        print(f"{name}: {s.median:.1f} ({s.q1:.1f}-{s.q3:.1f}) us, {s.median / base:.3f}x cuBLAS's bare dh GEMM",
              flush=True)
    # The clocks each ran at, alone and in the step: a config's two times compare only at one clock
    clocks = {}
    wide = config_name(bp._config(128, 128, 64, 1, 5, gu_bufs=2))
    for name in ("cublas dh GEMM", config_name(bp.DEFAULT_CONFIG), wide,
                 f"step with {config_name(bp.DEFAULT_CONFIG)}", f"step with {wide}"):
        if name in candidates:
            fn, ins = candidates[name]
            clocks[name] = clocks_while(lambda fn=fn, ins=ins: median_rotating_us(fn, ins, rounds=5), batch=1)
            print(f"{name}: {describe(clocks[name])}", flush=True)
    return {"device_us": out, "step_us": step_out, "clocks": clocks}


def config_name(cfg) -> str:
    """How the timings name a ping-pong config: ``pingpong BLOCK_M=128 …``."""
    return "pingpong " + " ".join(f"{k}={v}" for k, v in cfg.kwargs.items())


def step_kernels(wg, wu, wd, packed, config, dependent=True):
    """A training step's six kernels as fused_mlp.GeGLUFunction runs them, with the dh kernel in ``config``.

    A kernel timed alone runs after itself; in a step it runs after the
    forward and the down GEMM, with what they left in L2 and in DRAM's
    queues, and the two can rank configs differently. ``dependent=False``
    launches the dh kernel without programmatic dependent launch.
    """
    stacked = torch.cat([wg, wu])  # [2·hidden, dim]: dx = dgu @ stacked

    def step(x, dy):
        h, gu = geglu(x, wg, wu, design="pingpong", packed_weight=packed, save_gate_up=True)
        y = h @ wd.T
        if dependent:
            dgu = geglu_backward(dy, wd, gu, design="pingpong", config=config)
        else:
            dgu = bp.geglu_backward_pingpong(dy, wd, gu, torch.empty_like(gu), config=config, dependent=False)
        return y, dgu @ stacked, dy.T @ h, dgu.T @ x

    return step


if __name__ == "__main__":
    sys.exit(probe_main(__doc__, check, timings))
