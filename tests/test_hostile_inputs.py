"""A corpus of hostile inputs, made at test time, through every command: no traceback, no hang, no harm.

Each trace, run record and rates file below is something a user could hand
the tools by mistake or on purpose: damaged or disguised files, JSON at and
past Python's limits, names built to break a terminal or a page, gzip bombs,
devices and FIFOs. Every command that reads them (``summarize``, ``report``,
``decode``; ``profile`` and ``bench-load`` for their arguments) must answer
with a result or one ``error:`` line (exit 2), within a time limit, with its
memory bounded, and leave every input byte for byte as it was.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiling_guide.cli import main
from profiling_guide.errors import GuideError
from profiling_guide.trace.reader import MAX_VALUE_CHARS

ROOT = Path(__file__).resolve().parents[1]
STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100}
OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50,
      "args": {"Input Dims": [[4, 8], [8, 16]]}}
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
          "args": {"correlation": 7}}
KERNEL = {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_128x64_64x4_1x1_v_bz_TNT", "pid": 0, "tid": 7,
          "ts": 30, "dur": 12.5, "args": {"correlation": 7, "stream": 7, "grid": [2, 1, 1], "block": [128, 1, 1]}}
HOSTILE_NAMES = [
    "<!--<script>window.pwned=1</script>", "</script><script>window.pwned=1</script>", "<script>",
    '<img src=x onerror="window.pwned=1">', "a\u2028b\u2029c", "x]]><![CDATA[", "-->", "&lt;&amp;",
    "\x1b[2J\x1b[31mred", "\u202eevil\u202c", "\ufeffbom", "(" * 500 + "a*" * 200, "k" * 100_000, "",
]


def _events(**kernel) -> list:
    return [STEP, OP, LAUNCH, {**KERNEL, **kernel}]


def _trace(events=None, **top) -> str:
    return json.dumps({"traceEvents": _events() if events is None else events, **top})


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9)


def _stream_gz(path: Path, pieces) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as f:
        for piece in pieces:
            f.write(piece)


def _surrogate(text: str) -> str:
    return text.replace('"aten::mm"', '"aten::\\ud800mm"').replace('"cudaLaunchKernel"', '"\\udfffcuda"')


#: name -> bytes of a trace file (".gz" in the name: gzipped)
TRACES: dict[str, bytes] = {
    "valid.json": _trace().encode(),
    "valid.json.gz": _gz(_trace().encode()),
    "empty.json": b"",
    "truncated.json.gz": _gz(_trace().encode())[:-20],
    "bad_crc.json.gz": _gz(_trace().encode())[:-8] + b"\0\0\0\0" + _gz(_trace().encode())[-4:],
    "not_gzip.json.gz": b"\x1f\x8bnot really gzip",
    "bom.json": b"\xef\xbb\xbf" + _trace().encode(),
    "utf16.json": _trace().encode("utf-16"),
    "latin1.json": _trace(events=_events(name="caf\xe9")).encode("latin-1"),
    "number.json": b"42",
    "string.json": b'"traceEvents"',
    "null.json": b"null",
    "no_events.json": b'{"schemaVersion": 1}',
    "events_not_list.json": b'{"traceEvents": {"a": 1}}',
    "two_event_lists.json": b'{"traceEvents": [], "traceEvents": []}',
    "deep.json": b"[" * 100_000,
    "deep_args.json": _trace(events=[STEP, {**OP, "args": {"x": "DEEP"}}]).replace('"DEEP"', "[" * 50_000 + "]" * 50_000).encode(),
    "big_int_ts.json": _trace(events=[STEP, {**OP, "ts": "BIG"}]).replace('"BIG"', "1" * 5000).encode(),
    "big_int_metadata.json": _trace(baseTimeNanoseconds="BIG").replace('"BIG"', "9" * 4299).encode(),
    "big_int_args.json": _trace(events=_events(args={"correlation": 7, "stream": "BIG"})).replace('"BIG"', "7" * 6000).encode(),
    "huge_memory_field.json": _trace(deviceProperties=[{"name": "GPU", "totalGlobalMem": "BIG"}]).replace('"BIG"', "8" * 4000).encode(),
    "nan_ts.json": _trace(events=[STEP, {**OP, "ts": "NAN"}]).replace('"NAN"', "NaN").encode(),
    "infinite_dur.json": _trace(events=[STEP, {**OP, "dur": "INF"}]).replace('"INF"', "Infinity").encode(),
    "boolean_ts.json": _trace(events=[STEP, {**OP, "ts": True}]).encode(),
    "string_dur.json": _trace(events=[STEP, {**OP, "dur": "50"}]).encode(),
    "negative_dur.json": _trace(events=[STEP, {**OP, "dur": -5}]).encode(),
    "lone_surrogates.json.gz": _gz(_surrogate(_trace()).encode()),
    "surrogate_metadata.json": _trace(deviceProperties=[{"name": "SURR"}]).replace('"SURR"', '"GPU\\udc80"').encode(),
    "surrogate_key.json": _trace(extra={"K": 1}).replace('"K"', '"\\ud800"').encode(),
    "metadata_wrong_types.json": _trace(deviceProperties=[{"name": 5, "totalGlobalMem": "lots", "computeMajor": [],
                                                           "numSms": {}}, 7], distributedInfo="x",
                                        cuda_runtime_version="13", baseTimeNanoseconds=1e300).encode(),
    "duplicate_correlation.json": json.dumps({"traceEvents": [STEP, OP, LAUNCH, LAUNCH, KERNEL, KERNEL]}).encode(),
    "looping_flows.json": json.dumps({"traceEvents": _events() + [
        {"ph": "s", "cat": "fwdbwd", "id": 1, "tid": 1, "ts": 10}, {"ph": "f", "cat": "fwdbwd", "id": 1, "tid": 1, "ts": 10},
        {"ph": "f", "cat": "fwdbwd", "id": 1, "tid": 1, "ts": 10}]}).encode(),
    "missing_fields.json": json.dumps({"traceEvents": [{"ph": "X"}, {"cat": "kernel"}, {}]}).encode(),
    **{f"hostile_name_{i}.json": _trace(events=_events(name=name) + [{**OP, "name": name, "ts": 60, "dur": 1}],
                                        deviceProperties=[{"name": name}], distributedInfo={"backend": name}).encode()
       for i, name in enumerate(HOSTILE_NAMES)},
}

#: name -> text of the .run.json beside valid.trace.json.gz, or of a --rates file
RECORDS: dict[str, str] = {
    "versions_string.json": '{"versions": "2.9"}',
    "a_list.json": "[1, 2]",
    "timings_string.json": '{"timings": "x"}',
    "timings_bad_median.json": '{"timings": {"cpu_issue_us": {"median": "fast"}}}',
    "deep.json": "[" * 200_000,
    "rates_infinity.json": '{"rates": {"gemm_tflops": Infinity}}',
    "rates_nan.json": '{"values": {"gemm_tflops": NaN}}',
    "rates_true.json": '{"values": {"gemm_tflops": true}}',
    "rates_string.json": '{"gemm_tflops": "700"}',
    "rates_negative.json": '{"rates": {"copy_tbps": {"median": -3}}}',
    "rates_huge_int.json": '{"gemm_tflops": ' + "9" * 400 + "}",
    "rates_5000_digits.json": '{"gemm_tflops": ' + "9" * 5000 + "}",
    "gpu_name_number.json": '{"gpu": {"name": 5}}',
    "versions_nested.json": '{"versions": {"torch": {"a": 1}}}',
    "surrogates.json": '{"versions": {"torch": "2.\\ud800"}, "label": "\\udfff", "gemm_tflops": 700}',
    "bom.json": "\ufeff" + '{"gemm_tflops": 700}',
    "not_json.json": "{nope",
    "empty.json": "",
}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for name, data in TRACES.items():
        (folder / name).write_bytes(data)
    records = folder / "records"
    records.mkdir()
    for name, text in RECORDS.items():
        (records / name).write_bytes(text.encode("utf-8", "surrogatepass"))
    os.mkfifo(folder / "fifo.json")
    (folder / "loop.json").symlink_to(folder / "loop.json")
    (folder / "\udcff-undecodable-name.json").write_bytes(TRACES["valid.json"])  # a name that is not UTF-8
    (folder / "folder.json").mkdir()
    return folder


def every_input(folder: Path) -> dict[Path, str]:
    return {p: sha(p) for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@contextlib.contextmanager
def time_limit(seconds: int):
    """Fail (not hang) if the block runs longer than ``seconds``."""
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run(*argv) -> tuple[int, str, str]:
    """The command in this process: (status, stdout, stderr); argparse's own exits count as status 2."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit(60):
        try:
            status = main([str(a) for a in argv])
        except SystemExit as exc:
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def assert_clean(status, out, err) -> None:
    assert "Traceback" not in err, err
    if status == 0:
        return
    assert status == 2, (status, err)
    lines = err.strip().splitlines()
    # ours: one line; argparse's: its usage line(s), then one error line
    assert lines and (len(lines) == 1 or lines[0].startswith("usage:")), err
    assert lines[-1].startswith(("error: ", "profiling-guide")) and "error:" in lines[-1], err


