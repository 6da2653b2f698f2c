"""The draft model for speculative decoding, distilled from the target's own greedy outputs.

    # 1. the target answers training prompts greedily (vLLM), saved as an HF dataset
    python -m serving.draft generate --target checkpoints/sft --data data/domains --out /tmp/distill \
        --num-prompts 256 --max-tokens 128
    # 2. a small dense model learns those answers on Megatron-Core (the shared resumable loop)
    python -m serving.draft train --target checkpoints/sft --data /tmp/distill --out /tmp/draft --recipe tiny_cpu
    # torchrun works the same (the recipe's parallel block): torchrun --nproc-per-node 2 -m serving.draft train ...

serving/02_fast.py runs both (each in its own process: vLLM changes the process it runs in). The draft
shares the target's tokenizer and vocabulary, so vLLM can verify its proposals token for token. Its
training data is what the target itself says at temperature 0 on prompts of the domains datasets'
`rl` split (never the eval split), so acceptance measures how well it imitates the target, and
speculative decoding keeps the target's greedy output exactly (the target verifies every token).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m serving.draft ...")

import torch  # noqa: E402

from model import cli, manifest  # noqa: E402
from model.config import ConfigError  # noqa: E402


def domain_prompts(data_dir: Path, n: int, seed: int, split: str = "rl") -> list[str]:
    """n chat-rendered first-turn prompts of the domains datasets' `split`, a seeded sample."""
    import datasets

    from domains import chat

    rows = datasets.load_from_disk(str(Path(data_dir) / split))
    if len(rows) == 0:
        raise ConfigError(f"{data_dir}/{split} is empty: write more domain tasks (python -m domains datasets)")
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    idx = (idx * (n // len(idx) + 1))[:n]
    return [chat.render(json.loads(rows[i]["prompt"]), add_generation_prompt=True) for i in idx]


def generate(target_hf: Path, prompts: list[str], max_tokens: int, out: Path, max_model_len: int | None) -> dict:
    """The target's greedy completions (vLLM) -> HF dataset at `out` with prompt_ids, completion_ids."""
    import datasets

    from model.vllm_engine import Engine

    eng = Engine(target_hf, max_model_len=max_model_len)
    comps = eng.generate(prompts, max_tokens=max_tokens, temperature=0.0)
    rows = {"prompt_ids": [], "completion_ids": []}
    for p, c in zip(prompts, comps):
        if c[0].token_ids:
            rows["prompt_ids"].append(eng.tokenizer(p, add_special_tokens=False)["input_ids"])
            rows["completion_ids"].append(c[0].token_ids)
    datasets.Dataset.from_dict(rows).save_to_disk(str(out))
    n_tok = sum(map(len, rows["completion_ids"]))
    return {"sequences": len(rows["prompt_ids"]), "completion_tokens": n_tok}


class Sequences:
    """Sample i: the last seq+1 tokens of prompt + completion, loss on completion tokens only, padded."""

    def __init__(self, ds, seq: int, pad_id: int, seed: int):
        self.ds, self.seq, self.pad, self.seed, self.n = ds, seq, pad_id, seed, len(ds)
        if self.n == 0:
            raise ConfigError("the distillation dataset is empty: raise distill.num_prompts")
        self._perm: dict[int, list[int]] = {}

    def __call__(self, i: int) -> dict:
        epoch, j = divmod(i, self.n)
        if epoch not in self._perm:
            perm = list(range(self.n))
            random.Random(self.seed + epoch).shuffle(perm)
            self._perm = {epoch: perm}
        row = self.ds[self._perm[epoch][j]]
        ids = (row["prompt_ids"] + row["completion_ids"])[-(self.seq + 1):]
        n_comp = min(len(row["completion_ids"]), len(ids) - 1)  # completion tokens that are labels
        pad = self.seq + 1 - len(ids)
        toks = torch.tensor(ids + [self.pad] * pad)
        mask = torch.zeros(self.seq)
        mask[len(ids) - 1 - n_comp: len(ids) - 1] = 1.0
        return {"tokens": toks[:-1], "labels": toks[1:], "loss_mask": mask, "position_ids": torch.arange(self.seq)}


def draft_model_dict(recipe_model: dict, target_model: dict) -> dict:
    """The recipe's draft architecture with the target's vocabulary and context (vLLM needs them equal)."""
    d = dict(recipe_model)
    d["vocab_size"] = target_model["vocab_size"]
    d["max_position_embeddings"] = target_model["max_position_embeddings"]
    if d.get("num_experts", 0) or d.get("head_dim", 64) < 32:
        raise ConfigError(f"draft model must be dense with head_dim >= 32 (vLLM-CPU kernels); got "
                          f"num_experts={d.get('num_experts', 0)}, head_dim={d.get('head_dim')}")
    return d


def target_manifest(target: Path, verified: str | None) -> dict:
    """The target's manifest. `verified`: the sha256 of the manifest.json its caller (serving/02_fast.py) has just
    checked in full; then only that manifest.json is still the same is checked, not every file again."""
    if verified is None:
        return manifest.verify(target)
    if manifest.manifest_hash(target) != verified:
        raise manifest.CheckpointError(f"{target}/manifest.json changed since it was verified; rerun the fast variant")
    return json.loads((Path(target) / manifest.MANIFEST).read_text())


def train(target: Path, data: Path, out: Path, recipe_name: str, overrides: list[str],
          verified: str | None = None) -> int:
    """Megatron-Core training of the draft on the distillation set (model.loop: resumable, publishes out/)."""
    from model import hf_io, hf_mapping, loop, recipe

    cfg = recipe.load_recipe("serving", recipe_name, overrides)  # a mistyped key fails before any input is read
    tm = target_manifest(target, verified)
    tmodel = tm.get("model_config") or hf_io.model_config_from_hf(json.loads((target / "hf" / "config.json").read_text())).to_dict()
    rc = loop.resolve("serving", recipe_name, overrides, model_dict=draft_model_dict(cfg.get("model", {}), tmodel),
                      loaded=cfg)
    seq, seed = rc.train["seq_length"], rc.train["seed"]
    tok = json.loads((target / "hf" / "config.json").read_text())
    pad = tok.get("pad_token_id") if tok.get("pad_token_id") is not None else 0
    init_cfg = cfg["draft_init"]

    def prepare(_run_dir: Path):
        import datasets

        ds = datasets.load_from_disk(str(data)).train_test_split(test_size=cfg["distill"]["val_fraction"], seed=seed)
        return Sequences(ds["train"], seq, pad, seed), Sequences(ds["test"], seq, pad, seed + 1)

    def init(model):
        state = hf_mapping.init_hf_state(rc.model, seed)
        if init_cfg["target_embeddings"]:  # start in the target's token space when widths match
            th, _ = hf_io.load_hf(target / "hf")
            for k in ("model.embed_tokens.weight", "lm_head.weight"):
                if k in th and th[k].shape == state[k].shape:
                    state[k] = th[k].float().clone()
        hf_mapping.load_hf_into(model, state, rc.model)

    tok_dir = target / "tokenizer" if (target / "tokenizer").is_dir() else target / "hf"
    extra = {"distill_data": {"path": str(data)}, "target": {"path": str(target),
                                                              "manifest_sha256": manifest.manifest_hash(target)}}
    return loop.run(rc, stage="draft", out=out, tokenizer_dir=tok_dir, parent=target, prepare=prepare, init=init,
                    extra_manifest=extra)


def main(argv=None) -> int:
    from model.sections import LOOP, epilog

    ap = cli.parser(__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="target's greedy completions on domain prompts -> HF dataset")
    cli.path_args(g, target="target checkpoint directory (hf/)", data="domains datasets directory (rl/ split)",
                  out="dataset directory to write")
    g.add_argument("--num-prompts", type=int, default=256, help="prompts to answer")
    g.add_argument("--max-tokens", type=int, default=128, help="completion tokens per prompt")
    g.add_argument("--max-model-len", type=int, default=None, help="vLLM context (default: the model's)")
    g.add_argument("--seed", type=int, default=1234, help="prompt sampling seed")
    t = sub.add_parser("train", help="train the draft on Megatron-Core", formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=epilog("serving", ["distill", "draft_init"] + LOOP))
    for p in (g, t):
        p.add_argument("--target-verified", metavar="SHA256", default=None,
                       help="sha256 of the target's manifest.json, already verified in full by the caller (02_fast.py)")
    cli.path_args(t, target="target checkpoint directory", data="dataset from `generate`",
                  out="draft checkpoint directory to publish")
    cli.recipe_args(t, "serving", recipe_help="serving/recipes/<name>.yaml (model/train/optim = the draft)",
                    set_help="recipe override")
    a = ap.parse_args(argv)
    with cli.input_errors():  # the draft's own checks and loop.resolve's; 02_fast.py runs this as a step
        if a.cmd == "generate":
            target_manifest(a.target, a.target_verified)
            manifest.verify(a.data, stage="data")
            prompts = domain_prompts(a.data, a.num_prompts, a.seed)
            print(json.dumps(generate(a.target / "hf", prompts, a.max_tokens, a.out, a.max_model_len)))
            return 0
        return train(a.target, a.data, a.out, a.recipe, a.overrides, a.target_verified)


if __name__ == "__main__":
    sys.exit(main())
