"""``profiling-guide diff``: device work lined up through what launched it, differences called beyond the noise only.

On the guide's recordings (both GPUs) eager against compile, Liger and the
fused kernel match at least 95 % of the device time of both sides, each pair
the way its programs differ (a fused Triton kernel against eager's GeLU and
mul; Liger's kernel against them at ``mlp_fwd``, their lowest shared parent;
cuBLAS against max-autotune's GEMM templates by their shapes). A small GPT's
eager step recorded twice (``tests/data/attribution/h200``, six steps) shows
no change at step level, and its compiled step a change beyond the noise;
chapter 5's compiled MLP recorded by two chapters (three steps) matches whole
and calls nothing. Two unrelated programs match little. Bad input is one line.
"""

import functools
import json
import os
import shutil
from pathlib import Path

import pytest

from profiling_guide.analysis import align, provenance
from profiling_guide.analysis.diff import (
    MIN_SAMPLES,
    SCHEMA,
    diff,
    fused_ops,
    fuses,
    significant,
    template_gemm_shape,
    to_dict,
)
from profiling_guide.report.diff_html import report_json
from profiling_guide.cli import main
from profiling_guide.errors import GuideError
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "docs" / "recordings"
GPT = ROOT / "tests" / "data" / "attribution" / "h200"
CORPUS = ROOT / "tests" / "data" / "corpus"
TWO_RUNS = ROOT / "tests" / "data" / "two_runs_h200"
GPUS = ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
PAIRS = [("05_compare.eager", "05_compare.compile"), ("05_compare.eager", "05_compare.liger"),
         ("05_compare.eager", "06_fused.fused")]


@functools.cache
def _trace(path: Path) -> Trace:
    return Trace.load(path, python_calls=True)


def _recorded(gpu: str, name: str) -> Trace:
    return _trace(RECORDINGS / gpu / f"{name}.trace.json.gz")


@functools.cache
def _gpt(a: str, b: str, with_provenance: bool = False):
    prov = provenance.provenance_beside(GPT / f"{b}.trace.json.gz") if with_provenance else None
    return diff([_trace(GPT / f"{a}.trace.json.gz")], [_trace(GPT / f"{b}.trace.json.gz")], a_name=a, b_name=b,
                provenance=(None, prov))


def _row(d, how: str, b_what: str):
    return next(r for r in d.rows if r.how == how and any(b_what in k.what for k in r.b_keys))


# ------------------------------------------------------------ the guide's pairs
@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize(("a", "b"), PAIRS, ids=lambda n: n.split(".")[1])
def test_the_guides_variants_match_at_least_95_percent_of_device_time(gpu, a, b):
    d = diff([_recorded(gpu, a)], [_recorded(gpu, b)], verdicts=False)
    assert d.matched_share >= 0.95, [(r.how, r.words()) for r in d.rows]
    # three profiled steps a side: nothing is called beyond the noise from the traces alone, and it is said
    assert d.a.samples == d.b.samples == 3
    assert d.step_significant is None and all(significant(r.a, r.b) is None for r in d.rows)
    report = report_json(d)
    assert report["a"]["samples"] == report["b"]["samples"] == 3
    assert "too few samples" in report["verdict"]["text"]


@pytest.mark.parametrize("gpu", GPUS)
def test_compiles_fused_kernel_stands_against_eagers_gelu_and_mul(gpu):
    d = diff([_recorded(gpu, "05_compare.eager")], [_recorded(gpu, "05_compare.compile")], verdicts=False)
    fused = [r for r in d.rows if r.how == "fused"]
    assert len(fused) == 1
    assert {k.what for k in fused[0].a_keys} == {"aten::gelu", "aten::mul"}
    assert [k.what for k in fused[0].b_keys] == ["triton_poi_fused__unsafe_view_gelu_mul"]
    assert fused[0].b_keys[0].label == "mlp_fwd" and (fused[0].a_count, fused[0].b_count) == (2, 1)
    gemms = {r.a_keys[0].what: r for r in d.rows if r.how == "same" and r.a_keys[0].kind == "gemm"}
    # the gate/up product twice and the down product once, cuBLAS on both sides, their FLOP from their shapes
    assert set(gemms) == {"gemm 8192×768 · 768×3072", "gemm 8192×3072 · 3072×768"}
    assert gemms["gemm 8192×768 · 768×3072"].a_count == 2
    assert gemms["gemm 8192×768 · 768×3072"].a_flop == gemms["gemm 8192×768 · 768×3072"].b_flop == \
        2 * 2 * 8192 * 768 * 3072


