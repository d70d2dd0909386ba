"""How a trace's kernels were launched, and what changed between two traces or two runs of one workload.

Two traces of the same forward (eager's and max-autotune's, or one variant
profiled in two runs) run the same work in the same order.
:func:`kernel_launches` reads, for each kernel of a step, the facts the trace
holds about it: its mean duration over the profiled steps, its grid and
block, its registers per thread and shared memory per block, and, for a GEMM,
the product it computed (from the launching op's recorded shapes, where the op
is an ``aten::mm`` or the like). :func:`paired_gemms` pairs the GEMMs of two
traces in launch order; :func:`changed_launches` lists the kernels whose
launch differs between two traces. Nothing here reads a kernel's name for
more than its library and a short label.

How many blocks of a kernel one SM can hold at once follows from the launch
arguments and the GPU's limits the trace records (``deviceProperties``):
registers per SM over the registers a block takes (allocated per warp, in
units of 256), shared memory per SM over the block's, threads per SM over the
block's; the least of the three (:func:`resident_blocks`). It is an upper
limit: the hardware's own cap on blocks per SM is not in the trace.

:func:`ranking_changes` and :func:`mover` compare two runs' timings of the
same variants: the pairs whose verdict (:func:`~profiling_guide.spread.compare`:
faster, slower, or a tie when the spreads overlap) differs, and which of a
pair moved. Within one run the spreads are tight (a few tenths of a percent),
and every variant drifts a little between runs; of a pair ranked otherwise,
the one whose time changed more is the one that changed the ranking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

from profiling_guide.analysis.trace_report import GEMM_OPERANDS, gemm_shape
from profiling_guide.errors import GuideError
from profiling_guide.spread import Spread, compare

#: Registers are allocated to a warp in units of this many (NVIDIA's occupancy calculator, sm_50 to sm_90).
REGISTER_UNIT = 256
WARP = 32


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of a step, as the trace shows it (``us``: its mean over the profiled steps)."""

    name: str  # the whole name, as the trace gives it
    kernel: str  # the decoded short name
    kind: str  # "gemm", "pointwise"...
    library: str  # "cublas", "triton", "cutlass"...
    us: float
    blocks: int  # the grid's blocks
    threads: int  # per block
    registers: int | None  # per thread
    shared_bytes: int | None  # per block
    product: tuple[int, int, int] | None = None  # a GEMM's (M, K, N), from the launching op's shapes

    @property
    def warps(self) -> int:
        return math.ceil(self.threads / WARP)

    @property
    def launch(self) -> tuple[int, int, int | None, int | None]:
        """What the launch arguments fix: blocks, threads per block, registers per thread, shared bytes."""
        return self.blocks, self.threads, self.registers, self.shared_bytes


def _limits(trace) -> dict:
    devices = [d for d in trace.metadata.get("deviceProperties") or [] if isinstance(d, dict)]
    return devices[0] if devices else {}


