"""Build the SFT dataset: mix demonstrations per family, apply the chat format, mask, pack.

    python -m sft.01_data --in data/domains --base checkpoints/base --out data/sft --recipe tiny_cpu

The recipe's `data:` block sets the mixture (weight per family), the number of demonstrations,
the maximum conversation length and the pack length. Reads the `sft` split of the domains datasets
(`python -m domains datasets`) and the base's tokenizer; writes DIR/{train,validation} (HF datasets
of packs: input_ids, labels, loss_mask, doc_ids), DIR/stats.json (tokens per family, packing
efficiency) and DIR/manifest.json last.
"""
from __future__ import annotations

import json
import random
import sys
from collections import Counter, defaultdict

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m sft.01_data ...")

from model import cli, manifest, recipe  # noqa: E402
from model.config import ConfigError  # noqa: E402
from sft.packing import pack, to_example, tokenize_conversation  # noqa: E402

def main(argv=None) -> int:
    ap = cli.parser(__doc__, "sft", ["data"], inp="domains datasets directory (has sft/)",
                    base="base checkpoint (its tokenizer/ is used)", out="output dataset directory")
    cli.recipe_args(ap, "sft", "data.num_demos=500")
    a = ap.parse_args(argv)
    with cli.input_errors():
        cfg = recipe.load_recipe("sft", a.recipe, a.overrides)["data"]  # sft/config.py: keys, defaults, help
        manifest.verify(a.inp, stage="data")
        manifest.verify(a.base)
        if cfg["packing"] not in ("greedy", "bfd"):
            raise ConfigError(f"data.packing={cfg['packing']!r}: expected greedy or bfd")
        if cfg["max_length"] > cfg["pack_length"]:
            raise ConfigError(f"data.max_length={cfg['max_length']} > data.pack_length={cfg['pack_length']}")
    import datasets
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(a.base / "tokenizer"))
    rows = datasets.load_from_disk(str(a.inp / "sft"))
    by_family: dict[str, list[int]] = defaultdict(list)
    for i, fam in enumerate(rows["family"]):
        by_family[fam].append(i)
    mixture = cfg["mixture"] or {f: 1.0 for f in by_family}
    missing = sorted(set(mixture) - set(by_family))
    if missing:
        cli.fail(f"mixture names families {missing} absent from {a.inp}/sft (has {sorted(by_family)})")
    rng = random.Random(cfg["seed"])
    total_w = sum(mixture.values())
    chosen: list[int] = []
    for fam, w in sorted(mixture.items()):
        n = round(cfg["num_demos"] * w / total_w)
        pool = by_family[fam]
        chosen += rng.sample(pool, n) if n <= len(pool) else [rng.choice(pool) for _ in range(n)]
    rng.shuffle(chosen)

    examples, fam_tokens, fam_trainable, too_long = [], Counter(), Counter(), 0
    for i in chosen:
        ids, mask = tokenize_conversation(tok, json.loads(rows[i]["messages"]))
        if len(ids) > cfg["max_length"]:
            too_long += 1
            continue
        fam = rows[i]["family"]
        fam_tokens[fam] += len(ids)
        fam_trainable[fam] += sum(mask)
        examples.append(to_example(ids, mask))
    n_val = max(1, int(len(examples) * cfg["val_fraction"]))
    val_packs, _ = pack(examples[:n_val], cfg["pack_length"], tok.pad_token_id, cfg["packing"])
    train_packs, st = pack(examples[n_val:], cfg["pack_length"], tok.pad_token_id, cfg["packing"])
    stats = {"demonstrations": len(examples), "dropped_too_long": too_long, "train_packs": len(train_packs),
             "validation_packs": len(val_packs), "packing_efficiency": st["packing_efficiency"],
             "tokens_per_family": dict(sorted(fam_tokens.items())),
             "trainable_tokens_per_family": dict(sorted(fam_trainable.items())), "mixture": mixture}
    tmp = manifest.staging_dir(a.out)
    for split, packs in (("train", train_packs), ("validation", val_packs)):
        datasets.Dataset.from_list(packs).save_to_disk(str(tmp / split))
    (tmp / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    manifest.write_manifest(tmp, stage="sft_data", parent=a.inp, config=cfg, seed=cfg["seed"], metrics=stats,
                            extra={"base": {"path": str(a.base), "manifest_sha256": manifest.manifest_hash(a.base)}})
    manifest.publish(tmp, a.out)
    print(f"sft data: {len(examples)} demonstrations -> {len(train_packs)} train + {len(val_packs)} validation packs "
          f"of {cfg['pack_length']} tokens, packing efficiency {st['packing_efficiency']:.1%} -> {a.out}")
    for fam in sorted(fam_tokens):
        print(f"  {fam:<12} tokens {fam_tokens[fam]:>8}  trainable {fam_trainable[fam]:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
