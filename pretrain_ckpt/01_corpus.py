"""Build the base pretraining corpus as an HF dataset on disk (no hub: made from local text).

    python -m pretrain_ckpt.01_corpus --out data/corpus --domains data/domains   # tiny CPU default (make corpus)
    python -m pretrain_ckpt.01_corpus --out data/corpus --recipe micro_cpu      # the CI smoke chain's
    python -m pretrain_ckpt.01_corpus --out data/corpus --set corpus.max_mb=64   # more text

Sources, in a fixed order so the same arguments give the same bytes:
- the Python standard library's own source files (code, docstrings, comments: English + code);
- seeded arithmetic and counting drills ("47 + 18 = 65"), so the base has some numeracy;
- with --domains, the `corpus` split of the domains datasets (`python -m domains datasets --corpus-per-domain N`):
  oracle demonstrations of the *training* domains as plain transcripts, with seeds disjoint from SFT, RL and
  eval. This is mid-training: a base of ~16M parameters trained for minutes learns the domains' language and
  the copying their answers need only if it sees them; held-out domains are never in it.
A real run imports a real base instead (pretrain_ckpt/04_import_hf.py); this corpus only has to
make a tiny base that is better than random for the CPU chain.
The sizes are the recipe's `corpus:` section (pretrain_ckpt/config.py; --help lists it); --max-mb, --drill-docs,
--val-fraction and --seed override it.
Writes DIR/{train,validation} (datasets.save_to_disk) and DIR/manifest.json last, atomically.
"""
from __future__ import annotations

import random
import sys
import sysconfig
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m pretrain_ckpt.01_corpus ...")

from model import cli, manifest, recipe  # noqa: E402
from model.config import ConfigError  # noqa: E402


def stdlib_docs(max_bytes: int) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out, total = [], 0
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if any(part in ("test", "tests", "idlelib", "site-packages", "lib2to3") for part in rel.parts):
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not 200 < len(text) < 200_000:
            continue
        out.append(f"# file: {rel}\n{text}")
        total += len(text)
        if total >= max_bytes:
            break
    return out


def drills(n_docs: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        lines = []
        for _ in range(rng.randint(8, 24)):
            a, b = rng.randint(0, 99), rng.randint(0, 99)
            op = rng.choice("+-*")
            lines.append(f"{a} {op} {b} = {eval(f'{a}{op}{b}')}")  # noqa: S307 (two ints and an operator)
        docs.append("\n".join(lines) + "\n")
    return docs


def main(argv=None) -> int:
    ap = cli.parser(__doc__, "pretrain_ckpt", ["corpus"], out="output dataset directory")
    cli.recipe_args(ap, "pretrain_ckpt", "corpus.max_mb=64")
    for flag, key in (("--max-mb", "max_mb"), ("--drill-docs", "drill_docs"), ("--val-fraction", "val_fraction"),
                      ("--seed", "seed")):
        ap.add_argument(flag, type=float if key in ("max_mb", "val_fraction") else int, default=None,
                        help=f"overrides the recipe's corpus.{key}")
    ap.add_argument("--domains", type=Path, default=None,
                    help="domains datasets directory whose corpus/ split (plain-text demonstrations) is added "
                         "unless the recipe's corpus.mid_training is false")
    a = ap.parse_args(argv)
    with cli.input_errors():
        cfg = recipe.load_recipe("pretrain_ckpt", a.recipe, a.overrides)["corpus"]
        for key in ("max_mb", "drill_docs", "val_fraction", "seed"):
            if getattr(a, key) is not None:
                cfg[key] = getattr(a, key)
            setattr(a, key, cfg[key])
        if not cfg["mid_training"]:
            a.domains = None  # the recipe's corpus is made without the domains datasets, even where given
        if not 0 < a.val_fraction < 0.5:
            raise ConfigError(f"--val-fraction={a.val_fraction} must be in (0, 0.5)")
    domain_docs: list[str] = []
    if a.domains is not None:
        with cli.input_errors(prefix="--domains: "):
            manifest.verify(a.domains, stage="data")
        if not (a.domains / "corpus" / "dataset_info.json").exists():
            cli.fail(f"{a.domains} has no corpus/ rows: write it with `python -m domains datasets "
                     "--corpus-per-domain N`")
    import datasets

    if a.domains is not None:
        domain_docs = list(datasets.load_from_disk(str(a.domains / "corpus"))["text"])
    docs = stdlib_docs(int(a.max_mb * 1e6)) + drills(a.drill_docs, a.seed) + domain_docs
    rng = random.Random(a.seed)
    rng.shuffle(docs)
    n_val = max(1, int(len(docs) * a.val_fraction))
    tmp = manifest.staging_dir(a.out)
    for split, part in (("validation", docs[:n_val]), ("train", docs[n_val:])):
        datasets.Dataset.from_dict({"text": part}).save_to_disk(str(tmp / split))
    manifest.write_manifest(tmp, stage="corpus", parent=a.domains, seed=a.seed,
                            config=vars(a) | {"out": str(a.out), "domains": a.domains and str(a.domains),
                                              "corpus": cfg},
                            metrics={"documents": len(docs), "validation_documents": n_val,
                                     "characters": sum(map(len, docs)), "domain_documents": len(domain_docs),
                                     "domain_characters": sum(map(len, domain_docs))})
    manifest.publish(tmp, a.out)
    print(f"corpus: {len(docs)} documents, {sum(map(len, docs)) / 1e6:.1f} M characters -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
