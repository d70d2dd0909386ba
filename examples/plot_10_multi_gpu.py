"""
10 · Several GPUs: DDP and FSDP2, compute against communication
===============================================================

The guide's GeGLU MLP, four blocks deep, trained on two GPUs at once: with
``DistributedDataParallel`` (each GPU a whole copy, gradients averaged by
all-reduce) and with FSDP2 (each GPU a shard of every weight, gathered when
a block runs). Every rank writes its own trace. Read together, they say how
much of a step is communication, how much of it hides behind compute, and
who keeps the others waiting.

*Needs:* this package alone, no extra; two or more CUDA GPUs to record
(``torchrun``, NCCL). Elsewhere the page replays the recordings.
"""

# %%
# The code under study
# --------------------
# One script, started on every GPU by ``torchrun``. Each rank builds the
# same model, wraps it, profiles four training steps and exports its own
# trace, then times ten steps with the profiler off. Its profiler block is
# chapter 1's with two differences. It keeps two steps (``active=2``) where
# chapter 1 keeps three, after the same skipped and warm-up steps
# (``wait=1, warmup=1``), so it runs four steps where chapter 1 runs five:
# each trace holds two profiled steps, and every number per profiled step on
# this page is a mean or a median over those two. And it does not call
# ``torch.cuda.synchronize()`` after each step, so a step's kernels may
# still run when the next step's CPU work begins, as in training (each
# kernel counts in the step that launched it):
#
# .. literalinclude:: ../../src/profiling_guide/kernels/train_ranks.py
#    :pyobject: wrap
#
# .. literalinclude:: ../../src/profiling_guide/kernels/train_ranks.py
#    :pyobject: main
#    :start-after: slow = args.straggler and rank == world - 1
#    :end-before: # Profiler off
#
# Run it yourself on two GPUs (the whole script is
# :mod:`profiling_guide.kernels.train_ranks`; it imports only torch)::
#
#     NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 -m profiling_guide.kernels.train_ranks \
#         --strategy ddp --out traces/ddp

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("10_multi_gpu", ranks=2, layers=4, dim=2048, hidden=8192,
                                    batch=8, seq=1024)
flags = chapter.flags
SIZES = ["--layers", str(flags.layers), "--dim", str(flags.dim), "--hidden", str(flags.hidden),
         "--batch", str(flags.batch), "--seq", str(flags.seq)]
chapter.banner()

# %%
# The runs
# --------
# Six jobs of two ranks each (on a GPU machine; in replay their recordings
# are read back): DDP with its default 25 MB gradient buckets, with 5 MB and
# with 100 MB buckets; FSDP2, and FSDP2 keeping the gathered weights between
# forward and backward (``reshard_after_forward=False``); and DDP again with
# a *straggler*: the last rank runs 24 extra 4096³ matrix products before its
# backward. Beside them, NCCL's bus bandwidth on this machine, measured by
# ``profiling-guide bench-nccl`` under ``torchrun``.

from profiling_guide.measure.distributed import nccl_sweep

CONFIGS = {
    "ddp": ["--strategy", "ddp"],
    "ddp_bucket5": ["--strategy", "ddp", "--bucket-mb", "5"],
    "ddp_bucket100": ["--strategy", "ddp", "--bucket-mb", "100"],
    "fsdp2": ["--strategy", "fsdp2"],
    "fsdp2_no_reshard": ["--strategy", "fsdp2", "--no-reshard"],
    "ddp_straggler": ["--strategy", "ddp", "--straggler"],
}
runs = {name: chapter.run_ranks(name, [*args, *SIZES]) for name, args in CONFIGS.items()}
sweep_rows = chapter.measure("nccl_sweep", lambda: nccl_sweep(chapter.ranks, ["--sizes", "1MiB,4MiB,16MiB,64MiB,256MiB,1GiB"]),
                             code=[nccl_sweep]).values

# %%
# Before we look
# --------------
# * DDP all-reduces each bucket of gradients as soon as the backward has
#   filled it, on a stream of its own: most of its communication runs beside
#   the backward's GEMMs. The last bucket is filled when the backward ends,
#   so its all-reduce runs alone: that one is exposed.
# * FSDP2 gathers each block's weights just before the block runs, while the
#   previous block computes: its all-gathers hide too, all but the first.
# * Each FSDP2 rank sends more bytes than a DDP rank. DDP all-reduces every
#   gradient once: each rank sends 2(n−1)/n of the weights' bytes, n the
#   number of ranks. FSDP2 all-gathers every weight for the forward and again
#   for the backward, and reduce-scatters its gradient: (n−1)/n each time,
#   3(n−1)/n in all, one and a half times DDP's on any number of ranks.
# * In the straggler run, the fast rank waits in its all-reduces, and the
#   run analysis names the slow rank.

from profiling_guide.analysis import expect, strategies
from profiling_guide.analysis.bandwidth import sweep_from_data
from profiling_guide.analysis.ranks import analyse_run, summarize_rank
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run import read_run

