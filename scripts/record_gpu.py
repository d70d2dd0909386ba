"""Re-record the gallery's examples on this GPU, in one process, the way ``nox -s docs`` runs them live.

    python scripts/record_gpu.py                   # every example
    python scripts/record_gpu.py 01_linear 06_fused

Each example runs live (``--mode live``) in this one Python process, as
sphinx-gallery runs them: the reference rates are measured once, and every
page quotes the same CPU cost for the same forward. What an example prints is
captured as sphinx-gallery would put it on its page (stdout and stderr alike)
and written to ``<out>/<example>.page.txt``; the run fails if that text holds
a log line, a warning or a traceback (progress and compiler logs must go to
the console). The recordings land in ``docs/recordings/<gpu>/``, and each
example's live seconds in its ``build_times.json`` (what "About this build"
shows; the examples run here replace their own entries, the others stay).
Use it where the docs build's own dependencies cannot be installed; otherwise
``PROFILING_GUIDE_MODE=live nox -s docs`` does the same and builds the site.
"""

from __future__ import annotations

import argparse
import io
import runpy
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Lessons first, then the deep dives (gallery subfolders), which read what their lesson recorded.
EXAMPLES = sorted((ROOT / "examples").rglob("plot_*.py"), key=lambda p: (len(p.relative_to(ROOT).parts), p.name))
try:  # what a page must never show: one pattern, which the browser tests check the built site for too
    from profiling_guide.pages.page_logs import LOG_MARKERS
except ImportError:  # run from a checkout without installing it
    sys.path.insert(0, str(ROOT / "src"))
    from profiling_guide.pages.page_logs import LOG_MARKERS
from profiling_guide.files import write_text_atomic  # noqa: E402 - after the checkout's src/ is importable


def run_one(path: Path, out: Path) -> str | None:
    """Run one example live with its output captured as its page would show it; a problem, or None."""
    import matplotlib.pyplot as plt
    import torch

    page = io.StringIO()
    saved = sys.argv, sys.stdout, sys.stderr
    sys.argv = [str(path), "--mode", "live"]
    sys.stdout = sys.stderr = page  # sphinx-gallery sends both streams to the page
    problem = None
    try:
        runpy.run_path(str(path), run_name="__main__")
    except BaseException as exc:  # noqa: BLE001 - report and go on with the next example
        problem = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.__stderr__)
    finally:
        sys.argv, sys.stdout, sys.stderr = saved
        plt.close("all")
        torch._dynamo.reset()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    text = page.getvalue()
    write_text_atomic(out / f"{path.stem.removeprefix('plot_')}.page.txt", text)
    leaked = LOG_MARKERS.search(text)
    if problem is None and leaked:
        problem = f"its page would show a log line: {leaked.group(0)!r}"
    return problem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", nargs="*", help="e.g. 01_linear (default: every example)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs", help="where the page texts go (default runs/)")
    args = parser.parse_args(argv)
    chosen = [p for p in EXAMPLES if not args.examples or p.stem.removeprefix("plot_") in args.examples]
    unknown = set(args.examples) - {p.stem.removeprefix("plot_") for p in EXAMPLES}
    if unknown:
        print(f"error: no example {sorted(unknown)[0]!r}: choose from "
              f"{', '.join(p.stem.removeprefix('plot_') for p in EXAMPLES)}", file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import torch

    if not torch.cuda.is_available():
        print("error: recording needs a CUDA GPU and none is visible", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed, seconds = 0, {}
    for path in chosen:
        start = time.perf_counter()
        problem = run_one(path, args.out)
        failed += problem is not None
        if problem is None:
            seconds[path.name] = time.perf_counter() - start
        print(f"{path.stem}: {'ok' if problem is None else problem} ({time.perf_counter() - start:.0f} s)", flush=True)
    if seconds:
        keep_build_times(seconds)
    return 1 if failed else 0


def keep_build_times(seconds: dict[str, float]) -> None:
    """Merge this run's seconds per example into ``docs/recordings/<gpu>/build_times.json``, in gallery order."""
    import datetime
    import json

    import torch

    from profiling_guide.files import write_json_atomic
    from profiling_guide.pages.recordings import gpu_slug

    slug = gpu_slug(torch.cuda.get_device_name(0))
    path = ROOT / "docs" / "recordings" / slug / "build_times.json"
    old = json.loads(path.read_text()).get("examples", {}) if path.is_file() else {}
    merged = {**old, **{name: {"seconds": round(s, 1)} for name, s in seconds.items()}}
    order = [p.name for p in EXAMPLES]
    examples = {name: merged[name] for name in sorted(merged, key=lambda n: order.index(n) if n in order else len(order))}
    write_json_atomic(path, {"gpu": slug, "date": datetime.date.today().isoformat(),
                             "total_seconds": round(sum(e["seconds"] for e in examples.values()), 1),
                             "examples": examples}, sort_keys=False)


if __name__ == "__main__":
    sys.exit(main())
