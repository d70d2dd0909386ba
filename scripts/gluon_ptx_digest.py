"""One digest per variant of the Gluon kernels' PTX for sm_90, compiled on the CPU: to check a rewrite changed no instruction.

    python scripts/gluon_ptx_digest.py [--dump DIR]

Compiles every variant the compile tests compile (``tests/test_pingpong.py``,
``tests/test_pingpong_backward.py``): the forward with one and two consumers,
each without and with g and u stored; the backward with two consumers, one
consumer, and 128-column tiles holding two of four chunks; and the default
forward and backward for one row, which a launch passes as a constant. Each at
the guide's shape, launched as ``launch_plan`` launches it, compiled by this Triton as
``tests/hopper.py`` compiles (no GPU needed). Then the Triton designs that
share their device helpers (``geglu_common``: tile order, GELU-tanh and its
derivative) with the Gluon kernels, in bf16 with the hardware tanh and in fp32
with the exp formula: ``"dual"``, ``"packed"`` (storing g and u and not) and
the backward's pointer kernel, in the first GPU config.

Run it under another Triton by putting that Triton first on the path, e.g.
``pip install --no-deps --target /tmp/t36 triton==3.6.0`` and
``PYTHONPATH=/tmp/t36 python scripts/gluon_ptx_digest.py``: Triton 3.6 also
compiles for sm_90 without a GPU.

Prints, per variant, a SHA-256 of its PTX normalized only where a rewrite of
the source may change the text without changing the code: the kernel's
mangled name, ``.loc``/``.file`` debug lines, the ``$L__tmp`` labels that
only the debug sections refer to (they mark where an inlined function's lines
begin and end, so a helper split in two adds one), the debug sections and
``//`` comments. Run it before and after a change:
the same digest is the same PTX. Where they differ, ``--dump DIR`` writes
each variant's normalized PTX and its instruction counts by opcode
(``<variant>.ptx``, ``<variant>.opcodes``) to compare.
Prints progress on stderr; each compile takes a few seconds to a minute.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import re
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # a Gluon kernel compiles only outside Triton's interpreter

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]
import torch  # noqa: E402
from hopper import H100_SHARED, compile_gluon_for_h100  # noqa: E402

from profiling_guide.kernels import geglu_backward as gb  # noqa: E402
from profiling_guide.kernels import geglu_backward_pingpong as bp  # noqa: E402
from profiling_guide.kernels import geglu_kernels as gk  # noqa: E402
from profiling_guide.kernels import geglu_pingpong as gp  # noqa: E402

ROWS, DIM, HIDDEN = 8192, 768, 3072  # the guide's shape, as the compile tests use
SMS = 132


def _empty(*shape):
    return torch.empty(shape, dtype=torch.bfloat16)


def forward(consumers: int, save_gu: bool, rows: int = ROWS):
    config = triton_config(gp.DEFAULT_CONFIG, CONSUMERS=consumers)
    x, w, h, gu = _empty(rows, DIM), _empty(2 * HIDDEN, DIM), _empty(rows, HIDDEN), _empty(rows, 2 * HIDDEN)
    _, args, meta = gp.launch_plan(x, w, h, config, H100_SHARED, SMS, gu=gu if save_gu else None)
    return compile_gluon_for_h100(gp._geglu_pingpong_gemm_kernel, args, meta)


def backward(config, rows: int = ROWS):
    dy, wd = _empty(rows, DIM), _empty(DIM, HIDDEN)
    gu, dgu = _empty(rows, 2 * HIDDEN), _empty(rows, 2 * HIDDEN)
    _, args, meta = bp.launch_plan(dy, wd, gu, dgu, config, H100_SHARED, SMS)
    return compile_gluon_for_h100(bp._geglu_backward_pingpong_gemm_kernel, args, meta)


def triton_config(config, **changes):
    import triton

    return triton.Config({**config.kwargs, **changes}, num_warps=config.num_warps)


def _backward_config(block_n: int, stages: int, consumers: int, gu_bufs: int | None):
    # as the compile tests' configs: 128×block_n×64 tiles, GROUP_M 1, 32-column chunks
    kwargs = {**bp.DEFAULT_CONFIG.kwargs, "BLOCK_N": block_n, "GROUP_M": 1, "NUM_STAGES": stages,
              "CONSUMERS": consumers, "GU_BUFS": block_n // 32 if gu_bufs is None else gu_bufs}  # fmt: skip
    return triton_config(bp.DEFAULT_CONFIG, **kwargs)


def compile_triton_for_h100(kernel, args, constants, config):
    """A ``@triton.jit`` kernel (under its autotuner and heuristics) compiled for sm_90 with ``config``'s tiles."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction, mangle_type

    while not isinstance(kernel, JITFunction):
        kernel = kernel.fn
    constants = {**constants, **config.kwargs}
    signature, constexprs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if i < len(args):
            signature[name] = mangle_type(args[i])
        else:
            signature[name], constexprs[(i,)] = "constexpr", constants[name]
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    return triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", 90, 32), options=options)


