"""Where recordings live, and whether a page measures live or replays one.

A *recording* is what a live run leaves behind for a machine without a GPU:
``<name>.trace.json.gz`` (the profiler's Chrome trace) and ``<name>.run.json``
(the GPU, the versions, the arguments, the timings and two fingerprints of the
code that ran: :class:`Fingerprints`). Measurements that are not traces (benchmarks, sweeps) are kept
as ``<name>.run.json`` alone. They live in ``docs/recordings/<gpu-slug>/``
(``<example>.<name>.trace.json.gz`` and ``.run.json``), and a wheel of the
package carries them as ``profiling_guide/recordings/<gpu-slug>/``:
:func:`default_root` finds either.

``PROFILING_GUIDE_MODE`` picks the mode:

* ``auto`` (default): live if ``torch.cuda.is_available()``, else replay;
* ``live``: measure on the GPU and refresh the recordings (no GPU is an error);
* ``replay``: never touch a GPU; read the recordings.

A chapter reaches its recordings through
:class:`~profiling_guide.pages.chapter.Chapter`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from glob import escape as glob_escape
from functools import cached_property, lru_cache
from pathlib import Path

from profiling_guide.errors import GuideError
from profiling_guide.files import write_json_atomic as _write_json_atomic
from profiling_guide.pages.closure import Reached, listed_texts, reach
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace

MODE_ENV = "PROFILING_GUIDE_MODE"
ROOT_ENV = "PROFILING_GUIDE_RECORDINGS"
GPU_ENV = "PROFILING_GUIDE_GPU"
STALE_ENV = "PROFILING_GUIDE_STALE"  # "warn" (default) or "error"
DEFAULT_GPU = "nvidia-h100-80gb-hbm3"
MODES = ("auto", "live", "replay")


class StaleRecordingError(GuideError):
    """The code or arguments changed since the recording was made."""


def resolve_mode(requested: str | None = None) -> str:
    """``live`` or ``replay`` from ``requested`` or ``$PROFILING_GUIDE_MODE``."""
    import torch  # lazy: reading recordings (the report, the tests) needs no torch

    mode = (requested or os.environ.get(MODE_ENV) or "auto").strip().lower()
    if mode not in MODES:
        raise GuideError(f"{MODE_ENV}={mode!r} is not a mode: use one of {', '.join(MODES)}")
    has_cuda = torch.cuda.is_available()
    if mode == "live" and not has_cuda:
        raise GuideError(
            f"{MODE_ENV}=live but no CUDA GPU is visible to torch {torch.__version__}: "
            f"run on a GPU machine, or use {MODE_ENV}=replay to build from recordings"
        )
    if mode == "auto":
        return "live" if has_cuda else "replay"
    return mode


def gpu_slug(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` → ``"nvidia-h100-80gb-hbm3"``: the recordings folder."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def default_root() -> Path:
    """Where the recordings are: the one place that decides it (the docs build, the noxfile and the examples ask here).

    ``$PROFILING_GUIDE_RECORDINGS`` if set; else the recordings installed with
    the package (``profiling_guide/recordings/``: a wheel carries
    ``docs/recordings`` there, see ``setup.py``), so a chapter copied anywhere
    replays after ``pip install`` of the repository; else ``docs/recordings``
    of this checkout (a source tree or an editable install, where a live run
    refreshes them).
    """
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    package = Path(__file__).resolve().parents[1]
    installed = package / "recordings"
    return installed if installed.is_dir() else package.parents[1] / "docs" / "recordings"


# ------------------------------------------------------------------ fingerprints
def _name_of(obj) -> str:
    """An object's name, for one with no source to read (a built-in, code typed at a prompt): never its repr(),
    which holds a memory address."""
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def fingerprint(code: Iterable = (), args: dict | None = None) -> str:
    """A short hash of the code objects (functions, classes, modules, strings) and arguments: the *listed*
    fingerprint, of what ``code`` names and nothing it calls (a run record's ``fingerprint``), each as its syntax
    tree less docstrings and argument checks (:func:`profiling_guide.pages.closure.listed_texts`)."""
    h = hashlib.sha256()
    for text in listed_texts(code, fallback=_name_of):
        h.update(text.encode())
        h.update(b"\0")
    h.update(json.dumps(args or {}, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def reached(code: Iterable = ()) -> Reached:
    """What ``code`` reaches in this package, transitively (:mod:`profiling_guide.pages.closure`)."""
    return reach(list(code), fallback=_name_of)


def closure_fingerprint(code: Iterable = (), args: dict | None = None) -> str:
    """A short hash of everything ``code`` reaches in this package and of the arguments: the *closure*
    fingerprint (a run record's ``closure_fingerprint``).

    It hashes each reached definition's syntax tree (no comments, docstrings or layout), so reformatting
    or rewording never makes a recording stale, and any edit to what runs does: the listed code, the
    kernels it launches, their helpers and constants.
    """
    return reached(code).fingerprint(args)


class Fingerprints:
    """Both fingerprints of a recording's code and arguments, each computed when first asked for.

    ``listed`` (:func:`fingerprint`) hashes the listed objects alone; ``closure``
    (:func:`closure_fingerprint`) hashes everything they reach in this package. A live run stores
    both; a replay checks ``closure`` where its run record has one, else ``listed``.
    """

    def __init__(self, code: Iterable, args: dict | None):
        self.code, self.args = list(code), args

    @cached_property
    def listed(self) -> str:
        return fingerprint(self.code, self.args)

    @cached_property
    def reached(self) -> Reached:
        return reached(self.code)

    @cached_property
    def closure(self) -> str:
        return self.reached.fingerprint(self.args)


# -------------------------------------------------------------------- recordings
def write_json_atomic(path: Path, data: dict) -> list[str]:
    """Write JSON whole or not at all (see :mod:`profiling_guide.files`); NaN is written as null."""
    return _write_json_atomic(path, data, sort_keys=True)


def recorded_trace(path: Path) -> Trace:
    """The trace at ``path``, read once per process while the file stays the same; shared, so read-only.

    A page reads a recording more than once (its own analysis, its variant's
    verdict among its siblings, the other GPU's), and a docs build runs every
    chapter in one process. The last few traces read are kept, by the path
    as given (the trace's source, which its messages name) and the file's
    device, inode, size and modification time: a trace recorded again is read again.
    """
    path = Path(path)
    try:
        found = path.stat()
    except OSError:
        return Trace.load(path)  # which says in one line what is wrong
    return _read_once(path, found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


@lru_cache(maxsize=16)  # a chapter reads at most a dozen traces; the GPU's recordings are a few MiB each
def _read_once(path: Path, device: int, inode: int, size: int, mtime_ns: int) -> Trace:
    return Trace.load(path)


@dataclass
class Recording:
    """One recorded run: its run record and (for captures) its trace."""

    name: str
    folder: Path
    run: dict
    stale: bool = False
    #: Checked by the fingerprint of its listed code only: its run record has no ``closure_fingerprint``
    #: (made before the closure was fingerprinted), so an edit to a kernel it runs goes unnoticed.
    listed_only: bool = False

    @property
    def trace_path(self) -> Path:
        return self.folder / f"{self.name}.trace.json.gz"

    @property
    def run_path(self) -> Path:
        return self.folder / f"{self.name}.run.json"

    @property
    def rank_trace_paths(self) -> list[Path]:
        """The per-rank traces of a job of several ranks (``<name>.rank<r>.trace.json.gz``), in rank order."""
        found = {int(m[1]): p for p in self.folder.glob(f"{glob_escape(self.name)}.rank*.trace.json.gz")
                 if (m := re.fullmatch(re.escape(self.name) + r"\.rank(\d+)\.trace\.json\.gz", p.name))}
        return [found[r] for r in sorted(found)]

    @cached_property
    def trace(self) -> Trace:
        return recorded_trace(self.trace_path)

    @property
    def timings(self) -> dict:
        """The profiler-off timings of a capture, as :class:`~profiling_guide.spread.Spread`: ``device_us``,
        ``cpu_issue_us``, ``wall_us_per_call``."""
        return {k: Spread.from_dict(v) for k, v in self.run.get("timings", {}).items()}

    @property
    def values(self) -> dict:
        """What a ``measure`` call returned."""
        return self.run.get("values", {})


def stale_policy() -> str:
    policy = os.environ.get(STALE_ENV, "warn").lower()
    if policy not in {"warn", "error"}:
        raise GuideError(f"{STALE_ENV}={policy!r}: use 'warn' or 'error'")
    return policy
