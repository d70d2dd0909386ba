"""Held-out multi-rank cases (not in the corpus): new magnitudes, sizes and places for the same causes."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import record_verdict_corpus as r

SMALL = dict(layers=6, dim=1024, hidden=4096, tokens=2048)
r.RANKS = {
    "fsdp2_small_host_stall_rank0": (dict(strategy="fsdp2", sleep_ms=5.0, culprit=0, **SMALL), dict(strategy="fsdp2", **SMALL),
                                     {"cause": "host_gap", "where": "before forward", "rank": 0}),
    "fsdp2_extra_backward_last": (dict(strategy="fsdp2", extra_backward=24, culprit=-1), dict(strategy="fsdp2"),
                                  {"cause": "load_imbalance", "where": "extra_backward_work", "rank": -1}),
    "fsdp2_extra_forward_rank0": (dict(strategy="fsdp2", extra_forward=16, culprit=0), dict(strategy="fsdp2"),
                                  {"cause": "load_imbalance", "where": "extra_work", "rank": 0}),
    "ddp_host_stall_rank0_4ms": (dict(sleep_ms=4.0, culprit=0), {},
                                 {"cause": "host_gap", "where": "before forward", "rank": 0}),
    "ddp_small_extra_forward_last": (dict(extra_forward=8, culprit=-1, **SMALL), SMALL,
                                     {"cause": "load_imbalance", "where": "extra_work", "rank": -1}),
}
sys.exit(r.main())
