"""Profile your own code the way the guide profiles its examples.

``profiling-guide profile MODULE:CALLABLE -o DIR`` (or :func:`profile_callable`)
runs one training or inference step of yours under ``torch.profiler`` with
the guide's schedule (skip one step, warm up one, record three, each inside a
``record_function`` label, ``record_shapes=True``), on the GPU at hand, and
writes into ``DIR``:

* ``<name>.trace.json.gz``: the Chrome trace (open it in Perfetto too);
* ``<name>.run.json``: the GPU, the versions, the step's CPU time with the
  profiler off, and the GPU's reference rates (the best of a settled 8192³
  bf16 GEMM and the best device-to-device copy, each a median of 7 repeats
  with its spread: :func:`~profiling_guide.measure.timing.reference_rates`);
* ``<name>.report.html``: ``profiling-guide report`` of that trace, with each
  GEMM and memory-bound kernel's achieved fraction of those rates;
* ``<name>.kernel_information.json``, where the step compiles with inductor:
  what inductor recorded each compiled kernel fuses, one object per graph
  (:mod:`profiling_guide.measure.provenance`), which the report reads to
  attribute compiled kernels to source lines. A torch without inductor's
  provenance tracking gets one line saying so instead.

With ``with_stack`` (the command's default, ``--no-with-stack`` to leave it
out) the profiler also records the Python frames and ``nn.Module`` calls
around each op (``with_stack=True, with_modules=True``), which the report
needs to attribute device time to modules and source lines. They cost CPU
time, not device time: the small GPT of ``tests/data/attribution`` took
16.0 ms a step with them (median of 7 repeats, IQR 14.5 to 17.4), 13.2 ms
(12.5 to 14.0) with ``record_shapes`` alone and 7.5 ms (7.2 to 7.6) with the
profiler off; the report's verdict takes the profiler's cost out.

The callable's contract
-----------------------
``CALLABLE`` takes no arguments. It is called once, before profiling:

* if it returns a callable, that is a *step factory*: what it returned is the
  step, called (with no arguments) once per profiled step; build the model,
  data and optimizer in the factory, so setup stays out of the trace;
* otherwise it *is* the step, called once per profiled step (the first call
  was a warm-up); whatever it returns is ignored.

``MODULE`` is a module name importable from the current folder
(``my_train:make_step``) or a path to a file (``path/to/train.py:make_step``).
"""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from profiling_guide.errors import GuideError, missing_dependency
from profiling_guide.files import check_writable, write_json_atomic
from profiling_guide.report.html import write_report

TIMING_REPEATS = 7  # unprofiled runs of the step timed for the profiler-overhead check


@dataclass
class ProfileResult:
    """Where :func:`profile_callable` wrote its files, and the rates it measured."""

    trace: Path
    run_record: Path
    report: Path
    rates: dict | None
    #: ``<name>.kernel_information.json``, where the step compiled with inductor and this torch records provenance
    kernel_information: Path | None = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def load_target(spec: str) -> Callable:
    """The callable named by ``"module:callable"`` or ``"path/to/file.py:callable"``; bad specs raise GuideError."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise GuideError(f"{spec!r} is not MODULE:CALLABLE, e.g. my_train:make_step or path/to/train.py:make_step")
    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise GuideError(f"no file at {path} (from {spec!r})")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[path.stem] = module
            mod_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:  # as `python -m` does: the current folder is importable
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except GuideError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and module_name.split(".")[0] == exc.name.split(".")[0]:
            raise GuideError(f"no module named {module_name!r}: run from the folder that holds it, "
                             "or give a path (path/to/file.py:CALLABLE)") from None
        raise missing_dependency(exc, module_name) from None
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises, say it in one line
        raise GuideError(f"importing {module_name} failed: {_first_line(exc)}") from None
    target = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise GuideError(f"{module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise GuideError(f"{spec} is a {type(target).__name__}, not something to call: name a function")
    return target


def make_step(target: Callable) -> Callable[[], object]:
    """Call ``target`` once: a callable result is the step (factory), else ``target`` is the step."""
    result = target()
    return result if callable(result) else target


def check_out_dir(out_dir: str | Path) -> Path:
    """Create ``out_dir`` if needed and make sure files can be written there, before any work."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise GuideError(f"cannot write into {out}: it is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".pg-write-check-"):
            pass
    except OSError as exc:
        raise GuideError(f"cannot write into {out}: {exc.strerror or exc}") from None
    return out


def _name_of(target, spec: str | None) -> str:
    raw = getattr(target, "__name__", None) or (spec or "step").rpartition(":")[2]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).strip("._") or "step"


