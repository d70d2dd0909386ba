"""``profiling-guide diff``: rows lined up through what launched them, differences called beyond the noise only.

On the guide's recordings (both GPUs) eager against compile, Liger and the
fused kernel match at least 95 % of the device time of both sides; a small
GPT's eager step recorded twice (``tests/data/attribution/h200``) shows no
change at step level, while its compiled step does; two unrelated programs
match little. Bad input is one line.
"""

import json
from pathlib import Path

import pytest

from profiling_guide.analysis.diff import MIN_SAMPLES, SCHEMA, diff, fuses, fused_ops, significant, to_dict
from profiling_guide.cli import main
from profiling_guide.spread import Spread
from profiling_guide.trace.model import Trace

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "docs" / "recordings"
GPT = ROOT / "tests" / "data" / "attribution" / "h200"
CORPUS = ROOT / "tests" / "data" / "corpus" / "h200"
GPUS = ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
PAIRS = [("05_compare.eager", "05_compare.compile"), ("05_compare.eager", "05_compare.liger"),
         ("05_compare.eager", "06_fused.fused")]


def _trace(path: Path) -> Trace:
    return Trace.load(path)


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize(("a", "b"), PAIRS, ids=lambda n: n.split(".")[1])
def test_the_guides_variants_match_at_least_95_percent_of_device_time(gpu, a, b):
    d = diff([_trace(RECORDINGS / gpu / f"{a}.trace.json.gz")], [_trace(RECORDINGS / gpu / f"{b}.trace.json.gz")],
             verdicts=False)
    assert d.matched_share >= 0.95, [(r.how, r.words()) for r in d.rows]
    # three profiled steps a side: nothing is called beyond the noise from the traces alone
    assert d.step_significant is None and all(significant(r.a, r.b) is None for r in d.rows)


@pytest.mark.parametrize("gpu", GPUS)
def test_compiles_fused_kernel_stands_against_eagers_gelu_and_mul(gpu):
    d = diff([_trace(RECORDINGS / gpu / "05_compare.eager.trace.json.gz")],
             [_trace(RECORDINGS / gpu / "05_compare.compile.trace.json.gz")], verdicts=False)
    fused = [r for r in d.rows if r.how == "fused"]
    assert len(fused) == 1
    assert {k.what for k in fused[0].a_keys} == {"aten::gelu", "aten::mul"}
    assert fused[0].b_keys[0].kind == "fused" and fused[0].b_keys[0].label == "mlp_fwd"
    gemms = [r for r in d.rows if r.how == "same" and r.a_keys[0].kind == "gemm"]
    assert len(gemms) == 2  # the gate/up shape and the down shape, the same GEMMs on both sides


def test_the_same_program_recorded_twice_shows_no_change_at_step_level():
    d = diff([_trace(GPT / "eager.trace.json.gz")], [_trace(GPT / "eager_again.trace.json.gz")])
    assert d.a.samples == d.b.samples == 6 >= MIN_SAMPLES
    assert d.step_significant is False
    assert d.matched_share >= 0.99
    report = to_dict(d)
    assert "a tie" in report["verdict"] and "did not change" in report["verdict"]


def test_a_real_change_is_called_beyond_the_noise():
    d = diff([_trace(GPT / "eager.trace.json.gz")], [_trace(GPT / "compiled.trace.json.gz")])
    assert d.step_significant is True
    assert d.matched_share >= 0.95
    assert any(r.how == "fused" and significant(r.a, r.b) for r in d.rows)


def test_two_unrelated_programs_match_little():
    d = diff([_trace(CORPUS / "memcpy_64mib.trace.json.gz")], [_trace(GPT / "eager.trace.json.gz")], verdicts=False)
    assert d.matched_share < 0.5
    assert any(not r.matched for r in d.rows)  # listed, not dropped


def test_step_samples_given_replace_the_traces_steps():
    a = [_trace(RECORDINGS / "nvidia-h200" / "05_compare.eager.trace.json.gz")]
    b = [_trace(RECORDINGS / "nvidia-h200" / "05_compare.compile.trace.json.gz")]
    d = diff(a, b, a_step=[100.0, 101, 99, 100, 102, 98, 100], b_step=Spread(90.0, 89.0, 91.0, 7),
             step_source="7 benchmark passes", verdicts=False)
    assert d.step_significant is True and d.a.steps_source == "7 benchmark passes"


def test_an_inductor_kernel_name_says_what_it_fuses():
    ops = fused_ops("triton_poi_fused__unsafe_view_gelu_mul_0")
    assert ops == "_unsafe_view_gelu_mul"
    assert fuses(ops, "aten::gelu") and fuses(ops, "aten::mul") and fuses(ops, "aten::_unsafe_view")
    assert not fuses(ops, "aten::view_as") and not fuses(ops, "aten::mm")
    assert fused_ops("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") is None
    assert fuses(fused_ops("triton_red_fused__log_softmax_nll_loss_forward_3"), "aten::_log_softmax")


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
    assert 0.95 <= report["matched_share"] <= 1
    assert {"a", "b", "delta_us", "significant"} <= set(report["rows"][0])
    assert report["pace"]["a"] and report["pace"]["b"] and report["verdict"]
    text = page.read_text()
    assert "Trace diff" in text and "What changed" in text and "beyond the noise" in text
    documented = (ROOT / "docs" / "report.md").read_text()
    for key in (SCHEMA, "matched_share", "delta_us", "significant", "step_ms"):
        assert key in documented, key


def test_json_on_standard_output_keeps_the_rest_on_stderr(capsys):
    assert main(["diff", str(GPT / "eager.trace.json.gz"), str(GPT / "eager_again.trace.json.gz"), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == SCHEMA and captured.err.startswith("verdict: ")


@pytest.mark.parametrize(("args", "says"), [
    (["EAGER", "EAGER", "-o", "OUT"], "name the same trace file"),
    (["EAGER", "AGAIN"], "give at least one"),
    (["EAGER", "AGAIN", "-o", "SAME", "--json", "SAME"], "both name"),
    (["EAGER", "MISSING", "-o", "OUT"], "no trace file at"),
    (["EAGER", "NOSTEPS", "-o", "OUT"], "no profiler steps"),
    (["EAGER", "CPUONLY", "-o", "OUT"], "no device work"),
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
    names = {"EAGER": eager, "AGAIN": GPT / "eager_again.trace.json.gz", "OUT": tmp_path / "out.html",
             "SAME": tmp_path / "same", "MISSING": tmp_path / "missing.json", "NOSTEPS": nosteps, "CPUONLY": cpuonly}
    before = eager.read_bytes()
    assert main(["diff", *[str(names.get(a, a)) for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and says in err
    assert not (tmp_path / "out.html").exists() and not (tmp_path / "same").exists()
    assert eager.read_bytes() == before  # never its input
