"""Does running chapter 3's recompilation settings side by side change what they measure?

    python scripts/compare_recompile.py [--runs 2] [--json recompile_modes.json]

Runs the chapter's three ``torch.compile`` settings over its four shapes
(:func:`profiling_guide.measure.shape_sweeps.recompile_in_fresh_processes`), one
after another and side by side, alternating, ``--runs`` times each. Prints
each mode's wall time and, per setting and shape, the first call's wall time
(ms) and the device time per call after it (µs) of every run, so a change
from running side by side shows against the run-to-run spread of the serial
runs. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    from profiling_guide.errors import GuideError
except ImportError:  # run from a checkout without installing it
    sys.path.insert(0, str(ROOT / "src"))
    from profiling_guide.errors import GuideError
from profiling_guide.files import write_json_atomic  # noqa: E402 - after the checkout's src/ is importable

BATCH, SEQ, DIM, HIDDEN = 64, 128, 768, 3072  # chapter 3's defaults
SHAPES = [(BATCH, s, DIM) for s in (SEQ, 2 * SEQ, 4 * SEQ, SEQ + 72)]  # its SEQS


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each mode, alternating (default 2)")
    parser.add_argument("--json", type=Path, help="write every run's rows here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    import torch

    from profiling_guide.measure.shape_sweeps import SETTINGS, recompile_in_fresh_processes

    if not torch.cuda.is_available():
        raise SystemExit("error: this comparison runs on a CUDA GPU and none is visible")
    runs = []
    for i in range(args.runs):
        for side_by_side in (False, True):
            mode = "side by side" if side_by_side else "serial"
            start = time.perf_counter()
            try:
                rows = recompile_in_fresh_processes(list(SETTINGS), SHAPES, HIDDEN, side_by_side=side_by_side)
            except GuideError as exc:
                raise SystemExit(f"error: {exc}") from None
            wall = time.perf_counter() - start
            print(f"run {i + 1}, {mode}: {wall:.1f} s", file=sys.stderr, flush=True)
            runs.append({"mode": mode, "wall_s": wall, "rows": rows})
    print(f"{'setting':<14}{'shape':<12}" + "".join(f"{r['mode'][:6]:>22}" for r in runs))
    for setting in SETTINGS:
        for k, shape in enumerate(SHAPES):
            cells = [f"{r['rows'][setting][k]['first_call_ms']:9.1f} ms {r['rows'][setting][k]['device_us']:7.1f} µs"
                     for r in runs]
            print(f"{setting:<14}{'×'.join(map(str, shape)):<12}" + "".join(f"{c:>22}" for c in cells))
    print("wall s: " + ", ".join(f"{r['mode']} {r['wall_s']:.1f}" for r in runs))
    if args.json:
        write_json_atomic(args.json, {"shapes": SHAPES, "hidden": HIDDEN, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
