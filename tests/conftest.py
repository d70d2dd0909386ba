"""Shared by the tests: the committed recordings they read, Triton's mode, and what runs once.

Triton compiles a kernel, or hands it to its interpreter, as the kernel's
module is imported (``TRITON_INTERPRET=1``). :func:`pytest_configure` decides
the mode of this process before any test module imports a kernel: compiled
where there is a CUDA GPU or where the GPU tests are selected
(``pytest -m gpu``), the interpreter on a machine without a GPU, which is how
the CPU checks the kernels' logic. A ``TRITON_INTERPRET`` the caller set is
kept. Tests that need the other mode run in a fresh process
(:func:`run_pytest_in_fresh_process`).
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import gc
import os
import re
import shutil
import subprocess
from pathlib import Path

# Each pytest-xdist worker shares the machine's cores with the others, but torch's and numpy's thread
# pools size themselves to every core, in each worker and in each child it starts. Oversubscribed, their
# threads spin while they wait for each other: on two cores with two workers that was a third of the
# suite's CPU time. Each worker (and its children) gets its share of the cores, unless the caller chose.
# Set before anything imports numpy or torch, which read these once.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    for _pool in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_pool, str(max(1, len(os.sched_getaffinity(0)) // _WORKERS)))

import matplotlib  # noqa: E402 (after the thread pools' sizes)
import pytest  # noqa: E402

from quick_python import quick_python, share_servers_in  # noqa: E402

matplotlib.use("Agg")
os.environ.setdefault("PROFILING_GUIDE_MODE", "replay")

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "docs" / "recordings" / "nvidia-h100-80gb-hbm3"
H200 = ROOT / "docs" / "recordings" / "nvidia-h200"
GPUS = [H100, H200]


# ------------------------------------------------------------------ Triton's mode
def pytest_configure(config):
    gpu_tests = re.search(r"(?<!not )\bgpu\b", config.option.markexpr or "")
    if "TRITON_INTERPRET" not in os.environ and not gpu_tests and not _cuda_gpu_visible():
        os.environ["TRITON_INTERPRET"] = "1"


def _cuda_gpu_visible() -> bool:
    # Without NVIDIA's driver there is no CUDA GPU, and no need to import torch to ask.
    if not (Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists()):
        return False
    import torch

    return torch.cuda.is_available()


def triton_env(*, interpreted: bool) -> dict:
    """This process's environment for a child Python: Triton's interpreter on or off, the package importable."""
    env = {**os.environ, "TRITON_INTERPRET": "1" if interpreted else "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def run_pytest_in_fresh_process(test_file: str, *args: str, interpreted: bool, timeout: int) -> None:
    """Run ``test_file``'s tests (``args`` may select some) in a new Python, Triton's interpreter on or off.

    The child's output is shown if it fails.
    """
    out = subprocess.run([quick_python(), "-m", "pytest", test_file, *args, "-q", "-p", "no:cacheprovider"],
                         env=triton_env(interpreted=interpreted), capture_output=True, text=True,
                         timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.fixture
def gpu(monkeypatch):
    """Stand in a GPU of a given compute capability for the design choice: ``gpu(9, 0)``."""
    import torch

    def use(major, minor=0, name="a GPU"):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)

    return use


# ------------------------------------------------------------------ once per run
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


# ------------------------------------------------------------------ order on -n N workers
#: Files of many seconds (a whole README block, 512 ranks, an installed wheel, a compile, the interpreted
#: kernels), longest first. They run first, and their tests go one at a time to whichever worker is free,
#: so that no worker starts a long test as the others finish. Every other file goes whole to one worker,
#: which makes its module's fixtures once.
STARTED_FIRST = ("test_readme.py", "test_run_scale.py", "test_installed.py", "test_pingpong_backward.py",
                 "test_pingpong.py", "test_fused_mlp.py", "test_hostile_inputs.py", "test_trace_input.py",
                 "test_bench_nccl.py", "test_hta_crosscheck.py", "test_run_report.py")
#: Tests of those files that share a fixture of seconds (512 ranks reported, the wheel installed, HTA's
#: analysis of every rank): each group goes to one worker, which makes the fixture once while the others
#: work, rather than wait for it.
KEPT_TOGETHER = ("tests/test_run_scale.py::",
                 "tests/test_installed.py::",
                 "tests/test_hta_crosscheck.py::test_time_breakdown_and_overlap_agree_with_hta_on_every_rank")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the marks into each test's unit
def pytest_collection_modifyitems(items):
    """The order above, and the units pytest-xdist hands out (``nox -s tests``: ``--dist loadgroup``).

    Through pytest-xdist's public ``xdist_group`` mark: a group goes whole to one worker, a test
    without one goes alone; ``--no-loadscope-reorder`` keeps this order rather than the largest
    group first. Without pytest-xdist the marks do nothing.
    """
    def rank(item):
        name = item.path.name
        return STARTED_FIRST.index(name) if name in STARTED_FIRST else len(STARTED_FIRST)

    items.sort(key=rank)  # stable: each file keeps its order
    for item in items:
        group = next((group for group in KEPT_TOGETHER if item.nodeid.startswith(group)), None)
        if group is None and item.path.name not in STARTED_FIRST:
            group = item.nodeid.split("::")[0]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's, on the process that hands out the tests
def pytest_xdist_node_collection_finished(node, ids):
    """Stop if ``--dist loadgroup`` lost the groups (a pytest this pytest-xdist does not know): say why."""
    if node.config.getoption("dist") == "loadgroup" and ids and not any("@" in nodeid for nodeid in ids):
        node.config.get_terminal_writer().line(
            "error: pytest-xdist's loadgroup lost the tests' groups with this pytest: install the versions "
            "pyproject.toml's test extra names", red=True)
        pytest.exit("pytest-xdist's loadgroup lost the tests' groups", returncode=4)


# ------------------------------------------------------------------ the cycle collector
# A worker holds millions of objects for as long as it lives: torch, Triton and pandas as imported, the
# traces and fixtures tests share. Each full pass of the cycle collector walked them all again: about
# 18 s of CPU over the suite on two workers. Frozen, the passes skip them. They are frozen after
# collecting the tests, and again as each test file ends (what its fixtures and caches keep), each time
# once the garbage is collected, so none is kept for good.
@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    gc.disable()  # importing the test modules makes objects that all live on: nothing to collect yet
    try:
        return (yield)
    finally:
        gc.enable()
        _collect_and_freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield  # the file's fixtures are finalized in here
    if nextitem is None or nextitem.path != item.path:
        _collect_and_freeze()
    return result


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


# As the process ends, Python's last collection frees all (nanobind says "leaked" otherwise). Unfrozen at
# exit, not as pytest unconfigures: pytest's own collections after that would each walk everything again.
atexit.register(gc.unfreeze)


@pytest.fixture(scope="session", autouse=True)
def _one_quick_python_server_per_run(tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    share_servers_in(root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root)


# ------------------------------------------------------------------ recordings checked by their listed code only
def pytest_terminal_summary(terminalreporter):
    """Name, at the end of every run, the recordings whose run record has no closure fingerprint.

    They are checked by the fingerprint of the code their page lists (a kernel it runs may change unnoticed)
    until they are re-recorded on a GPU; pages never say so, the console does.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import collections
    import json
    import textwrap

    folders: dict[str, collections.Counter] = {}
    for path in sorted((ROOT / "docs" / "recordings").glob("*/*.run.json")):
        try:
            run = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(run, dict) and "closure_fingerprint" not in run:
            folders.setdefault(path.parent.name, collections.Counter())[path.name.split(".")[0]] += 1
    if not folders:
        return
    count = sum(sum(examples.values()) for examples in folders.values())
    terminalreporter.write_sep("-", f"{count} recordings checked by their listed code only")
    terminalreporter.write_line("WARNING: these run records have no closure_fingerprint: an edit to a kernel or "
                                "helper they run would not make them stale. Re-record them on a GPU "
                                "(PROFILING_GUIDE_MODE=live python examples/plot_<example>.py). Recordings per "
                                "example:")
    for folder, examples in folders.items():
        listed = ", ".join(f"{example} {n}" for example, n in examples.items())
        terminalreporter.write_line(textwrap.fill(f"{folder}: {listed}", width=110, subsequent_indent="    "))


# ------------------------------------------------------------------ recorded traces
def recording(name: str, gpu: Path = H100) -> Path:
    path = gpu / f"{name}.trace.json.gz"
    if not path.is_file():
        pytest.fail(f"missing recording {path}: record it on a GPU (see DEVELOPING.md)")
    return path


@functools.cache
def load_trace(path: Path):
    """The committed trace at ``path``, read once per test process: every test shares it, so none may change it."""
    from profiling_guide.trace.model import Trace

    return Trace.load(path)


def _trace_fixture(name: str):
    @pytest.fixture(scope="session")
    def trace():
        return load_trace(recording(name))

    trace.__doc__ = f"The H100 recording {name}."
    return trace


linear_eager = _trace_fixture("01_linear.eager")
linear_compiled = _trace_fixture("01_linear.compiled")
mlp_eager = _trace_fixture("02_mlp_eager.eager")
mlp_compiled = _trace_fixture("03_mlp_compile.compiled")
mlp_liger = _trace_fixture("04_liger.liger")
