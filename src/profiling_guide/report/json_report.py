"""``profiling-guide report --json``: the report's verdict as data, under a versioned schema.

Schema ``profiling-guide.report/1`` (documented on the report's page of the
guide, ``docs/report.md``). Times are ms per step; a verdict is
``{cause, where, rank, step_ms, predicted_step_ms, saving_ms, path_ms, fix}``
with ``where`` as ``{op, label, kind, rank, before, text}``.

One trace::

    {"schema", "kind": "trace", "source", "environment", "steps", "verdict",
     "what_if", "profiler_overhead", "profiled_step_ms", "critical_path_ms",
     "missing", "notes", "attribution", "attributed_share",
     "attribution_device_us", "unattributed"}

``attribution`` lists device µs per step by ``module``, ``source`` and
``phase`` (:meth:`~profiling_guide.analysis.attribution.Attribution.to_json`).

A run of several ranks::

    {"schema", "kind": "run", "sources", "world_size", "gpus", "steps", "verdict",
     "what_if", "culprit", "slow_ranks", "run_step_ms", "standalone_step_ms",
     "ranks": [{"rank", "verdict"}], "rank_read", "rank_read_verdict", "notes"}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from profiling_guide.analysis.ranks import RunAnalysis
from profiling_guide.analysis.trace_report import TraceReport
from profiling_guide.files import finite_or_null, write_text_atomic
from profiling_guide.report.attribution_html import REASONS

SCHEMA = "profiling-guide.report/1"


def _finite(value):
    """JSON has no NaN or infinity: they become null, and ``notes`` says where (a number not there is no zero)."""
    places: list[str] = []
    value = finite_or_null(value, "$", places)
    if places and isinstance(value, dict):
        shown = ", ".join(places[:8]) + (f" and {len(places) - 8:,} more" if len(places) > 8 else "")
        value["notes"] = [*(value.get("notes") or []), f"not a finite number, so null: {shown}"]
    return value


def trace_json(report: TraceReport) -> dict:
    """The report of one trace as the schema's data."""
    v = report.verdict.to_dict() if report.verdict is not None else {}
    return _finite({
        "schema": SCHEMA, "kind": "trace", "source": report.source, "environment": report.environment,
        "steps": {"count": len(report.steps), "numbers": [s.number for s in report.steps],
                  "whole_trace": report.whole_trace, "graph_replays": report.graph_replays},
        "rank": report.rank[0] if report.rank else None,
        "verdict": v.get("verdict"), "what_if": v.get("what_if", []),
        "profiler_overhead": v.get("profiler_overhead"), "profiled_step_ms": v.get("profiled_step_ms"),
        "critical_path_ms": v.get("critical_path_ms", {}), "missing": v.get("missing"), "notes": v.get("notes", []),
        **_attribution(report),
    })


def _attribution(report: TraceReport) -> dict:
    """``attribution`` (module, source, phase, device_us, ...), ``attributed_share`` and ``unattributed``."""
    a = report.attribution
    if a is None:
        return {"attribution": [], "attributed_share": None, "attribution_device_us": None, "unattributed": []}
    return {"attribution": a.to_json(), "attributed_share": a.attributed_share, "attribution_device_us": a.device_us,
            "unattributed": [{"reason": reason, "what": REASONS[reason][0], "device_us": us,
                              "share": us / a.device_us if a.device_us else 0.0, "fix": REASONS[reason][1]}
                             for reason, us in a.unattributed]}


def run_json(run: RunAnalysis, sources: dict[int, str]) -> dict:
    """The report of a run as the schema's data."""
    rv = run.verdict.to_dict() if run.verdict is not None else {}
    read = run.verdict.rank_verdict.to_dict() if run.verdict is not None and run.verdict.rank_verdict else None
    return _finite({
        "schema": SCHEMA, "kind": "run", "sources": {str(r): p for r, p in sorted(sources.items())},
        "world_size": len(run.ranks) + len(run.missing), "ranks_given": run.ranks, "missing_ranks": run.missing,
        "gpus": {str(r): name for r, name in sorted(run.gpus.items())},
        "steps": run.steps, **rv,
        "rank_read": run.verdict.rank_read if run.verdict is not None else None, "rank_read_verdict": read,
    })


def write_json(data: dict, out: str | Path, inputs: list) -> str:
    """Write ``data`` to ``out`` (``-``: standard output); returns where it went."""
    text = json.dumps(_finite(data), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    if str(out) == "-":
        sys.stdout.write(text)
        return "-"
    write_text_atomic(Path(out), text, suffix=".json", inputs=inputs)
    return str(out)
