"""Record what the profiler costs the host on realistic training steps: profiler off and on, and the traces.

Seven training steps, eager and compiled (MLP stacks from host-bound to
GPU-bound, one with a ``torch.cuda.synchronize()`` after each block, and the
corpus's small GPT eager and through ``torch.compile``), each timed step by
step with the profiler off and on (``record_shapes=True``, CPU and CUDA
activities), three times in turn so that the host's drift falls on both.
Each step's *host time* is the time ``step()`` takes to return (the host
issuing the work; the GPU may still run), its *wall time* that and the
``torch.cuda.synchronize()`` after it::

    python scripts/record_profiler_cost.py --out tests/data/profiler_cost/h200

writes ``<case>.trace.json.gz`` (the first profiled window: four steps) and
``host_cost.json`` (the environment, and per case the samples of
``off_host``, ``off_wall``, ``on_host`` and ``on_wall``, µs per step). The profiler's cost on the host is
``on_host - off_host``: what ``profiling_guide.analysis.verdict`` estimates
from a trace alone and ``tests/test_profiler_cost.py`` checks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_verdict_corpus as corpus  # noqa: E402 - the corpus's models and step functions

ROUNDS, OFF_STEPS, WARMUP = 3, 15, 5


def mlp_step(dev, layers: int, dim: int, hidden: int, tokens: int, syncs: bool = False):
    model, opt, x = corpus.mlp_training(dev, layers=layers, dim=dim, hidden=hidden, tokens=tokens)
    hook = (lambda i, h: torch.cuda.synchronize()) if syncs else None
    return corpus.train_step_fn(model, opt, lambda: x, in_forward=hook)


def gpt_step(dev, compiled: bool):
    model, idx, targets = corpus.gpt_parts(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    return corpus.gpt_step(torch.compile(model) if compiled else model, opt, idx, targets)


CASES = {
    "mlp_small": lambda dev: mlp_step(dev, 8, 256, 1024, 64),
    "mlp_mid": lambda dev: mlp_step(dev, 8, 1024, 4096, 1024),
    "mlp_big": lambda dev: mlp_step(dev, 8, 1024, 4096, 4096),
    "mlp_big_syncs": lambda dev: mlp_step(dev, 8, 1024, 4096, 4096, syncs=True),
    "mlp_huge": lambda dev: mlp_step(dev, 4, 2048, 8192, 8192),
    "gpt_eager": lambda dev: gpt_step(dev, False),
    "gpt_compiled": lambda dev: gpt_step(dev, True),
}


def timed(step, n: int, prof=None) -> tuple[list[float], list[float]]:
    """Host and wall µs of ``n`` steps, each after a synchronize."""
    host, wall = [], []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append(1e6 * (t1 - t0))
        wall.append(1e6 * (t2 - t0))
        if prof is not None:
            prof.step()
    return host, wall


def record(name: str, step, out: Path) -> dict:
    timed(step, WARMUP)
    found = {"off_host": [], "off_wall": [], "on_host": [], "on_wall": []}
    for i in range(ROUNDS):
        host, wall = timed(step, OFF_STEPS)
        found["off_host"] += host
        found["off_wall"] += wall
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                     schedule=schedule(wait=1, warmup=1, active=4)) as prof:
            host, wall = timed(step, 6, prof)
        found["on_host"] += host[2:]  # the four active steps
        found["on_wall"] += wall[2:]
        if i == 0:
            prof.export_chrome_trace(str(out / f"{name}.trace.json.gz"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the traces and host_cost.json")
    parser.add_argument("--cases", nargs="*", choices=sorted(CASES), help="only these cases (default: all)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU here: the profiler's cost on the host is measured beside one", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    dev = corpus.Device("cuda", quick=False)
    found = {}
    for name, make in CASES.items():
        if args.cases and name not in args.cases:
            continue
        started = time.perf_counter()
        found[name] = record(name, make(dev), args.out)
        medians = {k: round(statistics.median(v)) for k, v in found[name].items()}
        print(f"{name}: {medians} µs ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    record_file = {"environment": corpus.environment(dev), "cases": found}
    (args.out / "host_cost.json").write_text(json.dumps(record_file, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
