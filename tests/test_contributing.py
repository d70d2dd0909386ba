"""``nox -s quick``, the lint and the fast unit tests, is what ``CONTRIBUTING.md`` says it is.

The session lints with ruff before it tests, as ``nox -s tests`` (CI's
session) does; the lint's rules are ``pyproject.toml``'s; ``QUICK_TESTS``
names test modules that exist and leaves out the examples, the docs and the
browser; and ``src/`` and ``tests/`` are clean under those rules now.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOXFILE = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def _constant(name: str):
    """The value of a module-level assignment of the noxfile, evaluated alone (the noxfile imports nox)."""
    node = next(n for n in NOXFILE.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in n.targets))
    return eval(compile(ast.Expression(node.value), "noxfile.py", "eval"), {})  # literals and a comprehension


def _runs(session: str) -> list[str]:
    """What each ``session.run(...)`` of the session runs, in order: its first argument's source."""
    function = next(n for n in NOXFILE.body if isinstance(n, ast.FunctionDef) and n.name == session)
    calls = [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "run" and n.args]
    return [ast.unparse(call.args[0]) for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]


QUICK_TESTS = _constant("QUICK_TESTS")


@pytest.mark.parametrize("session", ["tests", "quick"])
def test_the_session_lints_before_it_tests(session):
    runs = _runs(session)
    assert runs[:2] == ["*RUFF", "'pytest'"], runs
    assert _constant("RUFF") == ("ruff", "check", "src", "tests")


def test_ci_runs_the_session_that_lints():
    assert re.search(r"^nox -s tests$", (ROOT / ".ci" / "run").read_text(), re.M)


def test_the_rules_are_pyflakes_and_bugbear_and_ruff_is_a_test_dependency():
    assert PYPROJECT["tool"]["ruff"]["lint"]["select"] == ["F", "B"]
    assert "ignore" not in PYPROJECT["tool"]["ruff"]["lint"], "a rule switched off: use a per-line noqa with a reason"
    assert any(req.startswith("ruff") for req in PYPROJECT["project"]["optional-dependencies"]["test"])


def test_the_quick_tests_exist_and_leave_out_the_examples_the_docs_and_the_browser():
    assert QUICK_TESTS and len(set(QUICK_TESTS)) == len(QUICK_TESTS)
    for name in QUICK_TESTS:
        assert (ROOT / name).is_file(), name
        assert not re.search(r"examples|readme|documented|docs|layout|developing|contributing|browser", name), name


def test_contributing_says_how_to_run_it():
    assert "nox -s quick" in CONTRIBUTING and "QUICK_TESTS" in CONTRIBUTING and "ruff check src tests" in CONTRIBUTING


def test_every_noqa_says_why():
    # A bare noqa comment for B905 switches a rule off on a line unexplained: the reason stands beside it or above it
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            found = re.search(r"# noqa: [FB]\d+(?:, [FB]\d+)*(.*)$", line)  # the rules ruff checks here
            if found and not found.group(1).strip():
                assert i and "noqa below" in lines[i - 1], f"{path.relative_to(ROOT)}:{i + 1}: a noqa without a reason"


def test_src_and_tests_are_clean_under_the_rules():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    result = subprocess.run([ruff, "check", "src", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
