"""An attention step read from its trace: kernels per pass, copies, launches, precision, and the predicates of chapter 9.

A step of chapter 9 is one forward and one backward of one attention call
(``torch.autograd.grad`` of its output). :func:`pass_of` puts each piece of
device work in the forward or the backward by the op that launched it
(:func:`~profiling_guide.analysis.backward.phase_of`: the backward runs on the
autograd engine's thread). :func:`step_table` is one row per variant with
what the trace and the profiler-off timings say; :func:`rates_table` sets
each variant's achieved TFLOP/s against the measured GEMM reference and the
datasheet ceiling. The predicates at the end test the page's claims (each returns ``(holds, seen)``).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from profiling_guide.analysis.backward import phase_of
from profiling_guide.spread import Spread
from profiling_guide.spread import compare
from profiling_guide.trace.model import DeviceEvent, Trace

PASSES = ("forward", "backward")


def pass_of(event: DeviceEvent) -> str:
    """``forward`` or ``backward``: the pass whose op launched ``event`` (``forward`` if no launch was recorded)."""
    return "backward" if event.launch is not None and phase_of(event.launch.op) == "backward" else "forward"


def per_step(trace: Trace, *, kind: str = "kernel") -> dict[str, list[DeviceEvent]]:
    """The device events of kind ``kind`` (``kernel``, ``memcpy``, ``memset``) of the first step, by pass."""
    out: dict[str, list[DeviceEvent]] = {p: [] for p in PASSES}
    for ev in trace.steps[0].device_events:
        if ev.kind == kind:
            out[pass_of(ev)].append(ev)
    return out


def kernels_per_pass(trace: Trace) -> dict[str, int]:
    """Kernels the forward and the backward launch in one step."""
    return {p: len(evs) for p, evs in per_step(trace).items()}


def memcpys_per_pass(trace: Trace) -> dict[str, int]:
    """Device-to-device copies (memcpy events) the forward and the backward make in one step."""
    return {p: len(evs) for p, evs in per_step(trace, kind="memcpy").items()}


def launch_calls(trace: Trace) -> Counter:
    """How the step's kernels were launched: runtime or driver call name → kernels."""
    return Counter(k.launch.name if k.launch is not None else "no launch recorded" for k in trace.steps[0].kernels)


def score_dtypes(trace: Trace, op_name: str = "aten::_softmax") -> set[str]:
    """The element types ``op_name`` was called with in the step (``record_shapes``' ``Input type``)."""
    types = set()
    for op in trace.ops_named(op_name):
        if op.step == trace.steps[0].number:
            types.update(t for t in op.args.get("Input type", []) if isinstance(t, str) and t)
    return types


def est_occupancy(trace: Trace) -> list[tuple[str, str, float | None]]:
    """``(short name, launch call, est. achieved occupancy %)`` of each kernel of the step, as the trace records it."""
    return [(k.decoded.short, k.launch.name if k.launch else "?", k.args.get("est. achieved occupancy %"))
            for k in trace.steps[0].kernels]


