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
import signal
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
