"""
Deep dive 4 · Liger's kernel: its launch, new shapes, and kernelize
===================================================================

Optional, after chapter 4. How Liger's ``geglu_forward`` configures its
kernel, why a new sequence length needs no new compile, and the way a
transformers model gets the same kernel: ``kernels.kernelize``. Everything is
read from chapter 4's recordings; nothing is measured again.
"""

# %%
# The recordings
# --------------

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.recorded("04_liger")
liger_run = chapter.read("liger")
check = chapter.read("check")
sweep = chapter.read("sweep")
kernelized = chapter.read("kernelized")
chapter.banner()

# %%
# One Liger step, to explore
# --------------------------
# Drag to pan, the buttons (or Ctrl and the wheel) to zoom, hover a bar for
# its decoded name, its µs and, for a kernel, the op that launched it and how
# long it waited after its launch.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(liger_run.trace, caption="Liger, one profiled step")

# %%
# How Liger launches its kernel
# -----------------------------
# Liger's ``geglu_forward`` gives each row of the ``[B·S, hidden]`` input to
# one program: the grid is the number of rows, and ``calculate_settings``
# picks the block (the next power of two ≥ ``hidden`` columns) and the warps
# from the column count alone. The trace records what was launched:

from profiling_guide.pages import facts

hidden = liger_run.run["args"]["hidden"]
geglu = next(k for k in liger_run.trace.steps[0].kernels if "geglu" in k.name)
facts.liger_launch(geglu, check.values, hidden)

# %%
# Both against a float64 reference, as chapter 4 checked them:

import pandas as pd

from profiling_guide.pages import tables

tables.styled(pd.DataFrame(check.values["errors"]).T.map("{:.2e}".format))

# %%
# A new shape, no recompilation
# -----------------------------
# Liger's kernel specialises on ``n_cols`` and ``BLOCK_SIZE`` (both set by
# ``hidden``), not on the number of rows. A new sequence length only changes
# the grid, so the Triton kernel compiled for the first shape serves all of
# them. The same shapes as chapter 3's deep dive, in the order they ran: the
# first call's wall time, and the device time per forward after it.

tables.styled(pd.DataFrame(sweep.values), precision=1)

# %%
# The transformers way: kernelize
# -------------------------------
# A transformers model never builds Liger's class. It gives a layer a hub
# layer name and keeps its own code; ``kernels.kernelize`` then replaces that
# layer's ``forward`` with one from a kernel repository, chosen by a mapping.
# Chapter 4 named our unchanged MLP::
#
#     @use_kernel_forward_from_hub("GeGLUMLP")
#     class HubGeGLUMLP(SimpleGeGLUMLP): ...
#
# and kernelized it by :func:`~profiling_guide.kernels.kernelize.kernelize_with_liger`
# with a mapping to the local kernel repository::
#
#     layer = LocalLayerRepository(repo, layer_name="LigerGEGLUMLPForward")
#     with use_kernel_mapping({"GeGLUMLP": {"cuda": layer}}):
#         kernelize(hub_mlp, mode=Mode.INFERENCE, device="cuda")
#
# The module and its weights stay; only ``forward`` becomes Liger's. Its
# trace:

from profiling_guide.analysis import expect, predicates

kernelized_verdicts = expect.judge([
    expect.Prediction("under mlp_fwd, our kernelized MLP runs Liger's geglu kernel and 3 GEMMs",
                      predicates.geglu_and_gemms_under("mlp_fwd"), "kernels.kernelize"),
    expect.Prediction("the same kernels as LigerGEGLUMLP",
                      predicates.same_kernels_as(liger_run.trace), "kernels.kernelize",
                      must_hold=False),
], kernelized.trace)
tables.verdict_table(kernelized_verdicts)

# %%

kernelized_verdicts.require()
