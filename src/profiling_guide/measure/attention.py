"""Timing attention variants on the GPU: forward and backward device time, memory, CPU issue time, a sweep.

A variant is a function ``attend(q, k, v) -> out``; :class:`AttentionShape`
says the sizes and the layout its inputs take (``bhsd``:
``[batch, heads, seq, head_dim]``, the layout of ``scaled_dot_product_attention``;
``bshd``: ``[batch, seq, heads, head_dim]``, FlashAttention-4's).

* :func:`time_variants`: each variant's forward and backward device time
  (the backward alone: ``torch.autograd.grad`` on a retained graph), its
  repeats interleaved with the others', as the benchmark times the MLP;
  the forward's and the step's CPU issue time; what the forward keeps for the
  backward and the step's peak, from the caching allocator's counters; and
  each output's error against float64.
* :func:`sweep`: forward and backward device time and peak memory over
  sequence lengths, skipping (with the reason) a point that would not fit.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch._functorch.config as functorch_config

from profiling_guide.measure.timing import REPEATS, cpu_issue_time, device_times

MB = 1e6


def progress(what: str) -> Callable[[str], None]:
    """A function printing ``what: line`` on the console's stderr (never on a page)."""
    def say(line: str) -> None:
        print(f"{what}: {line}", file=sys.__stderr__ or sys.stderr, flush=True)
    return say


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    seq: int
    head_dim: int
    dtype: torch.dtype = torch.bfloat16

    def dims(self, layout: str) -> tuple[int, int, int, int]:
        b, h, s, d = self.batch, self.heads, self.seq, self.head_dim
        return (b, s, h, d) if layout == "bshd" else (b, h, s, d)

    @property
    def tensor_bytes(self) -> int:
        return self.batch * self.heads * self.seq * self.head_dim * torch.empty((), dtype=self.dtype).element_size()


def keep_graphs_for_timing() -> None:
    """Let a compiled backward run again on a kept graph (``retain_graph=True``): no buffer donation.

    By default AOTAutograd lets a compiled backward write its outputs into
    the memory of the tensors the forward saved ("donated buffers"), which
    forbids differentiating the same graph twice. Timing a backward alone
    does exactly that, so the flag is switched off (for code compiled after
    this call); the kernels are the same, the backward's peak memory may be
    a little higher.
    """
    functorch_config.donated_buffer = False


def make_inputs(shape: AttentionShape, layout: str, count: int, *, seed: int = 0, device: str = "cuda") -> list[tuple]:
    """``count`` sets of ``(q, k, v, dout)``, q, k and v requiring grad."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dims = shape.dims(layout)

    def one() -> torch.Tensor:
        return torch.randn(dims, device=device, generator=gen).to(shape.dtype)

    return [(one().requires_grad_(), one().requires_grad_(), one().requires_grad_(), one()) for _ in range(count)]


def _to_bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t.transpose(1, 2) if layout == "bshd" else t


def error_vs_fp64(attend: Callable, layout: str, q, k, v, *, causal: bool, heads: int = 4) -> float:
    """``‖out − ref‖ / ‖ref‖`` over the first batch element's first ``heads`` heads, ``ref`` in float64.

    A slice keeps the float64 reference small at long sequences (its score
    matrix alone is ``8·seq²`` bytes per head); the variant still runs on the
    whole input.
    """
    with torch.no_grad():
        out = _to_bhsd(attend(q, k, v), layout)[:1, :heads].double()
        qd, kd, vd = (_to_bhsd(t, layout)[:1, :heads].double() for t in (q, k, v))
        scores = qd @ kd.transpose(-2, -1) / math.sqrt(qd.size(-1))
        if causal:
            s = scores.size(-1)
            scores.masked_fill_(torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1), float("-inf"))
        ref = torch.softmax(scores, dim=-1) @ vd
        return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def memory_of(attend: Callable, q, k, v, dout) -> dict[str, float]:
    """MB the forward keeps for the backward (its output not counted) and the step's peak, above its start."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = attend(q, k, v)
    torch.cuda.synchronize()
    saved = torch.cuda.memory_allocated() - base - out.numel() * out.element_size()
    grads = torch.autograd.grad(out, (q, k, v), dout)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out, grads
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad():
        out = attend(q, k, v)
    torch.cuda.synchronize()
    inference_peak = torch.cuda.max_memory_allocated() - base
    del out
    return {"saved_mb": saved / MB, "peak_mb": peak / MB, "inference_peak_mb": inference_peak / MB}


