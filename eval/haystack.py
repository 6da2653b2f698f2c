"""Token-exact haystacks: filler pools tokenized once, assembled by counting, never re-tokenized.

    tok = Tokens.load("checkpoints/sft/hf")            # any dir with tokenizer.json (or an HF tokenizer)
    pools = Pools.get(tok)                              # cached per tokenizer: essay/noise sentences, words, facts
    units = fill(rng, pools.essay, budget=10_000)       # ids into pools.essay whose token counts sum to budget

Why this is exact: every unit starts with whitespace and ends with punctuation (or is a space-led word),
so byte-level BPE pre-tokenisation (GPT-2/Llama-3/Qwen style regex) splits at every unit boundary and the
token count of a concatenation is the sum of the units' counts. `additive_error()` measures that on the
pool itself; prompts up to `VERIFY_MAX` tokens are re-counted in full anyway (ruler.build does it).
The pools come from a fixed seed, so they never depend on the task seed, only on the tokenizer.
"""
from __future__ import annotations

import bisect
import hashlib
import itertools
import random
from dataclasses import dataclass
from pathlib import Path

POOL_SEED = 20261203
VERIFY_MAX = 131_072  # prompts up to this many tokens are re-tokenised in full to report their real length


class Tokens:
    """Counts tokens with the target's tokenizer (a `tokenizers` file when there is one: fastest)."""

    def __init__(self, encode_batch, ident: str):
        self._encode_batch = encode_batch
        self.ident = ident  # sha256 of the tokenizer file: part of every task's identity

    @classmethod
    def load(cls, path: Path | str) -> "Tokens":
        p = Path(path)
        f = p / "tokenizer.json" if p.is_dir() else p
        if f.is_file():
            from tokenizers import Tokenizer

            t = Tokenizer.from_file(str(f))
            # encode_batch_fast: the same ids without offset tracking, ~2.4x faster (1M tokens: 0.75 s vs 1.8 s here)
            enc = getattr(t, "encode_batch_fast", t.encode_batch)
            return cls(lambda texts: [len(e.ids) for e in enc(texts, add_special_tokens=False)],
                       hashlib.sha256(f.read_bytes()).hexdigest())
        if not p.exists():
            raise FileNotFoundError(f"tokenizer {p} not found: pass --tokenizer DIR (a directory with tokenizer.json)")
        from transformers import AutoTokenizer

        t = AutoTokenizer.from_pretrained(str(p))
        return cls(lambda texts: [len(x) for x in t(texts, add_special_tokens=False)["input_ids"]], f"hf:{p.resolve()}")

    def count(self, text: str) -> int:
        return self._encode_batch([text])[0]

    def counts(self, texts: list[str]) -> list[int]:
        return self._encode_batch(list(texts)) if texts else []


# ---- deterministic text material -------------------------------------------------------------------
_ADJ = ("quiet ancient bright hollow silver narrow gentle rapid golden distant humble crimson patient hidden "
        "frozen steady bitter vivid modest curious wooden restless pale eager fragile broad loyal stormy tidy "
        "clever brave calm dusty early faint grand hasty honest lively lonely merry noble plain proud rough "
        "sharp shiny silent simple sleepy slow smooth soft solid spare stern strange sturdy sudden sweet "
        "tender thick tiny vast warm weary wild wise young").split()
_NOUN = ("river mountain lantern harbor orchard meadow village engine library garden island bridge castle "
         "forest valley market tower canal desert window mirror violin compass anchor candle feather pebble "
         "ribbon saddle tunnel glacier beacon cottage chimney furnace ladder marble needle parcel quarry "
         "rocket scroll shovel spindle statue thimble trumpet wagon whistle basket blanket bucket cabinet "
         "carpet cellar clock falcon ferry fountain helmet kettle lagoon magnet meadowlark oven paddle pillar").split()
_VERB = ("carried watched repaired painted followed described measured opened gathered visited studied "
         "counted guarded crossed admired cleaned shaped traded mapped borrowed").split()
