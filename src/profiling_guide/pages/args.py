"""Command-line flags shared by the example scripts.

Each example is also a plain script: ``python examples/plot_02_mlp_eager.py
--batch 64 --seq 128 --dim 768 --hidden 3072``. Under sphinx-gallery no flags
are given, so the defaults (the original write-up's sizes) apply.
"""

from __future__ import annotations

import argparse
import math

import torch

from profiling_guide.errors import GuideError, show_guide_errors_in_one_line
from profiling_guide.sizes import MAX_ELEMENTS, positive_int

DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
          "float32": torch.float32, "fp32": torch.float32}


class _ExampleParser(argparse.ArgumentParser):
    """An ArgumentParser that also refuses sizes no tensor could have (one line, exit 2)."""

    def parse_known_args(self, args=None, namespace=None):
        parsed, rest = super().parse_known_args(args, namespace)
        sizes = [a for a in self._actions if a.type is positive_int and isinstance(getattr(parsed, a.dest, None), int)]
        product = math.prod(getattr(parsed, a.dest) for a in sizes)
        if product > MAX_ELEMENTS:
            flags = " × ".join(a.option_strings[0] for a in sizes)
            self.error(f"{flags} = {product:.3g}, more elements than a tensor can hold ({MAX_ELEMENTS:.3g}): "
                       "use smaller sizes")
        return parsed, rest


def example_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the flags every example has: ``--dtype`` and ``--mode``.

    It also makes an uncaught :class:`~profiling_guide.errors.GuideError`
    (a missing recording, no GPU in live mode...) print as one line when the
    example runs as a script; other exceptions keep their traceback.
    """
    show_guide_errors_in_one_line()
    parser = _ExampleParser(description=description)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES),
                        help="element type of weights and inputs (default: bfloat16)")
    parser.add_argument("--mode", choices=("auto", "live", "replay"), default=None,
                        help="live: measure on the GPU and refresh the recordings; replay: read them; "
                             "auto (default, or $PROFILING_GUIDE_MODE): live when CUDA is available")
    return parser


def add_mlp_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The MLP chapters' flags, with the original write-up's sizes as defaults."""
    parser.add_argument("--batch", type=positive_int, default=64, help="sequences per batch (default 64)")
    parser.add_argument("--seq", type=positive_int, default=128, help="tokens per sequence (default 128)")
    parser.add_argument("--dim", type=positive_int, default=768, help="model width (default 768)")
    parser.add_argument("--hidden", type=positive_int, default=3072, help="MLP hidden width (default 3072)")
    return parser


def require_bfloat16(args: argparse.Namespace, why: str) -> torch.dtype:
    """bfloat16, or a one-line error naming ``why`` a page measures only bf16."""
    if DTYPES[args.dtype] is not torch.bfloat16:
        raise GuideError(f"--dtype {args.dtype} is not supported here: {why}; use --dtype bfloat16")
    return torch.bfloat16


def run_args(args: argparse.Namespace) -> dict:
    """The arguments that define a run (what the fingerprint and run record keep)."""
    return {k: v for k, v in vars(args).items() if k != "mode"}
