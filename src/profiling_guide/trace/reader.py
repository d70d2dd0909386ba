"""Read a Chrome trace file as a stream of events, within a size limit.

A trace can be large (a long profile holds millions of events) and it comes
from outside: a gzip a few megabytes long can expand to gigabytes, and the file
can be cut short or be something else entirely. This module reads it one
chunk at a time, counting the bytes as it decompresses them, and hands out one
event at a time, so the loader keeps only what it needs of each event. Any
problem with the file is a one-line :class:`~profiling_guide.errors.GuideError`.

Both of Chrome's formats are read: the object format
(``{"traceEvents": [...], ...other keys...}``) that ``torch.profiler``
writes, and the array format (a bare list of events, whose closing ``]`` may
be missing).
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

from profiling_guide.errors import GuideError

MAX_BYTES_ENV = "PROFILING_GUIDE_MAX_TRACE_BYTES"
DEFAULT_MAX_BYTES = 2 * 2**30
#: The longest single JSON value (an event, a key, a metadata field), in characters. The longest
#: event of a real trace is kilobytes (a C++ kernel name, an op's input shapes); a value longer than
#: this is not an event, and refusing it keeps the text buffer, and so memory, small.
MAX_VALUE_CHARS = 16 * 2**20
#: A gzip that expands more than this many times is a bomb, not a trace: torch.profiler's traces
#: compress 7 to 16 times (the guide's 80 recorded traces: 7.5 to 16.1). Checked once the text passes
#: MIN_BOMB_BYTES, twice MAX_VALUE_CHARS, so that a single overlong value is said as such first.
MAX_GZIP_RATIO = 100
MIN_BOMB_BYTES = 32 * 2**20
_CHUNK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def max_trace_bytes(max_bytes: int | None = None) -> int:
    """``max_bytes`` if given, else ``$PROFILING_GUIDE_MAX_TRACE_BYTES``, else 2 GiB."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise GuideError(f"max_bytes must be a positive whole number of bytes, got {max_bytes!r}")
        return max_bytes
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise GuideError(f"{MAX_BYTES_ENV}={text[:40]!r} is not a positive whole number of bytes")
    return value


class NotATrace(GuideError):
    """The file is JSON, but not shaped as a Chrome trace (no ``traceEvents`` list, not a list of events).

    A folder of traces may hold other JSON beside them (a run's ``cases.json``):
    :func:`~profiling_guide.trace.run.trace_files` leaves such a file out, where
    a damaged trace is still an error. ``reason`` says what the file is instead.
    """

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path} is {reason}: give a torch.profiler export")
        self.reason = reason


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n % 2**20 == 0 and n >= 2**30 else f"{n:,} bytes"


class _ValueTooLong(Exception):
    """A single JSON value runs past MAX_VALUE_CHARS (caught in TraceStream.events)."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]")  # how JSON writes a code point from U+D000 on, surrogates among them


def without_surrogates(value):
    """``value`` with each lone surrogate (``"\\ud800"``: valid JSON, not text) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    return value


class _Text:
    """The file's text, decoded chunk by chunk, with a read position.

    ``buf[pos:]`` is what is left to read; ``offset`` counts the characters
    already dropped from the front of ``buf``, for error messages.
    """

    def __init__(self, chunks: Iterator[str]):
        self._chunks = chunks
        self.buf = ""
        self.pos = 0
        self.offset = 0
        self.eof = False
        # True once the text holds a \\uD8xx-\\uDFxx escape: values may then hold lone surrogates.
        self.surrogates = False

    def more(self) -> bool:
        """Drop what was read and append at least as much text as is left (False at the end).

        Growing by the unread length, not by one chunk, keeps re-decoding a
        value that spans many chunks linear in its size.
        """
        if self.eof:
            return False
        rest = self.buf[self.pos :]
        parts = [rest]
        want = max(len(rest), _CHUNK)
        got = 0
        for chunk in self._chunks:
            parts.append(chunk)
            got += len(chunk)
            if got >= want:
                break
        else:
            self.eof = True
        self.offset += self.pos
        self.buf, self.pos = "".join(parts), 0
        # Only the new text can hold a first surrogate escape (or finish one the old text began).
        if not self.surrogates and _SURROGATE_ESCAPE.search(self.buf, max(len(rest) - 2, 0)):
            self.surrogates = True
        return got > 0

    def peek(self) -> str:
        """The next non-space character, not consumed ('' at the end of the file)."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, what: str):
        raise json.JSONDecodeError(f"Expecting {what}", self.buf, self.pos)

    def value(self):
        """Decode the JSON value at the read position and move past it (at most MAX_VALUE_CHARS long)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Cut off by the end of the buffer, or wrong where it stands?
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - 8
                if cut and self._more_of_one_value():
                    continue
                raise
            # A number that ends the buffer may go on in the next chunk.
            if end == len(self.buf) and self._more_of_one_value():
                continue
            self.pos = end
            return without_surrogates(value) if self.surrogates else value

    def _more_of_one_value(self) -> bool:
        if len(self.buf) - self.pos > MAX_VALUE_CHARS:
            raise _ValueTooLong
        return self.more()