@pytest.mark.parametrize("gpu", GPUS)
def test_ligers_kernel_is_matched_at_the_label_both_share(gpu):
    d = diff([_recorded(gpu, "05_compare.eager")], [_recorded(gpu, "05_compare.liger")], verdicts=False)
    # the three aten::linear of each side line up by edit distance: their GEMMs are the same work in the same place
    assert sum(r.a_count for r in d.rows if r.how == "same" and r.a_keys[0].kind == "gemm") == 3
    parent = [r for r in d.rows if r.how == "parent"]
    assert len(parent) == 1 and parent[0].where == "mlp_fwd"
    assert {k.what for k in parent[0].a_keys} == {"aten::gelu", "aten::mul"}
    assert [k.what for k in parent[0].b_keys] == ["LigerGELUMulFunction"]


@pytest.mark.parametrize("gpu", GPUS)
def test_the_fused_kernels_down_gemm_lines_up_with_eagers_by_its_shapes(gpu):
    """The fused module runs one aten::linear, eager three: the one whose shapes agree is its match."""
    d = diff([_recorded(gpu, "05_compare.eager")], [_recorded(gpu, "06_fused.fused")], verdicts=False)
    same = [r for r in d.rows if r.how == "same"]
    assert [r.a_keys[0].what for r in same] == ["gemm 8192×3072 · 3072×768"]
    parent = _row(d, "parent", "_geglu_pingpong_gemm_kernel")
    assert {k.what for k in parent.a_keys} == {"aten::gelu", "aten::mul", "gemm 8192×768 · 768×3072",
                                                "memset of 8192×768 · 768×3072"}
    assert parent.b_flop is None  # a kernel of our own: its work is not in the trace


def test_max_autotunes_gemm_templates_line_up_with_cublas_by_their_shapes():
    d = diff([_recorded("nvidia-h100-80gb-hbm3", "05_compare.eager")],
             [_recorded("nvidia-h100-80gb-hbm3", "05_compare.compile-max-autotune")], verdicts=False)
    gemms = {r.a_keys[0].what: r for r in d.rows if r.how == "same" and r.a_keys[0].kind == "gemm"}
    assert set(gemms) == {"gemm 8192×768 · 768×3072", "gemm 8192×3072 · 3072×768"}
    assert all(name.startswith("triton_tem_fused") for r in gemms.values() for k in r.b_keys
               for name in d.b.info[k].kernels)
    # cuBLAS's workspace memsets have no counterpart: listed, not dropped
    assert [r.how for r in d.rows if r.a_keys and r.a_keys[0].kind == "memset"] == ["only in A"]
    assert d.matched_share >= 0.99


def test_a_gemm_templates_product_is_read_from_its_arguments():
    op = next(ev.launch.op for ev in _recorded("nvidia-h100-80gb-hbm3", "05_compare.compile-max-autotune").kernels
              if ev.name.startswith("triton_tem_fused__unsafe_view_gelu_mm"))
    assert op.input_dims[:3] == [[64, 128, 3072], [768, 3072], [8192, 768]]
    assert template_gemm_shape(op) == "8192×3072 · 3072×768"
    assert template_gemm_shape(None) is None


# ------------------------------------------------------------- the noise
def test_the_same_program_recorded_twice_shows_no_change_at_step_level():
    d = _gpt("eager", "eager_again")
    assert d.a.samples == d.b.samples == 6 >= MIN_SAMPLES
    assert d.step_significant is False
    assert d.matched_share == pytest.approx(1.0)
    assert {r.how for r in d.rows} == {"same"}
    report = report_json(d)
    assert "a tie" in report["verdict"]["text"] and report["verdict"]["pace_changed"] is False


def test_the_compiled_program_recorded_by_two_chapters_matches_whole_and_calls_nothing():
    d = diff([_trace(TWO_RUNS / "05_compare.compile.trace.json.gz")],
             [_trace(TWO_RUNS / "06_fused.compiled.trace.json.gz")], verdicts=False)
    assert d.matched_share == pytest.approx(1.0) and {r.how for r in d.rows} == {"same"}
    assert d.a.samples == d.b.samples == 3 and d.step_significant is None


