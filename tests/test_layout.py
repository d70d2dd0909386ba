"""The package's parts, and which may import which.

The tree shows the architecture: ``trace`` reads traces, ``analysis`` is pure
functions of them, ``measure`` times on a GPU, ``kernels`` holds the models and
kernels under study, ``pages`` and ``report`` present, and ``cli`` joins them.
Every import (at the top of a module or inside a function) is checked against
the rules below, read from the source without importing anything. And
``analysis`` returns data: it imports no ``html`` and composes no sentence
(those are written once, in ``pages`` or ``report``).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "profiling_guide"

#: Modules at the package's top: small, shared by every part, importing none of the parts.
CORE = {"errors", "files", "spread", "sizes", "output", "__init__"}
PARTS = ("trace", "analysis", "measure", "kernels", "pages", "report")

#: What each part may import of ours, besides itself and the core modules.
ALLOWED = {
    "core": set(),
    "trace": set(),
    "analysis": {"trace"},
    "kernels": set(),  # the models know nothing of traces
    "measure": {"trace", "analysis", "kernels"},
    "pages": {"trace", "analysis", "measure", "kernels"},
    "report": {"trace", "analysis", "measure", "pages"},
    "cli": set(PARTS),
}
#: Parts that must run without torch: a trace is read and analysed on any machine.
NO_TORCH = {"trace", "analysis"}


def part_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return "cli" if rel.stem == "cli" else "core"
    return rel.parts[0]


def imports(source: str, where: str) -> list[tuple[int, str]]:
    """Every module a source imports (``profiling_guide.x`` for ``from profiling_guide import x``), with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "." * node.level + (node.module or "")))
                continue
            base = node.module or ""
            if base == "profiling_guide":
                found += [(node.lineno, f"profiling_guide.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, base))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def target_part(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "profiling_guide" or len(parts) == 1:
        return None
    if parts[1] in PARTS:
        return parts[1]
    return "cli" if parts[1] == "cli" else "core"


def violations(source: str, here: str) -> list[str]:
    """The imports of ``source``, a module of part ``here``, that break the rules."""
    wrong = []
    for line, module in imports(source, here):
        if module.startswith("."):
            wrong.append(f"line {line}: a relative import; write the absolute path so the part it reaches shows")
            continue
        there = target_part(module)
        if there is None:
            if here in NO_TORCH and module.split(".")[0] == "torch":
                wrong.append(f"line {line}: {module} (the {here} part runs without torch)")
            continue
        if there not in {here, "core"} and there not in ALLOWED[here]:
            wrong.append(f"line {line}: {module} ({here} may not import {there})")
    return wrong


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_tree_has_the_parts_and_no_flat_modules_beyond_the_core():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= CORE | {"cli"}, f"modules outside any part: {sorted(top - CORE - {'cli'})}"
    for part in PARTS:
        assert (PACKAGE / part / "__init__.py").is_file(), f"{part}/ is not a package"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_direction_of_the_parts(path):
    wrong = violations(path.read_text(), part_of(path))
    assert not wrong, f"{path.relative_to(PACKAGE)}: " + "; ".join(wrong)


@pytest.mark.parametrize("source, here, words", [
    ("from profiling_guide.measure.timing import device_time\n", "analysis", "analysis may not import measure"),
    ("def f():\n    from profiling_guide.measure import capture\n", "analysis", "analysis may not import measure"),
    ("import torch\n", "trace", "runs without torch"),
    ("from profiling_guide import pages\n", "kernels", "kernels may not import pages"),
    ("from profiling_guide.trace import Trace\n", "kernels", "kernels may not import trace"),
    ("from .model import Trace\n", "trace", "relative import"),
])
def test_a_module_that_breaks_the_rules_is_named(source, here, words):
    assert any(words in w for w in violations(source, here))


def test_allowed_imports_pass():
    assert violations("import torch\nfrom profiling_guide.trace import Trace\n"
                      "from profiling_guide.errors import GuideError\n", "measure") == []


# ------------------------------------------------------------------ analysis returns data
#: A string of this many words or more that ends as a sentence does is prose.
SENTENCE_WORDS = 6


def sentences(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string or f-string of ``source`` that reads as a sentence.

    A sentence here is six words or more ending in ``.``, ``!`` or ``?`` (an
    f-string's fields count as a word each). Docstrings and the messages of
    raised errors (one line a user acts on) are not composed for a page, and
    are left out.
    """
    tree = ast.parse(source)
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Raise) and node.exc is not None:
            skip.update(id(n) for n in ast.walk(node.exc))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(n) for n in node.values)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if len(text.split()) >= SENTENCE_WORDS and text.rstrip().endswith((".", "!", "?")):
            found.append((node.lineno, text))
    return found


def html_imports(source: str) -> list[int]:
    return [line for line, module in imports(source, "analysis") if module.split(".")[0] == "html"]


@pytest.mark.parametrize("path", sorted((PACKAGE / "analysis").glob("*.py")), ids=lambda p: p.name)
def test_analysis_returns_data_not_sentences_or_html(path):
    source = path.read_text()
    assert not html_imports(source), f"{path.name} imports html: HTML belongs to pages/ or report/"
    assert not sentences(source), f"{path.name} composes sentences (pages/ or report/ word them): {sentences(source)}"


def test_a_composed_sentence_and_an_html_import_are_found_and_docstrings_and_errors_are_not():
    source = '''
"""A module docstring that is a sentence of many words."""
import html
def f(x):
    """A function's docstring, also a sentence of many words."""
    if x:
        raise ValueError(f"the value {x} is not one this function can take.")
    label = "a short label"
    return f"The GPU was busy {x:.0%} of the step, waiting for work."
'''
    assert [line for line, _ in sentences(source)] == [9]
    assert html_imports(source) == [3]
