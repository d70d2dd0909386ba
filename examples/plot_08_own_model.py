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


# sphinx_gallery_start_ignore
# Flags, live or replay, and where the recordings live. In replay nothing is
# built: the page reads the trace and run record of the last GPU run.
import contextlib
import json
import os
import tempfile
import warnings

from profiling_guide.pages.args import example_parser, require_bfloat16, run_args
from profiling_guide.output import to_console
from profiling_guide.pages.chapter import Chapter

warnings.filterwarnings("ignore", message=".*Profiler clears events")
parser = example_parser("8 · Profile your own model: a GPT-2 training step")
args = parser.parse_args()
require_bfloat16(args, "the GPT-2 step above is written in bf16")
chapter = Chapter("08_own_model", run_args(args), mode=args.mode)
out_dir = tempfile.mkdtemp(prefix="gpt2_profile_")
chapter.banner()
quiet = contextlib.ExitStack()
if chapter.live:
    quiet.enter_context(to_console())
# sphinx_gallery_end_ignore

# %%
# Profile it
# ----------
# One call. It runs the step twice to warm up (kernel selection, lazy
# initialisation), times it with the profiler off, profiles five steps (skip
# one, warm up one, record three, each inside a ``record_function`` label),
# measures the reference rates (a settled bf16 GEMM and a device-to-device
# copy), and writes ``gpt2_train_step.trace.json.gz``, ``.run.json`` and
# ``.report.html`` into the folder. ``profiling-guide profile
# my_train.py:make_step -o gpt2_profile --name gpt2_train_step`` does the
# same from a shell.

if chapter.live:
    result = profile_callable(make_step, out_dir, name="gpt2_train_step")

# sphinx_gallery_start_ignore
# What the step prints (library notices) went to the console, not the page;
# keep each trace and its run record as this chapter's recordings.
quiet.close()


def keep(name, profiled, label):
    record = None
    if chapter.live:
        os.replace(profiled.trace, chapter.trace_file(name))
        own = json.loads(profiled.run_record.read_text())
        record = {k: own[k] for k in ("timings", "rates", "steps", "target")}
    return chapter.load(name, make_step, label=label, time_it=False, extra=record)


run = keep("train", result if chapter.live else None, "gpt2_train_step")
trace_path = run.trace_path  # what result.trace was, kept as this chapter's recording
# sphinx_gallery_end_ignore

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

trace = Trace.load(trace_path)  # trace_path: result.trace
report = analyse(trace, run_record=read_run_record(trace_path))

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
# The kernels that take the device's time, decoded, with their launches per
# step and, where the trace gives a GEMM's shape or a memory-bound kernel's
# bytes, the fraction of the reference rate they reach:

from profiling_guide.pages import tables

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

from profiling_guide.analysis import expect
from profiling_guide.analysis.trace_report import gemm_flops


def in_backward(op):
    names = [op.name, *(a.name for a in op.ancestors())]
    return any(n.startswith("autograd::engine::evaluate_function") for n in names)


def gemm_flops_by_phase(trace):
    flops = {"forward": 0.0, "backward": 0.0}
    for op in trace.step_ops:
        if gemm_flops(op) and op.self_device_events:
            flops["backward" if in_backward(op) else "forward"] += gemm_flops(op)
    return flops


# %%

def backward_twice_forward(trace):
    f = gemm_flops_by_phase(trace)
    ratio = f["backward"] / f["forward"] if f["forward"] else float("nan")
    forward = f["forward"] / 1e9 / len(trace.steps)
    return 1.9 <= ratio <= 2.1, f"{forward:,.0f} GFLOP forward per step, ratio {ratio:.2f}"


def optimizer_kernels(trace):
    steps = [op for s in trace.steps for op in s.ops if op.name.startswith("Optimizer.step#")]
    kernels = sum(len(op.device_events) for op in steps) / len(trace.steps)
    # the backward accumulates each parameter's gradient once: one AccumulateGrad per tensor
    accumulate = trace.ops_named("torch::autograd::AccumulateGrad")
    n = len(accumulate) / len(trace.steps)
    return 0 < kernels < n, f"{kernels:g} kernels per step for {n:g} parameter tensors"


def no_score_matrix(trace):
    seq = 512
    big = [op.name for op in trace.step_ops if gemm_flops(op) and op.input_dims
           and any(d[-2:] == [seq, seq] for d in op.input_dims if isinstance(d, list))]
    attention = sorted({op.name for op in trace.step_ops if "attention" in op.name})
    return not big, (f"{len(big)} GEMMs with a [{seq}, {seq}] operand; "
                     f"attention ops: {', '.join(attention)}")


# %%

from profiling_guide.analysis.trace_report import GEMM_OPERANDS


def gemm_share(trace):
    kernels = [k for step in trace.steps for k in step.kernels]
    gemm = sum(k.dur_us for k in kernels
               if k.launch and k.launch.op and k.launch.op.name in GEMM_OPERANDS)
    share = gemm / sum(k.dur_us for k in kernels)
    return share > 0.5, f"kernels launched by GEMM ops: {100 * share:.0f}% of the device time"


predictions = [
    expect.Prediction("the backward does twice the forward's GEMM FLOPs (±5%)",
                      backward_twice_forward),
    expect.Prediction("fused AdamW: fewer optimizer kernels than parameter tensors",
                      optimizer_kernels),
    expect.Prediction("attention is fused (SDPA): no [seq, seq] score matrix through a GEMM",
                      no_score_matrix),
    expect.Prediction("GEMMs take most of the device time", gemm_share, must_hold=False),
    expect.Prediction("the step is device-bound", lambda t: (
        report.pace.bound == "device-bound", report.pace.bound), must_hold=False),
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

if chapter.live:
    padded = profile_callable(lambda: make_step(50304), out_dir, name="gpt2_padded",
                              rates=result.rates)

# sphinx_gallery_start_ignore
padded_run = keep("padded", padded if chapter.live else None, "gpt2_padded")
# sphinx_gallery_end_ignore

# %%
# The GEMMs that have the vocabulary as one of their sizes, in each trace
# (found by the shapes ``record_shapes`` kept), and the whole step:

import pandas as pd

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
           "padded to 50304": vocab_gemms(padded_run.trace, 50304)}
numbers = pd.DataFrame.from_dict(padding, orient="index").drop(columns="kernels")
tables.styled(numbers, precision=1)

# %%
# And the kernels those GEMMs ran, decoded:

Facts(*(f"{name}: {row['kernels']}" for name, row in padding.items()))

# %%

gemm_rate = report.rates["gemm_tflops"]


def padding_predictions():
    odd, even = padding["vocabulary 50257"], padding["padded to 50304"]
    return [
        expect.Prediction("at 50257, the vocabulary GEMMs run below half the reference rate",
                          lambda _: (odd["their TFLOP/s"] < 0.5 * gemm_rate,
                                     f"{odd['their TFLOP/s']:.0f} of {gemm_rate:.0f} TFLOP/s"),
                          must_hold=False),
        expect.Prediction("padded, they take less time", lambda _: (
            even["their µs per step"] < odd["their µs per step"],
            f"{odd['their µs per step']:,.0f} µs → {even['their µs per step']:,.0f} µs per step"),
            must_hold=False),
        expect.Prediction("padded, the whole step's kernels take less time", lambda _: (
            even["step kernel µs"] < odd["step kernel µs"],
            f"{odd['step kernel µs']:,.0f} µs → {even['step kernel µs']:,.0f} µs"),
            must_hold=False),
    ]


padding_verdicts = expect.check(padding_predictions(), None)
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
