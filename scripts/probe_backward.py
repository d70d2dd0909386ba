"""Time, on a CUDA GPU, the fused MLP's backward kernel against cuBLAS's dh GEMM, and the forward with and without g, u saved.

    python scripts/probe_backward.py [--rows 8192 --dim 768 --hidden 3072]

Device µs from ``triton.testing.do_bench`` (median over its repetitions, L2
flushed between them), with the autotuned config of each kernel.
"""

import argparse

import torch
import triton.testing

from profiling_guide.kernels import fused_mlp as fm
from profiling_guide.kernels import geglu_backward as gb
from profiling_guide.kernels.geglu_kernels import autotuned_config

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, default=8192)
parser.add_argument("--dim", type=int, default=768)
parser.add_argument("--hidden", type=int, default=3072)
a = parser.parse_args()
M, D, H = a.rows, a.dim, a.hidden
torch.manual_seed(0)
bf = dict(device="cuda", dtype=torch.bfloat16)
x, dy = torch.randn(M, D, **bf), torch.randn(M, D, **bf)
wg, wu = torch.randn(H, D, **bf) / D**0.5, torch.randn(H, D, **bf) / D**0.5
wd = torch.randn(D, H, **bf) / H**0.5
packed = fm.pack_gate_up(wg, wu)
gu = torch.randn(M, 2 * H, **bf)


def bench(fn):
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e3


rows = [("cuBLAS dh = dy @ Wd", bench(lambda: dy @ wd), None)]
for design in gb.KERNELS:
    rows.append((f"geglu_backward {design}", bench(lambda design=design: gb.geglu_backward(dy, wd, gu, design=design)),
                 fm.config_text(autotuned_config(gb.KERNELS[design], M, H, D, torch.bfloat16))))
rows.append(("cuBLAS gate and up GEMMs", bench(lambda: (x @ wg.T, x @ wu.T)), None))
for design in fm.BACKWARD_DESIGNS:
    for save in (False, True):
        rows.append((f"forward {design}{' saving g, u' if save else ''}",
                     bench(lambda d=design, s=save: fm.geglu(x, wg, wu, design=d, packed_weight=packed, save_gate_up=s)),
                     None))
print(f"{torch.cuda.get_device_name()}, M={M} dim={D} hidden={H}, bf16")
for name, us, config in rows:
    print(f"{us:9.1f} µs  {name}" + (f"   [{config}]" if config else ""))
