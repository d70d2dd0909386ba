"""Every file a page names exists, and every command line a page shows takes the flags it gives.

A "Run it yourself" section that names a file that was renamed, or a flag the
chapter does not have, sends a reader to an error. The command page's list of
every chapter's command line gives each chapter's own defaults: run, each
would replay what the docs build replays (which runs every chapter), so
``tests/test_readme.py`` leaves that block to it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").rglob("plot_*.py"))
NAMED = re.compile(r"(?<![\w/.])((?:examples|scripts|docs|src|tests)/[\w/.-]*\w\.(?:py|json|md|rst|txt)(?:\.gz)?)(?!\w)")
# The site's other pages and the README name files too.
PAGES = [*EXAMPLES, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "concepts").rglob("*.md")),
         ROOT / "README.md"]
COMMAND = re.compile(r"python3? (examples/[\w/]+\.py)((?: +--?\w+(?: +[^\s#-]\S*)?)*)")
EVERY_CHAPTER_TAKES = {"mode", "dtype", "help"}


def _flags(example: Path) -> set[str]:
    """The flags of a chapter: the keywords of its ``Chapter.from_command_line`` call."""
    for node in ast.walk(ast.parse(example.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "from_command_line":
            return {k.arg for k in node.keywords if k.arg} - {"bf16_only_because", "argv"} | EVERY_CHAPTER_TAKES
    return set(EVERY_CHAPTER_TAKES)


@pytest.mark.parametrize("example", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_a_page_names_exists(example):
    named = set(NAMED.findall(example.read_text()))
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"{example.relative_to(ROOT)} names {', '.join(missing)}, which does not exist"


@pytest.mark.parametrize("example", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_line_a_page_shows_takes_its_flags(example):
    for target, rest in COMMAND.findall(example.read_text()):
        flags = {f.lstrip("-") for f in re.findall(r"--?\w+", rest)}
        unknown = sorted(flags - _flags(ROOT / target))
        assert not unknown, f"{example.relative_to(ROOT)}: `python {target}` has no flag --{unknown[0]}"


def test_the_checks_catch_a_wrong_name(tmp_path):
    page = tmp_path / "plot_x.py"
    page.write_text("#     python examples/plot_09b_attention_sweep.py --seq 4\n")
    assert NAMED.findall(page.read_text()) == ["examples/plot_09b_attention_sweep.py"]
    assert not (ROOT / "examples/plot_09b_attention_sweep.py").exists()
    assert COMMAND.findall("#     python examples/plot_01_linear.py --batch 1024 --in_dim 32 --mode replay") == [
        ("examples/plot_01_linear.py", " --batch 1024 --in_dim 32 --mode replay")]
    assert "bogus" not in _flags(ROOT / "examples/plot_01_linear.py")


def chapter_args(example: Path, argv: list[str]) -> dict:
    """The run's arguments (what its recordings are keyed by) of ``python example argv``, as its page parses them."""
    from profiling_guide.pages.chapter import Chapter

    for node in ast.walk(ast.parse(example.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "from_command_line":
            keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            return Chapter.from_command_line(ast.literal_eval(node.args[0]), argv=argv, **keywords).args
    raise AssertionError(f"{example}: no Chapter.from_command_line call")


def test_the_command_pages_chapter_commands_are_the_chapters_defaults():
    text = (ROOT / "docs" / "command_line.md").read_text()
    block = next(b for b in text.split("```") if "python examples/plot_01_linear.py" in b)
    commands = COMMAND.findall(block)
    assert len(commands) >= len([p for p in EXAMPLES if "deep_dives" not in p.parts])
    for target, rest in commands:
        assert chapter_args(ROOT / target, rest.split()) == chapter_args(ROOT / target, []), f"python {target}{rest}"


def test_the_defaults_check_sees_another_size():
    chapter = ROOT / "examples" / "plot_01_linear.py"
    assert chapter_args(chapter, ["--batch", "512"]) != chapter_args(chapter, [])
