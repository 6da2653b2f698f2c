"""The fast variant: layout, speculative decoding keeps the target's greedy tokens, quantized pass rate, bench file.

One bench_fast run (standard, fast, spec-only engines side by side) feeds the property tests below. Its target is
conftest.target: the micro base fine-tuned until greedy decoding passes the eval tasks of `memorised` (the
untrained base passes none, so a pass-rate comparison on it is 0 vs 0 and cannot fail).
"""
from __future__ import annotations

import json
import sys

import pytest

from model import manifest
from serving.tests.conftest import run

pytestmark = pytest.mark.slow

# Mean acceptance length is 1 + accepted / drafts, so >= 1.0 holds for any draft. With 3 proposed tokens per step the
# draft distilled from this target measured 1.92 (batch 1) and 2.29 (batch 6); a draft trained on unshifted labels
# (serving/draft.Sequences returning labels=tokens, so it learns to copy its input) gave 1.0 and 1.045, so even
# "> 1.0" would not catch that at batch 6. Above 1.5: on average at least one proposed token accepted per two steps.
MIN_ACCEPTANCE_LENGTH = 1.5


@pytest.fixture(scope="module")
def bench(fast, memorised, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("serving_bench") / "fast.json"
    r = run([sys.executable, "-m", "serving.bench_fast", "--fast", str(fast), "--data", str(memorised),
             "--out", str(out), "--sides", "standard,fast,spec_only", "--batches", "1,6", "--reps", "1",
             "--max-tokens", "24", "--batched-max-tokens", "24", "--per-domain", "1", "--quality-max-tokens", "32"])
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text())


def test_fast_directory_holds_quantized_target_draft_and_serving_config(fast, target):
    m = manifest.verify(fast, stage="fast")
    assert m["parent"]["manifest_sha256"] == manifest.manifest_hash(target)
    qc = json.loads((fast / "hf/config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors"
    spec = json.loads((fast / "serving.json").read_text())["speculative_config"]
    assert spec["method"] == "draft_model" and spec["model"] == "draft/hf"
    dm = manifest.verify(fast / "draft", stage="draft")
    assert dm["parent"]["manifest_sha256"] == manifest.manifest_hash(target)
    t = json.loads((target / "hf/config.json").read_text())
    d = json.loads((fast / "draft/hf/config.json").read_text())
    assert d["vocab_size"] == t["vocab_size"] and d["model_type"] == "llama"
    assert m["metrics"]["draft"]["parameters"] < manifest.verify(target)["model_config"]["vocab_size"] * 1000
    assert m["metrics"]["draft"]["val_loss"] < 6.93  # below uniform over the 1024-token vocab: it learned something


def test_speculative_decoding_keeps_the_targets_greedy_tokens(bench):
    assert bench["dtype_per_side"]["spec_only"] == bench["dtype_per_side"]["standard"]  # like with like
    std_tokens = bench["greedy_agreement_vs_standard"]["spec_only"]
    for b, agree in std_tokens.items():
        assert agree["identical_sequences"] == agree["sequences"], (b, agree)
    assert bench["mean_acceptance_length"]["spec_only"]["6"] > MIN_ACCEPTANCE_LENGTH, bench["mean_acceptance_length"]


def test_quantized_fast_variant_pass_rate_within_one_point(bench):
    pr = bench["pass_rate"]
    assert pr["standard"]["tasks"] == pr["fast"]["tasks"] > 0
    assert pr["standard"]["infra_errors"] == pr["fast"]["infra_errors"] == 0
    # the target learnt these tasks: a side that passes none is broken, and 0 vs 0 would make the delta meaningless
    assert pr["standard"]["passed"] > 0 and pr["fast"]["passed"] > 0, pr
    assert abs(bench["pass_rate_delta_points"]) <= 1.0


def test_bench_records_both_sides_ratio_and_acceptance(bench, fast):
    assert bench["measured"]["manifest_sha256"] == manifest.manifest_hash(fast)
    assert bench["baseline"]["name"] == "standard"
    for b in ("1", "6"):
        s, f = bench["output_tok_per_s"]["standard"][b]["median"], bench["output_tok_per_s"]["fast"][b]["median"]
        assert s > 0 and f > 0 and bench["ratio_vs_standard"]["fast"][b] == pytest.approx(f / s)
        assert bench["ratio_vs_standard_per_cpu_s"]["fast"][b] > 0
        assert bench["mean_acceptance_length"]["fast"][b] > MIN_ACCEPTANCE_LENGTH, bench["mean_acceptance_length"]
