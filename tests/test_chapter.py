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
