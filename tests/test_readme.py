"""Every shell block of the README, the contributor guide and the site's command pages runs on a CPU.

So their commands cannot drift from the code, nor a command moved from one of
these files to another. A block whose first line is
``# not run by tests/test_readme.py: <why>`` is left out (it needs a GPU,
installs packages or builds the whole site); the README states the convention
where its first such block stands, and so does each other file. The others run
with bash, in replay, from a scratch folder that sees the checkout's
``docs/``, ``examples/``, ``scripts/`` and ``src/`` (so what they write lands
there, not in the checkout), with ``python`` and ``profiling-guide`` this
checkout's.

The README's first block is how to start: install nox, then the test command
CI runs (``.ci/run``), with nothing before it (nox gives a machine without a
GPU torch's CPU wheel by itself); checked against ``.ci/run``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from quick_python import quick_python

ROOT = Path(__file__).resolve().parents[1]
SKIP = "# not run by tests/test_readme.py:"
BLOCK = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", re.M | re.S)
#: The files whose shell blocks run: the front door, the contributor guide, the site's pages of commands.
DOCUMENTS = ("README.md", "DEVELOPING.md", "docs/command_line.md", "docs/benchmark.md")


def shell_blocks(document: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every shell block of ``document`` (a path from the repository's root)."""
    text = (ROOT / document).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def every_block() -> list[tuple[str, int, str]]:
    return [(document, line, text) for document in DOCUMENTS for line, text in shell_blocks(document)]


def _id(block: tuple[str, int, str]) -> str:
    document, line, text = block
    first = next(l for l in text.splitlines() if l.strip() and not l.startswith(SKIP))
    words = first.split()
    word = words[1] if first.startswith(("PYTHONPATH", "PIP_", "TRITON", "PROFILING_GUIDE_")) else words[0]
    return f"{document}:line{line}:{word}"


def test_the_readme_has_blocks_to_run_and_says_which_it_leaves_out():
    blocks = shell_blocks("README.md")
    skipped = [text for _, text in blocks if text.startswith(SKIP)]
    assert len(blocks) >= 4 and 0 < len(skipped) < len(blocks)
    assert SKIP in (ROOT / "README.md").read_text().split("```")[2], "the convention is stated after the first block"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_each_document_runs_blocks_and_says_why_it_leaves_one_out(document):
    blocks = shell_blocks(document)
    skipped = [text for _, text in blocks if text.startswith(SKIP)]
    assert len(skipped) < len(blocks), f"{document}: no block of it runs"
    assert all(len(text.splitlines()[0]) > len(SKIP) + 3 for text in skipped), f"{document}: each skip says why"
    prose = "".join((ROOT / document).read_text(encoding="utf-8").split("```")[::2])
    assert f"`{SKIP} <why>`" in prose, f"{document} does not state the convention in its prose"
    # A marker anywhere but a block's first line would leave the block running, against its word.
    assert all(SKIP not in text.partition("\n")[2] for _, text in blocks), f"{document}: a marker below a first line"


def test_the_readme_starts_with_the_test_command_ci_runs():
    """The first command block runs what CI runs, with nothing before it: nox picks torch's build by itself."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    test_command = next(l.strip() for l in ci if l.strip().startswith("nox -s tests"))
    assert test_command == "nox -s tests", f".ci/run runs {test_command!r}: show that in the README"
    first = [l.split("  #")[0].strip() for l in shell_blocks("README.md")[0][1].splitlines()
             if l.strip() and not l.startswith("#")]
    assert first[:2] == ["pip install nox uv", test_command], f"the README's first commands are {first[:2]}"
    assert not any("PIP_CONSTRAINT" in l for l in ci), ".ci/run gives pip a constraint the README does not"
    assert "README's test command" in "\n".join(ci), ".ci/run no longer says it runs the README's test command"


@pytest.mark.parametrize("block", every_block(), ids=_id)
def test_the_readme_block_runs(block, tmp_path):
    document, line, text = block
    if text.startswith(SKIP):
        pytest.skip(f"{document} line {line}: {text.splitlines()[0].removeprefix(SKIP).strip()}")
    for name in ("docs", "examples", "scripts", "src"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    # Scripts, not links: a link to a virtual environment's python starts outside that environment.
    # The quick python (tests/quick_python.py) runs each command as a fresh one would, without
    # importing torch again, nor its compiler for a block that runs the chapters (some compile).
    python = quick_python(compiler="examples/" in text)
    for name, command in (("python", ""), ("python3", ""), ("profiling-guide", " -m profiling_guide.cli")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{python}"{command} "$@"\n')
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
           "PROFILING_GUIDE_MODE": "replay", "MPLBACKEND": "Agg"}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=1200)
    assert result.returncode == 0, f"{document} line {line}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
