"""Record the verdict's labelled corpus: training and inference steps with one known cause each.

    python scripts/record_verdict_corpus.py single --out DIR            # one GPU: every single-GPU case
    torchrun --nproc_per_node 2 scripts/record_verdict_corpus.py ranks --out DIR   # two GPUs
    python scripts/record_verdict_corpus.py single --out DIR --device cpu --quick  # a smoke test, no GPU

Each case is a step with one cause put in on purpose (a host sync, a pageable
copy, a stall on the host, extra GPU work on one rank...) and its fix (the
sync taken out, the copy pinned, the stall removed...). For each, this
script

* profiles the step with the cause (``record_shapes=True``, one step skipped,
  one warm-up, three active steps; two on several ranks) and writes
  ``<case>.trace.json.gz`` (``<case>.rank<r>.trace.json.gz`` on several ranks);
* times the step with the profiler off, with the cause and fixed, interleaved
  (:func:`time_pair`): seven rounds of ten consecutive steps of each between
  two synchronizations, the order alternating, wall time per step, median and
  quartiles (the spread) of the seven, and of the round-by-round difference;
* writes ``<case>.label.json``: the cause as the report's vocabulary names it,
  where it was put (the ``record_function`` label or op), the culprit rank,
  both timings and their paired difference (``saving_ms``, ``timing:
  "interleaved"``).

``references.json`` holds what the corpus's predictions may use about this
machine: the host↔device copy bandwidth from pinned and pageable memory.
It imports only torch, so it runs on the GPU machine as a plain file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

REPEATS, STEPS_PER_REPEAT, WARMUP_STEPS = 7, 10, 5


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


# ----------------------------------------------------------------- models
class Block(nn.Module):
    """``x + down(gelu_tanh(up(x)))``: a transformer's MLP with its residual."""

    def __init__(self, dim, hidden, bias=False):
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=bias)
        self.down = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x), approximate="tanh"))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small GPT: token and position embeddings, pre-norm blocks with SDPA, a tied head."""

    def __init__(self, vocab, seq, dim, layers, heads):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(GPTBlock(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


# ----------------------------------------------------------------- timing
class Device:
    def __init__(self, name: str, quick: bool):
        self.name, self.quick = name, quick
        self.cuda = name == "cuda"
        self.dtype = torch.bfloat16 if self.cuda else torch.float32

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def size(self, gpu: int, cpu: int) -> int:
        return gpu if self.cuda and not self.quick else cpu


def spread(samples: list[float]) -> dict:
    q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [samples[0]] * 3
    return {"median": statistics.median(samples), "q1": q[0], "q3": q[2], "min": min(samples), "max": max(samples),
            "samples": samples}


def time_steps(step, dev: Device, barrier=None) -> dict:
    """Wall ms per step, profiler off: REPEATS × (STEPS_PER_REPEAT steps between two synchronizations)."""
    for _ in range(WARMUP_STEPS):
        step()
    dev.sync()
    return spread([round_ms(step, dev, barrier) for _ in range(REPEATS if not dev.quick else 2)])


def round_ms(step, dev: Device, barrier=None) -> float:
    """Wall ms per step of one round: STEPS_PER_REPEAT steps between two synchronizations (after ``barrier``)."""
    if barrier is not None:
        barrier()
    dev.sync()
    start = time.perf_counter()
    n = STEPS_PER_REPEAT if not dev.quick else 2
    for _ in range(n):
        step()
    dev.sync()
    return 1e3 * (time.perf_counter() - start) / n


def time_pair(cause, fixed, dev: Device, barrier=None) -> tuple[dict, dict, dict]:
    """Wall ms per step of ``cause`` and of ``fixed``, profiler off, interleaved: REPEATS rounds of
    STEPS_PER_REPEAT steps of each, the order alternating from round to round, so that a host that drifts in speed
    (a shared machine's does, by 10 % and more within minutes) weighs on both alike. Returns both spreads and the
    spread of their paired difference, round by round (cause − fixed): a saving whose quartiles straddle zero is
    a tie."""
    for _ in range(WARMUP_STEPS):
        cause()
        fixed()
    dev.sync()
    steps, times = (cause, fixed), ([], [])  # by position: a case whose fix is itself (on the CPU) times it twice
    for r in range(REPEATS if not dev.quick else 2):
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            times[k].append(round_ms(steps[k], dev, barrier))
    return spread(times[0]), spread(times[1]), spread([a - b for a, b in zip(*times, strict=True)])


def profile_steps(step, dev: Device, path: Path, active: int, barrier=None) -> None:
    """Profile 2 + active steps (skip one, warm one up, record the rest) and write the trace, all or nothing."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.cuda else [])
    if barrier is not None:
        barrier()
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=active),
                 record_shapes=True) as prof:
        for _ in range(2 + active):
            step()
            prof.step()
    dev.sync()
    partial = path.with_name("." + path.name + ".partial.json.gz")
    prof.export_chrome_trace(str(partial))
    os.replace(partial, path)


