"""Chapter 9's recorded traces: every attention backend's kernels are read as attention, by library and pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling_guide.analysis import attention
from profiling_guide.cli import main as cli_main
from profiling_guide.trace.kernel_names import decode
from profiling_guide.trace.model import Trace

H100 = Path(__file__).resolve().parents[1] / "docs" / "recordings" / "nvidia-h100-80gb-hbm3"
# backend → (the library its fused kernels come from, whether the name says the kernel is causal)
BACKENDS = {"efficient": ("cutlass", None), "flash": ("flash", True), "cudnn": ("cudnn", None),
            "flex": ("triton", None)}


def trace(name: str) -> Trace:
    return Trace.load(H100 / f"{name}.trace.json.gz")


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_fused_backend_runs_one_attention_kernel_forward_and_its_backward_kernels_are_attention_too(backend):
    library, causal = BACKENDS[backend]
    by_pass = attention.per_step(trace(f"09_attention.{backend}"))
    forward = [decode(k.name) for k in by_pass["forward"]]
    assert [(k.kind, k.library, k.direction) for k in forward] == [("attention", library, "fwd")]
    if causal is not None:
        assert forward[0].causal is causal
    backward = [decode(k.name) for k in by_pass["backward"] if decode(k.name).kind == "attention"]
    assert backward and all(k.library == library and k.direction == "bwd" for k in backward)


def test_flashattention_4_kernels_are_read_as_its_own_library_forward_and_backward():
    decoded = [decode(k.name) for k in trace("09b_attention_sweep.fa4_step").steps[0].kernels]
    assert {k.library for k in decoded} == {"flash-attn-4"}
    assert [k.direction for k in decoded] == ["fwd", "bwd", "bwd", "bwd"]
    assert {k.arch for k in decoded if k.short.endswith("sm90")} == {"sm90"}


def test_the_math_backend_is_no_attention_kernel_but_float32_gemms_and_a_softmax():
    decoded = [decode(k.name) for k in trace("09_attention.math").steps[0].kernels]
    assert not any(k.kind == "attention" for k in decoded)
    gemms = [k for k in decoded if k.kind == "gemm"]
    assert gemms and all(k.dtype == "fp32" for k in gemms)


def test_the_out_of_place_mask_copies_the_scores_and_the_in_place_one_does_not():
    assert attention.memcpys_per_pass(trace("09_attention.naive"))["forward"] == 1
    assert attention.memcpys_per_pass(trace("09_attention.naive_inplace"))["forward"] == 0


@pytest.mark.parametrize("backend", ["cudnn", "flex"])
def test_the_report_lists_each_backends_kernels_as_attention(backend, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli_main(["summarize", str(H100 / f"09_attention.{backend}.trace.json.gz"), "--json"]) == 0
    import json

    kinds = {k["kind"] for k in json.loads(capsys.readouterr().out)["kernels"]}
    assert "attention" in kinds
    assert cli_main(["report", str(H100 / f"09_attention.{backend}.trace.json.gz"), "-o", str(out)]) == 0
    assert ">attention<" in out.read_text()


@pytest.mark.parametrize("gpu", ["nvidia-h100-80gb-hbm3", "nvidia-h200"])
def test_the_zero_occupancy_rule_counts_kernels_of_a_block_per_sm_and_names_the_small_ones_apart(gpu):
    from types import SimpleNamespace

    folder = Path(__file__).resolve().parents[1] / "docs" / "recordings" / gpu
    runs = {v: SimpleNamespace(trace=Trace.load(folder / f"09_attention.{v}.trace.json.gz"))
            for v in ("naive", "naive_inplace", "math", "efficient", "flash", "cudnn", "flex")}
    rows = attention.occupancy_rows(runs)
    small = [r for r in rows if (r["blocks_per_sm"] or 0) < 1 and r["occupancy"] == 0]
    counted = [r for r in rows if (r["blocks_per_sm"] or 0) >= 1 and r["occupancy"] == 0]
    _, seen = attention.zero_occupancy_follows_launch(runs)()
    assert seen.startswith(f"of the kernels with at least one block per SM, at 0 %: {len(counted)},")
    # math's one-block fill kernel is at 0 % rightly, and said apart
    assert small and f"Also at 0 %, rightly: {len(small)} with fewer blocks than SMs" in seen
