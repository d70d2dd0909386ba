"""The epilogue-fused GeGLU MLP, checked on the CPU through Triton's interpreter.

The kernels run in the interpreter when ``TRITON_INTERPRET=1`` is set as their
modules are imported: ``tests/conftest.py`` sets it on a machine without a
CUDA GPU. Where the kernels were imported compiled (a GPU machine), these
tests are skipped here and run in a fresh process with the interpreter, by
``test_the_fused_mlp_tests_in_a_fresh_process``. In interpreter mode the
module pins one small tile config (16×16×16), so every call is a fraction of
a second and the small shapes below still span several tiles and K steps,
with ragged edges.

bfloat16 is checked on the GPU only (``tests/test_fused_mlp_gpu.py``):
Triton's interpreter returns garbage for bf16 inputs to ``tl.dot``.
"""

import subprocess

import pytest
import torch
import torch.nn.functional as F

from conftest import run_pytest_in_fresh_process, triton_env
from quick_python import quick_python

import profiling_guide.kernels.fused_mlp as fm
import profiling_guide.kernels.geglu_kernels as gk
from profiling_guide.errors import GuideError
from profiling_guide.kernels import geglu_backward as gb
from profiling_guide.kernels.models import SimpleGeGLUMLP


@pytest.fixture(autouse=True)
def _interpreter_only(request):
    if not gk.INTERPRETED and request.node.originalname != "test_the_fused_mlp_tests_in_a_fresh_process":
        pytest.skip("the kernels were imported compiled: these tests run in a fresh process with the interpreter")


if not gk.INTERPRETED:

    def test_the_fused_mlp_tests_in_a_fresh_process():
        run_pytest_in_fresh_process(__file__, interpreted=True, timeout=600)


TOLERANCE = {torch.float16: 2e-3, torch.float32: 1e-5}  # max|err| / max|ref| of h
SHAPES = [(1, 32, 48), (17, 80, 96), (64, 48, 64), (33, 40, 72)]  # (M, dim, hidden); tile is 16


def weights(M, dim, hidden, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(M, dim, generator=gen).to(dtype)
    wg = (torch.randn(hidden, dim, generator=gen) / dim**0.5).to(dtype)
    wu = (torch.randn(hidden, dim, generator=gen) / dim**0.5).to(dtype)
    return x, wg, wu


def reference_mlp(mlp, x):
    """The whole MLP in float64: down(gelu_tanh(x @ Wg.T) * (x @ Wu.T))."""
    x, wg, wu, wd = (t.double() for t in (x, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight))
    return (F.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)) @ wd.T


def test_the_kernels_really_run_in_triton_s_interpreter():
    from triton.runtime.interpreter import InterpretedFunction

    assert set(gk.KERNELS) == set(fm.TRITON_DESIGNS)
    for kernel in gk.KERNELS.values():
        jit_fn = kernel.fn
        while not isinstance(jit_fn, InterpretedFunction):
            assert hasattr(jit_fn, "fn"), f"{kernel} is not interpreted"
            jit_fn = jit_fn.fn
        assert [c.kwargs["BLOCK_M"] for c in kernel.configs] == [16], "tests pin one small config"


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("design", fm.TRITON_DESIGNS)
@pytest.mark.parametrize("M,dim,hidden", SHAPES, ids=[f"M{m}-dim{d}-hidden{h}" for m, d, h in SHAPES])
def test_fused_mlp_matches_the_float64_reference_on_ragged_shapes(M, dim, hidden, design, dtype):
    x, wg, wu = weights(M, dim, hidden, dtype)
    h = fm.geglu(x, wg, wu, design=design)
    assert h.shape == (M, hidden) and h.dtype == dtype
    assert fm.max_rel_error(h, fm.reference_h(x, wg, wu)) < TOLERANCE[dtype]


