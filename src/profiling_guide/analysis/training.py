"""A training step of the GeGLU MLP, read from its trace: its GEMMs by role, its memory, each kernel's forward op.

* :func:`step_gemms`: every GEMM of a step with its (M, K, N), read from the
  shapes the launching op recorded, and its role among the step's nine
  (forward gate, up and down; in the backward dX and dW of each linear),
  from those shapes and the phase (:func:`~profiling_guide.analysis.backward.phase_of`).
  A kernel that does two of them at once (ours: gate and up in one) counts
  for two: ``gemms`` is its FLOPs over one linear's.
* :func:`step_memory`: the caching allocator's counters over a step
  (``profile_memory=True``): what the forward still holds when the backward
  starts (the saved tensors and the output), and the step's peak.
* :func:`kernel_owner`: the forward op a kernel belongs to: the one that
  launched it, or for a backward kernel the forward op its backward op
  differentiates (the profiler's ``fwdbwd`` flows).
"""

from __future__ import annotations

import posixpath

import pandas as pd

from profiling_guide.analysis.backward import phase_of
from profiling_guide.analysis.trace_report import GEMM_OPERANDS, gemm_shape
from profiling_guide.trace.model import CpuOp, DeviceEvent, Step, Trace

# Our own autograd Function (profiling_guide.kernels.fused_mlp.GeGLUFunction) launches
# its Triton GEMMs itself: their shapes are read from its recorded inputs.
FUSED_FORWARD, FUSED_BACKWARD = "GeGLUFunction", "GeGLUFunctionBackward"


def _chain(op: CpuOp | None) -> list[CpuOp]:
    return [op, *op.ancestors()] if op is not None else []


def gemm_dims(kernel: DeviceEvent) -> tuple[int, int, int] | None:
    """``(M, K, N)`` of the product ``kernel`` computes, from its launching op's recorded shapes; None if not a GEMM.

    A 2-D product of :data:`~profiling_guide.analysis.trace_report.GEMM_OPERANDS`
    (``aten::mm(A[M, K], B[K, N])``, ``aten::addmm(bias, A, B)``, ...); our fused
    forward (x ``[M, K]``, gate and up weights ``[N, K]`` each: one ``[M, 2N]``
    product) and its backward's Triton kernel (dy ``[M, K]`` times the down
    weight ``[K, N]`` of the forward op it is linked to).
    """
    if kernel.kind != "kernel" or kernel.launch is None or kernel.launch.op is None:
        return None
    op = kernel.launch.op
    if op.name in GEMM_OPERANDS:
        shape = gemm_shape(op)
        return shape[1:] if shape is not None and shape[0] == 1 else None
    if op.name == FUSED_FORWARD and len(op.input_dims) >= 2:
        (m, k), (n, _) = op.input_dims[0][-2:], op.input_dims[1]
        return m, k, 2 * n
    if op.name == FUSED_BACKWARD and op.forward_op is not None and len(op.forward_op.input_dims) >= 4:
        m, k = op.input_dims[0][-2:]
        return m, k, op.forward_op.input_dims[3][1]
    return None


def gemm_role(phase: str, mkn: tuple[int, int, int], rows: int, dim: int, hidden: int) -> str:
    """Which of the step's GEMMs a product of ``mkn`` is, in ``phase``, for the MLP ``dim → hidden → dim``."""
    roles = {
        ("forward", (rows, dim, hidden)): "gate or up: x·Wᵀ",
        ("forward", (rows, dim, 2 * hidden)): "gate and up in one: x·[Wg; Wu]ᵀ",
        ("forward", (rows, hidden, dim)): "down: h·Wdᵀ",
        ("backward", (rows, dim, hidden)): "down's dX: dh = dy·Wd",
        ("backward", (dim, rows, hidden)): "down's dW: dyᵀ·h",
        ("backward", (rows, hidden, dim)): "gate's or up's dX: dg·Wg, du·Wu",
        ("backward", (rows, 2 * hidden, dim)): "gate's and up's dX in one: [dg | du]·[Wg; Wu]",
        ("backward", (hidden, rows, dim)): "gate's or up's dW: dgᵀ·x, duᵀ·x",
        ("backward", (2 * hidden, rows, dim)): "gate's and up's dW in one: [dg | du]ᵀ·x",
    }
    return roles.get((phase, tuple(mkn)), "other")


