"""Stamp the closure fingerprint into committed run records where git history proves it holds.

A run record made before the closure fingerprint existed stores only the
fingerprint of the code its page lists (``fingerprint``), and is checked that
way alone: an edit to a kernel it runs goes unnoticed. Re-recording it on a
GPU writes both. Without a GPU, this script adds ``closure_fingerprint`` to a
record only where the repository's history proves that the closure it hashes
now is the code that made the recording:

1. every page (``examples/**/plot_*.py``) replays in this process, once per
   GPU, and each recording it checks is noted with the closure of the code
   and arguments the page gives it (every check of one recording must give
   the same closure fingerprint);
2. the record must be fresh by its listed fingerprint and committed as it is;
3. the commit that made the recording: the last commit that changed the
   record (``git log -1 -- <run.json>``), or an earlier one where the record
   already held the same measurement (the same ``date``; a later commit that
   only re-keyed it measured nothing), following renames;
4. every file the closure was read from must be the same at that commit as
   in the working tree: the files of its definitions, of the modules whose
   imports led to them, of the listed objects (the page itself, whose
   globals named what was followed) and of this package's modules the page
   imports. "The same" is the closure's own sameness: the file's syntax tree
   without docstrings (:func:`profiling_guide.pages.closure.normalized`), so a
   comment or docstring edited since does not count, and any other change
   does, as does a file that did not exist then. With ``--any-change``, a file
   counts as changed if any commit after the recording touched it at all
   (``git log <commit>..HEAD -- <files>``), or the working tree did.

It prints what it stamped and what it could not, with why; those stay on the
listed-code check until they are re-recorded on a GPU
(``PROFILING_GUIDE_MODE=live python examples/plot_<example>.py``). A record
that already holds a closure fingerprint is never changed.

    python scripts/stamp_closure_fingerprints.py            # stamp
    python scripts/stamp_closure_fingerprints.py --dry-run  # say what it would stamp
    python scripts/stamp_closure_fingerprints.py --example 06_fused --example 06b_training_step
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "docs" / "recordings"
EXAMPLES = ROOT / "examples"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


@dataclass
class Seen:
    """A recording as the pages checked it."""

    example: str
    closure: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    files: set[Path] = field(default_factory=set)  # the files the proof covers (see the docstring, step 4)
    definitions: set[str] = field(default_factory=set)


def replay_pages(examples: list[Path], gpus: list[str]) -> tuple[dict[Path, Seen], list[str]]:
    """Replay every page of ``examples`` for each GPU folder; the recordings each checked, and the pages that failed."""
    from profiling_guide.pages.chapter import Chapter

    seen: dict[Path, Seen] = {}
    failed: list[str] = []
    replay = Chapter._replay

    def noting(self, full, fp, *, needs_trace):
        rec = replay(self, full, fp, needs_trace=needs_trace)
        entry = seen.setdefault(rec.run_path.resolve(), Seen(self.example))
        entry.closure.add(fp.closure)  # now, while the page's objects are as it listed them
        entry.listed.add(fp.listed)
        reached = fp.reached
        entry.files |= reached.read | imported_for(fp.code)
        entry.definitions |= set(reached.definitions())
        return rec

    Chapter._replay = noting
    try:
        for gpu in gpus:
            for example in examples:
                print(f"replaying {example.relative_to(ROOT)} on {gpu}", file=sys.stderr, flush=True)
                if not run_page(example, gpu):
                    failed.append(f"{example.relative_to(ROOT)} ({gpu})")
    finally:
        Chapter._replay = replay
    return seen, failed


def run_page(example: Path, gpu: str) -> bool:
    """Run one page in replay in this process, its output discarded; whether it ran to the end."""
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    os.environ.update({"PROFILING_GUIDE_MODE": "replay", "PROFILING_GUIDE_STALE": "warn", "PROFILING_GUIDE_GPU": gpu,
                       "MPLBACKEND": "Agg"})
    sys.argv = [str(example)]
    out = io.StringIO()
    saved_streams = sys.__stdout__, sys.__stderr__
    ok = True
    try:
        os.chdir(example.parent)
        sys.__stdout__ = sys.__stderr__ = out  # what a page sends "to the console" too
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runpy.run_path(str(example), run_name="__main__")
    except SystemExit as stop:
        ok = stop.code in (None, 0)
    except Exception as exc:  # noqa: BLE001 (the page's failure is reported, the others still run)
        ok = False
        out.write(f"{type(exc).__name__}: {exc}\n")
    finally:
        sys.__stdout__, sys.__stderr__ = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    if not ok:
        print(f"  failed: {out.getvalue().strip().splitlines()[-1:]}", file=sys.stderr)
    return ok


def recording_commit(path: Path, record: dict) -> tuple[str | None, str]:
    """The commit that made the recording at ``path`` (see the docstring, step 3), or None and why not."""
    rel = path.relative_to(ROOT).as_posix()
    if git("status", "--porcelain", "--", rel).strip():
        return None, "the run record has uncommitted changes"
    date = record.get("date")
    if not date:
        return None, "the run record has no date to tell its measurement by"
    log = git("log", "--follow", "--format=%x00%H", "--name-only", "--", rel)
    made = None
    for chunk in log.split("\0")[1:]:
        commit, *names = chunk.split()
        try:
            then = json.loads(git("show", f"{commit}:{names[0]}"))
        except (subprocess.CalledProcessError, ValueError, IndexError):
            break  # deleted in that commit, or not JSON then
        if then.get("date") != date:
            break
        made = commit
    if made is None:
        return None, "no commit holds this measurement"
    return made, ""


def imported_for(code) -> set[Path]:
    """The files of this package's modules a page's listed functions reach their globals through.

    A page's step names this package's objects through the page's imports (``from
    profiling_guide.kernels.fused_mlp import FusedGeGLUMLP``), directly or through a page-level
    assignment: the module an import reads a name from may re-export it from elsewhere, so its file
    is part of what must not have changed.
    """
    from profiling_guide.pages import closure

    found: set[Path] = set()
    for obj in code:
        target = closure.unwrapped(obj)
        file = getattr(getattr(target, "__code__", None), "co_filename", None)
        if file is None or not Path(file).resolve().is_relative_to(EXAMPLES):
            continue
        path = Path(file).resolve()
        page = closure._parsed("__page__", path, path.read_text(encoding="utf-8"))
        todo = [n for c in closure._code_objects(target.__code__) for n in c.co_names]
        done: set[str] = set()
        while todo:
            name = todo.pop()
            if name in done:
                continue
            done.add(name)
            if name in page.imports:
                module, attribute = page.imports[name]
                parts = module.split(".") + ([attribute] if attribute else [])
                for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b too
                    if (module_file := closure.module_path(".".join(parts[:i]))) is not None:
                        found.add(module_file)
            value = target.__globals__.get(name)
            if not (isinstance(value, types.ModuleType) or closure._Walk().key_of(value)):
                continue  # not something of this package the closure followed (an instance, a torch function)
            for stmt in page.bindings.get(name, []):
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    todo += [chain[0] for chain in closure._scan(stmt)[0]]  # an alias: step_fn = module.f
    return found


def same_code(rel: str, commit: str, any_change: bool) -> bool:
    """Whether the file ``rel`` is the same code at ``commit`` as in the working tree (see the docstring, step 4)."""
    from profiling_guide.pages.closure import normalized

    if any_change:
        return not git("log", "--format=%h", f"{commit}..HEAD", "--", rel).split() and \
            not git("status", "--porcelain", "--", rel).strip()
    try:
        then = git("show", f"{commit}:{rel}")
    except subprocess.CalledProcessError:
        return False  # not there then
    now = (ROOT / rel).read_text(encoding="utf-8")
    if then == now:
        return True
    try:
        return normalized(ast.parse(then)) == normalized(ast.parse(now))
    except SyntaxError:
        return False


def proof(path: Path, record: dict, seen: Seen, any_change: bool) -> tuple[bool, str]:
    """Whether git history proves ``seen``'s closure unchanged since the recording at ``path`` was made, and why."""
    commit, why = recording_commit(path, record)
    if commit is None:
        return False, why
    files = seen.files
    outside = sorted(str(f) for f in files if not f.is_relative_to(ROOT))
    if outside:
        return False, f"its closure is read from files outside this checkout ({outside[0]}): install it editable"
    rels = sorted(f.relative_to(ROOT).as_posix() for f in files)
    changed = [rel for rel in rels if not same_code(rel, commit, any_change)]
    if changed:
        return False, f"recorded in {commit[:10]}; changed since: {', '.join(changed)}"
    return True, (f"recorded in {commit[:10]}; its {len(seen.definitions)} definition(s) of profiling_guide and "
                  f"the {len(rels)} file(s) they were read from are unchanged since")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would be stamped, write nothing")
    parser.add_argument("--any-change", action="store_true",
                        help="a file any later commit touched counts as changed, even in comments only")
    parser.add_argument("--example", action="append", default=[],
                        help="only this example's recordings (e.g. 06_fused); repeatable")
    args = parser.parse_args(argv)

    if os.environ.get("PROFILING_GUIDE_RECORDINGS"):
        print("error: unset PROFILING_GUIDE_RECORDINGS: this script stamps the committed docs/recordings",
              file=sys.stderr)
        return 2
    os.environ.setdefault("TRITON_INTERPRET", "1")  # as the tests replay on a CPU
    sys.path.insert(0, str(ROOT / "src"))
    from profiling_guide.pages import closure, recordings

    if not closure.PACKAGE_ROOT.is_relative_to(ROOT):
        print(f"error: profiling_guide is imported from {closure.PACKAGE_ROOT}, not from this checkout: "
              "install it editable (pip install -e .)", file=sys.stderr)
        return 2
    pages = sorted(EXAMPLES.rglob("plot_*.py"))
    if args.example:
        pages = [p for p in pages if p.stem.removeprefix("plot_") in args.example]
    gpus = sorted(p.name for p in RECORDINGS.iterdir() if p.is_dir() and not p.name.rpartition("-x")[2].isdigit())
    seen, failed = replay_pages(pages, gpus)

    records = sorted(RECORDINGS.glob("*/*.run.json"))
    if args.example:
        records = [r for r in records if r.name.split(".")[0] in args.example]
    stamped, kept, already = [], [], []
    for path in records:
        name = f"{path.parent.name}/{path.name.removesuffix('.run.json')}"
        record = json.loads(path.read_text())
        entry = seen.get(path.resolve())
        if "closure_fingerprint" in record:
            fresh = entry is not None and entry.closure == {record["closure_fingerprint"]}
            already.append(f"{name}: {'fresh' if fresh else 'STALE by its closure'}")
            continue
        if entry is None:
            kept.append(f"{name}: no page checks it")
            continue
        if len(entry.closure) != 1 or len(entry.listed) != 1:
            kept.append(f"{name}: its pages check it with different code")
            continue
        if record.get("fingerprint") != next(iter(entry.listed)):
            kept.append(f"{name}: stale by its listed code already")
            continue
        ok, why = proof(path, record, entry, args.any_change)
        if not ok:
            kept.append(f"{name}: {why}")
            continue
        if not args.dry_run:
            record["closure_fingerprint"] = next(iter(entry.closure))
            recordings.write_json_atomic(path, record)
        stamped.append(f"{name}: {why}")

    verb = "would stamp" if args.dry_run else "stamped"
    print(f"{verb} {len(stamped)} run record(s):")
    print("".join(f"  {line}\n" for line in stamped), end="")
    print(f"not stamped {len(kept)} (checked by their listed code only: re-record them on a GPU with "
          "PROFILING_GUIDE_MODE=live python examples/plot_<example>.py):")
    print("".join(f"  {line}\n" for line in kept), end="")
    if already:
        print(f"already holding a closure fingerprint, left as they are: {len(already)}")
        print("".join(f"  {line}\n" for line in already), end="")
    if failed:
        print(f"pages that failed to replay ({len(failed)}): " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
