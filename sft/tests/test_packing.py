"""Packing isolation, the assistant-only loss mask, and the packer's bookkeeping."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from domains import chat
from sft.packing import attention_mask, pack, to_example, tokenize_conversation
from sft.tests.conftest import run

CONV = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [{"name": "calc", "arguments": {"e": "2+3"}}]},
        {"role": "tool", "name": "calc", "content": "5"}, {"role": "assistant", "content": "Answer: 5"}]


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir / "tok"))


def test_loss_mask_covers_exactly_the_assistant_tokens(tok):
    ids, mask = tokenize_conversation(tok, CONV)
    assert tok.decode(ids) == chat.render(CONV)
    trained = tok.decode([t for t, m in zip(ids, mask) if m])
    expected = "".join(chat.render_message(m)[len(chat.ASSISTANT_PREFIX):-1] for m in CONV if m["role"] == "assistant")
    assert trained == expected
    untrained = tok.decode([t for t, m in zip(ids, mask) if not m])
    assert "What is 2+3?" in untrained and "<tool_response>5</tool_response>" in untrained


def test_shifted_example_trains_on_label_tokens(tok):
    ids, mask = tokenize_conversation(tok, CONV)
    ex = to_example(ids, mask)
    assert ex["labels"] == ids[1:] and ex["input_ids"] == ids[:-1] and ex["loss_mask"] == mask[1:]


def test_pack_keeps_documents_whole_and_pads():
    docs = [{"input_ids": [1] * n, "labels": [2] * n, "loss_mask": [1] * n} for n in (5, 4, 3, 9)]
    packs, st = pack(docs, 10, pad_id=0)
    assert [sum(p["loss_mask"]) for p in packs] == [9, 3, 9] and st["dropped_too_long"] == 0
    assert all(len(p["input_ids"]) == 10 for p in packs)
    assert st["packing_efficiency"] == pytest.approx(21 / 30)
    packs, st = pack([{"input_ids": [1] * 11, "labels": [1] * 11, "loss_mask": [1] * 11}], 10, pad_id=0)
    assert packs == [] and st["dropped_too_long"] == 1


def test_bfd_packing_fills_fewer_packs_with_the_same_documents():
    lens = (5, 4, 3, 9, 6, 2, 1)
    docs = [{"input_ids": [i] * n, "labels": [i] * n, "loss_mask": [1] * n} for i, n in enumerate(lens)]
    greedy, g = pack(docs, 10, pad_id=0)
    bfd, b = pack(docs, 10, pad_id=0, strategy="bfd")
    assert (g["packs"], b["packs"]) == (4, 3)  # greedy: 5+4 | 3 | 9 | 6+2+1; bfd: 9+1 | 6+4 | 5+3+2
    assert b["packing_efficiency"] == pytest.approx(30 / 30)

    def content(packs):  # each document whole, once: (its token, its length) per document
        return sorted((p["input_ids"][i], p["doc_ids"].count(d)) for p in packs
                      for i, d in enumerate(p["doc_ids"]) if p["loss_mask"][i] and p["doc_ids"].index(d) == i)
    assert content(bfd) == content(greedy) == sorted(enumerate(lens))
    assert bfd == pack(docs, 10, pad_id=0, strategy="bfd")[0]


def test_attention_mask_blocks_other_documents_and_the_future():
    m = attention_mask(torch.tensor([0, 0, 1, 1, 2]))[0, 0]
    allowed = ~m
    assert allowed[1, 0] and not allowed[0, 1]  # causal inside a document
    assert not allowed[2, 1] and not allowed[4, 3]  # nothing across documents
    assert allowed.diagonal().all()  # no empty row (pads are their own documents)


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_packed_per_document_loss_equals_unpacked(kind):
    r = run([sys.executable, "sft/tests/_packing_check.py", kind])
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["packed"] == pytest.approx(out["alone"], rel=1e-5, abs=1e-5)
    assert out["alone"][0] != pytest.approx(out["alone"][1])  # distinct documents: the check can fail
