"""The GPU's SM clock, power draw and clock-limit reasons while a workload runs, sampled with ``nvidia-smi``.

A trace records times, not clocks. A workload that draws the GPU to its
power limit (dense GEMMs back to back can) makes the driver lower the SM
clock until the draw fits; the time of a kernel that waits on its tensor
cores scales with that clock, the time of one that waits on memory hardly
does. Whether the times one compares were taken at the same clock is a
question for the clocks themselves.

:func:`clocks_while` runs a workload over and over for a while and samples
``nvidia-smi --query-gpu`` meanwhile (every 20 ms): the median SM clock and
power draw, the GPU's limits, and why the clock was held below its maximum
(the driver's *clocks event reasons*: ``software power cap`` is the power
limit). It needs ``nvidia-smi`` on the PATH, as an NVIDIA driver installs
it; without it the answer is ``None``, and the caller says so.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

# nvidia-smi's fields, in the order parse_line reads them
QUERY = "clocks.sm,clocks.max.sm,power.draw,power.limit,clocks_event_reasons.active"

# The bits of clocks_event_reasons.active (NVML's nvmlClocksEventReason* constants).
REASONS = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}


@dataclass(frozen=True)
class ClockSample:
    """One line of nvidia-smi's answer: MHz, watts and the reasons' bit mask."""

    sm_mhz: float
    max_sm_mhz: float
    power_w: float
    power_limit_w: float
    reasons: int


def parse_line(line: str) -> ClockSample | None:
    """A sample from one CSV line of ``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits``, or None.

    None where the line is not five fields or a field is not a number (``[N/A]``
    on GPUs that do not report it).
    """
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 5:
        return None
    try:
        sm, max_sm, power, limit = (float(f) for f in fields[:4])
        reasons = int(fields[4], 16)
    except ValueError:
        return None
    return ClockSample(sm, max_sm, power, limit, reasons)


def reasons_of(mask: int) -> list[str]:
    """The names of the reasons set in ``mask``, in bit order (unknown bits as hex)."""
    names = [name for bit, name in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS)
    return names + ([hex(rest)] if rest else [])


def summarize(samples: list[ClockSample]) -> dict:
    """Medians of the SM clock and power draw, the limits, and each reason's share of the samples (:func:`reasons_of`)."""
    if not samples:
        raise ValueError("no clock samples to summarize")
    hits = Counter(name for s in samples for name in reasons_of(s.reasons))
    shares = {name: round(hit / len(samples), 3) for name, hit in hits.items()}
    return {"samples": len(samples),
            "sm_mhz": statistics.median(s.sm_mhz for s in samples),
            "max_sm_mhz": max(s.max_sm_mhz for s in samples),
            "power_w": round(statistics.median(s.power_w for s in samples), 1),
            "power_limit_w": max(s.power_limit_w for s in samples),
            "reasons": shares}  # fmt: skip


def gpu_id(device=None) -> str:
    """nvidia-smi's ``-i`` for torch's ``device``: its UUID, which names the same GPU whatever CUDA_VISIBLE_DEVICES says."""
    import torch  # lazy: the pages read this module's summaries without torch

    return f"GPU-{torch.cuda.get_device_properties(device).uuid}"


def clocks_while(fn: Callable[[], object], *, seconds: float = 1.5, settle: float = 0.3, interval_ms: int = 20,
                 batch: int = 20, device=None) -> dict | None:  # fmt: skip
    """:func:`summarize` of nvidia-smi's samples while ``fn()`` runs over and over for ``seconds``; None without nvidia-smi.

    ``fn`` is called ``batch`` times between waits for the GPU; sampling
    starts ``settle`` seconds in, once the clock has followed the load. To
    read the clocks a benchmark's timings were taken at, pass the benchmark's
    own timing loop as ``fn`` (and ``batch=1``): a loop of bare calls can
    keep the GPU busier, or less busy, than the benchmark did.
    """
    import torch  # lazy, as in gpu_id

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    fn()
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    sampler = None
    try:
        while time.perf_counter() - start < seconds:
            if sampler is None and time.perf_counter() - start >= settle:
                sampler = subprocess.Popen([smi, "-i", gpu_id(device), f"--query-gpu={QUERY}",
                                            "--format=csv,noheader,nounits", "-lms", str(interval_ms)],
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
            for _ in range(batch):
                fn()
            torch.cuda.synchronize(device)
    finally:
        if sampler is not None:
            sampler.terminate()
    if sampler is None:
        return None
    out, _ = sampler.communicate(timeout=10)
    samples = [s for s in map(parse_line, out.splitlines()) if s is not None]
    return summarize(samples) if samples else None


def describe(summary: dict | None) -> str:
    """One line for the console: clock, power and the reasons that held the clock down."""
    if summary is None:
        return "clocks not sampled (no nvidia-smi on the PATH, or no reading from it)"
    reasons = ", ".join(f"{name} {share:.0%}" for name, share in summary["reasons"].items()) or "none"
    return (f"SM clock {summary['sm_mhz']:.0f} of {summary['max_sm_mhz']:.0f} MHz, "
            f"{summary['power_w']:.0f} of {summary['power_limit_w']:.0f} W, limited by: {reasons}")  # fmt: skip
