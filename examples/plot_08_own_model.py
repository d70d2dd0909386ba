"""
8 · Profile your own model: a GPT-2 training step, read by the guide's report
=============================================================================

Chapters 1–7 profiled one layer at a time. Your model is bigger, and you
should not need to copy a chapter to profile it: hand ``profile_callable``
(or ``profiling-guide profile`` on the command line) a step of your own, and
it profiles that step with the guide's schedule, measures this GPU's
reference rates in the same run, and writes the trace and a report. Here the
step is one training step (forward, backward, optimizer) of a small GPT-2
from Hugging Face ``transformers``, a model none of the chapters has seen,
built from its config (no weights are downloaded).

*Needs:* no extra to replay; live, ``pip install 'profiling-guide[transformers]'``.
"""

# %%
# Your code
# ---------
# A *step factory*: it builds the model, the optimizer and a batch once, and
# returns the step that is profiled. This cell is all a reader writes; it
# runs as it is on any CUDA GPU after ``pip install`` of this repository and
# of ``transformers``.

import torch

from profiling_guide.report.profile_own import profile_callable


def make_step(vocab_size=50257):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=vocab_size, n_layer=4, n_embd=768, n_head=12,
                        n_positions=512)
    model = GPT2LMHeadModel(config).to("cuda", torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")

    def train_step():
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return train_step


# %%
# Profile it
# ----------
# One call, :func:`~profiling_guide.report.profile_own.profile_callable`. It
# runs the step twice to warm up (kernel selection, lazy initialisation),
# times it with the profiler off, profiles five steps (skip one, warm up one,
# record three, each inside a ``record_function`` label), measures the
# reference rates (a settled bf16 GEMM and a device-to-device copy), and
# writes ``gpt2_train_step.trace.json.gz``, ``.run.json`` and
# ``.report.html`` into the folder. ``profiling-guide profile
# my_train.py:make_step -o gpt2_profile --name gpt2_train_step`` does the
# same from a shell.

import tempfile

out_dir = tempfile.mkdtemp(prefix="gpt2_profile_")


def profile_train_step():
    return profile_callable(make_step, out_dir, name="gpt2_train_step")


# %%
# On a GPU, ``chapter.profile_own`` makes that call (its console output stays
# off this page) and keeps the trace and run record as this page's recording;
# elsewhere it reads the recording back. ``chapter`` knows which (chapter 1).

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("08_own_model",
                                    bf16_only_because="the GPT-2 step above is written in bf16")
chapter.banner()

# %%

train = chapter.profile_own("train", profile_train_step, label="gpt2_train_step", code=[make_step])

# %%
# Read the report
# ---------------
# ``profiling-guide report gpt2_profile/gpt2_train_step.trace.json.gz`` writes
# the HTML report (the run above wrote it already). The same analysis as data,
# :func:`~profiling_guide.analysis.trace_report.analyse`, gives the tables below; the
# report of this very trace is
# `here <../_reports/08_own_model.train.report.html>`_, self-contained and
# readable offline.

from profiling_guide.analysis.trace_report import analyse, read_run_record
from profiling_guide.trace.model import Trace

trace = Trace.load(train.trace_path)  # the trace profile_callable wrote
report = analyse(trace, run_record=read_run_record(train.trace_path))

# %%
# Who sets the pace: from the first launch of each step to the end of its last
# kernel, how busy was the GPU, and did the launch→start delay grow (the CPU
# running ahead) or stay flat (the GPU waiting for the CPU)?

from profiling_guide.pages.prose import Facts

Facts(f"{report.pace.bound.capitalize()}. {report.pace.headline}", *report.pace.evidence)

# %%
# The step: the forward's ops on the main thread, then the backward's on the
# autograd engine's thread (CPU depth 0), the optimizer last; the GPU lane
# below, with its few long kernels.

from profiling_guide.pages import timeline

fig = timeline.plot_step(trace, title="one GPT-2 training step")

# %%
# The same step, to explore: a few hundred kernels in three phases. Zoom
# into the forward, the backward and the optimizer; hover a kernel for its
# decoded name, its µs and the op that launched it.

from profiling_guide.pages.interactive_timeline import InteractiveTimeline

InteractiveTimeline(trace, caption="one GPT-2 training step, profiled")

# %%
# Forward, backward, optimizer
# ----------------------------
# The backward runs on the autograd engine's thread, and its kernels' names
# say nothing of the layer they belong to. The profiler ties each backward op
# (an autograd node such as ``AddmmBackward0``) to the forward op whose output
# it differentiates: a ``fwdbwd`` flow in the trace, which the report follows
# (:mod:`~profiling_guide.analysis.backward`). First each phase's device time
# per step, every kernel counted in the phase of the op that launched it:

from profiling_guide.pages import tables

tables.styled(report.phases.rename(columns={"device_us": "device µs per step",
                                            "share": "device-time share"}), precision=1)

# %%
# Then each forward op with the backward op it caused, the costliest backward
# first: its input shapes, how often per step, the device time each side
# launched, and the backward's kernels, decoded.

links = {"forward_op": "forward op", "shapes": "input shapes", "backward_op": "backward op",
         "per_step": "per step", "forward_us": "forward µs", "backward_us": "backward µs",
         "backward_kernels": "backward kernels"}
tables.styled(report.backward.head(10).rename(columns=links), precision=1)

# %%
# The kernels that take the device's time, decoded, with their launches per
# step and, where the trace gives a GEMM's shape or a memory-bound kernel's
# bytes, the fraction of the reference rate they reach:

readable = {"per_step": "launches per step", "us_per_step": "µs per step",
            "share": "device-time share", "launched_by": "launched by",
            "of_reference": "of reference"}
kernels = report.top_kernels.head(12)[["kernel", "kind", *readable, "achieved"]]
tables.styled(kernels.rename(columns=readable), precision=1)

# %%
# And the CPU ops that take the host's time (self time: without the ops they
# call):

op_columns = {"op": "op", "calls_per_step": "calls per step", "self_cpu_us": "self CPU µs",
              "cpu_total_us": "total CPU µs", "device_us": "device µs launched",
              "launches_per_step": "launches per step"}
tables.styled(report.top_ops.head(10)[list(op_columns)].rename(columns=op_columns), precision=1)

# %%
# The report's health checks: what the profiler may have dropped, steps of
# uneven length, and how much the profiler itself added to the CPU time.

MARK = {"ok": "✓", "info": "ℹ", "warn": "⚠"}
Facts(*(f"{MARK.get(c.level, c.level)} {c.title}: {c.detail}" for c in report.checks))

# %%
# Guess first, then look
# ----------------------
# What should a transformer training step hold? Each guess is checked against
# the trace's facts: op names, the shapes ``record_shapes`` kept, which op
# launched which kernel, and the autograd engine's own annotations (backward
# ops run under ``autograd::engine::evaluate_function``).

from profiling_guide.analysis import checks, expect

predictions = [
    expect.Prediction("the backward does twice the forward's GEMM FLOPs (±5%)",
                      checks.backward_twice_forward),
    expect.Prediction("the backward takes more device time than the forward",
                      checks.more_device_time("backward", "forward"), of=report.phases),
    expect.Prediction("fused AdamW: fewer optimizer kernels than parameter tensors",
                      checks.fewer_optimizer_kernels_than_parameters),
    expect.Prediction("attention is fused (SDPA): no [seq, seq] score matrix through a GEMM",
                      checks.no_score_matrix(seq=512)),
    expect.Prediction("GEMMs take most of the device time", checks.gemm_ops_share_above(0.5),
                      must_hold=False),
    expect.Prediction("the step is device-bound", checks.paced_by("device-bound"), of=report,
                      must_hold=False),
]
verdicts = expect.check(predictions, trace)
verdicts

# %%
# Where to go from here: the vocabulary's odd size
# -------------------------------------------------
# The largest GEMMs are the place to start, and the table of kernels says
# which fall short: the three products with the vocabulary (the LM head's
# forward, and its two backward GEMMs). GPT-2's vocabulary has 50,257 tokens:
# a row of 50,257 bf16 values is 100,514 bytes, not a multiple of 16, and the
# Hopper GEMM kernels read their tiles with the TMA unit, which needs rows
# aligned to 16 bytes. cuBLAS serves those shapes with older kernels instead.
# The usual fix is to pad the vocabulary to a multiple of 64 (50,304: 47 rows
# of the embedding nobody uses). One more profile, same step, padded:

def profile_padded_step():
    return profile_callable(lambda: make_step(50304), out_dir, name="gpt2_padded",
                            rates=train.run["rates"])  # the rates measured with the first profile


padded = chapter.profile_own("padded", profile_padded_step, label="gpt2_padded", code=[make_step])

# %%
# The GEMMs that have the vocabulary as one of their sizes, in each trace
# (found by the shapes ``record_shapes`` kept), and the whole step:

import pandas as pd

from profiling_guide.analysis.trace_report import gemm_flops
from profiling_guide.trace.kernel_names import decode


def vocab_gemms(trace, vocab):
    ops = [op for op in trace.step_ops if gemm_flops(op) and op.self_device_events
           and any(vocab in dims for dims in op.input_dims if isinstance(dims, list))]
    us = sum(ev.dur_us for op in ops for ev in op.self_device_events) / len(trace.steps)
    flops = sum(gemm_flops(op) for op in ops) / len(trace.steps)
    names = sorted({decode(ev.name).short for op in ops for ev in op.self_device_events})
    return {"vocabulary GEMMs per step": len(ops) // len(trace.steps),
            "their µs per step": us, "their TFLOP/s": flops / us / 1e6 if us else 0.0,
            "step kernel µs": trace.device_us_per_step(), "kernels": ", ".join(names)}


padding = {"vocabulary 50257": vocab_gemms(trace, 50257),
           "padded to 50304": vocab_gemms(padded.trace, 50304)}
numbers = pd.DataFrame.from_dict(padding, orient="index").drop(columns="kernels")
tables.styled(numbers, precision=1)

# %%
# And the kernels those GEMMs ran, decoded:

Facts(*(f"{name}: {row['kernels']}" for name, row in padding.items()))

# %%

gemm_rate = report.rates["gemm_tflops"]


before, after = padding  # the two rows: "vocabulary 50257", "padded to 50304"
padding_verdicts = expect.check([
    expect.Prediction("at 50257, the vocabulary GEMMs run below half the reference rate",
                      checks.below_fraction_of("their TFLOP/s", 0.5, gemm_rate, "TFLOP/s"),
                      of=padding[before], must_hold=False),
    expect.Prediction("padded, they take less time",
                      checks.less_after("their µs per step", before, after, "µs"),
                      must_hold=False),
    expect.Prediction("padded, the whole step's kernels take less time",
                      checks.less_after("step kernel µs", before, after, "µs"), must_hold=False),
], padding)
padding_verdicts

# %%
# After the GEMMs, the kernels of kind ``pointwise`` or ``reduction`` move
# bytes rather than compute; in this step they come from the loss over the
# vocabulary (the log-softmax of a batch × seq × vocab logits tensor), the
# GeLU, LayerNorm and the residual adds: the candidates for fusion, as
# chapters 3, 4 and 6 fused the GeGLU.

verdicts.require()
padding_verdicts.require()

# %%
# The recordings
# --------------

chapter.downloads()

# %%
# Run it yourself
# ---------------
# Put ``make_step`` in a file and point the command line at it::
#
#     pip install transformers
#     profiling-guide profile my_train.py:make_step -o gpt2_profile --name gpt2_train_step
#     profiling-guide report gpt2_profile/gpt2_train_step.trace.json.gz -o report.html
