"""After ``pip install`` of the repository, a chapter copied anywhere replays; a missing extra is one line.

The wheel is built from a copy of what a fresh clone holds (``pyproject.toml``,
``setup.py``, ``README.md``, ``src/``, ``docs/recordings/``) and installed
into a folder of its own, which a chapter copied into an empty folder then
runs from, in replay. Each chapter is also run with the optional packages
made unimportable: it replays, or it stops with one line naming the extra
its page says it needs.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import once_per_run
from profiling_guide.errors import EXTRAS
from quick_python import quick_python

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))
RECORDINGS = sorted(p.relative_to(ROOT / "docs" / "recordings").as_posix()
                    for p in (ROOT / "docs" / "recordings").glob("*/*") if p.name.endswith((".json", ".json.gz")))

# Makes the named top-level modules unimportable, as if their packages were not installed.
BLOCKER = """
import os, sys
class _NotInstalled:
    names = set(os.environ["PG_NOT_INSTALLED"].split(","))
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """The package as ``pip install /path/to/clone`` installs it (not editable), in a folder of its own.

    Installed once per test run, whichever xdist worker comes first.
    """
    return once_per_run(tmp_path_factory, "installed", _pip_install_a_clone)


def _pip_install_a_clone(target: Path) -> None:
    clone = target.parent / "clone"
    shutil.rmtree(clone, ignore_errors=True)
    clone.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    shutil.copytree(ROOT / "src", clone / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "docs" / "recordings", clone / "docs" / "recordings")
    # With a setuptools that builds wheels here, offline; else pip fetches one for the build.
    isolation = ["--no-build-isolation"] if _setuptools_builds_wheels() else []
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                             *isolation, "--target", str(target), str(clone)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


def _setuptools_builds_wheels() -> bool:
    if importlib.util.find_spec("setuptools") is None:
        return False
    import setuptools

    return tuple(int(p) for p in setuptools.__version__.split(".")[:2]) >= (70, 1)  # bdist_wheel built in


def _run_copied(example: Path, folder: Path, pythonpath: str, **env) -> subprocess.CompletedProcess:
    shutil.copy(example, folder / example.name)
    # No PROFILING_GUIDE_RECORDINGS: the chapter finds its recordings itself.
    base = {k: v for k, v in os.environ.items() if k != "PROFILING_GUIDE_RECORDINGS"}
    return subprocess.run([quick_python(), example.name], cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**base, "PYTHONPATH": pythonpath, "PROFILING_GUIDE_MODE": "replay",
                               "MPLBACKEND": "Agg", **env})


def test_the_wheel_carries_every_recording(installed):
    shipped = installed / "profiling_guide" / "recordings"
    assert sorted(p.relative_to(shipped).as_posix() for p in shipped.glob("*/*")) == RECORDINGS
    assert len(RECORDINGS) > 100
    root = subprocess.run([quick_python(), "-c", "from profiling_guide.pages.recordings import default_root; "
                           "print(default_root())"], capture_output=True, text=True, cwd=installed,
                          env={**os.environ, "PYTHONPATH": str(installed)}).stdout.strip()
    assert Path(root) == shipped  # the installed copy decides, not a checkout


def test_a_chapter_copied_into_an_empty_folder_replays_after_pip_install(installed, tmp_path):
    result = _run_copied(ROOT / "examples" / "plot_02_mlp_eager.py", tmp_path, str(installed),
                         PROFILING_GUIDE_STALE="error")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Replayed from a recording made on NVIDIA" in result.stdout
    assert "Traceback" not in result.stderr


def needs(example: Path) -> tuple[set[str], set[str]]:
    """The extras a chapter's page says it needs: (to replay, live only), from its ``*Needs:*`` line."""
    doc = ast.get_docstring(ast.parse(example.read_text()))
    line = " ".join(doc.split("*Needs:*", 1)[1].split("\n\n")[0].split())
    replay, _, live = line.partition("; live")
    extras = lambda text: set(re.findall(r"profiling-guide\[([\w,-]+)\]", text))  # noqa: E731
    return extras(replay), extras(live)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_chapter_names_its_extra_near_its_top(example):
    doc = ast.get_docstring(ast.parse(example.read_text()))
    assert "*Needs:*" in doc, "one short line near the top: *Needs:* ..."
    declared = set().union(*needs(example))
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert declared <= set(extras), declared - set(extras)
    assert set(EXTRAS.values()) <= set(extras)


# Runs each chapter given, copied into a folder of its own, as ``python chapter.py`` would
# (tests/quick_python.py run_here), one after the other in this one process, whose optional
# packages the blocker made unimportable from its start; writes what each did to results.json.
WITHOUT_EXTRAS = """
import json, shutil, sys
from pathlib import Path
from quick_python import run_here
out, results = Path(sys.argv[1]), {}
for chapter in map(Path, sys.argv[2:]):
    folder = out / chapter.stem
    folder.mkdir()
    shutil.copy(chapter, folder / chapter.name)
    done = run_here(folder / chapter.name, cwd=folder)
    results[chapter.stem] = {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
(out / "results.json").write_text(json.dumps(results))
"""


@pytest.fixture(scope="session")
def without_extras(tmp_path_factory) -> dict:
    """What every chapter did with the optional packages unimportable: ``{stem: returncode, stdout, stderr}``.

    One fresh process runs them all, once per test run: the extras stay
    unimportable in it throughout, so no chapter can find one another imported.
    """
    folder = once_per_run(tmp_path_factory, "without_extras", _run_without_extras)
    return json.loads((folder / "results.json").read_text())


def _run_without_extras(folder: Path) -> None:
    blocker = folder / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    base = {k: v for k, v in os.environ.items() if k != "PROFILING_GUIDE_RECORDINGS"}
    env = {**base, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT / "src"), str(Path(__file__).parent)]),
           "PROFILING_GUIDE_MODE": "replay", "MPLBACKEND": "Agg", "PG_NOT_INSTALLED": ",".join(EXTRAS)}
    done = subprocess.run([quick_python(), "-c", WITHOUT_EXTRAS, str(folder), *map(str, EXAMPLES)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_without_the_optional_packages_a_chapter_replays_or_names_its_extra_in_one_line(example, without_extras):
    result = subprocess.CompletedProcess(example.name, **without_extras[example.stem])
    replay_extras, _ = needs(example)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if not replay_extras:
        assert result.returncode == 0, result.stderr[-3000:]
        return
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    named = re.findall(r"pip install 'profiling-guide\[(\w+)\]'", result.stderr)
    assert result.stderr.startswith("error: ") and named and set(named) <= replay_extras, result.stderr
