"""
8 · Profile your own model: a GPT-2 training step, read by the guide's report
=============================================================================

Chapters 1–7 profiled one layer at a time. Where does the time of a whole
model's training step go, and what is the first thing to change? Here the
step is one training step (forward, backward, optimizer) of a small GPT-2 from
Hugging Face ``transformers``, a model none of the chapters has seen, built
from its config (no weights are downloaded). The same ``torch.profiler``
block profiles it, the guide's report reads the trace, and the trace points
at one fix, measured at the end: padding the vocabulary.

*Needs:* no extra to replay; live, ``pip install 'profiling-guide[transformers]'``.
"""

# %%
# Your code
# ---------
# A *step factory*: it builds the model, the optimizer and a batch once, and
# returns the step that is profiled. It runs as it is on any CUDA GPU after
# ``pip install`` of this repository and of ``transformers``.

import torch


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
# The profiler block
# ------------------
# Chapter 1's block, the one to put around your own training loop: five steps
# (skip one, warm up one, record three), CPU and CUDA activities, input
# shapes, one ``record_function`` label per step, the trace exported for
# https://ui.perfetto.dev and for ``profiling-guide report``.

from torch.profiler import ProfilerActivity, profile, record_function, schedule


def profile_steps(step, label, trace_file):
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
    ) as prof:
        for _ in range(5):
            with record_function(label):
                step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(trace_file)
    return prof


# %%
# Profile it
# ----------
# :func:`~profiling_guide.report.profile_own.profile_callable` runs this very
# block (:func:`~profiling_guide.measure.capture.profile_to_trace`; a test
# holds the two equal) around the step ``make_step`` returns, after two
# warm-up steps (kernel selection, lazy initialisation) and with more around
# it: it times the step with the profiler off, measures the reference rates
# (a settled bf16 GEMM and a device-to-device copy) and writes the trace, a
# ``.run.json`` and the HTML report into the folder. ``profiling-guide profile
# my_train.py:make_step -o gpt2_profile --name gpt2_train_step`` does the
# same from a shell.

import tempfile

from profiling_guide.report.profile_own import profile_callable

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
# Guess first, then look
# ----------------------
# What should a transformer training step hold? Each guess is checked against
# the trace's facts: op names, the shapes ``record_shapes`` kept, which op
# launched which kernel, and the autograd engine's own annotations (backward
# ops run under ``autograd::engine::evaluate_function``).

from profiling_guide.analysis import expect, predicates
from profiling_guide.analysis.trace_report import analyse
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run_record import run_record_beside

trace = Trace.load(train.trace_path)  # the trace profile_callable wrote
report = analyse(trace, run_record=run_record_beside(train.trace_path))
predictions = [
    expect.Prediction("the backward does twice the forward's GEMM FLOPs (±5%)",
                      predicates.backward_twice_forward),
    expect.Prediction("the backward takes more device time than the forward",
                      predicates.more_device_time("backward", "forward"), of=report.phases),
    expect.Prediction("fused AdamW: fewer optimizer kernels than parameter tensors",
                      predicates.fewer_optimizer_kernels_than_parameters),
    expect.Prediction("attention is fused (SDPA): no [seq, seq] score matrix through a GEMM",
                      predicates.no_score_matrix(seq=512)),
    expect.Prediction("GEMMs take most of the device time", predicates.gemm_ops_share_above(0.5),
                      must_hold=False),
]

# %%
# The step
# --------
# The forward's ops on the main thread, then the backward's on the autograd
# engine's thread (CPU depth 0), the optimizer last; the GPU lane below, with
# its few long kernels. The report of this very trace, with an interactive
# timeline of the step, its top CPU ops, the backward op behind each forward
# op and its health findings, is
# `here <../_reports/08_own_model.train.report.html>`_, self-contained and
# readable offline.

from profiling_guide.pages import tables, timeline

fig = timeline.plot_step(trace, title="one GPT-2 training step")

# %%
# Each phase's device time per step, every kernel counted in the phase of the
# op that launched it (:func:`~profiling_guide.analysis.trace_report.analyse`,
# the report's analysis as data):

tables.styled(report.phases.rename(columns={"device_us": "device µs per step",
                                            "share": "device-time share"}), precision=1)

# %%
# The kernels that take the device's time, decoded, with the fraction of the
# reference rate they reach where the trace gives a GEMM's shape or a
# memory-bound kernel's bytes:

readable = {"of_reference": "of reference", "us_per_step": "µs per step",
            "share": "device-time share", "per_step": "launches per step", "kind": "kind"}
kernels = report.top_kernels.head(10).set_index("kernel")[list(readable)]
tables.styled(kernels.rename(columns=readable), precision=1)

# %%
# The verdicts
# ------------

verdicts = expect.judge(predictions, trace)
tables.verdict_table(verdicts)

# %%
# Who sets the pace
# -----------------
# The host's time to issue one step with the profiler off (profile_callable
# timed it) against the GPU's busy time per step, read from the trace; then
# what the trace's idle time waited for.

from profiling_guide.pages.verdicts import pace_facts

pace_facts(train, what="step")

# %%
# What to do next: pad the vocabulary
# -----------------------------------
# The largest GEMMs are the place to start, and the table of kernels says
# which fall short: the three products with the vocabulary (the LM head's
# forward, and its two backward GEMMs). GPT-2's vocabulary has 50,257 tokens:
# a row of 50,257 bf16 values is 100,514 bytes, not a multiple of 16, and the
# Hopper GEMM kernels read their tiles with the TMA unit, which needs rows
# aligned to 16 bytes. cuBLAS serves those shapes with older kernels instead
# (``cutlass sm75`` below: kernels built for the instructions of sm_75, the
# Turing generation, which run on Hopper without its TMA unit or ``wgmma``).
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

from profiling_guide.pages.facts import Facts

Facts(*(f"{name}: {row['kernels']}" for name, row in padding.items()))

# %%

gemm_rate = report.rates["gemm_tflops"]
before, after = padding  # the two rows: "vocabulary 50257", "padded to 50304"
padding_verdicts = expect.judge([
    expect.Prediction("at 50257, the vocabulary GEMMs run below half the reference rate",
                      predicates.below_fraction_of("their TFLOP/s", 0.5, gemm_rate, "TFLOP/s"),
                      of=padding[before], must_hold=False),
    expect.Prediction("padded, they take less time",
                      predicates.less_after("their µs per step", before, after, "µs"),
                      must_hold=False),
    expect.Prediction("padded, the whole step's kernels take less time",
                      predicates.less_after("step kernel µs", before, after, "µs"),
                      must_hold=False),
], padding)
tables.verdict_table(padding_verdicts)

# %%
# After the GEMMs, the kernels of kind ``pointwise`` or ``reduction`` move
# bytes rather than compute; in this step they come from the loss over the
# vocabulary (the log-softmax of a batch × seq × vocab logits tensor), the
# GeLU, LayerNorm and the residual adds: the candidates for fusion, as
# chapters 3, 4 and 6 fused the GeGLU.

verdicts.require()
padding_verdicts.require()

# %%
# Run it yourself
# ---------------
# Put ``make_step`` in a file and point the command line at it::
#
#     pip install transformers
#     profiling-guide profile my_train.py:make_step -o gpt2_profile --name gpt2_train_step
#     profiling-guide report gpt2_profile/gpt2_train_step.trace.json.gz -o report.html
#
# or put ``profile_steps`` around your own loop and run ``profiling-guide
# report`` on the trace it writes. The recordings behind this page:

chapter.downloads()