def resident_blocks(launch: KernelLaunch, trace) -> int | None:
    """At most how many blocks of ``launch`` one SM holds at once, by registers, shared memory and threads.

    None where the trace lacks the GPU's limits or the kernel's registers.
    """
    limits = _limits(trace)
    regs_sm, smem_sm = limits.get("regsPerMultiprocessor"), limits.get("sharedMemPerMultiprocessor")
    threads_sm = limits.get("maxThreadsPerMultiprocessor")
    if not (regs_sm and smem_sm and threads_sm and launch.registers and launch.threads):
        return None
    per_warp = math.ceil(launch.registers * WARP / REGISTER_UNIT) * REGISTER_UNIT
    caps = [regs_sm // (per_warp * launch.warps), threads_sm // launch.threads]
    if launch.shared_bytes:
        caps.append(smem_sm // launch.shared_bytes)
    return min(caps)


def _gemm_product(ev) -> tuple[int, int, int] | None:
    """``(M, K, N)`` of the GEMM op that launched ``ev`` (itself or up to two ops above), else None."""
    op = ev.launch.op if ev.launch is not None else None
    for _ in range(3):
        if op is None or op.name in GEMM_OPERANDS:
            break
        op = op.parent
    shape = gemm_shape(op) if op is not None else None
    return shape[1:] if shape and shape[0] == 1 else None


def kernel_launches(trace, kind: str | None = None) -> list[KernelLaunch]:
    """The kernels of one step of ``trace`` (only those of ``kind`` if given), in launch order.

    Each with its mean µs over the profiled steps, which must launch the same
    kernels in the same order (a forward profiled several times does); a
    trace without steps gives ``[]``.
    """
    steps = [[k for k in s.kernels if kind is None or k.decoded.kind == kind] for s in trace.steps]
    if not steps or not steps[0]:
        return []
    names = [k.name for k in steps[0]]
    if any([k.name for k in s] != names for s in steps):
        raise GuideError(f"{trace.source}: its steps launch different kernels; compare one step at a time")
    out = []
    for i, first in enumerate(steps[0]):
        grid, block = first.grid or (0,), first.block or (0,)
        out.append(KernelLaunch(
            name=first.name, kernel=first.decoded.short, kind=first.decoded.kind, library=first.decoded.library,
            us=sum(s[i].dur_us for s in steps) / len(steps), blocks=math.prod(grid), threads=math.prod(block),
            registers=first.args.get("registers per thread"), shared_bytes=first.args.get("shared memory"),
            product=_gemm_product(first) if first.decoded.kind == "gemm" else None))
    return out


def paired_gemms(trace, reference) -> list[tuple[KernelLaunch, KernelLaunch]]:
    """``trace``'s GEMMs beside ``reference``'s, in launch order: the same products, run two ways.

    Both traces must run as many GEMMs per step; where both name a product
    it must be the same. A pair's product is taken from whichever names it.
    """
    mine, theirs = kernel_launches(trace, "gemm"), kernel_launches(reference, "gemm")
    if len(mine) != len(theirs):
        raise GuideError(f"{trace.source} runs {len(mine)} GEMMs per step and {reference.source} "
                         f"{len(theirs)}: not the same products")
    pairs = []
    for a, b in zip(mine, theirs, strict=True):
        if a.product and b.product and a.product != b.product:
            raise GuideError(f"GEMM {len(pairs) + 1}: {a.product} in {trace.source}, {b.product} in "
                             f"{reference.source}: not the same product")
        product = a.product or b.product
        pairs.append((replace(a, product=product), replace(b, product=product)))
    return pairs


def changed_launches(before, after) -> list[tuple[KernelLaunch, KernelLaunch]]:
    """The kernels, paired in launch order, whose name or launch arguments differ between two traces.

    The two must launch as many kernels per step (the same workload profiled twice).
    """
    a, b = kernel_launches(before), kernel_launches(after)
    if len(a) != len(b):
        raise GuideError(f"{before.source} launches {len(a)} kernels per step and {after.source} {len(b)}: "
                         "not the same workload")
    return [(x, y) for x, y in zip(a, b, strict=True) if x.name != y.name or x.launch != y.launch]


# ------------------------------------------------------------------ two runs of the same variants
def ranking_changes(before: dict[str, Spread], after: dict[str, Spread]) -> list[tuple[str, str, str, str]]:
    """``(a, b, verdict before, verdict after)`` for each pair of variants timed in both runs whose
    verdict of ``a`` against ``b`` differs (a tie is a verdict: tie → faster is a change)."""
    names = [n for n in before if n in after]
    return [(a, b, compare(before[a], before[b]), compare(after[a], after[b]))
            for a, b in combinations(names, 2) if compare(before[a], before[b]) != compare(after[a], after[b])]


def mover(a: str, b: str, before: dict[str, Spread], after: dict[str, Spread]) -> str:
    """Of two variants, the one whose median changed more between the runs, relative to its own."""
    def change(n: str) -> float:
        return abs(after[n].median / before[n].median - 1)

    return a if change(a) >= change(b) else b