sweep = sweep_from_data(sweep_rows, source="bench-nccl")


def analyse(rec):
    def summarize(trace, info):
        return summarize_rank(trace, info.rank)

    summaries, missing = read_run(rec.rank_trace_paths, summarize)
    return analyse_run(summaries, sweep=sweep, missing=missing)


# %%
# Each job read whole (every rank's trace), and the guesses as checks:


analyses = {name: analyse(rec) for name, rec in runs.items()}
times = strategies.step_times(runs)
last_rank = chapter.ranks - 1
rank0 = {name: Trace.load(rec.rank_trace_paths[0]) for name, rec in runs.items()}
fsdp2 = {r: Trace.load(path) for r, path in enumerate(runs["fsdp2"].rank_trace_paths)}
predictions = [
    expect.Prediction("DDP's last all-reduce runs alone: it is the exposed communication",
                      strategies.last_call_exposed(rank0["ddp"])),
    expect.Prediction("DDP's other all-reduces hide behind the backward",
                      strategies.mostly_hidden(rank0["ddp"], "all_reduce", but_first=False),
                      must_hold=False),
    expect.Prediction("FSDP2's all-gathers overlap the previous block's compute, all but the "
                      "first, on every rank",
                      strategies.mostly_hidden(fsdp2, "all_gather"), must_hold=False),
    expect.Prediction("Each FSDP2 rank sends 1.5 times the bytes a DDP rank sends per step",
                      strategies.more_bytes(analyses, "fsdp2", "ddp", ratio=1.5)),
    expect.Prediction(f"with a straggler, rank {last_rank} is named and the others are told they "
                      "wait",
                      strategies.straggler_named(analyses["ddp_straggler"], last_rank)),
]

# %%
# The trace, one step
# -------------------
# The straggler run, both ranks on one time axis: each rank's
# ``record_function`` labels, then its GPU streams. Rank 1's extra work
# sits between its forward and its backward; rank 0's all-reduce kernels
# start on time and run until rank 1 joins them.

from profiling_guide.pages.interactive_timeline import RanksStep

RanksStep(runs["ddp_straggler"].rank_trace_paths,
          caption="DDP with a straggler: one profiled step of each rank")

# %%
# Where each rank's time goes, per profiled step: computing, communicating
# (and how much of that hid behind compute), communicating with nothing
# else to do (exposed), and waiting for another rank inside a collective
# (the run analysis: a collective's kernel runs until its last rank arrives,
# so a rank's wait is its kernel's time minus the shortest rank's).

from profiling_guide.pages import charts, facts, tables

fig = charts.rank_time({n: analyses[n] for n in ("ddp", "fsdp2", "ddp_straggler")})

# %%
# The same, in numbers, every column in ms per profiled step (the hidden and
# the exposed parts add up to the communication):

tables.styled(strategies.rank_table(analyses["ddp"]), precision=2, caption="DDP")

# %%

tables.styled(strategies.rank_table(analyses["fsdp2"]), precision=2, caption="FSDP2")

# %%

tables.styled(strategies.rank_table(analyses["ddp_straggler"]), precision=2,
              caption="DDP, rank 1 a straggler")

# %%
# .. raw:: html
#
#    <details class="pg-aside"><summary>Who waits for whom, and when a rank is named:
#    the rule, job by job and step by step</summary>
#
# Even two identical ranks are not in lockstep. A collective's kernel runs
# until the last rank arrives, so at every call one rank arrives last and
# the others wait for it. Per job and rank: the calls it arrived last at and
# how long the others waited for it; how much later than the first rank its
# CPU and its GPU began each step (mean over the steps, clocks aligned by the
# collectives' ends); its GPU's idle time (a GPU that idles while the others
# wait is held back by its CPU, which issued the work late); and its step
# re-timed on its own: each collective at its transfer time, no rank to wait
# for, the profiler's cost taken out of its CPU's time.

tables.styled(strategies.arrivals_table(analyses), precision=2)

# %%
# Waiting for a rank is not yet being held up by it. The run analysis names
# the rank the others wait for only when its lateness is more than noise,
# by a rule of three parts. Re-timed on its own, its step must be longer
# than every other rank's by at least 5 % of the run's step (less would save
# too little to matter), and by more than the noise: the IQR of the run's
# re-timed step over the profiled steps (a lateness that small could be any
# step's). And the others must wait for it, at least 5 % of a step in the
# calls it arrived last at: a rank can be the slowest on its own only
# because its compute shared the GPU with collective kernels that waited
# for another rank. A rank the others wait for while its GPU idles, that
# keeps up once the profiler's cost is taken out of its CPU's time, is late
# because of the profiler, not its work: it is not named either. The same
# rule names the culprit in ``profiling-guide report``. In each job:

tables.styled(strategies.named_table(analyses), precision=2)

