"""
10 · Several GPUs: DDP and FSDP2, compute against communication
===============================================================

The guide's GeGLU MLP, four blocks deep, trained on two GPUs at once: with
``DistributedDataParallel`` (each GPU a whole copy, gradients averaged by
all-reduce) and with FSDP2 (each GPU a shard of every weight, gathered when
a block runs). Every rank writes its own trace. Read together, they say how
much of a step is communication, how much of it hides behind compute, and
who keeps the others waiting.

Needs: ``pip install`` of this repository; two or more CUDA GPUs to record
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
#    :lines: 29-63
#
# Run it yourself on two GPUs (the whole script is
# :mod:`profiling_guide.kernels.train_ranks`; it imports only torch)::
#
#     NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 -m profiling_guide.kernels.train_ranks \
#         --strategy ddp --out traces/ddp

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("10_multi_gpu", ranks=2, layers=4, dim=2048, hidden=8192, batch=8, seq=1024)
flags = chapter.flags
SIZES = ["--layers", str(flags.layers), "--dim", str(flags.dim), "--hidden", str(flags.hidden),
         "--batch", str(flags.batch), "--seq", str(flags.seq)]
chapter.banner()

# %%
# The runs
# --------
# Five jobs of two ranks each (on a GPU machine; in replay their recordings
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
