"""Chapter 6c's readings on the CPU: Nsight Compute's table and Proton's phases, from real recordings and small made-up ones."""

import json
from pathlib import Path

import pandas as pd
import pytest

from profiling_guide.errors import GuideError
from profiling_guide.measure import inside_kernel as ik

RECORDINGS = Path(__file__).resolve().parents[1] / "docs" / "recordings"
GPUS = sorted(p for p in RECORDINGS.iterdir() if (p / "06c_inside_kernel.ncu.run.json").is_file())


def recorded(gpu: Path, name: str) -> dict:
    return json.loads((gpu / f"06c_inside_kernel.{name}.run.json").read_text())["values"]


def test_both_gpus_have_chapter_6c_s_recordings():
    assert [g.name for g in GPUS] == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]


NCU_CSV = '''==PROF== Connected to process 123
"ID","Kernel Name","gpu__time_duration.sum","lts__t_bytes.sum","dram__bytes_write.sum"
"","","nsecond","byte","byte"
"0","nvjet_gemm","69,216","349936992","33355520"
"1","_geglu_pingpong_gemm_kernel","130848","834867776","n/a"
==PROF== Disconnected from process 123
'''


def test_ncu_s_raw_csv_is_read_with_its_units_and_without_its_chatter():
    metrics = ["gpu__time_duration.sum", "lts__t_bytes.sum", "dram__bytes_write.sum", "not_asked.sum"]
    rows = ik.parse_ncu_csv(NCU_CSV, metrics)
    assert [r["kernel"] for r in rows] == ["nvjet_gemm", "_geglu_pingpong_gemm_kernel"]
    assert rows[0]["metrics"]["gpu__time_duration.sum"] == {"value": 69216.0, "unit": "nsecond"}
    assert "dram__bytes_write.sum" not in rows[1]["metrics"], "n/a is no value"
    with pytest.raises(GuideError, match="no kernel table"):
        ik.parse_ncu_csv("==PROF== nothing measured\n", metrics)


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_the_counter_table_has_each_kernel_and_cublas_s_two_gemms_added_up(gpu):
    measured = recorded(gpu, "ncu")
    assert [k["label"] for k in measured["kernels"]] == list(ik.LABELS)
    table = ik.counter_table(measured)
    assert list(table.index) == [ik.CUBLAS_BOTH, *ik.LABELS]
    gemms = table.loc[["cuBLAS gate GEMM", "cuBLAS up GEMM"]]
    both = table.loc[ik.CUBLAS_BOTH]
    assert both["ncu µs"] == pytest.approx(gemms["ncu µs"].sum())
    assert both["L2 MB"] == pytest.approx(gemms["L2 MB"].sum())
    busy = both["tensor busy %"]
    assert gemms["tensor busy %"].min() <= busy <= gemms["tensor busy %"].max(), "a weighted mean"
    assert (table["tensor busy %"] <= 100).all() and (table["occupancy %"] <= 100).all()


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_the_counter_claims_can_fail(gpu):
    table = ik.counter_table(recorded(gpu, "ncu"))
    assert ik.busier("pingpong", "packed-tma")(table)[0]
    assert not ik.busier("packed-tma", "pingpong")(table)[0]
    assert ik.written_at_most("pingpong", ik.CUBLAS_BOTH, 0.6)(table)[0]
    assert not ik.written_at_most(ik.CUBLAS_BOTH, "pingpong", 0.6)(table)[0]


def trace_of(*scopes):
    """A Proton-like Chrome trace: (program, warp, scope, start, duration) → complete events."""
    return {"traceEvents": [{"ph": "X", "pid": p, "tid": w, "name": s, "ts": t, "dur": d} for p, w, s, t, d in scopes]
            + [{"ph": "M", "name": "process_name"}]}  # fmt: skip


def test_scopes_are_grouped_by_program_and_warp_in_time_order():
    trace = trace_of(("k CTA1", "warp 4", "mma", 8.0, 6.0), ("k CTA1", "warp 0", "epilogue", 6.0, 2.0),
                     ("k CTA1", "warp 0", "mma", 0.0, 6.0), ("k CTA1", "warp 0", "setup", 0.0, 1.0))  # fmt: skip
    got = ik.scope_intervals(trace)
    assert got == {"k CTA1": {"warp 0": [("mma", 0.0, 6.0), ("epilogue", 6.0, 8.0)], "warp 4": [("mma", 8.0, 14.0)]}}


def test_phase_shares_split_a_program_s_time_by_what_its_two_consumers_do():
    # consumer 0: K loop [0, 6), epilogue [6, 8); consumer 1: K loop [5, 11), then nothing until 12 (epilogue [11, 12))
    warps = {"warp 0": [("mma", 0.0, 6.0), ("epilogue", 6.0, 8.0)],
             "warp 4": [("mma", 5.0, 11.0), ("epilogue", 11.0, 12.0)]}
    shares = ik.phase_shares(warps)
    assert shares == pytest.approx({ik.PHASES[0]: 1 / 12, ik.PHASES[1]: 2 / 12, ik.PHASES[2]: 8 / 12,
                                    ik.PHASES[3]: 1 / 12})  # fmt: skip
    assert sum(shares.values()) == pytest.approx(1.0)
    with pytest.raises(GuideError, match="two consumer warpgroups"):
        ik.phase_shares({"warp 0": warps["warp 0"]})


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_the_recorded_phases_cover_every_program_and_their_claims_can_fail(gpu):
    phases = recorded(gpu, "proton")
    shares = pd.DataFrame(phases["shares"]).T
    assert len(shares) == 132, "one program per SM of an H100 or H200"
    assert set(shares.columns) == set(ik.PHASES)
    assert ((shares.sum(axis=1) - 1).abs() < 1e-9).all()
    assert ik.share_at_most(ik.PHASES[3], 0.02)(shares)[0]
    assert not ik.share_at_most(ik.PHASES[3], 0.001)(shares)[0]
    assert ik.share_at_least(ik.PHASES[1], 0.10)(shares)[0]
    assert not ik.share_at_least(ik.PHASES[1], 0.5)(shares)[0]
    program = next(iter(phases["programs"].values()))
    assert len(program) == 2 and all(scope in ik.SCOPES for spans in program.values() for scope, _, _ in spans)


def test_without_ncu_the_line_says_what_to_do(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setattr(ik.os.path, "isfile", lambda path: False)
    with pytest.raises(GuideError, match="not on PATH.*replay mode"):
        ik.find_ncu()
