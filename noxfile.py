"""Sessions: ``nox -s tests`` lints (ruff) and runs the test suite; ``nox -s docs`` builds the site.

The docs build measures live on a CUDA GPU and replays the committed
recordings elsewhere (``PROFILING_GUIDE_MODE`` = auto | live | replay). It
builds the site once per GPU listed in ``docs/_static/switcher.json``: the
default (H100) into ``docs/_build/html``, the H200 into ``docs/_build/html/h200``.

torch is not pinned: a GPU machine keeps (or gets) its CUDA build. On a machine
without a CUDA GPU (no NVIDIA driver), ``tests`` and ``docs`` install torch's CPU
wheel by themselves (``.ci/constraints-cpu.txt``), not the multi-GB CUDA build.

Other sessions:

* ``quick``: ruff, then the fast unit tests (``QUICK_TESTS``), in under a
  minute on two cores once its environment exists: the loop before a commit.
* ``tests_gpu``: on a machine with a CUDA GPU, every test marked ``gpu`` (the compiled
  kernels), with that machine's Python.
* ``links``: every relative link and image of the built site resolves (no network).
* ``browser``: the built site in headless Chromium (Debian's ``chromium``).
  Both read an existing ``docs/_build/html``: run ``nox -s docs`` first.
* ``wheelhouse``: on a connected machine, download into ``wheelhouse/`` every
  wheel the docs build needs on the GPU machine (Python 3.12, manylinux
  x86_64), except torch, triton and the nvidia-* / cuda-* wheels it already has.
* ``docs_offline``: on the GPU machine with no package index, build the site
  live from ``wheelhouse/``, using the machine's preinstalled CUDA torch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import nox

nox.options.sessions = ["tests", "docs"]
nox.options.reuse_existing_virtualenvs = True
# uv makes each environment in seconds where pip took minutes (torch alone is over a GB installed);
# without uv installed, virtualenv and pip (sessions that run pip themselves ask for them).
nox.options.default_venv_backend = "uv|virtualenv"

# Every Python process of a session imports torch: pytest's workers, the tests' subprocesses (the CLI, a wheel
# installed), sphinx and the examples it runs. Where the shell sets PYTHONDONTWRITEBYTECODE (CI machines often do),
# none of them writes torch's bytecode, and each compiles its modules again: 12 s an import on two cores instead of
# 5. The sessions let the first one write it, into the session's own environment.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

ROOT = Path(__file__).parent
SITE = ROOT / "docs" / "_build" / "html"
OFFLINE_GUARD = ROOT / "docs" / "_offline"  # a sitecustomize that refuses connections off this machine
WHEELHOUSE = ROOT / "wheelhouse"

SPHINX_ARGS = ("-W", "--keep-going", "-j", "auto", "-b", "html")
# One build per GPU: "version" is its recordings folder, "url" its folder in the site.
SWITCHER = ROOT / "docs" / "_static" / "switcher.json"

# The GPU machine (Python 3.12, glibc 2.39): pip matches manylinux_2_N tags
# exactly, so name each N a wheel may carry.
GPU_PYTHON = "3.12"
GPU_PLATFORMS = [
    *(f"manylinux_2_{n}_x86_64" for n in (39, 38, 36, 35, 34, 31, 28, 27, 26, 24, 17)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
# What the GPU machine's Python already has, as `pip list` showed it there
# (torch 2.11.0+cu130, Python 3.12.3, Ubuntu 24.04). The wheelhouse is resolved
# against exactly these versions and leaves them out: torch and triton are
# multi-GB, and with numpy, pandas, matplotlib, pillow and the rest carried too
# the wheelhouse would be about 120 MiB instead of about 60. setuptools is not
# listed: pip's isolated build of this package needs it in the wheelhouse.
# If the GPU image changes, update this from `python3 -m pip list` there.
GPU_IMAGE = dict(line.split("==") for line in """
    anyio==4.15.1 attrs==26.1.0 certifi==2026.7.22 charset-normalizer==3.5.1 click==8.5.0
    contourpy==1.4.0 cycler==0.12.1 filelock==3.32.5 fonttools==4.66.1 fsspec==2026.7.0 h11==0.16.0
    hf-xet==1.6.0 huggingface-hub==1.33.0 humanize==4.16.0 idna==3.19 jinja2==3.1.6
    kiwisolver==1.5.1 markdown-it-py==4.2.0 markupsafe==3.0.3 matplotlib==3.11.2 mdurl==0.1.2
    numpy==2.5.2 packaging==26.3 pandas==3.0.6 pillow==12.3.0 psutil==7.2.2 pygments==2.21.0
    pyparsing==3.3.3 python-dateutil==2.9.0.post0 pyyaml==6.0.3 requests==2.34.2 rich==15.0.0
    tabulate==0.10.0 torch==2.11.0 tqdm==4.70.1 triton==3.6.0
    typing-extensions==4.16.0 urllib3==2.7.0 zipp==4.1.0
