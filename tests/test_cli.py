"""``profiling-guide summarize`` and ``decode`` as a user runs them."""

import json
import subprocess

from quick_python import quick_python
from conftest import recording

from profiling_guide.cli import main


def run_cli(*args):
    return subprocess.run([quick_python(), "-m", "profiling_guide.cli", *args], capture_output=True, text=True)


def test_summarize_json_has_the_documented_shape(capsys):
    assert main(["summarize", str(recording("02_mlp_eager.eager")), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"steps", "kernels_per_step", "kernels", "runtime_calls_per_step", "no_kernel_ops"}
    assert report["steps"] == 3
    assert report["kernels_per_step"] == 5
    assert {k["kind"] for k in report["kernels"]} >= {"gemm", "pointwise", "memset"}
    for k in report["kernels"]:
        assert set(k) == {"name", "kind", "calls_per_step", "avg_us"} and k["avg_us"] > 0
    gemm_calls = sum(k["calls_per_step"] for k in report["kernels"] if k["kind"] == "gemm")
    assert gemm_calls == 3
    assert "aten::t" in report["no_kernel_ops"] and "aten::mm" not in report["no_kernel_ops"]
    assert report["runtime_calls_per_step"]["cuLaunchKernelEx"] == 3


def test_summarize_text_names_the_kernels(capsys, linear_eager):
    assert main(["summarize", str(recording("01_linear.eager"))]) == 0
    out = capsys.readouterr().out
    (kernel,) = {ev.name for ev in linear_eager.device_events}  # the step's one kernel, whatever cuBLAS named it
    row = next(line.split() for line in out.splitlines() if line.endswith(f"  {kernel}"))
    assert row[0] == "1" and row[2] == "gemm", row  # once per step, decoded as a GEMM
    assert "1 kernels per step" in out and "aten::t" in out


def test_decode_json_prints_the_fields():
    result = run_cli("decode", "triton_poi_fused__unsafe_view_gelu_mul_0", "--json")
    assert result.returncode == 0, result.stderr
    fields = json.loads(result.stdout)
    assert fields["kind"] == "pointwise" and fields["library"] == "triton"
    assert "gelu" in fields["fused_ops"] and "mul" in fields["fused_ops"]


def test_summarize_of_a_missing_file_is_one_line_and_exit_2(tmp_path):
    result = run_cli("summarize", str(tmp_path / "nope.json"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: no trace file") and result.stderr.count("\n") == 1


def test_summarize_of_a_non_trace_is_one_line_and_exit_2(tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("this is not json")
    result = run_cli("summarize", str(junk))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a JSON trace" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_flags_are_refused():
    result = run_cli("summarize", "x.json", "--bogus")
    assert result.returncode == 2 and "unrecognized arguments: --bogus" in result.stderr