@pytest.mark.parametrize("design", ["dual", "packed"])
def test_a_strided_input_is_read_through_its_strides(design):
    x, wg, wu = weights(24, 48, 40, torch.float16)
    x_t = x.T.contiguous().T  # same values, column-major: stride (1, 24)
    assert not x_t.is_contiguous()
    h = fm.geglu(x_t, wg, wu, design=design)
    assert fm.max_rel_error(h, fm.reference_h(x, wg, wu)) < TOLERANCE[torch.float16]


def test_pack_gate_up_interleaves_gate_and_up_rows():
    _, wg, wu = weights(1, 8, 5, torch.float32)
    packed = fm.pack_gate_up(wg, wu)
    assert packed.shape == (10, 8) and packed.is_contiguous()
    assert torch.equal(packed[0::2], wg) and torch.equal(packed[1::2], wu)


@pytest.mark.parametrize("design", fm.TRITON_DESIGNS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_from_mlp_gives_the_output_of_the_simple_mlp(design, dtype):
    torch.manual_seed(0)
    simple = SimpleGeGLUMLP(40, 56, dtype=dtype)
    fused = fm.FusedGeGLUMLP.from_mlp(simple, design=design)
    assert fused.state_dict().keys() == simple.state_dict().keys()  # the packed copy is not state
    x = torch.randn(2, 9, 40).to(dtype)  # any leading shape
    with torch.no_grad():
        y_fused, y_simple = fused(x), simple(x)
    assert y_fused.shape == (2, 9, 40) and y_fused.dtype == dtype
    want = reference_mlp(simple, x)
    tol = {torch.float16: 5e-3, torch.float32: 1e-5}[dtype]
    assert fm.max_rel_error(y_fused, want) < tol
    assert fm.max_rel_error(y_fused, y_simple) < tol


def test_load_state_dict_from_the_simple_mlp_works():
    simple = SimpleGeGLUMLP(32, 48, dtype=torch.float16)
    fused = fm.FusedGeGLUMLP(32, 48, dtype=torch.float16)
    fused.load_state_dict(simple.state_dict())
    assert torch.equal(fused.gate_proj.weight, simple.gate_proj.weight)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp")  # gelu of a very negative g: exp → inf → -0, as meant
def test_the_packed_weight_is_rebuilt_when_the_weights_change():
    torch.manual_seed(0)
    simple = SimpleGeGLUMLP(32, 48, dtype=torch.float32)
    fused = fm.FusedGeGLUMLP.from_mlp(simple)
    x = torch.randn(5, 32)
    first = fused.packed_weight()
    assert fused.packed_weight() is first, "unchanged weights reuse the cached copy"

    with torch.no_grad():  # in place: the version counter moves
        fused.up_proj.weight.mul_(2)
    assert fused.packed_weight() is not first
    assert torch.equal(fused.packed_weight()[1::2], fused.up_proj.weight)

    other = SimpleGeGLUMLP(32, 48, dtype=torch.float32)
    fused.load_state_dict(other.state_dict())  # copy_ into the parameters
    assert torch.equal(fused.packed_weight()[0::2], other.gate_proj.weight)

    fused.gate_proj.weight = torch.nn.Parameter(torch.randn(48, 32))  # a new tensor altogether
    assert torch.equal(fused.packed_weight()[0::2], fused.gate_proj.weight)
    with torch.no_grad():
        y = fused(x)
    want = reference_mlp(fused, x)
    assert fm.max_rel_error(y, want) < 1e-5


def test_a_pinned_config_is_used_and_reported():
    x, wg, wu = weights(20, 48, 40, torch.float32)
    cfg = {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2}
    for design in fm.TRITON_DESIGNS:
        h = fm.geglu(x, wg, wu, design=design, config=cfg)
        assert fm.max_rel_error(h, fm.reference_h(x, wg, wu)) < 1e-5
        reported = dict(field.split("=") for field in fm.tuned_config(design, x, 40, cfg).split())
        assert reported == {name: str(value) for name, value in cfg.items()}  # the pinned config, each field
    with pytest.raises(GuideError, match="BLOCK_K"):
        fm.geglu(x, wg, wu, config={"BLOCK_M": 16, "BLOCK_N": 16})


def test_an_empty_batch_gives_an_empty_result():
    x, wg, wu = weights(0, 32, 48, torch.float16)
    assert fm.geglu(x, wg, wu).shape == (0, 48)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_an_unsupported_dtype_is_refused_naming_the_supported_ones(dtype):
    x, wg, wu = (t.to(dtype) for t in weights(4, 32, 48, torch.float32))
    with pytest.raises(GuideError, match="bfloat16, float16 or float32"):
        fm.geglu(x, wg, wu)
    mlp = fm.FusedGeGLUMLP(32, 48, dtype=dtype if dtype.is_floating_point else None)
    if dtype.is_floating_point:
        with torch.no_grad(), pytest.raises(GuideError, match="bfloat16, float16 or float32"):
            mlp(x)


def test_mixed_dtypes_are_refused():
    x, wg, wu = weights(4, 32, 48, torch.float16)
    with pytest.raises(GuideError, match="share one dtype"):
        fm.geglu(x.float(), wg, wu)


def test_shapes_that_do_not_match_the_weights_are_refused():
    x, wg, wu = weights(4, 32, 48, torch.float16)
    with pytest.raises(GuideError, match="dim=32"):
        fm.geglu(x[:, :16], wg, wu)
    with pytest.raises(GuideError, match="one shape"):
        fm.geglu(x, wg, wu[:40])
    with pytest.raises(GuideError, match="pack_gate_up"):
        fm.geglu(x, wg, wu, design="packed", packed_weight=wg)
    with pytest.raises(GuideError, match=r"inputs \[\.\.\., 32\]"), torch.no_grad():
        fm.FusedGeGLUMLP(32, 48, dtype=torch.float16)(torch.randn(3, 31).half())
    with pytest.raises(GuideError, match="unknown design"):
        fm.geglu(x, wg, wu, design="triple")


def test_packed_tma_refuses_rows_the_tma_unit_cannot_address():
    x, wg, wu = weights(4, 36, 48, torch.float16)  # 36 × 2 B = 72 B rows: not a multiple of 16
    with pytest.raises(GuideError, match="16-byte aligned.*use 'packed'"):
        fm.geglu(x, wg, wu, design="packed-tma")
    assert fm.max_rel_error(fm.geglu(x, wg, wu, design="packed"), fm.reference_h(x, wg, wu)) < 2e-3


# ---------------------------------------------------------------- training: the fused backward
def grads_float64(mlp, x, dy):
    """x's and the three weights' gradients of the whole MLP, in float64 through torch's autograd."""
    x64 = x.double().requires_grad_()
    ws = [m.weight.detach().double().requires_grad_() for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)]
    y = (F.gelu(x64 @ ws[0].T, approximate="tanh") * (x64 @ ws[1].T)) @ ws[2].T
    return torch.autograd.grad(y, (x64, *ws), dy.double())


