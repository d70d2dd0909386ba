"""The interactive timeline's data and fragment, from the H100 recordings."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiling_guide.pages.interactive_timeline import (
    InteractiveTimeline,
    json_in_script,
    timeline_data,
    timeline_html,
)


def test_lanes_are_cpu_depths_then_the_runtime_then_the_gpu_stream(mlp_eager):
    data = timeline_data(mlp_eager.steps[0])
    labels = [lane["label"] for lane in data["lanes"]]
    assert labels[0] == "CPU d0" and labels[-2:] == ["CUDA runtime", "GPU stream 7"]
    assert [lane["kind"] for lane in data["lanes"]][-2:] == ["runtime", "gpu"]


def test_every_device_event_of_the_step_is_a_bar_linked_to_its_launch(mlp_eager):
    step = mlp_eager.steps[0]
    data = timeline_data(step)
    gpu = data["lanes"][-1]["bars"]
    runtime = data["lanes"][-2]["bars"]
    assert len(gpu) == len(step.device_events)
    launch_links = {b[5] for b in runtime if b[5] >= 0}
    assert {b[5] for b in gpu} <= launch_links and -1 not in {b[5] for b in gpu}
    for bar, ev in zip(gpu, step.device_events, strict=True):
        assert bar[0] == round(ev.start_us - step.start_us, 3) and bar[1] == round(ev.dur_us, 3)
        title = data["strings"][bar[3]]  # the raw name for the tooltip, cut where C++ runs on
        assert title == ev.name or (title.endswith("…") and ev.name.startswith(title[:-1]))


def test_kernel_bars_carry_the_decoded_name_and_who_launched_them(mlp_eager):
    data = timeline_data(mlp_eager.steps[0])
    strings = data["strings"]
    gemm = next(b for b in data["lanes"][-1]["bars"] if strings[b[3]].startswith("nvjet"))
    assert strings[gemm[2]].startswith("nvjet sm90")
    assert "launched by aten::mm via cuLaunchKernelEx" in strings[gemm[6]]


def test_the_fragment_is_self_contained_and_cannot_be_closed_by_a_kernel_name(mlp_eager):
    step = mlp_eager.steps[0]
    event = step.device_events[0]
    original, event.name = event.name, "evil</script><script>alert(1)</script>"
    try:
        fragment = timeline_html(step, caption="one step")
    finally:
        event.name = original
    assert "<canvas" in fragment and "window.pgTimeline" in fragment
    assert not re.search(r"(src|href)=\"?https?:", fragment)
    payload = re.search(r'<script type="application/json">(.*?)</script>', fragment, re.S).group(1)
    assert "evil\\u003c/script\\u003e" in payload and "<" not in payload
    assert "evil</script><script>alert(1)</script>" in json.loads(payload)["strings"]


def _surrogates_replaced(value):
    if isinstance(value, str):
        return re.sub("[\ud800-\udfff]", "\ufffd", value)
    if isinstance(value, dict):
        return {_surrogates_replaced(k): _surrogates_replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_surrogates_replaced(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(st.characters(codec=None)),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12))
def test_json_in_a_script_element_cannot_end_it_and_reads_back_the_same(data):
    text = json_in_script(data)
    # nothing that ends the element, opens a comment or a script, or ends a line in old JavaScript
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    text.encode("utf-8")  # no lone surrogate: writable as UTF-8
    assert json.loads(text) == _surrogates_replaced(data)


@pytest.mark.parametrize("name", ["<!--<script>", "</script><script>alert(1)</script>", "a\u2028b\u2029c",
                                  "x]]><![CDATA[", "\ud800lone", "&lt;"])
def test_a_hostile_name_is_carried_whole_and_inert(name):
    text = json_in_script({"strings": [name]})
    assert json.loads(text)["strings"] == [_surrogates_replaced(name)]
    assert not set(text) & {"<", ">", "&"}


def test_interactive_timeline_renders_itself_in_a_notebook(linear_eager):
    view = InteractiveTimeline(linear_eager, step=3, caption="Linear, eager")
    assert view.step.number == 3
    assert 'class="pg-itl"' in view._repr_html_() and "Linear, eager" in view._repr_html_()


def test_the_fragment_has_a_hint_for_touch_screens_and_a_tip_the_output_box_cannot_clip(mlp_eager):
    fragment = timeline_html(mlp_eager.steps[0])
    assert 'data-touch="tap a bar for its details' in fragment
    assert ".pg-itl-tip{position:fixed" in fragment  # placed from the pointer's client coordinates
    assert "CPU dN: ops at nesting depth N" in fragment