""".split())
# Never in the wheelhouse, whatever resolves: the GPU stack.
GPU_STACK = re.compile(r"^(torch|triton|pytorch-triton|nvidia-.*|cuda-.*)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: torch's CPU wheel, for a machine without a CUDA GPU.
CPU_TORCH = ROOT / ".ci" / "constraints-cpu.txt"


def cuda_driver_loaded() -> bool:
    """Whether NVIDIA's driver is loaded here: without it there is no CUDA GPU to give torch's CUDA build."""
    return Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists()


def install_with_torch(session: nox.Session, *args: str) -> None:
    """``session.install(*args)``, with torch's CPU wheel where no CUDA GPU is (a GPU machine keeps its CUDA build)."""
    cpu = [] if cuda_driver_loaded() else ["--constraint", str(CPU_TORCH)]
    session.install(*cpu, *args, env=uv_sees_pips_links(session))


def uv_sees_pips_links(session: nox.Session) -> dict:
    """For uv, the wheels pip is configured to find (``find-links``) and the local package indexes it is given
    besides PyPI (``extra-index-url`` on ``file://``): uv reads none of pip's configuration, and a machine may keep
    torch's CPU wheel and Triton there, where PyPI has only torch's CUDA build and a download of hundreds of MB."""
    if session.venv_backend != "uv":
        return {}
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout

    def pip_setting(name: str) -> list[str]:
        return list(dict.fromkeys(value for line in config.splitlines()
                                  if re.match(rf"^(global|install|:env:)\.{name}=", line)
                                  for value in line.split("=", 1)[1].strip("'\"").split()))

    env = {}
    if (links := pip_setting("find-links")) and not os.environ.get("UV_FIND_LINKS"):
        env["UV_FIND_LINKS"] = ",".join(links)
    local = [url for url in pip_setting("extra-index-url") if url.startswith("file://")]
    if local and not os.environ.get("UV_EXTRA_INDEX_URL"):
        env["UV_EXTRA_INDEX_URL"] = " ".join(local)
        # as pip does: the best version any index has, not the first index's (a local index may hold older ones)
        env.setdefault("UV_INDEX_STRATEGY", os.environ.get("UV_INDEX_STRATEGY", "unsafe-best-match"))
    return env


#: What ``nox -s quick`` runs, about 850 tests in under a minute on two cores: the command line, the files it
#: reads and writes (hostile ones too), the trace model, the kernel-name decoders and the analysis' building
#: blocks. Left to ``nox -s tests``: the examples and what replays a chapter, the docs' commands and pages, the
#: Triton kernels (in its interpreter) and the closures that read them, the verdict corpora, HTA's
#: cross-checks, the whole-run reports, and what starts torchrun or installs the package; the browser tests
#: need a built site (``nox -s browser``). Keep it under a minute: a slow test belongs to ``nox -s tests``.
QUICK_TESTS = [f"tests/test_{name}.py" for name in """
    cli cli_output report_cli hostile_inputs files trace trace_input kernel_names kernel_names_hostile
    collectives predicates backward compare timeline interactive_timeline clocks training tables launches
    measure_pace verdict expect attention_traces vocabulary named_paths replay_input recordings console
""".split()]
RUFF = ("ruff", "check", "src", "tests")  # the rules are pyproject.toml's [tool.ruff.lint]


@nox.session
def tests(session: nox.Session) -> None:
    """Lint, then run the tests on every core (without a GPU, Triton's kernels run in its interpreter: tests/conftest.py)."""
    # pip and setuptools: tests/test_installed.py builds and installs the wheel as a user's pip does (offline)
    install_with_torch(session, "-e", ".[test,liger,docs,hta]", "pip", "setuptools>=70.1")
    session.run(*RUFF)  # a finding fails the session, as a failing test does
    # The browser tests read a built site and need Chromium: `nox -s browser`.
    # pytest-xdist's public loadgroup scheduler, in the order tests/conftest.py gives (its xdist_group marks)
    session.run("pytest", "--ignore=tests/browser", "-n", "auto", "--dist", "loadgroup", "--no-loadscope-reorder",
                *session.posargs)


