"""The MLP benchmark's records: one shape's results, one run's, and their JSON.

:class:`ShapeResult` holds one shape of :func:`~profiling_guide.measure.bench_mlp.measure_shape`
(each row of a :func:`~profiling_guide.measure.bench_mlp.sweep`), :class:`BenchmarkRun` one
run of :func:`~profiling_guide.measure.bench_mlp.benchmark`; ``to_json`` and ``from_json``
give and read the layout of ``bench_mlp.json`` and of the chapters' recordings.
No torch: a recording is read back on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from profiling_guide import files
from profiling_guide.spread import Spread


def _spreads(d: dict) -> dict[str, Spread]:
    return {name: Spread.from_dict(t) for name, t in d.items()}


def _dicts(d: dict[str, Spread]) -> dict[str, dict]:
    return {name: t.to_dict() for name, t in d.items()}


@dataclass
class ShapeResult:
    """One shape of the benchmark: the workload, both floors, and each variant's times, errors and config.

    :meth:`to_json` gives the dict the recordings and ``--sweep``'s JSON hold
    (spreads as ``{median, q1, q3, repeats}``); :meth:`from_json` reads one
    back, also one written before ``gate_up_gemms_alone_us`` existed.
    """

    rows: int
    dim: int
    hidden: int
    flops: int
    min_bytes: int  # weights, x and y once each
    datasheet_bound_us: float | None
    inputs: int  # rotating inputs, together at least twice the L2 cache
    inputs_mb: float
    gemms_alone_us: Spread | None = None  # cuBLAS's three GEMMs, nothing between them
    gate_up_gemms_alone_us: Spread | None = None  # cuBLAS's gate and up GEMMs only
    variants_us: dict[str, Spread] = field(default_factory=dict)  # device µs per forward
    cpu_issue_us: dict[str, Spread] = field(default_factory=dict)  # host µs to issue one forward
    errors: dict[str, str] = field(default_factory=dict)  # variant → one line: unavailable, failed, wrong output
    wrong: list[str] = field(default_factory=list)
    max_rel_error: dict[str, float | None] = field(default_factory=dict)  # vs eager
    max_rel_error_fp64: dict[str, float | None] = field(default_factory=dict)  # vs a float64 reference
    notes: dict[str, str] = field(default_factory=dict)
    fused_configs: dict[str, str | None] = field(default_factory=dict)  # fused variant → the tile config it ran
    references: dict | None = None  # in a sweep, the first shape carries the run's reference rates

    def to_json(self) -> dict:
        data = {
            "rows": self.rows, "dim": self.dim, "hidden": self.hidden, "flops": self.flops,
            "min_bytes": self.min_bytes, "datasheet_bound_us": self.datasheet_bound_us,
            "inputs": self.inputs, "inputs_mb": self.inputs_mb,
            "gemms_alone_us": self.gemms_alone_us.to_dict() if self.gemms_alone_us else None,
            "gate_up_gemms_alone_us": self.gate_up_gemms_alone_us.to_dict() if self.gate_up_gemms_alone_us else None,
            "variants_us": _dicts(self.variants_us), "cpu_issue_us": _dicts(self.cpu_issue_us),
            "errors": dict(self.errors), "wrong": list(self.wrong), "max_rel_error": dict(self.max_rel_error),
            "max_rel_error_fp64": dict(self.max_rel_error_fp64), "notes": dict(self.notes),
            "fused_configs": dict(self.fused_configs),
        }  # fmt: skip
        if self.references is not None:
            data["references"] = self.references
        return data

    @classmethod
    def from_json(cls, data: dict) -> ShapeResult:
        alone, gate_up = data.get("gemms_alone_us"), data.get("gate_up_gemms_alone_us")
        return cls(
            rows=data["rows"], dim=data["dim"], hidden=data["hidden"], flops=data["flops"],
            min_bytes=data["min_bytes"], datasheet_bound_us=data.get("datasheet_bound_us"),
            inputs=data["inputs"], inputs_mb=data["inputs_mb"],
            gemms_alone_us=Spread.from_dict(alone) if alone else None,
            gate_up_gemms_alone_us=Spread.from_dict(gate_up) if gate_up else None,
            variants_us=_spreads(data.get("variants_us", {})), cpu_issue_us=_spreads(data.get("cpu_issue_us", {})),
            errors=dict(data.get("errors", {})), wrong=list(data.get("wrong", [])),
            max_rel_error=dict(data.get("max_rel_error", {})),
            max_rel_error_fp64=dict(data.get("max_rel_error_fp64", {})),
            notes=dict(data.get("notes", {})), fused_configs=dict(data.get("fused_configs", {})),
            references=data.get("references"),
        )  # fmt: skip


# The measurement method, as run_benchmark's JSON states it.
TIMING_METHOD = ("device time: median over repeats (each the median of CUDA-event times per forward), "
                 "torch.no_grad(), inputs rotated through 2× the L2, GPU queue kept full, variants interleaved")
# ShapeResult fields that run_benchmark's JSON holds at its top level (rows, dim, hidden: under "shape";
# inputs, inputs_mb: under "timing").
_TOP_LEVEL = ("flops", "min_bytes", "datasheet_bound_us", "gemms_alone_us", "gate_up_gemms_alone_us", "variants_us",
              "cpu_issue_us", "errors", "wrong", "max_rel_error", "max_rel_error_fp64", "fused_configs", "notes")


@dataclass
class BenchmarkRun:
    """One run of :func:`~profiling_guide.measure.bench_mlp.run_benchmark`: the GPU, the versions, the reference
    rates and one shape's results.

    :meth:`to_json` gives the layout of ``bench_mlp.json`` (the headlines of
    the docs read it) and of the chapters' ``bench`` recordings.
    """

    gpu: dict
    versions: dict
    batch: int
    seq: int
    references: dict
    result: ShapeResult
    rounds: int
    repeats: int

    def to_json(self) -> dict:
        m = self.result.to_json()
        return {
            "gpu": self.gpu,
            "versions": self.versions,
            "shape": {"batch": self.batch, "seq": self.seq, "rows": m["rows"], "dim": m["dim"], "hidden": m["hidden"],
                      "dtype": "bfloat16"},
            "references": self.references,
            **{k: m[k] for k in _TOP_LEVEL},
            "timing": {"method": TIMING_METHOD, "rounds": self.rounds, "repeats": self.repeats,
                       "inputs": m["inputs"], "inputs_mb": m["inputs_mb"]},
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> BenchmarkRun:
        shape, timing = data["shape"], data["timing"]
        fields = {k: data[k] for k in _TOP_LEVEL if k in data}
        result = ShapeResult.from_json({**fields, "rows": shape["rows"], "dim": shape["dim"], "hidden": shape["hidden"],
                                        "inputs": timing["inputs"], "inputs_mb": timing["inputs_mb"]})  # fmt: skip
        return cls(gpu=data["gpu"], versions=data["versions"], batch=shape["batch"], seq=shape["seq"],
                   references=data["references"], result=result, rounds=timing["rounds"],
                   repeats=timing["repeats"])  # fmt: skip


def write_json_atomic(path: Path, data) -> list[str]:
    """Write ``data`` as JSON whole or not at all; returns where NaN or infinity was written as null."""
    return files.write_json_atomic(path, data)
