"""The examples read as prose with short code: short lines, short cells, no computed sentences.

A page explains in its ``# %%`` comment blocks; its code cells make short
calls whose output is a table or a line of facts. A sentence whose truth
depends on the GPU is a checked claim (:class:`profiling_guide.analysis.expect.Prediction`),
never an f-string that picks its words with a condition.
"""

import ast
from collections import Counter
from pathlib import Path

import pytest
from visible_code import visible_code

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


def repeated_statements(source: str) -> list[int]:
    """First lines of statements, or runs of statements, that repeat the ones just before them.

    In one block, statements ``A B A B`` (or ``A A``) show the second copy twice:
    comments and blank lines between the copies do not count, since a reader who
    copies the page's cells would run them twice.
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not (isinstance(block, list) and block and isinstance(block[0], ast.stmt)):
                continue
            dumps = [ast.dump(stmt) for stmt in block]
            for i in range(len(block)):
                for k in range(1, (len(block) - i) // 2 + 1):
                    if dumps[i:i + k] == dumps[i + k:i + 2 * k]:
                        found.add(block[i + k].lineno)
    return sorted(found)


#: The Chapter methods that measure, profile or read one recording, named by their first argument.
RECORDING_CALLS = {"profile", "profile_own", "measure", "record_trace", "capture", "run_ranks", "read"}


def repeated_recordings(source: str) -> list[str]:
    """Recording names a page asks one chapter for more than once (a literal name in each call).

    Names built at run time (a loop's f-string) are checked when the page runs:
    :class:`~profiling_guide.pages.chapter.Chapter` refuses a second request.
    """
    asked = Counter()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in RECORDING_CALLS and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            asked[ast.unparse(node.func.value), node.args[0].value] += 1
    return [f"{who}.{name}" for (who, name), n in asked.items() if n > 1]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_no_statement_shows_twice_in_a_row(example):
    lines = repeated_statements(visible_code(example))
    assert not lines, f"{example.name}: the statement at line(s) {lines} repeats the one before it"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_no_recording_is_measured_or_read_twice(example):
    twice = repeated_recordings(example.read_text())
    assert not twice, f"{example.name}: asked more than once for {', '.join(twice)}"


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
    twice = ('x = chapter.measure("capture", f)\n# a comment\n\nx = chapter.measure("capture", f)\n'
             'for v in vs:\n    show(v)\n    show(v)\nshow(v)\n'
             'y = chapter.profile_own("padded", g, label="a")\nprint(y)\n'
             'z = chapter.profile_own("padded", g, label="a")\nother.read("padded")\n'
             'rows = payback(m)\nshow(rows)\n\nrows = payback(m)\nshow(rows)\n')
    assert repeated_statements(twice) == [4, 7, 16]
    assert repeated_recordings(twice) == ["chapter.capture", "chapter.padded"]
