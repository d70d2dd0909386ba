"""
Deep dive 5 · The four MLPs kernel by kernel: rates, launches, templates, accuracy
==================================================================================

Optional, after chapter 5. Every kernel of the four variants against the
datasheet ceiling and the rates measured in the same run, what each variant
launches and costs the host, how far each is from a float64 reference, and
what max-autotune's GEMM templates read. Everything is read from chapter 5's
recordings; nothing is measured again.
"""

# %%
# The recordings
# --------------

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.recorded("05_compare")
result = chapter.read("bench").values
runs = {name: chapter.read(name) for name in ("eager", "compile", "compile-max-autotune", "liger")
        if (chapter.folder / f"05_compare.{name}.run.json").is_file()}
chapter.banner()

# %%
# Every kernel against the ceiling and the reference
# --------------------------------------------------
# GEMMs in TFLOP/s, pointwise kernels in TB/s, counting their passes over the
# ``[B·S, hidden]`` intermediate
# (:func:`~profiling_guide.analysis.roofline.intermediate_passes`); each against the
# datasheet ceiling and the rate measured in chapter 5's run.

import pandas as pd

from profiling_guide.analysis.roofline import kernel_work_table
from profiling_guide.pages import facts, tables

args = runs["eager"].run["args"]
rows, element = args["batch"] * args["seq"], 2  # bf16: chapter 5 runs bf16 only
work = pd.concat({name: kernel_work_table(run.trace, rows=rows, dim=args["dim"],
                                          hidden=args["hidden"], element=element,
                                          references=result["references"])
                  for name, run in runs.items()})
work.index = work.index.droplevel(1)
work.index.name = "variant"
tables.styled(work, precision=1)

# %%

facts.reference_rates(result["references"])

# %%
# Launches, host time and accuracy
# --------------------------------
# Kernel launches per forward (runtime calls whose name holds ``Launch``), the
# CPU's time to issue one forward with the profiler off (the benchmark's
# measurement), the kernels' summed time in a profiled forward, and the
# largest deviation from a float64 reference relative to the largest output.

from profiling_guide.pages.tables import spread_cell
from profiling_guide.spread import Spread

errors = result["max_rel_error_fp64"] or {}
tables.styled(pd.DataFrame({name: {
    "launches": int(sum(n for call, n in run.trace.runtime_calls_per_step().items()
                        if "Launch" in call)),
    "CPU µs to issue": spread_cell(Spread.from_dict(result["cpu_issue_us"][name])),
    "kernel µs, profiled": f"{run.trace.device_us_per_step():.1f}",
    "max error vs float64": f"{errors[name]:.1e}" if name in errors else "–",
} for name, run in runs.items()}).T)

# %%
# max-autotune's GEMM templates
# -----------------------------
# The Triton GEMM templates max-autotune kept, with the tensors each launch
# takes. A template whose name lists gelu and mul but whose launch takes a
# single ``[B, S, hidden]`` tensor reads ``h``, the pointwise kernel's output:
# it cannot recompute ``gelu(g)·u``, which needs both ``g`` and ``u``. Its name
# lists the ops of the graph nodes it was built from, not the work it repeats.

from profiling_guide.analysis import expect, predicates

# (eager's trace, which has none, where max-autotune failed live)
autotuned = runs.get("compile-max-autotune", runs["eager"]).trace
tables.styled(tables.template_table(autotuned), precision=1)

# %%

tables.verdict_table(expect.judge([
    expect.Prediction("a max-autotune GEMM template takes a single [B, S, hidden] tensor: h",
                      predicates.template_reads_one(args["hidden"]), "chapter 5's run",
                      must_hold=False),
], autotuned))
