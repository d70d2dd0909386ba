"""Live measurements keep their progress lines, compiler logs and warnings off the page."""

import io
import logging
import sys
import warnings

from profiling_guide.output import to_console


def test_prints_warnings_and_stderr_inside_go_to_the_console_not_the_page(monkeypatch):
    page, console = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", page)  # what sphinx-gallery puts on the page
    monkeypatch.setattr(sys, "stderr", page)
    with to_console(console):
        print("  eager: building and checking")
        sys.stderr.write("AUTOTUNE mm(8192x3072, 3072x768)\n")
        warnings.warn("TypedStorage is deprecated", UserWarning, stacklevel=1)
        logging.StreamHandler(sys.stderr).handle(logging.makeLogRecord({"msg": "E1123 select_algorithm"}))
    print("the page's own output")
    assert page.getvalue() == "the page's own output\n"
    out = console.getvalue()
    for marker in ("building and checking", "AUTOTUNE", "TypedStorage", "select_algorithm"):
        assert marker in out


def test_the_page_streams_come_back_after_an_error():
    before = sys.stdout, sys.stderr
    try:
        with to_console(io.StringIO()):
            raise ValueError("a failed measurement")
    except ValueError:
        pass
    assert (sys.stdout, sys.stderr) == before


def test_a_chapter_prints_its_banner_in_a_process_that_imported_sphinx_gallery_for_something_else(monkeypatch):
    import sys
    import types

    from profiling_guide.output import in_gallery

    monkeypatch.setitem(sys.modules, "sphinx_gallery", types.ModuleType("sphinx_gallery"))
    assert not in_gallery()  # imported, but not executing an example: a script run prints
    scope = {"__name__": "sphinx_gallery.gen_rst", "in_gallery": in_gallery}
    exec("def run():\n    return in_gallery()\n", scope)  # noqa: S102 - a frame of sphinx-gallery's executor
    assert scope["run"]()
