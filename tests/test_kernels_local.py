"""Liger through the kernels library, from a repository generated here: no GPU, no Hub."""

import json

import pytest

# the liger extra (kernels, liger-kernel); a GPU machine running `nox -s tests_gpu` may not have it
pytest.importorskip("kernels")
import kernels  # noqa: E402
import kernels.layer.repos  # noqa: E402
import torch
from liger_kernel.transformers.geglu import LigerGEGLUMLP

from profiling_guide.kernels.kernelize import (
    GEGLU_LAYER,
    HubGeGLUMLP,
    kernelize_with_liger,
)
from profiling_guide.kernels.liger_repo import FORWARD_LAYER, VARIANT, local_liger_repo
from profiling_guide.kernels.models import SimpleGeGLUMLP


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


def test_the_hub_layer_is_our_mlp_until_kernelized():
    torch.manual_seed(0)
    mlp, hub = SimpleGeGLUMLP(8, 16), HubGeGLUMLP(8, 16)
    hub.load_state_dict(mlp.state_dict())
    x = torch.randn(3, 8)
    torch.testing.assert_close(hub(x), mlp(x))
    assert HubGeGLUMLP.kernel_layer_name == GEGLU_LAYER


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_kernelize_swaps_in_liger_forward_without_running_it(repo, device_type, monkeypatch):
    # A CUDA mapping is chosen by the GPU's compute capability; without a GPU, say it is an H100's.
    monkeypatch.setattr(kernels.layer.repos, "_find_capability", lambda: 90)
    model = torch.nn.Sequential(HubGeGLUMLP(8, 16, device="meta"))
    assert model[0].forward.__func__ is SimpleGeGLUMLP.forward
    assert kernelize_with_liger(model, device_type, repo=repo) is model
    assert model[0].forward.__func__ is LigerGEGLUMLP.forward
    assert model[0].forward.__qualname__ == "LigerGEGLUMLP.forward"
    assert type(model[0]) is HubGeGLUMLP  # same module, same weights: only forward changed

