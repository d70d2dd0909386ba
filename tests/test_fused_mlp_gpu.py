"""The fused GeGLU kernels compiled for a CUDA GPU: every design against a float64 reference, CUDA-graph replay, host cost.

Marked ``gpu`` and skipped where no CUDA GPU is visible. On a GPU machine::

    pytest -m gpu tests/test_fused_mlp_gpu.py     # or: python -m profiling_guide.kernels.fused_mlp --check

The first run autotunes every design at every shape below: a few minutes.
``tests/conftest.py`` leaves Triton's interpreter off where a CUDA GPU is
visible or ``-m gpu`` is given, so these tests run the compiled kernels; with
``TRITON_INTERPRET=1`` set by hand they are skipped and say so.
"""

import pytest
import torch
import torch.nn.functional as F

import profiling_guide.kernels.fused_mlp as fm
from profiling_guide.errors import GuideError
from profiling_guide.kernels import geglu_backward as gb
from profiling_guide.kernels.geglu_kernels import INTERPRETED
from profiling_guide.kernels.models import SimpleGeGLUMLP
from profiling_guide.measure.timing import cpu_issue_time

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: these tests run the compiled kernels"),
    pytest.mark.skipif(INTERPRETED, reason="TRITON_INTERPRET=1 is set: unset it to run the compiled kernels"),
]

CHECK_SHAPES = [  # (M, dim, hidden): ragged edges, one row, the guide's shapes, a Llama-sized layer
    (1, 768, 3072),
    (7, 64, 128),
    (17, 100, 200),
    (64, 768, 3072),
    (333, 320, 1000),
    (1000, 1000, 520),
    (1024, 768, 3072),
    (2048, 4096, 11008),
    (4097, 768, 3072),
    (8192, 768, 3072),
    (8192, 768, 8192),
    (12345, 200, 777),
    (32768, 768, 3072),
]
FP32_CHECK_SHAPES = [(17, 100, 200), (1000, 768, 3072)]
CASES = [(design, dtype, shape) for dtype in (torch.bfloat16, torch.float16) for shape in CHECK_SHAPES
         for design in fm.DESIGNS] + [(design, torch.float32, shape) for shape in FP32_CHECK_SHAPES
                                      for design in fm.DESIGNS]  # fmt: skip
GUIDE_SHAPE, GUIDE_HIDDEN = (64, 128, 768), 3072  # batch, seq, dim; bf16


def inputs(M, dim, hidden, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, dim, device="cuda", dtype=dtype, generator=gen)
    # nn.Linear's scale, so g and u are O(1) as in a real model
    wg = torch.randn(hidden, dim, device="cuda", dtype=dtype, generator=gen) / dim**0.5
    wu = torch.randn(hidden, dim, device="cuda", dtype=dtype, generator=gen) / dim**0.5
    return x, wg, wu


def case_id(case):
    design, dtype, (M, dim, hidden) = case
    return f"{design}-{str(dtype).removeprefix('torch.')}-M{M}-dim{dim}-hidden{hidden}"


@pytest.mark.parametrize("design,dtype,shape", CASES, ids=[case_id(c) for c in CASES])
def test_every_design_matches_the_float64_reference(design, dtype, shape):
    M, dim, hidden = shape
    x, wg, wu = inputs(M, dim, hidden, dtype)
    packed = fm.pack_gate_up(wg, wu) if design in fm.PACKED_DESIGNS else None
    if design in fm.TMA_DESIGNS and fm._tma_problem(x, hidden):
        # rows not 16-byte aligned: the TMA unit cannot read them, and the call says so
        with pytest.raises(GuideError, match="16-byte aligned.*use 'packed'"):
            fm.geglu(x, wg, wu, design=design, packed_weight=packed)
        return
    if design == "pingpong" and dtype == torch.float32:
        with pytest.raises(GuideError, match="bfloat16 or float16.*use 'packed-tma'"):
            fm.geglu(x, wg, wu, design=design, packed_weight=packed)
        return
    h = fm.geglu(x, wg, wu, design=design, packed_weight=packed)
    assert h.shape == (M, hidden) and h.dtype == dtype
    err = fm.max_rel_error(h, fm.reference_h(x, wg, wu))
    assert err <= fm.CHECK_TOLERANCE[dtype], f"max rel error {err:.2e} with {fm.tuned_config(design, x, hidden)}"


