"""The MLP benchmark's command line: ``profiling-guide bench-mlp`` (or ``python -m profiling_guide.measure.bench_cli``).

One shape (``--batch --seq --dim --hidden``) or a ``--sweep`` over ``--rows``
× ``--hiddens``; the table on stdout, the results as JSON with ``--json``.
``--backward`` also times the training step at that shape (forward and
backward, :mod:`~profiling_guide.measure.bench_step`), kept under
``training_step`` in the JSON.
Exit status: 0, 1 when a variant gave wrong output, 2 on an error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from profiling_guide import files
from profiling_guide.errors import GuideError
from profiling_guide.measure.bench_format import format_sweep, format_table
from profiling_guide.measure.bench_mlp import (
    DEFAULT_VARIANTS,
    SWEEP_HIDDENS,
    SWEEP_ROWS,
    VARIANTS,
    _check_variants,
    _require_cuda,
    benchmark,
    sweep,
)
from profiling_guide.measure.bench_records import ShapeResult, write_json_atomic
from profiling_guide.measure.bench_step import STEP_VARIANTS, format_training_step, measure_training_step
from profiling_guide.measure.capture import gpu_facts, software_versions
from profiling_guide.measure.timing import REPEATS
from profiling_guide.sizes import positive_int_for


_positive_int = positive_int_for("this benchmark")  # argparse type: a size from 1 to MAX_SIZE


def _int_list(text: str) -> list[int]:
    values = [_positive_int(part) for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def _names_from(choices: Sequence[str], kind: str):
    """An argparse type: comma-separated names, each one of ``choices`` (``kind`` names them in errors)."""
    def parse(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        if not names:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind}s from {', '.join(choices)}")
        for name in names:
            if name not in choices:
                raise argparse.ArgumentTypeError(f"unknown {kind} {name!r}: choose from {', '.join(choices)}")
        return names
    return parse


_variant_list = _names_from(VARIANTS, "variant")
_step_variant_list = _names_from(STEP_VARIANTS, "training-step variant")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="profiling-guide bench-mlp",
        description="Time the GeGLU MLP variants (bf16) against cuBLAS's bare GEMMs and the datasheet bound, in one run.",
    )
    p.add_argument("--batch", type=_positive_int, default=64)
    p.add_argument("--seq", type=_positive_int, default=128)
    p.add_argument("--dim", type=_positive_int, default=768)
    p.add_argument("--hidden", type=_positive_int, default=3072)
    p.add_argument("--variants", type=_variant_list, default=None,
                   help=f"comma-separated, from {','.join(VARIANTS)} (default: {','.join(DEFAULT_VARIANTS)})")
    p.add_argument("--rounds", type=_positive_int, default=None,
                   help="passes over the rotating inputs in one timing (default 20; 10 with --sweep)")
    p.add_argument("--repeats", type=_positive_int, default=None,
                   help="interleaved timings per variant behind each median and IQR (default 7; 5 with --sweep)")
    p.add_argument("--sweep", action="store_true", help="all variants over --rows × --hiddens at --dim")
    p.add_argument("--backward", action="store_true",
                   help="also time the training step (forward + backward, no optimizer) of eager, compile, liger and "
                        "fused against cuBLAS's nine GEMMs of the step, with each variant's memory; one shape, not --sweep")
    p.add_argument("--rows", type=_int_list, default=list(SWEEP_ROWS), help="sweep rows (batch·seq), comma-separated")
    p.add_argument("--hiddens", type=_int_list, default=list(SWEEP_HIDDENS), help="sweep hidden sizes, comma-separated")
    p.add_argument("--step-variants", type=_step_variant_list, default=list(STEP_VARIANTS),
                   help=f"with --backward: comma-separated, from {','.join(STEP_VARIANTS)} (default: all)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json", help="write the results here (atomically)")
    return p  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def progress(line: str) -> None:
        print(line, flush=True)

    try:
        if args.json:  # before any GPU work: a path that cannot be written fails now, not after the run
            files.check_writable(args.json)
        if args.backward and args.sweep:
            raise GuideError("--backward times the training step at one shape: leave out --sweep, or run the two apart")
        _require_cuda()
        variants = _check_variants(args.variants)
        if args.sweep:
            rows = sweep(args.rows, args.hiddens, args.dim, variants, rounds=args.rounds or 10,
                         progress=progress, repeats=args.repeats or 5)  # fmt: skip
            result = {"gpu": gpu_facts(), "versions": software_versions(), "references": rows[0]["references"],
                      "dim": args.dim, "dtype": "bfloat16", "variants": variants, "sweep": rows}  # fmt: skip
            print()
            print(format_sweep([ShapeResult.from_json(r) for r in rows], variants))
            wrong = sorted({name for r in rows for name in r["wrong"]})
        else:
            run = benchmark(args.batch, args.seq, args.dim, args.hidden, variants, rounds=args.rounds or 20,
                            progress=progress, repeats=args.repeats or REPEATS)  # fmt: skip
            print()
            refs = run.references
            print(f"{run.gpu['name']}, [{args.batch}, {args.seq}, {args.dim}] → {args.hidden}, bf16; "
                  f"references {refs['gemm_tflops']['rate']:.0f} TFLOP/s, {refs['copy_tbps']['rate']:.2f} TB/s")
            print(format_table(run.result))
            for name, config in run.result.fused_configs.items():
                print(f"{name} config: {config}")
            wrong = run.result.wrong
            result = run.to_json()
            if args.backward:
                step = measure_training_step(args.batch, args.seq, args.dim, args.hidden, args.step_variants,
                                             progress=progress, rounds=args.rounds or 10,
                                             repeats=args.repeats or REPEATS)  # fmt: skip
                print()
                print(format_training_step(step))
                wrong = [*wrong, *step["wrong"]]
                result["training_step"] = step
        if args.json:
            nulls = write_json_atomic(args.json, result)
            print(f"wrote {args.json}" + (f" (NaN or infinity written as null at {', '.join(nulls)})" if nulls else ""))
    except GuideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if wrong:
        print(f"error: wrong output from {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
