"""Replay trusts only checked input: run records, the GPU folder name and the sizes an example is given."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from profiling_guide.errors import GuideError
from profiling_guide.pages import recordings
from profiling_guide.pages.args import add_mlp_flags, example_parser
from profiling_guide.sizes import MAX_SIZE
from profiling_guide.pages.chapter import Chapter
from profiling_guide.trace.run_record import read_run_record

NAME = "01_linear.eager"


@pytest.fixture
def folder(tmp_path):
    """A recordings root with one GPU folder holding a copy of one real recording."""
    src = recordings.default_root() / recordings.DEFAULT_GPU
    dst = tmp_path / recordings.DEFAULT_GPU
    dst.mkdir()
    for suffix in (".run.json", ".trace.json.gz"):
        shutil.copy(src / f"{NAME}{suffix}", dst / f"{NAME}{suffix}")
    return dst


ARGS = json.loads((recordings.default_root() / recordings.DEFAULT_GPU / f"{NAME}.run.json").read_text())["args"]


def replay(folder, step=None):
    chapter = Chapter("01_linear", ARGS, mode="replay", root=folder.parent)
    return chapter.capture("eager", step or (lambda: None), label="linear_fwd")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"fingerprint": ', "is not valid JSON (Expecting value at line 1, column 17)"),
        ("", "is not valid JSON"),
        ("[1, 2]", "a run record is a JSON object, got a list"),
        ("null", "a run record is a JSON object, got null"),
        ('{"fingerprint": 5}', "'fingerprint' must be a string, got a number"),
        ('{"gpu": "H100"}', "'gpu' must be an object or null, got a string"),
        ('{"timings": [1]}', "'timings' must be an object, got a list"),
        ('{"values": true}', "'values' must be an object or a list, got a boolean"),
        ("[" * 100_000, "nests JSON values deeper than a run record does"),
    ],
    ids=range(9),
)
def test_a_bad_run_record_is_one_line_naming_the_file(folder, text, message):
    (folder / f"{NAME}.run.json").write_text(text)
    with pytest.raises(GuideError) as err:
        replay(folder)
    assert message in str(err.value) and f"{NAME}.run.json" in str(err.value) and "\n" not in str(err.value)


def test_a_run_record_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "x.run.json"
    path.write_bytes(b'{"name": "\xff"}')
    with pytest.raises(GuideError, match="is not UTF-8 text"):
        read_run_record(path)


def test_the_banner_reads_run_records_through_the_same_check(folder):
    (folder / "01_linear.zzz.run.json").write_text("{")
    (folder / f"{NAME}.run.json").unlink()
    chapter = Chapter("01_linear", {}, mode="replay", root=folder.parent)
    with pytest.raises(GuideError, match="is not valid JSON"):
        chapter.banner().text()


def test_a_stale_recording_says_so_on_stdout_where_the_page_shows_it(folder, capsys, monkeypatch):
    with pytest.warns(UserWarning, match="is stale"):
        rec = replay(folder, step=lambda: "other code")
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("WARNING:")]
    assert rec.stale and len(lines) == 1
    assert lines[0].startswith(f"WARNING: recording {NAME} is stale:") and "PROFILING_GUIDE_MODE=live" in lines[0]
    monkeypatch.setenv("PROFILING_GUIDE_STALE", "error")
    with pytest.raises(recordings.StaleRecordingError):
        replay(folder, step=lambda: "other code")


@pytest.mark.parametrize("slug", ["../nvidia-h100-80gb-hbm3", "/etc", "a/b", "NVIDIA H100", "-x", "x" * 200, "h100\n"])
def test_the_gpu_variable_takes_only_a_folder_name(folder, monkeypatch, slug):
    monkeypatch.setenv("PROFILING_GUIDE_GPU", slug)
    with pytest.raises(GuideError, match="is not a GPU folder name") as err:
        Chapter("01_linear", {}, mode="replay", root=folder.parent)
    assert "\n" not in str(err.value)


def test_a_good_gpu_slug_picks_its_folder(folder, monkeypatch):
    monkeypatch.setenv("PROFILING_GUIDE_GPU", recordings.DEFAULT_GPU)
    assert Chapter("01_linear", {}, mode="replay", root=folder.parent).folder == folder


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch", str(10**23)], f"argument --batch: {10**23} is larger than any size an example can run (at most {MAX_SIZE})"),
        (["--batch", "1" * 5000], "is not a whole number"),
        (["--batch", str(MAX_SIZE), "--seq", str(MAX_SIZE)], "--batch × --seq × --dim × --hidden = "),
    ],
    ids=["huge", "digits", "product"],
)
def test_absurd_sizes_are_one_line_errors(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # example_parser installs its own
    parser = add_mlp_flags(example_parser("test"))
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit_.value.code == 2 and len(errors) == 1 and message in errors[0]
    assert len(errors[0]) < 300


def test_the_largest_sizes_that_fit_are_accepted(monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    args = add_mlp_flags(example_parser("test")).parse_args(["--batch", str(MAX_SIZE)])
    assert args.batch == MAX_SIZE


def test_the_bench_refuses_absurd_sizes_in_one_line(capsys):
    from profiling_guide.measure import bench_cli

    with pytest.raises(SystemExit):
        bench_cli.main(["--batch", str(10**23)])
    err = capsys.readouterr().err
    assert "is larger than any size this benchmark can run" in err and "Traceback" not in err


def test_replaying_a_recording_opens_no_socket(folder, monkeypatch, capsys):
    import socket

    from profiling_guide.cli import summarize
    from profiling_guide.pages.tables import kernel_table, op_table

    def refuse(*args, **kwargs):
        raise AssertionError("replay tried to open a network connection")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.warns(UserWarning, match="is stale"):  # stale on purpose: the warning path too
        rec = replay(folder, step=lambda: "other code")
    trace = rec.trace
    assert summarize(trace)["steps"] == 3 and len(kernel_table(trace)) and len(op_table(trace))
    assert "Replayed from a recording" in Chapter("01_linear", ARGS, mode="replay", root=folder.parent).banner().text()
