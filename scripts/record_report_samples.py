"""Record four sample traces on a CUDA GPU and write ``profiling-guide report`` for each.

    python scripts/record_report_samples.py OUT_DIR [--dry-run]

Each sample is profiled with the guide's schedule (skip one step, warm up one,
record three, ``record_function`` label, ``record_shapes=True``) through
:func:`profiling_guide.report.profile_own.profile_callable`, which writes
``<name>.trace.json.gz``, ``<name>.run.json`` and ``<name>.report.html``:

* ``llama_train_step``: forward, backward and AdamW step of a small Llama
  from Hugging Face transformers, built from its config (no weights are
  downloaded), batch 8 × 128 tokens, bf16;
* ``llama_forward.compiled``: the same model's forward under ``torch.compile``;
* ``cuda_graph_replay``: a small MLP's forward captured in a
  ``torch.cuda.CUDAGraph``, then replayed;
* ``two_streams``: GEMMs on one stream while another stream scales a large
  tensor, concurrently.

The reference rates (GEMM and copy) are measured once and shared. The whole
run takes well under a minute on an H100 (most of it compiling). Without
transformers the two Llama samples are skipped in one line each.

``--dry-run`` needs no GPU: it checks OUT_DIR, builds each sample on the CPU
where the sample can run there (the Llama step and forward, the MLP) and runs
one step, and lists what a GPU run would record.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import profiling_guide  # noqa: F401 - installed, or run from a checkout:
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch
from torch import nn

from profiling_guide.errors import GuideError

LLAMA = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=4, vocab_size=1000, max_position_embeddings=256)
BATCH, SEQ = 8, 128


class Skip(Exception):
    """A sample that cannot run here, said in one line."""


def _llama(device: str):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:
        raise Skip(f"transformers is not importable ({exc})") from None
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**LLAMA)).to(device=device, dtype=torch.bfloat16)
    ids = torch.randint(0, LLAMA["vocab_size"], (BATCH, SEQ), device=device)
    return model, ids


def llama_train_step(device: str = "cuda"):
    """Factory: one training step (forward, loss, backward, AdamW) of the small Llama."""
    model, ids = _llama(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def llama_forward(device: str = "cuda"):
    """Factory: the small Llama's forward without gradients (``profile`` compiles it)."""
    model, ids = _llama(device)
    model.eval()

    def step():
        with torch.no_grad():
            return model(input_ids=ids).logits

    return step


def _mlp(device: str):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device, torch.bfloat16)
    return mlp, torch.randn(256, 1024, device=device, dtype=torch.bfloat16)


def cuda_graph_replay(device: str = "cuda"):
    """Factory: capture the MLP's forward in a CUDA graph; each step replays it (one launch, many kernels)."""
    mlp, x = _mlp(device)
    with torch.no_grad():
        if device != "cuda":
            return lambda: mlp(x)  # --dry-run: the forward the graph would hold
        side = torch.cuda.Stream()  # warm up on a side stream before capture, as torch.cuda.graphs asks
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                mlp(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = mlp(x)

    def step():
        graph.replay()
        return out

    return step


def two_streams(device: str = "cuda"):
    """Factory: GEMMs on one stream while another scales a 256 MiB tensor; the default stream waits for both."""
    if device != "cuda":
        raise Skip("needs CUDA streams")
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    big = torch.randn(128 << 20, device=device, dtype=torch.bfloat16)
    gemms, scales = torch.cuda.Stream(), torch.cuda.Stream()

    def step():
        main = torch.cuda.current_stream()
        gemms.wait_stream(main)
        scales.wait_stream(main)
        with torch.cuda.stream(gemms):
            for _ in range(4):
                c = a @ a
        with torch.cuda.stream(scales):
            for _ in range(4):
                big.mul_(1.0001)
        main.wait_stream(gemms)
        main.wait_stream(scales)
        return c

    return step


# name, factory, compile
SAMPLES = [
    ("llama_train_step", llama_train_step, False),
    ("llama_forward.compiled", llama_forward, True),
    ("cuda_graph_replay", cuda_graph_replay, False),
    ("two_streams", two_streams, False),
]


def dry_run(out: Path) -> int:
    print(f"dry run: {out} is writable; no GPU is used")
    for name, factory, compiled in SAMPLES:
        try:
            step = factory("cpu")
            step()
            print(f"  {name}: builds and runs one step on the CPU; on a GPU it records "
                  f"{name}.trace.json.gz{' (compiled)' if compiled else ''} and its report")
        except Skip as why:
            print(f"  {name}: not run on the CPU ({why})")
    return 0


def record(out: Path) -> int:
    from profiling_guide.reference_rates import measure_reference_rates

    from profiling_guide.report.profile_own import profile_callable

    start = time.perf_counter()
    rates = measure_reference_rates()
    print(f"reference rates: GEMM {rates['gemm_tflops']['median']:.0f} TFLOP/s, "
          f"copy {rates['copy_tbps']['median']:.2f} TB/s ({time.perf_counter() - start:.1f} s)", flush=True)
    failed = 0
    for name, factory, compiled in SAMPLES:
        t0 = time.perf_counter()
        try:
            result = profile_callable(factory, out, name=name, compile=compiled, rates=rates)
        except Skip as why:
            print(f"skipped {name}: {why}")
            continue
        except Exception as exc:  # noqa: BLE001 - one sample failing must not cost the others
            failed += 1
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"failed {name}: {type(exc).__name__}: {first}")
            continue
        print(f"{name}: {result.report} ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the traces, run records and reports")
    parser.add_argument("--dry-run", action="store_true", help="check what can be checked without a GPU")
    args = parser.parse_args(argv)
    from profiling_guide.report.profile_own import check_out_dir

    try:
        out = check_out_dir(args.out)
        if args.dry_run:
            return dry_run(out)
        if not torch.cuda.is_available():
            raise GuideError(f"recording the samples needs a CUDA GPU and torch {torch.__version__} sees none "
                             "(--dry-run checks the rest)")
        return record(out)
    except GuideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