_WHO = ("the farmer the sailor the teacher a traveler the baker an engineer the captain a student the "
        "gardener the mayor a poet the clerk the miner a merchant the weaver the pilot").split(" ")
_WHEN = ("at dawn", "before winter", "after the storm", "every spring", "during the fair", "on most evenings",
         "in the old days", "without a word", "with great care", "for many years")
PADS = (" .", " Yes.", " Indeed.", " So it goes.", " And so on.", " That is all.", " Then it rained again.",
        " Nothing else happened.", " Everyone went home early.", " The story goes on like this.")
NOISE = (" The grass is green.", " The sky is blue.", " The sun is yellow.", " Here we go.", " There and back again.")
_CONS, _VOW = "bcdfghjklmnprstvz", "aeiou"


def _who() -> list[str]:
    out, cur = [], []
    for w in _WHO:
        cur.append(w)
        if w not in ("the", "a", "an"):
            out.append(" ".join(cur))
            cur = []
    return out


def essay_sentences(n: int, rng: random.Random) -> list[str]:
    who = _who()
    c = rng.choice
    forms = (
        lambda: f" {c(who).capitalize()} {c(_VERB)} the {c(_ADJ)} {c(_NOUN)} {c(_WHEN)}.",
        lambda: f" Near the {c(_NOUN)}, {c(who)} {c(_VERB)} a {c(_ADJ)} {c(_NOUN)}.",
        lambda: f" The {c(_NOUN)} was {c(_ADJ)}, and the {c(_NOUN)} seemed {c(_ADJ)}.",
        lambda: f" Nobody knew why the {c(_ADJ)} {c(_NOUN)} stood beside the {c(_NOUN)}.",
        lambda: f" {c(_WHEN).capitalize()}, {c(who)} {c(_VERB)} every {c(_NOUN)} in town.",
    )
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen.setdefault(rng.choice(forms)(), None)
    return list(seen)


def made_up_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_CONS) + rng.choice(_VOW) + (rng.choice(_CONS) if rng.random() < 0.3 else "")
                   for _ in range(syllables))


def made_up_words(n: int, rng: random.Random, syllables=(2, 3), exclude: set[str] = frozenset()) -> list[str]:
    seen: dict[str, None] = {}
    while len(seen) < n:
        w = made_up_word(rng, rng.choice(syllables))
        if w not in exclude:
            seen.setdefault(w, None)
    return list(seen)


def key_phrase(rng: random.Random) -> str:
    return f"{rng.choice(_ADJ)}-{rng.choice(_NOUN)}"


# ---- pools ---------------------------------------------------------------------------------------
@dataclass
class Pool:
    texts: list[str]
    counts: list[int]

    def __post_init__(self):
        self.by_count: dict[int, list[int]] = {}
        for i, c in enumerate(self.counts):
            self.by_count.setdefault(c, []).append(i)
        self.min_count = min(self.counts)
        self.max_count = max(self.counts)
        self.mean = sum(self.counts) / len(self.counts)


class Pools:
    """Everything a task assembles from, tokenized once per tokenizer (cached in the process)."""
    _cache: dict[str, "Pools"] = {}

    def __init__(self, tok: Tokens):
        rng = random.Random(POOL_SEED)
        self.tok = tok
        self.essay = self._pool(essay_sentences(2048, rng))
        self.noise = self._pool(list(NOISE))
        self.pad = self._pool(list(PADS))
        self.words = self._pool([" " + w for w in made_up_words(4096, rng)])
        countries = made_up_words(2048, rng, syllables=(2, 3))
        cities = made_up_words(2048, rng, syllables=(2,), exclude=set(countries))
        self.fact_pairs = [(c.capitalize(), t.capitalize()) for c, t in zip(countries, cities)]
        self.facts = self._pool([f" The capital of {c} is {t}." for c, t in self.fact_pairs])
        self.pool_names = set(countries) | set(cities)
        self.doc_header = "\n\nDocument:"
        self.doc_header_count = tok.count(self.doc_header)

    def _pool(self, texts: list[str]) -> Pool:
        return Pool(texts, self.tok.counts(texts))

    @classmethod
    def get(cls, tok: Tokens) -> "Pools":
        if tok.ident not in cls._cache:
            cls._cache[tok.ident] = cls(tok)
        return cls._cache[tok.ident]

    def additive_error(self, n: int = 400) -> float:
        """(real - summed) tokens per unit boundary on a random run of essay sentences: 0.0 for byte-level BPE."""
        rng = random.Random(POOL_SEED + 1)
        idx = [rng.randrange(len(self.essay.texts)) for _ in range(n)]
        real = self.tok.count("".join(self.essay.texts[i] for i in idx))
        return (real - sum(self.essay.counts[i] for i in idx)) / (n - 1)


