"""One writer for every file the guide makes: whole or nothing, readable by a web server, through symlinks, no NaN."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest

from quick_python import quick_python
from profiling_guide import files
from profiling_guide.errors import GuideError
from profiling_guide.measure import bench_cli, bench_records
from profiling_guide.pages import recordings


@pytest.fixture
def umask():
    """Set the process umask for one test, and put the old one back."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def strict_json(path):
    return json.loads(open(path).read(), parse_constant=lambda c: pytest.fail(f"non-standard token {c}"))


WRITERS = {
    "files": files.write_json_atomic,
    "recordings": recordings.write_json_atomic,
    "bench_records": bench_records.write_json_atomic,
}


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_every_writer_gives_the_mode_a_plain_open_would(tmp_path, umask, write):
    target = tmp_path / "out.json"
    write(target, {"a": 1})
    assert mode(target) == 0o644
    umask(0o027)
    target.chmod(0o600)  # what the old writers left behind: replaced by a readable file
    write(target, {"a": 2})
    assert mode(target) == 0o640 and strict_json(target) == {"a": 2}


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_every_writer_writes_nan_and_infinity_as_null_and_says_where(tmp_path, write):
    target = tmp_path / "out.json"
    where = write(target, {"us": {"eager": math.nan, "fused": 1.5}, "rates": [math.inf, -math.inf, 2]})
    assert strict_json(target) == {"us": {"eager": None, "fused": 1.5}, "rates": [None, None, 2]}
    assert sorted(where) == ["$.rates[0]", "$.rates[1]", "$.us.eager"]


def test_writing_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "data.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(os.path.relpath(real, tmp_path))
    files.write_json_atomic(link, {"via": "link"})
    assert link.is_symlink() and strict_json(real) == {"via": "link"}
    assert sorted(p.name for p in real_dir.iterdir()) == ["data.json"]  # no temporary file left behind


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new" / "data.json")
    files.write_bytes_atomic(link, b"hello")
    assert link.is_symlink() and (tmp_path / "new" / "data.json").read_bytes() == b"hello"


@pytest.mark.parametrize("where", ["/dev/null", "folder", "fifo"])
def test_a_target_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, where):
    if where == "folder":
        where = tmp_path
    elif where == "fifo":
        where = tmp_path / "fifo"
        os.mkfifo(where)
    with pytest.raises(GuideError, match="not a regular file") as err:
        files.write_json_atomic(where, {"a": 1})
    assert "\n" not in str(err.value)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # still the device it was


