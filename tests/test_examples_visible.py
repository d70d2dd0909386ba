"""What a chapter page shows is a program: it defines every name it uses and runs as is.

A reader copies a page's cells (its code less the hidden blocks) into a file:
that file must name nothing it does not define, reach into no private name of
the library, and run as a script. The docs build runs every chapter (once per
GPU); where a page hides nothing, what it runs is what the reader copies. Where
it hides a block (a measurement a deep dive reads), the reader's copy runs the
same code less that block, so it runs too if the block changes nothing the
rest reads: the block binds only names the page does not use, and its calls
act on what the block made, or record (``chapter.measure``, ``chapter.profile``,
which in replay read a recording). ``tests/browser/test_page_output.py`` reads
what each page printed.
"""

import ast
from pathlib import Path

import pytest
# the test extra's pyflakes; a GPU machine running `nox -s tests_gpu` may not have it
pytest.importorskip("pyflakes")
from pyflakes.api import check  # noqa: E402
from pyflakes.reporter import Reporter  # noqa: E402

from visible_code import hidden_blocks, private_names, visible_code

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


#: What a hidden block may call on the page's own objects: the calls that record (in replay, that read).
RECORDS = {"chapter.measure", "chapter.profile"}


def bound_names(statements: list[ast.stmt]) -> set[str]:
    """The names ``statements`` bind at their own level (imports, definitions, assignments), ifs included."""
    names = set()
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n for t in targets for n in target_names(t)}
        elif isinstance(node, ast.If):
            names |= bound_names(node.body) | bound_names(node.orelse)
    return names


def target_names(target: ast.expr) -> list[str]:
    """The names an assignment to ``target`` binds (``a``, ``a, b``), none for ``obj.a`` or ``obj[0]``."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in target_names(t)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def what_a_hidden_block_changes(block: str, visible: str) -> list[str]:
    """What ``block`` does that the ``visible`` code could see: the page's names rebound, its objects acted on."""
    tree = ast.parse(block)
    own = bound_names(tree.body)
    page_names = {n.id for n in ast.walk(ast.parse(visible)) if isinstance(n, ast.Name)}
    found = [f"binds {name}, a name the page uses" for name in sorted(own & page_names)]

    def check(statements):
        for node in statements:
            line = f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}"
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a definition runs nothing yet
            if isinstance(node, ast.If):
                check(node.body)
                check(node.orelse)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(n, (ast.Attribute, ast.Subscript)) for t in targets for n in ast.walk(t)):
                    found.append(f"{line}: assigns into an object")
                value = node.value
            elif isinstance(node, ast.Expr):
                value = node.value
            else:
                found.append(f"{line}: a {type(node).__name__} statement")
                continue
            if isinstance(value, ast.Call) and ast.unparse(value.func) not in RECORDS and root_name(value) not in own:
                found.append(f"{line}: calls on {root_name(value)}, which the block did not make")

    check(tree.body)
    return found


def test_the_hidden_block_check_finds_what_a_block_changes():
    visible = "mlp = make()\nx = mlp(1)\nchapter.downloads()\n"
    assert what_a_hidden_block_changes("from m import f\nh = f(2)\nh.load(mlp.state())\n"
                                       "chapter.measure('a', f)\nif chapter.live:\n    f(h)\n", visible) == []
    found = what_a_hidden_block_changes("x = 3\nmlp.train()\nmlp.w = 1\nfor i in []:\n    pass\n", visible)
    assert [f.split(":")[-1].strip() for f in found] == [
        "binds x, a name the page uses", "calls on mlp, which the block did not make", "assigns into an object",
        "a For statement"]


HIDING = [p for p in EXAMPLES if hidden_blocks(p)]


@pytest.mark.parametrize("example", HIDING or [pytest.param(None, marks=pytest.mark.skip("no page hides a block"))],
                         ids=lambda p: p.stem if p else "none")
def test_a_hidden_block_changes_nothing_the_page_reads(example):
    visible = visible_code(example)
    for block in hidden_blocks(example):
        assert what_a_hidden_block_changes(block, visible) == [], example.name
