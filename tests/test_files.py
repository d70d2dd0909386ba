"""One writer for every file the guide makes: whole or nothing, readable by a web server, through symlinks, no NaN."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

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
