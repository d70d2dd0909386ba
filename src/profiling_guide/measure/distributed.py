"""Start a job of several ranks under ``torchrun`` and collect what it wrote: one trace per rank and its run.json.

The job is ``python -m torch.distributed.run --standalone --nproc_per_node N``
(``torchrun``, PyTorch's own launcher) over a module of the guide, e.g.
:mod:`profiling_guide.kernels.train_ranks`. Every process it starts inherits
the NCCL variables of :data:`NCCL_SAFE_ENVIRONMENT`, which keep NVLink
multicast off on a machine whose GPUs are shared. Its output goes to the
console, never to a page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from profiling_guide.errors import GuideError

#: Set for every process of a job: NVLink multicast off in NCCL, PyTorch's symmetric memory and NVSHMEM.
NCCL_SAFE_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def torchrun(module: str, nproc: int, args: list[str], *, expect: list[Path], timeout_s: float = 600,
             python: str = sys.executable) -> None:
    """Run ``python -m module *args`` on ``nproc`` ranks under torchrun, then check it wrote every file of ``expect``.

    ``python`` runs the launcher and every rank (this interpreter by default).
    Raises a one-line GuideError if the job fails, runs past ``timeout_s`` or
    leaves a file of ``expect`` missing.
    """
    command = [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "--no-python", python, "-u", "-m", module, *args]
    env = {**os.environ, **NCCL_SAFE_ENVIRONMENT}
    console = sys.__stderr__ or sys.stderr
    try:
        done = subprocess.run(command, env=env, stdout=console, stderr=console, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise GuideError(f"the {nproc}-rank job of {module} ran past {timeout_s:.0f} s: see the console") from None
    if done.returncode != 0:
        raise GuideError(f"the {nproc}-rank job of {module} failed (exit status {done.returncode}): "
                         "its ranks' errors are on the console above")
    missing = [str(p) for p in expect if not p.is_file()]
    if missing:
        raise GuideError(f"the {nproc}-rank job of {module} wrote no {', '.join(missing)}")


def train_ranks(nproc: int, args: list[str], out: Path, *, python: str = sys.executable) -> dict:
    """:mod:`profiling_guide.kernels.train_ranks` on ``nproc`` ranks into ``out``; the run.json its rank 0 wrote."""
    torchrun("profiling_guide.kernels.train_ranks", nproc, [*args, "--out", str(out)], python=python,
             expect=[out / "run.json", *(out / f"rank{r}.trace.json.gz" for r in range(nproc))])
    return json.loads((out / "run.json").read_text())


def nccl_sweep(nproc: int, args: list[str]) -> dict:
    """``profiling-guide bench-nccl`` on ``nproc`` ranks (:mod:`profiling_guide.measure.bench_nccl`): its sweep."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "nccl_sweep.json"
        torchrun("profiling_guide.measure.bench_nccl", nproc, [*args, "-o", str(out)], expect=[out])
        return json.loads(out.read_text())