@nox.session
def quick(session: nox.Session) -> None:
    """Lint, then the fast unit tests (QUICK_TESTS) on every core: under a minute, for the loop before a commit."""
    install_with_torch(session, "-e", ".[test]")
    session.run(*RUFF)
    session.run("pytest", "-n", "auto", "--dist", "loadgroup", "--no-loadscope-reorder", *QUICK_TESTS, *session.posargs)


@nox.session(python=False)
def tests_gpu(session: nox.Session) -> None:
    """Run every GPU test (marked gpu) with this machine's Python and its CUDA torch: the compiled kernels.

    No virtual environment: the GPU machine has no package index, and its
    Python already holds torch, Triton and pytest (a test module that needs an
    extra it lacks, liger or pyflakes, holds no GPU test and is skipped). The
    first run compiles and autotunes every design of the fused MLP at every
    shape, mostly CPU work: eight pytest-xdist workers share the GPU (give
    ``-- -n N`` for another count; the tests check results, not timings).
    """
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    workers = [] if any(a.startswith(("-n", "--numprocesses")) for a in session.posargs) else ["-n", "8"]
    session.run("python", "-m", "pytest", "-m", "gpu", "tests", "-p", "no:cacheprovider", *workers, *session.posargs,
                env=env)


# ------------------------------------------------------------------ the site
MODE_PROBE = r"""
import os, sys
mode = os.environ.get("PROFILING_GUIDE_MODE", "auto").strip().lower() or "auto"
try:
    import torch
except ImportError as err:
    print(f"error: torch does not import ({err})"); sys.exit()
cuda = torch.cuda.is_available()
gpu = torch.cuda.get_device_name(0) if cuda else None
if mode not in ("auto", "live", "replay"):
    print(f"error: PROFILING_GUIDE_MODE={mode!r} is not a mode: use auto, live or replay")
elif mode == "live" and not cuda:
    print(f"error: PROFILING_GUIDE_MODE=live but torch {torch.__version__} sees no CUDA GPU: "
          "run on a GPU machine, or use PROFILING_GUIDE_MODE=replay")
elif mode == "replay" or not cuda:
    why = "PROFILING_GUIDE_MODE=replay" if mode == "replay" else "no CUDA GPU visible"
    print(f"replay: {why}: replaying the recordings in docs/recordings (torch {torch.__version__})")
else:
    from profiling_guide.pages.recordings import gpu_slug
    print(f"live {gpu_slug(gpu)}: CUDA GPU visible ({gpu}, torch {torch.__version__}): measuring live "
          "and refreshing the recordings in docs/recordings")
"""


