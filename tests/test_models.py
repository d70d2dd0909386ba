"""The models, and loading Liger: through kernels live, without kernels or the network in replay."""

import socket
import sys
import time

import pytest
import torch
# the liger extra; a GPU machine running `nox -s tests_gpu` may not have it (these tests are CPU ones)
LigerGEGLUMLP = pytest.importorskip("liger_kernel.transformers.geglu").LigerGEGLUMLP

from profiling_guide.errors import GuideError
from profiling_guide.kernels import models
from profiling_guide.kernels.models import (
    SimpleGeGLUMLP,
    load_liger_geglu_mlp,
    mlp_flops,
)


def test_the_geglu_mlp_is_down_of_gelu_tanh_gate_times_up():
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(8, 16)
    x = torch.randn(3, 8)
    want = mlp.down_proj.weight @ (torch.nn.functional.gelu(mlp.gate_proj.weight @ x.T, approximate="tanh")
                                   * (mlp.up_proj.weight @ x.T))
    torch.testing.assert_close(mlp(x), want.T)


def test_mlp_flops_counts_three_gemms():
    assert mlp_flops(8192, 768, 3072) == 3 * 2 * 8192 * 768 * 3072


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    # The local kernel repository is written under the cache directory: keep it out of $HOME.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PROFILING_GUIDE_HUB", raising=False)
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)


def _fail(*args, **kwargs):
    raise AssertionError("called")


def test_live_liger_comes_through_kernels_from_the_local_repository_by_default(monkeypatch):
    import kernels

    monkeypatch.setattr(kernels, "get_kernel", _fail)  # the Hub is only tried when asked for
    monkeypatch.setattr(models, "hub_reachable", _fail)
    liger = load_liger_geglu_mlp(16, 32, device="meta", dtype=torch.bfloat16)
    assert liger.source == "local-repo"
    assert "kernels.get_local_kernel" in liger.note and "PROFILING_GUIDE_HUB=1" in liger.note
    assert type(liger.module) is LigerGEGLUMLP
    assert liger.module.gate_proj.weight.dtype == torch.bfloat16
    assert liger.module.gate_proj.weight.device.type == "meta"


def test_an_unreachable_hub_falls_back_to_the_local_repository_quickly(monkeypatch):
    monkeypatch.setenv("PROFILING_GUIDE_HUB", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    start = time.perf_counter()
    liger = load_liger_geglu_mlp(16, 32, device="meta")
    assert time.perf_counter() - start < 10
    assert liger.source == "local-repo"
    assert "kernels-community/liger-kernels: Hub unreachable" in liger.note


def test_a_failing_get_kernel_call_is_reported_not_raised(monkeypatch):
    import kernels

    def no_hub(*args, **kwargs):
        raise ValueError("could not verify publisher trust status")

    monkeypatch.setattr(kernels, "get_kernel", no_hub)
    liger = load_liger_geglu_mlp(16, 32, device="meta", use_hub=True)
    assert liger.source == "local-repo"
    assert "Hub failed: ValueError" in liger.note


def test_replay_opens_no_socket_and_calls_nothing_in_kernels(monkeypatch):
    import kernels

    monkeypatch.setattr(socket.socket, "connect", _fail)
    monkeypatch.setattr(socket, "create_connection", _fail)
    for name in kernels.__all__:
        if callable(getattr(kernels, name)):
            monkeypatch.setattr(kernels, name, _fail)
    monkeypatch.setattr("profiling_guide.kernels.liger_repo.local_liger_repo", _fail)
    monkeypatch.setenv("PROFILING_GUIDE_HUB", "1")  # even when the Hub is allowed
    liger = load_liger_geglu_mlp(16, 32, device="meta", dtype=torch.bfloat16, offline=True)
    assert liger.source.startswith("liger-kernel ")
    assert "replay: no kernels call" in liger.note
    assert type(liger.module) is LigerGEGLUMLP
    assert liger.module.gate_proj.weight.device.type == "meta"


def test_live_without_the_kernels_library_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "kernels", None)
    with pytest.raises(GuideError, match=r"kernels library is not installed.*pip install") as err:
        load_liger_geglu_mlp(16, 32, device="meta")
    assert "\n" not in str(err.value)
    assert load_liger_geglu_mlp(16, 32, device="meta", offline=True).source.startswith("liger-kernel ")


def test_the_liger_layer_takes_the_eager_weights():
    mlp = SimpleGeGLUMLP(16, 32)
    liger = load_liger_geglu_mlp(16, 32, offline=True).module
    liger.load_state_dict(mlp.state_dict())
    assert torch.equal(liger.down_proj.weight, mlp.down_proj.weight)


def test_liger_refuses_another_activation_in_one_line():
    with pytest.raises(GuideError, match="only the tanh GELU") as err:
        load_liger_geglu_mlp(16, 32, hidden_act="silu", offline=True)
    assert "\n" not in str(err.value)


def test_without_liger_kernel_installed_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers.geglu", None)
    for offline in (True, False):
        with pytest.raises(GuideError, match=r"liger-kernel package is not .*pip install 'profiling-guide\[liger\]'"):
            load_liger_geglu_mlp(16, 32, offline=offline)


def test_liger_refuses_a_hidden_its_kernel_cannot_take_in_one_line():
    with pytest.raises(GuideError, match="--hidden 65536 or less"):
        load_liger_geglu_mlp(8, 65537, offline=True)
