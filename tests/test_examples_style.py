"""The examples read as prose with short code: short lines, short cells, no computed sentences.

A page explains in its ``# %%`` comment blocks; its code cells make short
calls whose output is a table or a line of facts. A sentence whose truth
depends on the GPU is a checked claim (:class:`profiling_guide.analysis.expect.Prediction`),
never an f-string that picks its words with a condition.
"""

import ast
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").rglob("plot_*.py"))
MAX_LINE = 100
MAX_CELL_CODE_LINES = 25

# Lines a recording's fingerprint hashes as they are written (the source of a
# function or lambda passed to chapter.record_trace/chapter.measure): reflowing one
# makes the recording stale until it is re-recorded on a GPU. Each entry is
# the start of the line; the test fails when one no longer matches a long
# line, so the list only shrinks.
RECORDED_LONG_LINES: dict[str, list[str]] = {
    "plot_09_attention.py": ["    code=[time_variants, naive_attention"],
    "plot_09_deep_attention.py": ['fa4_run = chapter.measure("fa4", lambda:', '        chosen["naive_inplace"] = (lambda',
                                  "        rows += sweep(variants_for(causal), SEQS",
                                  "    code=[flex_attention_causal, flex_without_block_mask"],
    "plot_10_multi_gpu.py": ['sweep_rows = chapter.measure("nccl_sweep", lambda:'],
}


def long_lines(path: Path) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > MAX_LINE]


def cells(path: Path) -> list[tuple[int, list[str]]]:
    """``(first line number, visible code lines)`` of each ``# %%`` cell.

    Visible code: not blank, not a comment, not inside a
    ``sphinx_gallery_start_ignore``/``end_ignore`` block, not the page's docstring.
    """
    source = path.read_text()
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    skip_until = ast.parse(source).body[0].end_lineno if docstring is not None else 0
    out, hidden = [(1, [])], False
    for n, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        if text.startswith("# %%"):
            out.append((n, []))
        elif text == "# sphinx_gallery_start_ignore":
            hidden = True
        elif text == "# sphinx_gallery_end_ignore":
            hidden = False
        elif n > skip_until and not hidden and text and not text.startswith("#"):
            out[-1][1].append(line)
    return out


def conditional_sentences(path: Path) -> list[int]:
    """Lines where ``Facts(...)`` gets a sentence chosen by a condition.

    ``a if cond else b`` inside the call, or a dict of sentences indexed by a
    verdict (``{"faster": "...", "slower": "..."}[verdict]``).
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name != "Facts":
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for inner in ast.walk(arg):
                if isinstance(inner, ast.IfExp) or (
                        isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Dict)):
                    found.append(inner.lineno)
    return found


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_no_line_is_longer_than_100_characters(example):
    allowed = RECORDED_LONG_LINES.get(example.name, [])
    too_long = [(n, line) for n, line in long_lines(example)
                if not any(line.startswith(start) for start in allowed)]
    assert not too_long, "\n".join(f"{example.name}:{n}: {len(line)} characters" for n, line in too_long)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_recorded_long_lines_are_still_there(example):
    # an entry that matches nothing has been reflowed (after a re-recording): drop it
    lines = [line for _, line in long_lines(example)]
    for start in RECORDED_LONG_LINES.get(example.name, []):
        assert any(line.startswith(start) for line in lines), f"{example.name}: no long line {start!r}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_no_cell_has_more_than_25_lines_of_code(example):
    big = [(n, len(code)) for n, code in cells(example) if len(code) > MAX_CELL_CODE_LINES]
    assert not big, "\n".join(f"{example.name}: the cell at line {n} has {k} lines of code" for n, k in big)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_facts_hold_no_conditional_sentences(example):
    lines = conditional_sentences(example)
    assert not lines, (f"{example.name}: Facts(...) picks a sentence with a condition at line(s) {lines}: "
                       "make it a checked claim (expect.Prediction) or state it in the prose")


def test_the_checks_catch_what_they_look_for(tmp_path):
    page = tmp_path / "plot_99_bad.py"
    page.write_text('"""Doc."""\n\n# %%\n# prose\n\nx = 1\n' + "y = 2\n" * 25 + "# %%\n"
                    + "z = '" + "a" * 100 + "'\n"
                    + 'Facts(f"{a:.1f} µs" + ("faster" if a < b else "slower"))\n'
                    + 'Facts({"tie": "a tie", "faster": "quicker"}[verdict])\n')
    assert [len(code) for _, code in cells(page)] == [0, 26, 3]
    assert [n for n, _ in long_lines(page)] == [33]
    assert conditional_sentences(page) == [34, 35]