def test_a_real_change_is_called_beyond_the_noise():
    d = _gpt("eager", "compiled")
    assert d.step_significant is True
    assert d.matched_share >= 0.95
    assert any(r.how == "fused" and significant(r.a, r.b) for r in d.rows)
    v = to_dict(d)["verdict"]
    # the compiled step runs fewer µs of kernels but takes longer: the verdict says the change is on the host,
    # and names the report's cause whose time on the critical path grew
    assert v["on_host"] is True and v["critical_path_change"]["cause"] == "launch_overhead"


def test_step_samples_given_replace_the_traces_steps():
    a, b = [_recorded("nvidia-h200", "05_compare.eager")], [_recorded("nvidia-h200", "05_compare.compile")]
    d = diff(a, b, a_step=[100.0, 101, 99, 100, 102, 98, 100], b_step=Spread(90.0, 89.0, 91.0, 7),
             step_source="7 benchmark passes", verdicts=False)
    assert d.step_significant is True and d.a.steps_source == "7 benchmark passes"
    report = report_json(d)
    assert report["a"]["samples"] == 7 and report["a"]["profiled_samples"] == 3
    assert "7 benchmark passes" in report["verdict"]["text"] and "in the traces" in report["verdict"]["text"]


# --------------------------------------------------------- what the traces carry
def test_modules_and_the_programs_functions_place_the_work():
    d = _gpt("eager", "eager_again")
    modules = d.totals("module")
    assert "GPT_0.GPTBlock_3.Attention_3" in modules and "GPT_0.LayerNorm_8" in modules
    attention = modules["GPT_0.GPTBlock_3.Attention_3"]
    assert sum(attention[0].us) > 0 and attention[0].flop is not None  # its projections' GEMM FLOP
    sources = {str(f) for info in d.a.info.values() for f in info.sources}
    assert "record_verdict_corpus.py:70 forward" in sources  # the attention's forward, as the profiler names it


def test_inductors_provenance_joins_a_kernel_to_the_eager_work_of_its_line():
    without, with_it = _gpt("eager", "compiled"), _gpt("eager", "compiled", with_provenance=True)
    assert with_it.matched_share > without.matched_share
    unmatched = {r.words() for r in without.rows if r.how == "only in A"}
    assert "gemm 8192×1024 · 1024×256 (backward)" in unmatched
    assert "gemm 8192×1024 · 1024×256 (backward)" not in {r.words() for r in with_it.rows if r.how == "only in A"}


def test_repeats_in_a_folder_are_samples_even_recorded_otherwise(tmp_path):
    """eager and eager_bare are one program, the second without with_stack/with_modules: twelve samples."""
    d = diff([_trace(GPT / "eager.trace.json.gz"), _trace(GPT / "eager_bare.trace.json.gz")],
             [_trace(GPT / "eager_again.trace.json.gz")], verdicts=False)
    assert d.a.kind == "repeats" and d.a.samples == 12
    assert d.matched_share == pytest.approx(1.0) and d.step_significant is False


def test_the_ranks_of_two_runs_are_compared_rank_by_rank():
    run = CORPUS / "h200x2"
    d = diff([_trace(run / "ddp_extra_forward_rank0" / f"rank{r}.trace.json.gz") for r in (0, 1)],
             [_trace(run / "ddp_extra_forward_last" / f"rank{r}.trace.json.gz") for r in (0, 1)], verdicts=False)
    assert d.a.kind == d.b.kind == "ranks"
    moved = {(r.how, (r.a_keys or r.b_keys)[0].rank) for r in d.rows
             if (r.a_keys or r.b_keys)[0].label == "extra_work"}
    assert moved == {("only in A", 0), ("only in B", 1)}  # the extra GEMMs moved from rank 0 to rank 1


def test_two_unrelated_programs_match_little():
    d = diff([_trace(CORPUS / "h200" / "memcpy_64mib.trace.json.gz")], [_trace(GPT / "eager.trace.json.gz")],
             verdicts=False)
    assert d.matched_share < 0.5
    assert any(not r.matched for r in d.rows)  # listed, not dropped