SAVING_CASES = [(design, dtype, shape) for dtype in (torch.bfloat16, torch.float16) for shape in CHECK_SHAPES
                for design in fm.PACKED_DESIGNS]  # fmt: skip


@pytest.mark.parametrize("design,dtype,shape", SAVING_CASES, ids=[case_id(c) for c in SAVING_CASES])
def test_a_training_forward_stores_g_and_u_as_computed_and_the_same_h(design, dtype, shape):
    M, dim, hidden = shape
    x, wg, wu = inputs(M, dim, hidden, dtype)
    if design in fm.TMA_DESIGNS and fm._tma_problem(x, hidden):
        pytest.skip("rows the TMA unit cannot address: refused, as tested above")
    packed = fm.pack_gate_up(wg, wu)
    h, gu = fm.geglu(x, wg, wu, design=design, packed_weight=packed, save_gate_up=True)
    assert gu.shape == (M, 2 * hidden) and gu.dtype == dtype
    # storing g and u changes nothing about h: the same accumulators, the same rounding
    assert torch.equal(h, fm.geglu(x, wg, wu, design=design, packed_weight=packed)), "h differs when g and u are saved"
    x64 = x.double()
    for name, got, w in (("g", gu[:, :hidden], wg), ("u", gu[:, hidden:], wu)):
        err = fm.max_rel_error(got, x64 @ w.double().T)
        assert err <= fm.CHECK_TOLERANCE[dtype], f"{name}: max rel error {err:.2e}"


@pytest.mark.parametrize("design", [*fm.DESIGNS, fm.AUTO])
def test_the_whole_module_matches_the_float64_mlp(design):
    torch.manual_seed(0)
    shape, hidden = (4, 333, 768), 3072
    fused = fm.FusedGeGLUMLP(shape[-1], hidden, device="cuda", dtype=torch.bfloat16, design=design)
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        y = fused(x)
    h = fm.reference_h(x.reshape(-1, shape[-1]), fused.gate_proj.weight, fused.up_proj.weight)
    want = F.linear(h, fused.down_proj.weight.double()).reshape(shape)
    assert fm.max_rel_error(y, want) <= 2e-2  # two bf16 roundings (h, y) and a bf16 GEMM
    assert fused.design_ran == (fm.choose_design(x.reshape(-1, shape[-1]), hidden) if design == fm.AUTO else design)
    assert fm.tuned_config(fused.design_ran, x.reshape(-1, shape[-1]), hidden) is not None, "autotuned, so cached"


def test_auto_runs_the_ping_pong_kernel_on_this_hopper_gpu():
    x = torch.empty(8192, 768, device="cuda", dtype=torch.bfloat16)
    want = "pingpong" if torch.cuda.get_device_capability()[0] == 9 else "packed-tma"
    assert fm.choose_design(x, 3072) == want


