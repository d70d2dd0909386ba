"""Chapter 10's analysis on its own recordings: two H100s and two H200s, six jobs each (``docs/recordings/*-x2``).

What each rank sends, the units of the page's tables, how its profiler block
differs from chapter 1's, and the rule that names the rank the others wait
for: on both pairs' traces, as the page reads them.
"""

import ast
import html
import json
import re
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from profiling_guide.analysis import strategies
from profiling_guide.analysis.bandwidth import sweep_from_data
from profiling_guide.analysis.collectives import collective_calls
from profiling_guide.analysis.ranks import analyse_run, summarize_rank
from profiling_guide.analysis.run_verdict import REASONS, RankStepTiming, RankTiming, find_culprit
from profiling_guide.analysis.verdict import MIN_SAVING
from profiling_guide.cli import main
from profiling_guide.pages import facts
from profiling_guide.pages.tables import is_fraction_column
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run import read_run

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "docs" / "recordings"
H100, H200 = "nvidia-h100-80gb-hbm3-x2", "nvidia-h200-x2"
PAIRS = (H100, H200)
JOBS = ("ddp", "ddp_bucket5", "ddp_bucket100", "fsdp2", "fsdp2_no_reshard", "ddp_straggler")
PAGE = ROOT / "examples" / "plot_10_multi_gpu.py"


def paths(pair: str, job: str) -> list[Path]:
    return [RECORDINGS / pair / f"10_multi_gpu.{job}.rank{r}.trace.json.gz" for r in (0, 1)]


@cache
def run(pair: str, job: str):
    data = json.loads((RECORDINGS / pair / "10_multi_gpu.nccl_sweep.run.json").read_text())["values"]
    summaries, missing = read_run(paths(pair, job), lambda t, info: summarize_rank(t, info.rank))
    return analyse_run(summaries, sweep=sweep_from_data(data), missing=missing)


def prose(path: Path) -> str:
    """The page's comment text, one line, as a reader sees it."""
    lines = [line.strip()[1:].strip() for line in path.read_text().splitlines() if line.strip().startswith("#")]
    return re.sub(r"\s+", " ", " ".join(lines))


# ------------------------------------------------------------ bytes sent
@pytest.mark.parametrize("pair", PAIRS)
def test_each_rank_sends_604_mb_a_step_in_fsdp2_against_403_in_ddp_not_the_buffers_1208(pair):
    ddp, fsdp2 = run(pair, "ddp"), run(pair, "fsdp2")
    # On two ranks an all-reduce sends its whole buffer, an all-gather or a reduce-scatter half of it.
    assert strategies.sent_per_step(ddp) == pytest.approx(12 * 2048 * 8192 * 2 * 2 * 1 / 2)
    assert strategies.sent_per_step(fsdp2) == pytest.approx(12 * 3 * 2048 * 8192 * 2 / 2)
    assert round(strategies.sent_per_step(fsdp2) / 1e6) == 604 and round(strategies.sent_per_step(ddp) / 1e6) == 403
    assert round(strategies.buffers_per_step(fsdp2) / 1e6) == 1208
    holds, seen = strategies.more_bytes({"fsdp2": fsdp2, "ddp": ddp}, "fsdp2", "ddp", ratio=1.5)()
    assert holds and "604 MB sent per rank per step" in seen and "(1.50×)" in seen
    said = str(facts.bytes_sent({"ddp": ddp, "fsdp2": fsdp2}))
    assert "fsdp2: 604 MB sent per rank per step" in said and "1,208 MB of buffers" in said
    assert "2(n−1)/n for an all-reduce" in said and "(n−1)/n for an all-gather or a reduce-scatter" in said


@pytest.mark.parametrize("pair", PAIRS)
def test_what_a_rank_sends_comes_from_the_calls_nelems_dtype_and_group_size_in_its_trace(pair):
    calls = collective_calls(Trace.load(paths(pair, "fsdp2")[0]), 0)
    gather = next(c for c in calls if c.collective == "all_gather")
    scatter = next(c for c in calls if c.collective == "reduce_scatter")
    shard = 3 * 2048 * 8192 // 2  # one block's three weights, half of them per rank
    assert (gather.dtype, gather.in_elements, gather.out_elements, gather.group_ranks) == ("BFloat16", shard,
                                                                                          2 * shard, (0, 1))
    assert (scatter.in_elements, scatter.out_elements) == (2 * shard, shard)
    table = run(pair, "fsdp2").collectives.set_index("collective")
    assert table.loc["all_gather", "sent_bytes"] == 2 * shard * 2 / 2 == table.loc["reduce_scatter", "sent_bytes"]


