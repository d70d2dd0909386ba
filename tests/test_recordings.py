"""Live/replay modes, fingerprints and stale recordings."""

import json
import re
import shutil
from pathlib import Path

import pytest

from profiling_guide.errors import GuideError
from profiling_guide.pages import recordings
from profiling_guide.pages.chapter import Chapter
from profiling_guide.pages.recordings import (
    StaleRecordingError,
    fingerprint,
    gpu_slug,
    resolve_mode,
)


def test_auto_replays_on_a_machine_without_cuda(monkeypatch):
    monkeypatch.setenv("PROFILING_GUIDE_MODE", "auto")
    assert resolve_mode() == "replay"


def test_live_without_cuda_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv("PROFILING_GUIDE_MODE", "live")
    with pytest.raises(GuideError, match="no CUDA GPU") as err:
        resolve_mode()
    assert "PROFILING_GUIDE_MODE=replay" in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_mode_names_the_valid_ones(monkeypatch):
    monkeypatch.setenv("PROFILING_GUIDE_MODE", "sometimes")
    with pytest.raises(GuideError, match="auto, live, replay"):
        resolve_mode()


def test_gpu_slug_is_the_recordings_folder_name():
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


def _function_from_source(tmp_path, name, source):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.step


def test_fingerprint_ignores_comments_and_docstrings_but_not_code(tmp_path):
    plain = _function_from_source(tmp_path, "plain", "def step():\n    return x + 1\n")
    prose = _function_from_source(tmp_path, "prose", (
        'def step():\n    """Add one."""\n    # the increment\n\n    return x + 1  # done\n'))
    other = _function_from_source(tmp_path, "other", "def step():\n    return x + 2\n")
    assert fingerprint([plain]) == fingerprint([prose])
    assert fingerprint([plain]) != fingerprint([other])
    assert fingerprint([plain], {"batch": 1}) != fingerprint([plain], {"batch": 2})


def test_replay_builds_on_meta_and_reads_the_recording():
    chapter = Chapter("01_linear", {}, mode="replay")
    assert chapter.device == "meta" and not chapter.live
    assert chapter.folder.name == "nvidia-h100-80gb-hbm3"


def test_a_missing_recording_names_the_file_and_how_to_make_it(tmp_path):
    (tmp_path / "some-gpu").mkdir()
    chapter = Chapter("09_nothing", {}, mode="replay", root=tmp_path)
    with pytest.raises(GuideError) as err:
        chapter.capture("eager", lambda: None, label="x")
    msg = str(err.value)
    assert "09_nothing.eager.run.json" in msg and "PROFILING_GUIDE_MODE=live" in msg and "\n" not in msg


def test_replay_without_any_recordings_says_how_to_get_them(tmp_path):
    with pytest.raises(GuideError, match="has none"):
        Chapter("01_linear", {}, mode="replay", root=tmp_path / "empty")


def _copy_recording(tmp_path, name):
    src = recordings.default_root() / recordings.DEFAULT_GPU
    dst = tmp_path / recordings.DEFAULT_GPU
    dst.mkdir(parents=True, exist_ok=True)
    for suffix in (".run.json", ".trace.json.gz"):
        if (src / f"{name}{suffix}").exists():
            shutil.copy(src / f"{name}{suffix}", dst / f"{name}{suffix}")
    return dst


def test_a_recording_made_by_other_code_is_stale(tmp_path, monkeypatch):
    folder = _copy_recording(tmp_path, "01_linear.eager")
    run = json.loads((folder / "01_linear.eager.run.json").read_text())
    chapter = Chapter("01_linear", run["args"], mode="replay", root=tmp_path)

    def a_different_step():
        return "not the recorded code"

    with pytest.warns(UserWarning, match="01_linear.eager is stale"):
        rec = chapter.capture("eager", a_different_step, label="linear_fwd")
    assert rec.stale and "stale" in chapter.banner().text()
    monkeypatch.setenv("PROFILING_GUIDE_STALE", "error")
    again = Chapter("01_linear", run["args"], mode="replay", root=tmp_path)  # a page reads a recording once
    with pytest.raises(StaleRecordingError, match="re-record on a GPU"):
        again.capture("eager", a_different_step, label="linear_fwd")


