"""The one exception type the guide raises for things a user can fix, and how it is shown."""

from __future__ import annotations

import sys

#: The optional packages the guide imports, and the extra of ``profiling-guide`` that installs each
#: (``pip install 'profiling-guide[liger]'``). liger-kernel brings Triton with it.
EXTRAS = {"triton": "liger", "liger_kernel": "liger", "kernels": "liger", "transformers": "transformers"}
_DISTRIBUTIONS = {"liger_kernel": "liger-kernel"}


class GuideError(Exception):
    """A problem the user can act on, said in one line.

    The command-line entry points print ``error: <message>`` and exit with
    status 2 instead of showing a traceback; example scripts let it propagate
    so a docs build stops at the page that cannot be built, and run as
    scripts they print it as one line (:func:`show_guide_errors_in_one_line`).
    """


def argument_check(fn):
    """Mark ``fn`` as an argument check: it returns None on arguments it accepts and raises on the others, and
    does nothing else. A recording's fingerprints leave out calls to it (a bare ``fn(...)`` statement in this
    package's code), as they leave out ``assert`` and ``if ...: raise`` statements: checks decide whether the
    work runs, not what the GPU runs (:mod:`profiling_guide.pages.closure`)."""
    return fn


def quoted(value, limit: int = 40) -> str:
    """A value as an error message quotes it: its repr, cut short to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def missing_dependency(exc: ModuleNotFoundError, needed_for: str) -> GuideError:
    """A one-line GuideError for ``exc``: which package ``needed_for`` lacks, and the command that installs it."""
    root = (exc.name or "").split(".")[0] or "a package"
    extra = EXTRAS.get(root)
    install = f"pip install 'profiling-guide[{extra}]'" if extra else f"pip install {_DISTRIBUTIONS.get(root, root)}"
    return GuideError(f"{needed_for} needs {_DISTRIBUTIONS.get(root, root)}, which is not installed: {install}")


def _one_line(exc_type, exc, tb, _previous=sys.excepthook):
    if issubclass(exc_type, GuideError):
        print(f"error: {exc}", file=sys.stderr)
    else:
        _previous(exc_type, exc, tb)


def show_guide_errors_in_one_line() -> None:
    """Make an uncaught GuideError print as ``error: <message>``, not a traceback; other errors keep theirs.

    Installed when the package is imported, so an example run as a script
    (``python plot_06_fused.py``) says what to do in one line even when the
    error comes from an import at its top, before it has parsed its flags.
    A hook someone else installed (IPython's, a debugger's) is left alone.
    """
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _one_line
