"""Read a run record (``<name>.run.json``) back, checked at the edge.

A run record is the JSON half of a recording: the GPU, the versions, the
arguments, the timings and the fingerprint of a live run (see
:mod:`profiling_guide.pages.recordings`). Replay trusts it, so it is checked when it
is read: a file that is not JSON, not an object, or whose known fields have
the wrong type is a one-line GuideError naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from profiling_guide.errors import GuideError

# A run record is kilobytes; anything near this is not one.
MAX_RUN_RECORD_BYTES = 64 * 2**20

# The fields the guide reads, and the JSON types each may have.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "example": (str,),
    "label": (str,),
    "date": (str,),
    "fingerprint": (str,),
    "gpu": (dict, type(None)),
    "versions": (dict, type(None)),
    "args": (dict,),
    "timings": (dict,),
    "values": (dict, list),
}
_JSON_NAMES = {str: "a string", dict: "an object", list: "a list", type(None): "null"}


def _kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _JSON_NAMES.get(type(value), type(value).__name__)


def read_run_record(path: str | Path) -> dict:
    """The run record at ``path`` as a dict, or a one-line GuideError saying what is wrong with it."""
    path = Path(path)
    fix = "re-record it on a GPU, or restore it with git"
    try:
        if path.stat().st_size > MAX_RUN_RECORD_BYTES:
            raise GuideError(f"{path} is over {MAX_RUN_RECORD_BYTES // 2**20} MiB, too large for a run record: {fix}")
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GuideError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise GuideError(f"{path} is not UTF-8 text ({exc.reason}): {fix}") from None
    except json.JSONDecodeError as exc:
        raise GuideError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): {fix}") from None
    except RecursionError:
        raise GuideError(f"{path} nests JSON values deeper than a run record does: {fix}") from None
    if not isinstance(record, dict):
        raise GuideError(f"{path}: a run record is a JSON object, got {_kind(record)}: {fix}")
    for key, types in FIELD_TYPES.items():
        if key in record and not isinstance(record[key], types):
            expected = " or ".join(_JSON_NAMES[t] for t in types)
            raise GuideError(f"{path}: {key!r} must be {expected}, got {_kind(record[key])}: {fix}")
    return record