BACKWARD_SHAPES = [*SHAPES, (40, 64, 96)]  # the last one TMA can address in fp16 (rows of 16-byte multiples)


def skip_rows_tma_cannot_address(design, dim, hidden, dtype):
    """Skip a packed-tma case whose rows are not 16-byte multiples: the module runs 'packed' there."""
    if design == "packed-tma" and (dim * dtype.itemsize % 16 or hidden * dtype.itemsize % 16):
        pytest.skip("rows the TMA unit cannot address: the module runs 'packed' there")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("design", tuple(gb.KERNELS))
@pytest.mark.parametrize("M,dim,hidden", BACKWARD_SHAPES, ids=[f"M{m}-dim{d}-hidden{h}" for m, d, h in BACKWARD_SHAPES])
def test_the_backward_epilogue_matches_autograd_in_float64(M, dim, hidden, design, dtype):
    from profiling_guide.kernels.geglu_backward import geglu_backward, reference_grads

    skip_rows_tma_cannot_address(design, dim, hidden, dtype)
    gen = torch.Generator().manual_seed(M + dim)
    dy = torch.randn(M, dim, generator=gen).to(dtype)
    wd = (torch.randn(dim, hidden, generator=gen) / hidden**0.5).to(dtype)
    gu = (2 * torch.randn(M, 2 * hidden, generator=gen)).to(dtype)  # g spans gelu's curved part and its tails
    dg, du = reference_grads(dy.double() @ wd.double(), gu[:, :hidden], gu[:, hidden:])
    for prefetch in (False, True):  # g and u loaded after the K loop, or before it
        config = {**gk.INTERPRETER_CONFIG.kwargs, "num_warps": 1, "num_stages": 1}
        pinned = fm._as_config(config)
        pinned.kwargs["PREFETCH"] = prefetch
        dgu = geglu_backward(dy, wd, gu, design=design, config=pinned)
        assert fm.max_rel_error(dgu[:, :hidden], dg) < 2 * TOLERANCE[dtype], prefetch
        assert fm.max_rel_error(dgu[:, hidden:], du) < 2 * TOLERANCE[dtype], prefetch


