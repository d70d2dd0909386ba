"""The models, and loading Liger with the Hub out of reach."""

import sys
import time

import pytest
import torch

from profiling_guide.errors import GuideError
from profiling_guide.models import SimpleGeGLUMLP, load_liger_geglu_mlp, mlp_flops


def test_the_geglu_mlp_is_down_of_gelu_tanh_gate_times_up():
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(8, 16)
    x = torch.randn(3, 8)
    want = mlp.down_proj.weight @ (torch.nn.functional.gelu(mlp.gate_proj.weight @ x.T, approximate="tanh")
                                   * (mlp.up_proj.weight @ x.T))
    torch.testing.assert_close(mlp(x), want.T)


def test_mlp_flops_counts_three_gemms():
    assert mlp_flops(8192, 768, 3072) == 3 * 2 * 8192 * 768 * 3072


def test_liger_falls_back_to_the_package_quickly_when_the_hub_is_unreachable(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    start = time.perf_counter()
    liger = load_liger_geglu_mlp(16, 32, device="meta", dtype=torch.bfloat16)
    assert time.perf_counter() - start < 10
    assert liger.source.startswith("liger-kernel ")
    assert "Hub unreachable" in liger.note and "kernels-community/liger-kernels" in liger.note
    assert type(liger.module).__name__ == "LigerGEGLUMLP"
    assert liger.module.gate_proj.weight.dtype == torch.bfloat16
    assert liger.module.gate_proj.weight.device.type == "meta"


def test_a_failing_get_kernel_call_is_reported_not_raised(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # get_kernel may only look in the (empty) local cache
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    liger = load_liger_geglu_mlp(16, 32, device="meta", use_hub=True)
    assert liger.source.startswith("liger-kernel ")
    assert "not loaded:" in liger.note and "Error" in liger.note


def test_the_liger_layer_takes_the_eager_weights():
    mlp = SimpleGeGLUMLP(16, 32)
    liger = load_liger_geglu_mlp(16, 32, use_hub=False).module
    liger.load_state_dict(mlp.state_dict())
    assert torch.equal(liger.down_proj.weight, mlp.down_proj.weight)


def test_liger_refuses_another_activation_in_one_line():
    with pytest.raises(GuideError, match="only the tanh GELU") as err:
        load_liger_geglu_mlp(16, 32, hidden_act="silu", use_hub=False)
    assert "\n" not in str(err.value)


def test_without_liger_kernel_installed_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers.geglu", None)
    with pytest.raises(GuideError, match=r"pip install 'profiling-guide\[liger\]'"):
        load_liger_geglu_mlp(16, 32, use_hub=False)


def test_liger_refuses_a_hidden_its_kernel_cannot_take_in_one_line():
    with pytest.raises(GuideError, match="--hidden 65536 or less"):
        load_liger_geglu_mlp(8, 65537, use_hub=False)
