"""What a kernel's name tells you, checked against real names from real traces.

The corpus in ``tests/data/kernel_names.tsv`` holds names as torch.profiler,
nsys and profiler tables printed them (A100 and H100 runs of the original
post, and public profiler output from other projects); the named tests below
state, one fact each, what the guide teaches about reading them.
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import json
import random
import time
from pathlib import Path

import pytest

from profiling_guide.trace import kernel_names
from profiling_guide.trace.kernel_names import (
    FIELDS,
    INDUCTOR_OP_VOCABULARY,
    SHORT_MAX,
    KernelName,
    decode,
    split_inductor_ops,
)

CORPUS = Path(__file__).parent / "data" / "kernel_names.tsv"
CHECKED_COLUMNS = ("kind", "library", "tile", "layout", "dtype", "epilogue", "arch")

# The kernels of the original post (A100, bf16) and of our H100 probe.
A100_LINEAR = "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8"
A100_GATE_UP = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"
A100_DOWN = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn"
H100_LINEAR_BIAS = "nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT"
H100_MATMUL = "nvjet_sm90_tst_256x160_64x4_1x2_h_bz_coopA_TNT"
INDUCTOR_GEGLU = "triton_poi_fused__unsafe_view_gelu_mul_0"
INDUCTOR_RMSNORM = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1"
LIGER_GEGLU = "_geglu_tanh_forward_kernel"
ATEN_GELU_BF16 = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl("
    "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
ATEN_MUL_BF16 = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
    "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >("
    "at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
    "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, ...)"
)


def _corpus_rows() -> list[dict[str, str]]:
    lines = [line.rstrip("\n") for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]


ROWS = _corpus_rows()


# --- the A100 run of the original post -------------------------------------


def test_the_a100_linear_kernel_is_a_cutlass_bf16_gemm_with_tn_layout():
    k = decode(A100_LINEAR)
    assert (k.kind, k.library, k.arch, k.dtype, k.tile, k.layout) == ("gemm", "cutlass", "sm80", "bf16", "32x32", "tn")


def test_the_a100_linear_kernel_reads_the_same_when_wrapped_in_cutlass_kernel2():
    wrapped = f"void cutlass::Kernel2<{A100_LINEAR}>({A100_LINEAR}::Params)"
    bare, k = decode(A100_LINEAR), decode(wrapped)
    assert (k.kind, k.library, k.arch, k.dtype, k.tile, k.layout) == (
        bare.kind, bare.library, bare.arch, bare.dtype, bare.tile, bare.layout)


def test_the_a100_mlp_gemms_differ_only_in_their_tile():
    gate_up, down = decode(A100_GATE_UP), decode(A100_DOWN)
    assert (gate_up.library, gate_up.arch, gate_up.dtype, gate_up.layout) == ("cublas", "ampere", "bf16", "tn")
    assert (down.library, down.arch, down.dtype, down.layout) == ("cublas", "ampere", "bf16", "tn")
    assert (gate_up.tile, down.tile) == ("128x128", "128x256")


def test_a_relu_in_an_ampere_kernel_name_is_its_epilogue():
    assert decode("ampere_bf16_s16816gemm_bf16_128x128_ldg8_relu_f2f_stages_64x3_nn").epilogue == "relu"
    assert decode(A100_GATE_UP).epilogue is None


def test_fp32_operands_on_tensor_cores_read_as_tf32_and_on_cuda_cores_as_fp32():
    assert decode("cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4").dtype == "tf32"
    assert decode("ampere_sgemm_128x64_tn").dtype == "fp32"


# --- the H100 (cuBLAS nvjet, CUDA 12.8+) -------------------------------------


def test_the_h100_linear_kernel_carries_its_bias_epilogue():
    k = decode(H100_LINEAR_BIAS)
    assert (k.kind, k.library, k.arch, k.dtype) == ("gemm", "cublas", "sm90", "bf16")
    assert (k.tile, k.layout, k.epilogue) == ("192x208", "TNT", "bias")
    assert k.short == "nvjet sm90 192x208 TNT +bias"


def test_an_h100_matmul_without_bias_has_no_epilogue():
    k = decode(H100_MATMUL)
    assert (k.tile, k.layout, k.epilogue) == ("256x160", "TNT", None)


def test_nvjet_names_without_an_arch_tag_still_decode():
    # CUDA 12.8's cuBLAS leaves the architecture out; 13.x writes it in.
    k = decode("nvjet_tst_128x96_64x7_4x1_v_bz_bias_TNT")
    assert (k.arch, k.tile, k.layout, k.epilogue, k.dtype) == (None, "128x96", "TNT", "bias", "bf16")


def test_nvjet_type_letters_give_input_and_output_types():
    assert decode("nvjet_sm90_hss_64x8_64x16_1x1_h_bz_splitK_NNT").dtype == "fp16->fp32"
    assert decode("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT").dtype == "fp16"
    assert decode("nvjet_sm100_qqtst_128x256_128x6_2x1_2cta_v_bz_bias_TNT").dtype == "fp8->bf16"


def test_a_split_k_nvjet_gemm_says_so_in_its_label():
    assert "splitK" in decode("nvjet_sm90_hss_64x8_64x16_1x1_h_bz_splitK_NNT").short
    assert "splitK" not in decode(H100_MATMUL).short


def test_the_reduce_that_finishes_a_split_k_gemm_is_a_cublas_reduction():
    k = decode("void cublasLt::splitKreduce_kernel<32, 16, int, __nv_bfloat16, __nv_bfloat16, float, "
               "__nv_bfloat16, false>(cublasLt::cublasSplitKParams<float>, __nv_bfloat16 const*)")
    assert (k.kind, k.library, k.dtype) == ("reduction", "cublas", "bf16")


def test_xmma_names_give_types_tile_and_the_two_operand_layouts():
    k = decode("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
               "execute_segment_k_off_kernel__5x_cublas")
    assert (k.kind, k.library, k.arch, k.dtype, k.tile, k.layout) == (
        "gemm", "cublas", "sm90", "bf16", "128x128x64", "tn")


def test_cutlass3x_names_give_three_layout_letters_and_a_three_dimensional_tile():
    k = decode("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_"
               "warpspecialized_cooperative_epi_tma")
    assert (k.library, k.arch, k.dtype, k.tile, k.layout) == ("cutlass", "sm90", "bf16", "128x128x64", "tnn")


# --- Inductor ----------------------------------------------------------------


def test_inductor_fused_kernel_lists_its_ops():
    k = decode(INDUCTOR_GEGLU)
    assert k.fused_ops == ("_unsafe_view", "gelu", "mul")
    assert (k.kind, k.library, k.triton_kind) == ("pointwise", "triton", "poi")


def test_the_inductor_label_leaves_out_views_that_move_no_data():
    assert decode(INDUCTOR_GEGLU).short == "triton poi: gelu·mul"


def test_inductor_rmsnorm_kernel_is_a_reduction_over_six_ops():
    k = decode(INDUCTOR_RMSNORM)
    assert k.fused_ops == ("_to_copy", "add", "mean", "mul", "pow", "rsqrt")
    assert (k.kind, k.triton_kind) == ("reduction", "red")


def test_a_persistent_reduction_is_a_reduction_too():
    k = decode("triton_per_fused_native_layer_norm_relu_15")
    assert (k.kind, k.triton_kind, k.fused_ops) == ("reduction", "per", ("native_layer_norm", "relu"))


def test_inductor_op_names_with_underscores_are_not_split():
    k = decode("triton_per_fused__to_copy_add_embedding_dense_backward_native_dropout_backward_"
               "native_layer_norm_backward_nll_loss_forward_30")
    assert k.fused_ops == ("_to_copy", "add", "embedding_dense_backward", "native_dropout_backward",
                           "native_layer_norm_backward", "nll_loss_forward")


def test_an_op_inductor_knows_but_we_do_not_stays_in_one_piece():
    k = decode("triton_poi_fused_mul_rocm_unquantized_gemm_silu_slice_3.kd")
    assert k.fused_ops == ("mul", "rocm_unquantized_gemm", "silu", "slice")
    assert k.kind == "pointwise"  # a GEMM's name inside a pointwise kernel does not make it one


def test_an_inductor_template_with_a_matmul_is_a_gemm_with_its_epilogue():
    k = decode("triton_tem_fused__to_copy_addmm_gelu_t_view_9")
    assert (k.kind, k.triton_kind, k.epilogue) == ("gemm", "tem", "bias_gelu")
    flex = decode("triton_tem_fused_flex_attention_backward_1")
    assert (flex.kind, flex.library, flex.direction) == ("attention", "triton", "bwd")


def test_a_kernel_with_no_ops_in_its_name_is_still_inductors():
    k = decode("triton_poi_fused_0")
    assert (k.library, k.kind, k.triton_kind, k.fused_ops) == ("triton", "pointwise", "poi", ())


def test_splitting_recovers_any_sorted_op_list_inductor_could_write():
    # Inductor sorts the op names and joins them with "_". Where two ops joined
    # spell a third op (index + select = index_select) the name is ambiguous
    # and no splitter can tell; every other list must come back intact.
    ops = sorted(INDUCTOR_OP_VOCABULARY)
    rng = random.Random(20261122)
    checked = 0
    for _ in range(3000):
        chosen = sorted(set(rng.sample(ops, rng.randint(1, 6))))
        joined = "_".join(chosen)
        spans = (
            "_".join(chosen[i:j]) for i in range(len(chosen)) for j in range(i + 2, len(chosen) + 1)
        )
        if any(span in INDUCTOR_OP_VOCABULARY for span in spans):
            continue
        assert split_inductor_ops(joined) == tuple(chosen), joined
        checked += 1
    assert checked > 2500


def test_every_op_in_the_vocabulary_is_a_real_torch_op():
    torch = pytest.importorskip("torch")
    importlib.import_module("torch._higher_order_ops")  # registers flex_attention

    def is_op(name: str) -> bool:
        return any(hasattr(ns, name) for ns in (torch.ops.aten, torch.ops.prims, torch.ops.higher_order))

    assert [name for name in sorted(INDUCTOR_OP_VOCABULARY) if not is_op(name)] == []


# --- ATen --------------------------------------------------------------------


def test_the_eager_gelu_kernel_names_its_functor_and_dtype():
    k = decode(ATEN_GELU_BF16)
    assert (k.kind, k.library, k.fused_ops, k.dtype, k.short) == ("pointwise", "aten", ("gelu",), "bf16", "aten gelu")


def test_the_eager_mul_kernel_is_read_through_its_binary_functor_wrapper():
    k = decode(ATEN_MUL_BF16)
    assert (k.kind, k.fused_ops, k.dtype) == ("pointwise", ("mul",), "bf16")


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
         "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "add"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
         "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "fill"),
        ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
         "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
         "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int> >(int, ...)", "copy"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
         "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)", "mul"),
    ],
)
def test_aten_elementwise_kernels_are_named_by_their_functor(name, op):
    k = decode(name)
    assert (k.kind, k.library, k.fused_ops) == ("pointwise", "aten", (op,))


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>, "
         "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float>, unsigned int, "
         "float, 4>)", "mean"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
         "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
         "softmax"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float, float, float, "
         "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)", "log_softmax"),
    ],
)
def test_aten_reductions_and_softmax_are_reductions(name, op):
    k = decode(name)
    assert (k.kind, k.library, k.fused_ops) == ("reduction", "aten", (op,))


# --- memory operations, Triton from Python, attention -----------------------


def test_memsets_and_memcpys_are_device_work_but_not_kernels():
    assert (decode("Memset (Device)").kind, decode("Memset (Device)").library) == ("memset", "cuda")
    k = decode("Memcpy HtoD (Pageable -> Device)")
    assert (k.kind, k.short) == ("memcpy", "memcpy HtoD (pageable→device)")
    assert decode("memcpy32_post").kind != "memcpy"  # a kernel that happens to start with "memcpy"


@pytest.mark.parametrize(
    ("name", "kind", "fused_ops"),
    [
        (LIGER_GEGLU, "pointwise", ("geglu", "tanh")),
        ("matmul_kernel", "gemm", ()),
        ("_geglu_dual_gemm_kernel", "gemm", ("geglu",)),
        ("_rms_norm_forward_kernel", "reduction", ("rms_norm",)),
        ("_attn_fwd", "other", ("attention",)),
    ],
)
def test_triton_kernels_launched_from_python_are_guessed_from_their_words(name, kind, fused_ops):
    k = decode(name)
    assert (k.library, k.kind, k.fused_ops, k.triton_kind) == ("triton", kind, fused_ops, None)


def test_flash_attention_is_its_own_library():
    k = decode("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, "
               "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
               "false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)")
    assert (k.library, k.kind, k.dtype, k.tile) == ("flash", "attention", "bf16", "128x64")
    assert (k.direction, k.causal) == ("fwd", True)  # the second boolean after the traits is Is_causal


# --- robustness and the shape of the result ---------------------------------


UNKNOWN_NAMES = ["", "   ", "\t\n", "void ((((", "void foo::bar<int>(int)", "名前 カーネル", "<<<>>>", "x::" * 2000]
HALF_NAMES = ["nvjet_", "triton_poi_fused_", "cutlass_80_tensorop_", "sm90_xmma_gemm_", "ampere_",
              "void at::native::", "Memcpy", "cutlass3x_sm90_", "fmha_cutlassF_", "x" * 5000]


@pytest.mark.parametrize("name", UNKNOWN_NAMES, ids=range(len(UNKNOWN_NAMES)))
def test_unknown_names_decode_to_other_without_raising(name):
    k = decode(name)
    assert (k.kind, k.library, k.name) == ("other", "unknown", name)
    assert len(k.short) <= SHORT_MAX


@pytest.mark.parametrize("name", HALF_NAMES, ids=range(len(HALF_NAMES)))
def test_truncated_or_malformed_family_names_decode_without_raising(name):
    k = decode(name)
    assert isinstance(k, KernelName) and k.name == name
    assert k.kind in ("gemm", "pointwise", "reduction", "memset", "memcpy", "other")
    assert len(k.short) <= SHORT_MAX


@pytest.mark.parametrize("name, fields", [
    # NCCL 2.28 on the H100s of docs/samples/h100x4: collective, operator, type, algorithm, protocol
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     ("all_reduce", "sum", "bf16", "RING", "LL")),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
     ("reduce_scatter", "sum", "fp32", "RING", "LL128")),
    # an all-gather moves bytes: no operator, no type
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ("all_gather", None, None, "RING", "LL")),
    ("ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
     ("all_reduce", "sum", "bf16", "NVLS_TREE", "Simple")),
    ("ncclDevKernel_AllReduce_MinMax_u64_COLLNET_DIRECT_SIMPLE", ("all_reduce", "min_max", "uint64", "COLLNET_DIRECT",
                                                                  "Simple")),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", ("send_recv", None, None, None, None)),
    # NCCL before 2.19: algorithm and protocol first, C type names
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     ("all_reduce", "sum", "fp32", "RING", "LL")),
    ("ncclKernel_Broadcast_TREE_LL128_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     ("broadcast", "sum", "int8", "TREE", "LL128")),
])
def test_nccl_kernels_are_collectives_with_operator_type_algorithm_and_protocol(name, fields):
    k = decode(name)
    assert (k.kind, k.library) == ("collective", "nccl")
    assert (k.collective, k.reduce_op, k.dtype, k.algorithm, k.protocol) == fields
    assert k.short.startswith(f"nccl {fields[0]}")


def test_an_unknown_cxx_kernel_is_labelled_with_its_function_name():
    k = decode("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*)")
    assert (k.kind, k.library, k.short) == ("other", "unknown", "FusedAddRMSNormKernel")


def test_decode_accepts_none_and_non_strings():
    assert decode(None).kind == "other"
    assert decode(12345).name == "12345"


def test_every_short_label_fits_a_table_column():
    too_long = [(row["name"], decode(row["name"]).short) for row in ROWS if len(decode(row["name"]).short) > SHORT_MAX]
    assert too_long == []
    assert all(decode(row["name"]).short for row in ROWS)


def test_to_dict_is_json_ready_and_has_every_field():
    d = decode(INDUCTOR_GEGLU).to_dict()
    assert set(d) == {"name", *FIELDS}
    assert d["fused_ops"] == ["_unsafe_view", "gelu", "mul"]
    assert json.loads(json.dumps(d)) == d


def test_fields_name_every_decoded_attribute_once_in_display_order():
    attributes = [f.name for f in dataclasses.fields(KernelName)]
    assert len(set(FIELDS)) == len(FIELDS)
    assert set(FIELDS) == set(attributes) - {"name"}
    assert FIELDS[0] == "kind" and FIELDS[-1] == "short"


def test_decoded_names_are_cached_and_immutable():
    assert decode(H100_LINEAR_BIAS) is decode(H100_LINEAR_BIAS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decode(H100_LINEAR_BIAS).kind = "pointwise"


def test_decoding_a_trace_worth_of_new_names_is_fast():
    # 50 passes over the corpus with the caches emptied each time: ~4000
    # first-time decodes through every family, well under a second normally.
    start = time.perf_counter()
    for _ in range(50):
        decode.cache_clear()
        split_inductor_ops.cache_clear()
        for row in ROWS:
            decode(row["name"])
    assert time.perf_counter() - start < 5.0


def test_the_docstring_examples_are_true():
    result = doctest.testmod(kernel_names, verbose=False)
    assert result.attempted >= 2 and result.failed == 0


# --- the corpus --------------------------------------------------------------


def test_the_corpus_spans_many_families():
    assert len(ROWS) >= 30
    libraries = {row["library"] for row in ROWS}
    kinds = {row["kind"] for row in ROWS}
    assert {"cublas", "cutlass", "triton", "aten", "cuda", "flash", "cudnn"} <= libraries
    assert {"gemm", "attention", "pointwise", "reduction", "memset", "memcpy", "collective", "other"} == kinds


@pytest.mark.parametrize("row", ROWS, ids=[row["name"][:60] for row in ROWS])
def test_corpus_name_decodes_as_recorded(row):
    k = decode(row["name"])
    expected = {col: row[col] for col in CHECKED_COLUMNS if row.get(col)}
    seen = {col: getattr(k, col) for col in expected}
    assert seen == expected