class TraceStream:
    """The events of one trace file, read lazily; :attr:`metadata` is complete once they are.

    Iterate :meth:`events` for ``(index, event)`` pairs; ``event`` is whatever
    the JSON holds (checking it is the loader's job).
    """

    def __init__(self, path: str | Path, max_bytes: int | None = None):
        self.path = Path(path)
        self.max_bytes = max_trace_bytes(max_bytes)
        self.metadata: dict = {}
        try:
            mode = self.path.stat().st_mode
        except (OSError, ValueError):
            raise GuideError(f"no trace file at {self.path}: give the path of a .json or .json.gz trace") from None
        if not stat.S_ISREG(mode):
            raise self._not_a_file(mode)

    def _not_a_file(self, mode: int) -> GuideError:
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        return GuideError(f"{self.path} is {kind}, not a trace file: give the path of a .json or .json.gz trace")

    # ------------------------------------------------------------ bytes to text
    def _too_big(self, gzipped: bool) -> GuideError:
        what = "decompresses to" if gzipped else "holds"
        return GuideError(
            f"{self.path} {what} more than {_size(self.max_bytes)}, the limit for a trace: "
            f"raise it with {MAX_BYTES_ENV}=<bytes> (or Trace.load(..., max_bytes=...))"
        )

    def _bomb(self, total: int, packed: int) -> GuideError:
        return GuideError(
            f"{self.path} expands more than {MAX_GZIP_RATIO} times ({packed:,} bytes gave {total:,} and more): "
            "a gzip bomb, not a profiler trace (those compress 7 to 16 times); if it is a genuine trace, "
            "gunzip it and give the .json"
        )

    def _chunks(self) -> Iterator[str]:
        # O_NONBLOCK: a FIFO put in the file's place since __init__ must not block the open.
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            os.close(fd)
            raise self._not_a_file(found.st_mode)
        with os.fdopen(fd, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            # A plain file's size is known before reading it; a gzip's only while decompressing it.
            if not gzipped and found.st_size > self.max_bytes:
                raise self._too_big(gzipped)
            raw = gzip.GzipFile(fileobj=f, mode="rb") if gzipped else f
            decoder = codecs.getincrementaldecoder("utf-8")()
            total = 0
            while data := raw.read(_CHUNK):
                total += len(data)
                if total > self.max_bytes:
                    raise self._too_big(gzipped)
                # f.tell() is at or past what was decompressed so far (the gzip reader reads ahead).
                if gzipped and total > MIN_BOMB_BYTES and total > MAX_GZIP_RATIO * f.tell():
                    raise self._bomb(total, f.tell())
                yield decoder.decode(data)
            yield decoder.decode(b"", final=True)

    # ---------------------------------------------------------- text to events
    def events(self) -> Iterator[tuple[int, object]]:
        """``(index, event)`` for every element of the trace's event list, in file order."""
        try:
            text = _Text(self._chunks())
            first = text.peek()
            if first == "[":
                yield from self._array(text, bare=True)
            elif first == "{":
                yield from self._object(text)
            else:
                text.value()  # not JSON at all is said as such
                raise NotATrace(self.path, "not a Chrome trace (neither a JSON object nor a list of events)")
            if text.peek():
                text.expect("the end of the file")
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise GuideError(f"{self.path} is not a complete gzip file ({exc}): re-export or re-record it") from None
        except json.JSONDecodeError as exc:
            raise GuideError(
                f"{self.path} is not a JSON trace ({exc.msg} at character {text.offset + exc.pos:,}): "
                "is the file truncated?"
            ) from None
        except UnicodeDecodeError as exc:
            raise GuideError(f"{self.path} is not UTF-8 text ({exc.reason}): give a .json or .json.gz trace") from None
        except RecursionError:
            raise GuideError(f"{self.path} nests JSON values deeper than a trace does: it is not a torch.profiler export") from None
        except _ValueTooLong:
            raise GuideError(
                f"{self.path} holds a single JSON value of more than {MAX_VALUE_CHARS // 2**20} MiB at character "
                f"{text.offset + text.pos:,}: no event of a torch.profiler trace is that long; it is not a trace"
            ) from None
        except ValueError:  # json turns digits into an int, and Python refuses more than 4,300 of them
            raise GuideError(f"{self.path} holds a number of more than 4,300 digits: no trace does; "
                             "it is not a torch.profiler export") from None
        except OSError as exc:
            raise GuideError(f"cannot read {self.path}: {exc.strerror or exc}") from None

    def _object(self, text: _Text) -> Iterator[tuple[int, object]]:
        text.pos += 1  # "{"
        found = False
        if text.peek() == "}":
            text.pos += 1
        else:
            while True:
                if text.peek() != '"':
                    text.expect("a key in double quotes")
                key = text.value()
                if text.peek() != ":":
                    text.expect("':' delimiter")
                text.pos += 1
                if key == "traceEvents":
                    if found:
                        raise GuideError(f"{self.path} has two 'traceEvents' lists: give a torch.profiler export")
                    found = True
                    if text.peek() != "[":
                        raise NotATrace(self.path, "not a Chrome trace ('traceEvents' is not a list)")
                    yield from self._array(text, bare=False)
                else:
                    self.metadata[key] = text.value()
                c = text.peek()
                text.pos += 1
                if c == "}":
                    break
                if c != ",":
                    text.pos -= 1
                    text.expect("',' delimiter")
        if not found:
            raise NotATrace(self.path, "not a Chrome trace (no 'traceEvents' list)")

    @staticmethod
    def _array(text: _Text, *, bare: bool) -> Iterator[tuple[int, object]]:
        # ``bare``: the whole file is the list, and Chrome lets it end without "]".
        text.pos += 1  # "["
        if text.peek() == "]":
            text.pos += 1
            return
        index = 0
        while True:
            yield index, text.value()
            index += 1
            c = text.peek()
            if c == ",":
                text.pos += 1
                if bare and text.peek() in ("", "]"):
                    text.pos += text.peek() == "]"
                    return
            elif c == "]":
                text.pos += 1
                return
            elif c == "" and bare:
                return
            else:
                text.expect("',' delimiter")
