"""How fast a collective moved its data, as nccl-tests measures it, against a measured sweep.

nccl-tests gives two rates for a collective of ``bytes`` (the full buffer:
the gathered output of an all-gather, the input of the others) that took
``t`` seconds:

* **algbw** = ``bytes / t``, the rate the caller sees;
* **busbw** = ``algbw × factor``, the rate each link ran at, comparable across
  collectives and group sizes ``n``: ``2(n−1)/n`` for all-reduce (each byte
  crosses the links twice, once reduced and once gathered), ``(n−1)/n`` for
  all-gather, reduce-scatter and all-to-all, 1 for broadcast and reduce.

GB here is 10⁹ bytes, as nccl-tests prints it.

The same factor gives the **bytes each rank sends** for one call,
``bytes × factor`` (:func:`sent_bytes`): in a ring all-reduce each rank
sends ``2(n−1)`` chunks of ``bytes/n`` (``n−1`` reduce-scatter steps, then
``n−1`` all-gather steps); in a ring all-gather or reduce-scatter ``n−1``
chunks of ``bytes/n``, ``bytes`` being the full buffer (the gathered output,
the reduce-scatter's input); a broadcast's root or a reduce's ranks send the
buffer once. That is the traffic busbw is the rate of (no algorithm moves
less per rank on average, in-switch reductions such as NVLS aside). On two
ranks an all-reduce sends the whole buffer, an all-gather or a
reduce-scatter half of it. Summing the buffers instead counts an
all-gather's full output as moved, though each rank already held its own
``1/n`` of it.

A sweep (:func:`read_sweep`; ``profiling-guide bench-nccl`` measures one) holds
busbw of each collective at sizes from a few MiB to a GiB, on the machine
that ran the job. :meth:`Sweep.busbw_at` reads it at any size (log-log
between measured sizes), and :meth:`Sweep.regime` says whether a size is
latency-bound (the sweep itself reaches less than half its best busbw there:
fixed per-call costs dominate, larger or fewer calls help) or
bandwidth-bound (the links run near their best: only fewer bytes, or hiding
the transfer behind compute, helps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from profiling_guide.errors import GuideError, quoted
from profiling_guide.trace.run import MAX_WORLD_SIZE
from profiling_guide.trace.run_record import is_number, read_json_file

#: Half the best busbw: below it, a size is latency-bound.
LATENCY_BOUND_SHARE = 0.5


def bus_factor(collective: str, group_size: int) -> float | None:
    """nccl-tests' busbw/algbw factor for ``collective`` among ``group_size`` ranks (None: no such factor)."""
    n = group_size
    if n < 1:
        return None
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce"):
        return 1.0
    return None


def sent_bytes(collective: str, group_size: int, nbytes: float) -> float | None:
    """The bytes each rank sends for one call of ``collective`` on a ``nbytes`` buffer among ``group_size`` ranks.

    ``nbytes × bus_factor``: see the module docstring (None where the collective has no factor).
    """
    factor = bus_factor(collective, group_size)
    return None if factor is None else nbytes * factor


def algbw_gbps(nbytes: float, us: float) -> float:
    """Bytes over time, in GB/s (10⁹ bytes per second)."""
    return nbytes / us / 1e3 if us > 0 else float("nan")


def busbw_gbps(collective: str, group_size: int, nbytes: float, us: float) -> float:
    """nccl-tests' bus bandwidth of one call, GB/s (NaN where the collective has no factor)."""
    factor = bus_factor(collective, group_size)
    return algbw_gbps(nbytes, us) * factor if factor is not None else float("nan")


@dataclass(frozen=True)
class SweepRow:
    op: str
    bytes: int
    us: float
    busbw_gbps: float


