"""Probe: how fast can a Triton gate/up kernel with the GeGLU epilogue go, against cuBLAS's bare GEMMs?

    python scripts/probe_gate_up.py [--out results.json] [--quick | --configs ...] [--quack]

Times, the benchmark's way (queue kept full behind a sleep kernel, 10 rotating
inputs, 20 rounds, 7 interleaved repeats; medians and IQR): cuBLAS's gate and
up GEMMs alone, cuBLAS's down GEMM alone, and a persistent TMA gate/up kernel
over a grid of configs and variants that the module's own kernel
(``geglu_packed_tma``) does not all offer: subtiled TMA stores, warp
specialization, two programs per SM (or one per tile), and the exact or the
hardware-tanh epilogue. It is how those variants were tried. With ``--quack``
it also times quack-kernels' gated GEMM (CuTe DSL) as an external anchor,
when that package imports. Prints one line per candidate to the console (with
the compiled kernel's shared memory, registers and spills); the six fastest
Triton candidates and the two fastest quack ones are timed again carefully.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, "src")
from profiling_guide.kernels.fused_mlp import max_rel_error, pack_gate_up  # noqa: E402
from profiling_guide.kernels.geglu_common import gelu_tanh_times, tile_coordinates  # noqa: E402
from profiling_guide.measure.capture import median_rotating_us  # noqa: E402
from profiling_guide.spread import Spread  # noqa: E402


@triton.jit
def gate_up_kernel(x_desc, w_desc, h_desc, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, FLATTEN: tl.constexpr,
                   WARP_SPECIALIZE: tl.constexpr, SUBTILE: tl.constexpr, TANH: tl.constexpr):
    start = tl.program_id(0)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    tile_c = start - NUM_PROGRAMS
    for tile_id in tl.range(start, num_tiles, NUM_PROGRAMS, flatten=FLATTEN,
                            warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coordinates(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_w = pid_n * 2 * BLOCK_N
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for ki in range(k_steps):
            x = x_desc.load([off_m, ki * BLOCK_K])
            w = w_desc.load([off_w, ki * BLOCK_K])
            acc = tl.dot(x, w.T, acc)
        tile_c += NUM_PROGRAMS
        pid_m, pid_n = tile_coordinates(tile_c, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        g, u = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        h = gelu_tanh_times(g, u, TANH).to(h_desc.dtype)
        if SUBTILE:
            # two stores of half the width: half the staging buffer in shared memory
            h0, h1 = tl.split(tl.permute(tl.reshape(h, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], h0)
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], h1)
        else:
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], h)


def quack_candidates(packed, hidden):
    """quack-kernels' gated GEMM (CuTe DSL, sm90 pingpong/cooperative) as an external anchor, when importable."""
    try:
        from quack.gemm_config import GemmConfig
        from quack.gemm_interface import gemm_gated
    except Exception as exc:  # noqa: BLE001
        print(f"quack: not importable ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
        return {}
    try:  # quack 0.6.5 cannot key the ContextVar that cutlass-dsl 4.8 leaves in an epilogue's closure
        import contextvars

        from quack.gemm_runtime import identity
        keyer = identity.semantic_value_key

        def semantic_value_key(value, seen):
            if isinstance(value, contextvars.ContextVar):
                return ("contextvar", value.name)
            try:
                return keyer(value, seen)
            except TypeError:  # one process, fixed code: the type names the value well enough
                return ("opaque", type(value).__module__, type(value).__qualname__)
        identity.semantic_value_key = semantic_value_key
    except Exception as exc:  # noqa: BLE001
        print(f"quack: key patch not applied ({type(exc).__name__}: {exc})", flush=True)
    b = packed.T  # (K, 2·hidden), columns interleaved gate/up: quack's gated layout
    out = {}
    pins = {"default": None,
            "128x192 pp c2x1": GemmConfig(128, 192, pingpong=True, cluster_m=2, cluster_n=1,
                                         is_dynamic_persistent=False, device_capacity=9),
            "128x192 pp c1x1": GemmConfig(128, 192, pingpong=True, cluster_m=1, cluster_n=1,
                                         is_dynamic_persistent=False, device_capacity=9),
            "128x128 pp c2x1": GemmConfig(128, 128, pingpong=True, cluster_m=2, cluster_n=1,
                                         is_dynamic_persistent=False, device_capacity=9),
            "128x128 pp c1x1": GemmConfig(128, 128, pingpong=True, cluster_m=1, cluster_n=1,
                                         is_dynamic_persistent=False, device_capacity=9),
            "256x192 coop c2x1": GemmConfig(256, 192, pingpong=False, cluster_m=2, cluster_n=1,
                                           is_dynamic_persistent=False, device_capacity=9),
            "128x256 coop c1x2": GemmConfig(128, 256, pingpong=False, cluster_m=1, cluster_n=2,
                                           is_dynamic_persistent=False, device_capacity=9)}
    for name, cfg in pins.items():
        def run(x, cfg=cfg):
            return gemm_gated(x, b, activation="geglu", store_preact=False, tuned=False, config=cfg)[1]
        out[f"quack {name}"] = run
    return out


def mlp_candidates(gate_up, wg, wu, wd):
    """Whole-MLP forwards: cuBLAS's three bare GEMMs, ours as the module runs it, and ours in row chunks.

    In chunks, the down GEMM of chunk i runs on a second stream while the
    gate/up kernel of chunk i+1 runs on the first: the down GEMM's programs
    can take the SMs that the gate/up kernel's last, partial wave leaves idle.
    """
    out = {"mlp ours": lambda x: F.linear(gate_up(x), wd)}
    side = torch.cuda.Stream()

    def chunked(x, n):
        main = torch.cuda.current_stream()
        rows = x.shape[0] // n
        y = torch.empty(x.shape[0], wd.shape[0], device=x.device, dtype=x.dtype)
        side.wait_stream(main)
        for i in range(n):
            h = gate_up(x[i * rows:(i + 1) * rows])
            done = torch.cuda.Event()
            done.record(main)
            with torch.cuda.stream(side):
                side.wait_event(done)
                torch.mm(h, wd.T, out=y[i * rows:(i + 1) * rows])
            h.record_stream(side)
        main.wait_stream(side)
        return y
    for n in (2, 4, 8):
        out[f"mlp ours {n} chunks, 2 streams"] = lambda x, n=n: chunked(x, n)
    return out


def launcher(packed, hidden, cfg, sms):
    bm, bn, bk, gm, warps, stages, ws, sub, per_sm, tanh, ctas, flat = cfg
    w_desc = TensorDescriptor.from_tensor(packed, [2 * bn, bk])

    def run(x):
        M, K = x.shape
        h = torch.empty(M, hidden, device=x.device, dtype=x.dtype)
        x_desc = TensorDescriptor.from_tensor(x, [bm, bk])
        h_desc = TensorDescriptor.from_tensor(h, [bm, bn // 2 if sub else bn])
        tiles = triton.cdiv(M, bm) * triton.cdiv(hidden, bn)
        programs = min(tiles, per_sm * sms) if per_sm else tiles  # 0: one program per tile
        compiled = gate_up_kernel[(programs,)](
            x_desc, w_desc, h_desc, M, hidden, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm,
            NUM_PROGRAMS=programs, FLATTEN=flat, WARP_SPECIALIZE=ws, SUBTILE=sub, TANH=tanh,
            num_warps=warps, num_stages=stages, num_ctas=ctas)
        run.resources = (f"{compiled.metadata.shared // 1024} KiB shared, {compiled.n_regs} registers, "
                         f"{compiled.n_spills} spilled, {programs} programs")
        return h
    return run


def versions() -> dict:
    """torch, CUDA, Triton, and quack and the CUTLASS DSL where they import."""
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__}
    for name in ("quack", "cutlass"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001
            pass
    return out


def arguments() -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="8 configs instead of the full grid")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--configs", default=None,
                    help="configs to try instead of the grid: BM,BN,BK,GROUP_M,warps,stages,ws,sub"
                         "[,per_sm,tanh,ctas,flatten];... (ws, sub, tanh, flatten: 0 or 1; per_sm: programs per "
                         "SM, 0 for one per tile; ctas: Triton's num_ctas; default 1,0,1 and flatten unless ws),"
                         " e.g. 128,64,64,4,4,3,0,0,2,1,1,0")
    ap.add_argument("--mlp", action="store_true",
                    help="also time whole-MLP forwards with the first config: plain, and in row chunks on 2 streams "
                         "(with --quack, also with the fastest quack kernel as the gate/up)")
    ap.add_argument("--quack", action="store_true", help="also time quack-kernels' gated GEMM, if importable")
    return ap, ap.parse_args()


def config_grid(ap: argparse.ArgumentParser, a: argparse.Namespace) -> list[tuple]:
    """The configs to try: the full grid, the --quick eight, or those --configs names."""
    if a.configs:
        grid = []
        for text in a.configs.split(";"):
            try:
                c = [int(v) for v in text.split(",")]
            except ValueError:
                ap.error(f"--configs: {text!r} is not a comma-separated list of integers")
            if not 8 <= len(c) <= 12:
                ap.error(f"--configs: {text!r} has {len(c)} numbers; give 8 to 12 (see --help)")
            c += [1, 0, 1, int(not c[6])][len(c) - 8:]  # per_sm, tanh, ctas, flatten defaults
            grid.append((*c[:6], bool(c[6]), bool(c[7]), c[8], bool(c[9]), c[10], bool(c[11])))
        return grid
    if a.quick:  # the fastest of the full grid on an H100, and wider K steps
        grid = [(128, 128, 64, 4, 8, 4, False, False), (128, 128, 64, 8, 8, 4, False, False),
                (128, 128, 64, 16, 8, 4, False, False), (128, 128, 64, 1, 8, 4, False, False),
                (256, 64, 64, 4, 8, 4, False, True), (128, 128, 128, 4, 8, 2, False, True),
                (128, 128, 128, 8, 8, 2, False, True), (128, 128, 64, 4, 8, 5, False, True)]
        return [(*c, 1, False, 1, not c[6]) for c in grid]
    grid = list(itertools.product([128, 256], [64, 128], [64], [4, 8], [8], [3, 4],
                                  [False, True], [False, True], [1], [False], [1]))
    return [(*c, not c[6]) for c in grid]


def config_name(cfg: tuple) -> str:
    bm, bn, bk, gm, warps, stages, ws, sub, per_sm, tanh, ctas, flat = cfg
    return (f"triton {bm}x{bn}x{bk} g{gm} w{warps} s{stages}{' ws' if ws else ''}{' sub' if sub else ''}"
            f" {per_sm or 'all'}/SM{' tanh' if tanh else ''}{f' {ctas} CTAs' if ctas > 1 else ''}"
            f"{' unflattened' if not flat and not ws else ''}")


def fits(cfg: tuple) -> bool:
    """Does the config fit an SM's shared memory and keep its accumulator in registers? Says so if not."""
    bm, bn, bk, gm, warps, stages, ws, sub, per_sm, tanh, ctas, flat = cfg
    smem = stages * 2 * bk * (bm + 2 * bn) + 2 * bm * (bn // 2 if sub else bn)
    regs = 2 * bm * bn / (32 * warps)  # fp32 accumulator registers per thread
    # an SM has 228 KiB of shared memory, 1 KiB of it reserved per resident program
    if (smem + 1024) * max(per_sm, 1) > 228 * 1024 or regs > 128:  # would not fit, or spill
        print(f"skipped {cfg}: {smem // 1024} KiB shared memory, {regs:.0f} accumulator registers")
        return False
    return True


def triton_candidates(grid, packed, hidden, sms, xs, want) -> dict:
    """Each config that fits and computes h right: ``name -> (run, inputs, quick µs)``."""
    found = {}
    for cfg in filter(fits, grid):
        name = config_name(cfg)
        run = launcher(packed, hidden, cfg, sms)
        try:
            h = run(xs[0][0])
            torch.cuda.synchronize()
            err = max_rel_error(h, want)
            if err > 1e-2:
                print(f"{name}: WRONG err {err:.2e}", flush=True)
                continue
            quick = median_rotating_us(run, xs, rounds=5)
        except Exception as exc:  # noqa: BLE001
            print(f"{name}: {type(exc).__name__} {str(exc)[:100]}", flush=True)
            continue
        print(f"{name}: {quick:.1f} us (quick); {run.resources}", flush=True)
        found[name] = (run, xs, quick)
    return found


def whole_mlp_candidates(gate_up, wg, wu, wd, xs, hs) -> dict:
    """cuBLAS's three GEMMs alone, and the whole forward with ``gate_up``, plain and in row chunks."""
    xhs = [(x, h) for (x,), (h,) in zip(xs, hs)]
    alone = lambda x, h: (F.linear(x, wg), F.linear(x, wu), F.linear(h, wd))  # noqa: E731
    found = {"cublas GEMMs alone": (alone, xhs, median_rotating_us(alone, xhs, rounds=5))}
    ref = F.linear(gate_up(xs[0][0]), wd).float()
    for name, run in mlp_candidates(gate_up, wg, wu, wd).items():
        err = max_rel_error(run(xs[0][0]), ref)
        print(f"{name}: max rel error against the plain forward {err:.1e}", flush=True)
        found[name] = (run, xs, median_rotating_us(run, xs, rounds=5))
    return found


def quack_timed(packed, hidden, xs, want) -> dict:
    """quack-kernels' gated GEMMs that compute h right, if quack imports."""
    found = {}
    for name, run in quack_candidates(packed, hidden).items():
        try:
            t0 = time.perf_counter()
            h = run(xs[0][0])
            torch.cuda.synchronize()
            err = max_rel_error(h, want)
            quick = median_rotating_us(run, xs, rounds=5)
        except Exception as exc:  # noqa: BLE001
            print(f"{name}: {type(exc).__name__} {str(exc)[:200]}", flush=True)
            continue
        print(f"{name}: {quick:.1f} us (quick), err {err:.1e}, first call "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        if err <= 1e-2:
            found[name] = (run, xs, quick)
    return found


def careful_timing(cands: dict, repeats: int) -> dict[str, list[float]]:
    """The 6 fastest configs (and the 2 fastest quack ones), cuBLAS and the whole MLPs, timed interleaved."""
    tri = sorted((k for k in cands if k.startswith("triton")), key=lambda k: cands[k][2])[:6]
    tri += sorted((k for k in cands if k.startswith("quack")), key=lambda k: cands[k][2])[:2]
    whole = [k for k in cands if k.startswith(("mlp", "cublas GEMMs"))]
    final = ["cublas gate+up alone", "cublas down alone", *tri, *whole]
    runs = {k: [] for k in final}
    for _ in range(repeats):
        for k in final:
            runs[k].append(median_rotating_us(cands[k][0], cands[k][1]))
    return runs


def main() -> int:
    ap, a = arguments()
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    M, dim, hidden = 8192, 768, 3072
    wg = torch.randn(hidden, dim, device=dev, dtype=dt) / dim**0.5
    wu = torch.randn(hidden, dim, device=dev, dtype=dt) / dim**0.5
    wd = torch.randn(dim, hidden, device=dev, dtype=dt) / hidden**0.5
    packed = pack_gate_up(wg, wu)
    xs = [(torch.randn(M, dim, device=dev, dtype=dt),) for _ in range(10)]
    hs = [(torch.randn(M, hidden, device=dev, dtype=dt),) for _ in range(10)]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    want = F.gelu(xs[0][0].float() @ wg.float().T, approximate="tanh") * (xs[0][0].float() @ wu.float().T)

    cands = {
        "cublas gate+up alone": (lambda x: (F.linear(x, wg), F.linear(x, wu)), xs),
        "cublas down alone": (lambda h: F.linear(h, wd), hs),
    }
    grid = config_grid(ap, a)
    cands |= triton_candidates(grid, packed, hidden, sms, xs, want)
    if a.mlp:
        cands |= whole_mlp_candidates(launcher(packed, hidden, grid[0], sms), wg, wu, wd, xs, hs)
    if a.quack:
        cands |= quack_timed(packed, hidden, xs, want)
        fastest = min((k for k in cands if k.startswith("quack")), key=lambda k: cands[k][2], default=None)
        if a.mlp and fastest:  # the whole MLP with the anchor as its gate/up kernel
            def quack_mlp(x, gate_up=cands[fastest][0]):
                return F.linear(gate_up(x), wd)
            cands[f"mlp {fastest} + cuBLAS down"] = (quack_mlp, xs, median_rotating_us(quack_mlp, xs, rounds=5))
    runs = careful_timing(cands, a.repeats)
    out = {k: Spread.of(v).to_dict() for k, v in runs.items()}
    base = Spread.of(runs["cublas gate+up alone"])
    for k, v in runs.items():
        s = Spread.of(v)
        print(f"{k:<45} {s:.1f} us  ratio to cublas gate+up {s.median / base.median:.3f}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "results": out, "versions": versions(),
                       "shape": {"rows": M, "dim": dim, "hidden": hidden, "dtype": "bfloat16"},
                       "method": "median_rotating_us (queue full, 10 rotating inputs, 20 rounds), "
                                 f"{a.repeats} interleaved repeats: median and IQR",
                       "date": time.strftime("%Y-%m-%d")}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
