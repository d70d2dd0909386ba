"""A local kernel repository that serves Liger's GeGLU MLP to the ``kernels`` library.

``kernels`` loads a layer from a *kernel repository*: a folder with one build
variant per platform. Liger's Triton kernels run wherever Triton does, so one
platform-independent variant is enough::

    liger-kernels-<hash>/
      build/torch-universal/
        metadata.json              # id, name, version, license, backend: what kernels 0.17 reads
        liger_kernels/__init__.py  # `from . import layers`
        liger_kernels/layers.py    # LigerGEGLUMLP, LigerGEGLUMLPForward

``layers.LigerGEGLUMLP`` is the class of the installed ``liger-kernel``
package, imported, not copied: the same name the Hub repository
``kernels-community/liger-kernels`` exposes. ``layers.LigerGEGLUMLPForward``
carries only its ``forward``, which is what ``kernels.kernelize`` swaps into a
module. The folder is written on first use under the user's cache directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

PACKAGE = "liger_kernels"
VARIANT = "torch-universal"  # kernels accepts this variant on every backend, CPU included
FORWARD_LAYER = "LigerGEGLUMLPForward"

_INIT = '''"""Liger's layers, served from the installed liger-kernel package."""

from . import layers

__all__ = ["layers"]
'''

_LAYERS = f'''from liger_kernel.transformers.geglu import LigerGEGLUMLP
from torch import nn


class {FORWARD_LAYER}(nn.Module):
    """LigerGEGLUMLP's forward alone.

    kernelize() copies a layer's forward onto a module that already holds the
    weights, and refuses a layer with a constructor or members of its own.
    """

    forward = LigerGEGLUMLP.forward


__all__ = ["LigerGEGLUMLP", "{FORWARD_LAYER}"]
'''

_FILES = {f"{PACKAGE}/__init__.py": _INIT, f"{PACKAGE}/layers.py": _LAYERS}
_METADATA = {
    "name": "liger-kernels",
    "version": 1,
    "license": "BSD-2-Clause",
    "upstream": "https://github.com/linkedin/Liger-Kernel",
    "python-depends": [],  # liger-kernel is not in kernels' list of allowed dependencies; the import checks it
    "backend": {"type": "cuda"},
}
# The folder and the module name carry a hash of the content, so an edited repository is
# never confused with one written, or imported by kernels, before.
_DIGEST = hashlib.sha256(json.dumps([_METADATA, _FILES], sort_keys=True).encode()).hexdigest()[:12]
MODULE_ID = f"_{PACKAGE}_local_{_DIGEST}"  # kernels imports the package under this name


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/profiling-guide`` (``~/.cache/profiling-guide`` by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "profiling-guide"


def local_liger_repo(root: str | Path | None = None) -> Path:
    """The repository folder under ``root`` (default :func:`cache_dir`), written if missing."""
    repo = Path(root or cache_dir()) / f"liger-kernels-{_DIGEST}"
    if (repo / "build" / VARIANT / "metadata.json").is_file():
        return repo
    repo.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed into place, so a concurrent build never sees half a repository.
    tmp = Path(tempfile.mkdtemp(prefix=".liger-kernels-", dir=repo.parent))
    try:
        variant = tmp / "build" / VARIANT
        for name, text in _FILES.items():
            (variant / name).parent.mkdir(parents=True, exist_ok=True)
            (variant / name).write_text(text)
        (variant / "metadata.json").write_text(json.dumps({"id": MODULE_ID, **_METADATA}, indent=1) + "\n")
        try:
            tmp.rename(repo)
        except OSError:
            if not repo.is_dir():  # not another process that got there first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return repo