def triton_design(design: str, dtype: torch.dtype, save_gu: bool = False):
    """One of the Triton designs at the guide's shape: bf16 with the hardware tanh, or fp32 with the exp formula."""
    fast = dtype != torch.float32
    config = gk.GPU_CONFIGS[0] if fast else gk.FP32_CONFIG
    precision = {"INPUT_PRECISION": "tf32" if fast else "ieee", "FAST_TANH": fast, "EVEN_K": True}
    x, h = torch.empty(ROWS, DIM, dtype=dtype), torch.empty(ROWS, HIDDEN, dtype=dtype)
    if design == "dual":
        wg, wu = torch.empty(HIDDEN, DIM, dtype=dtype), torch.empty(HIDDEN, DIM, dtype=dtype)
        args = (x, wg, wu, h, ROWS, HIDDEN, DIM, *x.stride(), *wg.stride(), *wu.stride(), *h.stride())
        return compile_triton_for_h100(gk._geglu_dual_gemm_kernel, args, precision, config)
    if design == "packed":
        w, gu = torch.empty(2 * HIDDEN, DIM, dtype=dtype), torch.empty(ROWS, 2 * HIDDEN, dtype=dtype)
        args = (x, w, h, gu, ROWS, HIDDEN, DIM, *x.stride(), *w.stride(), *h.stride(), gu.stride(0))
        return compile_triton_for_h100(gk._geglu_packed_gemm_kernel, args, {**precision, "SAVE_GU": save_gu}, config)
    dy, wd = torch.empty(ROWS, DIM, dtype=dtype), torch.empty(DIM, HIDDEN, dtype=dtype)
    gu, dgu = torch.empty(ROWS, 2 * HIDDEN, dtype=dtype), torch.empty(ROWS, 2 * HIDDEN, dtype=dtype)
    args = (dy, wd, gu, dgu, ROWS, HIDDEN, DIM, *dy.stride(), *wd.stride(), gu.stride(0), dgu.stride(0))
    return compile_triton_for_h100(gb._geglu_backward_gemm_kernel, args, {**precision, "PREFETCH": False}, config)


VARIANTS = {
    "forward consumers=2": lambda: forward(2, False),
    "forward consumers=1": lambda: forward(1, False),
    "forward consumers=2 save_gu": lambda: forward(2, True),
    "forward consumers=1 save_gu": lambda: forward(1, True),
    "backward default": lambda: backward(bp.DEFAULT_CONFIG),
    "backward consumers=1": lambda: backward(_backward_config(64, 6, 1, None)),
    "backward 128x128 gu_bufs=2": lambda: backward(_backward_config(128, 5, 2, 2)),
    # one row: a launch passes M = 1 as a constant (tests/hopper.py specializes as a launch does)
    "forward consumers=2 rows=1": lambda: forward(2, False, rows=1),
    "backward default rows=1": lambda: backward(bp.DEFAULT_CONFIG, rows=1),
    **{f"triton {design}{' save_gu' * save} {dtype_name}": (
        lambda design=design, dtype=dtype, save=save: triton_design(design, dtype, save))
       for design, save in [("dual", False), ("packed", False), ("packed", True), ("backward", False)]
       for dtype_name, dtype in [("bf16", torch.bfloat16), ("fp32", torch.float32)]},
}


def normalized(ptx: str, kernel_name: str) -> str:
    """``ptx`` without its debug lines, labels and comments, the kernel's mangled name replaced by ``KERNEL``."""
    if re.search(r"\$L__tmp\d+(?![\d:])", re.sub(r"\.section\s+\.debug_\w+\s*\{.*?\n\s*\}", "", ptx, flags=re.S)):
        raise SystemExit("a $L__tmp label is used outside the debug sections: this script would hide a difference")
    lines = []
    for line in ptx.replace(kernel_name, "KERNEL").splitlines():
        line = re.sub(r"\s*//.*$", "", line)
        if re.match(r"\s*\.(loc|file)\b", line) or re.fullmatch(r"\$L__tmp\d+:", line) or not line.strip():
            continue
        lines.append(line)
    # the DWARF sections carry line numbers and file names: dropped whole
    text = "\n".join(lines)
    return re.sub(r"\.section\s+\.debug_\w+\s*\{.*?\n\s*\}", "", text, flags=re.S)


def opcode_counts(ptx: str) -> collections.Counter:
    """Instructions by opcode (``mov.u32``, ``wgmma.mma_async...``): what a renumbering of registers leaves alone."""
    counts = collections.Counter()
    for line in ptx.splitlines():
        m = re.match(r"\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)\s", line)
        if m and not line.lstrip().startswith("."):
            counts[m.group(1)] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, help="write each variant's normalized PTX and opcode counts here")
    parser.add_argument("--only", help="compile only the variants whose name contains this")
    options = parser.parse_args()
    for name, build in VARIANTS.items():
        if options.only and options.only not in name:
            continue
        print(f"compiling {name} ...", file=sys.stderr, flush=True)
        compiled = build()
        ptx = normalized(compiled.asm["ptx"], compiled.metadata.name)
        print(f"{hashlib.sha256(ptx.encode()).hexdigest()[:16]}  {name}", flush=True)
        if options.dump:
            options.dump.mkdir(parents=True, exist_ok=True)
            stem = options.dump / name.replace(" ", "_").replace("=", "")
            stem.with_suffix(".ptx").write_text(ptx + "\n")
            counts = sorted(opcode_counts(ptx).items())
            stem.with_suffix(".opcodes").write_text("".join(f"{n:6d} {op}\n" for op, n in counts))


if __name__ == "__main__":
    main()