def reachable(left: int, counts) -> list[bool]:
    """reach[s] for s in 0..left: True when units of these token counts (each usable any number of times) sum to s."""
    cs = sorted({c for c in counts if c > 0})
    reach = [True] + [False] * max(0, left)
    for s in range(1, left + 1):
        reach[s] = any(reach[s - c] for c in cs if c <= s)
    return reach


def fill(rng: random.Random, pool: Pool, budget: int, pad: Pool | None = None) -> list[int]:
    """Unit ids whose counts sum to exactly `budget`; ids >= len(pool.texts) index `pad` (short units for the tail).

    The tail is solved exactly (which remainders the pool's and pad's counts can make); when the remainder cannot be
    made (e.g. 1 token and no 1-token unit), bulk units are handed back until it can. Only when even that fails (no
    pad and a budget no combination reaches) does it fall short, by the least possible."""
    if budget <= 0:
        return []
    # bulk draw: cheap even for 1M tokens (about 60k sentences), then trim to leave room for an exact tail
    n = max(0, int(budget / pool.mean) - 2)
    ids = rng.choices(range(len(pool.texts)), k=n)
    cum = list(itertools.accumulate(pool.counts[i] for i in ids))
    keep = bisect.bisect_right(cum, budget - pool.max_count - pool.min_count)
    ids = ids[:keep]
    left = budget - (cum[keep - 1] if keep else 0)
    pad_counts = sorted(pad.by_count) if pad is not None else []
    reach = reachable(left, [*pool.by_count, *pad_counts])
    while not reach[left] and ids:  # hand back bulk units until the remainder can be made exactly
        left += pool.counts[ids.pop()]
        reach = reachable(left, [*pool.by_count, *pad_counts])
    if not reach[left]:
        left = max(s for s in range(left + 1) if reach[s])
    while left > 0:  # random pool units while the rest stays makeable, then pads (largest first)
        fits = sorted(c for c in pool.by_count if c <= left and reach[left - c])
        if fits:
            c = rng.choice(fits)
            ids.append(rng.choice(pool.by_count[c]))
        else:
            c = max(c for c in pad_counts if c <= left and reach[left - c])
            ids.append(len(pool.texts) + pad.by_count[c][0])
        left -= c
    return ids


def texts_counts(ids: list[int], pool: Pool, pad: Pool | None = None) -> tuple[list[str], list[int]]:
    """The units of fill()'s ids (pad ids included)."""
    n = len(pool.texts)
    texts = [pool.texts[i] if i < n else pad.texts[i - n] for i in ids]
    counts = [pool.counts[i] if i < n else pad.counts[i - n] for i in ids]
    return texts, counts


def insert_at_depths(units: list[str], counts: list[int], inserts: list[tuple[float, str]]) -> list[str]:
    """Put each text at the unit boundary nearest `depth` (0..1) of the filler's token span; order is kept."""
    cum = [0, *itertools.accumulate(counts)]
    total = cum[-1]
    where: dict[int, list[str]] = {}
    for depth, text in inserts:
        k = bisect.bisect_left(cum, depth * total)
        if k > 0 and k < len(cum) and cum[k] - depth * total > depth * total - cum[k - 1]:
            k -= 1
        where.setdefault(min(k, len(units)), []).append(text)
    out: list[str] = []
    for i in range(len(units) + 1):
        out.extend(where.get(i, ()))
        if i < len(units):
            out.append(units[i])
    return out
