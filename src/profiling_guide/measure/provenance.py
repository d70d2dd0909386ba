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
"""

from __future__ import annotations

import json


class InductorProvenance:
    """Turn inductor's provenance tracking on for the ``with`` block, and keep what it records per graph."""

    def __init__(self):
        self.graphs: list[dict] = []
        self._seen: set[tuple[str, str]] = set()
        self._saved: dict = {}
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
        self._saved = {}
        self._snapshot()
