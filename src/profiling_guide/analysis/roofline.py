"""Ceilings and references, and how close a kernel comes to them: pure arithmetic.

A kernel is limited by arithmetic (it cannot do FLOPs faster than the GPU's
matrix units) or by memory (it cannot move bytes faster than HBM). Two kinds
of number bound it, and the guide keeps their names apart:

* a **ceiling** is a vendor datasheet peak (:data:`DATASHEETS`: dense bf16
  TFLOP/s and HBM bandwidth, looked up by GPU name). Physics keeps every
  kernel under it, so a page never shows a kernel above 100 % of a ceiling;
* a **reference** is a rate measured on the GPU at hand
  (:func:`profiling_guide.measure.timing.reference_rates`: the best cuBLAS GEMM rate
  and the best device-to-device copy). Real code reaches it; a short kernel at
  a boosted clock can beat it, so "% of reference" may exceed 100.

A *bound* is the least time a piece of work can take at the ceilings
(:func:`datasheet_bound_us`); the *achieved fraction* is how much of a rate a
measured time reached (:func:`achieved_fraction`).
"""

from __future__ import annotations

import pandas as pd

from profiling_guide.errors import GuideError

# Dense (no sparsity) bf16 tensor-core peak and HBM bandwidth, from the vendor's datasheets.
H100_DATASHEET = "https://www.nvidia.com/en-us/data-center/h100/"
H200_DATASHEET = "https://www.nvidia.com/en-us/data-center/h200/"
A100_DATASHEET = "https://www.nvidia.com/en-us/data-center/a100/"
DATASHEETS = {  # key: what the name reported by torch.cuda.get_device_name() contains
    "H100 80GB HBM3": ("H100 SXM", 989.4, 3.35, H100_DATASHEET),
    "H100 PCIe": ("H100 PCIe", 756.0, 2.0, H100_DATASHEET),
    "H100 NVL": ("H100 NVL", 835.0, 3.9, H100_DATASHEET),
    "H200 NVL": ("H200 NVL", 835.0, 4.8, H200_DATASHEET),
    "H200": ("H200 SXM", 989.4, 4.8, H200_DATASHEET),
    "A100-SXM4-80GB": ("A100 SXM 80GB", 312.0, 2.039, A100_DATASHEET),
    "A100-SXM4-40GB": ("A100 SXM 40GB", 312.0, 1.555, A100_DATASHEET),
}


def datasheet_for(gpu_name: str) -> dict | None:
    """The datasheet peaks of ``gpu_name`` (as torch reports it), or None for a GPU not in the table."""
    for key, (model, tflops, tbps, source) in DATASHEETS.items():
        if key.lower() in (gpu_name or "").lower():
            return {"model": model, "bf16_tflops": tflops, "hbm_tbps": tbps, "source": source}
    return None


def datasheet_bound_us(flops: float, nbytes: float, datasheet: dict) -> float:
    """Least µs for ``flops`` and ``nbytes`` of HBM traffic at the datasheet peaks: the larger of the two times."""
    return max(flops / datasheet["bf16_tflops"] / 1e6, nbytes / datasheet["hbm_tbps"] / 1e6)


def achieved_tflops(flops: float, us: float) -> float:
    """The rate ``flops`` done in ``us`` microseconds amounts to, in TFLOP/s."""
    return flops / us / 1e6


def achieved_fraction(achieved: float, bound: float) -> float:
    """``achieved / bound`` (e.g. TFLOP/s over a reference rate, or a bound's µs over measured µs)."""
    if not bound:
        raise GuideError("a rate of zero: measure the reference rates before comparing with them")
    return achieved / bound


# ------------------------------------------------------- kernels of a trace
def intermediate_passes(kernel_name: str) -> int | None:
    """Passes over the MLP's ``[rows, hidden]`` intermediate a pointwise kernel makes, from its name.

    GeLU alone reads g and writes gelu(g): 2. A mul reads two tensors and writes
    one: 3. A fused GeLU·mul (Inductor's ``..._gelu_mul_...``, Liger's
    ``_geglu_...``) reads g and u and writes h: 3. None for anything else.
    """
    name = kernel_name.lower()
    if "geglu" in name or ("gelu" in name and "mul" in name):
        return 3
    if "gelu" in name:
        return 2
    if "mul" in name:
        return 3
    return None


CEILING_COLUMN = "% of datasheet ceiling"
REFERENCE_COLUMN = "% of measured reference"


def kernel_work_table(trace, *, rows: int, dim: int, hidden: int, element: int, references: dict) -> pd.DataFrame:
    """Each kernel of one MLP forward against the datasheet ceiling and the measured reference.

    GEMMs in TFLOP/s (against the bf16 peak and the best cuBLAS rate),
    pointwise kernels in TB/s (against the HBM peak and the best copy). Every
    GEMM of the GeGLU MLP (gate, up, down; or a fused gate/up one) is
    ``2·rows·dim·hidden`` FLOPs per output it computes: a kernel decoded as a
    GEMM is counted that way, times 2 when it computes gate and up together
    (``geglu``). A pointwise kernel's bytes are its passes over the
    ``[rows, hidden]`` intermediate (:func:`intermediate_passes`) times
    ``rows·hidden·element``. ``references`` is what
    :func:`profiling_guide.measure.timing.reference_rates` returned.
    """

    sheet = references.get("datasheet") or {}
    by_name: dict[str, list] = {}
    for step in trace.steps:
        for ev in step.kernels:
            by_name.setdefault(ev.name, []).append(ev)
    n_steps = max(len(trace.steps), 1)
    out = []
    for name, events in by_name.items():
        k, durations = events[0].decoded, [ev.dur_us for ev in events]
        us = sum(durations) / len(durations)
        row = {"kernel": k.short, "kind": k.kind, "per forward": len(durations) // n_steps, "avg_us": us}
        if k.kind == "gemm":
            flops = 2 * rows * dim * hidden * (2 if "geglu" in name.lower() else 1)
            rate, peak, ref = flops / us / 1e6, sheet.get("bf16_tflops"), references["gemm_tflops"]["rate"]
            work, achieved = f"{flops / 1e9:.1f} GFLOP", f"{rate:.0f} TFLOP/s"
        elif (passes := intermediate_passes(name)) is not None:
            nbytes = passes * rows * hidden * element
            rate, peak, ref = nbytes / us / 1e6, sheet.get("hbm_tbps"), references["copy_tbps"]["rate"]
            work, achieved = f"{nbytes / 1e6:.0f} MB ({passes} passes)", f"{rate:.2f} TB/s"
        else:
            continue
        row |= {"work": work, "achieved": achieved, CEILING_COLUMN: 100 * rate / peak if peak else float("nan"),
                REFERENCE_COLUMN: 100 * rate / ref}
        out.append(row)
    return pd.DataFrame(out)
