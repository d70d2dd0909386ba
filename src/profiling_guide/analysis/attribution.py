"""Where a step's device time goes in the user's code: each kernel, memset and memcpy of the steps attributed to the
``nn.Module`` that ran it and to the line of the user's code, in its phase (forward, backward, optimizer).

What a trace allows, by how it was recorded:

* **Eager, with** ``with_stack=True, with_modules=True``: the op that launched
  the work runs inside Python frames (:attr:`~profiling_guide.trace.model.Trace.python_frames`);
  the ``nn.Module: Linear_3`` frames around it give the module path
  (``GPT_0.GPTBlock_3.Attention_3.Linear_13``: each module as its class and
  the order in which the profiler first saw that instance), the innermost
  frame of the user's own code gives the source: its file and the line its
  function starts at (a Python frame records no more). A backward op runs on
  the autograd engine's thread, with no frames: it takes the module and line
  of the forward op it differentiates (the ``fwdbwd`` link). Optimizer work
  lies outside every module: its module is the optimizer step's label
  (``AdamW.step``).
* ``torch.compile``: a Triton or extern kernel launched inside a compiled
  graph's call (``## Call CompiledFxGraph``) is matched to the kernel call
  inductor recorded (``<name>.kernel_information.json``,
  :mod:`~profiling_guide.trace.kernel_information`): each Triton kernel by its
  name and its place among the graph's calls of that name, the extern calls
  (GEMMs, attention) by their place between those. Its source lines are the
  ones inductor recorded for the nodes it fuses, outermost call first (a
  kernel fusing nodes of several lines splits its time evenly among them);
  its module is the one the graph's nodes ran in (``blocks.0.mlp.up``:
  ``profiling-guide profile`` records it beside inductor's record) under the
  compiled region's module from the trace (``OptimizedModule_0.GPT_0``); a
  step compiled whole runs in no module the trace records, and its kernels
  take the path alone.
* **CUDA graphs**: a replayed kernel (launched by ``cudaGraphLaunch``) is
  mapped to the launch captured at its node, where the capture is in the
  trace (``torch.cuda.graph``: the n-th piece of work of a replay is the n-th
  launch of the capture), and attributed as that launch would be; a
  ``reduce-overhead`` replay whose capture is not in the trace is matched to
  inductor's record directly, by the kernels' names and order.
* **A bare trace** (no ``with_stack``): only the op tree and the
  ``record_function`` labels: the work is grouped by label and top-level op,
  and the report names the arguments that would attribute it.

Work attributed only to a compiled region's module and function (a compiled
kernel whose graph inductor recorded nothing for) counts as *not* attributed:
the line inside it is what is missing. Everything is linear in the number of
device events and Python frames.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from profiling_guide.analysis.backward import PHASES, UNLINKED, phase_of
from profiling_guide.trace.kernel_information import KernelCall, SourceLine
from profiling_guide.trace.model import CpuOp, DeviceEvent, PythonFrame, RuntimeCall, Step, Trace, frame_open_at

#: How a piece of work was attributed (the page and the JSON name these).
STACK, PROVENANCE, REGION, LABEL, NONE = "stack", "provenance", "compiled region", "label", "none"
ATTRIBUTED = (STACK, PROVENANCE)

#: Why work was not attributed to a module and a line (the report words each and says what would attribute it).
NO_LAUNCH = "no launch"  # the profiler did not record the call that launched it
REPLAY_UNMAPPED = "replay unmapped"  # a CUDA graph replay whose capture is not in the trace, nor inductor's record
INDUCTOR_MADE = "inductor made"  # a compiled kernel whose nodes inductor's own passes made (no source line)
NO_KERNEL_INFORMATION = "no kernel information"  # a compiled kernel, no kernel information beside the trace
NOT_IN_KERNEL_INFORMATION = "not in kernel information"  # a compiled kernel the kernel information does not hold
WRAPPER = "graph call's own"  # work in a compiled graph's call that is none of its kernels (input copies for graphs)
NO_STACKS = "no stacks"  # recorded without with_stack
NO_MODULES = "no modules"  # recorded without with_modules
OUTSIDE_MODULES = "outside modules"  # work of no nn.Module (the loss's seed gradient, code between modules)
COMPILED_TOP = "compiled top-level code"  # a compiled kernel of code in no submodule, where no module encloses it
LIBRARY_ONLY = "library only"  # no frame of the user's code on the stack

_ENGINE = "autograd::engine::evaluate_function: "
_GRAPH_CALL = "## Call CompiledFxGraph"  # inductor's label around one call of a compiled graph
_COMPILED_FUNCTIONS = ("CompiledFunction", "CompiledFunctionBackward")  # AOTAutograd's ops, where that label is absent
_OPTIMIZER = re.compile(r"Optimizer\.(?:step|zero_grad)#(.+)")
_FRAME_NAME = re.compile(r"(.*)\((\d+)\): (.*)")
_LAUNCH = re.compile(r"LaunchKernel|LaunchCooperative|Memset|Memcpy")
# Code that is not the user's: the libraries that run it, Python's own modules, generated code.
_LIBRARIES = {"torch", "triton", "functorch", "torchgen", "profiling_guide", "typing_extensions", "pybind11",
              "numpy", "tqdm", "__future__", "importlib"}
_STDLIB = set(getattr(sys, "stdlib_module_names", ())) | {"typing", "contextlib", "enum", "threading", "functools",
                                                          "logging", "abc", "collections", "os"}


# ------------------------------------------------------------------ sites
@dataclass(frozen=True)
class Site:
    """Where in the user's code a piece of device work came from (any field the trace does not tell is None)."""

    module: str | None = None  # ``GPT_0.GPTBlock_3.Attention_3.Linear_13``, ``AdamW.step``
    source: str | None = None  # ``model.py:42``
    function: str | None = None
    file: str | None = None  # the file as recorded (a path relative to sys.path, or absolute)
    code: str | None = None  # the line's code, where inductor recorded it
    #: the source lines that called it, outermost first, each ``(file:line, code)`` (inductor's stack traces)
    callers: tuple[tuple[str, str | None], ...] = ()
    label: str | None = None  # the innermost record_function label and the top op under it
    how: str = NONE

    @property
    def attributed(self) -> bool:
        return self.how in ATTRIBUTED and self.module is not None and self.source is not None


