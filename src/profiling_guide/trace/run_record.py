"""Read a run record (``<name>.run.json``) back, checked at the edge.

A run record is the JSON half of a recording: the GPU, the versions, the
arguments, the timings and the fingerprint of a live run (see
:mod:`profiling_guide.pages.recordings`); ``profiling-guide profile`` writes
one with the GPU's reference rates, and ``profiling-guide report`` reads one
beside a trace, or as ``--rates``. Whoever reads it trusts it, so it is
checked when it is read, and anything wrong is a one-line GuideError naming
the file (and the field):

* it must be a regular file (not a device, a FIFO or a folder) of at most
  :data:`MAX_RUN_RECORD_BYTES`, UTF-8 JSON (a byte-order mark is allowed);
* JSON's own limits: no ``NaN`` or ``Infinity`` (not JSON: the guide writes
  ``null``), no number of more than 4,300 digits (Python's limit for reading
  one), nesting at most :data:`MAX_DEPTH` deep;
* a lone surrogate in a string (``"\\ud800"``: valid JSON, not text) is
  read as U+FFFD;
* the fields the guide reads have the types it expects, down to the numbers
  of the timings and reference rates (finite, and not ``true``).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path

from profiling_guide.errors import GuideError
from profiling_guide.trace.reader import without_surrogates

#: What follows a trace's name: ``.trace.json[.gz]`` (``.pt.trace.json`` as tensorboard_trace_handler writes), or ``.json[.gz]``.
TRACE_NAME = re.compile(r"(\.pt)?\.trace\.json(\.gz)?$|\.json(\.gz)?$")
# A run record is kilobytes; anything near this is not one.
MAX_RUN_RECORD_BYTES = 16 * 2**20
# The guide writes records a few levels deep (values → candidates → spread).
MAX_DEPTH = 64

# The fields the guide reads, and the JSON types each may have.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "example": (str,),
    "label": (str,),
    "date": (str,),
    "fingerprint": (str,),
    "closure_fingerprint": (str,),
    "gpu": (dict, type(None)),
    "versions": (dict, type(None)),
    "args": (dict,),
    "timings": (dict,),
    "values": (dict, list),
    "rates": (dict, type(None)),
}
RATE_KEYS = ("gemm_tflops", "copy_tbps")
_JSON_NAMES = {str: "a string", dict: "an object", list: "a list", type(None): "null"}
_HUGE = 10**300


def _kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _JSON_NAMES.get(type(value), type(value).__name__)


def is_number(value) -> bool:
    """A JSON number a float can hold: finite, below 1e300 in size (``true`` is not one, though Python counts it as 1)."""
    if type(value) is int:
        return -_HUGE < value < _HUGE
    return type(value) is float and math.isfinite(value)


def _refuse_constant(name: str):
    raise ValueError(f"{name}, which is not JSON (a number that is missing is null)")


def read_json_file(path: str | Path, *, what: str, fix: str, max_bytes: int = MAX_RUN_RECORD_BYTES):
    """The JSON value in the small file at ``path``, read with the limits above; ``what`` names it in errors."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise GuideError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        raise GuideError(f"{path} is {kind}, not a file: give {what} (a .json file)")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(max_bytes + 1)  # a file that grows, or lies about its size, stops here too
        except OSError as exc:
            raise GuideError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise GuideError(f"{path} is over {max_bytes // 2**20} MiB, too large for {what}: {fix}")
    try:
        text = data.decode("utf-8-sig")
        value = json.loads(text, parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        raise GuideError(f"{path} is not UTF-8 text ({exc.reason}): {fix}") from None
    except json.JSONDecodeError as exc:
        raise GuideError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
                         f"{fix}") from None
    except RecursionError:
        raise GuideError(f"{path} nests JSON values deeper than {what} does: {fix}") from None
    except ValueError as exc:  # NaN or Infinity, or a number of more than 4,300 digits
        reason = str(exc) if "which is not JSON" in str(exc) else "a number of more than 4,300 digits"
        raise GuideError(f"{path} holds {reason}: {fix}") from None
    return _checked_tree(value, path, what, fix)


