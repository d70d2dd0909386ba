"""
8b · Which line of your model costs the most: eager, compiled, CUDA graphs
==========================================================================

Chapter 8 found the kernels a GPT-2 step spends its time in. A kernel's name
does not say which line of *your* model launched it, and once the model is
compiled or replayed from a CUDA graph, the trace does not even show the op
that did: a compiled step is a handful of generated Triton kernels called from
one graph, a graphed step is one ``cudaGraphLaunch``. Which module, and which
line, costs the most, in each of the three?

Two things the profiler and the compiler record answer it. ``with_stack=True``
and ``with_modules=True`` keep the Python frames and the ``nn.Module`` calls
around each op; inductor, asked to, records for each kernel it generates the
graph nodes it fuses and the source lines they came from. The guide's report
joins them to the trace, kernel by kernel.

*Needs:* nothing beyond torch, to replay or to run live.
"""

# %%
# Your code
# ---------
# A small GPT, written out: token and position embeddings, pre-norm blocks
# with attention through ``scaled_dot_product_attention`` and a GELU MLP, a
# final layer norm and a head tied to the embedding; fused AdamW. The *step
# factory* builds the model, the optimizer and a batch once and returns the
# training step: eager (``mode=None``), compiled (``"default"``) or compiled
# with CUDA graphs (``"reduce-overhead"``).

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x), approximate="tanh"))


# %%
# A block: attention and the MLP, each after a layer norm, each with its residual.


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


# %%
# The model, and the factory the profiler calls:


class GPT(nn.Module):
    def __init__(self, vocab, seq, dim, layers, heads):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def make_step(mode=None, vocab=16384, seq=512, dim=768, layers=4, heads=12, batch=8):
    torch.manual_seed(0)
    model = GPT(vocab, seq, dim, layers, heads).to("cuda", torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model, mode=mode) if mode else model
    idx = torch.randint(0, vocab, (batch, seq), device="cuda")
    targets = torch.randint(0, vocab, (batch, seq), device="cuda")

    def train_step():
        forward(idx, targets).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return train_step


# %%
# The profiler block
# ------------------
# Chapter 8's block with two more arguments: ``with_stack=True`` records the
# Python frames each op ran in, ``with_modules=True`` the ``nn.Module`` calls
# around it.

from torch.profiler import ProfilerActivity, profile, record_function, schedule


def profile_steps(step, label, trace_file):
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
        with_stack=True,
        with_modules=True,
    ) as prof:
        for _ in range(5):
            with record_function(label):
                step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(trace_file)
    return prof


# %%
# Profile the three variants
# --------------------------
# :func:`~profiling_guide.report.profile_own.profile_callable` runs that block
# around each step (after two warm-up steps, which compile it) and writes the
# trace, a run record, what inductor recorded for every graph
# (``<name>.kernel_information.json``) and the HTML report into a folder. From
# a shell: ``profiling-guide profile my_gpt.py:make_step -o out --compile``
# (``with_stack`` and ``with_modules`` are on by default there). Around your
# own loop, inductor's record is kept the same way::
#
#     from profiling_guide.measure.provenance import InductorProvenance
#
#     with InductorProvenance() as provenance:  # provenance tracking on, caches off
#         step = make_step("default")
#         step(), step()  # compiles the forward and the backward graphs
#         profile_steps(step, "gpt_compiled", "gpt_compiled.trace.json.gz")
#     json.dump(provenance.graphs, open("gpt_compiled.kernel_information.json", "w"))
#
# (``torch._inductor.config.trace.provenance_tracking_level = 1`` turns it on;
# inductor keeps one graph's record at a time, the context keeps each graph's.)

import tempfile

from profiling_guide.report.profile_own import profile_callable

out_dir = tempfile.mkdtemp(prefix="gpt_lines_")


def profile_variant(mode, name, rates=True):
    return profile_callable(lambda: make_step(mode), out_dir, name=name, with_stack=True,
                            rates=rates)


