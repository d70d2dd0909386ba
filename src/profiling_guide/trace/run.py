"""A *run*: the traces of every rank of one distributed job, found, identified and checked together.

``torchrun`` starts one process per GPU (a *rank*), and each rank profiled
with ``torch.profiler`` writes its own trace. A trace says which rank wrote
it in its top-level ``distributedInfo``: the backend, the rank, the world
size, the NCCL version and the process groups (``pg_config``: each group's
name and ranks). :func:`trace_files` finds the files a user names (files,
folders, globs); :func:`rank_info` reads who wrote each;
:func:`read_run` loads them one at a time, hands each :class:`~profiling_guide.trace.model.Trace`
to a function that reduces it to what the caller needs, and drops it before
the next, so reading 512 ranks holds one trace at a time. Whatever makes the
files not one run is one line: a rank given twice, world sizes that differ,
process groups or versions that differ, profiled windows too far apart for
one job.
"""

from __future__ import annotations

import gc
import glob
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from profiling_guide.errors import GuideError
from profiling_guide.trace.model import Trace

#: The names a trace file goes by: ``.json`` or ``.json.gz`` (``rank0.trace.json.gz``, ``worker.pt.trace.json``).
TRACE_SUFFIXES = (".json", ".json.gz")
#: Two traces whose recorded windows lie further apart than this (seconds) are not of one job.
RUN_WINDOW_SLACK_S = 600.0


@dataclass(frozen=True)
class RankInfo:
    """Who wrote a trace, from its ``distributedInfo`` (absent fields are None)."""

    rank: int | None
    world_size: int | None
    backend: str | None
    nccl_version: str | None
    #: each process group as ``(name, ranks)``, sorted by name
    groups: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def distributed(self) -> bool:
        return self.rank is not None and (self.world_size or 1) > 1


def rank_info(metadata: dict) -> RankInfo:
    """The :class:`RankInfo` of a trace's top-level fields (all None for a trace without ``distributedInfo``)."""
    info = metadata.get("distributedInfo")
    if not isinstance(info, dict):
        return RankInfo(None, None, None, None, ())
    groups = []
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict):
            ranks = pg.get("ranks")
            groups.append((str(pg.get("pg_name", "?")),
                           tuple(r for r in ranks if type(r) is int) if isinstance(ranks, list) else ()))

    def whole(key):
        value = info.get(key)
        return value if type(value) is int else None

    return RankInfo(whole("rank"), whole("world_size"), str(info["backend"]) if info.get("backend") else None,
                    str(info["nccl_version"]) if info.get("nccl_version") else None, tuple(sorted(groups)))


def _is_trace_name(path: Path) -> bool:
    # a run record beside the traces (<name>.run.json, or the run.json a training script writes) is not one
    return path.name.endswith(TRACE_SUFFIXES) and not (path.name.endswith(".run.json") or path.name == "run.json")


def trace_files(names: Iterable[str | Path]) -> list[Path]:
    """The trace files that ``names`` (files, folders, glob patterns) stand for, each once, in order.

    A folder stands for the ``.json``/``.json.gz`` files directly in it (not
    ``.run.json`` records); a name with ``*``, ``?`` or ``[`` that is not a
    file is a glob. Nothing found is a one-line GuideError.
    """
    found: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and _is_trace_name(p))
            if not inside:
                raise GuideError(f"{path} holds no trace files (.json or .json.gz): give the folder the ranks "
                                 "wrote their traces to")
            found += inside
        elif path.is_file():
            found.append(path)
        elif any(c in str(name) for c in "*?["):
            matches = sorted(Path(p) for p in glob.glob(str(name)) if Path(p).is_file())
            if not matches:
                raise GuideError(f"no file matches {name}: check the pattern (quote it, so the shell passes it on)")
            found += matches
        else:
            raise GuideError(f"no trace file at {path}: give .json or .json.gz traces, a folder of them, or a glob")
    unique, seen = [], set()
    for path in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