def user_frame(name: str) -> tuple[str, int, str] | None:
    """``(file, line, function)`` of a Python frame's name when it is the user's code; None for library code."""
    m = _FRAME_NAME.fullmatch(name)
    if m is None or name.startswith("<"):  # <built-in ...>, <frozen os>, <string>: no file of the user's
        return None
    path = m.group(1)
    if "torchinductor" in path or path.startswith("<"):  # code inductor generated
        return None
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    if re.search(r"/lib/python3[.\d]*/", path) and "-packages/" not in m.group(1):
        return None  # Python's own modules, where the profiler kept their full path
    top = path.lstrip("/").split("/", 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    if top in _LIBRARIES or top in _STDLIB:
        return None
    return m.group(1), int(m.group(2)), m.group(3)


class _Frames:
    """The Python frames of each thread (:attr:`Trace.python_frames_by_thread`), to find the innermost one around
    a time."""

    def __init__(self, trace: Trace):
        self.by_thread = trace.python_frames_by_thread
        self.has_modules = any(f.name.startswith("nn.Module: ") for f in trace.python_frames)
        self._chains: dict[int, tuple[str | None, tuple | None]] = {}

    def innermost(self, tid, t: float) -> PythonFrame | None:
        """The innermost frame on thread ``tid`` open at ``t``: the last to start before it, or its caller holding it."""
        frames = self.by_thread.get(tid)
        return frame_open_at(frames, t, slack=0.002) if frames else None

    def chain(self, frame: PythonFrame) -> tuple[str | None, tuple | None]:
        """``(module path, innermost user frame as (file, line, function))`` of the frames from ``frame`` outwards."""
        key = id(frame)
        found = self._chains.get(key)
        if found is None:
            modules, user = [], None
            for f in (frame, *frame.ancestors()):
                if f.module is not None:
                    modules.append(f.module)
                elif user is None:
                    user = user_frame(f.name)
            found = self._chains[key] = (".".join(reversed(modules)) or None, user)
        return found


def _optimizer(op: CpuOp | None) -> str | None:
    """``AdamW.step`` for work under an ``Optimizer.step#AdamW.step`` (or ``zero_grad``) label, else None."""
    for o in ([op, *op.ancestors()] if op is not None else []):
        m = _OPTIMIZER.fullmatch(o.name)
        if m:
            return m.group(1)
    return None


def _forward_op(op: CpuOp | None) -> CpuOp | None:
    """The forward op that ``op`` (or the backward op around it) differentiates, from the ``fwdbwd`` links.

    The autograd engine runs a node (``AddmmBackward0``) inside its
    ``evaluate_function`` op, and there also reduces the node's outputs to the
    inputs' shapes (a bias's gradient: ``aten::sum``): work beside the node is
    the node's.
    """
    for o in ([op, *op.ancestors()] if op is not None else []):
        if o.forward_op is not None:
            return o.forward_op
        if o.name.startswith(_ENGINE):
            node = next((child for child in o.children if child.forward_op is not None), None)
            if node is not None:
                return node.forward_op
    return None


def _label(op: CpuOp | None) -> str | None:
    """``forward › aten::linear``: the innermost record_function label around ``op`` and the top op under it."""
    if op is None:
        return None
    chain = [op, *op.ancestors()]
    for i, o in enumerate(chain):
        if o.annotation and not o.name.startswith("ProfilerStep#"):
            below = chain[i - 1].name if i > 0 else None
            return o.name + (f" › {below}" if below else "")
    return chain[-1].name


class _Sites:
    """The site of an op by the trace alone: its Python frames and modules, its forward op, its optimizer label."""

    def __init__(self, trace: Trace):
        self.frames = _Frames(trace)
        self._cache: dict[int, Site] = {}

    def of(self, op: CpuOp | None) -> Site:
        if op is None:
            return Site()
        found = self._cache.get(id(op))
        if found is None:
            found = self._cache[id(op)] = self._site(op)
        return found

    def _own(self, op: CpuOp) -> tuple[str | None, tuple | None]:
        frame = self.frames.innermost(op.tid, op.start_us)
        return self.frames.chain(frame) if frame is not None else (None, None)

    def _site(self, op: CpuOp) -> Site:
        module, user = self._own(op)
        forward = _forward_op(op)
        if forward is not None and (module is None or user is None):
            f_module, f_user = self._own(forward)
            module, user = module or f_module, user or f_user
        # A backward op's label is its forward op's: a bare trace still says what it differentiates.
        label = _label(forward if forward is not None else op)
        if user is None and module is None:
            return Site(module=_optimizer(op), label=label, how=LABEL)
        module = module or _optimizer(op)
        file, line, function = user if user is not None else (None, None, None)
        return Site(module=module, source=f"{Path(file).name}:{line}" if file else None, function=function,
                    file=file, label=label, how=STACK)


# ------------------------------------------------------- compiled graphs
def _graph_call(op: CpuOp | None) -> CpuOp | None:
    """The op of the compiled graph's call around ``op``: inductor's label, else AOTAutograd's op."""
    fallback = None
    for o in ([op, *op.ancestors()] if op is not None else []):
        if o.name.startswith(_GRAPH_CALL):
            return o
        if fallback is None and o.name in _COMPILED_FUNCTIONS:
            fallback = o
    return fallback


@dataclass
class _Unit:
    """One kernel call of a graph's call in the trace: an op (a Triton kernel's, ``aten::mm``) and what it launched."""

    name: str
    events: list[DeviceEvent] = field(default_factory=list)

    @property
    def triton(self) -> bool:
        return self.name.startswith("triton_")

    @property
    def us(self) -> float:
        return sum(ev.dur_us for ev in self.events)


def match_graph(units: list[_Unit], calls: list[KernelCall]) -> tuple[dict[int, list[KernelCall]], float]:
    """Each unit's kernel calls in ``calls`` (one graph's, by debug handle), and the share of device time matched.

    A Triton unit is its name's k-th call in the graph when it is the k-th of
    that name in the trace; these anchors must come in the graph's order. The
    units between two anchors that are not Triton kernels are the extern calls
    between them, one to one when they are as many, else each unit is all of
    them (a GEMM and the reduction it launched, a memset before attention);
    fewer units than calls leave the gap unmatched. A graph that holds fewer
    than half the Triton units is not the one that ran.
    """
    anchors = _triton_anchors(units, calls)
    tritons = sum(1 for unit in units if unit.triton)
    if tritons and 2 * len(anchors) < tritons:
        return {}, 0.0  # most of its Triton kernels are not this graph's: another graph's call
    matched: dict[int, list[KernelCall]] = {u: [calls[c]] for u, c in anchors}
    bounds = [(-1, -1), *anchors, (len(units), len(calls))]
    for (u0, c0), (u1, c1) in zip(bounds, bounds[1:]):  # noqa: B905 (neighbouring bounds: one pair fewer)
        matched.update(_externs_between(units, calls, (u0, u1), (c0, c1)))
    total = sum(unit.us for unit in units)
    share = sum(units[u].us for u in matched) / total if total else 0.0
    return matched, share


def _triton_anchors(units: list[_Unit], calls: list[KernelCall]) -> list[tuple[int, int]]:
    """(unit index, call index) of each Triton unit that is its name's k-th call in the graph as the k-th of that
    name in the trace, both indices increasing."""
    positions: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(calls):
        positions[call.name].append(i)
    seen: Counter = Counter()
    anchors: list[tuple[int, int]] = []
    for u, unit in enumerate(units):
        if not unit.triton:
            continue
        k = seen[unit.name]
        seen[unit.name] += 1
        found = positions.get(unit.name, [])
        if k < len(found) and (not anchors or found[k] > anchors[-1][1]):
            anchors.append((u, found[k]))
    return anchors


def _externs_between(units: list[_Unit], calls: list[KernelCall], unit_bounds: tuple[int, int],
                     call_bounds: tuple[int, int]) -> dict[int, list[KernelCall]]:
    """The units strictly between two anchors that are not Triton kernels, matched to the extern calls between
    them: one to one when as many, each unit to all of them when the units are more, none when fewer."""
    extern_units = [u for u in range(unit_bounds[0] + 1, unit_bounds[1]) if not units[u].triton]
    extern_calls = [calls[c] for c in range(call_bounds[0] + 1, call_bounds[1]) if not calls[c].triton]
    if not extern_units or not extern_calls:
        return {}
    if len(extern_units) == len(extern_calls):
        return {u: [call] for u, call in zip(extern_units, extern_calls)}  # noqa: B905 (as many, checked just above)
    if len(extern_units) > len(extern_calls):  # a call launched several pieces of work
        return {u: extern_calls for u in extern_units}
    return {}


def _provenance_sites(calls: list[KernelCall], region: Site) -> list[Site]:
    """One site per distinct source line the calls' nodes come from (innermost frame of each stack trace).

    Its module: the module the nodes ran in where the record says
    (``KernelCall.modules``: ``blocks.0.mlp.up``, attribute names from the
    compiled module down) under the compiled region's module where the trace
    has one; else the region's module.
    """
    sites: dict[tuple, Site] = {}
    for call in calls:
        for i, stack in enumerate(call.stacks):
            if not stack:
                continue
            inner: SourceLine = stack[-1]
            inside = call.modules[i] if i < len(call.modules) else None
            module = ".".join(part for part in (region.module, inside) if part) or None
            key = (inner.file, inner.line, module)
            if key not in sites:
                sites[key] = Site(module=module, source=inner.short, function=inner.function, file=inner.file,
                                  code=inner.code, callers=tuple((f.short, f.code) for f in stack[:-1]),
                                  label=region.label,
                                  how=PROVENANCE)
    return list(sites.values())


# ------------------------------------------------------------ CUDA graphs
def _is_graph_launch(call: RuntimeCall | None) -> bool:
    return call is not None and call.name.startswith(("cudaGraphLaunch", "cuGraphLaunch"))


def _launch_kind(call: RuntimeCall) -> str:
    return "memset" if "Memset" in call.name else "memcpy" if "Memcpy" in call.name else "kernel"


def captured_launches(trace: Trace) -> dict[tuple, list[RuntimeCall]]:
    """Each CUDA graph capture in the trace, keyed by the kinds of its launches in order: the launches, in order.

    A capture runs from ``cudaStreamBeginCapture`` to ``cudaStreamEndCapture``;
    its launches (on any thread) start no device work then: they become the
    graph's nodes.
    """
    calls = trace.runtime_calls  # by start
    starts = [c.start_us for c in calls]
    begins = [c for c in calls if c.name.startswith("cudaStreamBeginCapture")]
    ends = [c for c in calls if c.name.startswith("cudaStreamEndCapture")]
    captures: dict[tuple, list[RuntimeCall]] = {}
    for begin in begins:
        end = next((e for e in ends if e.start_us >= begin.start_us and e.tid == begin.tid), None)
        if end is None:
            continue
        during = calls[bisect_right(starts, begin.end_us - 1e-9):bisect_right(starts, end.start_us)]
        launches = [c for c in during if _LAUNCH.search(c.name) and not c.device_events]
        if launches:
            captures.setdefault(tuple(_launch_kind(c) for c in launches), launches)
    return captures


def replay_map(trace: Trace, events: list[DeviceEvent]) -> dict[int, RuntimeCall]:
    """id(event) → the captured launch at its node, for each replayed event whose graph's capture is in the trace.

    A replay matches a capture when its work, in the order it ran on its one
    stream, has the kinds (kernel, memset, memcpy) of the capture's launches in
    order; the n-th piece of work is then the n-th launch.
    """
    captures = captured_launches(trace)
    if not captures:
        return {}
    replays: dict[int, list[DeviceEvent]] = defaultdict(list)
    launches: dict[int, RuntimeCall] = {}
    for ev in events:
        if _is_graph_launch(ev.launch):
            replays[id(ev.launch)].append(ev)
            launches[id(ev.launch)] = ev.launch
    mapped: dict[int, RuntimeCall] = {}
    for key, work in replays.items():  # noqa: B007 (the key is what is read)
        everything = sorted(launches[key].device_events, key=lambda ev: ev.start_us)
        if len({ev.stream for ev in everything}) != 1:
            continue  # work on several streams runs in no one order
        capture = captures.get(tuple(ev.kind for ev in everything))
        if capture is not None:
            mapped.update({id(ev): call for ev, call in zip(everything, capture)})  # noqa: B905 (a capture found by these kinds has as many)
    return mapped


# ------------------------------------------------------------ the result
@dataclass
class Row:
    """Device time per step at one site, in one phase."""

    phase: str
    site: Site
    device_us: float = 0.0
    #: kernels, memsets and memcpys by kind, per step (one that fuses several lines' work counts in each)
    kinds: Counter = field(default_factory=Counter)
    kernels: Counter = field(default_factory=Counter)  # device µs per step by kernel's short name
    #: when its first piece of work was launched (µs, the trace's clock): modules are listed in the order they ran
    first_us: float = float("inf")


@dataclass
class Attribution:
    """A trace's steps' device time by module and source line: :func:`attribute`'s result, per step."""

    steps: int
    device_us: float  # per step
    rows: list[Row]
    #: device µs per step by how it was attributed (:data:`STACK`, :data:`PROVENANCE`, ...)
    by_how: dict[str, float]
    #: ``(reason, device µs per step)`` for work not attributed to a module and a line, most first; each reason one
    #: of :data:`NO_LAUNCH`, :data:`REPLAY_UNMAPPED`, :data:`INDUCTOR_MADE`, :data:`NO_KERNEL_INFORMATION`,
    #: :data:`NOT_IN_KERNEL_INFORMATION`, :data:`WRAPPER`, :data:`NO_STACKS`, :data:`NO_MODULES`,
    #: :data:`OUTSIDE_MODULES`, :data:`COMPILED_TOP`, :data:`LIBRARY_ONLY`
    unattributed: list[tuple[str, float]]
    #: per step: the CUDA graph launches, and the device µs of the work they replayed
    graph_launches: float = 0.0
    replayed_us: float = 0.0
    #: per step: the device µs of replayed work mapped to the launch captured at its node (the capture in the trace)
    captured_us: float = 0.0
    #: kernel information files' graphs matched in the trace, of those given (None: no file)
    graphs_matched: tuple[int, int] | None = None
    #: what the trace was recorded with: "stack", "modules", or neither
    recorded_with: tuple[str, ...] = ()

    @property
    def attributed_us(self) -> float:
        return sum(r.device_us for r in self.rows if r.site.attributed)

    @property
    def attributed_share(self) -> float:
        """Device time attributed to a module and a source line, over all device time of the steps."""
        return self.attributed_us / self.device_us if self.device_us else 0.0

    def phases(self) -> list[str]:
        present = {r.phase for r in self.rows}
        return [p for p in (*PHASES, UNLINKED) if p in present]

    def phase_us(self, phase: str) -> float:
        return sum(r.device_us for r in self.rows if r.phase == phase)

    def phase_table(self) -> pd.DataFrame:
        """Device µs per step in each phase and its share, as :func:`~profiling_guide.analysis.backward.phase_shares`
        gives them (a replayed kernel in the phase of the launch captured at its node)."""
        order = self.phases()
        spent = [self.phase_us(p) for p in order]
        return pd.DataFrame({"device_us": spent, "share": [us / self.device_us if self.device_us else 0.0
                                                           for us in spent]}, index=pd.Index(order, name="phase"))

    def sources(self, phase: str | None = None) -> list[dict]:
        """Attributed source lines (in ``phase``, or all), most device time first: one dict per line."""
        lines: dict[tuple, dict] = {}
        for r in self.rows:
            if not r.site.attributed or (phase is not None and r.phase != phase):
                continue
            key = (r.site.file, r.site.source, r.site.function)
            line = lines.setdefault(key, {"source": r.site.source, "function": r.site.function, "file": r.site.file,
                                          "code": r.site.code, "device_us": 0.0, "kinds": Counter(),
                                          "kernels": Counter(), "modules": Counter(), "callers": Counter(),
                                          "how": Counter()})
            line["device_us"] += r.device_us
            line["kinds"].update(r.kinds)
            line["kernels"].update(r.kernels)
            line["modules"][r.site.module] += r.device_us
            line["how"][r.site.how] += r.device_us
            if r.site.callers:
                line["callers"][" › ".join(short for short, _ in r.site.callers)] += r.device_us
        return sorted(lines.values(), key=lambda line: -line["device_us"])

    def module_tree(self, phase: str | None = None) -> dict:
        """The module paths as a tree, children in the order they first ran.

        Each node is ``{"name", "code", "device_us" (with what nests in it),
        "kinds", "first_us", "children"}``. Under a compiled region's module,
        where the trace has no frames, the calls inductor recorded continue
        the tree: each source line that led to the work (``model.py:103``,
        with its code), down to the line itself.
        """
        root = {"name": "", "code": None, "device_us": 0.0, "kinds": Counter(), "first_us": 0.0, "children": {}}
        for r in self.rows:
            if r.site.module is None or not r.site.attributed or (phase is not None and r.phase != phase):
                continue
            path = [(part, None) for part in r.site.module.split(".")]
            if r.site.how == PROVENANCE:
                path += [*r.site.callers, (r.site.source, r.site.code)]
            node = root
            node["device_us"] += r.device_us
            node["kinds"].update(r.kinds)
            for part, code in path:
                node = node["children"].setdefault(part, {"name": part, "code": code, "device_us": 0.0,
                                                          "kinds": Counter(), "first_us": r.first_us,
                                                          "children": {}})
                node["device_us"] += r.device_us
                node["kinds"].update(r.kinds)
                node["first_us"] = min(node["first_us"], r.first_us)
        return root

    def to_json(self) -> list[dict]:
        """The ``attribution`` list of ``profiling-guide report --json``: one entry per module, line and phase."""
        merged: dict[tuple, dict] = {}
        for r in self.rows:
            s = r.site
            key = (s.module, s.source, s.file, s.function, r.phase, s.how, s.label if not s.attributed else None)
            entry = merged.setdefault(key, {
                "module": s.module, "source": s.source, "function": s.function, "file": s.file, "phase": r.phase,
                "device_us": 0.0, "share": 0.0, "how": s.how, "attributed": s.attributed,
                "label": None if s.attributed else s.label, "kernels": Counter()})
            entry["device_us"] += r.device_us
            entry["kernels"].update(r.kinds)
        out = sorted(merged.values(), key=lambda e: -e["device_us"])
        for entry in out:
            entry["share"] = entry["device_us"] / self.device_us if self.device_us else 0.0
            entry["kernels"] = {kind: round(n, 4) for kind, n in entry["kernels"].most_common()}
        return out


# ---------------------------------------------------------------- analysis
def attribute(trace: Trace, steps: list[Step], kernel_information: list[list[KernelCall]] | None = None
              ) -> Attribution:
    """Attribute every kernel, memset and memcpy of ``steps`` (see the module docstring); figures per step."""
    n = max(len(steps), 1)
    events = [ev for s in steps for ev in s.device_events]
    sites = _Sites(trace)
    captured = replay_map(trace, events)
    graphs = kernel_information or []
    launch_of = {id(ev): captured.get(id(ev), ev.launch) for ev in events}
    matched = _match_calls(_graph_calls(events, launch_of), sites, graphs)
    tally = _Tally(n)
    for ev in events:
        _count(tally, ev, launch_of[id(ev)], id(ev) in captured, matched, sites, trace, graphs)
    replayed_us = sum(ev.dur_us for ev in events if _is_graph_launch(ev.launch))
    captured_us = sum(ev.dur_us for ev in events if id(ev) in captured)
    device_us = sum(ev.dur_us for ev in events) / n
    launches = sum(1 for s in steps for c in s.runtime_calls if _is_graph_launch(c))
    recorded = tuple(w for w, has in (("stack", bool(trace.python_frames)), ("modules", sites.frames.has_modules))
                     if has)
    return Attribution(
        steps=len(steps), device_us=device_us, rows=sorted(tally.rows.values(), key=lambda r: -r.device_us),
        by_how=dict(tally.by_how), unattributed=tally.missing.most_common(),
        graph_launches=launches / n, replayed_us=replayed_us / n, captured_us=captured_us / n,
        graphs_matched=(len(matched.graphs), len(graphs)) if kernel_information is not None else None,
        recorded_with=recorded)


def _count(tally: _Tally, ev: DeviceEvent, launch: RuntimeCall | None, captured: bool, matched: _Matched,
           sites: _Sites, trace: Trace, graphs: list) -> None:
    """``ev`` counted at each of its sites, shared equally among them."""
    replayed = _is_graph_launch(ev.launch)
    op = launch.op if launch is not None else None
    phase = phase_of(op) if launch is not None else UNLINKED
    first_us = launch.start_us if launch is not None else ev.start_us
    found = matched.sites_of(ev, op, replayed, captured, sites)
    for site in found:
        why = None if site.attributed else WRAPPER if id(ev) in matched.wrapper else _reason(
            site, launch, replayed, captured, id(ev) in matched.lineless, sites, trace, graphs)
        tally.add(ev, phase, site, 1.0 / len(found), first_us, why)


@dataclass
class _Tally:
    """Device time per (phase, site), per way of attributing, and per reason it could not be; per step (``n``)."""

    n: int
    rows: dict[tuple, Row] = field(default_factory=dict)
    by_how: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)

    def add(self, ev: DeviceEvent, phase: str, site: Site, weight: float, first_us: float, why: str | None) -> None:
        """``weight`` of ``ev`` to ``site``; ``why`` it is not attributed, where it is not."""
        row = self.rows.setdefault((phase, site), Row(phase, site))
        row.first_us = min(row.first_us, first_us)
        row.device_us += ev.dur_us * weight / self.n
        row.kinds[ev.decoded.kind if ev.kind == "kernel" else ev.kind] += 1 / self.n  # whole: it ran this line's work
        row.kernels[ev.decoded.short] += ev.dur_us * weight / self.n
        self.by_how[site.how] += ev.dur_us * weight / self.n
        if not site.attributed:
            self.missing[why] += ev.dur_us * weight / self.n


