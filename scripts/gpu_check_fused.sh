#!/usr/bin/env bash
# On a machine with a CUDA GPU, from the repository root:
#   scripts/gpu_check_fused.sh
# 1. the fused GeGLU kernels' GPU tests (every design against float64, CUDA-graph replay, host cost);
# 2. the CPU time to issue one forward at the guide's shape: eager, ours direct, ours captured.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET  # the compiled kernels, not Triton's interpreter
python -m pytest -m gpu tests/test_fused_mlp_gpu.py -q -p no:cacheprovider "$@"
python - <<'PY'
import torch

from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.measure.timing import cpu_issue_time
from profiling_guide.kernels.models import SimpleGeGLUMLP

batch, seq, dim, hidden = 64, 128, 768, 3072
torch.manual_seed(0)
eager = SimpleGeGLUMLP(dim, hidden, device="cuda", dtype=torch.bfloat16)
fused = FusedGeGLUMLP.from_mlp(eager)
x = torch.randn(batch, seq, dim, device="cuda", dtype=torch.bfloat16)
captured = fused.captured(x)
print(f"{torch.cuda.get_device_name()}, [{batch}, {seq}, {dim}] → {hidden} bf16, design {fused.design_ran!r}")
print("CPU µs to issue one forward (median, IQR):")
with torch.no_grad():
    for name, call in (("eager (SimpleGeGLUMLP)", lambda: eager(x)), ("ours direct (Triton's launcher)", lambda: fused(x)),
                       ("ours captured (CUDA graph)", lambda: captured(x))):
        print(f"  {name:<32} {cpu_issue_time(call):.1f}")
PY