# ------------------------------------------------------- single-GPU cases
def mlp_training(dev: Device, *, layers=4, dim=2048, hidden=8192, tokens=4096, bias=False, fused=True):
    """A stack of MLP blocks, its input, and a training step's pieces (forward, backward, optimizer)."""
    dim, hidden, tokens = dev.size(dim, 32), dev.size(hidden, 64), dev.size(tokens, 16)
    torch.manual_seed(0)
    model = nn.Sequential(*(Block(dim, hidden, bias) for _ in range(layers))).to(dev.name, dev.dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=dev.cuda and fused, foreach=None if fused else False)
    x = torch.randn(tokens, dim, device=dev.name, dtype=dev.dtype)
    return model, opt, x


def train_step_fn(model, opt, get_input, *, before=None, after_forward=None, after_step=None, in_forward=None):
    """One training step with record_function labels forward / backward / optimizer, and hooks for a cause."""

    def step():
        if before is not None:
            before()
        x = get_input()
        with record_function("forward"):
            h = x
            for i, block in enumerate(model):
                h = block(h)
                if in_forward is not None:
                    in_forward(i, h)
            loss = h.float().pow(2).mean()
        if after_forward is not None:
            after_forward()
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        if after_step is not None:
            after_step()

    return step


def case_gpu_compute(dev, n):
    """Extra matrix products after the forward (24 or 64 of 4096³ bf16): more GPU work than the step needs."""
    model, opt, x = mlp_training(dev)
    a = torch.randn(dev.size(4096, 32), dev.size(4096, 32), device=dev.name, dtype=dev.dtype)

    def extra():
        with record_function("extra_work"):
            for _ in range(n):
                torch.mm(a, a)

    cause = train_step_fn(model, opt, lambda: x, after_forward=extra)
    fixed = train_step_fn(model, opt, lambda: x)
    return cause, fixed, {"cause": "gpu_compute", "where": "extra_work", "magnitude": f"{n} extra 4096³ GEMMs",
                          "fix": "the extra GEMMs removed"}


