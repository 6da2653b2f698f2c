"""Long-context retrieval: needles hidden in a haystack of a given length (in words; eval/ does exact-token RULER).

One domain per (needle task, haystack style). Haystack length by difficulty: 40, 400, 2000, 8000 words,
and more distractor needles at higher difficulty. Final line 'Answer: <value>'.

    .venv/bin/python -m domains sample retrieval.passkey_essay --seed 0 --difficulty 0
"""
from __future__ import annotations

import random

from domains.base import AnswerDomain, Q

HAY_WORDS = (40, 400, 2000, 8000)
NOUNS = ["garden", "river", "market", "village", "harbor", "library", "meadow", "bridge", "tower", "valley", "forest"]
ADJS = ["quiet", "old", "busy", "green", "narrow", "bright", "distant", "small", "grey", "warm", "windy"]
VERBS = ["crossed", "watched", "painted", "visited", "cleaned", "measured", "passed", "described", "mapped"]
PEOPLE = ["the farmer", "a teacher", "the baker", "a sailor", "the mayor", "an artist", "the guard", "a child"]
NAMES = ["Amara", "Bilal", "Cleo", "Dario", "Elin", "Femi", "Gwen", "Hugo", "Isla", "Jamal", "Kenji", "Lotte", "Mira"]
CITIES = ["Lisbon", "Nairobi", "Kyoto", "Bogota", "Tallinn", "Dakar", "Hobart", "Quebec", "Tbilisi", "Lahore", "Bergen"]
COLORS = ["red", "blue", "green", "yellow", "white", "black"]
SIGNALS = ["amber", "violet", "silver", "copper", "indigo", "scarlet", "olive", "ivory"]


def _essay(rng):
    return (f"{rng.choice(PEOPLE).capitalize()} {rng.choice(VERBS)} the {rng.choice(ADJS)} {rng.choice(NOUNS)} "
            f"near the {rng.choice(ADJS)} {rng.choice(NOUNS)}.")


def _log(rng):
    return (f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] INFO {rng.choice(NOUNS)}-service "
            f"{rng.choice(VERBS)} request from {rng.choice(ADJS)} client")


def _records(rng):
    return f"row; {rng.choice(NOUNS)}; {rng.choice(ADJS)}; {rng.choice(NOUNS)}; {rng.choice(VERBS)}"


def _dialogue(rng):
    return f"{rng.choice(NAMES)}: I think the {rng.choice(NOUNS)} looks {rng.choice(ADJS)} today."


HAYSTACKS = {"essay": (_essay, " "), "log": (_log, "\n"), "records": (_records, "\n"), "dialogue": (_dialogue, "\n")}


def _haystack(rng: random.Random, style: str, n_words: int, needles: list[str]) -> str:
    """Filler units up to n_words, with the needles inserted at random unit boundaries (in the given order)."""
    gen, sep = HAYSTACKS[style]
    units, words = [], 0
    while words < n_words:
        u = gen(rng)
        units.append(u)
        words += len(u.split())
    slots = sorted(rng.randint(0, len(units)) for _ in needles)
    for k, (slot, needle) in enumerate(zip(slots, needles)):
        units.insert(slot + k, needle)  # +k: earlier insertions shift later slots
    return sep.join(units)


def _prompt(text: str, question: str) -> str:
    return f"Read the text and answer the question.\n\n<text>\n{text}\n</text>\n\nQuestion: {question}"


def passkey(rng, d, style):
    """One pass key number."""
    key = rng.randint(10000, 99999)
    text = _haystack(rng, style, HAY_WORDS[d], [f"The pass key is {key}. Remember it."])
    return Q(_prompt(text, "What is the pass key?"), str(key))


def kv_multi(rng, d, style):
    """Several key-value needles; ask for one key."""
    k = (1, 2, 4, 8)[d]
    keys = rng.sample([f"{a}-{n}" for a in ADJS for n in NOUNS], k)
    vals = [rng.randint(100, 9999) for _ in keys]
    needles = [f"The value for key {key} is {v}." for key, v in zip(keys, vals)]
    rng.shuffle(needles)
    i = rng.randrange(k)
    text = _haystack(rng, style, HAY_WORDS[d], needles)
    return Q(_prompt(text, f"What is the value for key {keys[i]}?"), str(vals[i]))


def city(rng, d, style):
    """Who lives where; ask one person's city (one word)."""
    k = (1, 2, 4, 6)[d]
    who, where = rng.sample(NAMES, k), rng.sample(CITIES, k)
    needles = [f"{w} lives in {c}." for w, c in zip(who, where)]
    text = _haystack(rng, style, HAY_WORDS[d], needles)
    i = rng.randrange(k)
    return Q(_prompt(text, f"In which city does {who[i]} live?"), where[i], kind="word")


def count(rng, d, style):
    """Count sightings of one colour among distractor colours."""
    target = rng.choice(COLORS)
    n = rng.randint(1, (3, 5, 8, 12)[d])
    others = [c for c in COLORS if c != target]
    needles = [f"A {target} bird was seen." for _ in range(n)]
    needles += [f"A {rng.choice(others)} bird was seen." for _ in range((0, 2, 5, 10)[d])]
    rng.shuffle(needles)
    text = _haystack(rng, style, HAY_WORDS[d], needles)
    return Q(_prompt(text, f"How many times was a {target} bird seen?"), str(n))


def total(rng, d, style):
    """Sum the amounts of all invoices."""
    k = (2, 3, 5, 8)[d]
    amounts = [rng.randint(1, (9, 99, 999, 999)[d]) for _ in range(k)]
    needles = [f"Invoice number {i + 1} is for {a} dollars." for i, a in enumerate(amounts)]
    rng.shuffle(needles)
    text = _haystack(rng, style, HAY_WORDS[d], needles)
    return Q(_prompt(text, "What is the total of all invoice amounts in dollars?"), str(sum(amounts)))


def order(rng, d, style):
    """Which of two signals appears first in the text (one word)."""
    k = (2, 2, 4, 6)[d]
    sigs = rng.sample(SIGNALS, k)  # text order = this order
    text = _haystack(rng, style, HAY_WORDS[d], [f"The {s} signal was sent." for s in sigs])
    a, b = sorted(rng.sample(range(k), 2))
    pair = [sigs[a], sigs[b]]
    rng.shuffle(pair)
    return Q(_prompt(text, f"Which signal was sent first, {pair[0]} or {pair[1]}? Answer with the colour word."),
             sigs[a], kind="word")


TASKS = [passkey, kv_multi, city, count, total, order]


def domains() -> list[AnswerDomain]:
    out = []
    for fn in TASKS:
        for style in HAYSTACKS:
            def make(rng, d, fn=fn, style=style):
                return fn(rng, d, style)
            make.__doc__ = f"{fn.__doc__} Haystack: {style}."
            out.append(AnswerDomain(f"retrieval.{fn.__name__}_{style}", "retrieval", make))
    return out
