"""After ``pip install`` of the repository, a chapter copied anywhere replays; a missing extra is one line.

The wheel is built from a copy of what a fresh clone holds (``pyproject.toml``,
``setup.py``, ``README.md``, ``src/``, ``docs/recordings/``) and installed
into a folder of its own. A chapter replays the same from it as from the
checkout (which the docs build runs, once per GPU) when the installed copy
holds every file of the package and every recording, and finds them itself:
checked here, with a chapter's imports run from an empty folder, without
replaying it again.

With the optional packages made unimportable, a chapter whose page names an
extra stops with one line naming it (before it reads a recording); every
other chapter's imports all succeed (what they import imports no extra).
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


def module_imports(example: Path) -> str:
    """The chapter's import statements at its top level, in order: what it imports, without running it."""
    tree = ast.parse(example.read_text())
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


def test_the_wheel_carries_every_recording(installed):
    shipped = installed / "profiling_guide" / "recordings"
    assert sorted(p.relative_to(shipped).as_posix() for p in shipped.glob("*/*")) == RECORDINGS
    assert len(RECORDINGS) > 100
    root = subprocess.run([quick_python(), "-c", "from profiling_guide.pages.recordings import default_root; "
                           "print(default_root())"], capture_output=True, text=True, cwd=installed,
                          env={**os.environ, "PYTHONPATH": str(installed)}).stdout.strip()
    assert Path(root) == shipped  # the installed copy decides, not a checkout


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and "recordings" not in p.relative_to(folder).parts[:1])


def test_the_wheel_carries_every_file_of_the_package(installed):
    """What a chapter reads from the package (its modules, the report's page template, ...) is all installed."""
    source = ROOT / "src" / "profiling_guide"
    assert _files(installed / "profiling_guide") == _files(source)


def test_a_chapter_in_an_empty_folder_imports_from_the_installed_copy(installed, tmp_path):
    chapter = ROOT / "examples" / "plot_02_mlp_eager.py"
    script = module_imports(chapter) + (
        "\nimport profiling_guide\nfrom profiling_guide.pages.recordings import default_root"
        "\nprint(profiling_guide.__file__)\nprint(default_root())\n")
    base = {k: v for k, v in os.environ.items() if k != "PROFILING_GUIDE_RECORDINGS"}
    result = subprocess.run([quick_python(), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**base, "PYTHONPATH": str(installed), "PROFILING_GUIDE_MODE": "replay"})
    assert result.returncode == 0, result.stderr[-3000:]
    package, recordings = result.stdout.split()[-2:]
    assert Path(package).is_relative_to(installed) and Path(recordings) == installed / "profiling_guide" / "recordings"


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


# With the extras unimportable (the blocker, from this process's start), in one process: each chapter whose
# page names an extra to replay is run as ``python chapter.py`` would run it (tests/quick_python.py run_here),
# copied into a folder of its own; it stops at that extra, before it reads a recording. Every other chapter
# only runs its imports (the docs build replays it). What each did goes to results.json.
WITHOUT_EXTRAS = """
import ast, contextlib, io, json, shutil, sys, traceback
from pathlib import Path
from quick_python import run_here
out, results = Path(sys.argv[1]), {}
for arg in sys.argv[2:]:
    how, chapter = arg.split(":", 1)
    chapter = Path(chapter)
    folder = out / chapter.stem
    folder.mkdir()
    shutil.copy(chapter, folder / chapter.name)
    if how == "run":
        done = run_here(folder / chapter.name, cwd=folder)
        results[chapter.stem] = {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
        continue
    tree = ast.parse(chapter.read_text())
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    err = io.StringIO()
    try:
        exec(compile(ast.Module(body=imports, type_ignores=[]), str(chapter), "exec"), {"__name__": "__main__"})
        code = 0
    except BaseException:
        traceback.print_exc(file=err)
        code = 1
    results[chapter.stem] = {"returncode": code, "stdout": "", "stderr": err.getvalue()}
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
    chapters = [f"{'run' if needs(example)[0] else 'imports'}:{example}" for example in EXAMPLES]
    done = subprocess.run([quick_python(), "-c", WITHOUT_EXTRAS, str(folder), *chapters], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_without_the_optional_packages_a_chapter_imports_or_names_its_extra_in_one_line(example, without_extras):
    result = subprocess.CompletedProcess(example.name, **without_extras[example.stem])
    replay_extras, _ = needs(example)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if not replay_extras:
        assert result.returncode == 0, result.stderr[-3000:]
        return
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    named = re.findall(r"pip install 'profiling-guide\[(\w+)\]'", result.stderr)
    assert result.stderr.startswith("error: ") and named and set(named) <= replay_extras, result.stderr
    assert "Replayed from" not in result.stdout.split("\n", 1)[-1], "it replayed before it stopped"