def graph_replay(run, label: str, keep: tuple):
    """``run`` captured once in a CUDA graph, after three warm-up runs on a side stream, as a step that replays it
    inside ``record_function(label)``. ``keep`` holds the tensors the graph reads and writes: they must outlive it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()

    def step():
        with record_function(label):
            graph.replay()

    step.keep = (*keep, graph)
    return step


def case_launch_overhead(dev, depth):
    """A deep stack of tiny layers, forward only: each kernel runs a few µs, each launch costs more."""
    torch.manual_seed(0)
    width = 256
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers).to(dev.name, dev.dtype).eval()
    x = torch.randn(64, width, device=dev.name, dtype=dev.dtype)

    def cause():
        with torch.no_grad(), record_function("forward"):
            model(x)

    def forward():
        with torch.no_grad():
            model(x)

    # fixed: the same kernels, captured once in a CUDA graph and replayed
    fixed = graph_replay(forward, "forward", (x, model)) if dev.cuda else cause
    return cause, fixed, {"cause": "launch_overhead", "where": "forward",
                          "magnitude": f"{depth} Linear+ReLU layers of 256, batch 64",
                          "fix": "the forward captured in a CUDA graph and replayed"}


def case_host_gap(dev, ms):
    """The host sleeps before each step (an input pipeline that is not ready): untraced host time."""
    model, opt, x = mlp_training(dev)
    cause = train_step_fn(model, opt, lambda: x, before=lambda: time.sleep(ms / 1e3))
    fixed = train_step_fn(model, opt, lambda: x)
    return cause, fixed, {"cause": "host_gap", "where": "before forward", "magnitude": f"{ms} ms sleep per step",
                          "fix": "no sleep"}


def case_host_sync(dev, every):
    """``.item()`` inside the forward of a fine-tuning step (frozen blocks, a trained head): a sync each time."""
    torch.manual_seed(0)
    dim, hidden, tokens = dev.size(1024, 32), dev.size(4096, 64), dev.size(8192, 16)
    blocks = nn.Sequential(*(Block(dim, hidden) for _ in range(16))).to(dev.name, dev.dtype).requires_grad_(False)
    head = nn.Linear(dim, dim).to(dev.name, dev.dtype)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-5, fused=dev.cuda)
    x = torch.randn(tokens, dim, device=dev.name, dtype=dev.dtype)

    def make(read_on_host):
        def step():
            with record_function("forward"):
                h = x
                flags = []
                for i, block in enumerate(blocks):
                    h = block(h)
                    if i % every == every - 1:
                        big = h.abs().amax() > 1e9
                        if read_on_host and big.item():  # the sync: the value read back on the host
                            raise RuntimeError("activations blew up")
                        flags.append(big)  # fixed: the same check, kept on the GPU and never read
                loss = head(h).float().pow(2).mean()
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        return step

    return make(True), make(False), {"cause": "host_sync", "where": "aten::item",
                                     "magnitude": f".item() after every {every} of 16 blocks",
                                     "fix": "the same checks kept on the GPU, never read: no .item()"}


def case_memcpy(dev, mib):
    """Each step copies a pageable host batch to the GPU; fixed: the batch in pinned memory, non_blocking."""
    model, opt, x = mlp_training(dev)
    n = dev.size(mib << 18, 1 << 12)  # float32 elements
    pageable = torch.randn(n)
    pinned = pageable.pin_memory() if dev.cuda else pageable
    tokens, dim = x.shape

    def loader(host, non_blocking):
        def get():
            with record_function("load_batch"):
                batch = host.to(dev.name, non_blocking=non_blocking)
                return batch[: tokens * dim].view(tokens, dim).to(dev.dtype)
        return get

    cause = train_step_fn(model, opt, loader(pageable, False))
    fixed = train_step_fn(model, opt, loader(pinned, True))
    return cause, fixed, {"cause": "memcpy", "where": "load_batch", "magnitude": f"{mib} MiB pageable copy per step",
                          "fix": "the host batch pinned, copied with non_blocking=True"}


def case_allocator(dev, times):
    """``torch.cuda.empty_cache()`` once or three times a step: the caching allocator frees and mallocs again."""
    model, opt, x = mlp_training(dev)
    empty = torch.cuda.empty_cache if dev.cuda else (lambda: None)
    if times == 1:
        cause = train_step_fn(model, opt, lambda: x, after_step=empty)
    else:
        cause = train_step_fn(model, opt, lambda: x, after_forward=empty, after_step=empty,
                              in_forward=lambda i, h: empty() if i == 1 else None)
    fixed = train_step_fn(model, opt, lambda: x)
    return cause, fixed, {"cause": "allocator", "where": "cudaFree", "magnitude": f"empty_cache() {times}× per step",
                          "fix": "no empty_cache()"}


class TransformedRows(torch.utils.data.Dataset):
    """Items of rows from a CPU tensor, each normalized and augmented on the CPU when it is read (a transform)."""

    def __init__(self, items: int, rows: int, dim: int):
        self.data = torch.randn(items, rows, dim, generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        x = self.data[i]
        x = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)
        return x * (0.9 + 0.2 * torch.rand(())) + 0.01 * torch.randn_like(x)


def loader_input(dev, tokens: int, dim: int, workers: int):
    """A DataLoader of 128 transformed items a batch (pinned), as a step's input: the next batch on the GPU."""
    items = dev.size(128, 4)
    loader = torch.utils.data.DataLoader(TransformedRows(4 * items, tokens // items, dim), batch_size=items,
                                         shuffle=True, drop_last=True, pin_memory=dev.cuda, num_workers=workers,
                                         persistent_workers=workers > 0, prefetch_factor=2 if workers else None)
    batches = iter(loader)

    def get():
        nonlocal batches
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(loader)
            batch = next(batches)
        return batch.view(tokens, dim).to(dev.name, non_blocking=True).to(dev.dtype)

    return get


def case_loader(dev, workers: int):
    """The input from a DataLoader whose transforms take longer than the step: on the training thread
    (``num_workers=0``), or in two workers that fall behind now and then (the prefetched batches drained first,
    so that the profiled steps are the steady state). Fixed: the batch ready on the GPU."""
    model, opt, x = mlp_training(dev)
    tokens, dim = x.shape
    get = loader_input(dev, tokens, dim, workers if dev.cuda else 0)
    for _ in range(dev.size(16, 2)):
        get()
    cause = train_step_fn(model, opt, get)
    fixed = train_step_fn(model, opt, lambda: x)
    where = "_MultiProcessingDataLoaderIter" if workers else "_SingleProcessDataLoaderIter"
    return cause, fixed, {"cause": "host_gap", "where": f"enumerate(DataLoader)#{where}.__next__",
                          "magnitude": f"128 transformed items a batch, num_workers={workers}",
                          "fix": "the batch ready on the GPU"}


def gpt_parts(dev):
    torch.manual_seed(0)
    vocab, seq, dim, layers, heads, batch = 8192, 128, 256, 4, 4, 8
    if not dev.cuda or dev.quick:
        vocab, seq, dim, layers, heads, batch = 64, 8, 16, 2, 2, 2
    model = GPT(vocab, seq, dim, layers, heads).to(dev.name, dev.dtype)
    idx = torch.randint(0, vocab, (batch, seq), device=dev.name)
    targets = torch.randint(0, vocab, (batch, seq), device=dev.name)
    return model, idx, targets


def gpt_step(model, opt, idx, targets):
    def step():
        with record_function("forward"):
            loss = model(idx, targets)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    return step


def _gpt_graph_step(dev, compile: bool):
    """A fresh GPT's whole training step (capturable fused AdamW) to capture, its label, and what it must keep.

    Each run sets the gradients to None first, so the capture allocates them in the graph's own memory."""
    model, idx, targets = gpt_parts(dev)
    forward = torch.compile(model) if compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True, capturable=True)

    def run():
        opt.zero_grad(set_to_none=True)
        forward(idx, targets).backward()
        opt.step()

    return run, "train_step_graph", (model, forward, idx, targets, opt)


