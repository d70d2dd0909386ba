"""Command-line flags shared by the example scripts.

Each example is also a plain script: ``python examples/plot_02_mlp_eager.py
--batch 64 --seq 128 --dim 768 --hidden 3072``. Under sphinx-gallery no flags
are given, so the defaults (the original write-up's sizes) apply.
"""

from __future__ import annotations

import argparse
import sys

import torch

from .errors import GuideError

DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
          "float32": torch.float32, "fp32": torch.float32}


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (the message names the bad value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be a positive size")
    return value


def _one_line_errors(exc_type, exc, tb, _default=sys.excepthook):
    if issubclass(exc_type, GuideError):
        print(f"error: {exc}", file=sys.stderr)
    else:
        _default(exc_type, exc, tb)


def example_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the flags every example has: ``--dtype`` and ``--mode``.

    It also makes an uncaught :class:`~profiling_guide.errors.GuideError`
    (a missing recording, no GPU in live mode...) print as one line when the
    example runs as a script; other exceptions keep their traceback.
    """
    sys.excepthook = _one_line_errors
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES),
                        help="element type of weights and inputs (default: bfloat16)")
    parser.add_argument("--mode", choices=("auto", "live", "replay"), default=None,
                        help="live: measure on the GPU and refresh the recordings; replay: read them; "
                             "auto (default, or $PROFILING_GUIDE_MODE): live when CUDA is available")
    return parser


def run_args(args: argparse.Namespace) -> dict:
    """The arguments that define a run (what the fingerprint and run record keep)."""
    return {k: v for k, v in vars(args).items() if k != "mode"}
