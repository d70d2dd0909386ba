"""``profiling-guide report --merge OUT.json``: every rank's trace in one Chrome trace, a process per rank.

Perfetto (and ``chrome://tracing``) open one trace at a time; a run's ranks
are one file each. :func:`write_merged` streams every rank's events, one at
a time, into one file where

* each rank is one process, named ``rank N`` and sorted by rank; its CPU
  threads keep their ids and names, and its GPU streams become threads of
  the same process, named as the profiler named them (``stream 7``);
* the arrows between a launch and its kernel, and between a forward op and
  its backward op (flow events), keep joining the right pair: their ids are
  made unique per rank;
* where the ranks' clocks differ (traces of several hosts), each rank's times
  are shifted by its offset from the first rank's clock, measured where their
  collectives end (:func:`~profiling_guide.analysis.collectives.clock_offsets`).

Memory stays that of one event, whatever the number of ranks; the file is
written whole or not at all (:func:`profiling_guide.files.atomic_output`),
gzipped when its name ends in ``.gz``. It is strict JSON: a NaN or an infinity
a rank's trace holds (Python's reader takes the bare words) is written as
``null``, and an event whose ``ts`` or ``dur`` is not a finite number is left
out, having no place on a timeline; the top-level ``mergeNotes`` list says
how many of each, and for which rank.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from collections import Counter
from pathlib import Path

from profiling_guide.files import atomic_output, finite_or_null
from profiling_guide.trace.reader import TraceStream

# A GPU stream's thread id in the merged process: far above any OS thread id, one block per device.
_GPU_TID_BASE = 1 << 40
_DEVICE_TID_BLOCK = 1 << 24
# Flow ids of rank r are moved into their own block of ids.
_FLOW_ID_BLOCK = 1 << 40
_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
_PROCESS_META = {"process_name", "process_labels", "process_sort_index"}


def _cpu_pids(path: Path) -> set:
    """The process ids of a trace's CPU events (its GPU events use the device index as their pid)."""
    pids = set()
    for _, ev in TraceStream(path).events():
        if isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") in ("cpu_op", "user_annotation",
                                                                             "cuda_runtime", "cuda_driver"):
            pids.add(ev.get("pid"))
    return pids


def _untimed(ev: dict) -> bool:
    """True when the event's ``ts`` or ``dur`` is there but not a finite number (NaN, infinity, text, true)."""
    for key in ("ts", "dur"):
        if key in ev:
            value = ev[key]
            if type(value) not in (int, float) or not math.isfinite(value):
                return True
    return False


def _merged_events(path: Path, rank: int, shift_us: float, dropped: Counter | None = None):
    """Rank ``rank``'s events, moved into its process; ``dropped`` counts, per rank, those left out for their time."""
    cpu = _cpu_pids(path)
    yield {"name": "process_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}}
    yield {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}}
    for _, ev in TraceStream(path).events():
        if not isinstance(ev, dict):
            continue
        if _untimed(ev):
            if dropped is not None:
                dropped[rank] += 1
            continue
        pid, tid = ev.get("pid"), ev.get("tid")
        if ev.get("ph") == "M" and ev.get("name") in _PROCESS_META:
            continue  # the rank's process is named above
        if type(pid) is not int:
            continue  # the profiler's own markers ("Spans", "Traces"): they name no rank's work
        if pid not in cpu:
            if type(tid) is not int or tid < 0 or tid >= _DEVICE_TID_BLOCK or pid < 0:
                continue
            ev["tid"] = _GPU_TID_BASE + pid * _DEVICE_TID_BLOCK + tid
        ev["pid"] = rank
        if ev.get("ph") in ("s", "t", "f") and type(ev.get("id")) is int:
            ev["id"] = (rank + 1) * _FLOW_ID_BLOCK + ev["id"]
        if shift_us and type(ev.get("ts")) in (int, float):
            ev["ts"] = ev["ts"] - shift_us
        yield ev


def write_merged(traces: dict[int, Path], out: str | Path, *, offsets_us: dict[int, float] | None = None,
                 metadata: dict | None = None) -> Path:
    """Write the merged Chrome trace of ``traces`` (rank → path) to ``out``; returns ``out``.

    ``offsets_us`` (rank → µs) are subtracted from each rank's times;
    ``metadata`` joins the top-level fields (e.g. the first rank's
    ``distributedInfo``).
    """
    out = Path(out)
    suffix = ".json.gz" if out.name.endswith(".gz") else ".json"
    dropped, nulled = Counter(), Counter()
    with atomic_output(out, suffix=suffix, inputs=list(traces.values())) as tmp:
        raw = gzip.open(tmp, "wb", compresslevel=6) if suffix == ".json.gz" else open(tmp, "wb")
        with raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
            f.write('{"traceEvents": [\n')
            first = True
            for rank in sorted(traces):
                for ev in _merged_events(traces[rank], rank, (offsets_us or {}).get(rank, 0.0), dropped):
                    try:
                        text = json.dumps(ev, separators=(",", ":"), allow_nan=False)
                    except ValueError:  # a NaN or an infinity in it (rare: the cost is paid only then)
                        places: list[str] = []
                        text = json.dumps(finite_or_null(ev, "$", places), separators=(",", ":"), allow_nan=False)
                        nulled[rank] += len(places)
                    f.write(("" if first else ",\n") + text)
                    first = False
            f.write("\n]")
            top = {"displayTimeUnit": "ms", **(metadata or {})}
            notes = [*(f"rank {r}: {n:,} event(s) left out, their ts or dur not a finite number"
                       for r, n in sorted(dropped.items())),
                     *(f"rank {r}: {n:,} NaN or infinite value(s) written as null" for r, n in sorted(nulled.items()))]
            places: list[str] = []
            top = finite_or_null(top, "$", places)
            if places:
                notes.append(f"{len(places):,} NaN or infinite value(s) of the first rank's metadata written as null")
            if notes:
                top["mergeNotes"] = notes
            for key, value in top.items():
                f.write(f",\n{json.dumps(key)}: {json.dumps(value, allow_nan=False)}")
            f.write("}\n")
    return out
