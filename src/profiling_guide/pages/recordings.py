"""Where recordings live, and whether a page measures live or replays one.

A *recording* is what a live run leaves behind for a machine without a GPU:
``<name>.trace.json.gz`` (the profiler's Chrome trace) and ``<name>.run.json``
(the GPU, the versions, the arguments, the timings and a fingerprint of the
code that ran). Measurements that are not traces (benchmarks, sweeps) are kept
as ``<name>.run.json`` alone. They live in ``docs/recordings/<gpu-slug>/``.

``PROFILING_GUIDE_MODE`` picks the mode:

* ``auto`` (default): live if ``torch.cuda.is_available()``, else replay;
* ``live``: measure on the GPU and refresh the recordings (no GPU is an error);
* ``replay``: never touch a GPU; read the recordings.

An example talks to a :class:`Chapter`: it builds its models on
``chapter.device`` (``cuda`` live, ``meta`` in replay, so the code a reader
sees is the code that ran) and asks the chapter to ``capture`` or ``measure``.
"""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import html
import inspect
import io
import json
import os
import re
import textwrap
import tokenize
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from profiling_guide.errors import GuideError
from profiling_guide.files import write_json_atomic as _write_json_atomic
from profiling_guide.measure.timing import cost_key
from profiling_guide.output import echo, to_console
from profiling_guide.trace.run_record import read_run_record

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
    import torch

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
    """``$PROFILING_GUIDE_RECORDINGS``, else ``docs/recordings`` of this checkout."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    return Path(__file__).resolve().parents[3] / "docs" / "recordings"


# ------------------------------------------------------------------ fingerprints
def _code_text(obj) -> str:
    """Source of ``obj`` without comments, docstrings or blank lines.

    Fingerprints track the workload, not the prose: editing a comment or a
    docstring must not make a recording stale.
    """
    if isinstance(obj, str):
        return obj
    try:
        source = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        # No source to read (built-ins, code typed at a prompt): fall back on the
        # name, never on repr(), which holds a memory address.
        return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"
    docstring_lines: set[int] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:  # e.g. a lambda's line cut out of a larger call
        tree = None
    for node in ast.walk(tree) if tree else ():
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = source.splitlines()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, SyntaxError):
        pass
    kept = [line.rstrip() for i, line in enumerate(lines, 1) if i not in docstring_lines and line.strip()]
    return "\n".join(kept)


def fingerprint(code: Iterable = (), args: dict | None = None) -> str:
    """A short hash of the code objects (functions, classes, modules, strings) and arguments."""
    h = hashlib.sha256()
    for obj in code:
        h.update(_code_text(obj).encode())
        h.update(b"\0")
    h.update(json.dumps(args or {}, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


# -------------------------------------------------------------------- recordings
def write_json_atomic(path: Path, data: dict) -> list[str]:
    """Write JSON whole or not at all (see :mod:`profiling_guide.files`); NaN is written as null."""
    return _write_json_atomic(path, data, sort_keys=True)


@dataclass
class Recording:
    """One recorded run: its run record and (for captures) its trace."""

    name: str
    folder: Path
    run: dict
    stale: bool = False

    @property
    def trace_path(self) -> Path:
        return self.folder / f"{self.name}.trace.json.gz"

    @property
    def run_path(self) -> Path:
        return self.folder / f"{self.name}.run.json"

    @cached_property
    def trace(self):
        from profiling_guide.trace.model import Trace

        return Trace.load(self.trace_path)

    @property
    def timings(self) -> dict:
        """The profiler-off timings of a capture, as :class:`~profiling_guide.measure.timing.Spread`: ``device_us``,
        ``cpu_issue_us``, ``wall_us_per_call``."""
        from profiling_guide.measure.timing import Spread

        return {k: Spread.from_dict(v) for k, v in self.run.get("timings", {}).items() if isinstance(v, dict)}

    @property
    def values(self) -> dict:
        """What a ``measure`` call returned."""
        return self.run.get("values", {})


def _stale_policy() -> str:
    policy = os.environ.get(STALE_ENV, "warn").lower()
    if policy not in {"warn", "error"}:
        raise GuideError(f"{STALE_ENV}={policy!r}: use 'warn' or 'error'")
    return policy


class Chapter:
    """The recordings of one example, and the mode it runs in.

    Parameters
    ----------
    example:
        The example's name, e.g. ``"01_linear"``; recordings are named
        ``<example>.<capture>``.
    args:
        The example's arguments (shapes, dtype...). They are stored in each
        run record and are part of each fingerprint.
    mode:
        ``auto``/``live``/``replay``; default from ``$PROFILING_GUIDE_MODE``.
    root:
        The recordings root (default :func:`default_root`).
    """

    def __init__(self, example: str, args: dict, *, mode: str | None = None, root: str | Path | None = None):
        self.example = example
        self.args = dict(args)
        self.mode = resolve_mode(mode)
        self.root = Path(root) if root else default_root()
        self.recordings: list[Recording] = []
        if self.mode == "live":
            from profiling_guide.measure.capture import gpu_facts, software_versions

            self.gpu = gpu_facts()
            self.versions = software_versions()
            self.folder = self.root / gpu_slug(self.gpu["name"])
        else:
            self.folder = self._replay_folder()
            self.gpu, self.versions = None, None

    @property
    def live(self) -> bool:
        return self.mode == "live"

    @property
    def device(self) -> str:
        """``"cuda"`` live; ``"meta"`` in replay, where models are built but never run."""
        return "cuda" if self.live else "meta"

    def require_memory(self, nbytes: int, what: str) -> None:
        """Live: fail in one line if ``what`` cannot fit on the GPU. Replay: nothing to check."""
        if self.live:
            from profiling_guide.measure.capture import require_cuda_memory

            require_cuda_memory(nbytes, what)

    def _replay_folder(self) -> Path:
        slug = os.environ.get(GPU_ENV)
        if slug and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,99}", slug):
            raise GuideError(f"{GPU_ENV}={slug[:60]!r} is not a GPU folder name: use lowercase letters, digits "
                             f"and dashes, e.g. {DEFAULT_GPU}")
        if slug:
            folder = self.root / slug
            if not folder.is_dir():
                raise GuideError(f"{GPU_ENV}={slug}: no recordings folder {folder}")
            return folder
        folder = self.root / DEFAULT_GPU
        if folder.is_dir():
            return folder
        found = sorted(p for p in self.root.glob("*") if p.is_dir()) if self.root.is_dir() else []
        if not found:
            raise GuideError(
                f"replay needs recordings but {self.root} has none: record them on a GPU with "
                f"{MODE_ENV}=live, or set {ROOT_ENV}"
            )
        return found[0]

    # ------------------------------------------------------------------ record
    def _record(self, name: str, code: Iterable, extra_args: dict | None) -> tuple[str, str, dict]:
        full = f"{self.example}.{name}"
        args = {**self.args, **(extra_args or {})}
        return full, fingerprint(code, args), args

    def _replay(self, full: str, fp: str, *, needs_trace: bool) -> Recording:
        rec = Recording(full, self.folder, {})
        if not rec.run_path.is_file() or (needs_trace and not rec.trace_path.is_file()):
            missing = rec.trace_path if needs_trace and rec.run_path.is_file() else rec.run_path
            raise GuideError(
                f"no recording {missing.name} in {self.folder}: record it on a GPU with "
                f"{MODE_ENV}=live python examples/plot_{self.example}.py (or nox -s docs there)"
            )
        rec.run = read_run_record(rec.run_path)
        if rec.run.get("fingerprint") != fp:
            rec.stale = True
            msg = (
                f"recording {full} is stale: its code or arguments changed since "
                f"{rec.run.get('date', '?')}; re-record on a GPU with {MODE_ENV}=live "
                f"python examples/plot_{self.example}.py"
            )
            if _stale_policy() == "error":
                raise StaleRecordingError(msg)
            print(f"WARNING: {msg}", flush=True)  # stdout is what a gallery page shows
            warnings.warn(msg, stacklevel=3)
        self.recordings.append(rec)
        return rec

    def _run_record(self, name: str, fp: str, args: dict, **fields) -> dict:
        return {
            "name": name,
            "example": self.example,
            "gpu": self.gpu,
            "versions": self.versions,
            "args": args,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "fingerprint": fp,
            **fields,
        }

    def trace_file(self, name: str) -> str:
        """Where a live run's profiler should export the trace of capture ``name`` (then :meth:`load` it).

        A temporary file beside the recording: :meth:`load` moves it into place,
        so an interrupted run never leaves half a trace under the recording's name.
        """
        if not self.live:
            raise GuideError("trace_file() is for live runs: in replay, load() reads the recording")
        self.folder.mkdir(parents=True, exist_ok=True)
        return str(self.folder / f".{self.example}.{name}.partial.trace.json.gz")

    def load(
        self,
        name: str,
        step: Callable[[], object],
        *,
        label: str,
        code: Iterable = (),
        args: dict | None = None,
        time_it: bool = True,
        variant: str | None = None,
        extra: dict | None = None,
    ) -> Recording:
        """The recording of capture ``name``: in replay, read it; live, keep the trace just exported.

        Live, the trace must first have been written to :meth:`trace_file`
        (the page shows the ``torch.profiler`` block that does it); ``load``
        moves it into place, times ``step`` with the profiler off and writes
        the run record. ``code`` lists what the step runs (functions, classes,
        modules) so the fingerprint notices when it changes; ``step`` itself is
        always included. The timings are spreads over repeats
        (:mod:`profiling_guide.measure.timing`): ``device_us`` (the GPU's queue kept
        full), ``cpu_issue_us`` (the host's time to issue one call) and
        ``wall_us_per_call`` (one call at a time, synchronized). ``variant``
        names what runs (e.g. ``"eager"``): every page of one build that loads
        the same variant at the same arguments then quotes one CPU issue time.
        ``extra`` is kept in the run record as is (JSON-ready).
        """
        full, fp, all_args = self._record(name, [step, *code], args)
        if not self.live:
            return self._replay(full, fp, needs_trace=True)
        from profiling_guide.measure.timing import (
            cpu_issue_time,
            device_time,
            wall_time_per_call,
        )

        rec = Recording(full, self.folder, {})
        exported = Path(self.trace_file(name))
        if not exported.is_file():
            raise GuideError(f"no trace was exported to {exported}: profile the step and export its trace "
                             f"there (chapter.trace_file({name!r})) before chapter.load({name!r}, ...)")
        os.replace(exported, rec.trace_path)
        timings = {}
        if time_it:
            key = cost_key(variant, self.args) if variant else None
            with to_console():
                timings = {
                    "device_us": device_time(step, [()] * 8).to_dict(),
                    "cpu_issue_us": cpu_issue_time(step, key=key).to_dict(),
                    "wall_us_per_call": wall_time_per_call(step).to_dict(),
                }
        # ``extra`` may bring timings of its own (a run timed elsewhere, with time_it=False)
        rec.run = self._run_record(full, fp, all_args, **{"label": label, "timings": timings, **(extra or {})})
        write_json_atomic(rec.run_path, rec.run)
        self.recordings.append(rec)
        return rec

    def capture(
        self,
        name: str,
        step: Callable[[], object],
        *,
        label: str,
        code: Iterable = (),
        args: dict | None = None,
        time_it: bool = True,
        variant: str | None = None,
    ) -> Recording:
        """Profile ``step`` with the guide's schedule and :meth:`load` it (live), or load its recording (replay).

        The profiling is :func:`profiling_guide.measure.capture.profile_to_trace`: the
        same ``torch.profiler`` block the chapters show.
        """
        if self.live:
            from profiling_guide.measure.capture import profile_to_trace

            with to_console():
                profile_to_trace(step, Path(self.trace_file(name)), label=label)
        return self.load(name, step, label=label, code=code, args=args, time_it=time_it, variant=variant)

    def warm_up(self, *steps: Callable[[], object]) -> None:
        """Live: call each step once (compiling, autotuning), its logs on the console. Replay: nothing."""
        if self.live:
            with to_console():
                for step in steps:
                    step()

    def measure(self, name: str, fn: Callable[[], dict], *, code: Iterable = (), args: dict | None = None) -> Recording:
        """Run ``fn()`` (live) and keep the JSON-ready dict it returns, or load it (replay)."""
        full, fp, all_args = self._record(name, [fn, *code], args)
        if not self.live:
            return self._replay(full, fp, needs_trace=False)
        with to_console():
            values = fn()
        rec = Recording(full, self.folder, self._run_record(full, fp, all_args, values=values))
        write_json_atomic(rec.run_path, rec.run)
        self.recordings.append(rec)
        return rec

    # ------------------------------------------------------------------ banner
    def banner(self) -> Banner:
        """What the page says about where its numbers come from (printed too when run as a script)."""
        return echo(Banner(self))

    def downloads(self) -> Downloads:
        """Links to this page's traces and run records (in the built site under ``_recordings/``)."""
        return Downloads(self)


class Banner:
    """An HTML (and plain-text) note naming the GPU, versions and date of the page's data."""

    def __init__(self, chapter: Chapter):
        self.chapter = chapter

    def _facts(self) -> tuple[str, str, str, bool]:
        ch = self.chapter
        if ch.live:
            from profiling_guide.measure.capture import software_versions

            run = {"gpu": ch.gpu, "versions": software_versions(), "date": _dt.date.today().isoformat()}
        elif ch.recordings:
            run = ch.recordings[0].run
        else:
            candidates = sorted(ch.folder.glob(f"{ch.example}.*.run.json"))
            run = read_run_record(candidates[0]) if candidates else {}
        gpu = run.get("gpu") or {}
        v = run.get("versions") or {}
        gpu_text = f"{gpu.get('name', 'unknown GPU')} (compute capability {gpu.get('capability', '?')})"
        versions = ", ".join(f"{k} {v[k]}" for k in ("torch", "cuda", "cublas", "triton") if v.get(k))
        stale = any(r.stale for r in ch.recordings)
        return gpu_text, versions, str(run.get("date", "?"))[:10], stale

    def text(self) -> str:
        gpu, versions, date, stale = self._facts()
        if self.chapter.live:
            return f"Measured live on {gpu} with {versions}."
        text = f"Replayed from a recording made on {gpu} with {versions}, on {date}. No GPU was used to build this page."
        if stale:
            text += " WARNING: a recording is stale (the code changed since); its numbers may not match the code shown."
        return text

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        _, _, _, stale = self._facts()
        kind = "warning" if stale else ("note" if not self.chapter.live else "tip")
        title = "Live run" if self.chapter.live else "Replayed recording"
        return (
            f'<div class="admonition {kind} pg-banner"><p class="admonition-title">{title}</p>'
            f"<p>{html.escape(self.text())}</p></div>"
        )


SITE_RECORDINGS = "_recordings"  # where the docs build copies docs/recordings/ in the HTML output


class Downloads:
    """The recordings a page used, as links, with how to open a trace."""

    def __init__(self, chapter: Chapter):
        self.chapter = chapter

    def _files(self) -> list[tuple[str, str, bool]]:
        out = []
        for rec in self.chapter.recordings:
            for path in (rec.trace_path, rec.run_path):
                if path.is_file():
                    out.append((path.name, f"../{SITE_RECORDINGS}/{self.chapter.folder.name}/{path.name}", rec.stale))
        return out

    def __repr__(self) -> str:
        return "\n".join(f"{name}{' (stale)' if stale else ''}" for name, _, stale in self._files())

    def _repr_html_(self) -> str:
        items = "".join(
            f'<li><a href="{html.escape(href)}" download><code>{html.escape(name)}</code></a>'
            f"{' <strong>(stale)</strong>' if stale else ''}</li>"
            for name, href, stale in self._files()
        )
        return (
            '<div class="pg-downloads"><p>The recordings behind this page. Open a <code>.trace.json.gz</code> '
            'file in <a href="https://ui.perfetto.dev">ui.perfetto.dev</a> (“Open trace file”; it reads the '
            "gzip as is) or in <code>chrome://tracing</code>; the <code>.run.json</code> holds the GPU, "
            f"versions, arguments and timings.</p><ul>{items}</ul></div>"
        )
