"""Chapter 9's attention variants compute attention, on the CPU, against float64."""

from __future__ import annotations

import math

import pytest
import torch

from profiling_guide.kernels.attention import (
    attention_flops,
    causal_mask,
    naive_attention,
    naive_attention_inplace,
    sdpa,
    sdpa_backend,
)
from profiling_guide.errors import GuideError
from profiling_guide.measure.attention import AttentionShape, error_vs_fp64, make_inputs


def reference(q, k, v, causal):
    q, k, v = (t.double() for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        scores = scores.masked_fill(causal_mask(q.size(-2)), float("-inf"))
    return torch.softmax(scores, -1) @ v


@pytest.mark.parametrize("seq", [1, 7, 64])
def test_naive_attention_with_the_mask_out_of_place_or_in_place_matches_float64(seq):
    q, k, v = (torch.randn(2, 3, seq, 16) for _ in range(3))
    mask = causal_mask(seq)
    ref = reference(q, k, v, causal=True)
    for attend in (naive_attention, naive_attention_inplace):
        out = attend(q, k, v, mask).double()
        assert (out - ref).norm() / ref.norm() < 1e-5


def test_the_math_backend_on_the_cpu_matches_the_naive_version_causal_or_not():
    q, k, v = (torch.randn(2, 2, 33, 8) for _ in range(3))
    for causal in (True, False):
        out = sdpa("math", causal=causal)(q, k, v).double()
        ref = reference(q, k, v, causal)
        assert (out - ref).norm() / ref.norm() < 1e-5


def test_the_in_place_variant_keeps_autograd_working():
    q, k, v = (torch.randn(1, 2, 16, 8, requires_grad=True) for _ in range(3))
    for attend in (naive_attention, naive_attention_inplace):
        grads = torch.autograd.grad(attend(q, k, v, causal_mask(16)).sum(), (q, k, v))
        assert all(torch.isfinite(g).all() for g in grads)


def test_an_unknown_backend_is_one_clear_error():
    with pytest.raises(GuideError, match="no SDPA backend 'fast'"):
        sdpa_backend("fast")


def test_causal_flops_count_only_the_keys_each_query_sees():
    full = attention_flops(8, 16, 1024, 64, causal=False)
    causal = attention_flops(8, 16, 1024, 64, causal=True)
    assert full["forward"] == 4 * 8 * 16 * 64 * 1024 * 1024
    assert causal["forward"] == full["forward"] * (1025 / 2) / 1024
    assert causal["backward"] == 2.5 * causal["forward"]


def test_the_float64_check_sees_a_wrong_answer_and_passes_a_right_one():
    shape = AttentionShape(1, 4, 32, 8, dtype=torch.float32)
    q, k, v, _ = make_inputs(shape, "bhsd", 1, device="cpu")[0]
    right = error_vs_fp64(lambda q, k, v: sdpa("math")(q, k, v), "bhsd", q, k, v, causal=True)
    wrong = error_vs_fp64(lambda q, k, v: sdpa("math", causal=False)(q, k, v), "bhsd", q, k, v, causal=True)
    assert right < 1e-5 < 0.05 < wrong


def test_the_float64_check_reads_the_bshd_layout_of_flashattention_4():
    shape = AttentionShape(1, 4, 32, 8, dtype=torch.float32)
    q, k, v, _ = make_inputs(shape, "bshd", 1, device="cpu")[0]
    assert q.shape == (1, 32, 4, 8)

    def bshd_attention(q, k, v):
        return sdpa("math")(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)

    assert error_vs_fp64(bshd_attention, "bshd", q, k, v, causal=True) < 1e-5