def profile_callable(target: Callable | str, out_dir: str | Path, *, steps: int = 3, compile: bool = False,
                     name: str | None = None, rates: dict | bool = True, with_stack: bool = False) -> ProfileResult:
    """Profile ``target`` on the GPU and write its trace, run record and report into ``out_dir``.

    Parameters
    ----------
    target : callable or str
        A step, or a factory returning a step (see the module docstring), or
        ``"module:callable"`` naming one.
    out_dir : path
        Folder for ``<name>.trace.json.gz``, ``<name>.run.json`` and
        ``<name>.report.html`` (created if missing).
    steps : int
        Profiled (active) steps, after one skipped and one warm-up step.
    compile : bool
        Run the step through ``torch.compile`` (compiled before profiling).
    name : str, optional
        File name stem; default: the callable's name (``.compiled`` added with ``compile``).
    rates : bool or dict
        ``True`` measures the reference rates (a few seconds), ``False``
        skips them, a dict reuses rates measured earlier
        (:func:`~profiling_guide.measure.timing.reference_rates`).
    with_stack : bool
        Record the Python frames and modules too (``with_stack=True,
        with_modules=True``), for the report's attribution to modules and
        source lines (the command turns it on by default; off here, as the
        guide's chapter profiles its own step).

    Raises
    ------
    GuideError
        When ``out_dir`` cannot be written, the target does not import or is
        not callable, or no CUDA GPU is visible; checked in that order, before
        the step runs.
    """
    spec = target if isinstance(target, str) else None
    _check_arguments(steps, name)
    out = check_out_dir(out_dir)
    fn = load_target(target) if isinstance(target, str) else target
    if not callable(fn):
        raise GuideError(f"{fn!r} is not callable: give a step function or a factory returning one")
    stem = name or _name_of(fn, spec) + (".compiled" if compile else "")
    module_file = _module_file(spec)
    paths = _output_paths(out, stem, module_file)
    # Lazy, torch and the modules that import it: importing this module (and the CPU-only commands) never pays for it.
    import torch

    if not torch.cuda.is_available():
        raise GuideError(f"profile needs a CUDA GPU and torch {torch.__version__} sees none: run it on a GPU "
                         "machine, then `profiling-guide report` reads its trace anywhere")
    from profiling_guide.measure import capture
    from profiling_guide.measure import timing as measure
    from profiling_guide.measure.provenance import InductorProvenance

    # Provenance tracking on before the step first runs: compiling happens while it warms up.
    with InductorProvenance() as provenance:
        step = _warm_step(fn, spec, compile)
        cpu_issue = measure.cpu_issue_time(step, repeats=5, calls=TIMING_REPEATS)
        trace_path = capture.profile_to_trace(step, paths["trace.json.gz"], label=stem, active=steps,
                                              with_stack=with_stack)
    kernels_path = _write_kernel_information(provenance, paths["kernel_information.json"], compile, module_file)
    if rates is True:
        rates = measure.reference_rates()
    rates = rates or None
    record = {
        "name": stem, "label": stem, "target": spec or getattr(fn, "__qualname__", repr(fn)), "steps": steps,
        "compile": compile, "with_stack": with_stack,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": capture.gpu_facts(), "versions": capture.software_versions(),
        "timings": {"cpu_issue_us": cpu_issue.to_dict()}, "rates": rates,
    }
    run_path = paths["run.json"]
    write_json_atomic(run_path, record, inputs=[module_file])
    report_path = write_report(trace_path, paths["report.html"])
    return ProfileResult(trace_path, run_path, report_path, rates, kernels_path)


def _write_kernel_information(provenance, path: Path, compile: bool, module_file: str | None) -> Path | None:
    """Write what inductor recorded per graph, where the step compiled; else say in one line why there is none."""
    if provenance.graphs:
        write_json_atomic(path, provenance.graphs, inputs=[module_file])
        return path
    if not provenance.available and (compile or _compiled_anything()):
        import torch

        print(f"note: torch {torch.__version__} has no inductor provenance tracking "
              "(torch._inductor.config.trace.provenance_tracking_level): attribution of compiled kernels to source "
              "lines is not available", file=sys.stderr, flush=True)
    return None


def _compiled_anything() -> bool:
    """Whether torch.compile compiled a graph in this process (dynamo's count), False where it cannot tell."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return False
    return bool(counters.get("stats", {}).get("unique_graphs"))


def _check_arguments(steps: int, name: str | None) -> None:
    if steps < 1:
        raise GuideError(f"--steps must be at least 1, not {steps}")
    if name is not None and (not name or name != Path(name).name or name in (".", "..") or "\0" in name):
        raise GuideError(f"--name {name!r} is not a file name: give a name without folders, e.g. my_step")


def _module_file(spec: str | None) -> str | None:
    """The file the step came from, where ``spec`` names one (``path/to/train.py:make_step``)."""
    return spec.rpartition(":")[0] if spec and spec.rpartition(":")[0].endswith(".py") else None


def _output_paths(out: Path, stem: str, module_file: str | None) -> dict[str, Path]:
    """The outputs, each checked before any work; none may be the file the step came from."""
    paths = {kind: out / f"{stem}.{kind}"
             for kind in ("trace.json.gz", "run.json", "report.html", "kernel_information.json")}
    for path in paths.values():
        check_writable(path, inputs=[module_file])
    return paths


def _warm_step(fn: Callable, spec: str | None, compile: bool) -> Callable[[], object]:
    """The step, compiled if asked, after the two calls that compile, autotune and initialise it."""
    import torch  # lazy, as in profile_callable

    try:
        step = make_step(fn)
    except ModuleNotFoundError as exc:  # the step's own imports (chapter 8's transformers)
        raise missing_dependency(exc, spec or getattr(fn, "__qualname__", "the step")) from None
    if compile:
        step = torch.compile(step)
    for _ in range(2):  # compilation, autotuning and lazy initialisation happen here, not in the trace
        step()
    torch.cuda.synchronize()
    return step