# ------------------------------------------------------------ units
UNIT = re.compile(r"\bms\b|\bMB\b|GB/s|^% |^calls / step$|^ops / step$")


def page_tables(pair: str) -> dict[str, pd.DataFrame]:
    analyses = {job: run(pair, job) for job in JOBS}
    straggler = analyses["ddp_straggler"].straggler
    slow = Trace.load(paths(pair, "ddp_straggler")[straggler])
    from profiling_guide.analysis.ranks import straggler_activity

    activity = straggler_activity(slow, straggler, analyses["ddp_straggler"].calls)
    shown = {n: analyses[n] for n in ("ddp", "ddp_bucket5", "ddp_bucket100", "fsdp2")}
    return {"rank": strategies.rank_table(analyses["fsdp2"]), "arrivals": strategies.arrivals_table(analyses),
            "named": strategies.named_table(analyses), "steps": strategies.step_lags(analyses["ddp"]),
            "activity": strategies.activity_table(activity, len(slow.steps)),
            "collectives": strategies.collectives_table(shown)}


@pytest.mark.parametrize("pair", PAIRS)
def test_every_number_in_chapter_10s_tables_says_its_unit_and_the_rank_table_is_all_ms(pair):
    tables = page_tables(pair)
    for name, df in tables.items():
        for column in df.columns:
            if pd.api.types.is_numeric_dtype(df[column]):
                assert UNIT.search(column), (name, column)
                if column.startswith("% "):  # percentages, printed as they are (as "% of datasheet ceiling")
                    assert not is_fraction_column(column) and df[column].dropna().between(0, 200).all(), (name, column)
                    assert df[column].dropna().max() > 2, (name, column)  # not fractions left unscaled
    rank = tables["rank"]
    assert all(c.endswith(" ms") for c in rank.columns), list(rank.columns)
    # hidden and exposed are the two parts of communication, in the same unit
    assert (rank["hidden behind compute ms"] + rank["exposed ms"]).tolist() == pytest.approx(
        rank["communication ms"].tolist())


def test_the_run_reports_rank_table_gives_hidden_communication_in_ms_too(tmp_path, capsys):
    out = tmp_path / "run.html"
    assert main(["report", *map(str, paths(H200, "fsdp2")), "-o", str(out)]) == 0
    capsys.readouterr()
    page = out.read_text()
    assert "<th>of it hidden behind compute, ms</th>" in page and "communication ms (hidden" not in page


# ------------------------------------------------------------ the profiler block against chapter 1's
def schedule_of(path: Path) -> dict[str, int]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "schedule":
            return {k.arg: k.value.value for k in node.keywords}
    raise AssertionError(f"no schedule(...) in {path}")


def syncs_in_profile_block(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.With) and any(getattr(i.context_expr.func, "id", None) == "profile"
                                              for i in node.items if isinstance(i.context_expr, ast.Call)):
            return "synchronize" in ast.unparse(node) or "sync()" in ast.unparse(node)
    raise AssertionError(f"no profile(...) block in {path}")


def test_the_page_says_how_its_profiler_block_differs_from_chapter_1s_and_the_traces_agree():
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    ours = schedule_of(ROOT / "src" / "profiling_guide" / "kernels" / "train_ranks.py")
    theirs = schedule_of(ROOT / "examples" / "plot_01_linear.py")
    assert (ours["wait"], ours["warmup"]) == (theirs["wait"], theirs["warmup"]) and ours["active"] != theirs["active"]
    said = prose(PAGE)
    assert (f"It keeps {words[ours['active']]} steps (``active={ours['active']}``) where chapter 1 keeps "
            f"{words[theirs['active']]}, after the same skipped and warm-up steps (``wait={ours['wait']}, "
            f"warmup={ours['warmup']}``), so it runs {words[sum(ours.values())]} steps where chapter 1 runs "
            f"{words[sum(theirs.values())]}") in said
    assert f"each trace holds {words[ours['active']]} profiled steps" in said
    assert syncs_in_profile_block(ROOT / "examples" / "plot_01_linear.py")
    assert not syncs_in_profile_block(ROOT / "src" / "profiling_guide" / "kernels" / "train_ranks.py")
    assert "does not call ``torch.cuda.synchronize()`` after each step" in said
    for pair in PAIRS:
        for job in JOBS:
            assert len(run(pair, job).steps) == ours["active"], (pair, job)


