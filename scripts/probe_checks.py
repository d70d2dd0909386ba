"""What the GPU probes share: a config checked against float64 and twice for the same bits, and the command line."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

import torch
import triton

from profiling_guide.errors import GuideError
from profiling_guide.files import check_writable, write_json_atomic
from profiling_guide.sizes import positive_int_for

METHOD = "median_rotating_us (queue full, 10 rotating inputs, 20 rounds), {repeats} interleaved repeats: median and IQR"


def checked(label: str, run: Callable[[], torch.Tensor], error_of: Callable[[torch.Tensor], float],
            baseline_error: float) -> bool:  # fmt: skip
    """``run()`` once, its error against the float64 reference, and again for the same bits; one line printed.

    Good where the error is at most twice ``baseline_error`` (the Triton
    ``packed-tma`` design's on the same inputs) or 1e-2, and the second call
    gives the same bits.
    """
    t0 = time.perf_counter()
    out = run()
    torch.cuda.synchronize()
    err = error_of(out)
    same = torch.equal(out, run())
    good = err <= max(2 * baseline_error, 1e-2) and same
    print(f"{label}: {err:.1e} (packed-tma {baseline_error:.1e}), same twice {same}, "
          f"{time.perf_counter() - t0:.1f} s {'ok' if good else 'WRONG'}", flush=True)  # fmt: skip
    return good


GUIDE_SHAPE = (8192, 768, 3072)  # rows, dim, hidden: the post's MLP at batch 64 × seq 128


def guide_weights(dtype=torch.bfloat16):
    """The MLP's gate, up and down weights at the guide's shape (seed 0), and the packed gate/up weight."""
    from profiling_guide.kernels.fused_mlp import pack_gate_up

    torch.manual_seed(0)
    _, dim, hidden = GUIDE_SHAPE
    wg = torch.randn(hidden, dim, device="cuda", dtype=dtype) / dim**0.5
    wu = torch.randn(hidden, dim, device="cuda", dtype=dtype) / dim**0.5
    wd = torch.randn(dim, hidden, device="cuda", dtype=dtype) / hidden**0.5
    return wg, wu, wd, pack_gate_up(wg, wu)


def probe_main(doc: str, check: Callable[[torch.dtype], bool], timings: Callable[..., dict],
               flags: dict[str, str] | None = None) -> int:  # fmt: skip
    """The probes' command line: ``check`` in bf16 and fp16 on a Hopper GPU, then ``timings(repeats, sweep)``.

    ``flags`` (name → help) are a probe's own on/off options: each is passed
    to ``timings`` as a keyword argument.

    ``--out`` gets the timings' dict with the GPU, the guide's shape, the
    software versions, the method and the date beside it, written whole or
    not at all.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--check-only", action="store_true", help="check the numbers, time nothing")
    parser.add_argument("--sweep", action="store_true", help="time a sweep of tile configs, not only the default")
    parser.add_argument("--repeats", type=positive_int_for("--repeats"), default=7,
                        help="interleaved timing repeats behind each median and IQR (default 7)")
    for name, text in (flags or {}).items():
        parser.add_argument(f"--{name}", action="store_true", help=text)
    args = parser.parse_args()
    try:
        if args.out:  # before any GPU work: a path that cannot be written fails now, not after the run
            check_writable(args.out)
    except GuideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("error: this probe runs Gluon kernels for Hopper: it needs a GPU of compute capability 9.x",
              file=sys.stderr)  # fmt: skip
        return 2
    torch.manual_seed(0)
    ok = check(torch.bfloat16) & check(torch.float16)
    print("CHECK passed" if ok else "CHECK FAILED", flush=True)
    if args.check_only or not ok:
        return 0 if ok else 1
    rows, dim, hidden = GUIDE_SHAPE
    result = {"gpu": torch.cuda.get_device_name(), "shape": {"rows": rows, "dim": dim, "hidden": hidden},
              "versions": {"torch": torch.__version__, "triton": triton.__version__},
              "method": METHOD.format(repeats=args.repeats), "date": time.strftime("%Y-%m-%d"),
              **timings(args.repeats, args.sweep, **{name: getattr(args, name) for name in flags or {}})}  # fmt: skip
    if args.out:
        write_json_atomic(args.out, result)
    return 0
