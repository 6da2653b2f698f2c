"""RULER-style long-context tasks with exact token lengths (Hsieh et al. 2024, "RULER", arXiv:2404.06654).

    tok = Tokens.load("checkpoints/sft/hf")
    t = build("niah_multikey_1", length=131072, depth=0.25, seed=3, tok=tok)
    t.messages, t.answers, t.prompt_tokens          # user message, expected items, real token count

Tasks (RULER names): needle in a haystack with one key (niah_single_1/2/3: noise or essay haystack, number or
uuid values), many keys (niah_multikey_1/2: word or uuid keys), several values for one key
(niah_multivalue), several queried keys (niah_multiquery); variable tracking (vt); common and frequent
word extraction (cwe, fwe); question answering over haystack documents (qa). `depth` places the queried
needle / gold document (DEPTH_TASKS); other tasks ignore it. `length` counts the whole rendered prompt
(domains.chat format, generation prompt included) in the given tokenizer's tokens. The same (task,
length, depth, seed, tokenizer) gives byte-identical `to_json()`.
Every answer is a list of items; the final line of a reply is "Answer: item, item, ...".
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import uuid
from dataclasses import asdict, dataclass, field

from domains import chat
from eval.haystack import (VERIFY_MAX, Pools, Tokens, fill, insert_at_depths, key_phrase, made_up_words, reachable,
                            texts_counts)

MIN_FILLER = 32  # filler tokens a task needs at least, so "length" means something


@dataclass
class LongTask:
    task: str
    length: int            # requested prompt tokens
    depth: float | None    # needle / gold document position (0 = start, 1 = end) for DEPTH_TASKS
    seed: int
    tokenizer: str         # Tokens.ident
    messages: list[dict]
    answers: list[str]     # every item must be in the reply's answer line, and nothing else
    prompt_tokens: int     # real count of the rendered prompt (summed from the pools beyond VERIFY_MAX)
    length_verified: bool  # True when prompt_tokens comes from tokenizing the whole prompt
    meta: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def prompt(self) -> str:
        return chat.render(self.messages, add_generation_prompt=True)

    def oracle(self) -> str:
        return "Answer: " + ", ".join(self.answers)


ANSWER_FMT = "End your reply with one line 'Answer: {x}'."


def _rng(*parts) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big"))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _number(rng: random.Random) -> str:
    return str(rng.randrange(1_000_000, 10_000_000))


class _Ctx:
    """What a generator needs: rng, pools, tokenizer, and the filler budget left once fixed text is counted."""

    def __init__(self, rng, pools: Pools, length: int, instr: str, question: str, fixed: list[str]):
        self.rng, self.pools, self.tok = rng, pools, pools.tok
        self.prefix = f"{chat.IM_START}user\n{instr}\n"
        self.suffix = f"\n{question}{chat.IM_END}\n{chat.ASSISTANT_PREFIX}"
        self.instr, self.question = instr, question
        self.fixed = sum(self.tok.counts([self.prefix, self.suffix, *fixed]))
        self.budget = length - self.fixed
        if self.budget < MIN_FILLER:
            raise ValueError(f"length={length} is too short for this task: its fixed text alone takes {self.fixed} "
                             f"tokens; use length >= {self.fixed + MIN_FILLER}")


def _niah(rng, pools, length, depth, *, haystack="essay", key="word", value="number", n_keys=1, n_values=1,
          n_queries=1):
    vname = {"number": "numbers", "uuid": "uuids"}[value]
    new_value = _number if value == "number" else _uuid
    keys: list[str] = []
    while len(keys) < n_keys:
        k = key_phrase(rng) if key == "word" else _uuid(rng)
        if k not in keys:
            keys.append(k)
    values: dict[str, list[str]] = {}
    used: set[str] = set()
    for i, k in enumerate(keys):
        values[k] = []
        while len(values[k]) < (n_values if i == 0 else 1):
            v = new_value(rng)
            if v not in used:
                used.add(v)
                values[k].append(v)
    queried = keys[:n_queries]
    needles = [(k, v) for k in keys for v in values[k]]
    texts = [f" One of the special magic {vname} for {k} is: {v}." for k, v in needles]
    # the first queried needle sits at `depth`; the others at random depths (RULER spreads them too)
    depths = [depth] + [rng.random() for _ in texts[1:]]
    if n_queries > 1 or n_values > 1:
        qn = "all the special magic {} for {} mentioned in the provided text".format(
            vname, ", ".join(queried[:-1]) + " and " + queried[-1] if n_queries > 1 else queried[0])
        question = f"What are {qn}? " + ANSWER_FMT.format(x="<value>, <value>, ...")
    else:
        question = (f"What is the special magic {vname[:-1]} for {queried[0]} mentioned in the provided text? "
                    + ANSWER_FMT.format(x="<value>"))
    instr = (f"Some special magic {vname} are hidden within the following text. Make sure to memorize it. "
             f"I will quiz you about the {vname} afterwards.")
    ctx = _Ctx(rng, pools, length, instr, question, texts)
    pool = pools.noise if haystack == "noise" else pools.essay
    if haystack == "noise":  # RULER's noise haystack repeats its sentences in order
        ids, left = [], ctx.budget
        i = 0
        while left - pool.counts[i % len(pool.counts)] >= pool.max_count:  # fill() makes the last >= max_count exactly
            ids.append(i % len(pool.counts))
            left -= pool.counts[ids[-1]]
            i += 1
        ids += fill(rng, pool, left, pools.pad)
    else:
        ids = fill(rng, pool, ctx.budget, pools.pad)
    hay, counts = texts_counts(ids, pool, pools.pad)
    units = insert_at_depths(hay, counts, list(zip(depths, texts)))
    answers = [v for k in queried for v in values[k]]
    return ctx, units, sum(counts), answers, {"keys": queried}


def _vt(rng, pools, length, depth, n_hops=4, n_chains=2):
    names: list[str] = []
    while len(names) < (n_hops + 1) * n_chains:
        n = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))
        if n not in names:
            names.append(n)
    vals = rng.sample(range(10_000, 100_000), n_chains)
    chains, inserts = [], []
    for c in range(n_chains):
        vs = names[c * (n_hops + 1):(c + 1) * (n_hops + 1)]
        chains.append(vs)
        stmts = [f" VAR {vs[0]} = {vals[c]}."] + [f" VAR {vs[i]} = VAR {vs[i - 1]}." for i in range(1, len(vs))]
        inserts += list(zip(sorted(rng.random() for _ in stmts), stmts))  # in order: the chain reads forwards
    question = (f"Find all variables that are assigned the value {vals[0]} in the text above. "
                + ANSWER_FMT.format(x="<variable>, <variable>, ..."))
    instr = "Memorize and track the chain(s) of variable assignment hidden in the following text."
    ctx = _Ctx(rng, pools, length, instr, question, [t for _, t in inserts])
    pool = pools.noise
    hay, counts = texts_counts(fill(rng, pool, ctx.budget, pools.pad), pool, pools.pad)
    units = insert_at_depths(hay, counts, inserts)
    return ctx, units, sum(counts), chains[0], {"value": vals[0]}


def _words_ctx(rng, pools, length, n_answer, what):
    question = (f"What are the {n_answer} most {what} words in the list above? "
                + ANSWER_FMT.format(x="<word>, <word>, ..."))
    instr = "Below is a list of words. Memorize them; I will ask which occur most often."
    return _Ctx(rng, pools, length, instr, question, [])


def _cwe(rng, pools, length, depth, n_common=10):
    ctx = _words_ctx(rng, pools, length, n_common, "common")
    w = pools.words
    order = list(range(len(w.texts)))
    rng.shuffle(order)
    common, rare = order[:n_common], order[n_common:]
    n_words = ctx.budget / w.mean
    f_rare = max(1, math.ceil(0.75 * n_words / len(rare)))
    f_common = max(f_rare + 2, round(0.25 * n_words / n_common))  # every common word beats every rare one by >= 2
    left = ctx.budget - f_common * sum(w.counts[i] for i in common)
    if left < 0:
        raise ValueError(f"length={length} is too short for cwe: use length >= {ctx.fixed + 3 * n_common * 8}")
    seq: list[int] = []
    for i in rare * f_rare:
        if left - w.counts[i] < w.max_count:
            break
        seq.append(i)
        left -= w.counts[i]
    # exact tail from distinct rare words, each gaining one occurrence (so at most f_rare + 1 < f_common); when the
    # remainder cannot be made from rare words' counts (1 token: no word is 1 token), hand back the last ones
    reach = reachable(left, [w.counts[i] for i in rare])
    while not reach[left] and seq:
        left += w.counts[seq.pop()]
        reach = reachable(left, [w.counts[i] for i in rare])
    start = len(seq) % len(rare)
    for i in rare[start:] + rare[:start]:  # first the words this pass has not reached yet
        if left == 0:
            break
        if w.counts[i] <= left and reach[left - w.counts[i]]:
            seq.append(i)
            left -= w.counts[i]
    seq += [i for i in common for _ in range(f_common)]
    rng.shuffle(seq)
    return ctx, [w.texts[i] for i in seq], sum(w.counts[i] for i in seq), [w.texts[i].strip() for i in common], \
        {"common_freq": f_common, "rare_freq_max": f_rare + 1}


def _fwe(rng, pools, length, depth, alpha=2.0, vocab=200, n_top=3):
    ctx = _words_ctx(rng, pools, length, n_top, "frequent")
    w = pools.words
    ranked = rng.sample(range(len(w.texts)), vocab)
    s = ctx.budget / sum(w.counts[i] / (r + 1) ** alpha for r, i in enumerate(ranked))
    freq = [int(s / (r + 1) ** alpha) for r in range(vocab)]
    left = ctx.budget - sum(f * w.counts[i] for f, i in zip(freq, ranked))
    tail = range(vocab // 2, vocab)  # ranks of the tail words: they top up the exact remainder
    reach = reachable(left, [w.counts[ranked[r]] for r in tail])
    while not reach[left]:  # 1 token left (no word is 1 token): hand back an occurrence of a tail word
        r = next((r for r in reversed(tail) if freq[r] > 0), None)
        if r is None:
            break
        freq[r] -= 1
        left += w.counts[ranked[r]]
        reach = reachable(left, [w.counts[ranked[r]] for r in tail])
    while left > 0 and reach[left]:  # each pass adds at most one occurrence per tail word
        for r in tail:
            c = w.counts[ranked[r]]
            if 0 < left and c <= left and reach[left - c]:
                freq[r] += 1
                left -= c
    if not (freq[0] > freq[1] > freq[2] > max(freq[3:])):
        raise ValueError(f"length={length} is too short for fwe: its top-{n_top} frequencies {freq[:4]} are not distinct")
    seq = [i for f, i in zip(freq, ranked) for _ in range(f)]
    rng.shuffle(seq)
    return ctx, [w.texts[i] for i in seq], sum(w.counts[i] for i in seq), [w.texts[i].strip() for i in ranked[:n_top]], \
        {"top_freq": freq[:n_top + 1]}


def _qa(rng, pools, length, depth):
    country, city = (x.capitalize() for x in made_up_words(2, rng, syllables=(3,), exclude=pools.pool_names))
    gold_fact = f" The capital of {country} is {city}."
    question = f"Answer the question using the documents above. What is the capital of {country}? " \
               + ANSWER_FMT.format(x="<city>")
    instr = "Below are documents. Read them; a question about one of them follows."
    ctx = _Ctx(rng, pools, length, instr, question, [pools.doc_header, gold_fact])
    ess, facts, hc = pools.essay, pools.facts, pools.doc_header_count
    # the first document's header follows the instruction's newline: "\n" + "\n\nDocument:" may tokenize as one run
    join = ctx.tok.count(ctx.prefix + pools.doc_header) - ctx.tok.count(ctx.prefix) - hc
    ctx.fixed += join
    ctx.budget -= join
    gold_sents = rng.randint(2, 6)
    gold_ids = [rng.randrange(len(ess.texts)) for _ in range(gold_sents)]
    makeable = reachable(ctx.budget, [*ess.by_count, *pools.pad.by_count])
    while gold_ids and not (0 <= ctx.budget - sum(ess.counts[i] for i in gold_ids) and
                            makeable[ctx.budget - sum(ess.counts[i] for i in gold_ids)]):
        gold_ids.pop()  # short lengths: fewer gold sentences, so that fill() can make the rest exactly
    left = ctx.budget - sum(ess.counts[i] for i in gold_ids)
    docs, counts = [], []
    doc_max = hc + facts.max_count + 6 * ess.max_count
    while left > doc_max + ess.max_count:
        f = rng.randrange(len(facts.texts))
        s = [rng.randrange(len(ess.texts)) for _ in range(rng.randint(2, 6))]
        docs.append(pools.doc_header + facts.texts[f] + "".join(ess.texts[i] for i in s))
        counts.append(hc + facts.counts[f] + sum(ess.counts[i] for i in s))
        left -= counts[-1]
    if docs:  # the last distractor document absorbs the exact remainder
        tail, tc = texts_counts(fill(rng, ess, left, pools.pad), ess, pools.pad)
        docs[-1] += "".join(tail)
        counts[-1] += sum(tc)
        gold_texts, gold_counts = texts_counts(gold_ids, ess)
    else:
        gold_texts, gold_counts = texts_counts(gold_ids + fill(rng, ess, left, pools.pad), ess, pools.pad)
    gold = pools.doc_header + gold_fact + "".join(gold_texts)
    units = insert_at_depths(docs, counts, [(depth, gold)])
    filler = sum(counts) + sum(gold_counts)
    return ctx, units, filler, [city], {"country": country, "documents": len(docs) + 1}


TASKS = {
    "niah_single_1": lambda r, p, n, d: _niah(r, p, n, d, haystack="noise"),
    "niah_single_2": lambda r, p, n, d: _niah(r, p, n, d),
    "niah_single_3": lambda r, p, n, d: _niah(r, p, n, d, value="uuid"),
    "niah_multikey_1": lambda r, p, n, d: _niah(r, p, n, d, n_keys=4),
    "niah_multikey_2": lambda r, p, n, d: _niah(r, p, n, d, key="uuid", value="uuid", n_keys=8),
    "niah_multivalue": lambda r, p, n, d: _niah(r, p, n, d, n_values=4),
    "niah_multiquery": lambda r, p, n, d: _niah(r, p, n, d, n_keys=4, n_queries=4),
    "vt": _vt,
    "cwe": _cwe,
    "fwe": _fwe,
    "qa": _qa,
}
DEPTH_TASKS = frozenset(t for t in TASKS if t.startswith("niah") or t == "qa")


def build(task: str, length: int, depth: float | None, seed: int, tok: Tokens, verify_max: int = VERIFY_MAX) -> LongTask:
    if task not in TASKS:
        raise ValueError(f"unknown long-context task {task!r}: choose from {sorted(TASKS)}")
    if task in DEPTH_TASKS:
        depth = 0.5 if depth is None else float(depth)
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth={depth} must be in [0, 1]")
    else:
        depth = None
    pools = Pools.get(tok)
    rng = _rng(task, length, depth, seed, tok.ident)
    ctx, units, filler, answers, meta = TASKS[task](rng, pools, length, depth)
    content = ctx.instr + "\n" + "".join(units) + "\n" + ctx.question
    messages = [{"role": "user", "content": content}]
    tokens, verified = ctx.fixed + filler, False
    if length <= verify_max:
        tokens, verified = tok.count(chat.render(messages, add_generation_prompt=True)), True
    return LongTask(task, length, depth, seed, tok.ident, messages, answers, tokens, verified, meta)
