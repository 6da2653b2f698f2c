"""The real pretrained base (SmolLM2-135M-Instruct from its PyPI wheel) on the project's engines, float32:
Megatron, transformers and vLLM give the same logprobs; HF -> Megatron (TP=3) -> HF is bit-identical; TP=3
and PP=2 training steps give the TP=1 losses. TP=2 cannot split this model (9 attention heads, 3 query groups:
model.config refuses "num_query_groups=3 is not divisible by TP=2"), so TP=3 is the smallest real split. The wheel and its de-quantized HF directory are cached
(wheel_base.default_cache(): ~45 s the first time, hash checks only afterwards)."""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from domains import chat
from model.tests.conftest import run_helper
from pretrain_ckpt import wheel_base

TOL_LOGPROB = 1e-4  # the bound, float32
TOL_LOSS = 1e-5  # the layout tests' bound

PROMPTS = [
    [{"role": "system", "content": "Solve the problem. End with a line `Answer: <number>`."},
     {"role": "user", "content": "What is 2 + 7?"}, {"role": "assistant", "content": "2 + 7 = 9\nAnswer: 9"}],
    [{"role": "user", "content": "Name the capital of France in one word."}, {"role": "assistant", "content": "Paris"}],
    [{"role": "user", "content": "Return the JSON object {\"a\": 1} unchanged."}],
]


@pytest.fixture(scope="module")
def real_hf():
    return wheel_base.fetch_hf("smollm2")[0]


@pytest.fixture(scope="module")
def rows(real_hf):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(real_hf))
    return [tok(chat.render(m), add_special_tokens=False)["input_ids"] for m in PROMPTS]


@pytest.fixture(scope="module")
def logprobs(real_hf, rows, tmp_path_factory):
    """Full log-softmax rows (float64 of float32 logits) from Megatron (subprocess) and transformers."""
    import json

    root = tmp_path_factory.mktemp("real_lp")
    (root / "tokens.json").write_text(json.dumps(rows))
    run_helper("_run_layout.py", ["forward", "--hf", str(real_hf), "--tokens", str(root / "tokens.json"),
                                  "--out", str(root / "megatron.pt")])
    from transformers import AutoModelForCausalLM

    hm = AutoModelForCausalLM.from_pretrained(str(real_hf), dtype=torch.float32).eval()
    with torch.no_grad():
        hf = [torch.log_softmax(hm(torch.tensor([r])).logits[0].double(), -1) for r in rows]
    return torch.load(root / "megatron.pt")["logprobs"], hf, root


def _chosen(full: torch.Tensor, row: list[int]) -> torch.Tensor:
    return full[:-1].gather(1, torch.tensor(row[1:]).unsqueeze(1)).squeeze(1)


def test_source_records_the_pinned_wheel(real_hf):
    import json

    src = json.loads((real_hf / "source.json").read_text())
    b = wheel_base.BASES["smollm2"]
    assert (src["package"], src["version"], src["wheel_sha256"], src["gguf_sha256"]) == \
           (b.package, b.version, b.wheel_sha256, b.gguf_sha256)
    assert src["files"] and all(len(h) == 64 for h in src["files"].values())


def test_the_project_chat_format_is_the_models_own(real_hf):
    """ChatML markers are single special tokens of the real tokenizer, so SFT/RL/eval render text it was tuned on."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(real_hf))
    for t in (chat.IM_START, chat.IM_END, chat.EOS):
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1, t
    assert tok.pad_token_id is not None


def test_real_model_is_confident_on_its_own_format(logprobs, rows):
    """Guard against a mapping that only matches by accident: the instruct model predicts ChatML structure."""
    meg, _, _ = logprobs
    lp = torch.cat([_chosen(m, r) for m, r in zip(meg, rows)])
    assert lp.median() > -3.0 and lp.std() > 1.0, (lp.median(), lp.std())


def test_megatron_matches_transformers_on_real_weights(logprobs):
    meg, hf, _ = logprobs
    diff = max((m - h).abs().max().item() for m, h in zip(meg, hf))
    assert diff <= TOL_LOGPROB, f"Megatron vs transformers full log-softmax differ by {diff:.3g} on SmolLM2"


@pytest.mark.slow  # vLLM start on a 135M model
def test_vllm_matches_megatron_and_transformers_on_real_weights(real_hf, logprobs, rows):
    meg, hf, root = logprobs
    run_helper("_vllm_logprobs.py", ["--hf", str(real_hf), "--tokens", str(root / "tokens.json"),
                                     "--out", str(root / "vllm.json")])
    import json

    vllm = [torch.tensor(x, dtype=torch.float64) for x in json.loads((root / "vllm.json").read_text())["logprobs"]]
    for r, m, h, v in zip(rows, meg, hf, vllm):
        assert v.shape == (len(r) - 1,)
        dm, dh = (v - _chosen(m, r)).abs().max().item(), (v - _chosen(h, r)).abs().max().item()
        assert dm <= TOL_LOGPROB and dh <= TOL_LOGPROB, f"vLLM differs: {dm:.3g} vs Megatron, {dh:.3g} vs transformers"


@pytest.mark.slow  # a TP=3 import (torchrun) and a conversion back to HF of 134.5M parameters
def test_hf_to_megatron_tp3_to_hf_is_bit_identical(real_hf, tmp_path):
    run_helper("_run_layout.py", ["import", "--hf", str(real_hf), "--tp", "3", "--ckpt", str(tmp_path / "tp3")], nproc=3)
    run_helper("_run_layout.py", ["to_hf", "--hf", str(real_hf), "--ckpt", str(tmp_path / "tp3"),
                                  "--direct-out", str(tmp_path / "direct"), "--hf-out", str(tmp_path / "via_tp3")])
    ref = load_file(str(real_hf / "model.safetensors"))
    for got_dir in ("direct", "via_tp3"):
        got = load_file(str(tmp_path / got_dir / "model.safetensors"))
        assert set(got) == set(ref), f"{got_dir}: tensor names differ: {sorted(set(got) ^ set(ref))[:5]}"
        bad = [k for k in ref if got[k].dtype != ref[k].dtype or not torch.equal(got[k], ref[k])]
        assert not bad, f"{got_dir}: {len(bad)} of {len(ref)} tensors differ, e.g. {bad[:3]}"


def _losses(real_hf, tmp, name: str, nproc: int, *extra: str) -> list[float]:
    import json

    run_helper("_run_layout.py", ["train", "--hf", str(real_hf), *extra, "--out", str(tmp / name)], nproc=nproc)
    return json.loads((tmp / name).read_text())["losses"]


@pytest.fixture(scope="module")
def tp1_losses(real_hf, tmp_path_factory):
    ref = _losses(real_hf, tmp_path_factory.mktemp("real_tp1"), "tp1.json", 1)
    assert len(ref) == 3 and ref[0] != ref[2], f"the reference did not train: {ref}"
    return ref


@pytest.mark.slow  # Megatron training runs of 134.5M parameters
@pytest.mark.parametrize("layout", [("--tp", "3"), ("--pp", "2")], ids=["tp3", "pp2"])
def test_split_training_steps_match_tp1_on_real_weights(real_hf, tmp_path, tp1_losses, layout):
    got = _losses(real_hf, tmp_path, "split.json", int(layout[1]), *layout)
    diff = max(abs(a - b) for a, b in zip(tp1_losses, got))
    assert len(got) == 3 and diff <= TOL_LOSS, f"{' '.join(layout)} losses {got} differ from TP=1 {tp1_losses} by {diff:.3g}"