def case_gpt_eager(dev):
    """A small GPT trained eagerly: hundreds of small kernels, each launched from Python."""
    model, idx, targets = gpt_parts(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.cuda)
    cause = gpt_step(model, opt, idx, targets)
    fixed = cause
    if dev.cuda:  # the whole step, same kernels, captured in one CUDA graph (PyTorch's whole-network capture)
        fixed = graph_replay(*_gpt_graph_step(dev, compile=False))

    return cause, fixed, {"cause": "launch_overhead", "where": "forward",
                          "magnitude": "GPT 4 layers, dim 256, seq 128, batch 8", "fix": "the whole step in a CUDA graph"}


def case_gpt_compiled(dev):
    """The same GPT through torch.compile (default mode): fewer kernels, still launched one by one."""
    model, idx, targets = gpt_parts(dev)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.cuda)
    cause = gpt_step(compiled, opt, idx, targets)
    fixed = cause
    if dev.cuda:  # the compiled step, same kernels, captured whole in one CUDA graph
        fixed = graph_replay(*_gpt_graph_step(dev, compile=True))
    return cause, fixed, {"cause": "launch_overhead", "where": "forward",
                          "magnitude": "GPT 4 layers, dim 256, torch.compile default",
                          "fix": "the compiled step captured whole in one CUDA graph"}


SINGLE = {
    "gpu_compute_24": lambda d: case_gpu_compute(d, 24),
    "gpu_compute_64": lambda d: case_gpu_compute(d, 64),
    "launch_overhead_64": lambda d: case_launch_overhead(d, 64),
    "launch_overhead_256": lambda d: case_launch_overhead(d, 256),
    "host_gap_5ms": lambda d: case_host_gap(d, 5),
    "host_gap_15ms": lambda d: case_host_gap(d, 15),
    "host_sync_every2": lambda d: case_host_sync(d, 2),
    "host_sync_every1": lambda d: case_host_sync(d, 1),
    "memcpy_64mib": lambda d: case_memcpy(d, 64),
    "memcpy_256mib": lambda d: case_memcpy(d, 256),
    "allocator_1x": lambda d: case_allocator(d, 1),
    "allocator_3x": lambda d: case_allocator(d, 3),
    "loader_on_main_thread": lambda d: case_loader(d, 0),
    "loader_workers_behind": lambda d: case_loader(d, 2),
    "gpt_eager": case_gpt_eager,
    "gpt_compiled": case_gpt_compiled,
}