# ------------------------------------------------------------- the pieces
def test_an_inductor_kernel_name_says_what_it_fuses():
    ops = fused_ops("triton_poi_fused__unsafe_view_gelu_mul_0")
    assert ops == "_unsafe_view_gelu_mul"
    assert fuses(ops, "aten::gelu") and fuses(ops, "aten::mul") and fuses(ops, "aten::_unsafe_view")
    assert not fuses(ops, "aten::view_as") and not fuses(ops, "aten::mm")
    assert fused_ops("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") is None
    assert fuses(fused_ops("triton_red_fused__log_softmax_nll_loss_forward_3"), "aten::_log_softmax")


def test_edit_distance_keeps_the_pairs_that_agree_most():
    def nodes(*names):
        return [align.Node(n.split("@")[0], float(i), detail=(n.split("@")[1] if "@" in n else None, None, None))
                for i, n in enumerate(names)]

    a = nodes("linear@x", "gelu", "linear@x", "mul", "linear@h")
    assert align._pairs(a, nodes("linear@h")) == [(4, 0)]  # the shapes pick the third linear, not the first
    assert align._pairs(a, nodes("linear@x", "linear@x", "liger", "linear@h")) == [(0, 0), (2, 1), (4, 3)]
    assert align._pairs(nodes("a", "b"), nodes("c")) == []


def test_significance_needs_five_samples_a_side_and_iqrs_apart():
    assert significant([1.0] * 4, [2.0] * 4) is None
    assert significant([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05]) is True
    assert significant([1.0, 2.0, 3.0, 4.0, 5.0], [2.5, 3.0, 3.5, 4.0, 4.5]) is False