@pytest.mark.parametrize("consumers", [1, 2])
@pytest.mark.parametrize("shape", [(1000, 768, 3072), (8192, 768, 3072), (257, 264, 520)])
def test_one_or_two_consumer_warpgroups_give_the_same_h(consumers, shape):
    """The ping-pong schedule changes who computes a tile, never its sums: the same bits with one consumer or two."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the ping-pong kernel issues Hopper's wgmma")
    from profiling_guide.kernels import geglu_pingpong as gp

    M, dim, hidden = shape
    x, wg, wu = inputs(M, dim, hidden, torch.bfloat16)
    packed = fm.pack_gate_up(wg, wu)
    config = triton_config({**gp.DEFAULT_CONFIG.kwargs, "CONSUMERS": consumers})
    h = gp.geglu_pingpong(x, packed, config=config)
    assert torch.equal(h, gp.geglu_pingpong(x, packed)), "the default config has two consumers"
    assert fm.max_rel_error(h, fm.reference_h(x, wg, wu)) <= fm.CHECK_TOLERANCE[torch.bfloat16]


def triton_config(kwargs):
    import triton

    return triton.Config(kwargs, num_warps=4)


@pytest.mark.parametrize("design", [*fm.DESIGNS, fm.AUTO])
def test_a_captured_forward_replays_bitwise_what_a_direct_call_gives(design):
    torch.manual_seed(0)
    fused = fm.FusedGeGLUMLP(768, 3072, device="cuda", dtype=torch.bfloat16, design=design)
    x, other = (torch.randn(4, 333, 768, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        direct_x, direct_other = fused(x), fused(other)
    captured = fused.captured(x)
    assert torch.equal(captured(other), direct_other), "a new input is copied in before the replay"
    assert torch.equal(captured(x), direct_x)
    assert torch.equal(captured(captured.static_x), direct_x), "the static input itself: no copy"
    with pytest.raises(GuideError, match="captured for inputs"):
        captured(x[:2])


def test_a_captured_forward_costs_the_cpu_no_more_than_eager():
    torch.manual_seed(0)
    eager = SimpleGeGLUMLP(GUIDE_SHAPE[-1], GUIDE_HIDDEN, device="cuda", dtype=torch.bfloat16)
    fused = fm.FusedGeGLUMLP.from_mlp(eager)
    x = torch.randn(*GUIDE_SHAPE, device="cuda", dtype=torch.bfloat16)
    captured = fused.captured(x)
    with torch.no_grad():
        eager_cpu = cpu_issue_time(lambda: eager(x))
        captured_cpu = cpu_issue_time(lambda: captured(x))  # x is not the static input: the copy is included
    assert captured_cpu.median <= eager_cpu.median, f"captured {captured_cpu:.1f} µs, eager {eager_cpu:.1f} µs"


# ---------------------------------------------------------------- training: the fused backward
BACKWARD_CASES = [(design, dtype, shape) for dtype in (torch.bfloat16, torch.float16) for shape in CHECK_SHAPES
                  for design in gb.DESIGNS]  # fmt: skip


@pytest.mark.parametrize("design,dtype,shape", BACKWARD_CASES, ids=[case_id(c) for c in BACKWARD_CASES])
def test_the_backward_epilogue_matches_autograd_in_float64(design, dtype, shape):
    from profiling_guide.kernels.geglu_backward import geglu_backward, reference_grads

    M, dim, hidden = shape
    if design in ("packed-tma", "pingpong") and (dim % 8 or hidden % 8):
        pytest.skip("rows the TMA unit cannot address: the module runs 'packed' there")
    gen = torch.Generator(device="cuda").manual_seed(M)
    dy = torch.randn(M, dim, device="cuda", dtype=dtype, generator=gen)
    wd = torch.randn(dim, hidden, device="cuda", dtype=dtype, generator=gen) / hidden**0.5
    gu = 2 * torch.randn(M, 2 * hidden, device="cuda", dtype=dtype, generator=gen)
    dgu = geglu_backward(dy, wd, gu, design=design)
    dg, du = reference_grads(dy.double() @ wd.double(), gu[:, :hidden], gu[:, hidden:])
    for name, got, want in (("dg", dgu[:, :hidden], dg), ("du", dgu[:, hidden:], du)):
        err = fm.max_rel_error(got, want)
        assert err <= fm.CHECK_TOLERANCE[dtype], f"{name}: max rel error {err:.2e}"


def test_the_backward_pingpong_gives_the_same_bits_with_one_consumer_or_other_tiles():
    from profiling_guide.kernels import geglu_backward_pingpong as bp
    from profiling_guide.kernels.geglu_backward import geglu_backward

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon ping-pong kernel runs on Hopper only")
    gen = torch.Generator(device="cuda").manual_seed(1)
    M, dim, hidden = 1000, 768, 3072
    dy = torch.randn(M, dim, device="cuda", dtype=torch.bfloat16, generator=gen)
    wd = torch.randn(dim, hidden, device="cuda", dtype=torch.bfloat16, generator=gen) / hidden**0.5
    gu = 2 * torch.randn(M, 2 * hidden, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = geglu_backward(dy, wd, gu, design="pingpong")
    # the same K steps in the same order per element of dh: the schedule and the tiles change no bit
    for config in (bp._config(128, 64, 64, 1, 6, consumers=1), bp._config(128, 64, 64, 4, 5, sub_n=64),
                   bp._config(128, 128, 64, 8, 3), bp._config(128, 128, 64, 1, 6, gu_bufs=1),
                   bp._config(128, 128, 64, 1, 5, gu_bufs=2), bp._config(128, 128, 64, 1, 4, gu_bufs=3)):  # fmt: skip
        assert torch.equal(geglu_backward(dy, wd, gu, design="pingpong", config=config), want), config.kwargs


TRAIN_SHAPES = [(7, 64, 128), (333, 320, 1000), (4097, 768, 3072), (8192, 768, 3072), (1000, 1000, 520)]


@pytest.mark.parametrize("design", fm.PACKED_DESIGNS)
@pytest.mark.parametrize("shape", TRAIN_SHAPES, ids=[f"M{m}-dim{d}-hidden{h}" for m, d, h in TRAIN_SHAPES])
def test_the_fused_mlp_trains_with_gradients_as_close_to_float64_as_eager_s(design, shape):
    M, dim, hidden = shape
    torch.manual_seed(M)
    simple = SimpleGeGLUMLP(dim, hidden, device="cuda", dtype=torch.bfloat16)
    fused = fm.FusedGeGLUMLP.from_mlp(simple, design=design)
    x = torch.randn(M, dim, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(M, dim, device="cuda", dtype=torch.bfloat16)
    if design in fm.TMA_DESIGNS and fm._tma_problem(x, hidden):
        pytest.skip("rows not 16-byte aligned: the TMA designs refuse them (tested above)")
    x64 = x.double().requires_grad_()
    w64 = [m.weight.detach().double().requires_grad_() for m in (simple.gate_proj, simple.up_proj, simple.down_proj)]
    y64 = (F.gelu(x64 @ w64[0].T, approximate="tanh") * (x64 @ w64[1].T)) @ w64[2].T
    want = torch.autograd.grad(y64, (x64, *w64), dy.double())
    errors = {}
    for name, mlp in (("eager", simple), ("fused", fused)):
        xi = x.clone().requires_grad_()
        mlp(xi).backward(dy)
        got = (xi.grad, mlp.gate_proj.weight.grad, mlp.up_proj.weight.grad, mlp.down_proj.weight.grad)
        errors[name] = [fm.max_rel_error(g, w) for g, w in zip(got, want, strict=True)]
    for i, what in enumerate(("x", "gate", "up", "down")):
        # bf16 grads: a few roundings; ours must be no worse than eager's by more than one bf16 ulp's worth
        assert errors["fused"][i] <= max(2 * errors["eager"][i], 1e-2), f"{what}: {errors}"
    assert fused.design_ran == design


def test_a_training_step_gives_the_same_gradients_bit_for_bit_twice():
    torch.manual_seed(0)
    fused = fm.FusedGeGLUMLP(768, 3072, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 333, 768, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)

    def step():
        for p in (x, *fused.parameters()):
            p.grad = None
        fused(x).backward(dy)
        return [t.grad.clone() for t in (x, *fused.parameters())]

    direct = step()
    again = step()
    assert all(torch.equal(a, b) for a, b in zip(direct, again, strict=True)), "the same inputs give the same gradients, bit for bit"
