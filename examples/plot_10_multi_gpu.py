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
# same model, wraps it, profiles four training steps with the plain
# ``torch.profiler`` block of chapter 1 and exports its own trace, then times
# ten steps with the profiler off:
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
# * FSDP2 moves more bytes than DDP: every weight is gathered for the
#   forward, again for the backward, and its gradient reduce-scattered.
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
predictions = [
    expect.Prediction("DDP's last all-reduce runs alone: it is the exposed communication",
                      strategies.last_call_exposed(rank0["ddp"])),
    expect.Prediction("DDP's other all-reduces hide behind the backward",
                      strategies.mostly_hidden(rank0["ddp"], "all_reduce", but_first=False),
                      must_hold=False),
    expect.Prediction("FSDP2's all-gathers overlap the previous block's compute, all but the first",
                      strategies.mostly_hidden(rank0["fsdp2"], "all_gather")),
    expect.Prediction("FSDP2 moves more bytes per step than DDP",
                      strategies.more_bytes(analyses, "fsdp2", "ddp")),
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

from profiling_guide.pages import charts, tables

fig = charts.rank_time({n: analyses[n] for n in ("ddp", "fsdp2", "ddp_straggler")})

# %%
# The same, in numbers:

tables.styled(strategies.rank_table(analyses["ddp"]), precision=2, caption="DDP")

# %%

tables.styled(strategies.rank_table(analyses["fsdp2"]), precision=2, caption="FSDP2")

# %%

tables.styled(strategies.rank_table(analyses["ddp_straggler"]), precision=2,
              caption="DDP, rank 1 a straggler")

# %%
# Even two identical ranks are not in lockstep in a profiled step: one
# begins a little later, and the other's collectives wait for it. The run
# analysis names a rank only when the others wait for it at least 5 % of a
# step. In each run:

from profiling_guide.pages import facts

facts.lockstep(analyses)

# %%
# What the straggler did while the others waited, from its own trace: the
# ops whose device work ran in those gaps, with the ``record_function`` label
# around them.

from profiling_guide.analysis.ranks import straggler_activity

straggler = analyses["ddp_straggler"].straggler
slow = Trace.load(runs["ddp_straggler"].rank_trace_paths[straggler])
activity = straggler_activity(slow, straggler, analyses["ddp_straggler"].calls)
tables.styled(activity.head(4), precision=1)

# %%
# The collectives, per call: its size, how many per step, and its bus
# bandwidth (nccl-tests' definition) against the sweep measured on the same
# machine at that size. One weight's gradient is 2048 × 8192 bf16 values,
# 33.5 MB: more than a 25 MB or a 5 MB bucket holds, so those two runs
# all-reduce the same twelve single-weight buckets. A collective that runs beside compute shares the
# GPU's memory and SMs with it: below the sweep is expected.

shown = {n: analyses[n] for n in ("ddp", "ddp_bucket5", "ddp_bucket100", "fsdp2")}
tables.styled(strategies.collectives_table(shown), precision=2)

# %%
# The verdict
# -----------

verdicts = expect.judge(predictions, None, seen_header="what the traces show")
tables.verdict_table(verdicts)

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
