"""Chapter 10's training script runs under torchrun and leaves one trace per rank and a run.json (CPU, gloo)."""

from __future__ import annotations

import gzip
import json

from quick_python import quick_python

from profiling_guide.measure.distributed import NCCL_SAFE_ENVIRONMENT, train_ranks
from profiling_guide.trace.run import rank_info

TINY = ["--device", "cpu", "--layers", "2", "--dim", "32", "--hidden", "64", "--batch", "1", "--seq", "8"]


def test_two_ranks_of_fsdp2_write_their_traces_the_step_times_and_the_nccl_variables(tmp_path):
    job = train_ranks(2, ["--strategy", "fsdp2", "--straggler", *TINY], tmp_path, python=quick_python(compiler=True))
    assert job["world_size"] == 2 and job["strategy"] == "fsdp2"
    assert job["environment"] == NCCL_SAFE_ENVIRONMENT  # every process torchrun started had them
    assert [r["rank"] for r in job["ranks"]] == [0, 1]
    assert all(len(r["step_ms"]) == 10 and r["median_ms"] > 0 for r in job["ranks"])
    for rank in (0, 1):
        with gzip.open(tmp_path / f"rank{rank}.trace.json.gz", "rt") as f:
            trace = json.load(f)
        info = rank_info({k: v for k, v in trace.items() if k != "traceEvents"})
        assert (info.rank, info.world_size) == (rank, 2)
        labels = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}
        assert {"forward", "backward", "optimizer"} <= labels
        assert ("extra_work" in labels) == (rank == 1)  # the straggler is the last rank
