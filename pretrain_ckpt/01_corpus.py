"""Build the base pretraining corpus as an HF dataset on disk (no hub: made from local text).

    python pretrain_ckpt/01_corpus.py --out data/corpus                 # tiny CPU default
    python pretrain_ckpt/01_corpus.py --out data/corpus --max-mb 64     # more text
    python pretrain_ckpt/01_corpus.py --out data/corpus --domains data/domains   # + mid-training text

Sources, in a fixed order so the same arguments give the same bytes:
- the Python standard library's own source files (code, docstrings, comments: English + code);
- seeded arithmetic and counting drills ("47 + 18 = 65"), so the base has some numeracy;
- with --domains, the `corpus` split of a domains export (`python -m domains export --corpus-per-domain N`):
  oracle demonstrations of the *training* domains as plain transcripts, with seeds disjoint from SFT, RL and
  eval. This is mid-training: a base of ~16M parameters trained for minutes learns the domains' language and
  the copying their answers need only if it sees them; held-out domains are never in it.
A real run imports a real base instead (pretrain_ckpt/04_import_hf.py); this corpus only has to
make a tiny base that is better than random for the CPU chain.
Writes DIR/{train,validation} (datasets.save_to_disk) and DIR/manifest.json last, atomically.
"""
from __future__ import annotations

import argparse
import random
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model import manifest  # noqa: E402


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="output dataset directory")
    ap.add_argument("--max-mb", type=float, default=6.0, help="megabytes of stdlib source to include")
    ap.add_argument("--drill-docs", type=int, default=3000, help="number of arithmetic drill documents")
    ap.add_argument("--val-fraction", type=float, default=0.02, help="fraction of documents held out")
    ap.add_argument("--seed", type=int, default=1234, help="seed for drills and the split")
    ap.add_argument("--domains", type=Path, default=None,
                    help="domains export directory whose corpus/ split (plain-text demonstrations) is added")
    a = ap.parse_args(argv)
    if not 0 < a.val_fraction < 0.5:
        print(f"error: --val-fraction={a.val_fraction} must be in (0, 0.5)", file=sys.stderr)
        return 2
    domain_docs: list[str] = []
    if a.domains is not None:
        try:
            manifest.verify(a.domains, stage="data")
        except manifest.CheckpointError as e:
            print(f"error: --domains: {e}", file=sys.stderr)
            return 2
        if not (a.domains / "corpus" / "dataset_info.json").exists():
            print(f"error: {a.domains} has no corpus/ rows: export it with `python -m domains export "
                  f"--corpus-per-domain N`", file=sys.stderr)
            return 2
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
                            config=vars(a) | {"out": str(a.out), "domains": a.domains and str(a.domains)},
                            metrics={"documents": len(docs), "validation_documents": n_val,
                                     "characters": sum(map(len, docs)), "domain_documents": len(domain_docs),
                                     "domain_characters": sum(map(len, domain_docs))})
    manifest.publish(tmp, a.out)
    print(f"corpus: {len(docs)} documents, {sum(map(len, docs)) / 1e6:.1f} M characters -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
