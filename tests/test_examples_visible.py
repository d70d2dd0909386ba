"""What a chapter page shows is a program: it defines every name it uses and runs as is.

A reader copies a page's cells (its code less the hidden blocks) into a file:
that file must name nothing it does not define, reach into no private name of
the library, and run as a script, here in replay on the CPU.
"""

import os
from pathlib import Path

import pytest
# the test extra's pyflakes; a GPU machine running `nox -s tests_gpu` may not have it
pytest.importorskip("pyflakes")
from pyflakes.api import check  # noqa: E402
from pyflakes.reporter import Reporter  # noqa: E402

from quick_python import run_here
from visible_code import private_names, visible_code
from vocabulary import floor_misuses

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").rglob("plot_*.py"))


class _Collect(Reporter):
    def __init__(self):
        self.messages = []

    def flake(self, message):
        self.messages.append(message)

    def unexpectedError(self, filename, msg):  # noqa: N802 - pyflakes' name
        self.messages.append(msg)

    def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802
        self.messages.append(f"line {lineno}: {msg}")


def undefined_names(source: str) -> list[str]:
    reporter = _Collect()
    check(source, "page.py", reporter)
    return [str(m) for m in reporter.messages
            if "undefined name" in str(m) or isinstance(m, str)]


def test_the_checker_finds_an_undefined_name_and_a_private_one():
    source = "import torch\nx = torch.ones(2)\nprint(chapter.flags)\nfrom a import _b\ny = x._secret\n"
    assert any("chapter" in m for m in undefined_names(source))
    assert len(private_names(source)) == 2


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_page_names_nothing_it_does_not_define(example):
    assert undefined_names(visible_code(example)) == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_page_shows_no_private_name(example):
    assert private_names(visible_code(example)) == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_page_runs_as_a_script_in_replay(example, tmp_path):
    """The copied page, in a folder of its own, replays its recordings (none stale) and prints the banner.

    It runs in this process (:func:`quick_python.run_here`), as the docs build runs it. What it
    prints (its sentences of facts, its verdicts) calls no measured reference a floor.
    """
    script = tmp_path / example.name
    script.write_text(visible_code(example))
    result = run_here(script, cwd=tmp_path, env={**os.environ, "MPLBACKEND": "Agg", "PROFILING_GUIDE_MODE": "replay",
                                                 "PROFILING_GUIDE_STALE": "error"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Replayed from a recording made on NVIDIA" in result.stdout
    assert not floor_misuses(result.stdout), floor_misuses(result.stdout)