# %%
# On a GPU, ``chapter.profile_own`` makes each call (its console output stays
# off this page) and keeps the trace, the run record and inductor's record as
# this page's recording; elsewhere it reads them back.

from profiling_guide.pages.chapter import Chapter

chapter = Chapter.from_command_line("08b_your_lines",
                                    bf16_only_because="the GPT step above is written in bf16")
chapter.banner()

# %%


def profile_eager():
    return profile_variant(None, "gpt_eager")


eager = chapter.profile_own("eager", profile_eager, label="gpt_eager", code=[make_step, GPT])


def profile_compiled():
    return profile_variant("default", "gpt_compiled", rates=eager.run["rates"])


compiled = chapter.profile_own("compiled", profile_compiled, label="gpt_compiled",
                               code=[make_step, GPT])


def profile_graphed():
    return profile_variant("reduce-overhead", "gpt_graphed", rates=eager.run["rates"])


graphed = chapter.profile_own("graphed", profile_graphed, label="gpt_graphed",
                              code=[make_step, GPT])

# %%
# What the profiler saw
# ---------------------
# The trace of the compiled step holds no ``aten::addmm`` under a module, only
# ``## Call CompiledFxGraph`` and the Triton kernels it launched; the graphed
# step's forward and backward are each one ``cudaGraphLaunch``. The report
# reads every kernel, memset and memcpy of each profiled step back to a
# module path and a source line:
#
# * eager: the ``nn.Module`` frames around the op that launched it give the
#   module (``GPT_0.Block_2.MLP_2.Linear_9``: the profiler names an instance
#   by its class and the order it first saw it), the innermost frame of the
#   page's code gives the line: where that function starts, all a Python
#   frame records. A backward kernel takes the module and line of the forward
#   op it differentiates;
# * compiled: each kernel is matched, by name and order, to what inductor
#   recorded for it, and takes the exact lines of the nodes it fuses (a kernel
#   fusing several lines splits its time evenly among them);
# * graphed: each replayed kernel is matched the same way to the graph it
#   replays.
#
# The compiled step, forward then backward on the CPU's lanes, its kernels on
# the GPU's:

from profiling_guide.pages import tables, timeline

fig = timeline.plot_step(compiled.trace, title="one compiled GPT training step")

# %%
# Each variant's share of device time attributed to a module and a line, and
# the device time per step:

import pandas as pd

from profiling_guide.analysis.trace_report import analyse
from profiling_guide.trace.kernel_information import kernel_information_beside
from profiling_guide.trace.run_record import run_record_beside

variants = {"eager": eager, "compiled": compiled, "CUDA graphs": graphed}
reports = {name: analyse(rec.trace, run_record=run_record_beside(rec.trace_path),
                         kernel_information=kernel_information_beside(rec.trace_path))
           for name, rec in variants.items()}
shares = pd.DataFrame({
    "device µs per step": {name: r.attribution.device_us for name, r in reports.items()},
    "attributed share": {name: r.attribution.attributed_share for name, r in reports.items()},
    "not attributed, µs per step": {name: r.attribution.device_us - r.attribution.attributed_us
                                    for name, r in reports.items()},
})
tables.styled(shares, precision=1)

# %%
# The five lines that cost the most
# ---------------------------------
# For each variant, the lines of this page's code with the most device time
# per step, forward, backward and optimizer together, and the module each
# spent most of it in:

tables.attribution_lines(reports, count=5)

# %%
# The report of each trace shows the rest: the module tree, collapsible, and
# the top lines per phase: `eager <../_reports/08b_your_lines.eager.report.html>`_,
# `compiled <../_reports/08b_your_lines.compiled.report.html>`_,
# `CUDA graphs <../_reports/08b_your_lines.graphed.report.html>`_.
#
# Eager names functions: every ``Linear`` of a block lands on the line where
# ``forward`` starts, and the lines say which ``forward``. Compiled names
# lines: the GEMMs land on ``self.up(x)``, ``self.qkv(x)``, ``logits = ...``,
# and a fused pointwise kernel on each line whose nodes it fused.