def trace_inputs() -> list[str]:
    return [*TRACES, "fifo.json", "loop.json", "\udcff-undecodable-name.json", "folder.json", "missing.json",
            "/dev/zero", "/dev/null"]


@pytest.mark.parametrize("name", trace_inputs(), ids=lambda n: n.encode("ascii", "backslashreplace").decode())
def test_every_command_answers_every_trace_in_one_line_and_touches_nothing(corpus, name, tmp_path):
    path = Path(name) if name.startswith("/") else corpus / name
    before = every_input(corpus)
    for argv in (["summarize", path], ["summarize", path, "--json"], ["report", path, "-o", tmp_path / "r.html"]):
        status, out, err = run(*argv)
        assert_clean(status, out, err)
        if argv[0] == "summarize" and status == 0:
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\ud800-\udfff]", out), "a name reached the terminal raw"
    if status == 0:
        check_report_page((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert every_input(corpus) == before


@pytest.mark.parametrize("name", list(RECORDS))
def test_a_bad_run_record_or_rates_file_is_one_line_or_left_out(corpus, name, tmp_path):
    record = corpus / "records" / name
    trace = tmp_path / "t.trace.json.gz"
    trace.write_bytes(TRACES["valid.json.gz"])
    sibling = tmp_path / "t.run.json"
    sibling.write_bytes(record.read_bytes())
    before = {p: sha(p) for p in (record, trace, sibling)}
    status, out, err = run("report", trace, "-o", tmp_path / "r.html", "--rates", record)
    assert_clean(status, out, err)
    accepted = status == 0
    # Beside the trace the same file never stops the report: it is read, or left out with a warning.
    status, out, err = run("report", trace, "-o", tmp_path / "r2.html")
    assert status == 0 and "Traceback" not in err, err
    page = (tmp_path / "r2.html").read_text(encoding="utf-8")
    check_report_page(page)
    if err:
        assert err.startswith("warning: ") and err.count("\n") == 1 and "run record left out" in page
    # only a positive finite rate is taken, never a boolean, NaN, infinity, a string or a 400-digit number
    assert accepted == (name in ("surrogates.json", "bom.json")), (name, err)
    assert {p: sha(p) for p in before} == before


@pytest.mark.parametrize("rates", ["/dev/zero", "fifo.json", "folder.json", "missing.json", "big"])
def test_rates_that_are_not_a_small_file_are_refused_without_reading_them(corpus, rates, tmp_path):
    if rates == "big":
        path = tmp_path / "big.json"
        path.write_bytes(b'{"pad": "' + b"x" * (17 * 2**20) + b'"}')
    else:
        path = Path(rates) if rates.startswith("/") else corpus / rates
    status, out, err = run("report", corpus / "valid.json", "-o", tmp_path / "r.html", "--rates", path)
    assert_clean(status, out, err)
    assert status == 2


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_decode_prints_any_name_on_one_line_per_field(name):
    status, out, err = run("decode", name or " ")
    assert_clean(status, out, err)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e]", out)


PROFILE_ARGS = [[], ["nocolon"], ["missing.py:step"], ["os:getcwd"], ["json:nothing"], ["x:y", "--steps", "0"],
                ["x:y", "--steps", "abc"], ["x:y", "-o"], ["x:y", "--name", ".."], ["x:y", "--name", "a/b"],
                ["x:y", "--compile", "--steps", "-3"], ["\udcff:step"]]


@pytest.mark.parametrize("argv", PROFILE_ARGS, ids=lambda a: " ".join(a).encode("ascii", "backslashreplace").decode())
def test_profile_argument_errors_are_one_line(argv, tmp_path):
    status, out, err = run("profile", *argv, *(["-o", tmp_path / "out"] if "-o" not in argv else []))
    assert_clean(status, out, err)
    assert status == 2


BENCH_LOAD_ARGS = [["--events", "0"], ["--events", "abc"], ["--events", "1" * 5000], ["--runs", "-1"],
                   ["--keep", "/dev/null"], ["--keep", "/"], ["--nope"], ["--events"]]


@pytest.mark.parametrize("argv", BENCH_LOAD_ARGS, ids=lambda a: " ".join(a)[:40])
def test_bench_load_flag_errors_are_one_line(argv):
    status, out, err = run("bench-load", *argv)
    assert_clean(status, out, err)
    assert status == 2


# ----------------------------------------------------------- the page stays whole
SECTIONS = ["pace", "environment", "steps", "timeline", "kernels", "ops", "memory", "health"]


class _Structure(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.sections, self.stack, self.json = [], [], [], []

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts.append(dict(attrs).get("type", "text/javascript"))
        if tag == "section":
            self.sections.append(dict(attrs).get("id"))
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "script" and self.scripts[-1] == "application/json":
            self.json.append(data)


def check_report_page(page: str) -> dict:
    """The report's structure survives whatever the trace held: its sections, its two scripts, its data."""
    parsed = _Structure()
    parsed.feed(page)
    assert [s for s in SECTIONS if s in parsed.sections] == SECTIONS, parsed.sections
    assert parsed.scripts == ["application/json", "text/javascript"], parsed.scripts  # nothing added
    payload = "".join(parsed.json)
    assert not set(payload) & {"<", ">", "&"}, "markup inside the data"
    return json.loads(payload)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.characters(codec=None), max_size=40), min_size=1, max_size=4))
