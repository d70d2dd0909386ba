"""What the command line prints: names made safe for a terminal, quiet on a closed pipe, the load benchmark."""

from __future__ import annotations

import json
import subprocess

from quick_python import quick_python
from profiling_guide.cli import main, printable


def trace_with_kernels(path, names):
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "tid": 1, "ts": 0, "dur": 1e6}]
    for i, name in enumerate(names):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 10 + i,
                       "dur": 0.5, "args": {"correlation": i}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "tid": 7, "ts": 20 + i, "dur": 1,
                       "args": {"correlation": i, "stream": 7}})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_printable_escapes_control_and_invisible_characters():
    assert printable("a\x1b[31mb\x07c\u202ed\té名") == "a\\x1b[31mb\\x07c\\u202ed\\té名"


def test_summarize_escapes_terminal_sequences_in_kernel_names(tmp_path, capsys):
    path = trace_with_kernels(tmp_path / "evil.json", ["\x1b]0;pwned\x07\x1b[2Jkernel", "\u202enrettap"])
    assert main(["summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2Jkernel" in out and "\\u202enrettap" in out


def test_decode_escapes_them_too(capsys):
    assert main(["decode", "\x1b[31mmy_kernel"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.startswith("\\x1b[31mmy_kernel")


def test_decode_says_when_it_read_only_the_start_of_a_long_name(capsys):
    assert main(["decode", "triton_poi_fused_gelu_" + "x" * 10_000]) == 0
    assert "note       decoded the first 4,096 of 10,022 characters" in capsys.readouterr().out


def test_an_error_line_escapes_what_it_quotes(tmp_path, capsys):
    path = tmp_path / "bad\x1b[2J.json"
    path.write_text("{")
    assert main(["summarize", str(path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    # Enough output to fill the pipe, so the writer sees the reader leave.
    path = trace_with_kernels(tmp_path / "many.json", [f"kernel_{i:05d}_" + "x" * 200 for i in range(2000)])
    proc = subprocess.Popen([quick_python(), "-m", "profiling_guide.cli", "summarize", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and first.startswith(str(path).encode())
    assert err == ""


def test_bench_load_compares_with_json_load(capsys):
    assert main(["bench-load", "--events", "3000", "--runs", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert 2_900 < report["events"] < 3_100 and report["runs"] == 1
    for how in ("json_load", "trace_load"):
        assert report[how]["seconds"] > 0 and report[how]["peak_bytes"] >= 0
    assert {"time_vs_json_load", "memory_vs_json_load", "memory_vs_file"} <= set(report)
