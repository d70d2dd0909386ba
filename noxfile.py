"""Sessions: ``nox -s tests`` runs the test suite; ``nox -s docs`` builds the site.

The docs build measures live on a CUDA GPU and replays the committed
recordings elsewhere (``PROFILING_GUIDE_MODE`` = auto | live | replay).

torch is not pinned: a GPU machine keeps (or gets) its CUDA build. To choose a
build, give pip a constraints file, as CI does:
``PIP_CONSTRAINT=.ci/constraints-cpu.txt nox -s tests``.
"""

import os

import nox

nox.options.sessions = ["tests", "docs"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the tests (CPU only; Triton kernels under TRITON_INTERPRET=1)."""
    session.install("-e", ".[test,liger,docs]")
    session.run("pytest", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into docs/_build/html (warnings are errors)."""
    session.install("-e", ".[docs,liger]")
    mode = os.environ.get("PROFILING_GUIDE_MODE", "auto")
    session.log(f"PROFILING_GUIDE_MODE={mode} (auto: live with CUDA, replay without)")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html", *session.posargs)
