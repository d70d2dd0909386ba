"""The one vocabulary of what makes a step slow, for the report and the chapters alike.

Each stretch of a step's critical path (:mod:`.critical_path`) is given one
:class:`Cause`; each cause has the fix the verdict recommends and the what-if
that re-times the step with it applied (:mod:`.verdict`). A :class:`Where`
says where a cause happens: the op, the ``record_function`` label, the kernel
kind, the rank.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Cause(enum.Enum):
    """What a stretch of the critical path was spent on."""

    GPU_COMPUTE = "gpu_compute"  # kernels (and memsets) running back to back: the GPU's own work
    LAUNCH_OVERHEAD = "launch_overhead"  # the host issuing work: Python between ops, dispatch, launch calls
    HOST_GAP = "host_gap"  # host time that issues no GPU work: untraced stretches, ops that launch nothing
    HOST_SYNC = "host_sync"  # the host waiting for the GPU (a sync, .item(), a blocking copy), then refilling it
    MEMCPY = "memcpy"  # host↔device copies, pageable ones blocking the host
    ALLOCATOR = "allocator"  # cudaMalloc / cudaFree (empty_cache, a cold caching allocator), cudaFree syncing
    EXPOSED_COMMUNICATION = "exposed_communication"  # collective kernels nothing else overlaps
    WAITING_FOR_RANK = "waiting_for_rank"  # collectives waiting for a later rank
    LOAD_IMBALANCE = "load_imbalance"  # ranks given unequal work (different kernels or shapes)
    PROFILER_OVERHEAD = "profiler_overhead"  # the profiler's own cost per recorded op and runtime call


#: What each cause's what-if does to the step, and the fix it stands for (the verdict's words).
FIXES = {
    Cause.GPU_COMPUTE: "faster or fewer kernels there (the what-if removes them: the most a faster kernel saves)",
    Cause.LAUNCH_OVERHEAD: "issue the work without the host in the loop: CUDA graphs "
                           "(torch.compile mode='reduce-overhead', torch.cuda.graph), or fewer, larger kernels",
    Cause.HOST_GAP: "take the host work off the step's path: a DataLoader with workers and pinned memory, "
                    "prefetching, or the work moved off the training thread",
    Cause.HOST_SYNC: "keep the value on the GPU: remove the .item()/.cpu()/synchronize there, or read it "
                     "every N steps",
    Cause.MEMCPY: "copy from pinned memory with non_blocking=True (pin_memory=True in the DataLoader), "
                  "ahead of the step on a side stream",
    Cause.ALLOCATOR: "let the caching allocator keep its memory: no torch.cuda.empty_cache() in the loop, "
                     "stable shapes, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    Cause.EXPOSED_COMMUNICATION: "overlap communication with compute: smaller DDP buckets, FSDP prefetching, "
                                 "or less to communicate",
    Cause.WAITING_FOR_RANK: "fix the rank it waits for (its own verdict says what holds it up)",
    Cause.LOAD_IMBALANCE: "give every rank the same work: the same shapes and the same kernels",
    Cause.PROFILER_OVERHEAD: "nothing in the program: the profiler's own cost, taken out before the causes "
                             "are ranked",
}

#: One-line meaning of each cause, for the report's page and the JSON's documentation.
MEANINGS = {
    Cause.GPU_COMPUTE: "kernels and memsets running back to back: the GPU's own work",
    Cause.LAUNCH_OVERHEAD: "the host issuing work while the GPU waits: Python between ops, dispatch, launch calls",
    Cause.HOST_GAP: "host time that issues no GPU work: 1 ms or more in a row of untraced time and ops that "
                    "launch nothing (a data pipeline, a sleep, Python work, CPU ops)",
    Cause.HOST_SYNC: "the host waiting for the GPU in a synchronizing call, then the GPU waiting while the host "
                     "fills its queue again",
    Cause.MEMCPY: "host↔device copies on the path; a copy from pageable memory also blocks the host",
    Cause.ALLOCATOR: "cudaMalloc and cudaFree calls (cudaFree also waits for the whole GPU)",
    Cause.EXPOSED_COMMUNICATION: "collective kernels with no compute beside them: the transfer itself",
    Cause.WAITING_FOR_RANK: "collectives waiting for the last rank of their group to arrive",
    Cause.LOAD_IMBALANCE: "ranks given unequal work: the culprit runs more or larger kernels than the others",
    Cause.PROFILER_OVERHEAD: "the profiler's own cost per recorded op and runtime call",
}


@dataclass(frozen=True)
class Where:
    """Where a cause happens: the outermost op, the innermost ``record_function`` label, the kernel kind, the rank.

    ``before`` names what came next on the host (the op or label that an untraced
    stretch ends at: "before forward").
    """

    op: str | None = None
    label: str | None = None
    kind: str | None = None
    rank: int | None = None
    before: str | None = None
    #: the program's Python function that ran there, where the trace recorded it (``with_stack=True``):
    #: ``"train.py:42 log_metrics"``, its file, first line and name
    source: str | None = None

    def words(self) -> str:
        """``"aten::item in 'forward'"``, ``"GEMM kernels of aten::mm in 'extra_work'"``, ``"before 'forward'"``."""
        parts = []
        # memsets and memcpys are device work but not kernels
        what = f"{self.kind}s" if self.kind in ("memcpy", "memset") else f"{self.kind} kernels"
        if self.kind and self.op:
            parts.append(f"{what} of {self.op}")
        elif self.kind:
            parts.append(what)
        elif self.op:
            parts.append(self.op)
        if self.label:
            parts.append(f"in '{self.label}'")
        if self.before and not self.op and self.before != self.label:  # inside a label, before its own work
            parts.append(f"before '{self.before}'")
        text = " ".join(parts) or "the step"
        if self.source:
            text += f", in {self.source}"
        return text if self.rank is None else f"{text} on rank {self.rank}"

    def to_dict(self) -> dict:
        return {"op": self.op, "label": self.label, "kind": self.kind, "rank": self.rank, "before": self.before,
                "source": self.source,
                "text": self.words()}
