"""One call of a module captured into a CUDA graph, replayed for a few µs of CPU.

Launching a kernel from Python costs the CPU microseconds per kernel: Triton's
launcher binds and specializes the arguments and consults the autotuner's
cache; PyTorch's dispatcher does its own work for each op. A CUDA graph
records the kernels of one call once, with their arguments, and
``graph.replay()`` issues all of them with one call into the driver.

:class:`CapturedForward` follows the recipe of PyTorch's CUDA-graph
documentation (``torch.cuda.graph``): a few warm-up calls on a side stream (so
autotuning, compilation and lazy allocations happen before capture, where
they are not allowed), the capture of one call that reads a *static* input
tensor, and on every call a copy of the new input into that tensor and a
replay. The output is a static tensor too: each replay overwrites it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from profiling_guide.errors import GuideError

WARMUP_CALLS = 3


class CapturedForward:
    """``fn`` on inputs shaped like ``example_x``, captured once into a CUDA graph and replayed on each call.

    ``captured(x)`` copies ``x`` into the graph's static input (unless ``x``
    *is* that tensor, :attr:`static_x`), replays the graph and returns the
    static output, :attr:`static_y`. That output is overwritten by the next
    replay: ``.clone()`` it to keep it. ``fn`` runs under ``torch.no_grad()``,
    and the graph keeps reading the tensors it was captured with (weights
    included): capture again after replacing them.
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], example_x: torch.Tensor,
                 *, warmup_calls: int = WARMUP_CALLS):  # fmt: skip
        if not torch.cuda.is_available():
            raise GuideError("capturing a CUDA graph needs a CUDA GPU and none is visible: call the module directly")
        if not isinstance(example_x, torch.Tensor) or example_x.device.type != "cuda":
            where = example_x.device if isinstance(example_x, torch.Tensor) else type(example_x).__name__
            raise GuideError(f"a CUDA graph captures work on a CUDA device: pass an example input on it, got {where}")
        self.fn = fn
        self.static_x = example_x.clone()
        with torch.no_grad():
            # Warm up on a side stream, as PyTorch's docs do: autotuning, compiling
            # and allocator warm-up must happen before capture, not inside it.
            side = torch.cuda.Stream(device=example_x.device)
            side.wait_stream(torch.cuda.current_stream(example_x.device))
            with torch.cuda.stream(side):
                for _ in range(warmup_calls):
                    fn(self.static_x)
            torch.cuda.current_stream(example_x.device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_y = fn(self.static_x)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Replay on ``x``; returns :attr:`static_y`, overwritten by the next call."""
        if x is not self.static_x:
            if x.shape != self.static_x.shape or x.dtype != self.static_x.dtype or x.device != self.static_x.device:
                raise GuideError(
                    f"this graph was captured for inputs {list(self.static_x.shape)} {self.static_x.dtype} on "
                    f"{self.static_x.device}, got {list(x.shape)} {x.dtype} on {x.device}: capture one for that input"
                )
            self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y
