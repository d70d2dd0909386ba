"""Train a GeGLU MLP stack on every GPU of this machine with DDP or FSDP2, and profile each rank.

    torchrun --nproc_per_node 2 -m profiling_guide.kernels.train_ranks --strategy ddp --out traces/ddp

(or ``torchrun ... train_ranks.py ...`` on a copy of this file: it imports only torch).

Each rank builds the same model, wraps it (``--strategy ddp``: a replica per
rank whose gradients are all-reduced in buckets; ``fsdp2``: every block's
parameters sharded across the ranks, gathered for its forward and backward,
its gradients reduce-scattered), profiles four training steps (skip one, warm
up one, record two) and writes ``rank<r>.trace.json.gz``; then times ten
steps with the profiler off. Rank 0 writes ``run.json``: every rank's step
times, the world, the GPU, the versions and the NCCL variables the job ran
with. ``--straggler`` gives the last rank extra work before its backward.
``--device cpu`` runs the same on CPU processes over gloo (for tests).
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

NCCL_VARIABLES = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


class Block(nn.Module):
    """``x + down(gelu_tanh(gate(x)) * up(x))``: the guide's GeGLU MLP with a residual."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return x + self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))


def wrap(model, strategy, bucket_mb, reshard):
    # Each strategy imports only its own wrapper. (Chapter 10's recordings fingerprint this whole
    # module's code: moving these imports would make them stale.)
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
    from torch.distributed.fsdp import fully_shard

    for block in model:
        fully_shard(block, reshard_after_forward=reshard)
    return fully_shard(model, reshard_after_forward=reshard)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=("ddp", "fsdp2"), default="ddp")
    parser.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's gradient bucket size (MB)")
    parser.add_argument("--no-reshard", action="store_true", help="FSDP2: keep gathered parameters after forward")
    parser.add_argument("--straggler", action="store_true", help="the last rank does extra work before backward")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--out", type=Path, required=True, help="folder for the traces and run.json")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: gloo, float32 (tests)")
    args = parser.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dtype = torch.bfloat16 if cuda else torch.float32
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)  # the same weights on every rank
    model = nn.Sequential(*(Block(args.dim, args.hidden) for _ in range(args.layers)))
    model = wrap(model.to(args.device, dtype), args.strategy, args.bucket_mb, not args.no_reshard)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    torch.manual_seed(1 + rank)  # each rank its own data
    x = torch.randn(args.batch, args.seq, args.dim, device=args.device, dtype=dtype)
    a = torch.randn(4096 if cuda else 64, 4096 if cuda else 64, device=args.device, dtype=dtype)
    slow = args.straggler and rank == world - 1

    def train_step():
        with record_function("forward"):
            loss = model(x).float().pow(2).mean()
        if slow:
            with record_function("extra_work"):
                for _ in range(24):
                    a @ a
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    args.out.mkdir(parents=True, exist_ok=True)
    partial = args.out / f".rank{rank}.partial.trace.json.gz"
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=2),
        record_shapes=True,
    ) as prof:
        for _ in range(4):
            with record_function("train_step"):
                train_step()
            prof.step()
    prof.export_chrome_trace(str(partial))
    os.replace(partial, args.out / f"rank{rank}.trace.json.gz")  # whole or not at all

    # Profiler off: ten steps, one at a time, each timed from start to the GPU's end.
    for _ in range(3):
        train_step()
    step_ms = []
    for _ in range(10):
        sync()
        start = time.perf_counter()
        train_step()
        sync()
        step_ms.append(1e3 * (time.perf_counter() - start))
    mine = {"rank": rank, "step_ms": step_ms, "median_ms": statistics.median(step_ms),
            "peak_memory_mb": torch.cuda.max_memory_allocated() / 1e6 if cuda else None}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        run = {
            "world_size": world, "strategy": args.strategy, "args": {k: str(v) for k, v in vars(args).items()},
            "gpu": torch.cuda.get_device_name() if cuda else "CPU",
            "capability": ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None,
            "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
            "environment": {name: os.environ.get(name) for name in NCCL_VARIABLES},
            "ranks": everyone,
        }
        partial = args.out / ".run.partial.json"
        partial.write_text(json.dumps(run, indent=1) + "\n")
        os.replace(partial, args.out / "run.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
