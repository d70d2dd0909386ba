"""The MLP benchmark's results as text: one shape's table, and a sweep's."""

from __future__ import annotations

from collections.abc import Sequence

from profiling_guide.measure.bench_mlp import GATE_UP_GEMMS_ALONE, GEMM_REFERENCES, GEMMS_ALONE
from profiling_guide.measure.bench_records import ShapeResult
from profiling_guide.spread import compare


def format_table(result: ShapeResult) -> str:
    """variant | device µs (median, IQR) | × GEMMs alone | × datasheet bound, then the errors."""
    alone, bound = result.gemms_alone_us, result.datasheet_bound_us
    lines = [f"{'variant':<26} {'device µs (median, IQR)':>28} {'× GEMMs alone':>14} {'× datasheet bound':>18}"]
    references = [(GEMMS_ALONE, alone)]
    if result.gate_up_gemms_alone_us:
        references.append((GATE_UP_GEMMS_ALONE, result.gate_up_gemms_alone_us))
    for name, t in [*references, *result.variants_us.items()]:
        vs_bound = f"{t.median / bound:>18.2f}" if bound else f"{'–':>18}"
        verdict = "" if name in GEMM_REFERENCES else f"  ({compare(t, alone).replace('tie', 'tie with GEMMs alone')})"
        lines.append(f"{name:<26} {format(t, '.1f'):>28} {t.median / alone.median:>14.3f} {vs_bound}{verdict}")
    if bound:
        lines.append(f"{'datasheet bound':<26} {bound:>28.1f}")
    for name, msg in result.errors.items():
        lines.append(f"{name:<26} error: {msg}")
    return "\n".join(lines)


def format_sweep(rows: Sequence[ShapeResult], variants: Sequence[str]) -> str:
    """rows | hidden | GEMMs alone | each variant's median device µs ('-' where it failed)."""
    head = f"{'rows':>6} {'hidden':>6} {'GEMMs':>8} " + " ".join(f"{v:>12}" for v in variants)
    lines = [head, "(median device µs per forward)"]
    for r in rows:
        cells = " ".join(f"{r.variants_us[v].median:>12.1f}" if v in r.variants_us else f"{'-':>12}" for v in variants)
        lines.append(f"{r.rows:>6} {r.hidden:>6} {r.gemms_alone_us.median:>8.1f} {cells}")
    return "\n".join(lines)
