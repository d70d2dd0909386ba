"""The clock sampler on the CPU: nvidia-smi's lines read, the reasons decoded, a fake nvidia-smi run end to end."""

import os
import re
import stat
import sys
import textwrap

import pytest

from profiling_guide.measure import clocks
from profiling_guide.measure.bench_step import format_training_step

# A line as nvidia-smi 580 printed it on an H100 during a training step (QUERY's five fields).
CAPPED = "1545, 1980, 691.23, 700.00, 0x0000000000000004"
FREE = "1980, 1980, 490.10, 700.00, 0x0000000000000000"


def numbers_in(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def test_a_line_is_read_as_megahertz_watts_and_the_reasons_bit_mask():
    s = clocks.parse_line(CAPPED)
    assert (s.sm_mhz, s.max_sm_mhz, s.power_w, s.power_limit_w, s.reasons) == (1545, 1980, 691.23, 700, 4)


@pytest.mark.parametrize("line", ["", "1545, 1980, 691.23, 700.00", "[N/A], 1980, 691.23, 700.00, 0x4",
                                  "1545, 1980, 691.23, 700.00, not-hex", "a,b,c,d,e,f"])  # fmt: skip
def test_a_line_that_is_not_five_numbers_is_no_sample(line):
    assert clocks.parse_line(line) is None


def test_the_reasons_are_named_from_their_bits_and_unknown_bits_kept_in_hex():
    assert clocks.reasons_of(0) == []
    assert clocks.reasons_of(0x4) == ["software power cap"]
    assert clocks.reasons_of(0x5) == ["idle", "software power cap"]
    assert clocks.reasons_of(0x4 | 0x1000) == ["software power cap", "0x1000"]


def test_a_summary_gives_medians_the_limits_and_each_reason_s_share_of_the_samples():
    samples = [clocks.parse_line(x) for x in (CAPPED, CAPPED, CAPPED, FREE)]
    summary = clocks.summarize(samples)
    assert summary["samples"] == 4 and summary["sm_mhz"] == 1545 and summary["max_sm_mhz"] == 1980
    assert summary["power_w"] == pytest.approx(691.2) and summary["power_limit_w"] == 700
    assert summary["reasons"] == {"software power cap": 0.75}
    line = clocks.describe(summary)
    # the summary's figures in the line, in order: clock of maximum, watts of limit, the reason's share
    assert numbers_in(line) == [1545, 1980, 691, 700, 75] and "software power cap" in line, line
    with pytest.raises(ValueError):
        clocks.summarize([])


def test_without_nvidia_smi_nothing_runs_and_the_answer_is_none(monkeypatch):
    monkeypatch.setattr(clocks.shutil, "which", lambda name: None)
    calls = []
    assert clocks.clocks_while(lambda: calls.append(1)) is None
    assert calls == [], "the workload is not run for clocks that cannot be read"
    assert "nvidia-smi" in clocks.describe(None) and "\n" not in clocks.describe(None), "one line naming the tool"


def test_a_fake_nvidia_smi_is_started_with_the_gpu_s_id_and_the_query_and_its_samples_summarized(tmp_path, monkeypatch):
    import torch

    args_file = tmp_path / "args"
    fake = tmp_path / "nvidia-smi"
    fake.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sys, time
        open({str(args_file)!r}, "w").write(" ".join(sys.argv[1:]))
        for line in [{CAPPED!r}, "[N/A], 1980, 1, 700, 0x0", {CAPPED!r}, {FREE!r}]:
            print(line, flush=True)
        time.sleep(30)
    """))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(clocks, "gpu_id", lambda device=None: "GPU-0000")
    runs = []
    summary = clocks.clocks_while(lambda: runs.append(1), seconds=1.0, settle=0.1)
    assert summary is not None and summary["samples"] == 3, "the [N/A] line is skipped"
    assert summary["sm_mhz"] == 1545 and summary["reasons"] == {"software power cap": pytest.approx(0.667)}
    assert len(runs) >= 21, "the workload ran in batches of 20 after one warm-up call"
    called = args_file.read_text()
    assert "-i GPU-0000" in called and f"--query-gpu={clocks.QUERY}" in called and "-lms 20" in called


def test_the_training_table_shows_the_clocks_where_they_were_sampled():
    spread = {"median": 539.2, "q1": 538.8, "q3": 541.4, "repeats": 7}
    bench = {"nine_gemms_us": spread, "variants_us": {"fused": spread}, "ratio_to_nine_gemms": {"fused": 1.0},
             "memory": {"fused": {"saved_mb": 151, "peak_mb": 291}}, "errors": {}}  # fmt: skip
    assert "SM MHz" not in format_training_step(bench)
    summary = clocks.summarize([clocks.parse_line(CAPPED)])
    bench["clocks"] = {"fused": summary, "cuBLAS's nine GEMMs alone": summary}
    table = format_training_step(bench).splitlines()
    assert "SM MHz" in table[0]
    assert table[2].split()[-2:] == ["1545", "691"]
    assert numbers_in(table[-1]) == [1980, 700], "the note under the table: the clock's maximum, the power limit"