def copy_bandwidths(dev: Device) -> dict:
    """GB/s of host→device and device→host copies of 256 MiB from pinned and pageable memory (median of 5)."""
    if not dev.cuda:
        return {}
    n = 64 << 20  # float32: 256 MiB
    found = {}
    gpu = torch.empty(n, device="cuda")
    for kind, host in (("pinned", torch.empty(n).pin_memory()), ("pageable", torch.empty(n))):
        for direction in ("h2d", "d2h"):
            rates = []
            for _ in range(6):
                torch.cuda.synchronize()
                start = time.perf_counter()
                if direction == "h2d":
                    gpu.copy_(host, non_blocking=kind == "pinned")
                else:
                    host.copy_(gpu, non_blocking=kind == "pinned")
                torch.cuda.synchronize()
                rates.append(4 * n / (time.perf_counter() - start) / 1e9)
            found[f"{direction}_{kind}_gbps"] = statistics.median(rates[1:])
    return found


def profiler_cost(dev: Device, out: Path) -> dict:
    """Wall ms of a CPU-bound step with the profiler off and on (``record_shapes=True``), and its trace.

    Two workloads unlike the corpus's cases (300 ``torch.add`` on a 16×16
    tensor; 100 ``gelu(layer_norm(...))``): the trace says how many ops each
    recorded, so the two timings give the profiler's cost per recorded op.
    """
    x = torch.randn(16, 16, device=dev.name, dtype=dev.dtype)
    w = torch.randn(16, device=dev.name, dtype=dev.dtype)
    workloads = {"add": lambda: [torch.add(x, 1.0) for _ in range(300)],
                 "norm_gelu": lambda: [F.gelu(F.layer_norm(x, (16,), w, w)) for _ in range(100)]}
    found = {}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.cuda else [])
    for name, work in workloads.items():
        def step(work=work):
            with record_function("work"):
                work()
        off = time_steps(step, dev)
        on = []
        with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=5),
                     record_shapes=True) as prof:
            for i in range(7):
                dev.sync()
                start = time.perf_counter()
                step()
                dev.sync()
                if i >= 2:
                    on.append(1e3 * (time.perf_counter() - start))
                prof.step()
        prof.export_chrome_trace(str(out / f"profiler_cost_{name}.trace.json.gz"))
        found[name] = {"off_ms": off, "on_ms": spread(on)}
    return found


def environment(dev: Device) -> dict:
    env = {"torch": torch.__version__, "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d")}
    if dev.cuda:
        env.update(gpu=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                   capability=".".join(map(str, torch.cuda.get_device_capability())))
    else:
        env["gpu"] = "CPU"
    return env


