"""The models the guide profiles.

``SimpleGeGLUMLP`` is the MLP of the original write-up; ``load_liger_geglu_mlp``
loads Liger's fused version through the ``kernels`` library, from the Hugging
Face Hub when asked to, else from a kernel repository generated on this machine
(:mod:`profiling_guide.kernels.liger_repo`); in replay it builds the same layer without
``kernels`` and without the network. :mod:`profiling_guide.kernels.kernelize` swaps
Liger's forward into ``SimpleGeGLUMLP`` the way transformers models take hub
kernels. Our own epilogue-fused MLP lives in :mod:`profiling_guide.kernels.fused_mlp`.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.parse
from dataclasses import dataclass
from importlib.metadata import version
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from profiling_guide.errors import GuideError
from profiling_guide.kernels.liger_repo import local_liger_repo

LIGER_HUB_REPO = "kernels-community/liger-kernels"
LIGER_HUB_VERSION = 1


class SimpleGeGLUMLP(nn.Module):
    """``down(gelu_tanh(gate(x)) * up(x))``: the GeGLU MLP of Gemma-style models."""

    def __init__(self, dim: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
        self.up_proj = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
        self.down_proj = nn.Linear(hidden, dim, bias=False, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


def mlp_flops(rows: int, dim: int, hidden: int) -> int:
    """FLOPs of one GeGLU MLP forward: three GEMMs of ``2·rows·dim·hidden`` each."""
    return 3 * 2 * rows * dim * hidden


LIGER_MAX_HIDDEN = 65536  # liger_kernel.ops.utils.calculate_settings refuses wider rows
HUB_ENV = "PROFILING_GUIDE_HUB"  # "1": try the Hub before the local repository


@dataclass
class LigerMLP:
    """A loaded Liger GeGLU MLP and where its code came from."""

    module: nn.Module
    source: str  # "hub" | "local-repo" (both through kernels) | "liger-kernel <version>" (replay)
    note: str  # one line for the console and the page


def hub_reachable(timeout_s: float = 1.5) -> bool:
    """True if a TCP connection to the Hub endpoint opens within ``timeout_s``.

    ``kernels.get_kernel`` waits several seconds and then raises a misleading
    error when the Hub is unreachable; a short connect tells us first.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        return False
    url = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def load_liger_geglu_mlp(
    dim: int,
    hidden: int,
    *,
    hidden_act: str = "gelu_pytorch_tanh",
    device=None,
    dtype=None,
    use_hub: bool | None = None,
    offline: bool = False,
) -> LigerMLP:
    """Build Liger's ``LigerGEGLUMLP`` for ``dim``/``hidden``.

    Live (``offline=False``) the layer always comes through ``kernels``:

    * from the Hub, ``kernels.get_kernel("kernels-community/liger-kernels",
      version=1)``, only when asked: ``use_hub=True``, or ``use_hub=None`` with
      ``$PROFILING_GUIDE_HUB=1`` (then a short connect checks the Hub first,
      unless ``$LOCAL_KERNELS`` is set, which kernels resolves without it);
    * otherwise, and when the Hub fails, from the local kernel repository
      :func:`~profiling_guide.kernels.liger_repo.local_liger_repo` through
      ``kernels.get_local_kernel``. This is the default: the Hub is often out
      of reach from GPU machines, and a page should not wait on it.

    ``offline=True`` (replay) opens no socket and calls nothing in ``kernels``:
    the same class comes straight from the ``liger-kernel`` package, built on
    ``device`` (``meta`` in replay). The returned ``note`` says which path was used.
    """
    if hidden_act not in {"gelu_pytorch_tanh", "gelu_tanh"}:
        raise GuideError(
            f"Liger's GeGLU MLP implements only the tanh GELU, not {hidden_act!r}: "
            "use hidden_act='gelu_pytorch_tanh'"
        )
    if hidden > LIGER_MAX_HIDDEN:
        # Liger gives each row of the [rows, hidden] activation to one program, in one block of
        # the next power of two ≥ hidden columns; Triton caps a block at 2**16 elements.
        raise GuideError(
            f"Liger's GeGLU kernel takes one row of {hidden} hidden units per program, and its block "
            f"(the next power of two) may hold at most {LIGER_MAX_HIDDEN}: use --hidden {LIGER_MAX_HIDDEN} or less"
        )
    config = SimpleNamespace(hidden_size=dim, intermediate_size=hidden, hidden_act=hidden_act)
    layer_cls, source, note = _liger_layer_class(use_hub, offline)
    with torch.device(device or "cpu"):
        module = layer_cls(config)
    return LigerMLP(module.to(dtype=dtype) if dtype else module, source, note)


def _liger_layer_class(use_hub: bool | None, offline: bool):
    # Every path ends in liger-kernel's code (the local repository imports it), so say first if it is missing.
    # liger-kernel and kernels are optional (the liger extra): imported only when a Liger MLP is built.
    try:
        from liger_kernel.transformers.geglu import LigerGEGLUMLP
    except ImportError as exc:
        raise GuideError(
            f"Liger's GeGLU MLP is unavailable: the liger-kernel package is not installed ({exc.name}): "
            "pip install 'profiling-guide[liger]'"
        ) from None
    pkg = f"liger-kernel {version('liger-kernel')}"
    if offline:
        return LigerGEGLUMLP, pkg, f"Liger GeGLU MLP from the {pkg} package (replay: no kernels call, no network)"
    try:
        import kernels
    except ImportError:
        raise GuideError(
            "the kernels library is not installed, and live runs load Liger through it: "
            "pip install 'profiling-guide[liger]'"
        ) from None
    hub_error = f"Hub not tried; {HUB_ENV}=1 tries it first"
    if use_hub is None:
        use_hub = os.environ.get(HUB_ENV) == "1"
        # kernels resolves $LOCAL_KERNELS before the Hub, so then there is nothing to probe.
        if use_hub and not os.environ.get("LOCAL_KERNELS") and not hub_reachable():
            use_hub, hub_error = False, "Hub unreachable"
    if use_hub:
        start = time.perf_counter()
        try:
            liger = kernels.get_kernel(LIGER_HUB_REPO, version=LIGER_HUB_VERSION)
            return liger.layers.LigerGEGLUMLP, "hub", (
                f"Liger GeGLU MLP through kernels.get_kernel from the Hub "
                f"({LIGER_HUB_REPO}, version {LIGER_HUB_VERSION})"
            )
        except Exception as exc:  # kernels raises ValueError/OSError/HTTP errors alike
            hub_error = f"Hub failed: {type(exc).__name__} after {time.perf_counter() - start:.1f} s"
    repo = local_liger_repo()
    liger = kernels.get_local_kernel(repo)
    return liger.layers.LigerGEGLUMLP, "local-repo", (
        f"Liger GeGLU MLP through kernels.get_local_kernel from the local kernel repository {repo.name} "
        f"(its layers import {pkg}; {LIGER_HUB_REPO}: {hub_error})"
    )
