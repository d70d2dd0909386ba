"""Probe, on a CUDA GPU: what each variant saves for backward, a memory snapshot, and profiler traces of a step.

    python scripts/probe_training_step.py OUT_DIR

Writes ``OUT_DIR/saved.json`` (per variant: the tensors autograd saved in the
forward, through ``torch.autograd.graph.saved_tensors_hooks``),
``OUT_DIR/snapshot.json`` (a summary of ``torch.cuda.memory._snapshot()`` for
eager) and ``OUT_DIR/<variant>.trace.json.gz`` (one training step each, with
``profile_memory=True``).
"""

import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from profiling_guide.kernels.fused_mlp import FusedGeGLUMLP
from profiling_guide.kernels.models import SimpleGeGLUMLP, load_liger_geglu_mlp

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
mlp = SimpleGeGLUMLP(768, 3072, device="cuda", dtype=torch.bfloat16)
x = torch.randn(64, 128, 768, device="cuda", dtype=torch.bfloat16, requires_grad=True)
dy = torch.randn_like(x)
liger = load_liger_geglu_mlp(768, 3072, device="cuda", dtype=torch.bfloat16).module
liger.load_state_dict(mlp.state_dict())
variants = {"eager": mlp, "compile": torch.compile(mlp, dynamic=False), "liger": liger,
            "fused": FusedGeGLUMLP.from_mlp(mlp)}
saved = {}
for name, module in variants.items():
    for _ in range(3):
        module(x).backward(dy)
    seen = []

    def pack(t, seen=seen):
        seen.append({"shape": list(t.shape), "dtype": str(t.dtype), "storage": t.untyped_storage().data_ptr(),
                     "bytes": t.untyped_storage().nbytes(), "is_x": t.untyped_storage().data_ptr() == x.data_ptr(),
                     "grad_fn": type(t.grad_fn).__name__ if t.grad_fn else None})
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = module(x)
    y.backward(dy)
    saved[name] = seen
    print(name, [(s["shape"], s["grad_fn"]) for s in seen], flush=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True) as prof:
        for _ in range(2):
            for t in (x, *module.parameters()):
                t.grad = None
            module(x).backward(dy)
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(out / f"{name}.trace.json"))
(out / "saved.json").write_text(json.dumps(saved, indent=1))

torch.cuda.memory._record_memory_history(max_entries=100_000)
for t in (x, *mlp.parameters()):
    t.grad = None
y = mlp(x)
y.backward(dy)
torch.cuda.synchronize()
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
trace = snap["device_traces"][0]
summary = {"keys": list(snap), "events": len(trace), "first": trace[:3],
           "actions": sorted({e["action"] for e in trace}),
           "frames_example": trace[len(trace) // 2].get("frames", [])[:8]}
(out / "snapshot.json").write_text(json.dumps(summary, indent=1, default=str))
import pickle
(out / "snapshot.pickle").write_bytes(pickle.dumps(snap))
print("snapshot", summary["events"], summary["actions"])