from profiling_guide.analysis import expect, predicates

verdicts = expect.judge([
    expect.Prediction(f"{name}: at least 95 % of the device time attributed to a module and a line",
                      predicates.share_at_least("share", 0.95),
                      of={"share": report.attribution.attributed_share})
    for name, report in reports.items()
], None, seen_header="attributed")
tables.verdict_table(verdicts)

# %%
# What ``with_stack`` and ``with_modules`` cost
# ---------------------------------------------
# They cost host time, not device time: the profiler then records every
# Python call and module around each op too. The eager step's wall time per
# step, seven repeats of ten steps each, with the profiler off, on as
# chapter 8 records, and on with the stacks and modules:

import time

from profiling_guide.spread import Spread


def wall_us_per_step(step, repeats=7, steps=10, **profiler_args):
    def timed():
        samples = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
            samples.append(1e6 * (time.perf_counter() - start) / steps)
        return Spread.of(samples).to_dict()

    for _ in range(3):
        step()
    if not profiler_args:
        return timed()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **profiler_args):
        return timed()


def measure_profiler_cost():
    step = make_step(None)
    return {"profiler off": wall_us_per_step(step),
            "record_shapes": wall_us_per_step(step, record_shapes=True),
            "with_stack and with_modules": wall_us_per_step(step, record_shapes=True,
                                                            with_stack=True, with_modules=True)}


# %%
# Measured on the GPU (replayed elsewhere), each a median of seven repeats
# with its interquartile range:


def spread_columns(spreads, label):
    return {label: {n: s.median for n, s in spreads.items()},
            "IQR from": {n: s.q1 for n, s in spreads.items()},
            "to": {n: s.q3 for n, s in spreads.items()}}


cost = chapter.measure("cost", measure_profiler_cost, code=[make_step, GPT, wall_us_per_step])
walls = {name: Spread.from_dict(value) for name, value in cost.values.items()}
off = walls["profiler off"].median
tables.styled(pd.DataFrame({**spread_columns(walls, "wall µs per step"),
                            "× profiler off": {n: s.median / off for n, s in walls.items()}}),
              precision=1)

# %%
# The verdict
# -----------
# Where the host sets the pace, the stacks make a profiled step slower still,
# and the trace's gaps longer; the report's verdict takes the profiler's cost
# out before it says who sets the pace (chapter 7). The eager step's verdict:

from profiling_guide.pages.verdicts import pace_facts

pace_facts(eager, what="step")

# %%
# The fix it names is on this page already: each variant's host time to issue
# one step with the profiler off (``profile_callable`` timed it) against its
# GPU time per step in the trace.

issue = {name: Spread.from_dict(rec.run["timings"]["cpu_issue_us"])
         for name, rec in variants.items()}
device = {name: report.attribution.device_us for name, report in reports.items()}
tables.styled(pd.DataFrame({**spread_columns(issue, "CPU µs to issue a step"),
                            "device µs per step": device}), precision=1)

# %%

cost_verdicts = expect.judge([
    expect.Prediction(
        "with_stack and with_modules make the profiled step slower than record_shapes alone",
        predicates.compares("with_stack and with_modules", "record_shapes", "slower"),
        must_hold=False),
], walls)
tables.verdict_table(cost_verdicts)

# %%
# What to do next
# ---------------
# Record ``with_stack`` and ``with_modules`` when the question is *where in
# my code*, and leave them off when it is *how fast*: the timings of chapter 7
# and the pace verdict come from a profile without them. Start with the line
# at the top of the compiled variant's table: it is what the GPU runs once the
# model is compiled, and the report's module tree says which instance of it
# costs the most. Then profile your own model the same way::
#
#     profiling-guide profile my_model.py:make_step -o out --compile
#     profiling-guide report out/make_step.compiled.trace.json.gz --json out/report.json
#
# ``report --json`` lists the same attribution (``attribution``,
# ``attributed_share``). The recordings behind this page:

verdicts.require()
chapter.downloads()
