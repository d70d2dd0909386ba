"""A chapter of the guide: its flags, its mode (live or replay) and its recordings.

A chapter page shows the code under study and the ``torch.profiler`` block
that profiles it; everything about *where the numbers come from* sits behind
one object, made by one call at the top of the page::

    chapter = Chapter.from_command_line("02_mlp_eager", batch=64, seq=128, dim=768, hidden=3072)

Live (a CUDA GPU), ``chapter.profile(...)`` runs the page's own profiler
function, keeps the trace it exports as the chapter's recording and times the
step with the profiler off; in replay it reads the same recording back.
Models are built on ``chapter.device``: ``cuda`` live, ``meta`` in replay
(shapes only), so the code a reader sees is the code that ran.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import html
import inspect
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from profiling_guide.errors import GuideError
from profiling_guide.files import move_into_place
from profiling_guide.kernels import train_ranks
from profiling_guide.measure import timing
from profiling_guide.measure.capture import (
    gpu_facts,
    profile_to_trace,
    require_cuda_memory,
    software_versions,
)
from profiling_guide.measure.distributed import train_ranks as run_job
from profiling_guide.measure.timing import (
    cost_key,
    cpu_issue_time,
    device_time,
    wall_time_per_call,
)
from profiling_guide.output import echo, to_console
from profiling_guide.pages.args import (
    DTYPES,
    example_parser,
    positive_int,
    run_args,
)
from profiling_guide.pages.recordings import (
    DEFAULT_GPU,
    GPU_ENV,
    MODE_ENV,
    ROOT_ENV,
    Fingerprints,
    Recording,
    StaleRecordingError,
    default_root,
    gpu_slug,
    resolve_mode,
    stale_policy,
    write_json_atomic,
)
from profiling_guide.trace.kernel_information import kernel_information_path
from profiling_guide.trace.run_record import read_run_record


def page_depth(page_file: str | None) -> int:
    """Folders between ``examples/`` and the page's file (a page in ``examples/deep_dives/``: 1); 0 if unknown.

    sphinx-gallery gives an example no ``__file__`` but runs it in its own
    folder: without ``page_file``, the working folder says where the page is.
    """
    parents = Path(page_file or Path.cwd() / "page.py").resolve().parents
    found = next((i for i, p in enumerate(parents) if p.name in ("examples", "auto_examples")), None)
    return found or 0


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

    def __init__(self, example: str, args: dict, *, mode: str | None = None, root: str | Path | None = None,
                 ranks: int | None = None):
        self.example = example
        self.args = dict(args)
        self.mode = resolve_mode(mode)
        self.root = Path(root) if root else default_root()
        self.recordings: list[Recording] = []
        #: The recordings this page has asked for, by full name: each is measured (or read) once.
        self._asked: set[str] = set()
        self.flags = argparse.Namespace(**self.args)
        #: GPUs a run of this chapter uses (a chapter of several ranks); its recordings live in ``<gpu>-x<ranks>/``.
        self.ranks = ranks
        #: Why a live build replays this chapter, or which GPU's recordings stand in for the one asked for.
        self.replay_note: str | None = None
        #: The recordings folder asked for when another GPU's stands in for it (its page warns), else None.
        self.stand_in_for: Path | None = None
        #: How many folders below the gallery's top the page sits (a deep dive: 1); its links climb as many.
        self.page_depth = 0
        self._suffix = f"-x{ranks}" if ranks else ""
        if self.mode == "live" and ranks:
            visible = torch.cuda.device_count()
            if visible < ranks:
                self.mode = "replay"
                self.replay_note = (f"this machine has {visible} GPU{'s' if visible != 1 else ''} and the "
                                    f"chapter runs on {ranks}: it replays a recording")
        if self.mode == "live":
            self.gpu = gpu_facts()
            self.versions = software_versions()
            self.folder = self.root / (gpu_slug(self.gpu["name"]) + self._suffix)
        else:
            self.folder = self._replay_folder()
            self.gpu, self.versions = None, None

    # ------------------------------------------------------------------ flags
    @classmethod
    def from_command_line(cls, example: str, *, bf16_only_because: str | None = None, argv=None,
                          **defaults) -> Chapter:
        """The chapter ``example``, its sizes read from the command line.

        Each keyword is a flag with its default: an ``int`` becomes ``--name N``
        (a positive size), ``False`` the switch ``--name``, and ``True`` a switch
        the page always has on (accepted so the original command line runs as is).
        A ``str`` becomes ``--name TEXT``. Every chapter also
        takes ``--dtype`` (default ``bfloat16``) and ``--mode`` (``live``,
        ``replay`` or ``auto``, default ``$PROFILING_GUIDE_MODE``); ``--help``
        lists them. Under sphinx-gallery no flags are given and the defaults
        apply. ``bf16_only_because`` refuses another ``--dtype`` in one line
        saying why. The values are :attr:`flags`; :attr:`dtype` is the torch dtype.

        Run as a script, an error of the guide's own (a missing recording, no
        GPU in live mode) prints as one line instead of a traceback.
        """
        caller = inspect.currentframe().f_back
        doc = (caller.f_globals.get("__doc__") or "").strip().splitlines() if caller else []
        title = next((line for line in doc if line.strip() and set(line.strip()) != {"="}), example)
        parser = example_parser(title)
        for name, default in defaults.items():
            if default is True:  # the original command line's switch, for a page that always does it
                parser.add_argument(f"--{name}", action="store_true", default=True,
                                    help=f"accepted for the original command line: this page always does {name}")
            elif isinstance(default, bool):
                parser.add_argument(f"--{name}", action="store_true", help=f"switch on {name} (default off)")
            elif isinstance(default, int):
                parser.add_argument(f"--{name}", type=positive_int, default=default,
                                    help=f"{name.replace('_', ' ')} (default {default})")
            elif isinstance(default, str):
                parser.add_argument(f"--{name}", default=default, help=f"{name.replace('_', ' ')} (default {default})")
            else:
                raise GuideError(f"{name}={default!r}: a chapter's flag is a size (int), a switch (bool) "
                                 "or a word (str)")
        flags = parser.parse_args(argv)
        # The profiler warns once per run that it clears its events between steps; the trace is
        # complete either way, and the warning would land on the page.
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        if bf16_only_because and DTYPES[flags.dtype] is not DTYPES["bfloat16"]:
            raise GuideError(f"--dtype {flags.dtype} is not supported here: {bf16_only_because}; "
                             "use --dtype bfloat16")
        chapter = cls(example, run_args(flags), mode=flags.mode, ranks=getattr(flags, "ranks", None))
        chapter.flags = flags
        chapter.page_depth = page_depth(caller.f_globals.get("__file__") if caller else None)
        return chapter

    @classmethod
    def recorded(cls, example: str, *, argv=None) -> Chapter:
        """The recordings lesson ``example`` made, for a deep-dive page that reads them and measures nothing.

        In replay they are the committed recordings, as for the lesson. Live, they are those the
        lesson's page wrote in this run, on this GPU: a deep dive never times anything again.
        Its one flag is ``--mode``.
        """
        caller = inspect.currentframe().f_back
        doc = (caller.f_globals.get("__doc__") or "").strip().splitlines() if caller else []
        title = next((line for line in doc if line.strip() and set(line.strip()) != {"="}), example)
        flags = example_parser(title).parse_args(argv)
        chapter = cls(example, {}, mode=flags.mode)
        chapter.page_depth = page_depth(caller.f_globals.get("__file__") if caller else None)
        if chapter.live:
            chapter.mode = "replay"  # read what the lesson recorded; chapter.folder is this GPU's already
            chapter.gpu = chapter.versions = None
        chapter.flags = flags
        return chapter

    def read(self, name: str, *, missing_ok: bool = False) -> Recording | None:
        """Recording ``name`` as its lesson left it, fingerprint unchecked (the lesson's page checks it).

        For a deep-dive page (:meth:`recorded`): it shows more of what a lesson measured without
        defining the lesson's code again; or for another lesson that compares its run with this
        one's, where ``missing_ok`` gives None for a recording this GPU does not have.
        """
        rec = Recording(self._ask(f"{self.example}.{name}"), self.folder, {})
        if not rec.run_path.is_file():
            if missing_ok:
                return None
            raise GuideError(f"no recording {rec.run_path.name} in {self.folder}: its lesson, "
                             f"examples/plot_{self.example}.py, records it (live) or replays it; build that "
                             "page first")
        rec.run = read_run_record(rec.run_path)
        self.recordings.append(rec)
        return rec

    @property
    def dtype(self):
        """The torch dtype of ``--dtype`` (``torch.bfloat16`` unless a flag says otherwise)."""
        return DTYPES[getattr(self, "flags", argparse.Namespace(dtype="bfloat16")).dtype]


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
            require_cuda_memory(nbytes, what)

    def _replay_folder(self) -> Path:
        """The folder this chapter replays: the asked GPU's, or where none has this chapter, another's (said).

        Asked for: ``$PROFILING_GUIDE_GPU``, else the default GPU; a chapter of
        several ranks reads ``<gpu>-x<ranks>``. A GPU with no recording of this
        chapter yet (a chapter recorded on one GPU only) replays the first
        folder that has one, and :attr:`replay_note` names it.
        """
        slug = os.environ.get(GPU_ENV)
        if slug and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,99}", slug):
            raise GuideError(f"{GPU_ENV}={slug[:60]!r} is not a GPU folder name: use lowercase letters, digits "
                             f"and dashes, e.g. {DEFAULT_GPU}")
        if slug and not (self.root / slug).is_dir():
            raise GuideError(f"{GPU_ENV}={slug}: no recordings folder {self.root / slug}")
        asked = (slug or DEFAULT_GPU) + self._suffix
        found = [p for p in self.root.glob(f"*{self._suffix}") if p.is_dir()] if self.root.is_dir() else []
        if not self._suffix:  # a one-GPU chapter never reads a folder of several ranks
            found = [p for p in found if not re.search(r"-x\d+$", p.name)]
        if not found:
            raise GuideError(
                f"replay needs recordings but {self.root} has none: record them on a GPU with "
                f"{MODE_ENV}=live, or set {ROOT_ENV}"
            )
        candidates = sorted(found, key=lambda p: (p.name != asked, p.name != DEFAULT_GPU + self._suffix, p.name))
        for folder in candidates:
            if next(folder.glob(f"{self.example}.*.run.json"), None) is not None:
                if folder.name != asked:
                    self.stand_in_for = self.root / asked
                return folder
        return candidates[0]  # none has it: the error comes, naming the file, when a recording is read

    # ------------------------------------------------------------------ record
    def _ask(self, full: str, *, keep: bool = True) -> str:
        """``full``, the first time this page asks for it; a second request is an error.

        A page that profiles or measures the same recording twice runs the work twice live and
        shows it, and lists its files, twice: one call per recording. ``keep=False`` only checks
        (before a live profile, so a second one fails before it runs).
        """
        if full in self._asked:
            raise GuideError(f"recording {full} is asked for twice on this page: measure or read it "
                             "once and reuse the result")
        if keep:
            self._asked.add(full)
        return full

    def _name_and_fingerprint(self, name: str, code: Iterable,
                              extra_args: dict | None) -> tuple[str, Fingerprints, dict]:
        full = f"{self.example}.{name}"
        args = {**self.args, **(extra_args or {})}
        fp = Fingerprints(code, args)
        if self.live:  # taken before the run, as the page's objects stand when it lists them
            fp.listed, fp.closure  # noqa: B018 (read for the properties' cached value, not an expression's)
        return full, fp, args

    def _replay(self, full: str, fp: Fingerprints, *, needs_trace: bool) -> Recording:
        rec = Recording(full, self.folder, {})
        if not rec.run_path.is_file() or (needs_trace and not rec.trace_path.is_file()):
            missing = rec.trace_path if needs_trace and rec.run_path.is_file() else rec.run_path
            raise GuideError(
                f"no recording {missing.name} in {self.folder}: record it on a GPU with "
                f"{MODE_ENV}=live python examples/plot_{self.example}.py (or nox -s docs there)"
            )
        rec.run = read_run_record(rec.run_path)
        if "closure_fingerprint" in rec.run:
            rec.stale = rec.run["closure_fingerprint"] != fp.closure
            what = "its code (or code of profiling_guide it runs) or arguments"
        else:  # recorded before the closure was fingerprinted: only what the page lists can be checked
            rec.stale = rec.run.get("fingerprint") != fp.listed
            rec.listed_only = not rec.stale
            what = "its code or arguments"
        if rec.listed_only:
            _say_listed_only(rec, self.example)
        if rec.stale:
            msg = (
                f"recording {full} is stale: {what} changed since "
                f"{rec.run.get('date', '?')}; re-record on a GPU with {MODE_ENV}=live "
                f"python examples/plot_{self.example}.py"
            )
            if stale_policy() == "error":
                raise StaleRecordingError(msg)
            print(f"WARNING: {msg}", flush=True)  # stdout is what a gallery page shows
            warnings.warn(msg, stacklevel=3)
        self.recordings.append(rec)
        return rec

    def _run_record(self, name: str, fp: Fingerprints, args: dict, **fields) -> dict:
        return {
            "name": name,
            "example": self.example,
            "gpu": self.gpu,
            "versions": self.versions,
            "args": args,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "fingerprint": fp.listed,
            "closure_fingerprint": fp.closure,
            **fields,
        }

    def trace_file(self, name: str) -> str:
        """Where a live run's profiler should export the trace of capture ``name`` (then :meth:`record_trace` it).

        A temporary file beside the recording: :meth:`record_trace` moves it into place,
        so an interrupted run never leaves half a trace under the recording's name.
        """
        if not self.live:
            raise GuideError("trace_file() is for live runs: in replay, record_trace() reads the recording")
        self.folder.mkdir(parents=True, exist_ok=True)
        return str(self.folder / f".{self.example}.{name}.partial.trace.json.gz")

    def record_trace(
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
        """The recording of capture ``name``: live, keep the trace just exported; in replay, read it.

        Live, the trace must first have been written to :meth:`trace_file`
        (the page shows the ``torch.profiler`` block that does it); it is
        recorded in three parts: the trace moved into place
        (``_move_trace``), ``step`` timed with the profiler off
        (``_time_step``) and the run record written (``_write_record``).
        ``code`` lists what the step runs (functions, classes, modules) so the
        fingerprints notice when it changes; ``step`` itself is always included.
        The closure fingerprint also follows what they reach in ``profiling_guide``
        (the kernels a listed function launches: :mod:`~profiling_guide.pages.closure`),
        but not what the step reaches through a value (``model(x)``): list its class.
        The timings are spreads over repeats (:mod:`profiling_guide.measure.timing`):
        ``device_us`` (the GPU's queue kept full), ``cpu_issue_us`` (the host's
        time to issue one call) and ``wall_us_per_call`` (one call at a time,
        synchronized). ``variant``
        names what runs (e.g. ``"eager"``): every page of one build that loads
        the same variant at the same arguments then quotes one CPU issue time.
        ``extra`` is kept in the run record as is (JSON-ready).
        """
        full, fp, all_args = self._name_and_fingerprint(name, [step, *code], args)
        self._ask(full)
        if not self.live:
            return self._replay(full, fp, needs_trace=True)
        rec = Recording(full, self.folder, {})
        self._move_trace(name, rec)
        timings = self._time_step(step, variant) if time_it else {}
        # ``extra`` may bring timings of its own (a run timed elsewhere, with time_it=False)
        rec.run = self._run_record(full, fp, all_args, **{"label": label, "timings": timings, **(extra or {})})
        return self._write_record(rec)

    def _move_trace(self, name: str, rec: Recording) -> None:
        """Move the trace a live run exported to :meth:`trace_file` onto the recording's name."""
        exported = Path(self.trace_file(name))
        if not exported.is_file():
            raise GuideError(f"no trace was exported to {exported}: profile the step and export its trace "
                             f"there (chapter.trace_file({name!r})) before chapter.record_trace({name!r}, ...)")
        move_into_place(exported, rec.trace_path)

    def _time_step(self, step: Callable[[], object], variant: str | None) -> dict:
        """``step``'s profiler-off timings, JSON-ready: device time, CPU issue time, wall time per call."""
        key = cost_key(variant, self.args) if variant else None
        with to_console():
            return {
                "device_us": device_time(step, [()] * 8).to_dict(),
                "cpu_issue_us": cpu_issue_time(step, key=key).to_dict(),
                "wall_us_per_call": wall_time_per_call(step).to_dict(),
            }

    def _write_record(self, rec: Recording) -> Recording:
        """Write ``rec``'s run record (whole or not at all) and count it among this page's recordings."""
        write_json_atomic(rec.run_path, rec.run)
        self.recordings.append(rec)
        return rec

    def profile(
        self,
        name: str,
        step: Callable[[], object],
        *,
        profiler: Callable[[Callable[[], object], str, str], object],
        label: str,
        code: Iterable = (),
        args: dict | None = None,
        warm_up: bool = False,
        variant: str | None = None,
        keep: Callable[[object], dict] | None = None,
        time_it: bool = True,
    ) -> Recording:
        """The trace of ``step``'s profiled steps, labelled ``label``: live, profiled now; in replay, recorded.

        Live: ``step`` is first called once if ``warm_up`` (compiling,
        autotuning: their logs go to the console), then
        ``profiler(step, label, trace_file)`` runs (the page's own
        ``torch.profiler`` block, which exports the trace to ``trace_file``),
        then :meth:`record_trace` keeps the trace as this chapter's recording ``name``
        and times ``step`` with the profiler off. ``keep(prof)``, given what
        ``profiler`` returned, adds JSON-ready fields to the run record (e.g.
        ``prof.key_averages().table()``). In replay ``step`` never runs:
        the recording is read back, and it is stale if ``step``, ``code`` (or
        what they reach in ``profiling_guide``) or the arguments changed since it was made. ``time_it=False`` skips the
        profiler-off timings (for a page that times its steps its own way).
        """
        extra = None
        self._ask(f"{self.example}.{name}", keep=False)
        if self.live:
            if warm_up:
                self.warm_up(step)
            prof = profiler(step, label, self.trace_file(name))
            extra = keep(prof) if keep else None
        return self.record_trace(name, step, label=label, code=code, args=args, variant=variant, extra=extra,
                                 time_it=time_it)

    def run_ranks(self, name: str, args: list[str], *, code: Iterable = ()) -> Recording:
        """A training job of :attr:`ranks` processes under ``torchrun`` (live), or its recording (replay).

        Live, :func:`profiling_guide.measure.distributed.train_ranks` runs
        :mod:`profiling_guide.kernels.train_ranks` with ``args`` (every rank
        profiles itself and writes its trace; rank 0 writes the step times and
        the environment); the traces
        become ``<example>.<name>.rank<r>.trace.json.gz`` (see
        :attr:`~profiling_guide.pages.recordings.Recording.rank_trace_paths`)
        and the run record keeps what rank 0 wrote under ``job``. The
        script's source and ``args`` are fingerprinted with ``code``.
        """
        full, fp, all_args = self._name_and_fingerprint(name, [train_ranks, *code],
                                          {"script_args": list(args), "ranks": self.ranks})
        self._ask(full)
        if not self.live:
            rec = self._replay(full, fp, needs_trace=False)
            if len(rec.rank_trace_paths) != self.ranks:
                raise GuideError(f"recording {full} has {len(rec.rank_trace_paths)} rank traces in {self.folder}, "
                                 f"not {self.ranks}: re-record it on {self.ranks} GPUs")
            return rec
        self.folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.folder, prefix=f".{full}.") as tmp:
            with to_console():
                job = run_job(self.ranks, list(args), Path(tmp))
            for rank in range(self.ranks):
                os.replace(Path(tmp) / f"rank{rank}.trace.json.gz", self.folder / f"{full}.rank{rank}.trace.json.gz")
        return self._write_record(Recording(full, self.folder, self._run_record(full, fp, all_args, job=job)))

    def profile_own(self, name: str, profile: Callable[[], object], *, label: str, code: Iterable = ()) -> Recording:
        """What a profile of your own wrote, kept as recording ``name`` (live), or that recording (replay).

        ``profile()`` is the page's call of
        :func:`~profiling_guide.report.profile_own.profile_callable` (or anything
        that returns its result: ``.trace`` and ``.run_record`` paths). Live, it
        runs with its output on the console; its trace becomes this chapter's
        recording, and the timings, reference rates, steps and target of its run
        record are kept in the chapter's; where the step compiled, what inductor
        recorded each kernel fuses (``result.kernel_information``) is kept beside
        the trace (:func:`~profiling_guide.trace.kernel_information.kernel_information_beside`
        reads it back). A live run that writes none removes an older one. ``label`` is the ``record_function``
        label of its steps. In replay ``profile`` never runs; the recording is
        stale if ``profile``, ``code`` (or what they reach in ``profiling_guide``) or the arguments changed
        since it was made.
        """
        extra = None
        self._ask(f"{self.example}.{name}", keep=False)
        if self.live:
            with to_console():
                result = profile()
            move_into_place(result.trace, self.trace_file(name))
            kept = kernel_information_path(Recording(f"{self.example}.{name}", self.folder, {}).trace_path)
            if getattr(result, "kernel_information", None):
                move_into_place(result.kernel_information, kept)
            elif kept.is_file():  # an earlier run's, for code that no longer compiles
                kept.unlink()
            own = read_run_record(result.run_record)
            extra = {k: own[k] for k in ("timings", "rates", "steps", "target") if k in own}
        return self.record_trace(name, profile, label=label, code=code, time_it=False, extra=extra)

    def reference_rates(self, gemm_shapes: Iterable[tuple[int, int, int]]) -> Recording:
        """The rates this GPU reaches, measured in this run (live) or recorded (replay): ``.values``.

        :func:`profiling_guide.measure.timing.reference_rates` over a settled
        8192³ bf16 GEMM and ``gemm_shapes`` (``(M, K, N)`` each), and the best
        device-to-device copy: each a median of 7 repeats with its spread,
        measured once per process.
        """
        shapes = [tuple(shape) for shape in gemm_shapes]

        def measure_references():
            return timing.reference_rates(shapes)

        # The shapes are part of the workload: in the fingerprint with the code that measures them.
        return self.measure("references", measure_references,
                            code=[f"gemm_shapes={shapes}", timing.reference_rates, timing._gemm_candidates,
                                  timing._copy_candidates])


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
        """Profile ``step`` with the guide's schedule and :meth:`record_trace` it (live), or read its recording (replay).

        The profiling is :func:`profiling_guide.measure.capture.profile_to_trace`: the
        same ``torch.profiler`` block the chapters show.
        """
        self._ask(f"{self.example}.{name}", keep=False)
        if self.live:
            with to_console():
                profile_to_trace(step, Path(self.trace_file(name)), label=label)
        return self.record_trace(name, step, label=label, code=code, args=args, time_it=time_it, variant=variant)

    def warm_up(self, *steps: Callable[[], object]) -> None:
        """Live: call each step once (compiling, autotuning), its logs on the console. Replay: nothing."""
        if self.live:
            with to_console():
                for step in steps:
                    step()

    def measure(self, name: str, fn: Callable[[], dict], *, code: Iterable = (), args: dict | None = None) -> Recording:
        """Run ``fn()`` (live) and keep the JSON-ready dict it returns, or load it (replay)."""
        full, fp, all_args = self._name_and_fingerprint(name, [fn, *code], args)
        self._ask(full)
        if not self.live:
            return self._replay(full, fp, needs_trace=False)
        with to_console():
            values = fn()
        return self._write_record(Recording(full, self.folder, self._run_record(full, fp, all_args, values=values)))

    # ------------------------------------------------------------------ banner
    def banner(self) -> Banner:
        """What the page says about where its numbers come from (printed too when run as a script)."""
        return echo(Banner(self))

    def downloads(self) -> Downloads:
        """Links to this page's traces and run records (in the built site under ``_recordings/``)."""
        return Downloads(self)


