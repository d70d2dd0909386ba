"""The layout tables of ``DEVELOPING.md`` name every module, script and test helper, and nothing else.

Under its "Layout" heading, each ``### `folder/` `` section holds one table
whose first column names paths relative to that folder (``### The rest``:
relative to the repository's root). Every module and package of
``src/profiling_guide/``, every file of ``scripts/`` and every test helper
(a ``tests/`` file that is not a ``test_*.py``, and each folder of ``tests/``)
must have a row; every row must name something that exists (``<gpu>`` and
``*`` stand for any name). A row's description is short: the module's own
docstring, said briefly.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "DEVELOPING.md"
PACKAGE = ROOT / "src" / "profiling_guide"
ROW = re.compile(r"^\|\s*`([^`]+)`((?:,\s*`[^`]+`)*)\s*\|\s*(.*?)\s*\|\s*$")
LONGEST_DESCRIPTION = 120  # characters: one line of a table, not a paragraph


def layout_tables(text: str) -> dict[str, list[tuple[str, str]]]:
    """``{base folder: [(name, description), ...]}`` from the "Layout" section ("" for the repository's root)."""
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, "DEVELOPING.md has no '## Layout' section"
    tables: dict[str, list[tuple[str, str]]] = {}
    base = None
    for line in section.group(1).splitlines():
        heading = re.match(r"^### (?:`([^`]+)`|.+)$", line)
        if heading:
            base = heading.group(1) or ""
            tables[base] = []
            continue
        row = ROW.match(line)
        if row and base is not None:
            names = [row.group(1), *re.findall(r"`([^`]+)`", row.group(2))]
            tables[base] += [(name, row.group(3)) for name in names]
    return tables


def exists(base: Path, name: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", name.rstrip("/"))
    found = list(base.glob(pattern)) if "*" in pattern else [base / pattern]
    found = [p for p in found if p.exists()]
    return bool(found) and (not name.endswith("/") or all(p.is_dir() for p in found))


def in_the_tree() -> dict[str, set[str]]:
    """What the tables must name, per base folder."""
    package = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    package |= {f"{p.parent.relative_to(PACKAGE).as_posix()}/" for p in PACKAGE.rglob("__init__.py")
                if p.parent != PACKAGE}
    scripts = {p.name for p in (ROOT / "scripts").iterdir() if p.is_file() and not p.name.startswith(".")}
    tests = ROOT / "tests"
    helpers = {p.relative_to(tests).as_posix() for p in tests.rglob("*.py")
               if "data" not in p.relative_to(tests).parts and not p.name.startswith("test_")
               and "__pycache__" not in p.parts}
    helpers |= {f"{p.name}/" for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    return {"src/profiling_guide/": {n for n in package if "__pycache__" not in n},
            "scripts/": scripts, "tests/": helpers}


TABLES = layout_tables(GUIDE.read_text(encoding="utf-8"))


def test_the_layout_has_a_table_for_each_part():
    assert set(in_the_tree()) <= set(TABLES), f"sections: {sorted(TABLES)}"
    assert all(TABLES.values()), "an empty table"


@pytest.mark.parametrize("base", sorted(in_the_tree()))
def test_every_module_script_and_helper_has_a_row(base):
    named = {name for name, _ in TABLES.get(base, [])}
    missing = sorted(in_the_tree()[base] - named)
    assert not missing, f"DEVELOPING.md's layout of {base} lacks {', '.join(missing)}: add a row from its docstring"


@pytest.mark.parametrize("base", sorted(TABLES))
def test_every_row_names_something_that_exists(base):
    folder = ROOT / base
    gone = sorted(name for name, _ in TABLES[base] if not exists(folder, name))
    assert not gone, f"DEVELOPING.md's layout of {base or 'the repository'} names {', '.join(gone)}: none exists"


@pytest.mark.parametrize("base", sorted(TABLES))
def test_every_row_says_what_it_is_in_one_short_line(base):
    for name, description in TABLES[base]:
        assert description, f"{base}{name} has no description"
        assert len(description) <= LONGEST_DESCRIPTION, f"{base}{name}: {len(description)} characters; say it shortly"


def test_the_table_reader_and_the_tree_agree_on_a_small_case(tmp_path):
    text = ("# x\n## Layout\n### `src/`\n| module | what |\n| --- | --- |\n| `a.py` | A |\n"
            "| `b/`, `c.py` | B |\n### The rest\n| path | holds |\n| --- | --- |\n| `docs/recordings/<gpu>/` | R |\n"
            "## CI\n| `not/in/layout.py` | no |\n")
    tables = layout_tables(text)
    assert tables == {"src/": [("a.py", "A"), ("b/", "B"), ("c.py", "B")], "": [("docs/recordings/<gpu>/", "R")]}
    assert exists(ROOT, "docs/recordings/<gpu>/") and not exists(ROOT, "docs/recordings/<gpu>/nothing.py")
    assert not exists(ROOT, "README.md/")
