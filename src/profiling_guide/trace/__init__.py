"""Typed events from a ``torch.profiler`` trace.

:mod:`~profiling_guide.trace.reader` streams the Chrome trace file and
validates it at the edge; :mod:`~profiling_guide.trace.model` holds the events
(CPU ops, runtime calls, kernels, steps, launch→kernel links);
:mod:`~profiling_guide.trace.kernel_names` decodes what a kernel's name says;
:mod:`~profiling_guide.trace.run_record` reads the ``.run.json`` beside a trace.
"""

from profiling_guide.trace.model import CpuOp, DeviceEvent, RuntimeCall, Step, Trace

__all__ = ["CpuOp", "DeviceEvent", "RuntimeCall", "Step", "Trace"]
