"""Liger through the kernels library, from a repository generated here: no GPU, no Hub."""

import json

import kernels
import pytest
from liger_kernel.transformers.geglu import LigerGEGLUMLP

from profiling_guide.liger_repo import FORWARD_LAYER, VARIANT, local_liger_repo


@pytest.fixture
def repo(tmp_path):
    return local_liger_repo(tmp_path)


def test_the_repository_has_the_layout_kernels_reads(repo):
    variant = repo / "build" / VARIANT
    assert sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file()) == [
        "liger_kernels/__init__.py", "liger_kernels/layers.py", "metadata.json"]
    assert json.loads((variant / "metadata.json").read_text())["name"] == "liger-kernels"


def test_the_repository_is_written_once_and_reused(tmp_path):
    repo = local_liger_repo(tmp_path)
    stamp = (repo / "build" / VARIANT / "metadata.json").stat().st_mtime_ns
    assert local_liger_repo(tmp_path) == repo
    assert (repo / "build" / VARIANT / "metadata.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [repo.name]  # no leftover temporary folder


def test_get_local_kernel_serves_liger_kernels_own_class(repo):
    liger = kernels.get_local_kernel(repo)
    assert liger.layers.LigerGEGLUMLP is LigerGEGLUMLP
    assert getattr(liger.layers, FORWARD_LAYER).forward is LigerGEGLUMLP.forward