def _graph_calls(events: list[DeviceEvent], launch_of: dict) -> dict[int, tuple[CpuOp, list[_Unit], dict]]:
    """The work of each compiled graph's call, in units, one per kernel call the trace shows: id(graph call op) →
    (the op, its units, each unit by its key)."""
    calls_of: dict[int, tuple[CpuOp, list[_Unit], dict]] = {}
    for ev in sorted(events, key=lambda e: (launch_of[id(e)].start_us if launch_of[id(e)] else e.start_us,
                                            e.start_us)):
        launch = launch_of[id(ev)]
        op = launch.op if launch is not None else None
        call = _graph_call(op)
        if call is None:
            continue
        _, units, by_key = calls_of.setdefault(id(call), (call, [], {}))
        if _is_graph_launch(launch):  # a replay whose capture is not in the trace: each piece of work apart
            name, key = ev.name, ("work", id(ev))
        else:
            top = next((o for o in [op, *op.ancestors()] if o.parent is call), None)
            kernel = top.args.get("kernel_name") if top is not None else None
            name = kernel if isinstance(kernel, str) else top.name if top is not None else ev.name
            key = ("op", id(top)) if top is not None else ("launch", id(launch))
        unit = by_key.get(key)
        if unit is None:
            unit = by_key[key] = _Unit(name)
            units.append(unit)
        unit.events.append(ev)
    return calls_of