def test_any_names_leave_the_page_whole_and_are_shown_as_they_are(tmp_path, names):
    events = [STEP, OP, LAUNCH]
    for i, name in enumerate(names):
        events.append({**KERNEL, "name": name, "ts": 30 + i, "args": {**KERNEL["args"], "correlation": 7}})
        events.append({**OP, "name": name, "ts": 61 + i, "dur": 1})
    path = tmp_path / "names.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")  # ensure_ascii: surrogates as \u escapes
    status, out, err = run("report", path, "-o", tmp_path / "names.html")
    assert status == 0, err
    data = check_report_page((tmp_path / "names.html").read_text(encoding="utf-8"))
    shown = set(data["strings"])
    for name in names:
        clean = re.sub("[\ud800-\udfff]", "\ufffd", name)
        assert clean in shown or clean[:399] + "…" in shown


# ------------------------------------------------- memory and time, in a process of its own
# Runs the command line as ``python -m profiling_guide.cli`` would, and writes its peak resident memory
# (VmHWM, KiB) to $PG_PEAK_FILE as it exits. The kernel's ru_maxrss will not do: a child's counts the
# memory of the test process it was forked from, before it ran python.
_CLI_WITH_PEAK = """
import atexit, os, runpy, sys

def peak():
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(os.environ["PG_PEAK_FILE"], "w") as out:
        out.write(str(kib))

atexit.register(peak)
runpy.run_module("profiling_guide.cli", run_name="__main__", alter_sys=True)
"""