# ------------------------------------------------------------------ tables
def step_table(runs: dict, timings: dict) -> pd.DataFrame:
    """One row per variant: kernels per forward and backward, device µs of each, peak MB, CPU issue µs of a step.

    ``runs``: name → recording of the profiled step; ``timings``: the
    :func:`~profiling_guide.measure.attention.time_variants` result.
    """
    rows = {}
    for name, rec in runs.items():
        counts = kernels_per_pass(rec.trace)
        rows[name] = {
            "kernels (fwd + bwd)": f"{counts['forward']} + {counts['backward']}",
            "forward µs": Spread.from_dict(timings["forward_us"][name]),
            "backward µs": Spread.from_dict(timings["backward_us"][name]),
            "peak MB": timings["memory"][name]["peak_mb"],
            "CPU issue µs (step)": Spread.from_dict(timings["cpu_issue_step_us"][name]),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def step_pace(timings: dict, name: str) -> tuple[Spread, Spread]:
    """``(CPU issue µs, device µs)`` of one training step of ``name``, profiler off."""
    return (Spread.from_dict(timings["cpu_issue_step_us"][name]), Spread.from_dict(timings["step_us"][name]))


def rates_table(timings: dict, flops: dict[str, float], references: dict) -> pd.DataFrame:
    """Achieved TFLOP/s of each variant's forward and backward, and as % of the reference and the ceiling.

    ``flops``: :func:`~profiling_guide.kernels.attention.attention_flops`;
    ``references``: the chapter's reference rates (``gemm_tflops``, ``datasheet``).
    """
    gemm = references["gemm_tflops"]["rate"]
    sheet = (references.get("datasheet") or {}).get("bf16_tflops")
    rows = {}
    for name in timings["forward_us"]:
        fwd = flops["forward"] / Spread.from_dict(timings["forward_us"][name]).median / 1e6
        bwd = flops["backward"] / Spread.from_dict(timings["backward_us"][name]).median / 1e6
        row = {"forward TFLOP/s": fwd, "backward TFLOP/s": bwd, "forward % of GEMM reference": 100 * fwd / gemm,
               "backward % of GEMM reference": 100 * bwd / gemm}
        if sheet:
            row["forward % of datasheet ceiling"] = 100 * fwd / sheet
            row["backward % of datasheet ceiling"] = 100 * bwd / sheet
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


# ------------------------------------------------------------------ predicates
def copies_out_of_place(runs: dict, *, out_of_place: str, in_place: str):
    """The out-of-place mask's forward makes a device copy that the in-place one does not."""
    def _predicate(_=None):
        a, b = memcpys_per_pass(runs[out_of_place].trace), memcpys_per_pass(runs[in_place].trace)
        holds = a["forward"] > b["forward"]
        return holds, (f"device copies per forward: {a['forward']} with masked_fill, {b['forward']} with "
                       f"masked_fill_")
    return _predicate


def softmax_in_fp32(trace: Trace):
    """The softmax of the step runs on float32 scores (bf16 inputs upcast)."""
    def _predicate(_=None):
        types = score_dtypes(trace)
        return "float" in types, f"aten::_softmax input types: {', '.join(sorted(types)) or 'none recorded'}"
    return _predicate


def one_kernel_forward(runs: dict, names: list[str]):
    """Each of ``names`` launches one kernel in its forward."""
    def _predicate(_=None):
        counts = {n: kernels_per_pass(runs[n].trace)["forward"] for n in names}
        return all(c == 1 for c in counts.values()), ", ".join(f"{n} {c}" for n, c in counts.items())
    return _predicate


def more_kernels(runs: dict, many: str, than: str):
    """``many`` launches more kernels per step than ``than``."""
    def _predicate(_=None):
        a, b = (sum(kernels_per_pass(runs[n].trace).values()) for n in (many, than))
        return a > b, f"{many} {a} kernels per step, {than} {b}"
    return _predicate


def slower_by_at_least(timings: dict, slow: str, fast: str, factor: float, *, pass_: str = "forward_us"):
    """``slow``'s median is at least ``factor`` times ``fast``'s, outside the spreads."""
    def _predicate(_=None):
        a, b = (Spread.from_dict(timings[pass_][n]) for n in (slow, fast))
        ratio = a.median / b.median
        holds = a.q1 > factor * b.q3
        return holds, f"{slow} {a.median:.1f} µs, {fast} {b.median:.1f} µs: {ratio:.1f}×"
    return _predicate


def costs_more_cpu(timings: dict, costly: str, than: str):
    """``costly`` takes more CPU time to issue a forward than ``than``, outside the spreads."""
    def _predicate(_=None):
        a, b = (Spread.from_dict(timings["cpu_issue_forward_us"][n]) for n in (costly, than))
        return a.q1 > b.q3, f"{costly} {a.median:.1f} µs, {than} {b.median:.1f} µs of CPU time per forward"
    return _predicate


def launched_through(trace: Trace, call: str):
    """Every kernel of the step is launched by ``call``."""
    def _predicate(_=None):
        calls = launch_calls(trace)
        return set(calls) == {call}, ", ".join(f"{n}: {c}" for n, c in calls.items())
    return _predicate


def zero_occupancy(trace: Trace, library: str):
    """The attention kernels of ``library`` show 0 % estimated occupancy in the trace."""
    def _predicate(_=None):
        # The fused kernels themselves (their names carry a tile), not the backward's small helpers.
        mine = [(k.decoded.short, k.args.get("est. achieved occupancy %")) for k in trace.steps[0].kernels
                if k.decoded.library == library and k.decoded.kind == "attention" and k.decoded.tile]
        holds = bool(mine) and all(occ == 0 for _, occ in mine)
        return holds, "; ".join(f"{name}: {occ} %" for name, occ in mine) or f"no {library} attention kernel"
    return _predicate


def occupancy_rows(runs: dict) -> list[dict]:
    """Every distinct kernel of the steps with its launch call, shared memory, blocks per SM and estimated occupancy."""
    seen = {}
    for rec in runs.values():
        for k in rec.trace.steps[0].kernels:
            seen.setdefault(k.name, {"kernel": k.decoded.short, "launch": k.launch.name if k.launch else "?",
                                     "shared_bytes": k.args.get("shared memory"),
                                     "blocks_per_sm": k.args.get("blocks per SM"),
                                     "occupancy": k.args.get("est. achieved occupancy %")})
    return list(seen.values())


def zero_occupancy_follows_launch(runs: dict, call: str = "cuLaunchKernelEx"):
    """The kernels the trace shows at 0 % occupancy are exactly those launched with ``call``.

    Kernels of less than one block per SM are left out: their 0 % is a true
    estimate (most SMs have nothing to run).
    """
    def _predicate(_=None):
        every = occupancy_rows(runs)
        rows = [r for r in every if (r["blocks_per_sm"] or 0) >= 1]
        small = sorted({r["kernel"] for r in every if (r["blocks_per_sm"] or 0) < 1 and r["occupancy"] == 0})
        zero = [r for r in rows if r["occupancy"] == 0]
        by_call = [r for r in rows if r["launch"] == call]
        holds = {id(r) for r in zero} == {id(r) for r in by_call}
        calls = Counter(r["launch"] for r in zero)
        smem = [r["shared_bytes"] for r in zero if r["shared_bytes"] is not None]
        others = [r["shared_bytes"] for r in rows if r["occupancy"] not in (0, None) and r["shared_bytes"] is not None]
        seen = (f"of the kernels with at least one block per SM, at 0 %: {len(zero)}, launched with "
                + ", ".join(f"{c} ({n})" for c, n in calls.items())
                + (f"; their shared memory: {min(smem):,}–{max(smem):,} B, every other kernel's: "
                   f"at most {max(others):,} B" if smem and others else "")
                + (f". Also at 0 %, rightly: {len(small)} with fewer blocks than SMs ({', '.join(small[:3])}"
                   f"{', …' if len(small) > 3 else ''})" if small else ""))
        return holds, seen
    return _predicate


def sweep_winners(points: list[dict]) -> pd.DataFrame:
    """Per measured (head dim, causal, length): the fastest forward and backward, and the variants tied with each.

    ``points``: :func:`profiling_guide.measure.attention.sweep` rows. A tie is
    an overlap of interquartile ranges (:func:`~profiling_guide.spread.compare`).
    """
    groups: dict[tuple, list[dict]] = {}
    for r in points:
        if "skipped" not in r:
            groups.setdefault((r["head_dim"], r["causal"], r["seq"]), []).append(r)
    out = []
    for (head_dim, causal, seq), rows in sorted(groups.items(), key=lambda kv: (kv[0][0], not kv[0][1], kv[0][2])):
        row = {"head dim": head_dim, "mask": "causal" if causal else "none", "seq": seq}
        for label, key in (("forward", "forward_us"), ("backward", "backward_us")):
            times = {r["variant"]: Spread.from_dict(r[key]) for r in rows}
            best = min(times, key=lambda n: times[n].median)
            ties = [n for n in times if n != best and compare(times[best], times[n]) == "tie"]
            row[f"fastest {label}"] = best + (f" (tie: {', '.join(ties)})" if ties else "")
            row[f"{label} µs"] = times[best]
        out.append(row)
    return pd.DataFrame(out)


def kernel_names_table(runs: dict) -> pd.DataFrame:
    """Per variant: its forward's and backward's kernels (decoded, in launch order) and how they were launched."""
    rows = {}
    for name, rec in runs.items():
        by_pass = per_step(rec.trace)
        calls = launch_calls(rec.trace)
        rows[name] = {
            **{f"{p} kernels": ", ".join(dict.fromkeys(k.decoded.short for k in evs)) or "–"
               for p, evs in by_pass.items()},
            "launched with": ", ".join(f"{c} ({n})" for c, n in calls.most_common()),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def fastest_step(timings: dict) -> str:
    """The variant whose training step (forward and backward) has the lowest median device time."""
    return min(timings["step_us"], key=lambda n: timings["step_us"][n]["median"])
