"""Megatron forward, transformers forward on the HF directory and vLLM prompt logprobs agree (float32)."""
from __future__ import annotations

import json

import pytest
import torch

from model.tests._hf_fixtures import VOCAB, make_hf_dir
from model.tests.conftest import read_json, run_helper

TOL = 1e-4


def _rows() -> list[list[int]]:
    g = torch.Generator().manual_seed(11)
    return [torch.randint(3, VOCAB, (n,), generator=g).tolist() for n in (24, 17, 40)]


@pytest.fixture(scope="module", params=[False, True], ids=["dense", "moe"])
def logprobs(request, tmp_path_factory):
    """Full log-softmax rows from Megatron and transformers on the same HF dir (+ the dir, for vLLM)."""
    moe = request.param
    root = tmp_path_factory.mktemp("moe" if moe else "dense")
    hf_dir = make_hf_dir(root, moe)
    rows = _rows()
    (root / "tokens.json").write_text(json.dumps(rows))
    run_helper("_run_layout.py", ["forward", "--hf", str(hf_dir), "--tokens", str(root / "tokens.json"),
                                  "--out", str(root / "megatron.json")])
    from transformers import AutoModelForCausalLM

    hm = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    assert type(hm).__name__ == ("Qwen3MoeForCausalLM" if moe else "LlamaForCausalLM")
    with torch.no_grad():
        hf = [torch.log_softmax(hm(torch.tensor([r])).logits[0].double(), -1) for r in rows]
    meg = [torch.tensor(x, dtype=torch.float64) for x in read_json(root / "megatron.json")["logprobs"]]
    return rows, meg, hf, root


@pytest.fixture(scope="module")
def vllm_logprobs(logprobs):
    """vLLM prompt logprobs (float32, in a subprocess) of the same rows on the same HF dir."""
    root = logprobs[3]
    hf_dir = next(p for p in root.iterdir() if p.name.startswith("hf_"))
    run_helper("_vllm_logprobs.py", ["--hf", str(hf_dir), "--tokens", str(root / "tokens.json"),
                                     "--out", str(root / "vllm.json")])
    return [torch.tensor(x, dtype=torch.float64) for x in read_json(root / "vllm.json")["logprobs"]]


def _prompt_lp(full: torch.Tensor, row: list[int]) -> torch.Tensor:
    """logprob of token i given tokens < i, for i >= 1 (what vLLM's prompt_logprobs returns)."""
    return full[:-1].gather(1, torch.tensor(row[1:]).unsqueeze(1)).squeeze(1)


def test_weights_are_nontrivial(logprobs):
    rows, meg, _, _ = logprobs
    lp = torch.cat([_prompt_lp(m, r) for m, r in zip(meg, rows)])
    # far from uniform (-log 512 = -6.24 everywhere): a wrong mapping could not match by accident
    assert lp.std() > 1.0 and max(m.max() for m in meg) > -2.0, (lp.std(), max(m.max() for m in meg))


def test_megatron_matches_transformers(logprobs):
    _, meg, hf, _ = logprobs
    diff = max((m - h).abs().max().item() for m, h in zip(meg, hf))
    assert diff <= TOL, f"Megatron vs transformers full log-softmax differ by {diff:.3g}"


@pytest.mark.slow  # vLLM start + first batch: 45-100 s on 2 shared cores
def test_vllm_matches_megatron_and_transformers(logprobs, vllm_logprobs):
    rows, meg, hf, _ = logprobs
    vllm = vllm_logprobs
    for r, m, h, v in zip(rows, meg, hf, vllm):
        assert v.shape == (len(r) - 1,)
        dm = (v - _prompt_lp(m, r)).abs().max().item()
        dh = (v - _prompt_lp(h, r)).abs().max().item()
        assert dm <= TOL and dh <= TOL, f"vLLM prompt logprobs differ: {dm:.3g} vs Megatron, {dh:.3g} vs transformers"