# ------------------------------------------------------------ who holds the others up
def test_plain_ddp_on_the_h100s_names_no_rank_though_rank_0_arrives_last_at_every_all_reduce():
    a = run(H100, "ddp")
    by_rank = a.stragglers.set_index("rank")
    assert (by_rank.loc[0, "arrived_last"], by_rank.loc[0, "calls"]) == (24, 24)
    assert by_rank.loc[0, "late_us"] == pytest.approx(1473, abs=5)  # rank 1's wait, per step
    f = a.culprit
    assert a.straggler is None and f.culprit is None and f.slowest == 0 and f.reason == "small"
    assert f.margin_ms < 0.1 < MIN_SAVING * f.run_step_ms  # on its own, rank 0 is 0.03 ms a step slower
    # Why rank 0 was late: its GPU began each profiled step about 0.1 ms after rank 1's, as much later as it
    # finished the work launched before the profiler began recording. Not its CPU: rank 1's began each step
    # later, and each CPU ran milliseconds ahead of its GPU.
    lags = a.per_rank[a.per_rank["rank"] == 0]["gpu_lag_us"].tolist()
    assert all(80 < lag < 120 for lag in lags), lags
    assert by_rank.loc[0, "before_lag_us"] == pytest.approx(lags[0], abs=20) and by_rank.loc[1, "before_lag_us"] == 0
    assert by_rank.loc[0, "start_lag_us"] == 0 and by_rank.loc[1, "start_lag_us"] > 1000
    assert (a.per_rank["cpu_lead_us"] > 5000).all()
    compute = a.per_rank.groupby("rank")["compute_us"].mean()
    assert abs(compute[0] - compute[1]) < 0.005 * compute[0]


@pytest.mark.parametrize("pair", PAIRS)
def test_in_plain_ddp_no_rank_is_named_and_the_lag_predates_the_recording(pair):
    a = run(pair, "ddp")
    holds, seen = strategies.no_rank_named(a)()
    assert holds, seen
    holds, seen = strategies.lag_predates_recording(a)()
    assert holds, seen


@pytest.mark.parametrize("pair", PAIRS)
def test_whose_gpu_began_a_step_last_is_a_guess_about_who_arrives_last(pair):
    # A lag of a tenth of a millisecond need not decide who arrives last: the page keeps it a guess, and says
    # per step whose GPU began late, by how much, and at how many all-reduces it arrived last.
    a = run(pair, "ddp")
    holds, seen = strategies.late_gpu_arrives_last(a)()
    steps = strategies._latest_gpus(a)
    assert holds == all(arrived > calls / 2 for *_, arrived, calls in steps)
    assert all(f"step {step}: rank {rank}'s GPU {lag / 1e3:.3f} ms later, last at {arrived} of {calls}" in seen
               for step, rank, lag, arrived, calls in steps)


def test_the_report_says_no_rank_is_named_in_plain_ddp_and_which_part_of_the_rule_failed(tmp_path, capsys):
    out = tmp_path / "run.html"
    assert main(["report", *map(str, paths(H100, "ddp")), "-o", str(out)]) == 0
    capsys.readouterr()
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", out.read_text())))
    assert "No rank is named as holding the others up. Rank 0 arrived last most: at 24 of 24 collectives" in text
    assert REASONS["small"] in text and not re.search(r"Rank \d keeps the others waiting", text)


