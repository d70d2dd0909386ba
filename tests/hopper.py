"""Standing in for a Hopper GPU on the CPU: a CUDA tensor's shape, an H100's shared memory, its compiler.

Gluon kernels do not run in Triton's interpreter, so the CPU checks them
compiled: PTX and a cubin for sm_90 from this Triton, no GPU needed. Only in a
process whose kernels were imported compiled (see ``tests/conftest.py``):
the tests that compile are marked ``compiled``.
"""

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

H100_SHARED = 232448  # bytes of shared memory one program may opt in to on an H100 (227 KiB)


def cuda_like(rows, dim, dtype=torch.bfloat16):
    """What choose_design reads of a CUDA tensor, from a CPU tensor: shape, strides, dtype, address, device."""
    t = torch.empty(rows, dim, dtype=dtype)
    return SimpleNamespace(shape=t.shape, dtype=dtype, device=torch.device("cuda", 0), stride=t.stride,
                           element_size=t.element_size, data_ptr=lambda: 0)  # fmt: skip


def compile_gluon_for_h100(kernel, args, meta):
    """A Gluon kernel compiled by this Triton for sm_90 with ``args`` and ``meta``, as a launch would compile it."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    signature, constants = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if i < len(args):
            # specialized as a launch does: an integer argument of 1 becomes a constant
            signature[name] = mangle_type(args[i], specialize=True)
            if signature[name] == "constexpr":
                constants[(i,)] = args[i]
        else:
            signature[name], constants[(i,)] = "constexpr", meta[name]
    source = GluonASTSource(kernel, signature, constants)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": meta["num_warps"]})


def ptxas_report(ptx: str, tmp_path) -> str:
    """``ptxas -v``'s report for sm_90a, from the ptxas this Triton ships."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        ptxas = get_ptxas(90).path
    except (ImportError, TypeError, AttributeError) as exc:  # an internal API: say so rather than guess
        pytest.skip(f"this Triton's ptxas is not where {Path(__file__).name} looks: {exc}")
    source = tmp_path / "kernel.ptx"
    source.write_text(ptx)
    out = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(source), "-o", str(tmp_path / "kernel.cubin")],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stderr