def _checked_tree(value, path: Path, what: str, fix: str):
    """``value`` with lone surrogates replaced, after checking it nests at most MAX_DEPTH deep."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise GuideError(f"{path} nests JSON values deeper than {MAX_DEPTH} levels, which {what} never does: {fix}")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return without_surrogates(value)


def read_run_record(path: str | Path) -> dict:
    """The run record at ``path`` as a dict, or a one-line GuideError saying what is wrong with it."""
    fix = "re-record it on a GPU, or restore it with git"
    record = read_json_file(path, what="a run record", fix=fix)
    check_run_record(record, Path(path), fix)
    return record


def check_run_record(record, path: Path, fix: str) -> None:
    """Raise a one-line GuideError where ``record`` is not a run record the guide can read."""
    if not isinstance(record, dict):
        raise GuideError(f"{path}: a run record is a JSON object, got {_kind(record)}: {fix}")
    _check_field_types(record, path, fix)
    _check_versions(record.get("versions") or {}, path, fix)
    _check_gpu_name(record.get("gpu") or {}, path, fix)
    _check_timings(record.get("timings", {}), path, fix)
    _check_rates(record, path, fix)


def _check_field_types(record: dict, path: Path, fix: str) -> None:
    """Each field the guide reads has one of the JSON types of :data:`FIELD_TYPES`."""
    for key, types in FIELD_TYPES.items():
        if key in record and not isinstance(record[key], types):
            expected = " or ".join(_JSON_NAMES[t] for t in types)
            raise GuideError(f"{path}: {key!r} must be {expected}, got {_kind(record[key])}: {fix}")


def _check_versions(versions: dict, path: Path, fix: str) -> None:
    """Each version is a string, a number or null."""
    for name, version in versions.items():
        if not (version is None or isinstance(version, str) or is_number(version)):
            raise GuideError(f"{path}: 'versions.{name}' must be a string, got {_kind(version)}: {fix}")


def _check_gpu_name(gpu: dict, path: Path, fix: str) -> None:
    if "name" in gpu and not isinstance(gpu["name"], str):
        raise GuideError(f"{path}: 'gpu.name' must be a string, got {_kind(gpu['name'])}: {fix}")


def _check_timings(timings: dict, path: Path, fix: str) -> None:
    """Each timing is a spread (median, q1, q3: numbers or null), or an older record's bare median."""
    for name, spread in timings.items():
        if not isinstance(spread, dict):
            # An older record's bare median: the sample records of tests/data/gpu_samples (the site's
            # sample reports) hold one, and re-recording them needs a GPU.
            if is_number(spread):
                continue
            raise GuideError(f"{path}: 'timings.{name}' must be an object (median, q1, q3), "
                             f"got {_kind(spread)}: {fix}")
        for stat_name in ("median", "q1", "q3"):
            if stat_name in spread and not (spread[stat_name] is None or is_number(spread[stat_name])):
                raise GuideError(f"{path}: 'timings.{name}.{stat_name}' must be a number, "
                                 f"got {_kind(spread[stat_name])}: {fix}")


def _check_rates(record: dict, path: Path, fix: str) -> None:
    """Each reference rate, under ``rates``, under ``values`` or at the top, is one :func:`rate_of` reads."""
    for where, source in (("rates.", record.get("rates")), ("values.", record.get("values")), ("", record)):
        if not isinstance(source, dict):
            continue
        for key in RATE_KEYS:
            if key in source:
                rate_of(source[key], where + key, path, fix)


def rate_of(value, where: str, path: Path, fix: str) -> float | None:
    """A reference rate as a float: a positive finite number, or an object whose ``rate`` or ``median`` is one.

    ``null`` (not measured) is None; anything else is a one-line GuideError.
    """
    if isinstance(value, dict):  # "median": an older record's (tests/data/gpu_samples), as in _check_timings
        inner = value.get("rate", value.get("median"))
        where += ".rate" if "rate" in value else ".median"
        value = inner
    if value is None:
        return None
    if is_number(value) and value > 0:
        return float(value)
    shown = _kind(value) if not is_number(value) else repr(value)
    raise GuideError(f"{path}: {where!r} must be a positive number, got {shown}: {fix}")


# ------------------------------------------------------------------ beside a trace
def trace_stem(trace_path: str | Path) -> str:
    """``<name>`` of ``<name>.trace.json[.gz]``, ``<name>.pt.trace.json[.gz]`` or any ``<name>.json[.gz]``."""
    return TRACE_NAME.sub("", Path(trace_path).name)


def run_record_path(trace_path: str | Path) -> Path:
    """Where ``<name>.run.json`` would be for ``<name>.trace.json[.gz]`` (or any ``.json[.gz]``)."""
    return Path(trace_path).with_name(trace_stem(trace_path) + ".run.json")


def run_record_beside(trace_path: str | Path) -> dict | None:
    """The ``<name>.run.json`` written beside ``<name>.trace.json[.gz]``, if there is one.

    None where there is none; a file there that is not a run record is a
    one-line GuideError.
    """
    record = run_record_path(trace_path)
    if record == Path(trace_path) or not os.path.lexists(record):
        return None
    fix = "fix it or move it away (it is read because it sits beside the trace)"
    data = read_json_file(record, what="a run record", fix=fix)
    check_run_record(data, record, fix)
    return data


def read_rates(path: str | Path) -> dict:
    """Reference rates from a JSON file: a ``profile`` run record or a chapter's references record.

    Accepted: ``{"rates": {"gemm_tflops": {"rate": ...}, "copy_tbps": {...}}}``
    (what :func:`~profiling_guide.report.profile_own.profile_callable` writes;
    ``"median"`` in place of ``"rate"`` in older records),
    ``{"values": {"gemm_tflops": ..., "copy_tbps": ...}}`` (the guide's
    ``*.references.run.json``) or those two numbers at the top level. Each
    rate is a positive finite number (``true``, ``Infinity`` and strings are
    refused in one line).
    """
    fix = "give a profile run record or a chapter's *.references.run.json"
    data = read_json_file(path, what="a rates file", fix=fix)
    if isinstance(data, dict):
        check_run_record(data, Path(path), fix)
    rates = rates_from_record(data) if isinstance(data, dict) else None
    if not rates:
        raise GuideError(f"{path} holds no gemm_tflops or copy_tbps: {fix}")
    return rates


def rates_from_record(data: dict) -> dict | None:
    """``{"gemm_tflops": float, "copy_tbps": float}`` (either may be absent) from a record, or None.

    Only positive finite numbers count (a boolean, NaN or infinity is no rate).
    """
    for source in (data.get("rates"), data.get("values"), data):
        if not isinstance(source, dict):
            continue
        found = {}
        for key in RATE_KEYS:
            value = source.get(key)
            value = value.get("rate", value.get("median")) if isinstance(value, dict) else value
            if is_number(value) and value > 0:
                found[key] = float(value)
        if found:
            return found
    return None
