"""Run named suites (longctx, regression, heldout) on one target and one sandbox pool; what the scripts share."""
from __future__ import annotations

import time
from contextlib import contextmanager

SUITES = ("longctx", "regression", "heldout")


@contextmanager
def sandbox_pool(slots: int):
    from domains.sandboxing import available, make_pool

    pool = make_pool(slots) if available() else None
    try:
        yield pool
    finally:
        if pool is not None:
            pool.close()


def run(target, cfg: dict, names: list[str], tokenizer=None, log=print) -> dict:
    out: dict = {}
    slots = max(int(cfg.get(s, {}).get("sandbox_slots", 2)) for s in names if s in ("regression", "heldout")) \
        if {"regression", "heldout"} & set(names) else 0
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
            else:
                raise ValueError(f"unknown suite {name!r}: choose from {SUITES}")
            out[name]["seconds"] = round(time.perf_counter() - t0, 2)
    return out


@contextmanager
def _none():
    yield None