def test_banner_names_gpu_versions_and_date():
    chapter = Chapter("01_linear", {}, mode="replay")
    text = chapter.banner().text()
    assert "NVIDIA H100 80GB HBM3" in text and "torch 2.11" in text and "No GPU was used" in text
    assert 'class="admonition' in chapter.banner()._repr_html_()


def test_json_is_written_whole_or_not_at_all(tmp_path):
    target = tmp_path / "x.run.json"
    recordings.write_json_atomic(target, {"a": 1})
    with pytest.raises(TypeError):
        recordings.write_json_atomic(target, {"a": object.__new__(type("Bad", (), {"__str__": None}))})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.run.json"]


def test_a_recording_read_twice_is_read_once_until_it_is_recorded_again(tmp_path):
    source = recordings.default_root() / "nvidia-h100-80gb-hbm3"
    for name in ("01_linear.eager", "02_mlp_eager.eager"):
        shutil.copy(source / f"{name}.trace.json.gz", tmp_path / f"{name}.trace.json.gz")
    first = recordings.Recording("01_linear.eager", tmp_path, {})
    again = recordings.Recording("01_linear.eager", tmp_path, {})
    assert first.trace is again.trace  # a page and its verdict read the same file: one Trace
    assert recordings.recorded_trace(tmp_path / "01_linear.eager.trace.json.gz") is first.trace
    (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
    linked = recordings.Recording("01_linear.eager", tmp_path / "link", {}).trace
    assert linked.source == str(tmp_path / "link" / "01_linear.eager.trace.json.gz")  # the path as given
    # recorded again (here: another recording's trace moved into its place, as a live run moves its own)
    (tmp_path / "02_mlp_eager.eager.trace.json.gz").replace(tmp_path / "01_linear.eager.trace.json.gz")
    recorded = recordings.Recording("01_linear.eager", tmp_path, {}).trace
    assert recorded is not first.trace and len(recorded.ops) != len(first.trace.ops)
    with pytest.raises(GuideError, match="no trace file"):
        recordings.recorded_trace(tmp_path / "missing.trace.json.gz")


#: Chapters recorded on one GPU so far, each with why: their page on the other GPU says whose numbers it shows.
NOT_YET_RECORDED = {"08b_your_lines in nvidia-h100-80gb-hbm3": "no H100 was lent since the chapter was written"}


def test_every_chapter_is_recorded_on_every_gpu():
    """The landing page says every chapter exists twice, from an H100's and an H200's recordings: each
    example's recordings are in every GPU's folder (a chapter of several ranks: in every ``-x<n>`` folder),
    but for :data:`NOT_YET_RECORDED`, each of which must still lack its recording there."""
    import ast

    root = Path(__file__).resolve().parents[1]
    folders = [p for p in (root / "docs" / "recordings").iterdir() if p.is_dir()]
    one_gpu = [p for p in folders if not re.search(r"-x\d+$", p.name)]
    several = [p for p in folders if re.search(r"-x\d+$", p.name)]
    assert len(one_gpu) >= 2 and several, "expected recordings of two GPUs and of several ranks"
    missing = []
    for example in sorted((root / "examples").rglob("plot_*.py")):
        for call in ast.walk(ast.parse(example.read_text())):
            if isinstance(call, ast.Call) and getattr(call.func, "attr", "") in ("from_command_line", "recorded"):
                name = call.args[0].value
                ranks = any(k.arg == "ranks" for k in call.keywords)
                missing += [f"{name} in {folder.name}" for folder in (several if ranks else one_gpu)
                            if not any(folder.glob(f"{name}.*.run.json"))]
    assert set(missing) == set(NOT_YET_RECORDED), (
        "no recording: " + "; ".join(sorted(set(missing) - set(NOT_YET_RECORDED))) + " | recorded now, take it out "
        "of NOT_YET_RECORDED: " + "; ".join(sorted(set(NOT_YET_RECORDED) - set(missing))))
