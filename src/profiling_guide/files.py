"""Write the guide's files whole or not at all, and only where a file belongs.

Every file the guide writes (reports, traces, run records, benchmark
results) goes through :func:`atomic_output` or one of the ``write_*``
functions built on it: the data goes to a temporary file beside the target,
which is renamed over it only once complete, so an interrupted run never
leaves half a file. What may be written, and how:

* **Only a regular file or a new path.** A device (``/dev/null``), a FIFO, a
  socket or a folder at the output path is refused in one line, before any
  work and again just before the rename; it is never replaced (as root,
  ``os.replace`` would turn ``/dev/null`` into a regular file).
* **Never an input.** A command names the files it reads (``inputs=``); an
  output that is one of them (the same file, by device and inode: through a
  symlink, a hard link or another spelling of the path) is refused in one
  line, so ``report t.json.gz -o t.json.gz`` cannot replace the trace.
* **Symlinks.** Writing to a symlink writes the file at the end of its chain
  of links, and the link stays a link; a dangling link creates its target
  (and the target's missing folders). The checks above apply to that target:
  a link to ``/dev/null`` or to an input is refused like the thing itself.
* **Mode.** A temporary file is created ``0600``; the finished file gets the
  mode a plain ``open()`` would have given it (``0644`` under the usual umask),
  or a web server running as another user answers 403 for it.
* **Text.** Text is written as UTF-8; a character UTF-8 cannot hold (a lone
  surrogate, such as a file name's undecodable byte) is written as ``?``
  rather than failing the write.
* **Non-finite numbers.** JSON has no NaN or infinity: they are written as
  ``null``, and :func:`write_json_atomic` returns where it did so.
* **Nothing left behind.** A command that writes several files and fails
  part way removes, with :func:`undone_on_failure`, the files and folders it
  made for them; a file that was there before keeps whatever was last
  written to it whole.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from profiling_guide.errors import GuideError

Inputs = Iterable["str | Path | None"]


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


def _what(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def target_of(path: str | Path, *, inputs: Inputs = ()) -> Path:
    """Where writing ``path`` lands: the file at the end of its symlinks, checked.

    Raises a one-line GuideError if that is something other than a regular
    file or a new path (a device, a FIFO, a socket, a folder), or if it is
    one of ``inputs`` (the same file, however it is reached).
    """
    target = Path(os.path.realpath(path))
    try:
        found = target.stat()
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise GuideError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(found.st_mode):
        what = _what(found.st_mode)
        if what != "not a regular file":
            what = f"it is {what}, not a regular file"
        raise GuideError(f"cannot write {path}: {what}; give the path of a file to create or replace")
    for source in inputs:
        if source is None:
            continue
        try:
            read = os.stat(source)
        except (OSError, ValueError):
            continue  # an input that is not there cannot be overwritten
        if (read.st_dev, read.st_ino) == (found.st_dev, found.st_ino):
            raise GuideError(f"cannot write {path}: it is {source}, which this command reads and would replace; "
                             "give another output path")
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


def check_writable(path: str | Path, *, inputs: Inputs = ()) -> Path:
    """Fail now, in one line, if ``path`` could not be written later; return its target.

    Makes the missing folders and a throwaway file beside the target, as the
    real write will: what would go wrong then goes wrong now (as root, a
    permission check would say yes to everything; a real file says the truth).
    """
    target = target_of(path, inputs=inputs)
    _temp_beside(target, path, ".tmp").unlink()
    return target


@contextlib.contextmanager
def atomic_output(path: str | Path, *, suffix: str = ".tmp", inputs: Inputs = ()) -> Iterator[Path]:
    """A temporary path to write; on success it replaces ``path``'s target, else it is removed.

    ``suffix`` lets a writer that picks its format from the name (``.json.gz``
    gzips) see the right one. ``inputs`` are the files the command read: the
    output may not be one of them.
    """
    inputs = list(inputs)
    target = target_of(path, inputs=inputs)
    tmp = _temp_beside(target, path, suffix)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp made it 0600
        # Checked again: whatever the path became while the data was written, only a file is replaced.
        if target_of(path, inputs=inputs) != target:
            raise GuideError(f"cannot write {path}: it changed while the output was being written; run again")
        os.replace(tmp, target)
    except OSError as exc:
        raise GuideError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_bytes_atomic(path: str | Path, data: bytes, *, inputs: Inputs = ()) -> None:
    """Write ``data`` to ``path`` whole or not at all."""
    with atomic_output(path, inputs=inputs) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str, *, suffix: str = ".tmp", inputs: Inputs = ()) -> None:
    """Write ``text`` as UTF-8 to ``path`` whole or not at all (a lone surrogate becomes ``?``)."""
    with atomic_output(path, suffix=suffix, inputs=inputs) as tmp:
        tmp.write_bytes(text.encode("utf-8", errors="replace"))


def move_into_place(source: str | Path, path: str | Path) -> None:
    """Rename the finished file ``source`` onto ``path``, with the checks of :func:`target_of`."""
    target = target_of(path, inputs=[source])
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    except OSError as exc:
        raise GuideError(f"cannot write {path}: {exc.strerror or exc}") from None


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


def write_json_atomic(path: str | Path, data, *, sort_keys: bool = False, inputs: Inputs = ()) -> list[str]:
    """Write ``data`` as indented JSON, whole or not at all.

    NaN and infinity are written as ``null``; the return value lists where
    (``$.variants_us.eager``), so the caller can say so. Values JSON cannot
    hold are written as their ``str()``.
    """
    replaced: list[str] = []
    text = json.dumps(finite_or_null(data, "$", replaced), indent=1, sort_keys=sort_keys, default=str,
                      allow_nan=False)
    with atomic_output(path, suffix=".json", inputs=inputs) as tmp:
        tmp.write_bytes((text + "\n").encode("utf-8", errors="replace"))
    return replaced


def _new_paths(path: str | Path) -> list[Path]:
    """The target of ``path`` and its missing folders, deepest first, where they do not exist yet."""
    target = Path(os.path.realpath(path))
    new = []
    for place in (target, *target.parents):
        if os.path.lexists(place):
            break
        new.append(place)
    return new


@contextlib.contextmanager
def undone_on_failure(paths: Iterable[str | Path | None]) -> Iterator[None]:
    """Run the block; if it fails, remove what it made for ``paths``: each file and folder not there before.

    A folder is removed only if it is empty then (something else may have put
    a file in it since); a file only if it is a regular file. Taken before the
    block starts, so the folders :func:`check_writable` makes count as made.
    """
    made = [new for path in paths if path is not None and str(path) not in ("", "-") for new in _new_paths(path)]
    try:
        yield
    except BaseException:
        made = [place for place in set(made) if not place.is_symlink()]
        for file in (place for place in made if place.is_file()):
            with contextlib.suppress(OSError):
                file.unlink()
        for folder in sorted((place for place in made if place.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):  # not empty: something else wrote there meanwhile
                folder.rmdir()
        raise
