"""What inductor recorded each kernel of a compiled program computes: its provenance, where it was kept.

With ``torch._inductor.config.trace.provenance_tracking_level = 1``, inductor
keeps, for each kernel it generated or called (``triton_poi_fused_gelu_mul_0:7``,
the kernel's name and its call's number), the source lines of the program it
came from (``stack_traces``) and the graph nodes it computes
(``post_grad_nodes``, ``pre_grad_nodes``):
``torch._inductor.debug.create_kernel_information_json()`` returns them, and an
AOTInductor build writes them as ``kernel_information.json``
(``scripts/record_attribution.py`` keeps them for its compiled traces). The
trace itself does not hold them. Keep the JSON as
``<trace name>.kernel_information.json`` beside the trace (``compiled.trace.json.gz``
→ ``compiled.kernel_information.json``) and :func:`provenance_beside` reads
it; the diff then matches a compiled kernel to the eager ops of the same
lines of the program.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from profiling_guide.errors import GuideError
from profiling_guide.trace.run_record import read_json_file

FILE_SUFFIX = ".kernel_information.json"
#: A program of thousands of kernels writes a few MiB; more is not this file.
MAX_BYTES = 256 * 2**20
#: One frame of a stack trace as inductor records it.
FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


@dataclass(frozen=True)
class Line:
    """A line of the program: its file's name, its number and the function it is in."""

    file: str
    line: int
    function: str


@dataclass(frozen=True)
class KernelProvenance:
    """What inductor recorded of one kernel (every call of it together)."""

    lines: frozenset[Line]  # the innermost frame of each of its stack traces
    nodes: frozenset[str]  # the post-grad and pre-grad graph nodes it computes


def parse(data, source: str = "kernel information") -> dict[str, KernelProvenance]:
    """``{kernel name: KernelProvenance}`` from the JSON inductor writes; a malformed file is one GuideError.

    The file holds one graph's kernels (an object), or a list of such objects, one per compiled graph
    (``profiling-guide profile`` keeps each graph's as it compiles): their kernels are read together.
    """
    if isinstance(data, list) and all(isinstance(graph, dict) for graph in data):
        merged: dict = {}
        for graph in data:
            merged.update(graph)
        data = merged
    if not isinstance(data, dict):
        raise GuideError(f"{source} is not inductor's kernel information (an object of kernels expected): give the "
                         "kernel_information.json that provenance tracking wrote")
    found: dict[str, tuple[set, set]] = {}
    for key, info in data.items():
        if not isinstance(info, dict):
            raise GuideError(f"{source}: kernel {key[:60]!r} holds {type(info).__name__}, not an object: give the "
                             "kernel_information.json that provenance tracking wrote")
        name = key.rsplit(":", 1)[0] if re.search(r":\d+$", key) else key
        lines, nodes = found.setdefault(name, (set(), set()))
        for trace in info.get("stack_traces") or []:
            frames = FRAME.findall(trace) if isinstance(trace, str) else []
            if frames:
                file, line, function = frames[-1]
                lines.add(Line(file.replace("\\", "/").rsplit("/", 1)[-1], int(line), function))
        for what in ("post_grad_nodes", "pre_grad_nodes"):
            nodes.update(n for n in info.get(what) or [] if isinstance(n, str))
    return {name: KernelProvenance(frozenset(lines), frozenset(nodes)) for name, (lines, nodes) in found.items()}


def read(path: str | Path) -> dict[str, KernelProvenance]:
    """The kernel information in ``path``; anything wrong with the file is one GuideError."""
    fix = "give the kernel_information.json that inductor's provenance tracking wrote, or move it away"
    return parse(read_json_file(path, what="inductor's kernel information", fix=fix, max_bytes=MAX_BYTES), str(path))


def beside(trace_path: str | Path) -> Path:
    """Where a trace's kernel information is kept: ``<name>.kernel_information.json`` beside it."""
    path = Path(trace_path)
    name = path.name
    for suffix in (".json.gz", ".json"):
        name = name.removesuffix(suffix)
    return path.with_name(name.removesuffix(".trace") + FILE_SUFFIX)


def provenance_beside(trace_path: str | Path) -> dict[str, KernelProvenance] | None:
    """The kernel information kept beside a trace (:func:`beside`), or None where there is none; something there
    that is not a file of it (a folder, a FIFO, another JSON) is a one-line GuideError."""
    path = beside(trace_path)
    return read(path) if os.path.lexists(path) else None