# %%
# In plain DDP, at every all-reduce one rank arrives last, and the other
# waits for it; yet no rank holds the other up. Step by step: whose GPU
# began the step later, by how much, and at how many of the step's
# all-reduces it arrived last; the wait grows or shrinks through the step,
# as one GPU computes a little faster than the other:

tables.styled(strategies.step_lags(analyses["ddp"]), precision=3)

# %%
# Neither rank has more to do: they run the same kernels, and their GPUs'
# compute per step is within 1 % (below). The first step's lag is older
# than the profiled steps: the profiler began recording while every GPU
# still ran work launched before it, and the rank whose GPU began the first
# profiled step last had finished that work as much later. Its CPU was not
# the cause: each rank's CPU ran the profiled steps milliseconds ahead of
# its GPU. The other rank's all-reduces, on a stream of their own, wait for
# it beside the backward: the wait costs the step almost nothing, and the
# re-timed steps above differ by far less than 5 %. Two more checks, then
# the numbers:

predictions += [
    expect.Prediction("In plain DDP no rank is named; the GPUs compute within 1 %",
                      strategies.no_rank_named(analyses["ddp"])),
    expect.Prediction("In each step, the rank whose GPU began it last arrives last at most of its "
                      "all-reduces (guess)",
                      strategies.late_gpu_arrives_last(analyses["ddp"]), must_hold=False),
    expect.Prediction("That rank's lag is older than the profiled steps: its GPU finished the work "
                      "launched before the recording as much later (guess)",
                      strategies.lag_predates_recording(analyses["ddp"]), must_hold=False),
]
facts.recording_start(analyses["ddp"])

# %%
# .. raw:: html
#
#    </details>
#
# What the straggler did while the others waited, from its own trace: the
# ops whose device work ran in those gaps, with the ``record_function`` label
# around them, per profiled step.

from profiling_guide.analysis.ranks import straggler_activity

straggler = analyses["ddp_straggler"].straggler
slow = Trace.load(runs["ddp_straggler"].rank_trace_paths[straggler])
activity = straggler_activity(slow, straggler, analyses["ddp_straggler"].calls)
tables.styled(strategies.activity_table(activity, len(slow.steps)).head(4), precision=2)

# %%
# The collectives, per call: its buffer (nccl-tests' size), how many per
# step, what each rank sends per step, and its bus bandwidth (nccl-tests'
# definition), also as a percentage of the sweep measured on the same
# machine at that size.
# One weight's gradient is 2048 × 8192 bf16 values, 33.55 MB: more than a
# 25 MB or a 5 MB bucket holds, so those two runs all-reduce the same
# twelve single-weight buckets. The sweep times back-to-back calls with
# nothing beside them; a call's transfer here is the kernel of the rank
# that arrived last, and the last column says how much of it ran beside
# that rank's compute, sharing the GPU's SMs and memory with it. A transfer
# that ran beside compute falls below the sweep; one that ran alone can
# match it or pass it.

shown = {n: analyses[n] for n in ("ddp", "ddp_bucket5", "ddp_bucket100", "fsdp2")}
tables.styled(strategies.collectives_table(shown), precision=2)

# %%
# What each rank sends, from the calls' sizes in the traces:

facts.bytes_sent({n: analyses[n] for n in ("ddp", "fsdp2")})

# %%
# The verdict
# -----------

verdicts = expect.judge(predictions, None, seen_header="what the traces show")
tables.verdict_table(verdicts)

# %%
# A guess marked ✗ did not hold on these recordings. The all-gathers of a
# rank whose GPU idles, waiting for its CPU (the arrivals table above), run
# with nothing beside them on that rank, however well the other ranks hide
# theirs.

# %%
# What to do next
# ---------------
# Each strategy's trace suggests one change; each was run, profiler off,
# ten steps one at a time (rank 0's wall time per step, median and IQR), and
# its peak memory read from the caching allocator:

changes = [("ddp", "ddp_bucket100", "DDP, 25 MB → 100 MB buckets (fewer, larger all-reduces)"),
           ("fsdp2", "fsdp2_no_reshard", "FSDP2, weights kept between forward and backward"),
           ("ddp", "fsdp2", "DDP → FSDP2")]
facts.before_after(times, strategies.peak_memory_mb(runs), changes)

# %%
# Bigger buckets run each all-reduce nearer the sweep's bandwidth, but the
# last one, exposed, grows with them. FSDP2 that keeps the gathered weights
# skips the backward's all-gathers, at the memory cost of holding them. And a
# straggler is found by the run analysis, not by the fast ranks' own traces
# alone: run ``profiling-guide report`` over every rank's trace.

verdicts.require()
chapter.downloads()

# %%
# Run it yourself
# ---------------
# ::
#
#     export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
#     torchrun --nproc_per_node 2 -m profiling_guide.kernels.train_ranks \
#         --strategy fsdp2 --out traces/fsdp2
#     profiling-guide report traces/fsdp2/rank*.trace.json.gz
#     python examples/plot_10_multi_gpu.py     # this page: live on two GPUs, else replayed
