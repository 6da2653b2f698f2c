"""Session fixtures that several stages' tests share (registered by the root conftest.py): a micro base with a
math-only domains datasets, domains datasets of a few memorised eval tasks, and a target that passes them.

Built once per pytest session (CI runs one), so serving's tests and the cross-stage protocol test share them.
A micro model does not generalise to unseen tasks in seconds, but it memorises these, so the tests that compare
pass rates get a target whose pass counts are not 0 on both sides (0 vs 0 makes any comparison vacuous)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    from model.parallel import single_process_env

    env = dict(single_process_env(), PYTHONPATH=str(ROOT))
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def micro_math_chain(tmp_path_factory) -> Path:
    """corpus -> tokenizer -> a 2-step micro base (the target) + math-only domains datasets."""
    d = tmp_path_factory.mktemp("serving_chain")
    steps = [
        ["-m", "pretrain_ckpt.01_corpus", "--out", str(d / "corpus"), "--max-mb", "0.3", "--drill-docs", "50"],
        ["-m", "pretrain_ckpt.02_tokenizer", "--in", str(d / "corpus"), "--out", str(d / "tok"), "--vocab-size", "1024"],
        ["-m", "pretrain_ckpt.03_pretrain", "--corpus", str(d / "corpus"), "--tokenizer", str(d / "tok"), "--out",
         str(d / "base"), "--recipe", "micro_cpu", "--set", "model.vocab_size=1024", "--set", "train.steps=2",
         "--set", "optim.warmup_steps=1", "--set", "train.save_every=100"],
        ["-m", "domains", "datasets", "--out", str(d / "domains"), "--sft-per-domain", "1", "--rl-per-domain", "2",
         "--eval-per-domain", "1", "--max-difficulty", "0", "--families", "math"],
    ]
    for s in steps:
        r = run([sys.executable, *s])
        assert r.returncode == 0, f"{s[0]}: {r.stderr[-3000:]}"
    return d


MEMORISED_TASKS = 12  # eval tasks the target learns by heart (answers like "Answer: 8/3")


@pytest.fixture(scope="session")
def memorised(micro_math_chain, tmp_path_factory) -> Path:
    """Domains datasets whose eval split is the first MEMORISED_TASKS eval tasks of chain/domains and whose sft split
    is their oracle demonstrations (each verified by its own verifier, as `domains datasets` does); rl/ is copied (the
    draft's distillation prompts). A micro model does not generalise to unseen tasks in seconds, but it memorises
    these, so the serving tests get a target whose pass rates are not 0 on both sides (an untrained target makes
    any pass-rate comparison vacuous: 0 vs 0)."""
    import datasets

    import domains
    from model import manifest

    chain = micro_math_chain
    src, dst = chain / "domains", tmp_path_factory.mktemp("serving_memorised") / "domains"
    ev = datasets.load_from_disk(str(src / "eval")).select(range(MEMORISED_TASKS))
    demos = []
    for r in ev:
        d, t = domains.get(r["domain"]), domains.Task.from_dict(json.loads(r["task"]))
        traj = d.solve(t, None)
        assert d.verify(t, traj, pool=None).passed, f"oracle demonstration of {r['domain']} fails its verifier"
        demos.append({k: r[k] for k in ("domain", "family", "split", "difficulty", "seed")}
                     | {"messages": json.dumps(t.messages + traj)})
    tmp = manifest.staging_dir(dst)
    datasets.Dataset.from_list(demos).save_to_disk(str(tmp / "sft"))
    ev.save_to_disk(str(tmp / "eval"))
    shutil.copytree(src / "rl", tmp / "rl")
    manifest.write_manifest(tmp, stage="data", parent=src, seed=0, metrics={"tasks": len(demos)},
                            config={"sft": f"oracle demonstrations of the first {MEMORISED_TASKS} eval tasks"})
    manifest.publish(tmp, dst)
    return dst


@pytest.fixture(scope="session")
def target(micro_math_chain, memorised, tmp_path_factory) -> Path:
    """chain/base fine-tuned (sft/01_data.py, sft/02_train.py) on `memorised`'s demonstrations. Measured: 150 steps
    took the held-out loss on the answer tokens from 6.88 to 0.011 (7 s of training, ~30 s with start-up),
    and greedy decoding then passed 12 of the 12 tasks on the standard and on the fast variant."""
    chain, d = micro_math_chain, tmp_path_factory.mktemp("serving_target")
    steps = [
        ["-m", "sft.01_data", "--in", str(memorised), "--base", str(chain / "base"), "--out", str(d / "sft_data"),
         "--recipe", "micro_cpu", "--set", "data.num_demos=120", "--set", "data.pack_length=256",
         "--set", "data.max_length=256"],
        ["-m", "sft.02_train", "--in", str(chain / "base"), "--data", str(d / "sft_data"), "--out", str(d / "sft"),
         "--recipe", "micro_cpu", "--set", "train.steps=150", "--set", "train.seq_length=256",
         "--set", "parallel.micro_batch_size=2", "--set", "parallel.global_batch_size=2", "--set", "optim.lr=0.005",
         "--set", "optim.warmup_steps=5", "--set", "train.save_every=1000"],
    ]
    for s in steps:
        r = run([sys.executable, *s])
        assert r.returncode == 0, f"{s[0]}: {r.stderr[-3000:]}"
    return d / "sft"
