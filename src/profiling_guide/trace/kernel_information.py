"""Read what inductor recorded each compiled kernel fuses (``<name>.kernel_information.json``), checked at the edge.

With ``torch._inductor.config.trace.provenance_tracking_level = 1``, inductor
gives every kernel call it generates a *debug handle* (1, 2, 3... in the order
the graph's wrapper calls them) and records, per call, the graph nodes it
fuses and their source lines. ``torch._inductor.debug.create_kernel_information_json()``
returns that as ``{"<kernel name>:<handle>": {"stack_traces": [...],
"post_grad_nodes": [...], "pre_grad_nodes": [...]}}``, e.g. the key
``"triton_poi_fused_add_0:12"`` or ``"extern_kernels.mm:2"``; each stack trace
is Python's traceback text, ``File "model.py", line 42, in forward`` and the
line's code, outermost call first. ``profiling-guide profile`` adds
``"modules"``: the module path each stack trace's nodes ran in
(``blocks.0.mlp.up``, or null), from the graph's nodes
(:mod:`profiling_guide.measure.provenance`).

Inductor keeps one graph's record at a time (compiling the next graph starts
afresh), so ``profiling-guide profile`` writes a *list* of those objects, one
per graph compiled, and this reader takes either: one object, or a list of
them. The file comes from outside and is checked when read: a regular file of
at most :data:`MAX_KERNEL_INFORMATION_BYTES`, JSON, of that shape; anything
else is a one-line GuideError naming the file and what is wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from profiling_guide.errors import GuideError
from profiling_guide.trace.run_record import read_json_file, trace_stem

#: A large model's record is megabytes (112 kernel calls of a small GPT's backward: 68 KB).
MAX_KERNEL_INFORMATION_BYTES = 64 * 2**20
_KEY = re.compile(r"(.+):(\d{1,18})")
# One frame of Python's traceback text: the file, the line, the function, and the line's code if shown.
_FRAME = re.compile(r'File "([^"\n]+)", line (\d+), in ([^\n]+)\n?(?:[ \t]+([^\n]*)\n?)?')
_LISTS = ("stack_traces", "post_grad_nodes", "pre_grad_nodes")


@dataclass(frozen=True)
class SourceLine:
    """One frame of a stack trace: where in which file, in which function, and the line's code if recorded."""

    file: str
    line: int
    function: str
    code: str | None = None

    @property
    def short(self) -> str:
        """``model.py:42``: the file's name and the line."""
        return f"{Path(self.file).name}:{self.line}"


@dataclass(frozen=True)
class KernelCall:
    """One kernel call of a compiled graph: the kernel's name, its debug handle, what it fuses and from where."""

    name: str
    handle: int
    #: each stack trace of the nodes it fuses, outermost call first
    stacks: tuple[tuple[SourceLine, ...], ...]
    post_grad_nodes: tuple[str, ...]
    pre_grad_nodes: tuple[str, ...]
    #: the module path each stack trace's nodes ran in (``blocks.0.mlp.up``), None where not recorded
    modules: tuple[str | None, ...] = ()

    @property
    def triton(self) -> bool:
        """A kernel inductor generated (the trace names it the same); else an extern call (``extern_kernels.mm``)."""
        return self.name.startswith("triton_")


def parse_stack(text: str) -> tuple[SourceLine, ...]:
    """The frames of one traceback text, outermost first (frames the text does not hold are skipped)."""
    return tuple(SourceLine(m.group(1), int(m.group(2)), m.group(3).strip(), (m.group(4) or "").strip() or None)
                 for m in _FRAME.finditer(text))


def kernel_information_path(trace_path: str | Path) -> Path:
    """Where ``<name>.kernel_information.json`` would be for ``<name>.trace.json[.gz]``."""
    return Path(trace_path).with_name(trace_stem(trace_path) + ".kernel_information.json")


def read_kernel_information(path: str | Path) -> list[list[KernelCall]]:
    """The graphs recorded in the file at ``path``: each a list of its kernel calls by debug handle."""
    path = Path(path)
    fix = ("write it with torch._inductor.debug.create_kernel_information_json() (or profiling-guide profile "
           "--compile), or move it away")
    data = read_json_file(path, what="a kernel information file", fix=fix, max_bytes=MAX_KERNEL_INFORMATION_BYTES)
    graphs = data if isinstance(data, list) else [data]
    read = []
    for g, graph in enumerate(graphs):
        where = f"{path}: graph {g}" if isinstance(data, list) else str(path)
        if not isinstance(graph, dict):
            raise GuideError(f"{where} is not an object of kernel calls (\"<kernel>:<handle>\": {{...}}): {fix}")
        read.append(sorted((_kernel_call(key, value, where, fix) for key, value in graph.items()),
                           key=lambda call: call.handle))
    return read


def _kernel_call(key: str, value, where: str, fix: str) -> KernelCall:
    m = _KEY.fullmatch(key)
    if m is None:
        raise GuideError(f"{where}: key {key[:60]!r} is not \"<kernel name>:<debug handle>\": {fix}")
    if not isinstance(value, dict):
        raise GuideError(f"{where}: {key[:60]!r} must be an object with stack_traces, post_grad_nodes, "
                         f"pre_grad_nodes: {fix}")
    lists = {}
    for field in _LISTS:
        items = value.get(field, [])
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise GuideError(f"{where}: {key[:60]!r}.{field} must be a list of strings: {fix}")
        lists[field] = items
    modules = value.get("modules", [])
    if not isinstance(modules, list) or not all(m is None or isinstance(m, str) for m in modules) or (
            modules and len(modules) != len(lists["stack_traces"])):
        raise GuideError(f"{where}: {key[:60]!r}.modules must be a list of strings or nulls, one per stack trace: "
                         f"{fix}")
    return KernelCall(m.group(1), int(m.group(2)), tuple(parse_stack(text) for text in lists["stack_traces"]),
                      tuple(lists["post_grad_nodes"]), tuple(lists["pre_grad_nodes"]), tuple(modules))


def kernel_information_beside(trace_path: str | Path) -> list[list[KernelCall]] | None:
    """The ``<name>.kernel_information.json`` beside ``<name>.trace.json[.gz]``: None where there is none."""
    path = kernel_information_path(trace_path)
    if path == Path(trace_path) or not os.path.lexists(path):
        return None
    return read_kernel_information(path)