def time_variants(variants: dict[str, tuple[Callable, str]], shape: AttentionShape, *, causal: bool = True,
                  sets: int = 4, repeats: int = REPEATS, rounds: int = 10) -> dict:
    """Forward and backward device µs, CPU issue µs, memory and fp64 error of each variant (name → ``(attend, layout)``).

    JSON-ready: ``forward_us``, ``backward_us``, ``step_us`` (a forward and
    its backward, a fresh graph each time), ``cpu_issue_forward_us``,
    ``cpu_issue_step_us`` (name → spread dict), ``memory`` and
    ``error_vs_fp64`` (name → values), the shape and the method.
    """
    say = progress("attention")
    inputs = {name: make_inputs(shape, layout, sets) for name, (_, layout) in variants.items()}
    result: dict = {"memory": {}, "error_vs_fp64": {}, "cpu_issue_forward_us": {}, "cpu_issue_step_us": {}}
    forwards, backwards, steps = {}, {}, {}
    for name, (attend, layout) in variants.items():
        say(f"{name}: checking against float64, memory, CPU issue time")
        q, k, v, dout = inputs[name][0]
        result["error_vs_fp64"][name] = error_vs_fp64(attend, layout, q, k, v, causal=causal)
        result["memory"][name] = memory_of(attend, q, k, v, dout)

        def step(attend=attend, q=q, k=k, v=v, dout=dout):
            return torch.autograd.grad(attend(q, k, v), (q, k, v), dout)

        # noqa below: the lambda runs inside this iteration, before q, k, v change
        result["cpu_issue_forward_us"][name] = cpu_issue_time(lambda attend=attend: attend(q, k, v)).to_dict()  # noqa: B023
        result["cpu_issue_step_us"][name] = cpu_issue_time(step).to_dict()
        forwards[name] = (attend, [s[:3] for s in inputs[name]])
        steps[name] = (lambda q, k, v, dout, attend=attend: torch.autograd.grad(attend(q, k, v), (q, k, v), dout),
                       inputs[name])
        # The backward alone: the graph of one forward per input set, kept, differentiated again and again.
        outs = [(attend(*s[:3]), *s) for s in inputs[name]]
        backwards[name] = (lambda out, q, k, v, dout: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                           outs)
    say("forward device time")
    result["forward_us"] = {n: s.to_dict() for n, s in device_times(forwards, repeats=repeats, rounds=rounds,
                                                                   progress=say).items()}
    say("backward device time")
    result["backward_us"] = {n: s.to_dict() for n, s in device_times(backwards, repeats=repeats, rounds=rounds,
                                                                    progress=say).items()}
    say("training step (forward and backward) device time")
    result["step_us"] = {n: s.to_dict() for n, s in device_times(steps, repeats=repeats, rounds=rounds,
                                                                progress=say).items()}
    result["shape"] = {"batch": shape.batch, "heads": shape.heads, "seq": shape.seq, "head_dim": shape.head_dim,
                       "dtype": str(shape.dtype).removeprefix("torch."), "causal": causal}
    result["method"] = (f"device time: median of {repeats} interleaved repeats, each the median of {rounds} rounds "
                        f"over {sets} input sets queued behind a sleep kernel; backward alone: autograd.grad on "
                        "a retained graph; CPU issue time: profiler off, GPU drained between calls")
    del forwards, backwards, steps, inputs
    torch.cuda.empty_cache()
    return result


def fits(bytes_needed: float, *, headroom: float = 0.8) -> bool:
    """Whether ``bytes_needed`` fits in ``headroom`` of the GPU's free memory now."""
    free, _ = torch.cuda.mem_get_info()
    return bytes_needed <= headroom * free


def sweep(variants: dict[str, tuple[Callable, str]], seqs: Sequence[int], *, batch: int, heads: int,
          head_dim: int, causal: bool, dtype: torch.dtype = torch.bfloat16, score_bytes: dict[str, int] | None = None,
          max_seq: dict[str, int] | None = None, repeats: int = 5, rounds: int = 5) -> list[dict]:
    """One row per variant and sequence length: forward and backward device µs (spread dicts) and peak MB.

    ``score_bytes`` gives, for variants that hold whole ``seq × seq`` score
    matrices, the bytes per score element they keep at their peak; a point
    that would not fit in the GPU's free memory is a row with ``skipped`` and
    the GiB it would need, not an out-of-memory error. ``max_seq`` caps the
    length a variant is timed at (a row with ``skipped`` says so beyond it).
    """
    say = progress("attention sweep")
    rows = []
    for seq in seqs:
        shape = AttentionShape(batch, heads, seq, head_dim, dtype)
        runnable = {}
        for name, (attend, layout) in variants.items():
            need = (score_bytes or {}).get(name, 0) * batch * heads * seq * seq + 16 * shape.tensor_bytes
            if seq > (max_seq or {}).get(name, seq):
                rows.append({"variant": name, "seq": seq, "head_dim": head_dim, "causal": causal,
                             "skipped": f"not timed past {max_seq[name]:,} (would need about "
                                        f"{need / 2**30:.0f} GiB)"})
            elif not fits(need):
                rows.append({"variant": name, "seq": seq, "head_dim": head_dim, "causal": causal,
                             "skipped": f"needs about {need / 2**30:.0f} GiB"})
            else:
                runnable[name] = (attend, layout)
        if not runnable:
            continue
        say(f"seq {seq}, head_dim {head_dim}, {'causal' if causal else 'full'}: {', '.join(runnable)}")
        for name, (attend, layout) in runnable.items():
            q, k, v, dout = make_inputs(shape, layout, 1)[0]
            error = error_vs_fp64(attend, layout, q, k, v, causal=causal)
            mem = memory_of(attend, q, k, v, dout)
            sets = make_inputs(shape, layout, 2, seed=1)
            fwd = device_times({name: (attend, [s[:3] for s in sets])}, repeats=repeats, rounds=rounds)[name]
            outs = [(attend(*s[:3]), *s) for s in sets]
            bwd = device_times({name: (lambda out, q, k, v, dout: torch.autograd.grad(out, (q, k, v), dout,
                                                                                      retain_graph=True),
                                       outs)}, repeats=repeats, rounds=rounds)[name]
            rows.append({"variant": name, "seq": seq, "head_dim": head_dim, "causal": causal,
                         "forward_us": fwd.to_dict(), "backward_us": bwd.to_dict(), "peak_mb": mem["peak_mb"],
                         "error_vs_fp64": error})
            del q, k, v, dout, sets, outs
            torch.cuda.empty_cache()
    return rows