def start_mode_probe(session: nox.Session) -> subprocess.Popen:
    """The mode probe, started now in the session's Python: it needs torch and this checkout's src/ only."""
    probe = Path(session.create_tmp()) / "mode_probe.py"
    probe.write_text(MODE_PROBE)
    env = os.environ | {"PATH": session.bin + os.pathsep + os.environ.get("PATH", ""),
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(["python", str(probe)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)


def announce_mode(session: nox.Session, probe: subprocess.Popen | None = None) -> str | None:
    """Say in one line whether this build measures live or replays; stop if it cannot do what was asked.

    ``probe``: a :func:`start_mode_probe` already under way (it runs while pip installs).
    Returns the recordings folder of the GPU that measures live, or None in replay.
    """
    if probe is None:
        probe = start_mode_probe(session)
    out, _ = probe.communicate()
    line = out.strip().splitlines()[-1] if out.strip() else "error: the mode probe printed nothing"
    if line.startswith("error: "):
        session.error(line.removeprefix("error: "))
    session.log(line)
    live = re.match(r"live (\S+):", line)
    return live.group(1) if live else None


def build_site(session: nox.Session, sphinx: tuple[str, ...], probe: subprocess.Popen | None = None) -> None:
    """Build the site once per GPU of docs/_static/switcher.json: the live build (or the default one) first.

    A build measures live only for the GPU this machine has (on a GPU with no
    build of its own, the default build does); the others replay their GPU's
    recordings. Where nothing measures live, a stale recording stops the build
    (these builds are where CI replays every chapter, once per GPU). The first build runs here, from docs/; every other build runs
    at the same time, in a process of its own (niced while a live build
    measures), from a copy of docs/ (.docs-<gpu>/, so sphinx-gallery's generated
    pages do not collide): a replay measures nothing, and each build reads and
    publishes its own GPU's recordings only. A build that lives in a subfolder
    of the site is built outside it (docs/_build/h200/html: myst-nb writes its
    notebooks next to the output folder, which would put them inside the
    default build) and copied in once all are done.
    """
    live = announce_mode(session, probe)
    builds = json.loads(SWITCHER.read_text())
    live_gpu = live if live in [b["version"] for b in builds] else builds[0]["version"]
    # the live build (or the default one) runs here; the others beside it
    builds.sort(key=lambda b: b["version"] != live_gpu if live else False)
    beside = []
    for n, build in enumerate(builds):
        env = {"PROFILING_GUIDE_GPU": build["version"]}
        if live and build["version"] != live_gpu:
            env["PROFILING_GUIDE_MODE"] = "replay"
        if not live:
            # Nothing here measures: a stale recording stops the build, as it would publish numbers that
            # the code no longer makes (PROFILING_GUIDE_STALE=warn builds anyway, each page saying so).
            env["PROFILING_GUIDE_STALE"] = os.environ.get("PROFILING_GUIDE_STALE") or "error"
        if not live or build["version"] != live_gpu:
            # Replay reads only the repository: any connection off this machine stops the build.
            env |= {"PROFILING_GUIDE_NO_NETWORK": "1",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(OFFLINE_GUARD), os.environ.get("PYTHONPATH")]))}
        folder = Path(build["url"])
        out = SITE if folder == Path(".") else SITE.parent / folder / "html"
        how = "measures live" if live and build["version"] == live_gpu else "replays its recordings"
        where = (SITE / folder).relative_to(ROOT)
        if n == 0:
            session.log(f"{build['name']} build ({build['version']}) {how}: {where}")
            foreground = (out, folder, env)
            continue
        session.log(f"{build['name']} build ({build['version']}) {how}, beside the first: {where} "
                    f"(its log: {_beside_log(out).relative_to(ROOT)})")
        beside.append((build, out, folder, _start_beside(session, sphinx, build, out, env, niced=bool(live))))
    out, folder, env = foreground
    try:
        session.run(*sphinx, *SPHINX_ARGS, "docs", str(out.relative_to(ROOT)), *session.posargs, env=env)
        for build, beside_out, _, job in beside:
            if job.wait() != 0:
                log = _beside_log(beside_out)
                tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-40:])
                session.error(f"the {build['name']} build failed; the end of {log.relative_to(ROOT)}:\n{tail}")
            session.log(f"{build['name']} build ({build['version']}) done")
    finally:
        for *_, job in beside:
            if job.poll() is None:
                job.kill()
                job.wait()
    for built, where in [(out, folder), *((o, f) for _, o, f, _ in beside)]:
        _copy_into_site(built, where)


def _beside_log(out: Path) -> Path:
    return out.parent / "build.log"


def _mirror_source(version: str) -> Path:
    """A source folder for a build beside another: a copy of docs/ without what the builds generate.

    It sits beside docs/ (at the same depth), so the relative paths in the
    pages (``../../src/...`` in a literalinclude) reach the same files. The
    examples read their recordings from docs/recordings/ itself.
    """
    mirror = ROOT / f".docs-{version}"
    shutil.rmtree(mirror, ignore_errors=True)
    shutil.copytree(ROOT / "docs", mirror,
                    ignore=shutil.ignore_patterns("_build", "auto_examples", "jupyter_execute", "sg_execution_times.rst"))
    return mirror


def _start_beside(session: nox.Session, sphinx: tuple[str, ...], build: dict, out: Path, env: dict,
                  *, niced: bool) -> subprocess.Popen:
    source = _mirror_source(build["version"])
    log = _beside_log(out)
    log.parent.mkdir(parents=True, exist_ok=True)
    bin_dir = session.bin  # the session's venv: its python and sphinx-build
    full_env = os.environ | {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
                             "VIRTUAL_ENV": str(Path(bin_dir).parent)} | env
    cmd = [*sphinx, *SPHINX_ARGS, str(source.relative_to(ROOT)), str(out.relative_to(ROOT)), *session.posargs]
    cmd[0] = shutil.which(cmd[0], path=full_env["PATH"]) or cmd[0]
    with open(log, "w") as handle:
        return subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=handle, stderr=subprocess.STDOUT,
                                preexec_fn=(lambda: os.nice(10)) if niced else None)