@contextlib.contextmanager
def one_case(name: str, dev: Device, failed: list[str]):
    """Run one case: a failure is printed and its name kept in ``failed`` (the other cases still run); either way
    compiled graphs and cached GPU memory are let go before the next."""
    try:
        yield
    except Exception:  # noqa: BLE001 - one case's failure is reported, the others still run
        failed.append(name)
        traceback.print_exc()
    finally:
        torch._dynamo.reset()
        if dev.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def run_single(args) -> int:
    dev = Device(args.device, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment(dev)
    refs = {"environment": env, **copy_bandwidths(dev), "profiler_cost": profiler_cost(dev, args.out)}
    (args.out / "references.json").write_text(json.dumps(refs, indent=1) + "\n")
    log("references", refs)
    failed = []
    for name, make in SINGLE.items():
        if args.cases and name not in args.cases:
            continue
        started = time.perf_counter()
        with one_case(name, dev, failed):
            cause, fixed, label = make(dev)
            profile_steps(cause, dev, args.out / f"{name}.trace.json.gz", active=3)
            with_cause, without, saving = time_pair(cause, fixed, dev)
            label.update(case=name, world_size=1, rank=None, environment=env, references=refs, step_ms=with_cause,
                         fixed_step_ms=without, saving_ms=saving, timing="interleaved",
                         profiled={"record_shapes": True, "active_steps": 3})
            (args.out / f"{name}.label.json").write_text(json.dumps(label, indent=1) + "\n")
            log(f"{name}: {with_cause['median']:.2f} ms with the cause, {without['median']:.2f} ms fixed "
                f"({time.perf_counter() - started:.0f} s)")
    if failed:
        log("failed:", ", ".join(failed))
    return 1 if failed else 0


# ------------------------------------------------------------ several ranks
class SlowBackward(torch.autograd.Function):
    """The identity in the forward; in the backward, ``n`` extra GEMMs before the gradient flows on."""

    @staticmethod
    def forward(ctx, x, a, n):
        ctx.a, ctx.n = a, n
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        with record_function("extra_backward_work"):
            for _ in range(ctx.n):
                torch.mm(ctx.a, ctx.a)
        return grad, None, None


class Slow(nn.Module):
    """Between two blocks: nothing, or (``extra`` > 0) extra GEMMs in the backward (:class:`SlowBackward`)."""

    def __init__(self, a, extra=0):
        super().__init__()
        self.a, self.extra = a, extra

    def forward(self, x):
        return SlowBackward.apply(x, self.a, self.extra) if self.extra else x


def ranks_case(dev, rank, world, *, strategy="ddp", bucket_mb=25.0, extra_forward=0, extra_backward=0,
               extra_between=0, sleep_ms=0.0, culprit=None, layers=4, dim=2048, hidden=8192, tokens=4096):
    """A DDP or FSDP2 step of the MLP stack; the culprit rank gets extra GPU work or a host stall."""
    dim, hidden, tokens = dev.size(dim, 32), dev.size(hidden, 64), dev.size(tokens, 16)
    a = torch.randn(dev.size(4096, 32), dev.size(4096, 32), device=dev.name, dtype=dev.dtype)
    slow = rank == culprit
    torch.manual_seed(0)
    blocks = [Block(dim, hidden) for _ in range(layers)]
    # the culprit's gradients of the first block wait for the extra backward work (DDP's last bucket, FSDP2's
    # last reduce-scatter)
    blocks.insert(1, Slow(a, extra_backward if slow else 0))
    model = nn.Sequential(*blocks).to(dev.name, dev.dtype)
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
    else:
        from torch.distributed.fsdp import fully_shard

        for block in model:
            if isinstance(block, Block):
                fully_shard(block)
        wrapped = fully_shard(model)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-5, fused=dev.cuda)
    torch.manual_seed(1 + rank)
    x = torch.randn(tokens, dim, device=dev.name, dtype=dev.dtype)

    def step():
        if slow and sleep_ms:
            time.sleep(sleep_ms / 1e3)
        with record_function("forward"):
            h = x
            if slow and extra_forward:
                with record_function("extra_work"):
                    for _ in range(extra_forward):
                        torch.mm(a, a)
            loss = wrapped(h).float().pow(2).mean()
        if slow and extra_between:
            with record_function("extra_work"):
                for _ in range(extra_between):
                    torch.mm(a, a)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    return step


WIDE = dict(layers=2, dim=4096, hidden=16384, tokens=2048)
RANKS = {
    # name: (arguments with the cause, arguments fixed, label)
    "ddp_extra_forward_rank0": (dict(extra_forward=24, culprit=0), {},
                                {"cause": "load_imbalance", "where": "extra_work", "rank": 0}),
    "ddp_extra_backward_last": (dict(extra_backward=24, culprit=-1), {},
                                {"cause": "load_imbalance", "where": "extra_backward_work", "rank": -1}),
    "ddp_extra_forward_last": (dict(extra_forward=24, culprit=-1), {},
                               {"cause": "load_imbalance", "where": "extra_work", "rank": -1}),
    "ddp_extra_backward_rank0": (dict(extra_backward=24, culprit=0), {},
                                 {"cause": "load_imbalance", "where": "extra_backward_work", "rank": 0}),
    "ddp_host_stall_rank0": (dict(sleep_ms=10.0, culprit=0), {},
                             {"cause": "host_gap", "where": "before forward", "rank": 0}),
    "ddp_host_stall_last": (dict(sleep_ms=10.0, culprit=-1), {},
                            {"cause": "host_gap", "where": "before forward", "rank": -1}),
    # wide layers and few tokens: 537 MB of gradients for 3.3 TFLOP of work, all-reduced in one bucket after
    # the backward, or (fixed) in DDP's 25 MB buckets during it
    "ddp_one_bucket": (dict(bucket_mb=4096.0, **WIDE), WIDE,
                       {"cause": "exposed_communication", "where": "backward", "rank": None}),
    "fsdp2_extra_rank0": (dict(strategy="fsdp2", extra_between=128, culprit=0), dict(strategy="fsdp2"),
                          {"cause": "load_imbalance", "where": "extra_work", "rank": 0}),
    "fsdp2_host_stall_last": (dict(strategy="fsdp2", sleep_ms=10.0, culprit=-1), dict(strategy="fsdp2"),
                              {"cause": "host_gap", "where": "before forward", "rank": -1}),
}


