"""Every shell block of the README runs on a CPU, so its commands cannot drift from the code.

A block whose first line is ``# not run by tests/test_readme.py: <why>`` is
left out (it needs a GPU, installs packages or builds the whole site); the
README states the convention where its first such block stands. The others run
with bash, in replay, from a scratch folder that sees the checkout's
``docs/``, ``examples/``, ``scripts/`` and ``src/`` (so what they write lands
there, not in the checkout), with ``python`` and ``profiling-guide`` this
checkout's.
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


def shell_blocks() -> list[tuple[int, str]]:
    """``(line, text)`` of every shell block of the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def _id(block: tuple[int, str]) -> str:
    line, text = block
    first = next(l for l in text.splitlines() if l.strip() and not l.startswith(SKIP))
    return f"line{line}:{first.split()[0 if not first.startswith(('PYTHONPATH', 'PIP_', 'TRITON')) else 1]}"


def test_the_readme_has_blocks_to_run_and_says_which_it_leaves_out():
    blocks = shell_blocks()
    skipped = [text for _, text in blocks if text.startswith(SKIP)]
    assert len(blocks) >= 10 and 0 < len(skipped) < len(blocks)
    assert all(len(text.splitlines()[0]) > len(SKIP) + 3 for text in skipped), "each skip says why"
    assert SKIP in (ROOT / "README.md").read_text().split("```")[2], "the convention is stated after the first block"


@pytest.mark.parametrize("block", shell_blocks(), ids=_id)
def test_the_readme_block_runs(block, tmp_path):
    line, text = block
    if text.startswith(SKIP):
        pytest.skip(f"README line {line}: {text.splitlines()[0].removeprefix(SKIP).strip()}")
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
    assert result.returncode == 0, f"README line {line}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