# the packed designs in Triton's language: their forward stores g and u for the backward, and the interpreter runs them
PACKED_TRITON = tuple(d for d in fm.PACKED_DESIGNS if d in fm.TRITON_DESIGNS)


@pytest.mark.parametrize("design", PACKED_TRITON)
def test_saving_gate_up_keeps_g_then_u_side_by_side(design):
    x, wg, wu = weights(33, 40, 72, torch.float32)
    h, gu = fm.geglu(x, wg, wu, design=design, save_gate_up=True)
    assert gu.shape == (33, 144)
    assert fm.max_rel_error(gu[:, :72], x.double() @ wg.double().T) < 1e-5
    assert fm.max_rel_error(gu[:, 72:], x.double() @ wu.double().T) < 1e-5
    assert fm.max_rel_error(h, fm.reference_h(x, wg, wu)) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("design", PACKED_TRITON)
@pytest.mark.parametrize("M,dim,hidden", BACKWARD_SHAPES, ids=[f"M{m}-dim{d}-hidden{h}" for m, d, h in BACKWARD_SHAPES])
def test_the_fused_mlp_trains_with_the_gradients_of_float64_autograd(M, dim, hidden, design, dtype):
    skip_rows_tma_cannot_address(design, dim, hidden, dtype)
    torch.manual_seed(M)
    simple = SimpleGeGLUMLP(dim, hidden, dtype=dtype)
    mlp = fm.FusedGeGLUMLP.from_mlp(simple, design=design)
    x = torch.randn(2, M, dim).to(dtype).requires_grad_()  # 3-D input: the module flattens it
    dy = torch.randn(2, M, dim).to(dtype)
    y = mlp(x)
    assert fm.max_rel_error(y, reference_mlp(mlp, x.detach().reshape(-1, dim)).reshape(y.shape)) < 2 * TOLERANCE[dtype]
    y.backward(dy)
    want = grads_float64(mlp, x.detach().reshape(-1, dim), dy.reshape(-1, dim))
    got = (x.grad.reshape(-1, dim), mlp.gate_proj.weight.grad, mlp.up_proj.weight.grad, mlp.down_proj.weight.grad)
    for name, g, w in zip(("x", "gate", "up", "down"), got, want, strict=True):
        assert g.shape == w.shape and g.dtype == dtype and g.is_contiguous(), name
        # a few roundings more than the forward: dgu, then a GEMM over it
        assert fm.max_rel_error(g, w) < 4 * TOLERANCE[dtype], name


def test_the_fused_mlp_saves_less_for_backward_than_eager():
    M, dim, hidden = 17, 32, 48
    simple = SimpleGeGLUMLP(dim, hidden, dtype=torch.float32)
    fused = fm.FusedGeGLUMLP.from_mlp(simple, design="packed")
    x = torch.randn(M, dim, requires_grad=True)

    def saved_elements(mlp):
        seen = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
            mlp(x)
        # activations only: x (the caller's) and the weights are not the layer's to keep
        mine = {t.data_ptr(): t.numel() for t in seen if t.data_ptr() not in
                {x.data_ptr(), *(p.data_ptr() for p in mlp.parameters())} and t.shape[0] == M}
        return sum(mine.values())

    assert saved_elements(simple) == 4 * M * hidden  # g, u, gelu(g), h
    assert saved_elements(fused) == 3 * M * hidden  # gu = [g | u], h