@dataclass
class _Matched:
    """What the compiled graphs' calls were matched to, per piece of work (by ``id``)."""

    provenance: dict[int, list[Site]] = field(default_factory=dict)  # its provenance sites
    regions: dict[int, Site] = field(default_factory=dict)  # the compiled region's site
    lineless: set[int] = field(default_factory=set)  # matched to kernel calls whose nodes have no source line
    wrapper: set[int] = field(default_factory=set)  # in a matched graph's call, but none of its kernel calls
    graphs: set[int] = field(default_factory=set)  # the graphs (indices) some call matched

    def sites_of(self, ev: DeviceEvent, op: CpuOp | None, replayed: bool, captured: bool, sites: _Sites) -> list[Site]:
        """Where ``ev``, launched in ``op``, is attributed: its provenance, else its compiled region, else the op's
        own site (nowhere for a replay whose capture the trace lacks)."""
        if id(ev) in self.provenance:
            return self.provenance[id(ev)]
        if id(ev) in self.regions:
            region = self.regions[id(ev)]
            return [Site(module=region.module, source=region.source, function=region.function, file=region.file,
                         label=region.label, how=REGION)]
        if replayed and not captured:
            return [Site(label=_label(op), how=NONE)]
        return [sites.of(op)]


def _match_calls(calls_of: dict, sites: _Sites, graphs: list[list[KernelCall]]) -> _Matched:
    """Each graph call's units matched to the kernel calls of one compiled graph (:func:`match_graph`): the graph
    that matches the most work; between graphs that match as much, the one with as many calls as units."""
    matched = _Matched()
    cache: dict[tuple, tuple[int | None, dict]] = {}  # a graph call's unit names → (graph, its units' calls)
    for call, units, _ in calls_of.values():
        region = sites.of(call)
        names = tuple(u.name for u in units)
        if names not in cache:
            best, best_score, best_match = None, (0.5, -float("inf")), {}
            for g, graph in enumerate(graphs):
                found, share = match_graph(units, graph)
                score = (share, -abs(len(graph) - len(units)))
                if share >= 0.5 and score > best_score:
                    best, best_score, best_match = g, score, found
            cache[names] = (best, best_match)
        g, found = cache[names]
        if g is not None:
            matched.graphs.add(g)
        for u, unit in enumerate(units):
            unit_sites = _provenance_sites(found.get(u, []), region)
            for ev in unit.events:
                matched.regions[id(ev)] = region
                if unit_sites:
                    matched.provenance[id(ev)] = unit_sites
                elif u in found:
                    matched.lineless.add(id(ev))
                elif g is not None:
                    matched.wrapper.add(id(ev))
    return matched


def _reason(site: Site, launch, replayed: bool, captured: bool, lineless: bool, sites: _Sites, trace: Trace,
            graphs: list) -> str:
    """Why a piece of work was not attributed to a module and a line (one of the reasons above)."""
    if launch is None:
        return NO_LAUNCH
    if replayed and not captured and site.how == NONE:
        return REPLAY_UNMAPPED
    if site.how == REGION:
        return INDUCTOR_MADE if lineless else NOT_IN_KERNEL_INFORMATION if graphs else NO_KERNEL_INFORMATION
    if site.how == PROVENANCE and site.module is None:
        return COMPILED_TOP
    if not trace.python_frames:
        return NO_STACKS
    # a step compiled whole runs no module call the profiler sees; the graphs' own record says where modules were
    if site.module is None and not sites.frames.has_modules and not any(c.modules for g in graphs for c in g):
        return NO_MODULES
    return OUTSIDE_MODULES if site.module is None else LIBRARY_ONLY
