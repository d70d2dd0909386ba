"""Shared fixtures: the committed H100 recordings the tests read."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import matplotlib
import pytest

from quick_python import quick_python

matplotlib.use("Agg")
os.environ.setdefault("PROFILING_GUIDE_MODE", "replay")

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "docs" / "recordings" / "nvidia-h100-80gb-hbm3"
H200 = ROOT / "docs" / "recordings" / "nvidia-h200"
GPUS = [H100, H200]


def triton_env(*, interpreted: bool) -> dict:
    """This process's environment for a child Python: Triton's interpreter on or off, the package importable."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpreted:
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def run_pytest_in_fresh_process(test_file: str, *, interpreted: bool, timeout: int) -> None:
    """Run ``test_file``'s tests in a new Python, with Triton's interpreter on or off.

    Triton reads ``TRITON_INTERPRET`` when it is imported, so a file whose
    tests need the other mode than this process's runs itself again in a
    child; the child's output is shown if it fails.
    """
    out = subprocess.run([quick_python(), "-m", "pytest", test_file, "-q", "-p", "no:cacheprovider"],
                         env=triton_env(interpreted=interpreted), capture_output=True, text=True,
                         timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def once_per_run(tmp_path_factory, name: str, make) -> Path:
    """A folder that ``make(folder)`` fills once per test run, shared by the xdist workers.

    The first worker to ask makes it, holding a lock; the others wait for it
    and reuse the folder. If ``make`` fails, the next to ask tries again.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' base folders sit side by side in one
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder


def recording(name: str) -> Path:
    path = H100 / f"{name}.trace.json.gz"
    if not path.is_file():
        pytest.fail(f"missing recording {path}: record it on the H100 (see README)")
    return path


@pytest.fixture(scope="session")
def linear_eager():
    from profiling_guide.trace.model import Trace

    return Trace.load(recording("01_linear.eager"))


@pytest.fixture(scope="session")
def linear_compiled():
    from profiling_guide.trace.model import Trace

    return Trace.load(recording("01_linear.compiled"))


@pytest.fixture(scope="session")
def mlp_eager():
    from profiling_guide.trace.model import Trace

    return Trace.load(recording("02_mlp_eager.eager"))


@pytest.fixture(scope="session")
def mlp_compiled():
    from profiling_guide.trace.model import Trace

    return Trace.load(recording("03_mlp_compile.compiled"))


@pytest.fixture(scope="session")
def mlp_liger():
    from profiling_guide.trace.model import Trace

    return Trace.load(recording("04_liger.liger"))
