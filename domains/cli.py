"""Command line of the domains library.

    .venv/bin/python -m domains list [--json] [--family F] [--split train|heldout]
    .venv/bin/python -m domains sample DOMAIN --seed S [--difficulty D] [--solve] [--render]
    .venv/bin/python -m domains check [--families a,b] [--domains x,y] [--seeds N] [--slots N] [--json FILE]
    .venv/bin/python -m domains datasets --out DIR [--recipe tiny_cpu] [--set datasets.KEY=V] [--sft-per-domain N]
                                         [--rl-per-domain M] [--eval-per-domain K] [--seed S] [--max-difficulty D]
                                         [--families a,b] [--overwrite]
The datasets' sizes are a recipe's `datasets:` section (domains/recipes/<name>.yaml, fields in domains/config.py;
without --recipe its defaults); the flags override it.
Plug-ins: DOMAINS_PLUGINS=pkg.mod[,pkg2.mod:func] or --plugin pkg.mod (repeatable), before the sub-command.
Exit status: 0 ok, 1 a check failed, 2 bad input (one line on stderr naming the problem and the fix).
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from contextlib import nullcontext

from domains.registry import get as get_domain
from domains.registry import load_plugin, registry
from domains import sandboxing
from model import cli


class UsageError(Exception):
    pass


def _select(families: str | None, names: str | None) -> list:
    all_d = registry()
    out = list(all_d.values())
    if families:
        fams = [f.strip() for f in families.split(",") if f.strip()]
        known = sorted({d.family for d in out})
        bad = [f for f in fams if f not in known]
        if bad:
            raise UsageError(f"unknown families {bad}; known: {', '.join(known)}")
        out = [d for d in out if d.family in fams]
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        bad = [n for n in wanted if n not in all_d]
        if bad:
            raise UsageError(f"unknown domains {bad}; run `python -m domains list` for the names")
        out = [d for d in out if d.name in wanted]
    return out


def _pool_for(domains: list, slots: int | None):
    if not any(d.needs_sandbox for d in domains):
        return nullcontext(None)
    if not sandboxing.available():
        fams = sorted({d.family for d in domains if d.needs_sandbox})
        raise UsageError(f"families {fams} need the sandbox package, which cannot be imported yet; "
                         f"build sandbox/ or pass --families without them")
    return sandboxing.make_pool(slots)


def cmd_list(a) -> int:
    ds = _select(a.family, None)
    if a.split:
        ds = [d for d in ds if d.split == a.split]
    if a.json:
        print(json.dumps([d.info() for d in ds], indent=1))
    else:
        for d in ds:
            print(f"{d.name:40s} {d.family:11s} {d.split:8s} difficulties={list(d.difficulties)}"
                  f"{' sandbox' if d.needs_sandbox else ''}")
        fam = defaultdict(lambda: [0, 0])
        for d in ds:
            fam[d.family][d.split == "heldout"] += 1
        print(f"{len(ds)} domains: " + ", ".join(f"{f} {t}+{h}" for f, (t, h) in sorted(fam.items())) + " (train+heldout)")
    return 0


def cmd_sample(a) -> int:
    try:
        d = get_domain(a.domain)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    diff = min(d.difficulties) if a.difficulty is None else a.difficulty
    if diff not in d.difficulties:
        raise UsageError(f"{d.name} has difficulties {list(d.difficulties)}, not {diff}")
    t = d.generate(a.seed, diff)
    if not (a.solve or a.render):
        print(t.to_json())
        return 0
    with _pool_for([d], 1) as pool:
        traj = d.solve(t, pool)
        r = d.verify(t, traj, pool)
    if a.render:
        from domains.chat import render
        print(render(t.messages + traj))
        print(f"# reward: {json.dumps(r.to_dict(), default=str)}")
    else:
        print(json.dumps({"task": t.to_dict(), "trajectory": traj, "reward": r.to_dict(),
                          "process_rewards": d.process_rewards(t, traj)}, default=str))
    return 0


def cmd_check(a) -> int:
    from domains.check import run_check
    ds = _select(a.families, a.domains)
    t0 = time.time()
    with _pool_for(ds, a.slots) as pool:
        res = run_check(ds, list(range(a.seeds)), pool, workers=a.slots or 2)
    by = defaultdict(lambda: [0, 0])
    for r in res:
        by[r.family][0] += r.ok
        by[r.family][1] += 1
    for r in res:
        if not r.ok:
            print(f"FAIL {r.domain} d={r.difficulty} seed={r.seed}: {'; '.join(r.problems)}")
    n_dom = len({r.domain for r in res})
    for f, (ok, n) in sorted(by.items()):
        print(f"{f:11s} {ok}/{n} checks passed")
    ok = sum(r.ok for r in res)
    print(f"check: {ok}/{len(res)} passed ({100.0 * ok / max(1, len(res)):.1f}%) over {n_dom} domains, "
          f"{a.seeds} seed(s) per difficulty, {time.time() - t0:.1f}s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([r.__dict__ for r in res], f, indent=1)
    return 0 if ok == len(res) else 1


DATASETS_KEYS = ("sft_per_domain", "rl_per_domain", "eval_per_domain", "corpus_per_domain", "max_difficulty",
                 "families", "seed")


def cmd_datasets(a) -> int:
    from domains.config import DatasetsConfig
    from model import recipe, sections

    cfg = (recipe.load_recipe("domains", a.recipe, a.overrides)["datasets"] if a.recipe else
           sections.check_section(DatasetsConfig, recipe.apply_overrides({}, a.overrides).get("datasets"), "datasets"))
    for k in DATASETS_KEYS:  # an explicit flag overrides the recipe
        if getattr(a, k) is None:
            setattr(a, k, cfg[k])
    import datasets

    from domains.datasets import write_datasets
    datasets.disable_progress_bars()  # one summary line instead of a bar per split
    ds = _select(a.families, None)
    for n in ("sft_per_domain", "rl_per_domain", "eval_per_domain", "corpus_per_domain"):
        if getattr(a, n) < 0:
            raise UsageError(f"--{n.replace('_', '-')} must be >= 0")
    if a.seed < 0:
        raise UsageError("--seed must be >= 0")
    t0 = time.time()
    with _pool_for(ds, a.slots) as pool:
        try:
            m = write_datasets(a.out, ds, a.sft_per_domain, a.rl_per_domain, a.eval_per_domain, a.seed,
                               a.max_difficulty, pool=pool, overwrite=a.overwrite,
                               config={k: v for k, v in vars(a).items() if k != "fn"},
                               workers=a.slots or 4, corpus_per_domain=a.corpus_per_domain)
        except FileExistsError as e:
            raise UsageError(str(e)) from None
    c = m["counts"]
    print(f"datasets in {a.out} after {time.time() - t0:.1f}s: sft {c['sft']['rows']}, rl {c['rl']['rows']}, "
          f"eval {c['eval']['rows']}, corpus {c['corpus']['rows']} rows; manifest {a.out}/manifest.json")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__.split("\n")[0], prog="python -m domains")
    p.add_argument("--plugin", action="append", default=[], help="pkg.module[:func] returning Domain objects")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("list", help="list domains")
    s.add_argument("--json", action="store_true")
    s.add_argument("--family")
    s.add_argument("--split", choices=["train", "heldout"])
    s.set_defaults(fn=cmd_list)
    s = sub.add_parser("sample", help="print one task (and with --solve the oracle trajectory and its reward)")
    s.add_argument("domain")
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--difficulty", type=int)
    s.add_argument("--solve", action="store_true")
    s.add_argument("--render", action="store_true", help="print the rendered chat text of prompt + oracle")
    s.set_defaults(fn=cmd_sample)
    s = sub.add_parser("check", help="run every oracle through its verifier")
    s.add_argument("--families")
    s.add_argument("--domains")
    s.add_argument("--seeds", type=int, default=1)
    s.add_argument("--slots", type=int, default=None, help="sandbox slots / worker threads")
    s.add_argument("--json", help="write per-check results to this file")
    s.set_defaults(fn=cmd_check)
    from model import sections

    s = sub.add_parser("datasets", help="write HF datasets (sft, rl, eval, corpus) and a manifest",
                       epilog=sections.epilog("domains", ["datasets"]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--out", required=True)
    cli.recipe_args(s, "domains", "datasets.sft_per_domain=50", default=None, recipe_help="domains/recipes/<name>.yaml "
                    "or a path (default: no recipe, the datasets section's defaults)")
    for k in DATASETS_KEYS:
        s.add_argument("--" + k.replace("_", "-"), type=str if k == "families" else int, default=None,
                       help=f"overrides the recipe's datasets.{k}")
    s.add_argument("--slots", type=int, default=None)
    s.add_argument("--overwrite", action="store_true")
    s.set_defaults(fn=cmd_datasets)
    a = p.parse_args(argv)
    with cli.input_errors(UsageError, ValueError):
        for spec in a.plugin:
            load_plugin(spec)
        if getattr(a, "seeds", 1) < 1:
            raise UsageError("--seeds must be >= 1")
        return a.fn(a)
