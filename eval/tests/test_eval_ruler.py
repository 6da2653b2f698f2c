"""Long-context task generation: determinism, exact lengths, correct answer keys, depth placement."""
from __future__ import annotations

import hashlib
import random
import re
import sys
from collections import Counter

import pytest

from eval import ruler
from eval.tests.conftest import run

def test_same_seed_gives_byte_identical_task_across_processes(tok, tok_dir):
    code = ("import hashlib,sys; from eval.haystack import Tokens; from eval.ruler import build, TASKS; "
            f"tok=Tokens.load({str(tok_dir)!r}); "
            "print(hashlib.sha256(''.join(build(t, 4096, 0.3, 7, tok).to_json() for t in sorted(TASKS)).encode()).hexdigest())")
    r = run([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr
    here = hashlib.sha256("".join(ruler.build(t, 4096, 0.3, 7, tok).to_json() for t in sorted(ruler.TASKS)).encode())
    assert r.stdout.strip() == here.hexdigest()


@pytest.mark.parametrize("task", sorted(ruler.TASKS))
def test_other_seed_gives_other_task(tok, task):
    a, b = ruler.build(task, 2048, 0.5, 1, tok), ruler.build(task, 2048, 0.5, 2, tok)
    assert a.to_json() != b.to_json() and a.answers != b.answers


def _min_length(task, tok) -> int:
    """The shortest length that builds at depth 0.4, seed 0 (the fixed text, hence the minimum, depends on the length's
    own RNG: follow the refusals' "use length >= N" until one builds)."""
    n = 1
    for _ in range(20):
        try:
            ruler.build(task, n, 0.4, 0, tok)
            return n
        except ValueError as e:
            m = re.search(r"use length >= (\d+)", str(e))
            n = max(n + 1, int(m.group(1))) if m else n + 64
    raise AssertionError(f"{task}: no length up to {n} builds")


def _cases(task, tok) -> list[tuple[int, int]]:
    """(length, depth, seed): the task's minimum, round and odd lengths, and a seeded spread of short and long ones."""
    r = random.Random(f"lengths|{task}")
    lo = _min_length(task, tok)
    cases = [(lo, 0.4, 0)]
    lengths = {1000, 1001, 4095, 4096, 32768, 131072, ruler.VERIFY_MAX + 1,
               *(r.randrange(lo + 100, 5000) for _ in range(24)), *(r.randrange(5000, 140_000) for _ in range(6))}
    return cases + [(n, (0.0, 0.4, 1.0)[i % 3], i + 1) for i, n in enumerate(sorted(lengths))]


@pytest.mark.parametrize("task", sorted(ruler.TASKS))
def test_every_length_is_exact_and_the_recorded_count_is_real(tok, task):
    """eval/README.md: a task's rendered prompt has exactly its requested length (so within 1 token), counted by the
    real tokenizer. Built with verify_max=0, so prompt_tokens is the generator's own summed count: it must be real."""
    for n, depth, seed in _cases(task, tok):
        t = ruler.build(task, n, depth, seed, tok, verify_max=0)
        real = tok.count(t.prompt())
        assert real == n and t.prompt_tokens == real, (task, n, seed, real, t.prompt_tokens)


def test_prompts_up_to_verify_max_record_their_tokenized_length(tok):
    for n in (4096, ruler.VERIFY_MAX):
        t = ruler.build("qa", n, 0.4, 0, tok)
        assert t.length_verified and t.prompt_tokens == tok.count(t.prompt()), n


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(ruler.TASKS))
def test_one_million_token_task_has_exactly_its_length(tok, task):
    t = ruler.build(task, 1_000_000, 0.5, 0, tok)
    assert not t.length_verified  # beyond VERIFY_MAX the count is summed from the pools ...
    real = tok.count(t.prompt())  # ... and here we pay for the full tokenization (~1 s per task with encode_batch_fast)
    assert real == 1_000_000 and t.prompt_tokens == real, (task, real, t.prompt_tokens)


def test_too_short_length_is_refused_with_the_minimum(tok):
    with pytest.raises(ValueError, match=r"use length >= \d+"):
        ruler.build("niah_multikey_2", 200, 0.5, 0, tok)


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_needle_sits_at_the_requested_depth(tok, depth):
    t = ruler.build("niah_single_2", 16384, depth, 3, tok)
    text = t.messages[0]["content"]
    body_start, body_end = text.index("\n") + 1, text.rindex("\n")
    pos = text.index(t.answers[0])
    assert abs((pos - body_start) / (body_end - body_start) - depth) < 0.02


@pytest.mark.parametrize("task", [t for t in sorted(ruler.TASKS) if t.startswith("niah")])
def test_niah_answers_are_in_the_text_once_and_keys_are_asked(tok, task):
    t = ruler.build(task, 8192, 0.5, 5, tok)
    text = t.messages[0]["content"]
    question = text[text.rindex("\n"):]
    for v in t.answers:
        assert text.count(v) == 1
    for k in t.meta["keys"]:
        assert k in question


def test_vt_answer_is_the_assignment_chain(tok):
    t = ruler.build("vt", 8192, None, 4, tok)
    text = t.messages[0]["content"]
    val = {}
    for name, rhs in re.findall(r"VAR ([A-Z]{5}) = (VAR [A-Z]{5}|\d+)\.", text):
        val[name] = val[rhs[4:]] if rhs.startswith("VAR") else int(rhs)
    assert sorted(n for n, v in val.items() if v == t.meta["value"]) == sorted(t.answers)


@pytest.mark.parametrize("task,top", [("cwe", 10), ("fwe", 3)])
@pytest.mark.parametrize("length", [1000, 32768])
def test_word_extraction_answers_are_the_most_frequent_words(tok, task, top, length):
    t = ruler.build(task, length, None, 6, tok)
    text = t.messages[0]["content"]
    words = text[text.index("\n") + 1:text.rindex("\n")].split()
    ranked = Counter(words).most_common()
    assert sorted(w for w, _ in ranked[:top]) == sorted(t.answers)
    assert ranked[top - 1][1] > ranked[top][1]  # strictly separated from the rest


def test_qa_gold_country_appears_only_in_its_document(tok):
    t = ruler.build("qa", 16384, 0.3, 8, tok)
    text = t.messages[0]["content"]
    country = t.meta["country"]
    assert text.count(f"The capital of {country} is {t.answers[0]}.") == 1
    assert text.count(country) == 2  # the gold fact and the question
    assert text.count("Document:") == t.meta["documents"]
