"""Where an example's output goes: onto its gallery page, or to the console.

sphinx-gallery shows what an example prints and the value of a cell's last
expression; a plain ``python plot_x.py`` shows only what it prints. Progress
lines, compiler logs and warnings belong on the console, never on a page.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path


#: The class of the box every table of a page sits in: the box scrolls sideways, the page never does,
#: and the table's first column stays in view while it scrolls (docs/_static/guide.css).
SCROLL_CLASS = "pg-scroll"


def scrolling(table_html: str) -> str:
    """``table_html`` in the box that scrolls it sideways on a narrow screen (:data:`SCROLL_CLASS`)."""
    return f'<div class="{SCROLL_CLASS}">{table_html}</div>'


def in_gallery() -> bool:
    """True while sphinx-gallery executes an example (it shows the values of bare expressions).

    Asked of the call stack, not of what is imported: a process that has
    imported sphinx-gallery for another reason (a test of the docs build's
    own extensions) and then runs a chapter as a script still prints.
    """
    if "sphinx_gallery" not in sys.modules:
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("sphinx_gallery."):
            return True
        frame = frame.f_back
    return False


def echo(obj):
    """Print ``obj`` when an example runs as a plain script; return it either way.

    Under sphinx-gallery a bare expression at the end of a block is rendered
    (as HTML when it has ``_repr_html_``); a plain ``python plot_x.py`` shows
    nothing for it. The banner, the facts and the verdicts pass through here so a
    script run prints them too, and the page does not print them twice.
    """
    if not in_gallery():
        print(repr(obj), flush=True)
    return obj


@contextlib.contextmanager
def to_console(console=None):
    """Send what runs inside to the console, never to the page.

    sphinx-gallery puts an example's stdout and stderr on its page; progress
    lines, compiler and autotune logs and warnings raised while measuring
    belong to the maintainer's terminal. Inside this block both streams go to
    ``console`` (default: the process's real stderr), and warnings are shown
    there once each.
    """
    console = console or sys.__stderr__ or sys.stderr

    def show(message, category, filename, lineno, file=None, line=None):
        console.write(warnings.formatwarning(message, category, filename, lineno, line))

    with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console), warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show  # whoever else records warnings (a test runner, a docs builder)
        yield


def quiet_matplotlib_cache() -> None:
    """Point matplotlib at a temporary folder when it could not write its own (a HOME that is not writable).

    Otherwise matplotlib prints a two-line warning about its cache on every
    command, before whatever the command has to say. ``$MPLCONFIGDIR``, when
    set, is left as it is.
    """
    if os.environ.get("MPLCONFIGDIR"):
        return
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        home = None
    folders = [Path(os.environ.get(xdg) or (home / dot if home else "")) / "matplotlib"
               for xdg, dot in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"))]
    for folder in folders:
        try:  # as matplotlib will: make it, then see whether a file can be written there
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError:
            temporary = tempfile.mkdtemp(prefix="profiling-guide-matplotlib-")
            atexit.register(shutil.rmtree, temporary, ignore_errors=True)
            os.environ["MPLCONFIGDIR"] = temporary
            return
