"""``profiling-guide bench-nccl``: its arguments, and the sweep it writes, exercised on the CPU.

The real measurement runs NCCL on a machine's GPUs under ``torchrun``. Here
two processes of ``torch.distributed.run`` with the gloo backend run the
same code path on the CPU: the timings are meaningless, the file is real.
"""

import argparse
import os
import socket
import subprocess
from pathlib import Path

import pytest

from quick_python import quick_python
import profiling_guide
from profiling_guide.analysis.bandwidth import read_sweep
from profiling_guide.measure.bench_nccl import DEFAULT_SIZES, build_parser, main, parse_size


def test_sizes_are_read_in_binary_units():
    assert parse_size("1MiB") == parse_size("1M") == parse_size("1048576") == 2**20
    assert parse_size("4 KiB") == 4096 and parse_size("1g") == 2**30
    for bad in ("", "0", "-1MiB", "1.5M", "12 parsecs"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_size(bad)


def test_the_default_sweep_is_the_one_beside_the_fixtures():
    args = build_parser().parse_args(["-o", "s.json"])
    assert args.ops == ["all_reduce", "all_gather", "reduce_scatter"]
    assert args.sizes == list(DEFAULT_SIZES) == [2**20 * 4**i for i in range(6)]
    assert (args.dtype, args.warmup, args.iters) == ("bf16", 5, 20)


@pytest.mark.parametrize("argv, words", [
    (["-o", "s.json", "--ops", "all_reduce,broadcast"], "unknown collective 'broadcast'"),
    (["-o", "s.json", "--sizes", "1MiB,lots"], "expected a size"),
    (["-o", "s.json", "--iters", "0"], "from 1 to 100000"),
    (["--sizes", "1MiB"], "the following arguments are required: -o/--output"),
])
def test_bad_arguments_are_refused_by_the_parser(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_outside_torchrun_it_says_how_to_start_it(monkeypatch, capsys):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    assert main(["-o", "s.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torchrun --nproc_per_node N -m profiling_guide.cli bench-nccl" in err


def test_one_rank_is_not_a_sweep(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert main(["-o", "s.json"]) == 2 and "needs two or more ranks" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    src = str(Path(profiling_guide.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([quick_python(), "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
                           "--no-python", quick_python(), "-u", "-m", "profiling_guide.cli", "bench-nccl", *args],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_two_cpu_ranks_write_a_sweep_the_report_reads(tmp_path):
    out = tmp_path / "sweeps" / "cpu.json"
    result = torchrun(tmp_path, "-o", str(out), "--backend", "gloo", "--dtype", "fp32", "--sizes", "64KiB,256KiB",
                      "--iters", "2", "--warmup", "1", "--repeats", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == str(out)  # rank 0 alone writes and names the file
    assert "bench-nccl: all_reduce 0.06 MiB:" in result.stderr
    sweep = read_sweep(out)
    assert sweep.world_size == 2 and sweep.ops() == {"all_reduce", "all_gather", "reduce_scatter"}
    rows = {(r.op, r.bytes) for r in sweep.rows}
    assert rows == {(op, size) for op in sweep.ops() for size in (65536, 262144)}
    import json

    data = json.loads(out.read_text())
    assert data["backend"] == "gloo" and data["rows"][0]["repeats"] == 3
    for row in data["rows"]:
        assert row["us_q1"] <= row["us"] <= row["us_q3"]
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert [p.name for p in out.parent.iterdir()] == ["cpu.json"]  # no temporary file left beside it


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_output_that_cannot_be_written_stops_every_rank_before_measuring(tmp_path):
    (tmp_path / "a_folder.json").mkdir()
    result = torchrun(tmp_path, "-o", str(tmp_path / "a_folder.json"), "--backend", "gloo", "--dtype", "fp32",
                      "--sizes", "64KiB", "--iters", "1", "--warmup", "1", "--repeats", "1")
    assert result.returncode != 0
    assert "it is a folder, not a regular file" in result.stderr and "bench-nccl: all_reduce" not in result.stderr
    # said once, by rank 0 (torchrun then reports the failed workers in its own words)
    ours = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(ours) == 1, result.stderr[-3000:]
