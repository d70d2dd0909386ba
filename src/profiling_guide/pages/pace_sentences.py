"""Who sets the pace under the profiler, in sentences: what the report and the pages say of a trace or a rank.

:func:`headline` and :func:`evidence` state a
:class:`~profiling_guide.analysis.pace.Pace`; :func:`rank_headline` a rank
of a run (:class:`~profiling_guide.analysis.ranks.RankPace`). They are
written here once, so ``profiling-guide report``, the run's report and the
pages that quote a verdict say it in the same words.
"""

from __future__ import annotations

from profiling_guide.analysis.pace import Pace
from profiling_guide.analysis.ranks import RankPace


def fmt_us(us: float) -> str:
    """A duration for prose: ``"253.0 µs"``, ``"273.8 ms"``, ``"43.4 s"``."""
    if abs(us) >= 1e6:
        return f"{us / 1e6:,.1f} s"
    if abs(us) >= 1e4:
        return f"{us / 1e3:,.1f} ms"
    return f"{us:,.1f} µs"


def headline(p: Pace) -> str:
    """The verdict in a sentence or two, with what would help."""
    if p.verdict == "no GPU work":
        return "No GPU work was recorded: the trace is CPU only, so the CPU sets the pace."
    if p.verdict == "GPU":
        text = ("The GPU sets the pace: it ran its work back to back while more waited in its queue; the CPU "
                "issued work faster than the GPU ran it. Faster kernels, or fewer, would help.")
    elif p.verdict == "collectives":
        text = (f"Collectives set the pace: NCCL kernels ran during {p.comm_share:.0%} of the time this GPU was "
                f"busy ({fmt_us(p.comm_us)} of {fmt_us(p.busy_us)} per step), {fmt_us(p.exposed_comm_us)} of it "
                "with no compute beside it. A collective's kernel runs until every rank of its group has arrived, "
                "so that time is the transfer plus waiting for the other ranks: faster kernels here would not "
                "shorten it.")
        if p.rank is not None:
            text += (f" This trace is rank {p.rank[0]} of {p.rank[1]}: the other ranks' traces say which rank it "
                     "waited for (profiling-guide report with all of them).")
    elif p.verdict == "CPU":
        text = (f"The CPU sets the pace: the GPU was idle {1 - p.share:.0%} of the time, waiting for work. Less "
                "Python and fewer launches per step (torch.compile, CUDA graphs, larger batches) would help "
                "more than faster kernels.")
    elif p.queued_while_idle:
        text = (f"Neither side clearly sets the pace: work waited {fmt_us(p.delay_us)} in the queue although the "
                f"GPU sat idle {p.idle:.0%} of its span, so it waited on something else: another stream, a "
                "collective, a synchronizing copy. The verdict's critical path says which, and what it costs.")
    else:
        text = (f"Neither side clearly sets the pace: the GPU was busy {p.share:.0%} of the time, and its queue "
                "neither ran dry nor filled up. The verdict's critical path says what the rest of the step "
                "waited for, and what removing it would save.")
    if p.gpu_bound_unprofiled:
        text += (f" Without the profiler, though, the CPU issued a step in {fmt_us(p.unprofiled_cpu_us)} (run "
                 f"record), less than the {fmt_us(p.busy_us)} of GPU work: unprofiled, the GPU sets the pace.")
    return text


def evidence(p: Pace) -> list[str]:
    """The numbers behind the verdict, a sentence each."""
    if p.verdict == "no GPU work":
        return [f"{p.steps} step(s), {p.cpu_ops} CPU ops, no device events."]
    lines = [
        f"The GPU was busy {p.share:.0%} of the steps' time ({fmt_us(p.busy_us)} of {fmt_us(p.window_us)} per "
        "step, from the step's start to its last device work).",
        f"Between its first and last device event of a step the GPU sat idle {p.idle:.0%} of the time.",
    ]
    if p.delay_us is not None:
        line = f"Work waited {fmt_us(p.delay_us)} (median) between its launch and its start on the GPU"
        if p.delay_first_us is not None:
            line += (f"; the wait {'grows' if p.delay_grows else 'does not grow'} along the step (it grows when "
                     "the last third's exceeds 1.5× the first third's plus 2 µs): "
                     f"{fmt_us(p.delay_first_us)} for the first third of launches, {fmt_us(p.delay_last_us)} for "
                     "the last")
        lines.append(line + ".")
    if p.sync_us:
        lines.append(f"The CPU waited {fmt_us(p.sync_us)} per step in synchronizing calls "
                     "(cudaDeviceSynchronize, cudaStreamSynchronize, blocking copies).")
    if p.comm_us:
        line = (f"Collective (NCCL) kernels ran {fmt_us(p.comm_us)} per step, during {p.comm_share:.0%} of the "
                f"GPU's busy time; {fmt_us(p.exposed_comm_us)} of it with no compute kernel beside it (exposed)")
        if p.rank is not None:
            line += (f". Part of it is waiting for other ranks: this is rank {p.rank[0]} of {p.rank[1]}, and only "
                     "the other ranks' traces can say how much, and for whom")
        lines.append(line + ".")
    return lines


def rank_headline(r: RankPace) -> str:
    """One rank's verdict in a run: what it waited for in its collectives, and who waited for it."""
    if r.verdict == "collectives":
        return (f"Rank {r.rank} waits in its collectives: NCCL kernels ran during {r.comm_us / r.busy_us:.0%} of "
                f"the time its GPU was busy ({fmt_us(r.comm_us)} of {fmt_us(r.busy_us)} per step), and "
                f"{fmt_us(r.waited_us)} of that per step was waiting for the last rank to arrive, most of it for "
                f"rank {r.waited_for}. Faster kernels on rank {r.rank} would not help; look at rank {r.waited_for}.")
    parts = [headline(r.pace)]
    if r.waited_us > 0 and r.waited_for is not None:
        parts.append(f"It waited {fmt_us(r.waited_us)} per step in collectives for the last rank to arrive, most "
                     f"of it for rank {r.waited_for}.")
    if r.arrived_last is not None:
        parts.append(f"The other ranks waited for this rank: it arrived last at {r.arrived_last} of {r.calls} "
                     f"collectives, {fmt_us(r.late_us)} late per step in all.")
    return " ".join(parts)
