"""The sizes a command-line flag may take: whole, positive, and small enough for a tensor."""

from __future__ import annotations

import argparse
from typing import Callable

#: The largest size a flag takes: a CUDA grid's x dimension and the largest 32-bit int.
MAX_SIZE = 2**31 - 1
#: The most the sizes given to one example may multiply to. Every tensor an
#: example makes has at most their product elements; beyond this a float64
#: tensor's size in bytes would overflow the int64 torch counts bytes in.
MAX_ELEMENTS = 2**60


def positive_int_for(what: str) -> Callable[[str], int]:
    """An argparse type: an integer from 1 to :data:`MAX_SIZE`; the message names the bad value and ``what`` runs it."""

    def positive_int(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{value} must be a positive size")
        if value > MAX_SIZE:
            raise argparse.ArgumentTypeError(f"{value} is larger than any size {what} can run (at most {MAX_SIZE})")
        return value

    return positive_int


#: argparse type for an example's size flags.
positive_int = positive_int_for("an example")