def _peak(argv, tmp_path, timeout=120) -> tuple[int, str, float, float]:
    """(status, stderr, seconds, peak resident MiB) of the command in a fresh process."""
    peak_file = tmp_path / "peak_kib"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "PG_PEAK_FILE": str(peak_file)}
    start = time.perf_counter()
    try:
        child = subprocess.run([sys.executable, "-c", _CLI_WITH_PEAK, *map(str, argv)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv} still running after {timeout} s")
    peak = int(peak_file.read_text()) / 1024
    return child.returncode, child.stderr.decode(errors="replace"), time.perf_counter() - start, peak


BOMBS = {
    # a single JSON string longer than any event: refused at 16 MiB
    "string": lambda p: _stream_gz(p, [b'{"traceEvents": [{"name": "', *(b"A" * 2**20 for _ in range(40)), b'"}]}']),
    # kernel events repeated: 1,000 times smaller packed than unpacked
    "events": lambda p: _stream_gz(p, [b'{"traceEvents": [', *[(json.dumps(KERNEL).encode() + b",") * 1000] * 600,
                                       b"{}]}"]),
    # whitespace: a valid, empty trace
    "whitespace": lambda p: _stream_gz(p, [b'{"traceEvents": [', *(b" " * 2**20 for _ in range(200)), b"]}"]),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_gzip_bomb_is_refused_quickly_in_bounded_memory(bomb, tmp_path):
    path = tmp_path / f"{bomb}.json.gz"
    BOMBS[bomb](path)
    assert path.stat().st_size < 2 * 2**20
    before = sha(path)
    status, err, seconds, peak = _peak(["summarize", path], tmp_path)
    assert status == 2 and err.count("\n") == 1, err
    assert ("more than 16 MiB" in err) if bomb == "string" else ("gzip bomb" in err), err
    assert seconds < 60 and peak < 1024, (seconds, peak)
    assert sha(path) == before


def test_the_value_limit_is_far_above_any_real_event():
    longest = 0
    for path in (ROOT / "docs" / "recordings").glob("*/*.trace.json.gz"):
        for event in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
            longest = max(longest, len(json.dumps(event)))
    assert 0 < longest < MAX_VALUE_CHARS / 100


def test_the_corpus_is_what_the_docstring_says(corpus):
    assert len(TRACES) + len(RECORDS) >= 60
    with pytest.raises(GuideError):
        from profiling_guide.trace.model import Trace

        Trace.load(corpus / "deep.json")


# ------------------------------------------------ a run of several ranks, made hostile
# The traces of two H200 ranks, edited (each trace's JSON, then gzipped again): what a run's report reads of
# each rank's distributedInfo and deviceProperties, and what it writes (a page, the merged trace, its JSON).
RUN = ROOT / "tests" / "data" / "corpus" / "h200x2" / "ddp_host_stall_last"


def _edited_run(folder: Path, edit=None, raw=None) -> Path:
    """A copy of the two-rank run in ``folder``, each rank's data changed by ``edit(data, rank)``, or its JSON
    text by ``raw(text, rank)``."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        data = json.loads(gzip.decompress((RUN / f"rank{rank}.trace.json.gz").read_bytes()))
        if edit is not None:
            edit(data, rank)
        text = json.dumps(data)
        (folder / f"rank{rank}.trace.json.gz").write_bytes(_gz((raw(text, rank) if raw else text).encode()))
    return folder


def _world(size, *, groups=True, rank=None):
    """Every rank says a world of ``size`` (its process groups agreeing, or none listed); rank 1 says ``rank``."""
    def edit(data, r):
        info = data["distributedInfo"]
        info["world_size"] = size
        if not groups:
            del info["pg_config"]
        elif type(size) is int and 0 < size <= 64:
            info["pg_config"][0].update(pg_size=size, ranks=list(range(size)))
        if rank is not None and r == 1:
            info["rank"] = rank
    return edit


HOSTILE_RUNS = {
    "world_1e12": (_world(10**12), "world size of 1,000,000,000,000"),
    "world_1e7": (_world(10**7), "world size of 10,000,000"),
    "world_1e7_no_groups": (_world(10**7, groups=False), "world size of 10,000,000"),
    "world_0": (_world(0), "world size of 0"),
    "world_negative": (_world(-4), "world size of -4"),
    "world_8_groups_of_2": (lambda data, rank: data["distributedInfo"].update(world_size=8),
                            "largest process group holds 2"),
    "rank_-1": (_world(4, rank=-1), "is rank -1, which is not a rank of a world of 4"),
    "rank_100": (_world(4, rank=100), "is rank 100, which is not a rank of a world of 4"),
    "rank_1e18": (_world(4, rank=10**18), "is rank 1,000,000,000,000,000,000, which is not a rank"),
    "rank_no_world": (_world(None, groups=False, rank=10**18), "which is not a rank of any job"),
}


@pytest.mark.parametrize("case", list(HOSTILE_RUNS))
def test_a_run_whose_ranks_no_job_has_is_one_line_and_leaves_nothing(case, tmp_path):
    edit, words = HOSTILE_RUNS[case]
    run_dir = _edited_run(tmp_path / "run", edit)
    before = every_input(run_dir)
    out = tmp_path / "out"
    status, _, err = run("report", run_dir, "-o", out / "page" / "r.html", "--merge", out / "merged" / "m.json",
                         "--json", out / "r.json")
    assert_clean(status, "", err)
    assert status == 2 and words in err, err
    assert not out.exists(), "a failed run left the folders it made for its outputs"
    assert every_input(run_dir) == before


def test_a_world_of_ten_million_is_refused_in_bounded_memory(tmp_path):
    # Listing the ranks missing from a world of 10**7 took 1.2 GB, of 10**12 a MemoryError at 2.4 GB.
    run_dir = _edited_run(tmp_path / "run", _world(10**7, groups=False))
    status, err, seconds, peak = _peak(["report", run_dir, "-o", tmp_path / "r.html"], tmp_path)
    assert status == 2 and err.count("\n") == 1 and "world size of 10,000,000" in err, err
    assert peak < 600 and seconds < 60, (peak, seconds)


def test_ranks_on_different_gpus_are_each_named_on_the_page(tmp_path):
    def h100_for_rank_0(data, rank):
        if rank == 0:
            for device in data["deviceProperties"]:
                device["name"] = "NVIDIA H100 80GB HBM3"

    run_dir = _edited_run(tmp_path / "run", h100_for_rank_0)
    status, out, err = run("report", run_dir, "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert status == 0, err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "NVIDIA H100 80GB HBM3 (rank 0); NVIDIA H200 (rank 1)" in page
    assert "The ranks ran on different GPUs" in page
    assert json.loads((tmp_path / "r.json").read_text())["gpus"] == {"0": "NVIDIA H100 80GB HBM3", "1": "NVIDIA H200"}
    # one GPU for every rank is named once, as before
    status, out, err = run("report", RUN, "-o", tmp_path / "same.html")
    page = (tmp_path / "same.html").read_text(encoding="utf-8")
    assert status == 0 and "<th>GPU</th>" in page and "different GPUs" not in page and "(rank 0)" not in page


def _strict_json(path: Path):
    def refuse(constant):
        raise AssertionError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_no_nan_reaches_the_json_a_run_writes(tmp_path):
    def nan_and_untimed(text, rank):
        data = json.loads(text)
        op = next(e for e in data["traceEvents"] if e.get("cat") == "cpu_op")
        op["args"]["NAN_HERE"] = "NAN"
        data["traceEvents"].append({"ph": "i", "s": "t", "name": "marker", "pid": 1, "tid": 1, "ts": "NAN"})
        return json.dumps(data).replace('"NAN"', "NaN")

    run_dir = _edited_run(tmp_path / "run", raw=nan_and_untimed)
    status, out, err = run("report", run_dir, "-o", tmp_path / "r.html", "--merge", tmp_path / "m.json",
                           "--json", tmp_path / "r.json")
    assert status == 0, err
    merged = _strict_json(tmp_path / "m.json")
    assert merged["mergeNotes"] == [
        "rank 0: 1 event(s) left out, their ts or dur not a finite number",
        "rank 1: 1 event(s) left out, their ts or dur not a finite number",
        "rank 0: 1 NaN or infinite value(s) written as null", "rank 1: 1 NaN or infinite value(s) written as null"]
    assert sum(1 for e in merged["traceEvents"] if "NAN_HERE" in e.get("args", {})) == 2
    assert all(e.get("args", {}).get("NAN_HERE", None) is None for e in merged["traceEvents"])
    _strict_json(tmp_path / "r.json")
    status, out, err = run("summarize", run_dir / "rank0.trace.json.gz", "--json")
    assert status == 0 and "NaN" not in out


def test_a_failed_run_leaves_nothing_it_made(tmp_path):
    broken = tmp_path / "inputs" / "rank1.trace.json"
    broken.parent.mkdir()
    broken.write_text('{"traceEvents": [')  # cut short
    new = tmp_path / "new"
    status, out, err = run("report", RUN / "rank0.trace.json.gz", broken, "-o", new / "a" / "r.html",
                           "--merge", new / "b" / "m.json.gz", "--json", new / "c" / "r.json")
    assert_clean(status, out, err)
    assert status == 2 and "is not a JSON trace" in err
    assert not new.exists()
    # a folder that was there stays, empty as it was
    (tmp_path / "kept").mkdir()
    status, out, err = run("report", RUN / "rank0.trace.json.gz", broken, "-o", tmp_path / "kept" / "x" / "r.html")
    assert status == 2 and list((tmp_path / "kept").iterdir()) == []


def test_json_beside_the_traces_is_left_out_with_a_note(tmp_path):
    folder = tmp_path / "job"
    shutil.copytree(RUN, folder)
    shutil.copy(ROOT / "docs" / "samples" / "h100x4" / "cases.json", folder)
    (folder / "params.json").write_text('[{"rank": 0, "lr": 0.1}]')
    before = every_input(folder)
    status, out, err = run("report", folder, "-o", tmp_path / "r.html")
    assert status == 0, err
    assert err.splitlines() == [f"note: left out {folder / 'cases.json'}: it is not a Chrome trace (no 'traceEvents' list)",
                                f"note: left out {folder / 'params.json'}: it is a list of other things than trace events"]
    assert "2 traces given" in (tmp_path / "r.html").read_text(encoding="utf-8")
    # a glob is read the same way; a file named on its own is read as a trace, and refused as one
    status, out, err = run("report", str(folder / "*.json*"), "-o", tmp_path / "g.html")
    assert status == 0 and err.count("note: left out") == 2, err
    status, out, err = run("report", folder / "rank0.trace.json.gz", folder / "cases.json", "-o", tmp_path / "n.html")
    assert status == 2 and "cases.json is not a Chrome trace" in err and not (tmp_path / "n.html").exists()
    assert every_input(folder) == before


def test_summarize_reads_every_trace_of_a_folder(tmp_path):
    folder = tmp_path / "job"
    shutil.copytree(RUN, folder)
    shutil.copy(ROOT / "docs" / "samples" / "h100x4" / "cases.json", folder)
    status, out, err = run("summarize", folder)
    assert status == 0 and err.count("note: left out") == 1, err
    assert [line.split(":")[0] for line in out.splitlines() if "profiler steps" in line] == [
        str(folder / "rank0.trace.json.gz"), str(folder / "rank1.trace.json.gz")]
    status, out, err = run("summarize", folder, "--json")
    reports = json.loads(out)
    assert [r["source"] for r in reports] == [str(folder / f"rank{r}.trace.json.gz") for r in (0, 1)]
    assert all(r["kernels"] and r["steps"] == 2 for r in reports)
    # one file named: one object, as before
    status, out, err = run("summarize", folder / "rank1.trace.json.gz", "--json")
    assert status == 0 and json.loads(out)["kernels_per_step"] == reports[1]["kernels_per_step"]
    status, out, err = run("summarize", tmp_path / "nothing_here")
    assert_clean(status, out, err)
    assert status == 2


SWEEP_ROW = '{"op": "all_reduce", "bytes": BYTES, "us": 10, "busbw_GBps": 100}'
HOSTILE_SWEEPS = {
    "deep.json": ("[" * 100_000 + "]" * 100_000, "nests JSON values deeper"),
    "bytes_4000_digits.json": ('{"rows": [' + SWEEP_ROW.replace("BYTES", "9" * 4000) + "]}", "positive numbers"),
    "bytes_5000_digits.json": ('{"rows": [' + SWEEP_ROW.replace("BYTES", "9" * 5000) + "]}", "4,300 digits"),
    "bytes_true.json": ('{"rows": [' + SWEEP_ROW.replace("BYTES", "true") + "]}", "positive numbers"),
    "bytes_nan.json": ('{"rows": [' + SWEEP_ROW.replace("BYTES", "NaN") + "]}", "NaN, which is not JSON"),
    "world_400_digits.json": ('{"world_size": ' + "7" * 400 + ', "rows": [' + SWEEP_ROW.replace("BYTES", "1") + "]}",
                              "'world_size' must be a whole number of ranks"),
    "world_string.json": ('{"world_size": "8", "rows": [' + SWEEP_ROW.replace("BYTES", "1") + "]}",
                          "'world_size' must be a whole number of ranks"),
    "big.json": ('{"rows": [], "pad": "' + "x" * (17 * 2**20) + '"}', "over 16 MiB"),
    "not_json.json": ("{rows", "is not valid JSON"),
}


@pytest.mark.parametrize("name", [*HOSTILE_SWEEPS, "fifo.json", "/dev/zero", "folder.json", "missing.json"])
def test_a_hostile_nccl_sweep_is_one_line_without_hanging(corpus, name, tmp_path):
    if name in HOSTILE_SWEEPS:
        sweep = tmp_path / name
        sweep.write_text(HOSTILE_SWEEPS[name][0])
    else:
        sweep = Path(name) if name.startswith("/") else corpus / name
    status, out, err = run("report", RUN, "-o", tmp_path / "out" / "r.html", "--nccl-sweep", sweep)
    assert_clean(status, out, err)
    assert status == 2 and not (tmp_path / "out").exists()
    if name in HOSTILE_SWEEPS:
        assert HOSTILE_SWEEPS[name][1] in err, err


@pytest.mark.parametrize("argv, words", [
    (["-o", "P", "--merge", "P"], "-o and --merge both name P"),
    (["-o", "P", "--json", "./x/../P"], "-o and --json both name ./x/../P"),
    (["--merge", "M", "--json", "M"], "--merge and --json both name M"),
    (["--merge", "ddp_host_stall_last.report.html"], "the report page and --merge both name"),
    (["-o", ""], "-o names no file (an empty path)"),
    (["-o", " "], "-o names no file (an empty path)"),
    (["--merge", ""], "--merge names no file"),
    (["--json", ""], "--json names no file"),
    (["--nccl-sweep", ""], "--nccl-sweep names no file"),
    (["--rates", ""], "--rates names no file"),
    (["", "-o", "r.html"], "a trace's name is empty"),
])
def test_outputs_that_clash_or_name_nothing_are_one_line(argv, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    traces = [] if argv and argv[0] == "" else [RUN]
    status, out, err = run("report", *traces, *argv)
    assert_clean(status, out, err)
    assert status == 2 and words in err, err
    assert list(tmp_path.iterdir()) == [], "nothing is written"


def test_bench_nccl_checks_its_sizes_against_memory_before_allocating(tmp_path, monkeypatch):
    # One gloo rank in this process, with the host's memory said to be 1 MiB: 4 MiB (the buffer and its
    # shard: 8 MiB) does not fit, and is refused before any buffer exists. Were the check missing, the
    # buffers would be allocated and timed (8 MiB: harmless).
    torch = pytest.importorskip("torch")
    from profiling_guide.measure import bench_nccl

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(bench_nccl, "_torchrun_env", lambda: (0, 1, 0))  # bench-nccl asks for two ranks
    # init_process_group wraps sys.excepthook for good ("[rank0]: " before each line): put it back after
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(bench_nccl, "host_memory_available", lambda: 2**20)
    allocated = []
    monkeypatch.setattr(torch, "ones", lambda *a, **k: allocated.append(a) or pytest.fail("a buffer was allocated"))
    out = tmp_path / "sweeps" / "s.json"
    status, stdout, err = run("bench-nccl", "-o", out, "--backend", "gloo", "--sizes", "1MiB,4MiB", "--dtype",
                              "fp32", "--iters", "1", "--warmup", "1", "--repeats", "1")
    assert status == 2 and not allocated, err
    assert err.count("\n") == 1 and err.startswith("error: --sizes up to 4.0 MiB need 8.0 MiB per rank"), err
    assert "give smaller --sizes" in err and not (tmp_path / "sweeps").exists()
    assert not torch.distributed.is_initialized()