def _window_s(trace: Trace) -> tuple[float, float] | None:
    """The recorded steps' first and last instant as wall-clock seconds (``baseTimeNanoseconds`` + ``ts``)."""
    base = trace.metadata.get("baseTimeNanoseconds")
    events = trace.steps or trace.ops
    if type(base) is not int or not events:
        return None
    start = min(e.start_us for e in events)
    end = max(e.end_us for e in events)
    return base / 1e9 + start / 1e6, base / 1e9 + end / 1e6


@dataclass
class _Seen:
    path: Path
    info: RankInfo
    window: tuple[float, float] | None


def _check_one_run(seen: list[_Seen], new: _Seen) -> None:
    """One-line GuideError if ``new`` cannot belong to the run of ``seen``."""
    if new.info.rank is None:
        raise GuideError(f"{new.path} has no distributedInfo with a rank: a run's report needs the trace of each "
                         "rank of a torch.distributed job (give a single trace alone for its own report)")
    first = seen[0] if seen else None
    for other in seen:
        if other.info.rank == new.info.rank:
            raise GuideError(f"{other.path} and {new.path} are both rank {new.info.rank}: give one trace per rank")
    if first is None:
        return
    a, b = first.info, new.info
    if a.world_size != b.world_size:
        raise GuideError(f"{first.path} is rank {a.rank} of {a.world_size} but {new.path} is rank {b.rank} of "
                         f"{b.world_size}: mixed world sizes, so not one run; give the traces of one job")
    for what, x, y in (("process groups", a.groups, b.groups), ("backend", a.backend, b.backend),
                       ("NCCL version", a.nccl_version, b.nccl_version)):
        if x != y:
            raise GuideError(f"{first.path} and {new.path} are not of one run: their {what} differ "
                             f"({_short(x)} against {_short(y)}); give the traces of one job")
    if first.window and new.window:
        gap = max(first.window[0], new.window[0]) - min(first.window[1], new.window[1])
        if gap > RUN_WINDOW_SLACK_S:
            raise GuideError(f"{first.path} and {new.path} are not of one run: they were recorded {gap / 60:,.0f} "
                             "minutes apart; give the traces of one job")


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def read_run(paths: list[Path], reduce: Callable[[Trace, RankInfo], object], *,
             progress: Callable[[str], None] | None = None) -> tuple[list, list[int]]:
    """``reduce(trace, info)`` of every rank's trace in rank order, and the ranks of the world not given.

    Holds one trace in memory at a time. Checks, as it reads, that the traces
    are one run (see the module docstring); each problem is a one-line
    GuideError naming the files. Ranks missing from the world are no error
    (a job may profile a few ranks only): the caller says what they change.
    """
    if len(paths) < 2:
        raise GuideError("a run needs the traces of two or more ranks")
    seen: list[_Seen] = []
    results = []
    # What exists before the first trace is no garbage: frozen, the collections below walk only what
    # the ranks left (without this, collecting cost more than reading a small trace). A caller that froze
    # its own objects (a server before it forks, a test runner) finds them frozen still at the end, and
    # with them what it made since and the reductions returned here: all collected first, so no garbage
    # is frozen (what becomes garbage later is freed when that caller unfreezes).
    caller_froze = gc.get_freeze_count() > 0
    if caller_froze:
        gc.collect()
    gc.freeze()
    try:
        for i, path in enumerate(paths):
            if progress is not None:
                progress(f"reading {path.name} ({i + 1} of {len(paths)})")
            trace = Trace.load(path)
            entry = _Seen(path, rank_info(trace.metadata), _window_s(trace))
            _check_one_run(seen, entry)
            seen.append(entry)
            results.append((entry.info.rank, reduce(trace, entry.info)))
            # A trace's ops link to each other both ways (parents, children), so dropping it leaves cycles only
            # the cycle collector frees: collect every few ranks, or hundreds of traces pile up until it runs.
            # What survives is the reductions so far: frozen too, so each collection walks only the newest
            # ranks' objects, not every rank's (512 ranks: 1.2 s of collecting otherwise).
            del trace
            if i % 4 == 3:
                gc.collect()
                gc.freeze()
    finally:
        if not caller_froze:
            gc.unfreeze()
    world = seen[0].info.world_size or len(seen)
    missing = sorted(set(range(world)) - {s.info.rank for s in seen})
    results.sort(key=lambda pair: pair[0])
    return [result for _, result in results], missing
