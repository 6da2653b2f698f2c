"""Train / held-out split over whole domains, fixed by SPLIT_SEED and stratified by family.

Within each built-in family, domains are ranked by sha256(f"{SPLIT_SEED}:{name}") and the lowest
ceil(HELDOUT_FRAC * n) are held out, so every family has held-out domains (parameter variants of the same
family, never a whole family). Plug-in domains keep a split they set themselves, else are held out when
their own hash falls under HELDOUT_FRAC; they never move a built-in domain between splits.
"""
from __future__ import annotations

import hashlib
import math
from collections import defaultdict

SPLIT_SEED = 1729
HELDOUT_FRAC = 0.2


def _h(name: str, seed: int = SPLIT_SEED) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big")


def assign_builtin_splits(domains, seed: int = SPLIT_SEED, frac: float = HELDOUT_FRAC) -> dict[str, str]:
    by_family: dict[str, list[str]] = defaultdict(list)
    for d in domains:
        by_family[d.family].append(d.name)
    out = {}
    for names in by_family.values():
        ranked = sorted(names, key=lambda n: (_h(n, seed), n))
        k = min(len(names) - 1, math.ceil(frac * len(names))) if len(names) > 1 else 0
        for i, n in enumerate(ranked):
            out[n] = "heldout" if i < k else "train"
    return out


def plugin_split(name: str, seed: int = SPLIT_SEED, frac: float = HELDOUT_FRAC) -> str:
    return "heldout" if _h(name, seed) < frac * 2 ** 64 else "train"
