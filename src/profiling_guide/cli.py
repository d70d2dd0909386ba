"""``profiling-guide``: read traces and kernel names from the command line.

Commands
--------
``profiling-guide summarize TRACE [TRACE ...] [--json]``
    Per profiler step on average: the device work (name, decoded kind, calls
    per step, mean µs), the runtime calls, and the CPU ops that launched nothing;
    for each trace of a folder or a glob, as ``report`` finds them.
``profiling-guide decode NAME [--json]``
    The fields a kernel name encodes (kind, library, arch, tile, layout...).
``profiling-guide bench-mlp [...]``
    Time every MLP variant against cuBLAS's bare GEMMs and the datasheet bound on this GPU
    (see ``profiling-guide bench-mlp --help``).
``profiling-guide bench-load [--events N] [--runs R]``
    Time loading a synthetic trace of N events against ``json.load``, and
    compare their peak memory.
``profiling-guide report TRACE [TRACE ...] [-o REPORT.html] [--step N] [--rates RUN.json] [--json OUT.json]``
    One self-contained HTML page on any torch.profiler trace: the verdict (what
    makes the step slow, where, and what fixing it would save; also printed on
    the terminal, and with ``--json`` written as JSON), who sets the pace, the
    environment, steps, an interactive timeline, top kernels and
    CPU ops, memsets and memcpys, health findings. Given the traces of every
    rank of a distributed run (files, a folder or a glob), one page for the
    run: who keeps the others waiting and what it was doing, each rank's
    compute, communication, overlap and idle time per step, the collectives'
    bus bandwidth (``--nccl-sweep SWEEP.json`` compares it with a measured
    sweep), one step of every rank on one timeline; ``--merge OUT.json``
    also writes one Chrome trace of all ranks for Perfetto.
``profiling-guide bench-nccl -o SWEEP.json [...]`` (under ``torchrun``)
    Measure the bus bandwidth of all-reduce, all-gather and reduce-scatter
    from 1 MiB to 1 GiB on this machine's GPUs, the sweep the run report
    compares its collectives with.
``profiling-guide profile MODULE:CALLABLE -o DIR [--steps N] [--compile] [--no-with-stack]``
    Profile your own step on this GPU and write its trace, run record and
    report, and what inductor recorded its compiled kernels fuse (see
    :mod:`profiling_guide.report.profile_own` for the contract).

Errors a user can fix print one line, ``error: ...``, and exit with status 2;
a command that fails leaves no file or folder it made behind. A JSON file in a
folder of traces that is not a trace (a run's ``cases.json``) is left out, with
a ``note: ...`` line on stderr. Names from a trace are printed with control
characters escaped, so a kernel name cannot move the cursor or recolour the
terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from profiling_guide import files
from profiling_guide.errors import GuideError
from profiling_guide.trace.kernel_names import FIELDS, decode
from profiling_guide.trace.model import Trace
from profiling_guide.trace.run import trace_files

# Each subcommand imports the heavy modules only it needs (pandas, matplotlib, torch) when it runs:
# `decode` or `--help` never loads them.

# C0 and C1 control characters (ESC starts terminal escape sequences), the
# invisible format characters that reorder or hide text (bidi overrides, zero
# widths), and lone surrogates (a file name's undecodable bytes; no encoding can print them).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def printable(text) -> str:
    """``text`` with control and invisible format characters written as escapes (``\\x1b``)."""
    return _UNPRINTABLE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), str(text))


def summarize(trace) -> dict:
    """The ``summarize`` report of a :class:`~profiling_guide.trace.model.Trace` as plain data.

    ``kernels`` lists every kind of device work (memsets and copies included,
    with their decoded kind); ``kernels_per_step`` counts true kernels only.
    """
    from profiling_guide.pages.tables import kernel_table

    table = kernel_table(trace)
    return {
        "steps": len(trace.steps),
        "kernels_per_step": trace.kernels_per_step(),
        "kernels": [
            {"name": row.name, "kind": row.kind, "calls_per_step": row.calls_per_step,
             "avg_us": round(row.avg_us, 3)}
            for row in table.itertuples()
        ],
        "runtime_calls_per_step": trace.runtime_calls_per_step(),
        "no_kernel_ops": trace.no_device_ops,
    }


def _print_summary(report: dict, source: str) -> None:
    print(f"{printable(source)}: {report['steps']} profiler steps, {report['kernels_per_step']:g} kernels per step\n")
    print("device work per step")
    print(f"  {'calls':>5}  {'mean µs':>9}  {'kind':<10}  name")
    for k in report["kernels"]:
        print(f"  {k['calls_per_step']:>5g}  {k['avg_us']:>9.2f}  {k['kind']:<10}  {printable(k['name'])}")
    print("\nruntime calls per step")
    for name, n in report["runtime_calls_per_step"].items():
        print(f"  {n:>5g}  {printable(name)}")
    print("\nCPU ops that launched no device work")
    print("  " + (", ".join(map(printable, report["no_kernel_ops"])) or "none"))


def _say_skipped(skipped: list) -> None:
    for path, why in skipped:
        print(f"note: left out {printable(path)}: it is {printable(why)}", file=sys.stderr)


def _cmd_summarize(args) -> int:
    skipped: list = []
    paths = trace_files(args.trace, skipped)
    _say_skipped(skipped)
    # one file named: its summary, as it always was; a folder, a glob or several files: one per trace
    one = len(args.trace) == 1 and len(paths) == 1 and os.path.isfile(args.trace[0])
    reports = []
    for path in paths:
        trace = Trace.load(path)
        if not trace.steps:
            raise GuideError(f"{path} has no ProfilerStep events: record it with a torch.profiler schedule")
        report = summarize(trace)
        del trace
        if args.json:
            reports.append(report if one else {"source": str(path), **report})
        else:
            if path != paths[0]:
                print()
            _print_summary(report, str(path))
    if args.json:
        # JSON has no NaN: a mean that is not a number is null
        print(json.dumps(files.finite_or_null(reports[0] if one else reports), indent=1, allow_nan=False))
    return 0


def _cmd_decode(args) -> int:
    name = " ".join(args.name).strip()
    if not name:
        raise GuideError("decode needs a kernel name, e.g. profiling-guide decode 'triton_poi_fused_gelu_mul_0'")
    k = decode(name)
    if args.json:
        print(json.dumps(k.to_dict(), indent=1))
    else:
        print(printable(k.name))
        for field in FIELDS:
            value = getattr(k, field)
            if value not in (None, (), ""):
                print(f"  {field:<10} {printable(', '.join(value) if isinstance(value, tuple) else value)}")
    return 0


def _cmd_bench(args, rest) -> int:
    from profiling_guide.measure import bench_cli

    return bench_cli.main(rest) or 0


def _cmd_bench_load(args, rest) -> int:
    from profiling_guide.measure import bench_load

    return bench_load.main(rest) or 0


def _refuse_empty(args) -> None:
    for flag, value in (("-o", args.output), ("--merge", args.merge), ("--json", args.json),
                        ("--rates", args.rates), ("--nccl-sweep", args.nccl_sweep)):
        if value is not None and not value.strip():
            raise GuideError(f"{flag} names no file (an empty path): give the path of a file, or leave {flag} out")


def _refuse_shared(outputs: dict[str, str | os.PathLike | None]) -> None:
    """One-line GuideError if two outputs name one file (through links or spellings alike)."""
    seen: dict[str, str] = {}
    for flag, path in outputs.items():
        if path is None or str(path) == "-":
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise GuideError(f"{seen[key]} and {flag} both name {path}: one would replace the other; give each "
                             "its own file")
        seen[key] = flag


def _cmd_report(args) -> int:
    _refuse_empty(args)
    outputs = {"-o": args.output, "--merge": args.merge, "--json": args.json}
    _refuse_shared(outputs)
    # Whatever fails from here on, the files and folders made for the outputs go again.
    with files.undone_on_failure(outputs.values()):
        for out in outputs.values():  # before any work, and before the traces are looked for
            if out is not None and out != "-":
                files.check_writable(out)
        skipped: list = []
        paths = trace_files(args.trace, skipped)
        _say_skipped(skipped)
        page = args.output
        if page is None:  # the page's default name may be the one --merge or --json gives
            from profiling_guide.report.html import default_report_path
            from profiling_guide.report.run_html import default_run_report_path

            page = default_report_path(paths[0]) if len(paths) == 1 else default_run_report_path(paths)
            _refuse_shared({"the report page": page, "--merge": args.merge, "--json": args.json})
        with files.undone_on_failure([page]):
            return _write_report(args, paths, page)


def _write_report(args, paths: list, page) -> int:
    # with the JSON on standard output, everything else goes to stderr
    say = (lambda text: print(printable(text), file=sys.stderr)) if args.json == "-" else (
        lambda text: print(printable(text)))
    if len(paths) == 1:
        if args.merge or args.nccl_sweep:
            option = "--merge" if args.merge else "--nccl-sweep"
            raise GuideError(f"{option} reads the traces of two or more ranks; {paths[0]} is one trace")
        from profiling_guide.report.html import write_report

        say(write_report(paths[0], page, step=args.step, rates=args.rates, json_out=args.json,
                         on_verdict=lambda text: say("verdict: " + text)))
        if args.json not in (None, "-"):
            say(args.json)
        return 0
    if args.rates:
        raise GuideError("--rates applies to one trace's report; a run's report compares collectives with "
                         "--nccl-sweep instead")
    from profiling_guide.report.run_html import write_run_report

    out = write_run_report(paths, page, step=args.step, sweep=args.nccl_sweep, merge=args.merge,
                           json_out=args.json, on_verdict=lambda text: say("verdict: " + text))
    say(out)
    for extra in (args.merge, args.json if args.json != "-" else None):
        if extra:
            say(extra)
    return 0


def _cmd_diff(args) -> int:
    from profiling_guide.report.diff_html import write_diff

    if args.output is None and args.json is None:
        raise GuideError("diff writes a page (-o OUT.html), JSON (--json OUT.json, '-' for standard output), or both:"
                         " give at least one")
    say = (lambda text: print(printable(text), file=sys.stderr)) if args.json == "-" else (
        lambda text: print(printable(text)))
    out = write_diff([args.a], [args.b], args.output, json_out=args.json, on_verdict=lambda t: say("verdict: " + t))
    for written in (out, args.json if args.json != "-" else None):
        if written:
            say(written)
    return 0


def _cmd_bench_nccl(args, rest) -> int:
    from profiling_guide.measure import bench_nccl

    return bench_nccl.main(rest) or 0


def _cmd_profile(args) -> int:
    from profiling_guide.report.profile_own import profile_callable

    result = profile_callable(args.target, args.output, steps=args.steps, compile=args.compile, name=args.name,
                              rates=not args.no_rates, with_stack=args.with_stack)
    written = (result.trace, result.run_record, result.report, result.kernel_information)
    print("\n".join(printable(p) for p in written if p is not None))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="profiling-guide", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summarize", help="what a trace ran, per profiler step")
    p.add_argument("trace", nargs="+", help="a torch.profiler Chrome trace (.json or .json.gz); or several: files, "
                   "a folder of them, or a glob (quoted)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text (for several traces, a list)")
    p.set_defaults(func=_cmd_summarize)
    p = sub.add_parser("decode", help="the fields a kernel name encodes")
    p.add_argument("name", nargs="+", help="the kernel name (quote it)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_decode)
    p = sub.add_parser("bench-mlp", add_help=False,
                       help="time the MLP variants against cuBLAS's bare GEMMs and the datasheet bound (GPU)")
    p.set_defaults(func=_cmd_bench)
    p = sub.add_parser("bench-load", help="time loading a large synthetic trace against json.load", add_help=False)
    p.set_defaults(func=_cmd_bench_load)
    p = sub.add_parser("report", help="an HTML report of any torch.profiler trace, or of every rank of a run")
    p.add_argument("trace", nargs="+", help="a torch.profiler Chrome trace (.json or .json.gz); or the traces of "
                   "every rank of a distributed run: files, a folder of them, or a glob (quoted)")
    p.add_argument("-o", "--output", help="the HTML file to write (default: <name>.report.html here; for a run, "
                   "<folder>.report.html)")
    p.add_argument("--step", type=int, help="the ProfilerStep number the timeline shows (default: the median step)")
    p.add_argument("--rates", help="JSON with reference rates measured on the same GPU (a profile run record)")
    p.add_argument("--nccl-sweep", metavar="SWEEP.json", help="a run: bus bandwidth measured on the same machine "
                   "(profiling-guide bench-nccl) to compare the collectives with")
    p.add_argument("--merge", metavar="OUT.json", help="a run: also write one Chrome trace of every rank (a process "
                   "per rank) for Perfetto; .json.gz to gzip it")
    p.add_argument("--json", metavar="OUT.json", help="also write the verdict, its what-ifs and (for a run) each "
                   "rank's verdict as JSON, schema profiling-guide.report/1; '-' for standard output")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("diff", help="what changed between two traces of one program, beyond the noise")
    p.add_argument("a", metavar="A", help="the trace before (.json or .json.gz), or a folder of traces of it: "
                   "repeats, or the ranks of one run, each profiled step a sample")
    p.add_argument("b", metavar="B", help="the trace after, or a folder of them")
    p.add_argument("-o", "--output", metavar="OUT.html", help="the page to write")
    p.add_argument("--json", metavar="OUT.json", help="the diff as JSON, schema profiling-guide.diff/1; '-' for "
                   "standard output")
    p.set_defaults(func=_cmd_diff)
    p = sub.add_parser("bench-nccl", add_help=False,
                       help="measure all-reduce, all-gather and reduce-scatter bus bandwidth (under torchrun)")
    p.set_defaults(func=_cmd_bench_nccl)
    p = sub.add_parser("profile", help="profile your own step on this GPU: trace, run record, report")
    p.add_argument("target", metavar="MODULE:CALLABLE", help="a step, or a factory returning one (no arguments)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the trace, record and report")
    p.add_argument("--steps", type=int, default=3, help="profiled steps, after one skipped and one warm-up (3)")
    p.add_argument("--compile", action="store_true",
                   help="run the whole step through torch.compile (to attribute its kernels to modules, compile "
                        "the model inside the step factory instead: model = torch.compile(model))")
    p.add_argument("--name", help="file name stem (default: the callable's name)")
    p.add_argument("--no-rates", action="store_true", help="skip measuring the reference GEMM rate and copy bandwidth")
    p.add_argument("--with-stack", action=argparse.BooleanOptionalAction, default=True,
                   help="record Python frames and nn.Module calls (with_stack, with_modules) for the report's "
                        "attribution to modules and source lines; costs CPU time, not device time (default: on)")
    p.set_defaults(func=_cmd_profile)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command in ("bench-mlp", "bench-load", "bench-nccl"):
            return args.func(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        status = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return status
    except GuideError as exc:
        print(f"error: {printable(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly. Point stdout at
        # /dev/null so the interpreter's final flush does not complain again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
