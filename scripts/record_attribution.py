"""Record a small GPT's training step for attribution to modules and source lines, and for trace diffs.

    python scripts/record_attribution.py --out DIR                 # on a CUDA GPU
    python scripts/record_attribution.py --out DIR --device cpu --quick   # a smoke test, no GPU

The model is the verdict corpus's GPT (``scripts/record_verdict_corpus.py``:
token and position embeddings, pre-norm blocks with attention through SDPA and
a GELU MLP, layer norm, a tied head, fused AdamW). Each variant's step is
profiled with one step skipped, one warm-up and six active steps, CPU and
CUDA activities, ``record_shapes=True``, into ``<variant>.trace.json.gz``:

* ``eager_bare``: no ``with_stack``, no ``with_modules`` (what a bare trace holds);
* ``eager``: ``with_stack=True, with_modules=True``;
* ``eager_again``: the same, recorded a second time (the same program twice);
* ``compiled``: ``torch.compile`` (default mode), ``with_stack`` and ``with_modules``,
  with inductor's provenance tracking on; what inductor records each kernel
  fuses (``torch._inductor.debug.create_kernel_information_json()``: its
  source lines, post-grad and pre-grad nodes), taken after each graph's
  compile, goes to ``compiled.kernel_information.json``: a list, one object
  per graph (forward, backward);
* ``reduce_overhead``: ``torch.compile(mode="reduce-overhead")``, the same;
* ``graphed``: the eager step captured whole in one ``torch.cuda.graph``, the
  capture and six replays in one trace (the capture's launches, with their
  stacks and modules, are what each replayed kernel maps back to).

``timings.json`` holds, for the eager step, the wall time per step with the
profiler off, on (``record_shapes``), and on with ``with_stack`` and
``with_modules`` (seven repeats of ten steps each: median, quartiles), and the
environment. It imports torch and the corpus script only, so it runs on the GPU
machine as a plain file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_verdict_corpus import (  # noqa: E402 - the corpus script sits beside this one
    REPEATS,
    WARMUP_STEPS,
    Device,
    _gpt_graph_step,
    environment,
    gpt_parts,
    gpt_step,
    log,
    one_case,
    round_ms,
    spread,
)

ACTIVE = 6


def _activities(dev: Device) -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.cuda else [])


def _write_trace(prof, path: Path) -> None:
    partial = path.with_name("." + path.name + ".partial.json.gz")
    prof.export_chrome_trace(str(partial))
    os.replace(partial, path)


def profile_steps(step, dev: Device, path: Path, *, stack: bool) -> None:
    """Profile 2 + ACTIVE steps (skip one, warm one up, record the rest) and write the trace, all or nothing."""
    with profile(activities=_activities(dev), schedule=schedule(wait=1, warmup=1, active=ACTIVE),
                 record_shapes=True, with_stack=stack, with_modules=stack) as prof:
        for _ in range(2 + ACTIVE):
            step()
            prof.step()
    dev.sync()
    _write_trace(prof, path)


def time_steps(step, dev: Device, profiler: dict | None) -> dict:
    """Wall ms per step: REPEATS × (STEPS_PER_REPEAT steps between two synchronizations), under ``profiler``'s
    arguments (every step recorded) or with the profiler off (None)."""
    def run() -> list[float]:
        for _ in range(WARMUP_STEPS):
            step()
        dev.sync()
        return [round_ms(step, dev) for _ in range(REPEATS if not dev.quick else 2)]

    if profiler is None:
        return spread(run())
    with profile(activities=_activities(dev), **profiler):
        samples = run()
    return spread(samples)


class Provenance:
    """What inductor's provenance tracking records, one object per graph it compiles.

    Inductor keeps one graph's record at a time: compiling a forward graph starts
    afresh and puts the earlier record back when it is done, and a backward
    graph (compiled at the first backward) writes into that earlier record. So
    ``create_kernel_information_json()`` after profiling holds the backward
    graphs only. A snapshot after each graph's compile
    (``dump_inductor_provenance_info``, called once per graph) keeps every
    graph: the kernel calls not in an earlier snapshot are that graph's.
    """

    def __init__(self):
        import torch._inductor.debug as debug

        self.debug, self.graphs, self.seen = debug, [], set()
        self.dump = debug.dump_inductor_provenance_info
        self.snapshot()  # what an earlier compile left is not ours
        self.graphs.clear()

    def snapshot(self) -> None:
        graph = {}
        for key, value in self.debug.create_kernel_information_json().items():
            mark = (key, json.dumps(value, sort_keys=True))
            if mark not in self.seen:
                self.seen.add(mark)
                graph[key] = value
        if graph:
            self.graphs.append(graph)

    def __enter__(self):
        def dump_and_snapshot(*args, **kwargs):
            result = self.dump(*args, **kwargs)
            self.snapshot()
            return result

        self.debug.dump_inductor_provenance_info = dump_and_snapshot
        return self

    def __exit__(self, *exc) -> None:
        self.debug.dump_inductor_provenance_info = self.dump
        self.snapshot()


def compiled_step(dev: Device, mode: str | None):
    model, idx, targets = gpt_parts(dev)
    compiled = torch.compile(model, mode=mode) if mode else torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.cuda)
    return gpt_step(compiled, opt, idx, targets)


def graphed(dev: Device, path: Path) -> None:
    """The eager step captured in one CUDA graph: the capture and ACTIVE replays, profiled in one trace."""
    run, _, keep = _gpt_graph_step(dev, compile=False)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm up on a side stream, as torch.cuda.graph asks
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with profile(activities=_activities(dev), record_shapes=True, with_stack=True, with_modules=True) as prof:
        with torch.profiler.record_function("capture"):
            with torch.cuda.graph(graph):
                run()
        prof.step()
        for _ in range(ACTIVE):
            graph.replay()
            prof.step()
        dev.sync()
    _write_trace(prof, path)
    del keep


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the traces and timings (made if absent)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="where to run (default: cuda)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, two repeats: a smoke test")
    args = parser.parse_args(argv)
    dev = Device(args.device, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    torch._inductor.config.trace.provenance_tracking_level = 1
    torch._inductor.config.force_disable_caches = True  # a cached graph records no provenance
    failed = []
    timings = {"environment": environment(dev), "active_steps": ACTIVE}

    def attempt(name, fn):
        started = time.perf_counter()
        with one_case(name, dev, failed):
            fn()
            log(f"{name}: {time.perf_counter() - started:.0f} s")

    def eager():
        model, idx, targets = gpt_parts(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.cuda)
        step = gpt_step(model, opt, idx, targets)
        profile_steps(step, dev, args.out / "eager_bare.trace.json.gz", stack=False)
        profile_steps(step, dev, args.out / "eager.trace.json.gz", stack=True)
        profile_steps(step, dev, args.out / "eager_again.trace.json.gz", stack=True)
        timings["eager_wall_ms"] = {
            "profiler_off": time_steps(step, dev, None),
            "record_shapes": time_steps(step, dev, {"record_shapes": True}),
            "with_stack_and_modules": time_steps(step, dev, {"record_shapes": True, "with_stack": True,
                                                              "with_modules": True}),
        }

    def compiled(name, mode):
        def run():
            with Provenance() as provenance:
                step = compiled_step(dev, mode)
                profile_steps(step, dev, args.out / f"{name}.trace.json.gz", stack=True)
            info = provenance.graphs
            (args.out / f"{name}.kernel_information.json").write_text(json.dumps(info, indent=1) + "\n")
            timings[f"{name}_kernels_with_provenance"] = sum(len(graph) for graph in info)
        return run

    attempt("eager", eager)
    attempt("compiled", compiled("compiled", None))
    attempt("reduce_overhead", compiled("reduce_overhead", "reduce-overhead"))
    if dev.cuda:
        attempt("graphed", lambda: graphed(dev, args.out / "graphed.trace.json.gz"))
    (args.out / "timings.json").write_text(json.dumps(timings, indent=1) + "\n")
    log(json.dumps(timings.get("eager_wall_ms", {}), indent=1))
    if failed:
        log("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