@pytest.mark.parametrize("job", ["fsdp2", "fsdp2_no_reshard"])
def test_on_the_h200s_fsdp2_the_rank_waited_for_keeps_up_on_its_own_and_the_slowest_keeps_no_one_waiting(
        job, tmp_path, capsys):
    a = run(H200, job)
    top, f = a.stragglers.iloc[0], a.culprit
    late, slowest = int(top["rank"]), max(f.standalone_ms, key=f.standalone_ms.get)
    # the others wait for one rank at most of the collectives, for milliseconds per step
    assert late != slowest and top["arrived_last"] > top["calls"] / 2 and top["late_us"] > 1000
    idle = a.per_rank.groupby("rank")["idle_us"].mean()
    assert idle[late] > idle[slowest]  # the late rank's GPU idled more: its CPU issued the work late
    # Re-timed with the profiler's cost taken out, the late rank keeps up; the slowest on its own is not named:
    # either it is not slower by 5 % of the step and the noise, or no one waits for it long enough.
    assert f.standalone_ms[late] < f.standalone_ms[slowest] and f.waited_for_ms[slowest] < f.threshold_ms
    assert f.reason == ("not_waited_for" if f.margin_ms > f.threshold_ms else "small")
    assert f.culprit is None and a.straggler is None
    out = tmp_path / "run.html"
    assert main(["report", *map(str, paths(H200, job)), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert not printed.startswith("verdict: Rank") and not re.search(r"Rank \d keeps the others waiting",
                                                                     out.read_text())


@pytest.mark.parametrize("pair", PAIRS)
def test_the_straggler_run_still_names_its_last_rank(pair):
    a = run(pair, "ddp_straggler")
    assert a.straggler == 1 and a.culprit.culprit == 1 and a.culprit.reason is None
    assert a.culprit.margin_ms > a.culprit.threshold_ms and a.culprit.waited_for_ms[1] > 10


def timings(own: dict[int, list[float]]) -> dict[int, RankTiming]:
    return {r: RankTiming({2 + i: RankStepTiming(us, us, (), us) for i, us in enumerate(values)}, {})
            for r, values in own.items()}


def test_the_rule_names_a_rank_only_when_its_lateness_is_more_than_noise_and_the_others_wait_for_it():
    steady = timings({0: [10_000, 10_000], 1: [10_600, 10_600]})  # 0.6 ms: 5.7 % of a 10.6 ms step, no noise
    found = find_culprit(steady, {}, [2, 3], {0: 0.0, 1: 1_000.0})
    assert (found.culprit, found.reason, found.noise_ms) == (1, None, 0.0)
    assert find_culprit(steady, {}, [2, 3]).culprit == 1  # without the arrivals, that part is not checked
    ignored = find_culprit(steady, {}, [2, 3], {0: 1_000.0, 1: 0.0})
    assert (ignored.culprit, ignored.reason, ignored.slowest) == (None, "not_waited_for", 1)
    # the same margin in steps that vary by 1.5 ms: the IQR of the run's step is larger than the lateness
    noisy = timings({0: [10_000, 11_500, 10_000, 11_500], 1: [10_600, 12_100, 10_600, 12_100]})
    found = find_culprit(noisy, {}, [2, 3, 4, 5], {0: 0.0, 1: 1_000.0})
    assert found.margin_ms == pytest.approx(0.6) and found.margin_ms > MIN_SAVING * found.run_step_ms
    assert found.noise_ms == pytest.approx(1.5) and (found.culprit, found.reason) == (None, "noise")
    small = find_culprit(timings({0: [10_000, 10_000], 1: [10_400, 10_400]}), {}, [2, 3], {0: 0.0, 1: 1_000.0})
    assert (small.culprit, small.reason) == (None, "small")


def test_the_page_states_the_rule_the_analysis_applies():
    said = prose(PAGE)
    assert MIN_SAVING == 0.05
    for part in ("by at least 5 % of the run's step", "the IQR of the run's re-timed step over the profiled steps",
                 "And the others must wait for it, at least 5 % of a step in the calls it arrived last at"):
        assert part in said, part


# ------------------------------------------------------------ the sweep beside the transfers
@pytest.mark.parametrize("pair", PAIRS)
def test_a_transfer_beside_compute_runs_below_the_sweep_and_one_above_it_ran_mostly_alone(pair):
    rows = pd.concat([run(pair, job).collectives for job in ("ddp", "ddp_bucket5", "ddp_bucket100", "fsdp2")])
    assert rows["of_sweep"].notna().all() and rows["transfer_hidden"].notna().all()
    for r in rows.itertuples():
        if r.transfer_hidden >= 0.9:
            assert r.of_sweep < 1, r
        if r.of_sweep > 1:
            assert r.transfer_hidden < 0.5, r
    # FSDP2's all-gathers on every rank: the guess the page checks says per rank how much hid
    holds, seen = strategies.mostly_hidden({r: Trace.load(p) for r, p in enumerate(paths(pair, "fsdp2"))},
                                           "all_gather")()
    assert "rank 0: hidden behind compute:" in seen and "rank 1: hidden behind compute:" in seen
