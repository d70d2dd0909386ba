"""Liger's forward swapped into our unchanged MLP, the way transformers models take hub kernels.

A transformers model marks a layer class with a *layer name*
(``@use_kernel_forward_from_hub("RMSNorm")``) and otherwise runs its own
code. ``kernels.kernelize(model, ...)`` then looks each marked module's name
up in a *kernel mapping* (layer name → device → repository) and replaces the
module's ``forward`` with the mapped layer's, keeping the module and its
weights. So the forward that replaces ours reads ``self.gate_proj``,
``self.up_proj`` and ``self.down_proj``: the names both MLPs use.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from profiling_guide.kernels.liger_repo import FORWARD_LAYER, local_liger_repo
from profiling_guide.kernels.models import SimpleGeGLUMLP

GEGLU_LAYER = "GeGLUMLP"  # the name the model declares; the mapping decides what serves it

try:
    from kernels import use_kernel_forward_from_hub
except ImportError:  # without kernels the class keeps its own forward, as in transformers

    def use_kernel_forward_from_hub(layer_name: str):
        return lambda cls: cls


@use_kernel_forward_from_hub(GEGLU_LAYER)
class HubGeGLUMLP(SimpleGeGLUMLP):
    """``SimpleGeGLUMLP`` with a hub layer name: unchanged until kernelized."""


# kernels is optional (the liger extra); its import stays in the body also because chapter 4's
# recordings fingerprint this function's code.
def kernelize_with_liger(model: nn.Module, device_type: str = "cuda", repo: str | Path | None = None) -> nn.Module:
    """Map ``GeGLUMLP`` on ``device_type`` to Liger's forward and kernelize ``model`` for inference.

    The mapping points at the local kernel repository (``repo``, default
    :func:`~profiling_guide.kernels.liger_repo.local_liger_repo`), loaded through
    ``kernels.LocalLayerRepository``. A mapping that cannot be applied raises
    rather than leaving our own forward in place unnoticed.
    """
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_mapping

    layer = LocalLayerRepository(Path(repo) if repo else local_liger_repo(), layer_name=FORWARD_LAYER)
    with use_kernel_mapping({GEGLU_LAYER: {device_type: layer}}):
        return kernelize(model, mode=Mode.INFERENCE, device=device_type, use_fallback=False)
