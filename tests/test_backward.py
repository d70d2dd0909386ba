"""Forward → backward: the links a training trace carries, the phases of a step, and the report's sections."""

import gzip
import html
import json

import pytest

from conftest import GPUS
from profiling_guide.analysis.backward import forward_backward, phase_of, phase_shares
from profiling_guide.analysis.trace_report import analyse
from profiling_guide.errors import GuideError
from profiling_guide.report.html import render_html
from profiling_guide.trace.model import Trace


@pytest.fixture(scope="module", params=GPUS, ids=lambda p: p.name)
def gpt2(request):
    """Chapter 8's GPT-2 training step: forward, backward, fused AdamW."""
    return Trace.load(request.param / "08_own_model.train.trace.json.gz")


def raw_flows(path):
    events = json.load(gzip.open(path))["traceEvents"]
    return [e for e in events if e.get("cat") == "fwdbwd"]


def test_every_fwdbwd_flow_of_the_gpt2_trace_links_a_forward_op_to_a_backward_op_on_the_engine_thread(gpt2):
    flows = raw_flows(gpt2.source)
    assert len(gpt2.backward_links) == len({e["id"] for e in flows}) > 100
    for forward, backward in gpt2.backward_links:
        assert backward.forward_op is forward
        assert backward.tid != forward.tid  # the autograd engine runs the backward on a thread of its own
        assert backward.start_us > forward.end_us
        assert backward.args["Sequence number"] == forward.args["Sequence number"]


def test_the_gemm_and_layer_norm_backward_nodes_link_to_the_forward_ops_that_made_them(gpt2):
    pairs = {(f.name, b.name) for f, b in gpt2.backward_links}
    for pair in [("aten::addmm", "AddmmBackward0"), ("aten::mm", "MmBackward0"),
                 ("aten::native_layer_norm", "NativeLayerNormBackward0"), ("aten::embedding", "EmbeddingBackward0")]:
        assert pair in pairs
    # a forward op's name never links to another kind of node
    assert not any(f.name == "aten::mm" and b.name == "AddmmBackward0" for f, b in gpt2.backward_links)


def test_the_phases_of_a_training_step_add_up_to_its_device_time_and_the_backward_costs_more(gpt2):
    phases = phase_shares(gpt2.steps)
    assert list(phases.index) == ["forward", "backward", "optimizer"]
    assert phases["device_us"].sum() == pytest.approx(sum(ev.dur_us for s in gpt2.steps for ev in s.device_events)
                                                     / len(gpt2.steps))
    assert phases["share"].sum() == pytest.approx(1.0)
    # twice the forward's GEMM FLOPs (chapter 8 checks it), so more device time, but not three times
    assert 1.1 < phases.loc["backward", "device_us"] / phases.loc["forward", "device_us"] < 3
    assert 0 < phases.loc["optimizer", "share"] < 0.1


def test_an_inference_step_has_one_phase_and_no_backward(mlp_eager):
    assert mlp_eager.backward_links == []
    assert list(phase_shares(mlp_eager.steps).index) == ["forward"]
    assert forward_backward(mlp_eager, mlp_eager.steps).empty
    assert phase_of(None) == "forward"


def test_the_backward_table_puts_the_costliest_backward_first_with_its_kernels(gpt2):
    table = forward_backward(gpt2, gpt2.steps, top=None)
    assert table["backward_us"].is_monotonic_decreasing
    assert set(table["forward_op"]) >= {"aten::addmm", "aten::mm", "aten::native_layer_norm"}
    mm = table[(table.forward_op == "aten::mm") & (table.backward_op == "MmBackward0")].iloc[0]
    assert mm.per_step == 1 and mm.shapes == "4096×768 · 768×50257"  # the LM head, the one aten::mm of the step
    assert mm.backward_us > mm.forward_us  # dX and dW: two GEMMs of the forward's size
    # the embedding's backward sorts and scatters through several kernels, each named once
    embedding = table[table.backward_op == "EmbeddingBackward0"].iloc[0]
    assert len(embedding.backward_kernels) > 4 and len(set(embedding.backward_kernels)) == len(embedding.backward_kernels)
    # the rows account for every linked backward op's device time
    linked = sum(ev.dur_us for f, b in gpt2.backward_links if b.step is not None for ev in b.device_events)
    assert table["backward_us"].sum() == pytest.approx(linked / len(gpt2.steps))


def test_the_report_shows_the_phases_and_the_links_only_for_a_training_trace(gpt2, mlp_eager):
    report = analyse(gpt2)
    page = render_html(report, gpt2.steps[0])
    assert 'id="phases"' in page and 'id="backward"' in page and "MmBackward0" in page
    # a backward of many kernels names the four that took most time and counts the rest
    embedding = report.backward[report.backward.backward_op == "EmbeddingBackward0"].iloc[0].backward_kernels
    assert html.escape(", ".join(embedding[:4])) + f" and {len(embedding) - 4} more" in page
    page = render_html(analyse(mlp_eager), mlp_eager.steps[0])
    assert 'id="phases"' not in page and 'id="backward"' not in page


def flow_trace(*flows):
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 5, "pid": 1, "tid": 1,
            "args": {"Sequence number": 7, "Fwd thread id": 0}},
           {"ph": "X", "cat": "cpu_op", "name": "MmBackward0", "ts": 30, "dur": 5, "pid": 1, "tid": 2,
            "args": {"Sequence number": 7, "Fwd thread id": 1}}]
    return {"traceEvents": ops + list(flows)}


def test_a_flow_links_the_ops_it_starts_at_and_a_dangling_flow_links_nothing():
    s = {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 10}
    f = {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 2, "ts": 30, "bp": "e"}
    trace = Trace(flow_trace(s, f))
    assert [(a.name, b.name) for a, b in trace.backward_links] == [("aten::mm", "MmBackward0")]
    assert Trace(flow_trace(s, f | {"ts": 31})).backward_links == []  # its end starts no op
    assert Trace(flow_trace(s)).backward_links == []  # no end


@pytest.mark.parametrize("bad, words", [({"ts": "30"}, "'ts' must be a number"),
                                        ({"id": [1]}, "'id' must be a number or a string"),
                                        ({"tid": 2.5}, "'tid' must be a number or a string")])
def test_a_malformed_flow_is_one_line_naming_the_event(bad, words):
    f = {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 2, "ts": 30} | bad
    with pytest.raises(GuideError, match=words) as err:
        Trace(flow_trace(f))
    assert "event 2" in str(err.value) and "\n" not in str(err.value)