def run_ranks(args) -> int:
    import torch.distributed as dist

    dev = Device(args.device, args.quick)
    dist.init_process_group("nccl" if dev.cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if dev.cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**environment(dev), "world_size": world,
           "nccl": ".".join(map(str, torch.cuda.nccl.version())) if dev.cuda else None,
           "variables": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                           "NVSHMEM_DISABLE_NVLS")}}
    failed = []
    for name, (with_cause, fixed_args, label) in RANKS.items():
        if args.cases and name not in args.cases:
            continue
        started = time.perf_counter()
        try:
            cause_args = dict(with_cause)
            if cause_args.get("culprit") == -1:
                cause_args["culprit"] = world - 1
            cause = ranks_case(dev, rank, world, **cause_args)
            profile_steps(cause, dev, args.out / f"{name}.rank{rank}.trace.json.gz", active=2, barrier=dist.barrier)
            fixed = ranks_case(dev, rank, world, **fixed_args)
            if args.profile_fixed:  # the fixed run's trace too: what the report makes of the run it predicts
                profile_steps(fixed, dev, args.out / f"{name}.fixed.rank{rank}.trace.json.gz", active=2,
                              barrier=dist.barrier)
            timed_cause, timed_fixed, saving = time_pair(cause, fixed, dev, barrier=dist.barrier)
            everyone = [None] * world
            dist.all_gather_object(everyone, {"rank": rank, "step_ms": timed_cause, "fixed_step_ms": timed_fixed,
                                              "saving_ms": saving})
            if rank == 0:
                culprit = label["rank"]
                out = dict(label, rank=world - 1 if culprit == -1 else culprit, case=name, world_size=world,
                           environment=env, magnitude=json.dumps(with_cause),
                           fix="the same run without the culprit's extra work or stall" if culprit is not None
                           else "DDP's default 25 MB buckets",
                           # the run's step: every rank waits for the slowest, so the ranks' medians agree
                           step_ms=max((e["step_ms"] for e in everyone), key=lambda s: s["median"]),
                           fixed_step_ms=max((e["fixed_step_ms"] for e in everyone), key=lambda s: s["median"]),
                           ranks=everyone, timing="interleaved", profiled={"record_shapes": True, "active_steps": 2})
                (args.out / f"{name}.label.json").write_text(json.dumps(out, indent=1) + "\n")
                log(f"{name}: {out['step_ms']['median']:.2f} ms with the cause, "
                    f"{out['fixed_step_ms']['median']:.2f} ms fixed ({time.perf_counter() - started:.0f} s)")
        except Exception:  # noqa: BLE001
            failed.append(name)
            traceback.print_exc()
        finally:
            if dev.cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            dist.barrier()
    dist.destroy_process_group()
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("single", "ranks"), help="single: one GPU; ranks: under torchrun")
    parser.add_argument("--out", type=Path, required=True, help="folder for the traces, labels and references")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke test (gloo)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few repeats (a smoke test)")
    parser.add_argument("--cases", nargs="*", help="only these cases")
    parser.add_argument("--profile-fixed", action="store_true",
                        help="ranks: also profile each case's fixed run (<case>.fixed.rank<r>.trace.json.gz)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU is visible: run this on a GPU machine, or pass --device cpu --quick", file=sys.stderr)
        return 2
    return run_single(args) if args.what == "single" else run_ranks(args)


if __name__ == "__main__":
    sys.exit(main())
