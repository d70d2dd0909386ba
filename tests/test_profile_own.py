"""``profiling-guide profile``: finding the user's step, and refusing in one line what cannot work.

Profiling itself needs a CUDA GPU; these tests check everything before it.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from quick_python import quick_python
import profiling_guide
from profiling_guide.errors import GuideError
from profiling_guide.report.profile_own import (
    check_out_dir,
    load_target,
    make_step,
    profile_callable,
)

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")


def run(args, cwd):
    src = str(Path(profiling_guide.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([quick_python(), *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A user's training file: a factory, a plain step, a non-callable, in ``tmp_path/my_train.py``."""
    (tmp_path / "my_train.py").write_text(textwrap.dedent("""
        import torch
        calls = []

        def make_step():
            x = torch.ones(4)
            return lambda: calls.append(x.sum())

        def step():
            calls.append("step")

        BATCH = 8
    """))
    (tmp_path / "broken.py").write_text("import this_package_does_not_exist_anywhere\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('CUDA is required here\\nsecond line')\n")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in ("my_train", "broken", "raises"):
        sys.modules.pop(name, None)


def test_a_factory_returns_the_step_and_a_plain_function_is_the_step(user_module):
    factory = load_target("my_train:make_step")
    step = make_step(factory)
    assert step is not factory
    step()
    plain = load_target("my_train:step")
    assert make_step(plain) is plain
    assert sys.modules["my_train"].calls[-1] == "step"


def test_a_file_path_works_as_well_as_a_module_name(user_module):
    assert load_target(str(user_module / "my_train.py") + ":step").__name__ == "step"


@pytest.mark.parametrize("spec, message", [
    ("my_train", "is not MODULE:CALLABLE"),
    ("no_such_module_here:step", "no module named 'no_such_module_here'"),
    ("broken:step", "broken needs this_package_does_not_exist_anywhere, which is not installed: pip install"),
    ("raises:step", "importing raises failed: RuntimeError: CUDA is required here"),
    ("my_train:missing", "has no attribute 'missing'"),
    ("my_train:BATCH", "is a int, not something to call"),
    ("nowhere/train.py:step", "no file at nowhere/train.py"),
])
def test_a_target_that_does_not_import_or_call_is_one_guide_error(user_module, spec, message):
    with pytest.raises(GuideError, match=message) as caught:
        load_target(spec)
    assert "\n" not in str(caught.value)


def test_an_output_folder_that_is_a_file_is_refused_before_the_target_is_imported(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(GuideError, match="it is a file"):
        profile_callable("no_such_module_here:step", a_file)
    assert check_out_dir(tmp_path / "new" / "folder").is_dir()


@NO_GPU
def test_without_a_gpu_profile_says_so_in_one_line(user_module):
    with pytest.raises(GuideError, match="needs a CUDA GPU"):
        profile_callable("my_train:make_step", user_module / "out")
    assert sys.modules["my_train"].calls == [], "the step never ran"


@NO_GPU
def test_the_profile_command_fails_in_one_line_without_a_gpu(user_module):
    result = run(["-m", "profiling_guide.cli", "profile", "my_train:make_step", "-o", "out"], cwd=user_module)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "needs a CUDA GPU" in result.stderr


def test_the_profile_command_names_a_bad_target_in_one_line(user_module):
    result = run(["-m", "profiling_guide.cli", "profile", "my_train:BATCH", "-o", "out"], cwd=user_module)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not something to call" in result.stderr


def test_steps_below_one_are_refused(tmp_path):
    with pytest.raises(GuideError, match="at least 1"):
        profile_callable(lambda: None, tmp_path, steps=0)
