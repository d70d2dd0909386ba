"""What inductor records each compiled kernel fuses, kept for every graph a step compiles.

With ``torch._inductor.config.trace.provenance_tracking_level = 1`` inductor
records, for each kernel call it generates, the graph nodes it fuses and their
source lines (:mod:`profiling_guide.trace.kernel_information` reads them back).
It keeps one graph's record at a time: compiling a forward graph starts afresh
and puts the earlier record back when done, and a backward graph (compiled at
the first backward) writes into that earlier one. So
``torch._inductor.debug.create_kernel_information_json()`` after profiling
holds the backward graphs only. :class:`InductorProvenance` takes a snapshot
after each graph's compile (inductor calls ``dump_inductor_provenance_info``
once per graph) and keeps the kernel calls each snapshot adds: one object per
graph, the list that ``<name>.kernel_information.json`` holds.

Inductor's caches skip the code generation that records provenance, so they
are off while recording (compiling takes longer). A torch without provenance
tracking records nothing, and :attr:`InductorProvenance.available` says so.

Two graph passes, run before and after inductor's own post-grad passes
(:class:`_GraphNodes`), add what the record lacks:

* the module each stack trace's nodes ran in: dynamo keeps it on each node
  (``nn_module_stack``; a backward node, ``fwd_nn_module_stack``: its
  forward's), as ``L['self'].blocks[0].mlp.up``; each kernel call gets
  ``"modules"``, one path per stack trace (``blocks.0.mlp.up``; None for the
  compiled module's own code),
  so a compiled kernel has a module even where the profiler recorded none
  (a step compiled whole runs no ``nn.Module`` call the profiler sees);
* the stack trace of a node a pattern pass put in place of another
  (``mm`` + ``add`` made one ``addmm``): torch 2.11 leaves it none, and the
  kernel call then has no source line; it takes the stack trace of the node
  it replaced, the one erased node that had the same users.
"""

from __future__ import annotations

import json
import re

#: ``L['self']``, ``L['model']``: dynamo's name of the module the graph was traced from (left off the path)
_ROOT = re.compile(r"^L\[['\"][^'\"]+['\"]\]\.?")
_ITEM = re.compile(r"\.?_modules\[['\"]([^'\"]+)['\"]\]|\[['\"]([^'\"]+)['\"]\]|\[(\d+)\]")
_CLOSURE = re.compile(r"\.?__closure__\.\d+\.cell_contents")


def module_path(qualified: str) -> str:
    """``blocks.0.mlp.up`` for dynamo's ``L['self'].blocks[0].mlp.up`` or ``L['self']._modules['blocks']._modules['0']``."""
    path = _ITEM.sub(lambda m: "." + next(g for g in m.groups() if g is not None), _ROOT.sub("", qualified))
    return _CLOSURE.sub("", path).strip(".")


def _innermost_module(meta: dict) -> str | None:
    """The path of the module a node ran in (``blocks.0.mlp.up``); None for the traced module's own code."""
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
    try:
        qualified = list(stack.values())[-1][0]
    except (IndexError, TypeError, KeyError):
        return None
    return (module_path(qualified) or None) if isinstance(qualified, str) else None


class _GraphNodes:
    """What one graph's nodes hold before and after inductor's post-grad passes (see the module docstring).

    :meth:`before` and :meth:`after` run as inductor's custom post-grad passes,
    each after the pass that was there (the user's own, kept).
    """

    def __init__(self, before_them, after_them):
        self._chained = (before_them, after_them)
        self._before: dict[str, tuple[str | None, str | None, frozenset]] = {}
        #: node name → (its stack trace, its module path), for the graph compiled last
        self.nodes: dict[str, tuple[str | None, str | None]] = {}

    def before(self, graph) -> None:
        if self._chained[0] is not None:
            self._chained[0](graph)
        self._before = {node.name: (node.meta.get("stack_trace"), _innermost_module(node.meta),
                                    frozenset(u.name for u in node.users)) for node in graph.nodes}

    def after(self, graph) -> None:
        if self._chained[1] is not None:
            self._chained[1](graph)
        present = {node.name for node in graph.nodes}
        erased: dict[frozenset, set[tuple[str, str | None]]] = {}
        for name, (stack, module, users) in self._before.items():
            if name not in present and stack and users:
                erased.setdefault(users, set()).add((stack, module))
        self.nodes = {}
        for node in graph.nodes:
            module = _innermost_module(node.meta)
            if node.op == "call_function" and not node.meta.get("stack_trace"):
                replaced = erased.get(frozenset(u.name for u in node.users), set())
                if len(replaced) == 1:  # the node it replaced, beyond doubt
                    stack, its_module = next(iter(replaced))
                    node.meta["stack_trace"] = stack
                    module = module or its_module
            self.nodes[node.name] = (node.meta.get("stack_trace"), module)

    def modules_of(self, entry: dict) -> list[str | None]:
        """One module path per stack trace of a kernel call's entry: the module of its nodes with that trace."""
        found = []
        for stack in entry.get("stack_traces", []):
            paths = [self.nodes[n][1] for n in entry.get("post_grad_nodes", [])
                     if n in self.nodes and self.nodes[n][0] == stack and self.nodes[n][1] is not None]
            found.append(paths[0] if paths else None)
        return found


