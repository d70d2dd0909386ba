"""Attribution of a step's device time to modules and source lines, on a small GPT's real H200 recordings.

``tests/data/attribution/h200`` (its README says what each is): the same
training step eager without and with ``with_stack``/``with_modules``,
compiled and ``reduce-overhead`` with what inductor recorded each kernel fuses
(every graph's), and one ``torch.cuda.graph`` capture with six replays.
Measured (share of the step's device time attributed to a module and a
line): eager 99.9 %, compiled 98.1 %, reduce-overhead 97.7 %, graphed 99.9 %,
bare 0 %.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from profiling_guide.analysis.attribution import (
    INDUCTOR_MADE,
    LABEL,
    NO_KERNEL_INFORMATION,
    NO_STACKS,
    OUTSIDE_MODULES,
    PROVENANCE,
    REGION,
    REPLAY_UNMAPPED,
    STACK,
    _Unit,
    attribute,
    match_graph,
    user_frame,
)
from profiling_guide.analysis.trace_report import analyse, report_steps
from profiling_guide.errors import GuideError
from profiling_guide.report.attribution_html import REASONS
from profiling_guide.report.html import write_report
from profiling_guide.trace.kernel_information import (
    KernelCall,
    kernel_information_beside,
    parse_stack,
    read_kernel_information,
)
from profiling_guide.trace.model import Trace

GPT = Path(__file__).resolve().parent / "data" / "attribution" / "h200"
ATTRIBUTED = {"eager": 0.95, "eager_again": 0.95, "compiled": 0.95, "reduce_overhead": 0.95, "graphed": 0.95}


def _trace(variant: str) -> Trace:
    return _TRACES.setdefault(variant, Trace.load(GPT / f"{variant}.trace.json.gz"))


_TRACES: dict[str, Trace] = {}


def _attribution(variant: str, kernel_information="beside"):
    trace = _trace(variant)
    if kernel_information == "beside":
        kernel_information = kernel_information_beside(GPT / f"{variant}.trace.json.gz")
    return attribute(trace, report_steps(trace), kernel_information)


# ---------------------------------------------------------------- the shares
@pytest.mark.parametrize("variant", sorted(ATTRIBUTED))
def test_nearly_all_device_time_is_attributed_to_a_module_and_a_line(variant):
    a = _attribution(variant)
    assert a.attributed_share >= ATTRIBUTED[variant], (variant, a.attributed_share, a.unattributed)
    # every µs of the steps is in exactly one row: nothing dropped, nothing counted twice
    assert sum(r.device_us for r in a.rows) == pytest.approx(a.device_us)
    assert sum(us for _, us in a.unattributed) == pytest.approx(a.device_us - a.attributed_us)


def test_the_same_program_recorded_twice_is_attributed_the_same():
    first, again = _attribution("eager"), _attribution("eager_again")
    tops = [[line["source"] for line in a.sources("backward")[:3]] for a in (first, again)]
    assert tops[0] == tops[1]
    assert first.phase_us("backward") == pytest.approx(again.phase_us("backward"), rel=0.05)


def test_eager_work_lands_on_the_module_that_ran_it_and_backward_on_its_forward_ops():
    a = _attribution("eager")
    modules = {r.site.module for r in a.rows if r.phase == "forward" and r.site.attributed}
    assert "GPT_0.GPTBlock_3.Attention_3.Linear_13" in modules  # the last block's attention projection
    backward = {r.site.module for r in a.rows if r.phase == "backward" and r.site.attributed}
    assert backward and backward <= modules | {"GPT_0"}  # each backward kernel at a module the forward ran
    assert {r.site.module for r in a.rows if r.phase == "optimizer"} == {"AdamW.step"}
    assert all(r.site.how == STACK for r in a.rows if r.site.attributed)
    # a Python frame names where its function starts: GPTBlock.forward and Attention.forward of the model
    sources = {line["source"]: line["function"] for line in a.sources()}
    assert sources["record_verdict_corpus.py:85"] == "forward" and "record_verdict_corpus.py:70" in sources
    tree = a.module_tree("forward")
    assert list(tree["children"]) == ["GPT_0"]
    blocks = tree["children"]["GPT_0"]["children"]
    assert {"GPTBlock_0", "GPTBlock_3"} <= set(blocks)
    assert tree["device_us"] == pytest.approx(sum(c["device_us"] for c in tree["children"].values()))


def test_compiled_kernels_take_the_lines_inductor_recorded_for_every_graph():
    a = _attribution("compiled")
    assert a.graphs_matched == (2, 2)  # forward and backward graphs both found
    assert a.by_how[PROVENANCE] >= 0.8 * a.device_us, a.by_how  # all but the eager optimizer and a few kernels
    lines = {line["source"]: line for line in a.sources("forward")}
    qkv = lines["record_verdict_corpus.py:72"]
    assert qkv["code"] == "q, k, v = self.qkv(x).split(d, dim=2)"
    assert qkv["kinds"]["gemm"] == pytest.approx(4)  # the four blocks' qkv projections, one extern GEMM each
    backward = a.sources("backward")
    assert backward[0]["source"] == "record_verdict_corpus.py:87"  # the MLP line holds the most backward time
    # what inductor made itself (a pattern's replacement, no stack trace) is said, not guessed
    assert INDUCTOR_MADE in dict(a.unattributed)


def test_reduce_overhead_replays_map_to_inductors_record_without_their_capture():
    a = _attribution("reduce_overhead")
    assert a.graph_launches == 2  # the forward graph and the backward graph, one cudaGraphLaunch each
    assert a.replayed_us > 0.8 * a.device_us and a.captured_us == 0  # captured before the profiler started
    assert a.graphs_matched == (2, 2)
    compiled = _attribution("compiled")
    top = [line["source"] for line in a.sources("backward")[:3]]
    assert top == [line["source"] for line in compiled.sources("backward")[:3]]


def test_without_kernel_information_compiled_kernels_reach_only_their_region_and_the_fix_is_named():
    a = _attribution("compiled", kernel_information=None)
    assert a.attributed_share < 0.3  # the eager optimizer only
    assert a.by_how[REGION] > 0.7 * a.device_us
    reason, _ = a.unattributed[0]
    assert reason == NO_KERNEL_INFORMATION
    assert "provenance_tracking_level = 1" in REASONS[reason][1] and "kernel_information.json" in REASONS[reason][1]


def test_a_kernel_information_of_another_program_matches_nothing():
    other = read_kernel_information(GPT / "compiled.kernel_information.json")
    a = attribute(_trace("eager"), report_steps(_trace("eager")), other)
    assert a.graphs_matched == (0, 2)
    assert a.attributed_share >= 0.95  # eager work needs none


def test_one_graph_as_create_kernel_information_json_writes_it_attributes_that_graph():
    forward, backward = read_kernel_information(GPT / "compiled.kernel_information.json")
    a = attribute(_trace("compiled"), report_steps(_trace("compiled")), [backward])
    assert a.graphs_matched == (1, 1)
    assert a.phase_us("backward") * 0.9 < sum(r.device_us for r in a.rows
                                               if r.phase == "backward" and r.site.how == PROVENANCE)
    assert all(r.site.how != PROVENANCE for r in a.rows if r.phase == "forward")


# ---------------------------------------------------------------- CUDA graphs
def test_a_graphed_step_is_device_work_one_launch_a_step_not_an_idle_step():
    trace = _trace("graphed")
    assert not trace.steps  # recorded without a schedule: capture, then six replays
    steps = report_steps(trace)
    assert len(steps) == 6
    eager = _attribution("eager")
    for step in steps:
        launches = [c.name for c in step.runtime_calls if c.device_events]
        assert launches == ["cudaGraphLaunch"]
        assert sum(ev.dur_us for ev in step.device_events) == pytest.approx(eager.device_us, rel=0.05)
    report = analyse(trace)
    assert report.graph_replays and not report.whole_trace
    assert all(s.device_busy_us > 0 for s in report.steps)
    assert report.pace.verdict != "CPU"  # the capture's host time is in no step
    a = report.attribution
    assert a.graph_launches == 1 and a.replayed_us == pytest.approx(a.device_us)
    assert a.captured_us == pytest.approx(a.replayed_us)  # every replayed kernel mapped to its captured launch
    # each replayed kernel counts where its captured launch ran: the same phases as the eager step
    for phase in ("forward", "backward", "optimizer"):
        assert a.phase_us(phase) == pytest.approx(eager.phase_us(phase), rel=0.1)


def test_replays_with_no_capture_and_no_kernel_information_are_said_so():
    a = _attribution("reduce_overhead", kernel_information=None)
    assert set(dict(a.unattributed)) <= {NO_KERNEL_INFORMATION, REPLAY_UNMAPPED, OUTSIDE_MODULES}
    assert a.attributed_share < 0.3


# ---------------------------------------------------------------- bare traces
def test_a_bare_trace_attributes_nothing_and_names_the_arguments_that_would():
    a = _attribution("eager_bare")
    assert a.attributed_share == 0.0 and a.recorded_with == ()
    reason, us = a.unattributed[0]
    assert reason == NO_STACKS and us == pytest.approx(a.device_us)
    fix = REASONS[reason][1]
    assert "with_stack=True, with_modules=True" in fix and "profiling-guide profile" in fix
    labels = {r.site.label for r in a.rows if r.phase == "backward"}
    assert "forward › aten::linear" in labels  # a backward op grouped by the forward op it differentiates
    assert all(r.site.how == LABEL for r in a.rows)


def test_the_page_and_the_json_carry_the_attribution(tmp_path):
    out, data = tmp_path / "compiled.html", tmp_path / "compiled.json"
    write_report(GPT / "compiled.trace.json.gz", out, json_out=data)
    page = out.read_text()
    assert '<section id="attribution">' in page and "<details open>" in page
    assert "q, k, v = self.qkv(x).split(d, dim=2)" in page
    report = json.loads(data.read_text())
    assert report["attributed_share"] >= 0.95
    entry = report["attribution"][0]
    assert {"module", "source", "phase", "device_us"} <= set(entry)
    assert {e["phase"] for e in report["attribution"]} == {"forward", "backward", "optimizer"}
    assert sum(e["device_us"] for e in report["attribution"]) == pytest.approx(report["attribution_device_us"])


def test_the_bare_page_says_what_would_attribute_it(tmp_path):
    out = tmp_path / "bare.html"
    write_report(GPT / "eager_bare.trace.json.gz", out)
    page = out.read_text()
    assert "0.0%</b> of the step" in page and "with_stack=True, with_modules=True" in page


# ---------------------------------------------------------------- hostile input
HOSTILE = {
    "not JSON": b"{not json",
    "wrong shape": b"[1, 2, 3]",
    "a key with no handle": json.dumps({"triton_poi_fused_add_0": {"stack_traces": []}}).encode(),
    "stack traces not strings": json.dumps({"triton_poi_fused_add_0:1": {"stack_traces": [1]}}).encode(),
    "nested too deep": b"[" * 200 + b"]" * 200,
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_bad_kernel_information_file_is_left_out_in_one_line(tmp_path, capsys, what):
    trace = tmp_path / "compiled.trace.json.gz"
    shutil.copyfile(GPT / "compiled.trace.json.gz", trace)
    beside = tmp_path / "compiled.kernel_information.json"
    beside.write_bytes(HOSTILE[what])
    with pytest.raises(GuideError) as caught:
        kernel_information_beside(trace)
    assert "\n" not in str(caught.value) and str(beside) in str(caught.value)
    out = write_report(trace, tmp_path / "page.html", json_out=tmp_path / "page.json")
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: ") and "leaves it out" in warning[0]
    assert '<section id="attribution">' in out.read_text()
    assert "kernel information left out" in out.read_text()
    assert json.loads((tmp_path / "page.json").read_text())["attributed_share"] < 0.3
    assert beside.read_bytes() == HOSTILE[what]  # never its input


def test_a_kernel_information_file_too_large_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    import profiling_guide.trace.kernel_information as ki

    monkeypatch.setattr(ki, "MAX_KERNEL_INFORMATION_BYTES", 1024)
    path = tmp_path / "x.kernel_information.json"
    path.write_text(json.dumps({f"k:{i}": {"stack_traces": []} for i in range(100)}))
    with pytest.raises(GuideError, match="over 0 MiB, too large"):
        read_kernel_information(path)


def test_a_kernel_information_path_that_is_a_folder_or_fifo_is_refused(tmp_path):
    folder = tmp_path / "t.kernel_information.json"
    folder.mkdir()
    with pytest.raises(GuideError, match="is a folder"):
        kernel_information_beside(tmp_path / "t.trace.json.gz")


def test_python_ids_that_loop_do_not_hang_the_loader(tmp_path):
    events = [
        {"ph": "X", "cat": "python_function", "name": "a.py(1): f", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
         "args": {"Python id": 1, "Python parent id": 2}},
        {"ph": "X", "cat": "python_function", "name": "a.py(2): g", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
         "args": {"Python id": 2, "Python parent id": 1}},
        {"ph": "X", "cat": "python_function", "name": "a.py(3): h", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
         "args": {"Python id": 3, "Python parent id": 3}},
    ]
    path = tmp_path / "loop.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    frames = Trace.load(path).python_frames
    assert len(frames) == 3
    for frame in frames:
        assert len(list(frame.ancestors())) < 3


def test_frames_without_the_profilers_ids_nest_by_time(tmp_path):
    with gzip.open(GPT / "eager.trace.json.gz", "rt") as f:
        raw = json.load(f)
    for ev in raw["traceEvents"]:
        if ev.get("cat") == "python_function":
            ev["args"] = {}
    path = tmp_path / "no_ids.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(raw, f)
    trace = Trace.load(path)
    a, with_ids = attribute(trace, report_steps(trace)), _attribution("eager")
    assert a.attributed_share == pytest.approx(with_ids.attributed_share)
    assert [r.site.module for r in a.rows[:5]] == [r.site.module for r in with_ids.rows[:5]]


# ---------------------------------------------------------------- the pieces
def test_user_code_is_told_from_library_and_generated_code():
    assert user_frame("model.py(42): forward") == ("model.py", 42, "forward")
    assert user_frame("transformers/models/gpt2/modeling_gpt2.py(300): forward")[1] == 300
    for library in ("torch/nn/modules/linear.py(130): forward", "<built-in function linear>", "typing.py(2154): cast",
                    "<frozen os>(680): __getitem__", "triton/runtime/jit.py(10): run",
                    "/tmp/torchinductor_root/ab/cab.py(662): call", "nn.Module: Linear_0",
                    "/usr/lib/python3.12/contextlib.py(141): __exit__"):
        assert user_frame(library) is None, library


def test_stack_traces_parse_with_or_without_their_code_and_carets():
    text = ('  File "/w/model.py", line 103, in forward\n    x = block(x)\n'
            '  File "/w/model.py", line 86, in forward\n    x = x + self.attn(self.ln1(x))\n        ^^^^^^\n'
            '  File "/w/other.py", line 7, in helper\n')
    frames = parse_stack(text)
    assert [(f.short, f.code) for f in frames] == [("model.py:103", "x = block(x)"),
                                                   ("model.py:86", "x = x + self.attn(self.ln1(x))"),
                                                   ("other.py:7", None)]


def _call(name: str, handle: int) -> KernelCall:
    return KernelCall(name, handle, (), (), ())


def _units(*names: str) -> list[_Unit]:
    from profiling_guide.trace.model import DeviceEvent

    return [_Unit(n, [DeviceEvent(n, 0.0, 1.0, 7, "kernel", None, {})]) for n in names]


def test_matching_anchors_on_triton_names_and_fills_the_extern_calls_between_them():
    calls = [_call("triton_a", 1), _call("extern_kernels.mm", 2), _call("extern_kernels.mm", 3),
             _call("triton_b", 4), _call("triton_a", 5), _call("extern_kernels.addmm", 6)]
    # as a replay shows them: a GEMM that launched two kernels, then one
    units = _units("triton_a", "nvjet_gemm", "splitK_reduce", "nvjet_gemm", "triton_b", "triton_a", "cutlass_gemm")
    matched, share = match_graph(units, calls)
    assert share == 1.0
    assert matched[0] == [calls[0]] and matched[5] == [calls[4]] and matched[6] == [calls[5]]
    assert matched[1] == matched[2] == matched[3] == [calls[1], calls[2]]  # three pieces of work, two calls


def test_a_graph_whose_triton_kernels_are_not_the_units_is_not_matched():
    calls = [_call("triton_x", 1), _call("extern_kernels.mm", 2)]
    matched, share = match_graph(_units("triton_a", "nvjet_gemm", "triton_b"), calls)
    assert matched == {} and share == 0.0


# ---------------------------------------------------------------- profile's capture
def test_provenance_is_kept_for_every_graph_a_step_compiles():
    """On the CPU: inductor generates C++ kernels, and records their provenance the same way (about 25 s)."""
    torch = pytest.importorskip("torch")
    from profiling_guide.measure.provenance import InductorProvenance

    f = torch.compile(lambda x: (x * 2).sin().sum())
    with InductorProvenance() as provenance:
        x = torch.randn(8, requires_grad=True)
        f(x).backward()
    assert provenance.available
    assert len(provenance.graphs) == 2  # forward, backward: each its own object
    forward, backward = provenance.graphs
    assert all(re.fullmatch(r".+:\d+", key) for key in (*forward, *backward))
    assert any("sin" in key for key in forward) and any("cos" in key for key in backward)
    stacks = [s for v in forward.values() for s in v["stack_traces"]]
    assert any(Path(__file__).name in s for s in stacks)  # the line of this file that the graph traced
    import torch._inductor.config as config

    assert config.trace.provenance_tracking_level == 0  # put back
    assert config.post_grad_custom_pre_pass is None and config.post_grad_custom_post_pass is None  # put back


def test_compiled_kernels_record_the_module_their_nodes_ran_in_forward_and_backward(tmp_path):
    """On the CPU: a module's compiled kernels each name the submodule they ran in (``blocks.1``), the backward's too."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from profiling_guide.measure.provenance import InductorProvenance
    from profiling_guide.trace.kernel_information import read_kernel_information

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return torch.tanh(self.fc(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Layer() for _ in range(2))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x.sum()

    with InductorProvenance() as provenance:
        torch.compile(Model())(torch.randn(4, 8)).backward()
    forward, backward = provenance.graphs
    modules = lambda graph: {m for v in graph.values() for m in v["modules"] if m}  # noqa: E731
    assert {"blocks.0.fc", "blocks.1"} <= modules(forward), modules(forward)
    assert {"blocks.0.fc", "blocks.1"} <= modules(backward), modules(backward)  # their forward's modules
    assert all(len(v["modules"]) == len(v["stack_traces"]) for g in provenance.graphs for v in g.values())
    path = tmp_path / "k.kernel_information.json"
    path.write_text(json.dumps(provenance.graphs))
    assert any(m == "blocks.1.fc" for graph in read_kernel_information(path) for call in graph for m in call.modules)


def test_a_node_a_pattern_pass_put_in_place_takes_the_stack_trace_of_the_node_it_replaced():
    """torch 2.11 leaves an ``addmm`` made of ``mm`` + ``add`` without a stack trace: it takes the ``add``'s."""
    torch = pytest.importorskip("torch")
    import torch.fx as fx

    from profiling_guide.measure.provenance import _GraphNodes

    graph = fx.Graph()
    a, b, c = (graph.placeholder(n) for n in "abc")
    mm = graph.call_function(torch.mm, (a, b))
    add = graph.call_function(torch.add, (mm, c))
    out = graph.call_function(torch.relu, (add,))
    graph.output(out)
    mm.meta["stack_trace"] = 'File "model.py", line 3, in forward\n    y = a @ b\n'
    add.meta["stack_trace"] = 'File "model.py", line 4, in forward\n    y = y + c\n'
    add.meta["nn_module_stack"] = {"head": ("L['self'].blocks[2].head", "Linear")}
    nodes = _GraphNodes(None, None)
    nodes.before(graph)
    with graph.inserting_before(add):
        fused = graph.call_function(torch.addmm, (c, a, b))
    add.replace_all_uses_with(fused)
    graph.erase_node(add)
    graph.erase_node(mm)
    nodes.after(graph)
    assert fused.meta["stack_trace"].endswith("y = y + c\n")
    entry = {"stack_traces": [fused.meta["stack_trace"]], "post_grad_nodes": [fused.name]}
    assert nodes.modules_of(entry) == ["blocks.2.head"]  # and the module it ran in
    nodes.before(graph)
    alone = graph.call_function(torch.neg, (fused,))  # made from nothing that was erased: left as it is
    nodes.after(graph)
    assert "stack_trace" not in alone.meta


def test_a_torch_without_provenance_tracking_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import torch._inductor.debug as debug

    from profiling_guide.measure.provenance import InductorProvenance
    from profiling_guide.report.profile_own import _write_kernel_information

    monkeypatch.delattr(debug, "create_kernel_information_json")
    with InductorProvenance() as provenance:
        pass
    assert not provenance.available
    path = tmp_path / "step.kernel_information.json"
    assert _write_kernel_information(provenance, path, compile=True, module_file=None) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "attribution of compiled kernels to source lines is not available" in err[0]
    assert not path.exists()


def test_recorded_graphs_are_written_for_the_report_to_read(tmp_path):
    from profiling_guide.report.profile_own import _write_kernel_information

    class Recorded:
        available, graphs = True, json.loads((GPT / "compiled.kernel_information.json").read_text())

    path = tmp_path / "step.kernel_information.json"
    assert _write_kernel_information(Recorded(), path, compile=True, module_file=None) == path
    assert [len(g) for g in read_kernel_information(path)] == [38, 112]


# ---------------------------------------------------------------- chapter 8b's recordings
CHAPTER = Path(__file__).resolve().parents[1] / "docs" / "recordings" / "nvidia-h200"


@pytest.mark.parametrize("variant", ["eager", "compiled", "graphed"])
def test_chapter_8b_attributes_at_least_95_percent_of_each_variant_to_a_module_and_a_line(variant):
    """The chapter's recordings (``profile_callable`` with ``with_stack``): eager, compiled, reduce-overhead."""
    from profiling_guide.pages.tables import attribution_lines
    from profiling_guide.trace.kernel_information import kernel_information_beside

    path = CHAPTER / f"08b_your_lines.{variant}.trace.json.gz"
    graphs = kernel_information_beside(path)
    assert (graphs is None) == (variant == "eager")
    report = analyse(Trace.load(path), kernel_information=graphs)
    a = report.attribution
    assert a.attributed_share >= 0.95, (variant, a.attributed_share, a.unattributed)
    top = a.sources()[0]
    if variant != "eager":  # the module each compiled kernel's nodes ran in, from inductor's record
        assert any(m.endswith("GPT_0.blocks.0.mlp.up") for m in top["modules"]), top["modules"]
        assert a.graphs_matched == (2, 2)
    if variant == "graphed":
        assert a.graph_launches >= 2 and a.replayed_us > 0.9 * a.device_us  # replayed work counted, not idle
    html = attribution_lines({variant: report}, count=5).to_html()
    assert "line of plot_08b_your_lines.py" in html and "step share" in html


@pytest.mark.parametrize("variant", ["eager", "compiled", "graphed"])
def test_chapter_8b_shows_lines_that_are_those_lines_of_its_page_today(variant):
    """The page names lines by number: each must still be that line of the page's file (a layout change there
    leaves the fingerprint fresh but moves the lines: record the chapter again)."""
    from profiling_guide.trace.kernel_information import kernel_information_beside

    page = (Path(__file__).resolve().parents[1] / "examples" / "plot_08b_your_lines.py").read_text().splitlines()
    path = CHAPTER / f"08b_your_lines.{variant}.trace.json.gz"
    a = analyse(Trace.load(path), kernel_information=kernel_information_beside(path)).attribution
    shown = [line for line in a.sources()[:5] if line["source"].startswith("plot_08b_your_lines.py:")]
    assert len(shown) == 5
    for line in shown:
        text = page[int(line["source"].rpartition(":")[2]) - 1].strip()
        if line["code"]:
            assert text == line["code"].strip(), (line["source"], line["code"], text)
        else:
            assert text.startswith(f"def {line['function']}("), (line["source"], line["function"], text)
