"""What a chapter page shows of its code: the script less sphinx-gallery's hidden blocks.

sphinx-gallery leaves out of the page whatever sits between
``# sphinx_gallery_start_ignore`` and ``# sphinx_gallery_end_ignore``; a reader
who copies the page's cells in order gets exactly :func:`visible_code`.
"""

import ast
from pathlib import Path

START, END = "# sphinx_gallery_start_ignore", "# sphinx_gallery_end_ignore"


def visible_code(path: Path) -> str:
    """The chapter's source with its hidden blocks removed, line for line otherwise."""
    kept, hidden = [], False
    for line in path.read_text().splitlines():
        text = line.strip()
        if text == START:
            hidden = True
        elif text == END:
            hidden = False
        elif not hidden:
            kept.append(line)
    return "\n".join(kept) + "\n"


def hidden_blocks(path: Path) -> list[str]:
    """The source of each hidden block of the chapter, in order (empty where the page hides nothing)."""
    blocks, current = [], None
    for line in path.read_text().splitlines():
        text = line.strip()
        if text == START:
            current = []
        elif text == END and current is not None:
            blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


# PyTorch documents its memory snapshot API under these names ("Understanding CUDA Memory
# Usage", https://pytorch.org/docs/stable/torch_cuda_memory.html): the way to take a snapshot.
DOCUMENTED_UNDERSCORED = {"torch.cuda.memory": {"_record_memory_history", "_snapshot", "_dump_snapshot"}}


def private_names(source: str) -> list[str]:
    """``obj._name`` attributes and ``from x import _name`` imports: what a page must not show."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute)
                and node.attr in DOCUMENTED_UNDERSCORED.get(ast.unparse(node.value), ())):
            continue
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def code_share(source: str) -> tuple[int, int]:
    """(code lines, prose lines) after the page's docstring: how much of a page is code."""
    tree = ast.parse(source)
    start = tree.body[0].end_lineno if ast.get_docstring(tree, clean=False) is not None else 0
    lines = [line.strip() for line in source.splitlines()[start:] if line.strip()]
    prose = [line for line in lines if line.startswith("#") and not line.startswith("# %%")]
    code = [line for line in lines if not line.startswith("#")]
    return len(code), len(prose)