def _copy_into_site(out: Path, folder: Path) -> None:
    if out != SITE:
        shutil.rmtree(SITE / folder, ignore_errors=True)
        shutil.copytree(out, SITE / folder, ignore=shutil.ignore_patterns(".doctrees"))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into docs/_build/html, and each other GPU's into its subfolder (warnings are errors)."""
    install_with_torch(session, "-e", ".[docs,liger]")
    build_site(session, ("sphinx-build",))


def require_site(session: nox.Session) -> None:
    if not (SITE / "index.html").is_file():
        session.error(f"{SITE.relative_to(ROOT)} is missing: run nox -s docs first")


@nox.session
def links(session: nox.Session) -> None:
    """Check that every relative href/src (and #anchor) of the built site resolves; no network."""
    require_site(session)
    session.install("pytest")
    session.run("pytest", "--confcutdir=tests/browser", "tests/browser/test_links.py", *session.posargs)


@nox.session
def browser(session: nox.Session) -> None:
    """Load every page of the built site in headless Chromium (/usr/bin/chromium) and check it."""
    require_site(session)
    # the package without torch: the tests read its pattern of page logs, and write reports of
    # hostile traces (pandas and matplotlib) to open in Chromium
    # pytest and pytest-xdist as the test extra pins them (pyproject.toml: the groups below need both)
    session.install("pytest>=8,<9.2", "pytest-xdist>=3.8,<4", "playwright", "pandas", "matplotlib")
    session.install("--no-deps", "-e", ".")
    # Two workers, each with its Chromium: a page load mostly waits (on the page's scripts, its images, the
    # server), so two overlap on two cores. The tests that read one page's visit at one size go to one worker
    # (their xdist_group marks, tests/browser/site_visits.py), which loads it once.
    session.run("pytest", "--confcutdir=tests/browser", "tests/browser", "-n", "2", "--dist", "loadgroup",
                *session.posargs)


