"""Run named suites (longctx, regression, heldout, quick) on one target and one sandbox pool; what the scripts share.

quick: the quick eval of sft/03_eval.py and RL (the domains datasets' eval split under domains/evaluate.py, greedy),
so a checkpoint evaluated here and by its stage gets the same counts item for item."""
from __future__ import annotations

import time
from contextlib import contextmanager

SUITES = ("longctx", "regression", "heldout", "quick")
POOLED = ("regression", "heldout", "quick")  # suites whose tool rollouts and verifiers use the sandbox pool


@contextmanager
def sandbox_pool(slots: int):
    from domains.sandboxing import available, make_pool

    pool = make_pool(slots) if available() else None
    try:
        yield pool
    finally:
        if pool is not None:
            pool.close()


def run(target, cfg: dict, names: list[str], tokenizer=None, data=None, log=print) -> dict:
    """data: the domains datasets the quick suite reads."""
    out: dict = {}
    slots = max((int(cfg[s]["sandbox_slots"]) for s in names if s in POOLED), default=0)
    with sandbox_pool(slots) if slots else _none() as pool:
        for name in names:
            t0 = time.perf_counter()
            if name == "longctx":
                from eval import longctx
                out[name] = longctx.run(target, tokenizer, cfg["longctx"], log=log)
            elif name == "regression":
                from eval import regression
                out[name] = regression.run(target, cfg["regression"], pool, log=log)
            elif name == "heldout":
                from eval import heldout
                out[name] = heldout.run(target, cfg["heldout"], pool, log=log)
            elif name == "quick":
                from domains import evaluate
                q = cfg["quick"]
                recs = evaluate.run(target, evaluate.eval_items(data, q["per_domain"], q["splits"], q["families"]),
                                    pool, max_tokens=q["max_tokens"], slots=q["sandbox_slots"],
                                    verify={"sandbox_slots": q["sandbox_slots"]})
                out[name] = {"config": q, "summary": evaluate.summarize(recs), "items": recs}
            else:
                raise ValueError(f"unknown suite {name!r}: choose from {SUITES}")
            out[name]["seconds"] = round(time.perf_counter() - t0, 2)
    return out


@contextmanager
def _none():
    yield None
