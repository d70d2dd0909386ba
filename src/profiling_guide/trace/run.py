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
one job, a world size or a rank that no job has (see :func:`check_world`).
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
from profiling_guide.trace.reader import NotATrace, TraceStream

#: The names a trace file goes by: ``.json`` or ``.json.gz`` (``rank0.trace.json.gz``, ``worker.pt.trace.json``).
TRACE_SUFFIXES = (".json", ".json.gz")
#: Two traces whose recorded windows lie further apart than this (seconds) are not of one job.
RUN_WINDOW_SLACK_S = 600.0
#: The most ranks a run may have: more GPUs than any one job has run on. The ranks missing from the world
#: are listed, so the world size a trace claims sets the memory a report takes, and is held to this.
MAX_WORLD_SIZE = 2**17


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


def not_a_trace(path: Path) -> str | None:
    """Why ``path`` is JSON of another kind than a Chrome trace (e.g. a run's ``cases.json``), or None.

    Reads only up to the first event. A file that is no JSON at all, or a
    damaged trace, gives None: reading it as a trace says what is wrong with it.
    """
    try:
        for _, event in TraceStream(path).events():
            # an event of Chrome's format has a phase; a list of other objects is some other JSON
            return None if isinstance(event, dict) and "ph" in event else "a list of other things than trace events"
    except NotATrace as exc:
        return exc.reason
    except GuideError:
        return None
    return None


def trace_files(names: Iterable[str | Path], skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """The trace files that ``names`` (files, folders, glob patterns) stand for, each once, in order.

    A folder stands for the ``.json``/``.json.gz`` files directly in it (not
    ``.run.json`` records); a name with ``*``, ``?`` or ``[`` that is not a
    file is a glob. A file a folder or a glob holds that is JSON but not a
    trace (a ``cases.json`` beside the ranks' traces) is left out, and
    ``(path, why)`` appended to ``skipped``; a file named on its own is read
    as a trace whatever it holds. An empty name, or nothing found, is a
    one-line GuideError.
    """
    found: list[Path] = []
    for name in names:
        if not str(name).strip():
            raise GuideError("a trace's name is empty: give .json or .json.gz traces, a folder of them, or a glob")
        path = Path(name)
        if path.is_dir():
            inside = _traces_among(sorted(p for p in path.iterdir() if p.is_file() and _is_trace_name(p)), skipped)
            if not inside:
                raise GuideError(f"{path} holds no trace files (.json or .json.gz): give the folder the ranks "
                                 "wrote their traces to")
            found += inside
        elif path.is_file():
            found.append(path)
        elif any(c in str(name) for c in "*?["):
            matches = _traces_among(sorted(Path(p) for p in glob.glob(str(name)) if Path(p).is_file()), skipped)
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


def _traces_among(paths: list[Path], skipped: list[tuple[Path, str]] | None) -> list[Path]:
    """``paths`` less the JSON files that are not traces, each noted in ``skipped``."""
    kept = []
    for path in paths:
        why = not_a_trace(path)
        if why is None:
            kept.append(path)
        elif skipped is not None:
            skipped.append((path, why))
    return kept


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


def check_world(path: Path, info: RankInfo) -> None:
    """One-line GuideError unless ``info`` is a rank a torch.distributed job can have.

    The world size is a whole number from 1 to :data:`MAX_WORLD_SIZE`, and
    the rank lies in ``0 .. world size - 1`` (below :data:`MAX_WORLD_SIZE`
    where the trace gives no world size).
    """
    fix = "its distributedInfo is damaged: give the trace the rank wrote, or leave this one out"
    world = info.world_size
    if world is not None and world < 1:
        raise GuideError(f"{path} gives a world size of {world}: a torch.distributed job has 1 rank or more; {fix}")
    if world is not None and world > MAX_WORLD_SIZE:
        raise GuideError(f"{path} gives a world size of {world:,}, more than the {MAX_WORLD_SIZE:,} ranks a run's "
                         f"report reads (more GPUs than any one job has run on); {fix}")
    if not 0 <= info.rank < (world or MAX_WORLD_SIZE):
        of = f"a world of {world:,}, whose ranks are 0 to {world - 1:,}" if world else "any job"
        raise GuideError(f"{path} is rank {info.rank:,}, which is not a rank of {of}; {fix}")


def _check_groups(path: Path, info: RankInfo) -> None:
    """One-line GuideError if the trace's process groups say another world size than it does.

    torch.profiler lists every process group with its ranks, the world's own
    (default) group among them: where it lists any, the largest holds every
    rank, so the file itself shows how large the world is.
    """
    sizes = [len(ranks) for _, ranks in info.groups if ranks]
    if info.world_size is not None and sizes and max(sizes) != info.world_size:
        raise GuideError(f"{path} gives a world size of {info.world_size:,} but its largest process group holds "
                         f"{max(sizes):,} ranks: its distributedInfo is damaged; give the trace the rank wrote, or "
                         "leave this one out")


def _check_one_run(seen: list[_Seen], new: _Seen) -> None:
    """One-line GuideError if ``new`` cannot belong to the run of ``seen``."""
    if new.info.rank is None:
        raise GuideError(f"{new.path} has no distributedInfo with a rank: a run's report needs the trace of each "
                         "rank of a torch.distributed job (give a single trace alone for its own report)")
    check_world(new.path, new.info)
    for other in seen:
        if other.info.rank == new.info.rank:
            raise GuideError(f"{other.path} and {new.path} are both rank {new.info.rank}: give one trace per rank")
    if seen:
        _check_same_job(seen[0], new)
    _check_groups(new.path, new.info)


def _check_same_job(first: _Seen, new: _Seen) -> None:
    """One-line GuideError if ``new`` is not of the job ``first`` is: world size, groups, versions, time."""
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
    # Every rank lies below the world size (check_world), which is at most MAX_WORLD_SIZE: listing the ranks
    # missing takes memory of that order, never of what a trace claims.
    given = {s.info.rank for s in seen}
    world = seen[0].info.world_size or max(len(seen), max(given) + 1)
    missing = [rank for rank in range(world) if rank not in given]
    results.sort(key=lambda pair: pair[0])
    return [result for _, result in results], missing
