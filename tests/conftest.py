"""Shared fixtures: the committed H100 recordings the tests read."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("PROFILING_GUIDE_MODE", "replay")

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "docs" / "recordings" / "nvidia-h100-80gb-hbm3"
H200 = ROOT / "docs" / "recordings" / "nvidia-h200"
GPUS = [H100, H200]


def recording(name: str) -> Path:
    path = H100 / f"{name}.trace.json.gz"
    if not path.is_file():
        pytest.fail(f"missing recording {path}: record it on the H100 (see README)")
    return path


@pytest.fixture(scope="session")
def linear_eager():
    from profiling_guide.trace import Trace

    return Trace.load(recording("01_linear.eager"))


@pytest.fixture(scope="session")
def linear_compiled():
    from profiling_guide.trace import Trace

    return Trace.load(recording("01_linear.compiled"))


@pytest.fixture(scope="session")
def mlp_eager():
    from profiling_guide.trace import Trace

    return Trace.load(recording("02_mlp_eager.eager"))


@pytest.fixture(scope="session")
def mlp_compiled():
    from profiling_guide.trace import Trace

    return Trace.load(recording("03_mlp_compile.compiled"))


@pytest.fixture(scope="session")
def mlp_liger():
    from profiling_guide.trace import Trace

    return Trace.load(recording("04_liger.liger"))
