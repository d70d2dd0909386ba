"""A chapter's one call: its flags from the command line, its mode, and what it refuses."""

import pytest

from profiling_guide.errors import GuideError
from profiling_guide.pages.chapter import Chapter


def chapter(argv, **defaults):
    return Chapter.from_command_line("02_mlp_eager", argv=argv, **defaults)


def test_sizes_switches_and_words_become_flags_with_their_defaults():
    ch = chapter([], batch=64, compile=False, hidden_act="gelu_pytorch_tanh")
    assert (ch.flags.batch, ch.flags.compile, ch.flags.hidden_act) == (64, False, "gelu_pytorch_tanh")
    ch = chapter(["--batch", "8", "--compile", "--hidden_act", "relu"], batch=64, compile=False,
                 hidden_act="gelu_pytorch_tanh")
    assert (ch.flags.batch, ch.flags.compile, ch.flags.hidden_act) == (8, True, "relu")


def test_a_switch_the_page_always_has_on_accepts_the_original_command_line():
    # chapter 3 always compiles; the post's command line says --compile
    assert chapter([], compile=True).flags.compile is True
    assert chapter(["--compile"], compile=True).flags.compile is True


def test_the_mode_and_the_device_follow_the_flags():
    ch = chapter(["--mode", "replay"], batch=64)
    assert (ch.mode, ch.device, ch.live) == ("replay", "meta", False)


def test_a_flag_of_another_type_a_bad_size_and_another_dtype_are_refused():
    with pytest.raises(GuideError, match=r"a size \(int\), a switch \(bool\) or a word \(str\)"):
        chapter([], scale=0.5)
    with pytest.raises(SystemExit) as exit_:
        chapter(["--batch", "0"], batch=64)
    assert exit_.value.code == 2
    with pytest.raises(GuideError, match="--dtype float16 is not supported here: bf16 only; use --dtype bfloat16"):
        Chapter.from_command_line("05_compare", argv=["--dtype", "float16"], bf16_only_because="bf16 only")


def live_chapter(tmp_path) -> Chapter:
    """A chapter that records into ``tmp_path`` as a live run does, without a GPU (nothing is timed)."""
    (tmp_path / "some-gpu").mkdir()
    ch = Chapter("02_mlp_eager", {"batch": 2}, mode="replay", root=tmp_path)
    ch.mode, ch.gpu, ch.versions, ch.folder = "live", {"name": "some GPU"}, {"torch": "x"}, tmp_path / "some-gpu"
    return ch


def test_record_trace_moves_the_exported_trace_and_writes_its_run_record(tmp_path):
    ch = live_chapter(tmp_path)
    exported = tmp_path / "some-gpu" / ".02_mlp_eager.eager.partial.trace.json.gz"
    assert ch.trace_file("eager") == str(exported)
    exported.write_bytes(b"trace")

    def step():
        return None

    rec = ch.record_trace("eager", step, label="mlp_fwd", time_it=False, extra={"note": "kept"})
    assert not exported.exists() and rec.trace_path.read_bytes() == b"trace"
    assert (rec.run["name"], rec.run["label"], rec.run["timings"], rec.run["note"]) == (
        "02_mlp_eager.eager", "mlp_fwd", {}, "kept")
    fp = ch._name_and_fingerprint("eager", [step], None)[1]
    assert (rec.run["fingerprint"], rec.run["closure_fingerprint"]) == (fp.listed, fp.closure)
    assert rec in ch.recordings and rec.run_path.is_file()


def test_record_trace_without_an_exported_trace_says_where_to_export_it(tmp_path):
    with pytest.raises(GuideError, match=r"no trace was exported to .*chapter\.trace_file\('eager'\)"):
        live_chapter(tmp_path).record_trace("eager", lambda: None, label="mlp_fwd", time_it=False)


def test_a_chapter_another_gpu_recorded_warns_in_gpu_names(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    recordings = Path(__file__).resolve().parents[1] / "docs" / "recordings"
    h100, h200 = tmp_path / "nvidia-h100-80gb-hbm3", tmp_path / "nvidia-h200"
    h100.mkdir(), h200.mkdir()
    for path in recordings.glob("nvidia-h100-80gb-hbm3/02_mlp_eager.*"):
        shutil.copy(path, h100)
    shutil.copy(recordings / "nvidia-h200" / "01_linear.eager.run.json", h200)  # the H200 has other chapters only
    monkeypatch.setenv("PROFILING_GUIDE_GPU", "nvidia-h200")
    ch = Chapter("02_mlp_eager", {}, mode="replay", root=tmp_path)
    assert ch.folder == h100 and ch.stand_in_for == h200
    html = ch.banner()._repr_html_()
    assert 'class="admonition warning pg-banner"' in html and "Another GPU's numbers" in html
    assert ("This page shows the NVIDIA H100 80GB HBM3&#x27;s numbers, not the NVIDIA H200&#x27;s: no recording "
            "of this chapter was made on the NVIDIA H200 yet.") in html
    monkeypatch.setenv("PROFILING_GUIDE_GPU", "nvidia-h100-80gb-hbm3")
    ch = Chapter("02_mlp_eager", {}, mode="replay", root=tmp_path)
    assert ch.stand_in_for is None and 'class="admonition note pg-banner"' in ch.banner()._repr_html_()


def test_a_recording_is_measured_profiled_or_read_once_per_page(tmp_path):
    """A second call for the same recording would run the work again live and show it twice."""
    ch = live_chapter(tmp_path)

    def values():
        return {"x": 1}

    ch.measure("capture", values)
    with pytest.raises(GuideError, match=r"recording 02_mlp_eager\.capture is asked for twice"):
        ch.measure("capture", values)
    exported = tmp_path / "some-gpu" / ".02_mlp_eager.eager.partial.trace.json.gz"
    exported.write_bytes(b"trace")
    ch.record_trace("eager", lambda: None, label="mlp_fwd", time_it=False)
    ran = []
    with pytest.raises(GuideError, match="asked for twice"):  # refused before the profiler runs again
        ch.profile("eager", lambda: None, profiler=lambda *a: ran.append(a), label="mlp_fwd", time_it=False)
    assert ran == []
    assert [r.name for r in ch.recordings] == ["02_mlp_eager.capture", "02_mlp_eager.eager"]
    with pytest.raises(GuideError, match="asked for twice"):
        ch.read("capture")