# ------------------------------------------------------ the air-gapped rebuild
def _requirements() -> list[str]:
    """The project's dependencies and its docs and liger extras, from pyproject.toml."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    return [*project["dependencies"], *extras.get("docs", []), *extras.get("liger", [])]


def _stub_wheel(folder: Path, name: str, version: str) -> None:
    """An empty wheel that stands for a package the GPU machine already has.

    Resolving against it, pip picks what works with the preinstalled version and
    never looks at (or downloads) the real wheel: torch's alone is several GB.
    """
    import zipfile

    stem = f"{name.replace('-', '_')}-{version}"
    dist = f"{stem}.dist-info"
    files = {  # no Requires-Dist: what the machine has, it has with its dependencies
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: noxfile\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


@nox.session(venv_backend="virtualenv")  # runs pip itself
def wheelhouse(session: nox.Session) -> None:
    """Download the docs build's wheels for the GPU machine into wheelhouse/ (run on a connected machine)."""
    session.install("pip>=24")
    roots = [*_requirements(), "nox", "setuptools>=68"]
    target = ["--only-binary=:all:", "--python-version", GPU_PYTHON, "--implementation", "cp",
              *(arg for p in GPU_PLATFORMS for arg in ("--platform", p))]
    with tempfile.TemporaryDirectory() as tmp:
        stubs, report_path = Path(tmp) / "stubs", Path(tmp) / "report.json"
        stubs.mkdir()
        for name, version in GPU_IMAGE.items():
            _stub_wheel(stubs, name, f"{version}+gpuimage")
        constraints = Path(tmp) / "gpu-image.txt"
        constraints.write_text("".join(f"{name}=={version}+gpuimage\n" for name, version in GPU_IMAGE.items()))
        # Resolve for the GPU machine without downloading anything: pip reads
        # each wheel's metadata only, and what the machine has are the stubs
        # above (the local version label keeps PyPI's files of the same
        # version out of the choice).
        session.run("python", "-m", "pip", "install", "--dry-run", "--ignore-installed",
                    "--target", str(Path(tmp) / "unused"), "--report", str(report_path),
                    "--find-links", str(stubs), "--constraint", str(constraints), *target, *roots)
        report = json.loads(report_path.read_text())
    needed = {item["metadata"]["name"]: item["metadata"]["version"] for item in report["install"]
              if _canonical(item["metadata"]["name"]) not in GPU_IMAGE}
    session.log(f"{len(needed)} distributions for the GPU machine; {len(GPU_IMAGE)} more are preinstalled "
                "there (GPU_IMAGE in noxfile.py: torch, triton, numpy, pandas, matplotlib, ...)")
    if WHEELHOUSE.exists():
        shutil.rmtree(WHEELHOUSE)
    WHEELHOUSE.mkdir()
    session.run("python", "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(WHEELHOUSE), *target,
                *(f"{name}=={version}" for name, version in sorted(needed.items())))
    leaked = sorted(p.name for p in WHEELHOUSE.iterdir() if GPU_STACK.match(_canonical(p.name.split("-")[0])))
    if leaked:
        session.error(f"wheelhouse/ holds packages the GPU machine has: {', '.join(leaked)}")
    size = sum(p.stat().st_size for p in WHEELHOUSE.iterdir())
    (WHEELHOUSE / "requirements.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(needed.items())))
    session.log(f"wheelhouse/: {len(needed)} wheels, {size / 2**20:.1f} MiB. Copy it next to the checkout on "
                "the GPU machine, then: python3 -m pip install --no-index --find-links wheelhouse nox "
                "&& nox -s docs_offline")


def _missing_distribution(pip_output: str) -> str | None:
    for pattern in (r"No matching distribution found for ([^\s]+)",
                    r"Could not find a version that satisfies the requirement ([^\s]+)"):
        found = re.search(pattern, pip_output)
        if found:
            return found.group(1)
    return None


def _inherit_parent_venv(session: nox.Session) -> None:
    """Let the session's venv see the packages of the venv nox runs in.

    ``--system-site-packages`` reaches the *base* interpreter's packages only;
    on the GPU machine torch lives in a virtual environment (the ``python3``
    that holds PyTorch), so that environment's site-packages is added as well,
    after the session's own.
    """
    if sys.prefix == sys.base_prefix:
        return
    parent = sysconfig.get_paths()["purelib"]
    site = session.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                       silent=True).strip().splitlines()[-1]
    Path(site, "_profiling_guide_parent_env.pth").write_text(parent + "\n")


@nox.session(venv_backend="virtualenv", venv_params=["--system-site-packages"])  # runs pip itself
def docs_offline(session: nox.Session) -> None:
    """Build the site on a machine with no package index, from wheelhouse/ and the preinstalled CUDA torch."""
    if not WHEELHOUSE.is_dir() or not any(WHEELHOUSE.glob("*.whl")):
        session.error("wheelhouse/ is missing or empty: run `nox -s wheelhouse` on a connected machine "
                      "and copy wheelhouse/ into this checkout")
    _inherit_parent_venv(session)
    probe = start_mode_probe(session)  # torch is already here: it need not wait for pip
    # --no-compile: byte-compiling 85 packages takes longer than compiling, on import, the modules used
    out = session.run("python", "-m", "pip", "install", "--no-index", "--no-compile", "--find-links",
                      str(WHEELHOUSE), "-e", ".[docs,liger]", silent=True, success_codes=[0, 1]) or ""
    # pip also prints "ERROR: pip's dependency resolver does not currently take
    # into account ..." about packages it did not install, and still succeeds.
    failures = [line for line in out.splitlines()
                if line.startswith("ERROR:") and "dependency resolver does not currently" not in line]
    if failures:
        missing = _missing_distribution(out)
        if missing and _canonical(re.split(r"[<>=!~;\[ ]", missing)[0]) in GPU_IMAGE:
            session.error(f"{missing} should be preinstalled here (GPU_IMAGE in noxfile.py) but this Python "
                          f"lacks it: run nox with the Python that holds torch, or add it to the wheelhouse")
        if missing:
            session.error(f"wheelhouse/ has no wheel for {missing}: run `nox -s wheelhouse` on a connected "
                          "machine and copy the new wheelhouse/ here")
        session.error(f"pip could not install from wheelhouse/: {failures[0]}")
    session.log("installed the docs build from wheelhouse/ (torch, triton: preinstalled)")
    # The same builds as `nox -s docs`; through this venv's python, which may
    # take sphinx from the machine's packages rather than install it here.
    build_site(session, ("python", "-m", "sphinx"), probe)
