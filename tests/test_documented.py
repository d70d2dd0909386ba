"""Every environment variable the guide reads, and every flag its command lines take, is documented.

Documented: named in ``README.md``, ``CONTRIBUTING.md``, ``DEVELOPING.md`` or a page of the site
(``docs/**/*.md``). The variables are found in the source without importing
it: every ``PROFILING_GUIDE_*`` name in ``src/``, ``scripts/``, the docs
build and the noxfile, and every variable ``src/`` reads through
``os.environ`` or ``os.getenv``, whether named in place, by a module-level
constant or by a loop over names. The flags are every ``--flag`` given to an
``add_argument`` in ``src/`` or ``scripts/`` (and the probes' own on/off
flags, given as ``flags={...}``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "profiling_guide"
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "DEVELOPING.md", *sorted((ROOT / "docs").rglob("*.md"))]
DOCUMENTS = [p for p in DOCUMENTS if not {"_build", "auto_examples", "jupyter_execute"} & set(p.parts)]
#: Where the guide's own variables are read: the package, the scripts, the docs build, the noxfile, the site's tests.
OWN_VARIABLE_SOURCES = [*SRC.rglob("*.py"), *(ROOT / "scripts").iterdir(), *(ROOT / "docs").glob("*.py"),
                        *(ROOT / "docs" / "_offline").glob("*.py"), ROOT / "noxfile.py",
                        *(ROOT / "tests" / "browser").glob("*.py")]
OWN_VARIABLE = re.compile(r"\bPROFILING_GUIDE_[A-Z0-9_]*[A-Z0-9]\b")


@functools.cache
def documentation() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in DOCUMENTS)


def named(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


# ------------------------------------------------------------------ environment variables
def _constants(trees: list[ast.Module]) -> dict[str, list[str]]:
    """Every module-level ``NAME = "..."`` (or a tuple of strings) of the package, by name."""
    found: dict[str, list[str]] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                strings = _strings(node.value)
                if strings:
                    found[node.targets[0].id] = strings
    return found


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts):
        return [e.value for e in node.elts if isinstance(e.value, str)]
    return []


def _bound_by_loop(name: str, node: ast.AST, parents: dict, constants: dict) -> list[str] | None:
    """The strings ``name`` takes in the loop or comprehension around ``node`` that binds it, if any."""
    while node in parents:
        node = parents[node]
        loops = node.generators if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) \
            else [node] if isinstance(node, ast.For) else []
        for loop in loops:
            items = loop.iter
            if isinstance(items, ast.Name) and items.id in constants:
                values = constants[items.id]
                if isinstance(loop.target, ast.Name) and loop.target.id == name:
                    return values
            if not isinstance(items, (ast.Tuple, ast.List)):
                continue
            if isinstance(loop.target, ast.Name) and loop.target.id == name:
                return [s for e in items.elts for s in _strings(e)]
            if isinstance(loop.target, ast.Tuple):
                for i, target in enumerate(loop.target.elts):
                    if isinstance(target, ast.Name) and target.id == name:
                        return [s for e in items.elts if isinstance(e, ast.Tuple) for s in _strings(e.elts[i])]
    return None


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", "") == "os"


def variables_read(trees: dict[Path, ast.Module]) -> dict[str, str]:
    """``{variable: "file:line"}`` for every variable the modules read; an unresolved key fails the test."""
    constants = _constants(list(trees.values()))
    found: dict[str, str] = {}
    for path, tree in trees.items():
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                if (isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)) or (
                        isinstance(func, ast.Attribute) and func.attr == "getenv" and getattr(func.value, "id", "") == "os"):
                    key = node.args[0]
            elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
                key = node.slice
            elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
                key = node.left
            if key is None:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            names = _strings(key) or (constants.get(key.id) if isinstance(key, ast.Name) else None) or (
                _bound_by_loop(key.id, node, parents, constants) if isinstance(key, ast.Name) else None)
            assert names, f"{where}: cannot tell which environment variable this reads; name it in place or in a constant"
            found.update({name: where for name in names})
    return found


def package_trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))}


def own_variables() -> dict[str, str]:
    found = {}
    for path in OWN_VARIABLE_SOURCES:
        if path.is_file():
            for name in OWN_VARIABLE.findall(path.read_text(encoding="utf-8")):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


@functools.cache
def every_variable() -> dict[str, str]:
    return {**own_variables(), **variables_read(package_trees())}


def test_the_variables_found_include_each_kind_of_read():
    found = every_variable()
    assert {"PROFILING_GUIDE_MODE", "PROFILING_GUIDE_MAX_TRACE_BYTES", "PROFILING_GUIDE_FA4"} <= set(found)  # constants
    assert {"XDG_CONFIG_HOME", "LOCAL_RANK", "WORLD_SIZE", "NVSHMEM_DISABLE_NVLS"} <= set(found)  # loops over names
    assert {"TRITON_INTERPRET", "HF_ENDPOINT", "PROFILING_GUIDE_SCREENSHOTS", "PROFILING_GUIDE_EXAMPLES"} <= set(found)


def test_a_read_through_an_unknown_name_is_refused():
    tree = ast.parse("import os\ndef f(key):\n    return os.environ.get(key)\n")
    with pytest.raises(AssertionError, match="cannot tell"):
        variables_read({ROOT / "x.py": tree})


@pytest.mark.parametrize("variable", sorted(every_variable()))
def test_every_environment_variable_the_guide_reads_is_documented(variable):
    where = every_variable()[variable]
    assert named(documentation(), variable), (
        f"{variable} (read in {where}) is named in no README.md, DEVELOPING.md or docs page: "
        "add it to the table of docs/command_line.md or to DEVELOPING.md")


# ------------------------------------------------------------------ flags
@functools.cache
def flags_defined() -> dict[str, str]:
    """``{"--flag": "file:line"}`` for every flag a command line of ``src/`` or ``scripts/`` defines."""
    found = {}
    for path in sorted([*SRC.rglob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if getattr(node.func, "attr", "") == "add_argument":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                        found.setdefault(arg.value, where)
            for keyword in node.keywords:
                if keyword.arg == "flags" and isinstance(keyword.value, ast.Dict):
                    for key in keyword.value.keys:
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            found.setdefault(f"--{key.value}", where)
    return found


def test_the_flags_found_include_the_probes_own():
    found = flags_defined()
    assert {"--quack", "--check-only", "--no-rates", "--nccl-sweep", "--wait-for-turn"} <= set(found)


@pytest.mark.parametrize("flag", sorted(flags_defined()))
def test_every_flag_a_command_line_defines_is_documented(flag):
    assert named(documentation(), flag), (
        f"{flag} ({flags_defined()[flag]}) is named in no README.md, DEVELOPING.md or docs page")
