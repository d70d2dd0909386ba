"""The run report over 8, 64 and 512 ranks: time and memory grow linearly in the ranks.

The runs are built from the four ranks of ``docs/samples/h100x4/ddp_straggler``:
rank ``i`` is a copy of fixture rank ``i % 4`` whose ``distributedInfo``
says rank ``i`` of ``n`` and whose ``record_param_comms`` ops name a group of
``n``. Each copy keeps what the report reads of a rank (its steps and
``record_function`` labels, its collectives, its kernels and their launches:
about 640 of the fixture's 4,900 events), so 584 ranks are read in seconds;
loaded, a copy still takes about 400 KiB, twice what one more rank may add
to the peak memory. Each report runs in a fresh Python that measures its own
wall time and CPU time around ``write_run_report`` and its peak resident
memory; the figures print with ``pytest -s``. Linearity is asserted on CPU
time, which other processes on a shared machine disturb less than wall time.
"""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import profiling_guide

FIXTURE = Path(__file__).resolve().parents[1] / "docs" / "samples" / "h100x4" / "ddp_straggler"
SIZES = (8, 64, 512)
#: CPU time per rank at 512 ranks may exceed that at 64 by this factor.
TIME_SLACK = 1.6
#: What one more rank may add to the peak memory: its summary, not its trace (one trace is ~30 MiB loaded).
KIB_PER_RANK = 200

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from profiling_guide.report.run_html import write_run_report
from profiling_guide.trace.run import trace_files
folder, out = Path(sys.argv[1]), Path(sys.argv[2])
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
start, cpu_start = time.perf_counter(), cpu()
write_run_report(trace_files([folder]), out, progress=False)
seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
with open("/proc/self/status") as status:  # its own peak: ru_maxrss may count the process it was forked from
    peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_kib": peak_kib}))
"""


def what_the_report_reads(events: list[dict]) -> list[dict]:
    """A rank's steps and labels, its collectives (``record_param_comms``), its kernels and their launches."""
    launched = {ev["args"].get("correlation") for ev in events if ev.get("cat") == "kernel"}
    return [ev for ev in events if ev.get("cat") in ("kernel", "user_annotation")
            or ev.get("cat") == "cpu_op" and ev.get("name") == "record_param_comms"
            or ev.get("cat") in ("cuda_runtime", "cuda_driver") and ev.get("args", {}).get("correlation") in launched]


def _rank_events(rank: int, n: int) -> str:
    with gzip.open(FIXTURE / f"rank{rank}.trace.json.gz", "rt") as f:
        data = json.load(f)
    events = what_the_report_reads(data["traceEvents"])
    for ev in events:
        if ev.get("name") == "record_param_comms":
            ev["args"]["Group size"] = n
            ev["args"]["Process Group Ranks"] = str(list(range(n)))
    meta = {k: v for k, v in data.items() if k != "traceEvents"}
    return json.dumps(events, separators=(",", ":")), meta


def build_run(folder: Path, n: int) -> Path:
    """``n`` rank traces in ``folder``, copies of the four fixture ranks (see the module docstring)."""
    folder.mkdir(parents=True)
    sources = [_rank_events(r, n) for r in range(4)]
    for i in range(n):
        events, meta = sources[i % 4]
        dist = dict(meta["distributedInfo"], rank=i, world_size=n,
                    pg_config=[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": n,
                                "ranks": list(range(n))}])
        head = json.dumps({**meta, "distributedInfo": dist}, separators=(",", ":"))[:-1]
        with gzip.open(folder / f"rank{i}.trace.json.gz", "wt", compresslevel=1) as f:
            f.write(head + ',"traceEvents":' + events + "}")
    return folder


def report_in_child(folder: Path, out: Path) -> dict:
    src = str(Path(profiling_guide.__file__).resolve().parents[1])
    result = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(out)], capture_output=True, text=True,
                            env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"}, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    found = {}
    for n in SIZES:
        folder = build_run(root / f"ranks{n}", n)
        found[n] = report_in_child(folder, root / f"ranks{n}.html")
        found[n]["page"] = (root / f"ranks{n}.html").read_text()
        print(f"\n{n} ranks: {found[n]['seconds']:.1f} s wall, {found[n]['cpu_seconds']:.1f} s CPU "
              f"({1000 * found[n]['cpu_seconds'] / n:.1f} ms CPU per rank), "
              f"peak memory {found[n]['peak_kib'] / 1024:.0f} MiB", end="")
        for path in folder.iterdir():
            path.unlink()  # 512 traces are ~60 MiB of disk: give it back before the next size
    return found


def test_512_ranks_name_the_copies_of_rank_3_as_the_ranks_the_others_wait_for(figures):
    page = figures[512]["page"]
    assert "Rank 3 keeps the others waiting" in page
    assert "512 ranks" in page and "<canvas" in page
    assert len(page) < 1_500_000  # a table row per rank, a timeline of 8 ranks: not a trace's worth


def test_time_grows_linearly_in_the_ranks(figures):
    per_rank = {n: figures[n]["cpu_seconds"] / n for n in SIZES}
    assert per_rank[512] <= TIME_SLACK * per_rank[64], per_rank


def test_memory_grows_by_a_summary_per_rank_not_a_trace(figures):
    grown_kib = figures[512]["peak_kib"] - figures[64]["peak_kib"]
    assert grown_kib <= KIB_PER_RANK * (512 - 64), (figures[64]["peak_kib"], figures[512]["peak_kib"])
    assert figures[512]["peak_kib"] < 1.5 * 2**20  # under 1.5 GiB on a machine with 24
