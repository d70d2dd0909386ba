"""Print the device time of each kernel of one training step of a variant (on a CUDA GPU), from torch.profiler.

    python scripts/step_kernels.py [fused|eager|compile|liger] [--rows 8192 --dim 768 --hidden 3072]
"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from profiling_guide.kernels.models import SimpleGeGLUMLP
from profiling_guide.measure.bench_step import _build, training_step

parser = argparse.ArgumentParser()
parser.add_argument("variant", nargs="?", default="fused")
parser.add_argument("--rows", type=int, default=8192)
parser.add_argument("--dim", type=int, default=768)
parser.add_argument("--hidden", type=int, default=3072)
args = parser.parse_args()
torch.manual_seed(0)
mlp = SimpleGeGLUMLP(args.dim, args.hidden, device="cuda", dtype=torch.bfloat16)
module, _ = _build(args.variant, mlp)
x = torch.randn(args.rows, args.dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
dy = torch.randn_like(x)
step = training_step(module)
for _ in range(5):
    step(x, dy)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        step(x, dy)
    torch.cuda.synchronize()
kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
per_step = len(kernels) // 10
total = 0.0
for i in range(per_step):
    times = sorted(k.device_time for k in kernels[i::per_step])
    total += times[len(times) // 2]
    print(f"{times[len(times) // 2]:8.1f} µs  {kernels[i].name[:100]}")
print(f"{total:8.1f} µs  sum of medians, {per_step} kernels per step")
