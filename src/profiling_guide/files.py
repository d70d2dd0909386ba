"""Write the guide's files whole or not at all, readable by whoever serves the site.

Every file the guide writes (run records, benchmark results, traces) goes
through :func:`atomic_output`: the data goes to a temporary file beside the
target, which is renamed over it only once complete, so an interrupted run
never leaves half a file. Three details matter once the files leave this
machine:

* **Mode.** A temporary file is created ``0600``; the finished file gets the
  mode a plain ``open()`` would have given it (``0644`` under the usual umask),
  or a web server running as another user answers 403 for it.
* **Symlinks.** Writing to a symlink writes the file it points to; the link
  stays a link.
* **Non-finite numbers.** JSON has no NaN or infinity: they are written as
  ``null``, and :func:`write_json_atomic` returns where it did so.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from profiling_guide.errors import GuideError


def _umask() -> int:
    try:  # Linux says it without changing it
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def target_of(path: str | Path) -> Path:
    """Where writing ``path`` lands: the file at the end of its symlinks.

    Raises a one-line GuideError if that is something other than a regular
    file (a device, a pipe, a socket, a folder).
    """
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise GuideError(f"cannot write {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a device, pipe or socket"
        raise GuideError(f"cannot write {path}: it is {what}, not a regular file; give a file path")
    return target


def _temp_beside(target: Path, path: str | Path, suffix: str) -> Path:
    """An empty temporary file in ``target``'s folder (made if missing)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    except OSError as exc:
        raise GuideError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    return Path(tmp)


def check_writable(path: str | Path) -> Path:
    """Fail now, in one line, if ``path`` could not be written later; return its target.

    Makes the missing folders and a throwaway file beside the target, as the
    real write will: what would go wrong then goes wrong now.
    """
    target = target_of(path)
    _temp_beside(target, path, ".tmp").unlink()
    return target


@contextlib.contextmanager
def atomic_output(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path to write; on success it replaces ``path``'s target, else it is removed.

    ``suffix`` lets a writer that picks its format from the name (``.json.gz``
    gzips) see the right one.
    """
    target = target_of(path)
    tmp = _temp_beside(target, path, suffix)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp made it 0600
        os.replace(tmp, target)
    except OSError as exc:
        raise GuideError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def finite_or_null(data, where: str = "$", replaced: list[str] | None = None):
    """``data`` with every NaN and infinity replaced by None; their places appended to ``replaced``."""
    if isinstance(data, float) and not math.isfinite(data):
        if replaced is not None:
            replaced.append(where)
        return None
    if isinstance(data, dict):
        return {k: finite_or_null(v, f"{where}.{k}", replaced) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite_or_null(v, f"{where}[{i}]", replaced) for i, v in enumerate(data)]
    return data


def write_json_atomic(path: str | Path, data, *, sort_keys: bool = False) -> list[str]:
    """Write ``data`` as indented JSON, whole or not at all.

    NaN and infinity are written as ``null``; the return value lists where
    (``$.variants_us.eager``), so the caller can say so. Values JSON cannot
    hold are written as their ``str()``.
    """
    replaced: list[str] = []
    text = json.dumps(finite_or_null(data, "$", replaced), indent=1, sort_keys=sort_keys, default=str,
                      allow_nan=False)
    with atomic_output(path, suffix=".json") as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return replaced