def step_gemms(trace: Trace, *, rows: int, dim: int, hidden: int, references: dict | None = None) -> pd.DataFrame:
    """The GEMM kernels of a step, in launch order, with their role and rate (µs: the mean over the trace's steps).

    Columns: ``phase``, ``role``, ``kernel`` (decoded), ``M·K·N``, ``gemms``
    (its FLOPs in units of one linear's, ``2·rows·dim·hidden``), ``µs``,
    ``TFLOP/s``, and with ``references`` ``% of reference``: against the
    cuBLAS rate measured at the same (M, K, N) in the same run, or the best
    measured rate where that shape was not measured.
    """
    per_step = [[(ev, gemm_dims(ev)) for ev in step.kernels] for step in trace.steps]
    per_step = [[(ev, mkn) for ev, mkn in kernels if mkn] for kernels in per_step]
    if not per_step or not per_step[0]:
        return pd.DataFrame(columns=["phase", "role", "kernel", "M·K·N", "gemms", "µs", "TFLOP/s"])
    unit = 2 * rows * dim * hidden
    # the reference rates measured per shape, keyed "M·K·N" (profiling_guide.measure.timing.reference_rates)
    by_shape = {name: c["median"] for name, c in ((references or {}).get("gemm_tflops", {}).get("candidates") or {}).items()}
    rows_out = []
    for i, (ev, mkn) in enumerate(per_step[0]):
        same = [kernels[i][0].dur_us for kernels in per_step if len(kernels) > i and kernels[i][1] == mkn]
        us = sum(same) / len(same)
        flops = 2 * mkn[0] * mkn[1] * mkn[2]
        phase = phase_of(ev.launch.op)
        row = {"phase": phase, "role": gemm_role(phase, mkn, rows, dim, hidden), "kernel": ev.decoded.short,
               "M·K·N": "·".join(map(str, mkn)), "gemms": flops / unit, "µs": us, "TFLOP/s": flops / us / 1e6}
        if references:
            rate = by_shape.get(row["M·K·N"], references["gemm_tflops"]["rate"])
            row["% of reference"] = 100 * row["TFLOP/s"] / rate
        rows_out.append(row)
    return pd.DataFrame(rows_out)


def step_memory(trace: Trace, step: Step) -> dict:
    """The CUDA caching allocator over ``step``, in MB: ``held_at_backward`` and ``peak`` above the step's start.

    Both are above the step's low point before its backward: the step may
    first free the last step's gradients (``optimizer.zero_grad()``, or
    ``.grad = None``). ``held_at_backward``: allocated when the step's first
    backward op starts, above that low: the tensors the forward saved for
    backward, and its output. ``peak``: the highest total in the step, above
    it. ``allocations``: how many allocations the step made.
    Needs a trace profiled with ``profile_memory=True``; None without one.
    """
    events = [e for e in trace.memory_events if e.device_type == 1 and step.start_us <= e.start_us <= step.device_end_us]
    if not events:
        return None
    backward = [op.start_us for op in step.ops if not op.annotation and phase_of(op) == "backward"]
    first_backward = min(backward) if backward else step.device_end_us
    before = [e for e in events if e.start_us < first_backward]
    start = events[0].total_allocated - events[0].bytes
    base = min([start, *(e.total_allocated for e in before)])
    held = (before[-1].total_allocated if before else start) - base
    return {"held_at_backward_mb": held / 1e6, "peak_mb": (max(e.total_allocated for e in events) - base) / 1e6,
            "allocations": sum(1 for e in events if e.bytes > 0)}


def top_level(op: CpuOp) -> CpuOp:
    """The outermost op of ``op``'s chain that is not a ``record_function`` label or a profiler step."""
    outer = op
    for anc in op.ancestors():
        if anc.annotation:
            break
        outer = anc
    return outer


def kernel_owner(kernel: DeviceEvent) -> tuple[str, CpuOp | None]:
    """``(phase, forward op)`` of ``kernel``: the top-level forward op it was launched in, or whose backward launched it.

    The forward op is None for work that belongs to no forward op (gradient
    accumulation, a kernel whose launch was not recorded).
    """
    op = kernel.launch.op if kernel.launch is not None else None
    phase = phase_of(op)
    if phase == "forward":
        return phase, top_level(op) if op is not None else None
    for o in _chain(op):
        if o.forward_op is not None:
            return phase, top_level(o.forward_op)
    return phase, None


def snapshot_summary(after_forward: dict, after_step: dict) -> dict:
    """What two ``torch.cuda.memory._snapshot()`` dicts of one recorded step say, JSON-ready.

    ``after_forward`` is taken between the forward and the backward,
    ``after_step`` at the end; history was recorded from just before the
    forward, so the blocks that carry ``frames`` were allocated by this step.
    Returns ``held`` (one entry per block the forward allocated and still
    holds: ``mb`` and ``where``, the innermost frame of the allocating Python
    line, as ``file:line function``), ``held_mb`` (their sum) and
    ``peak_mb`` (the highest this step's allocations stood above its start,
    replaying the allocator's alloc and free events in order).
    """
    held = []
    for segment in after_forward.get("segments", []):
        for block in segment.get("blocks", []):
            frames = block.get("frames") or []
            if block.get("state") != "active_allocated" or not frames:
                continue
            held.append({"mb": round(block.get("requested_size", block["size"]) / 1e6, 3), "where": _frame_text(frames)})
    held.sort(key=lambda b: -b["mb"])
    level = peak = 0
    for trace in after_step.get("device_traces", []):
        for event in trace:
            if event.get("action") == "alloc":
                level += event["size"]
                peak = max(peak, level)
            elif event.get("action") == "free_completed":
                level -= event["size"]
    return {"held": held, "held_mb": round(sum(b["mb"] for b in held), 3), "peak_mb": round(peak / 1e6, 3)}


def _frame_text(frames: list[dict]) -> str:
    """The innermost frame outside torch's own modules (else the innermost), as ``file:line function``."""
    def own(frame):
        name = frame.get("filename", "")
        return "/torch/" not in name and not name.startswith("??")

    frame = next((f for f in frames if own(f)), frames[0])
    return f"{posixpath.basename(frame.get('filename', '?'))}:{frame.get('line', '?')} {frame.get('name', '?')}"