def test_a_path_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(GuideError, match="cannot write .*file/sub/out.json"):
        files.write_json_atomic(tmp_path / "file" / "sub" / "out.json", {})
    with pytest.raises(GuideError, match="cannot write"):
        files.check_writable(tmp_path / "file" / "out.json")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    files.write_json_atomic(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with files.atomic_output(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert strict_json(target) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_the_bench_checks_its_json_path_before_touching_a_gpu(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for bad in ("/dev/null", str(tmp_path / "file" / "out.json")):
        assert bench_cli.main(["--json", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: cannot write {bad}") and err.count("\n") == 1
    assert bench_cli.main(["--json", str(tmp_path / "ok.json")]) == 2
    assert "none is visible" in capsys.readouterr().err  # a good path gets as far as the GPU check
    assert not (tmp_path / "ok.json").exists()


def test_the_profiler_trace_is_written_readable_and_through_a_symlink(tmp_path, umask):
    torch = pytest.importorskip("torch")
    from profiling_guide.measure.capture import profile_to_trace

    real = tmp_path / "recordings" / "x.trace.json.gz"
    link = tmp_path / "x.trace.json.gz"
    link.symlink_to(real)
    profile_to_trace(lambda: torch.ones(4) + 1, link, label="x")
    assert link.is_symlink() and mode(real) == 0o644 and real.read_bytes()[:2] == b"\x1f\x8b"


# ------------------------------------------------ only a regular file or a new path, never an input
def _device(tmp_path):
    """A character device like /dev/null, made in tmp_path (root only), so a failing guard harms nothing."""
    if os.geteuid() != 0:
        pytest.skip("only root can make a device node")
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return dev


def _socket(tmp_path):
    import socket

    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return path, server


@pytest.mark.parametrize("kind", ["device", "fifo", "socket", "link to a fifo", "link to a device"])
def test_no_writer_replaces_a_device_fifo_or_socket(tmp_path, kind):
    server = None
    if "device" in kind:
        special = _device(tmp_path)
    elif "fifo" in kind:
        special = tmp_path / "fifo"
        os.mkfifo(special)
    else:
        special, server = _socket(tmp_path)
    path = special
    if kind.startswith("link"):
        path = tmp_path / "out.html"
        path.symlink_to(special)
    before = os.lstat(special).st_mode
    try:
        for write in (lambda: files.write_json_atomic(path, {}), lambda: files.write_text_atomic(path, "x"),
                      lambda: files.write_bytes_atomic(path, b"x"), lambda: files.move_into_place(__file__, path)):
            with pytest.raises(GuideError, match="not a regular file") as err:
                write()
            assert "\n" not in str(err.value)
    finally:
        if server is not None:
            server.close()
    assert os.lstat(special).st_mode == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({special.name, path.name})  # no temporary left


def test_dev_null_stays_a_device():
    with pytest.raises(GuideError, match="it is a device, not a regular file"):
        files.target_of("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_an_input_is_never_the_output_however_it_is_named(tmp_path, monkeypatch):
    source = tmp_path / "t.json.gz"
    source.write_bytes(b"trace")
    link = tmp_path / "link.html"
    link.symlink_to(source)
    hard = tmp_path / "hard.html"
    os.link(source, hard)
    monkeypatch.chdir(tmp_path)
    for out in (source, link, hard, "./t.json.gz", tmp_path / "sub" / ".." / "t.json.gz"):
        with pytest.raises(GuideError, match="which this command reads and would replace"):
            files.write_text_atomic(out, "<html>", inputs=[source])
    assert source.read_bytes() == b"trace" and link.is_symlink()
    files.write_text_atomic(tmp_path / "other.html", "<html>", inputs=[source, None, tmp_path / "missing"])


def test_text_that_utf8_cannot_hold_is_written_not_a_traceback(tmp_path):
    files.write_text_atomic(tmp_path / "a.html", "name \ud800 here")
    assert (tmp_path / "a.html").read_text() == "name ? here"


def _run_cli(*argv, cwd=None):
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([quick_python(), "-m", "profiling_guide.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "docs" / "recordings" / "nvidia-h100-80gb-hbm3" / "01_linear.eager.trace.json.gz"


def _one_line(result, fragment):
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert fragment in result.stderr


def test_report_refuses_dev_null_its_trace_its_rates_and_its_run_record(tmp_path):
    _one_line(_run_cli("report", str(TRACE), "-o", "/dev/null"), "it is a device")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    trace = tmp_path / "x.trace.json.gz"
    trace.write_bytes(TRACE.read_bytes())
    record = tmp_path / "x.run.json"
    record.write_text('{"versions": {"torch": "2.11"}}')
    rates = tmp_path / "rates.json"
    rates.write_text('{"gemm_tflops": 700}')
    before = {p: p.read_bytes() for p in (trace, record, rates)}
    for out in (trace, record, rates):
        _one_line(_run_cli("report", str(trace), "-o", str(out), "--rates", str(rates)), "this command reads")
    assert {p: p.read_bytes() for p in before} == before


def test_bench_load_keep_and_profile_refuse_what_is_not_a_file_before_any_work(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_line(_run_cli("bench-load", "--keep", str(fifo), "--events", "10"), "FIFO")
    _one_line(_run_cli("bench-load", "--keep", str(tmp_path), "--events", "10"), "folder")
    _one_line(_run_cli("profile", "x.py:step", "-o", str(tmp_path), "--name", "../escape"), "not a file name")
    step = tmp_path / "step.py"
    step.write_text("def step():\n    pass\n")
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "step.report.html")
    _one_line(_run_cli("profile", f"{step}:step", "-o", str(tmp_path / "out")), "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_chapter_moves_its_trace_only_onto_a_file(tmp_path):
    exported = tmp_path / "partial.trace.json.gz"
    exported.write_bytes(b"x")
    os.mkfifo(tmp_path / "fifo.trace.json.gz")
    with pytest.raises(GuideError, match="FIFO"):
        files.move_into_place(exported, tmp_path / "fifo.trace.json.gz")
    files.move_into_place(exported, tmp_path / "new" / "x.trace.json.gz")
    assert (tmp_path / "new" / "x.trace.json.gz").read_bytes() == b"x" and not exported.exists()
