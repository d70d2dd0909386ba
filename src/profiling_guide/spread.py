"""A measured quantity and its spread, and when one time beats another: plain arithmetic, no GPU.

:mod:`profiling_guide.measure.timing` produces these; pages, the pace verdict and the
benchmark's tables read them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from profiling_guide.errors import GuideError


@dataclass(frozen=True)
class Spread:
    """A measured quantity: the median of ``repeats`` repeats and their interquartile range."""

    median: float
    q1: float
    q3: float
    repeats: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise GuideError("a spread of no measurements: repeat the measurement at least once")
        values = sorted(values)
        if len(values) == 1:
            return cls(values[0], values[0], values[0], 1)
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(statistics.median(values), q1, q3, len(values))

    @classmethod
    def from_dict(cls, d: dict) -> Spread:
        return cls(d["median"], d["q1"], d["q3"], d["repeats"])

    def to_dict(self) -> dict:
        return asdict(self)

    def scaled(self, factor: float) -> Spread:
        """The same spread in other units (e.g. µs → a rate, with ``factor`` = work / µs)."""
        lo, hi = sorted((self.q1 * factor, self.q3 * factor))
        return Spread(self.median * factor, lo, hi, self.repeats)

    def inverse(self, numerator: float) -> Spread:
        """``numerator / self``: a time turned into a rate (the quartiles swap ends)."""
        return Spread(numerator / self.median, numerator / self.q3, numerator / self.q1, self.repeats)

    def __format__(self, spec: str) -> str:
        spec = spec or ".1f"
        return f"{self.median:{spec}} (IQR {self.q1:{spec}}–{self.q3:{spec}})"

    def __str__(self) -> str:
        return format(self, "")


def compare(a: Spread, b: Spread) -> str:
    """``"faster"``, ``"slower"`` or ``"tie"``: is time ``a`` below ``b`` outside both spreads?"""
    if a.q3 < b.q1:
        return "faster"
    if a.q1 > b.q3:
        return "slower"
    return "tie"


def ratio_words(a: Spread, b: Spread, *, what: str = "") -> str:
    """``"1.32× faster than B"`` / ``"a tie with B (1.01×, inside the spread)"`` for times ``a`` and ``b``."""
    verdict = compare(a, b)
    if verdict == "faster":
        return f"{b.median / a.median:.2f}× faster{what}"
    if verdict == "slower":
        return f"{a.median / b.median:.2f}× slower{what}"
    return f"a tie{what} ({a.median / b.median:.2f}×, inside the spread)"