def _custom_pass(fn):
    """``fn`` as a pass inductor accepts: a CustomGraphPass where this torch has one (its uuid: none, never cached)."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError:
        return fn

    class Pass(CustomGraphPass):
        def __call__(self, graph):
            fn(graph)

        def uuid(self):
            return None

    return Pass()


class InductorProvenance:
    """Turn inductor's provenance tracking on for the ``with`` block, and keep what it records per graph."""

    def __init__(self):
        self.graphs: list[dict] = []
        self._seen: set[tuple[str, str]] = set()
        self._saved: dict = {}
        self._nodes: _GraphNodes | None = None
        try:
            import torch._inductor.config as config
            import torch._inductor.debug as debug
        except ImportError:
            config = debug = None
        self._config, self._debug = config, debug
        #: False where this torch has no provenance tracking (nothing is recorded then)
        self.available = bool(
            config is not None and hasattr(config, "trace") and hasattr(config.trace, "provenance_tracking_level")
            and callable(getattr(debug, "create_kernel_information_json", None))
            and callable(getattr(debug, "dump_inductor_provenance_info", None)))

    def _snapshot(self) -> None:
        """Keep the kernel calls of inductor's record that no earlier snapshot held: the graph just compiled."""
        graph = {}
        for key, value in self._debug.create_kernel_information_json().items():
            mark = (key, json.dumps(value, sort_keys=True))
            if mark not in self._seen:
                self._seen.add(mark)
                if self._nodes is not None and isinstance(value, dict):
                    value = {**value, "modules": self._nodes.modules_of(value)}
                graph[key] = value
        if graph:
            self.graphs.append(graph)

    def __enter__(self) -> InductorProvenance:
        if not self.available:
            return self
        self._snapshot()  # what earlier compiles left is not this step's
        self.graphs.clear()
        config, debug = self._config, self._debug
        self._saved = {"level": config.trace.provenance_tracking_level, "dump": debug.dump_inductor_provenance_info,
                       "caches": getattr(config, "force_disable_caches", None)}
        config.trace.provenance_tracking_level = 1
        if self._saved["caches"] is not None:
            config.force_disable_caches = True
        if hasattr(config, "post_grad_custom_pre_pass") and hasattr(config, "post_grad_custom_post_pass"):
            self._saved["passes"] = (config.post_grad_custom_pre_pass, config.post_grad_custom_post_pass)
            self._nodes = _GraphNodes(*self._saved["passes"])
            config.post_grad_custom_pre_pass = _custom_pass(self._nodes.before)
            config.post_grad_custom_post_pass = _custom_pass(self._nodes.after)
        dump = self._saved["dump"]

        def dump_and_snapshot(*args, **kwargs):
            result = dump(*args, **kwargs)
            self._snapshot()
            return result

        debug.dump_inductor_provenance_info = dump_and_snapshot
        return self

    def __exit__(self, *exc) -> None:
        if not self.available or not self._saved:
            return
        self._debug.dump_inductor_provenance_info = self._saved["dump"]
        self._config.trace.provenance_tracking_level = self._saved["level"]
        if self._saved["caches"] is not None:
            self._config.force_disable_caches = self._saved["caches"]
        if "passes" in self._saved:
            self._config.post_grad_custom_pre_pass, self._config.post_grad_custom_post_pass = self._saved["passes"]
        self._saved = {}
        self._snapshot()
        self._nodes = None
