"""``profiling-guide report``: one offline HTML page for any trace, and one-line errors."""

import html
import os
import re
import subprocess
from pathlib import Path

import pytest
from quick_python import quick_python
from conftest import H100, recording

import profiling_guide
from profiling_guide.cli import main
from profiling_guide.report.html import write_report

HTA_SAMPLES = sorted((Path(__file__).parent / "data" / "hta").glob("*.json.gz"))
SECTIONS = ("pace", "environment", "steps", "timeline", "kernels", "ops", "memory", "health")


def run_cli(*args, cwd=None):
    # The same package as this test imports, from whatever folder the command runs in.
    src = str(Path(profiling_guide.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([quick_python(), "-m", "profiling_guide.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


def test_the_report_is_one_offline_page_with_every_section(tmp_path, capsys, mlp_eager):
    out = tmp_path / "mlp.html"
    assert main(["report", str(recording("02_mlp_eager.eager")), "-o", str(out),
                 "--rates", str(H100 / "02_mlp_eager.references.run.json")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out) and printed[0].startswith("verdict: ") and len(printed) == 2
    page = out.read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    gpu = mlp_eager.metadata["deviceProperties"][0]["name"]
    gemms = {ev.decoded.short for ev in mlp_eager.device_events if ev.decoded.kind == "gemm"}
    assert "<canvas" in page and gpu in page
    assert gemms and all(html.escape(name) in page for name in gemms), "each GEMM by its decoded name"
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the page must not load anything from elsewhere"
    assert "TFLOP/s" in page and "of measured reference" in page
    assert len(page) < 200_000


@pytest.mark.parametrize("trace", HTA_SAMPLES, ids=lambda p: p.name)
def test_traces_recorded_elsewhere_get_a_report(trace, tmp_path):
    out = write_report(trace, tmp_path / "report.html")
    page = out.read_text()
    assert all(f'<section id="{s}">' in page for s in SECTIONS)
    assert "Who sets the pace" in page


def test_a_trace_without_steps_says_so_on_the_page(tmp_path):
    alexnet = Path(__file__).parent / "data" / "hta" / "alexnet.json.gz"
    page = write_report(alexnet, tmp_path / "r.html").read_text()
    assert "the whole trace is one step" in page and "Timeline of the whole trace" in page


def test_the_page_is_readable_by_others_as_any_new_file_would_be(tmp_path):
    umask = os.umask(0o022)
    try:
        out = write_report(recording("01_linear.eager"), tmp_path / "r.html")
    finally:
        os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o644


def test_step_chooses_the_timeline(tmp_path):
    page = write_report(recording("01_linear.eager"), tmp_path / "r.html", step=3).read_text()
    assert "Timeline of ProfilerStep#3" in page


def test_the_default_output_is_named_after_the_trace_in_the_current_folder(tmp_path):
    result = run_cli("report", str(recording("01_linear.eager")), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "01_linear.eager.report.html").is_file()
    assert result.stderr == ""  # a small trace gets no progress lines


def test_progress_goes_to_stderr_and_never_into_the_page(tmp_path, capsys):
    out = write_report(recording("01_linear.eager"), tmp_path / "r.html", progress=True)
    err = capsys.readouterr().err
    assert "report: loading 01_linear.eager.trace.json.gz" in err and "report: done" in err
    assert "report: loading" not in out.read_text()


def _one_line_error(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


def test_a_missing_trace_is_one_line(tmp_path):
    _one_line_error(run_cli("report", str(tmp_path / "nope.json"), "-o", str(tmp_path / "r.html")), "no trace file")


def test_a_file_that_is_not_a_trace_is_one_line(tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text('{"not": "a trace"}')
    _one_line_error(run_cli("report", str(junk), "-o", str(tmp_path / "r.html")), "not a Chrome trace")


def test_an_unwritable_output_is_refused_before_the_trace_is_read(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    # the trace is missing too: the output is checked first, before any work
    _one_line_error(run_cli("report", str(tmp_path / "nope.json"), "-o", str(a_file / "r.html")), "cannot write")
    _one_line_error(run_cli("report", str(recording("01_linear.eager")), "-o", str(tmp_path)), "is a folder")
    assert not list(tmp_path.glob(".pg-*")), "no temporary files are left behind"


def test_a_step_the_trace_does_not_have_is_one_line(tmp_path):
    _one_line_error(run_cli("report", str(recording("01_linear.eager")), "-o", str(tmp_path / "r.html"),
                            "--step", "9"), "no step 9", "2, 3, 4")


def test_counts_per_step_print_as_integers_when_whole():
    from profiling_guide.report.html import _count

    assert _count(29.0) == "29" and _count(1.0) == "1" and _count(4 / 3) == "1.33" and _count(3) == "3"