# ------------------------------------------------------------- the command
def test_the_command_writes_the_page_and_the_documented_json(tmp_path, capsys):
    page, out = tmp_path / "diff.html", tmp_path / "diff.json"
    assert main(["diff", str(GPT / "eager.trace.json.gz"), str(GPT / "compiled.trace.json.gz"), "-o", str(page),
                 "--json", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith("verdict: compiled's step is") and str(page) in said
    report = json.loads(out.read_text())
    assert report["schema"] == SCHEMA
    for side in ("a", "b"):
        assert {"median", "q1", "q3"} <= set(report[side]["step_ms"]) and report[side]["samples"] == 6
        assert report[side]["report"]["cause"] and report[side]["report"]["bound"]
    # the kernel information kept beside compiled.trace.json.gz is read
    assert report["matched_share"] == pytest.approx(_gpt("eager", "compiled", with_provenance=True).matched_share)
    assert 0.95 <= report["matched_share"] <= 1
    assert {"a", "b", "delta_us", "significant", "delta_share", "match"} <= set(report["rows"][0])
    assert {"phase", "kind", "module"} == set(report["totals"])
    assert {"text", "pace_changed", "step_significant"} <= set(report["verdict"])
    text = page.read_text()
    assert "Trace diff" in text and "What changed" in text and "6 samples" in text and "Per module" in text
    documented = (ROOT / "docs" / "report.md").read_text()
    for key in (SCHEMA, "matched_share", "delta_us", "significant", "step_ms", "delta_share", "totals",
                "pace_changed", "kernel_information.json"):
        assert key in documented, key


def test_json_on_standard_output_keeps_the_rest_on_stderr(capsys):
    assert main(["diff", str(GPT / "eager.trace.json.gz"), str(GPT / "eager_again.trace.json.gz"), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == SCHEMA and captured.err.startswith("verdict: ")


def test_a_folder_of_repeats_on_the_command_line(tmp_path, capsys):
    folder = tmp_path / "eager"
    folder.mkdir()
    for name in ("eager", "eager_bare"):
        shutil.copy(GPT / f"{name}.trace.json.gz", folder)
    assert main(["diff", str(folder), str(GPT / "eager_again.trace.json.gz"), "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["a"]["kind"] == "repeats" and report["a"]["samples"] == 12 and len(report["a"]["sources"]) == 2


@pytest.mark.parametrize(("args", "says"), [
    (["EAGER", "EAGER", "-o", "OUT"], "name the same trace file"),
    (["EAGER", "AGAIN"], "give at least one"),
    (["EAGER", "AGAIN", "-o", "SAME", "--json", "SAME"], "both name"),
    (["EAGER", "MISSING", "-o", "OUT"], "no trace file at"),
    (["EAGER", "NOSTEPS", "-o", "OUT"], "no profiler steps"),
    (["EAGER", "CPUONLY", "-o", "OUT"], "no device work"),
    (["EAGER", "BADINFO", "-o", "OUT"], "not valid JSON"),
    (["EAGER", "LISTINFO", "-o", "OUT"], "not inductor's kernel information"),
    (["EAGER", "DIRINFO", "-o", "OUT"], "is a folder"),
    (["RANKS_APART", "EAGER", "-o", "OUT"], "share no profiler step number"),
    (["EAGER", "AGAIN", "-o", "EAGER"], ""),
])
def test_bad_input_is_one_line_and_writes_nothing(args, says, tmp_path, capsys):
    nosteps = tmp_path / "nosteps.json"
    nosteps.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1,
                                                     "dur": 2, "pid": 1, "tid": 1}]}))
    cpuonly = tmp_path / "cpuonly.json"
    cpuonly.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}))
    eager = tmp_path / "eager.trace.json.gz"
    eager.write_bytes((GPT / "eager.trace.json.gz").read_bytes())
    infos = {}
    for name, content in (("badinfo", "{not json"), ("listinfo", "[1, 2]"), ("dirinfo", None)):
        (tmp_path / name).mkdir()
        shutil.copy(GPT / "compiled.trace.json.gz", tmp_path / name / "c.trace.json.gz")
        info = tmp_path / name / "c.kernel_information.json"
        info.mkdir() if content is None else info.write_text(content)
        infos[name.upper()] = tmp_path / name / "c.trace.json.gz"
    apart = tmp_path / "ranks_apart"
    apart.mkdir()
    for rank in (0, 1):  # two ranks of one run that profiled different steps
        (apart / f"rank{rank}.json").write_text(json.dumps({
            "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"}, "traceEvents": [
                {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{rank + 1}", "ts": 0, "dur": 10,
                 "pid": 1, "tid": 1},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 2, "pid": 1, "tid": 1,
                 "args": {"correlation": 1}},
                {"ph": "X", "cat": "kernel", "name": "k", "ts": 4, "dur": 2, "pid": 0, "tid": 7,
                 "args": {"correlation": 1, "stream": 7}}]}))
    names = {"EAGER": eager, "AGAIN": GPT / "eager_again.trace.json.gz", "OUT": tmp_path / "out.html",
             "RANKS_APART": apart,
             "SAME": tmp_path / "same", "MISSING": tmp_path / "missing.json", "NOSTEPS": nosteps, "CPUONLY": cpuonly,
             **infos}
    before = eager.read_bytes()
    assert main(["diff", *[str(names.get(a, a)) for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and says in err
    assert not (tmp_path / "out.html").exists() and not (tmp_path / "same").exists()
    assert eager.read_bytes() == before  # never its input


def test_provenance_that_is_not_inductors_is_one_line():
    with pytest.raises(GuideError, match="not an object"):
        provenance.parse({"triton_poi_fused_add_0:1": ["a list"]}, "k.json")
    parsed = provenance.parse({"triton_poi_fused_add_0:1": {"stack_traces": [
        '  File "/x/model.py", line 12, in forward\n    y = x + 1\n'], "post_grad_nodes": ["add"]}})
    assert parsed["triton_poi_fused_add_0"].lines == {provenance.Line("model.py", 12, "forward")}
    assert provenance.beside("runs/compiled.trace.json.gz") == Path("runs/compiled.kernel_information.json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_for_kernel_information_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "c.kernel_information.json")
    with pytest.raises(GuideError, match="FIFO"):
        provenance.provenance_beside(tmp_path / "c.trace.json.gz")


def test_the_same_traces_give_the_same_diff_in_every_process():
    # a set of keys iterates in an order that string hashing and None's address change from one interpreter to the
    # next: fresh interpreters (not forks of one) must write the same diff. Before keys were ordered, about half of
    # the runs of this pair wrote another one
    import subprocess
    import sys

    import profiling_guide

    src = str(Path(profiling_guide.__file__).resolve().parents[1])
    a, b = (RECORDINGS / "nvidia-h100-80gb-hbm3" / f"06b_training_step.{name}.trace.json.gz"
            for name in ("compile", "eager"))
    outputs = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": src}
        done = subprocess.run([sys.executable, "-m", "profiling_guide.cli", "diff", str(a), str(b), "--json", "-"],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