@dataclass
class Sweep:
    """A measured bus-bandwidth sweep: rows by collective and size, and where it came from."""

    rows: list[SweepRow]
    source: str
    world_size: int | None = None
    gpu: str | None = None

    def ops(self) -> set[str]:
        return {r.op for r in self.rows}

    def _rows(self, op: str) -> list[SweepRow]:
        return sorted((r for r in self.rows if r.op == op), key=lambda r: r.bytes)

    def busbw_at(self, op: str, nbytes: float) -> float | None:
        """The sweep's busbw for ``op`` at ``nbytes``: log-log between measured sizes, the nearest outside them."""
        rows = self._rows(op)
        if not rows or nbytes <= 0:
            return None
        if nbytes <= rows[0].bytes:
            return rows[0].busbw_gbps
        if nbytes >= rows[-1].bytes:
            return rows[-1].busbw_gbps
        for lo, hi in zip(rows, rows[1:], strict=False):  # neighbours: one pair fewer
            if nbytes == lo.bytes:
                return lo.busbw_gbps
            if lo.bytes < nbytes < hi.bytes:
                x = (math.log(nbytes) - math.log(lo.bytes)) / (math.log(hi.bytes) - math.log(lo.bytes))
                return math.exp(math.log(lo.busbw_gbps) + x * (math.log(hi.busbw_gbps) - math.log(lo.busbw_gbps)))
        return None

    def in_range(self, op: str, nbytes: float) -> bool:
        rows = self._rows(op)
        return bool(rows) and rows[0].bytes <= nbytes <= rows[-1].bytes

    def best_busbw(self, op: str) -> float | None:
        rows = self._rows(op)
        return max(r.busbw_gbps for r in rows) if rows else None

    def regime(self, op: str, nbytes: float) -> str | None:
        """``"latency-bound"`` or ``"bandwidth-bound"`` at ``nbytes`` by the sweep (see the module docstring)."""
        at, best = self.busbw_at(op, nbytes), self.best_busbw(op)
        if at is None or not best:
            return None
        return "latency-bound" if at < LATENCY_BOUND_SHARE * best else "bandwidth-bound"


def sweep_from_data(data, source: str = "<memory>") -> Sweep:
    """A :class:`Sweep` from the JSON ``profiling-guide bench-nccl`` writes; one-line GuideError if malformed.

    Every number is a positive one a float holds (no boolean, no 400-digit
    integer); the world size, where given, a whole number of ranks.
    """
    fix = "give a file that profiling-guide bench-nccl wrote"
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise GuideError(f"{source} is not an NCCL sweep (no 'rows' list): {fix}")
    parsed = []
    for i, row in enumerate(rows):
        try:
            op, nbytes, us, bus = row["op"], row["bytes"], row["us"], row["busbw_GBps"]
        except (KeyError, TypeError):
            raise GuideError(f"{source}: row {i} needs op, bytes, us and busbw_GBps") from None
        if not isinstance(op, str) or not all(is_number(v) and v > 0 for v in (nbytes, us, bus)):
            shown = {k: row.get(k) for k in ("op", "bytes", "us", "busbw_GBps")}
            raise GuideError(f"{source}: row {i} must have an op name and positive numbers, got {quoted(shown, 80)}")
        parsed.append(SweepRow(op, int(nbytes), float(us), float(bus)))
    world = data.get("world_size")
    if world is not None and not (type(world) is int and 1 <= world <= MAX_WORLD_SIZE):
        raise GuideError(f"{source}: 'world_size' must be a whole number of ranks, got {quoted(world, 80)}: {fix}")
    return Sweep(parsed, source, world, str(data["gpu"]) if data.get("gpu") else None)


def read_sweep(path: str | Path) -> Sweep:
    """Read a sweep file (the format of ``docs/samples/h100x4/nccl_sweep.json``), as a run record is read.

    :func:`~profiling_guide.trace.run_record.read_json_file` holds it to a
    small regular file (no device, no FIFO), of strict JSON, nested a few
    levels deep: anything else is one line.
    """
    data = read_json_file(path, what="the NCCL sweep", fix="give a file that profiling-guide bench-nccl wrote")
    return sweep_from_data(data, str(path))