def test_training_with_the_dual_design_is_refused_in_one_line():
    mlp = fm.FusedGeGLUMLP(32, 48, dtype=torch.float16, design="dual")
    with pytest.raises(GuideError, match="trains with a packed design.*torch.no_grad"):
        mlp(torch.randn(2, 32).half())
    with torch.no_grad():
        assert mlp(torch.randn(2, 32).half()).shape == (2, 32)


def test_cpu_tensors_are_refused_without_the_interpreter():
    # A fresh interpreter without TRITON_INTERPRET: the kernels are compiled for a GPU.
    code = (
        "import torch\n"
        "from profiling_guide.kernels.fused_mlp import geglu\n"
        "from profiling_guide.errors import GuideError\n"
        "x = torch.randn(4, 32, dtype=torch.float16); w = torch.randn(48, 32, dtype=torch.float16)\n"
        "try:\n"
        "    geglu(x, w, w)\n"
        "except GuideError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([quick_python(), "-c", code], env=triton_env(interpreted=False), capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert "CUDA device" in message and "TRITON_INTERPRET=1" in message and "cpu" in message
    assert "\n" not in message


def test_setting_the_interpreter_after_import_is_explained(monkeypatch):
    monkeypatch.setattr(fm, "INTERPRETED", False)  # as if imported before TRITON_INTERPRET was set
    x, wg, wu = weights(4, 32, 48, torch.float16)
    with pytest.raises(GuideError, match="before importing triton"):
        fm.geglu(x, wg, wu)


def test_auto_runs_packed_without_a_tma_unit_and_says_so():
    torch.manual_seed(0)
    x, wg, wu = torch.randn(33, 40), torch.randn(24, 40) / 40**0.5, torch.randn(24, 40) / 40**0.5
    assert fm.choose_design(x, 24) == "packed"  # CPU tensors: no TMA unit
    h = fm.geglu(x, wg, wu, design="auto")
    assert fm.max_rel_error(h, fm.reference_h(x, wg, wu)) < 1e-5
    # the interpreter's one config, which the autotuner runs without tuning
    assert fm.tuned_config("auto", x, 24) == fm.tuned_config("packed", x, 24) == fm.config_text(gk.INTERPRETER_CONFIG)

    mlp = fm.FusedGeGLUMLP(40, 24)
    assert mlp.design_ran is None
    with torch.no_grad():
        mlp(x)
    assert mlp.design_ran == "packed"
    mlp.design = "dual"
    with torch.no_grad():
        mlp(x)
    assert mlp.design_ran == "dual"


def test_capturing_a_cuda_graph_of_cpu_work_is_refused():
    mlp = fm.FusedGeGLUMLP(32, 48, dtype=torch.float16)
    with pytest.raises(GuideError, match="CUDA"):
        mlp.captured(torch.randn(3, 32).half())


def test_the_config_the_autotuner_picked_is_read_from_its_cache():
    import triton
    import triton.language as tl

    timings = iter([2.0, 1.0])  # the autotuner times the configs in order: the second one wins

    @triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["M", "N", "K"],
                     do_bench=lambda fn, quantiles: [next(timings)] * 3)  # fmt: skip
    @triton.jit
    def copy_kernel(x_ptr, M, N, K, B: tl.constexpr):
        offs = tl.arange(0, B)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < M), mask=offs < M)

    copy_kernel[(1,)](torch.zeros(40), 10, 20, 30)
    assert gk.autotuned_config(copy_kernel, 10, 20, 30, torch.float32).kwargs == {"B": 32}
    assert gk.autotuned_config(copy_kernel, 10, 20, 31, torch.float32) is None, "a shape it has not tuned"
    assert gk.autotuned_config(copy_kernel, 10, 20, 30, torch.float16) is None, "a dtype it has not tuned"