_SAID_LISTED_ONLY: set[Path] = set()


def _say_listed_only(rec: Recording, example: str) -> None:
    """Say on the console, once per process, that ``rec`` is checked by its listed code only; never on a page."""
    if rec.run_path in _SAID_LISTED_ONLY:
        return
    _SAID_LISTED_ONLY.add(rec.run_path)
    console = sys.__stderr__ or sys.stderr
    console.write(f"note: recording {rec.name} ({rec.folder.name}) is checked by its listed code only: its run "
                  "record has no closure_fingerprint, so an edit to a kernel or helper it runs would not make it "
                  f"stale; re-record it on a GPU with {MODE_ENV}=live python examples/plot_{example}.py\n")
    console.flush()


def _gpu_name(folder: Path) -> str:
    """The GPU a recordings folder holds (from any of its run records), or the folder's name."""
    for path in sorted(folder.glob("*.run.json")) if folder.is_dir() else []:
        try:
            name = (read_run_record(path).get("gpu") or {}).get("name")
        except GuideError:
            continue
        if name:
            return name + (f" ×{folder.name.rsplit('-x', 1)[1]}" if re.search(r"-x\d+$", folder.name) else "")
    return folder.name


class Banner:
    """An HTML (and plain-text) note naming the GPU, versions and date of the page's data."""

    def __init__(self, chapter: Chapter):
        self.chapter = chapter

    def _facts(self) -> tuple[str, str, str, bool]:
        ch = self.chapter
        if ch.live:
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
        if self.chapter.ranks:
            gpu = f"{gpu}, {self.chapter.ranks} GPUs of one machine,"
        text = f"Replayed from a recording made on {gpu} with {versions}, on {date}. No GPU was used to build this page."
        if self.chapter.stand_in_for is not None:
            asked, theirs = _gpu_name(self.chapter.stand_in_for), _gpu_name(self.chapter.folder)
            text = (f"This page shows the {theirs}'s numbers, not the {asked}'s: no recording of this chapter "
                    f"was made on the {asked} yet. {text}")
        if self.chapter.replay_note:
            text += f" ({self.chapter.replay_note[0].upper()}{self.chapter.replay_note[1:]}.)"
        if stale:
            text += " WARNING: a recording is stale (the code changed since); its numbers may not match the code shown."
        return text

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        _, _, _, stale = self._facts()
        stand_in = self.chapter.stand_in_for is not None and not self.chapter.live
        kind = "warning" if stale or stand_in else ("note" if not self.chapter.live else "tip")
        title = ("Live run" if self.chapter.live else
                 "Another GPU's numbers" if stand_in else "Replayed recording")
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
        up = "../" * (1 + self.chapter.page_depth)
        for rec in self.chapter.recordings:
            for path in (rec.trace_path, *rec.rank_trace_paths, kernel_information_path(rec.trace_path),
                         rec.run_path):
                if path.is_file():
                    out.append((path.name, f"{up}{SITE_RECORDINGS}/{self.chapter.folder.name}/{path.name}", rec.stale))
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
