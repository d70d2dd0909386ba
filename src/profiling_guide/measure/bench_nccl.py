"""``profiling-guide bench-nccl``: the bus bandwidth of NCCL's collectives on this machine, by message size.

Run it under ``torchrun``, one process per GPU, on the machine whose traces
the run report will read::

    torchrun --nproc_per_node 4 -m profiling_guide.cli bench-nccl -o nccl_sweep.json

For each collective (``all_reduce``, ``all_gather``, ``reduce_scatter``) and
each size (the full buffer, as nccl-tests counts it: 1 MiB to 1 GiB by
default), every rank runs ``--warmup`` calls, then ``--repeats`` timings of
``--iters`` back-to-back calls, each timed with CUDA events on its current
stream (``time.perf_counter`` on the CPU with the gloo backend, which tests
use). A timing's time per call is the slowest rank's (an all-reduce of the
times with MAX: a collective is done when its last rank is), and a size's
time is the median of its timings, with their interquartile range. Bus
bandwidth is computed as nccl-tests does
(:func:`~profiling_guide.analysis.bandwidth.busbw_gbps`). Rank 0 writes the
sweep as JSON (whole or not at all), the format
:func:`~profiling_guide.analysis.bandwidth.read_sweep` and ``profiling-guide
report --nccl-sweep`` read; progress goes to stderr.

Before anything is allocated, the ranks agree that the largest size fits: its
buffers (the full one and a rank's shard) must fit in the free memory of every
rank's GPU, or with gloo in the host memory available to each of the host's
ranks. What stops every rank (that, or an output rank 0 cannot write) is said
once, by rank 0, in one line.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import sys
import time
from collections.abc import Sequence

from profiling_guide import files
from profiling_guide.analysis.bandwidth import algbw_gbps, busbw_gbps
from profiling_guide.errors import GuideError
from profiling_guide.spread import Spread

OPS = ("all_reduce", "all_gather", "reduce_scatter")
DEFAULT_SIZES = tuple(2**20 * 4**i for i in range(6))  # 1 MiB, 4, 16, 64, 256 MiB, 1 GiB
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$", re.I)
TORCHRUN_HINT = "torchrun --nproc_per_node N -m profiling_guide.cli bench-nccl -o nccl_sweep.json"


def parse_size(text: str) -> int:
    """``"1MiB"``, ``"4M"``, ``"1048576"`` → bytes (K, M, G are binary, as in KiB)."""
    m = _SIZE.match(text)
    unit = _UNITS.get(m[2].lower()) if m else None
    if m is None or unit is None or int(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 1MiB, 256M or 1048576, got {text!r}")
    return int(m[1]) * unit


def _sizes(text: str) -> list[int]:
    sizes = [parse_size(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError("expected comma-separated sizes, e.g. 1MiB,16MiB,256MiB")
    if max(sizes) > 64 * 2**30:
        raise argparse.ArgumentTypeError("sizes above 64 GiB do not fit a GPU's memory")
    return sorted(set(sizes))


def _ops(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if name not in OPS:
            raise argparse.ArgumentTypeError(f"unknown collective {name!r}: choose from {', '.join(OPS)}")
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated collectives from {', '.join(OPS)}")
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0 or value > 100_000:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 100000, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="profiling-guide bench-nccl",
        description="Measure the bus bandwidth of NCCL collectives by size (run under torchrun, one process per "
                    f"GPU: {TORCHRUN_HINT}).")
    p.add_argument("-o", "--output", required=True, metavar="SWEEP.json", help="the sweep to write (rank 0 writes it)")
    p.add_argument("--ops", type=_ops, default=list(OPS), help=f"comma-separated, from {','.join(OPS)} (default: all)")
    p.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES),
                   help="comma-separated full-buffer sizes (default: 1MiB,4MiB,16MiB,64MiB,256MiB,1GiB)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="element type (default bf16)")
    p.add_argument("--warmup", type=_positive, default=5, help="untimed calls before each size (default 5)")
    p.add_argument("--iters", type=_positive, default=20, help="back-to-back calls per timing (default 20)")
    p.add_argument("--repeats", type=_positive, default=5, help="timings per size behind its median (default 5)")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="torch.distributed backend (default: nccl where CUDA is available, else gloo)")
    return p


def _torchrun_env() -> tuple[int, int, int]:
    try:
        rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    except (KeyError, ValueError):
        raise GuideError(f"bench-nccl runs one process per GPU under torchrun: {TORCHRUN_HINT}") from None
    if world < 2:
        raise GuideError(f"bench-nccl needs two or more ranks (WORLD_SIZE={world}): {TORCHRUN_HINT}")
    return rank, world, local


class _Stopped(Exception):
    """Every rank stops before measuring; rank 0 has already said why, in one line."""


def _say(rank: int, message: str) -> None:
    if rank == 0:
        print(f"bench-nccl: {message}", file=sys.stderr, flush=True)


def _elements(nbytes: int, world: int, elem: int) -> int:
    return nbytes // elem // world * world  # the whole buffer splits evenly among the ranks


def buffer_bytes(nbytes: int, world: int, elem: int) -> int:
    """What one rank allocates for a size: the full buffer and its shard."""
    count = _elements(nbytes, world, elem)
    return (count + count // world) * elem


def _buffers(torch, op: str, nbytes: int, world: int, dtype, device):
    elem = torch.empty((), dtype=dtype).element_size()
    count = _elements(nbytes, world, elem)
    if count < world:
        raise GuideError(f"{nbytes} bytes are too few to split among {world} ranks: give larger --sizes")
    full = torch.ones(count, dtype=dtype, device=device)
    shard = torch.ones(count // world, dtype=dtype, device=device)
    dist = torch.distributed
    # torch 2.13 renamed the tensor forms (*_single); older ones only have *_into_tensor / *_tensor.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if op == "all_reduce":
        return count * elem, lambda: dist.all_reduce(full)
    if op == "all_gather":
        return count * elem, lambda: gather(full, shard)
    return count * elem, lambda: scatter(shard, full)


def _time_per_call_us(torch, call, iters: int, cuda: bool) -> float:
    dist = torch.distributed
    dist.barrier()
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        us = start.elapsed_time(end) * 1e3 / iters
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        us = (time.perf_counter() - t0) * 1e6 / iters
    slowest = torch.tensor([us], dtype=torch.float64, device="cuda" if cuda else "cpu")
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return float(slowest.item())


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:,.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"


def host_memory_available() -> int | None:
    """Bytes of memory the kernel says can be taken without swapping (``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _free_bytes(torch, cuda: bool, local: int, world: int) -> int:
    """What this rank may allocate: its GPU's free memory, or its share of the host's available memory."""
    if cuda:
        return int(torch.cuda.mem_get_info(local)[0])
    available = host_memory_available()
    if available is None:
        return 2**62  # not known: let the allocation say
    try:
        here = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", world)))  # the ranks sharing this host
    except ValueError:
        here = world
    return available // here


def _agree_before_measuring(torch, args, rank: int, world: int, local: int, device, cuda: bool) -> None:
    """Every rank stops, before any buffer is allocated, if rank 0 cannot write the sweep or a rank lacks the
    memory for the largest size; rank 0 says why in one line, and no rank leaves before it has."""
    dist = torch.distributed
    problem = None
    if rank == 0:
        try:
            files.check_writable(args.output)
        except GuideError as exc:
            problem = str(exc)
    elem = torch.empty((), dtype=getattr(torch, DTYPES[args.dtype])).element_size()
    needed = max(buffer_bytes(size, world, elem) for size in args.sizes)
    # MIN of both: whether rank 0 can write (1) or not (0), and the least memory free on any rank
    agreed = torch.tensor([0 if problem else 1, _free_bytes(torch, cuda, local, world)], dtype=torch.int64,
                          device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    writable, least = (int(v) for v in agreed.tolist())
    if writable and least >= needed:
        return
    if rank == 0:
        where = ("the GPU with the least free memory has" if cuda else
                 "the host memory available to each rank (MemAvailable shared by the host's ranks) is")
        problem = problem or (f"--sizes up to {_size(max(args.sizes))} need {_size(needed)} per rank "
                              f"({args.dtype}: the buffer and its shard) but {where} {_size(least)}: "
                              "give smaller --sizes, or run fewer ranks per machine")
        print(f"error: {problem}", file=sys.stderr, flush=True)
    dist.barrier()  # the other ranks wait until rank 0 has said why
    raise _Stopped


def measure(args, rank: int, world: int, local: int) -> dict:
    """The sweep as a dict (every rank computes it; rank 0 writes it)."""
    # Lazy: the command's --help and argument checks run without torch.
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend or ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        raise GuideError("--backend nccl needs CUDA GPUs; on a CPU use --backend gloo")
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group(backend)
    try:
        _agree_before_measuring(torch, args, rank, world, local, device, cuda)
        dtype = getattr(torch, DTYPES[args.dtype])
        rows = []
        for op in args.ops:
            for size in args.sizes:
                nbytes, call = _buffers(torch, op, size, world, dtype, device)
                for _ in range(args.warmup):
                    call()
                times = [_time_per_call_us(torch, call, args.iters, cuda) for _ in range(args.repeats)]
                spread = Spread.of(times)
                row = {"op": op, "bytes": nbytes, "us": round(spread.median, 3), "us_q1": round(spread.q1, 3),
                       "us_q3": round(spread.q3, 3), "repeats": spread.repeats,
                       # four significant figures, not two decimals: a slow gloo collective on a CPU is
                       # well under 0.01 GB/s, and a rate written as 0 would be refused on reading
                       "algbw_GBps": float(f"{algbw_gbps(nbytes, spread.median):.4g}"),
                       "busbw_GBps": float(f"{busbw_gbps(op, world, nbytes, spread.median):.4g}")}
                rows.append(row)
                _say(rank, f"{op} {nbytes / 2**20:,.2f} MiB: {spread:.1f} µs per call, bus bandwidth "
                           f"{row['busbw_GBps']:,.1f} GB/s")
                del call
        if cuda:
            torch.cuda.empty_cache()
        return {
            "world_size": world,
            "gpu": torch.cuda.get_device_name(local) if cuda else "CPU",
            "backend": backend,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda and backend == "nccl" else None,
            "torch": torch.__version__,
            "date": _dt.date.today().isoformat(),
            "dtype": args.dtype,
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "method": (f"{args.repeats} timings of {args.iters} back-to-back calls after {args.warmup} warm-up, "
                       + ("CUDA events on each rank's current stream" if cuda else "perf_counter on each rank")
                       + "; a timing's time per call is the slowest rank's; us is the median of the timings, "
                       "us_q1 and us_q3 their quartiles; busbw as nccl-tests defines it"),
            "rows": rows,
        }
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rank, world, local = _torchrun_env()
        # rank 0 makes the sweep's folder as it checks it can write there: a failed run takes it away again
        with files.undone_on_failure([args.output] if rank == 0 else []):
            sweep = measure(args, rank, world, local)
            if rank == 0:
                files.write_json_atomic(args.output, sweep)
        if rank == 0:
            print(args.output)
    except GuideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except _Stopped:
        return 2  # rank 0 has said why
    return 0


if __name__ == "__main__":
    sys.exit(main())
