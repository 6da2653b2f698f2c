"""The base stage end to end on the micro recipe: corpus -> tokenizer -> pretrain, kill -9 resume, refusals."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _run(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([PY, *args], cwd=ROOT, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("base_inputs")
    r = _run(["-m", "pretrain_ckpt.01_corpus", "--out", str(d / "corpus"), "--max-mb", "0.6", "--drill-docs", "200"])
    assert r.returncode == 0, r.stderr
    r = _run(["-m", "pretrain_ckpt.02_tokenizer", "--in", str(d / "corpus"), "--out", str(d / "tokenizer")])
    assert r.returncode == 0, r.stderr
    return d


def _pretrain_cmd(inputs: Path, out: Path) -> list[str]:
    return ["-m", "pretrain_ckpt.03_pretrain", "--corpus", str(inputs / "corpus"), "--tokenizer",
            str(inputs / "tokenizer"), "--out", str(out), "--recipe", "micro_cpu"]


def test_tokenizer_renders_the_chat_format(inputs):
    from transformers import PreTrainedTokenizerFast

    from domains import chat

    tok = PreTrainedTokenizerFast.from_pretrained(str(inputs / "tokenizer"))
    msgs = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    ids = tok.apply_chat_template(msgs, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) else ids
    assert tok.decode(ids) == chat.render(msgs)
    for s in chat.SPECIAL_TOKENS:  # each special token is one id, never split
        assert len(tok(s, add_special_tokens=False)["input_ids"]) == 1


def test_kill9_resume_gives_the_same_final_loss(inputs, tmp_path):
    ref = tmp_path / "ref"
    r = _run(_pretrain_cmd(inputs, ref))
    assert r.returncode == 0, r.stderr[-2000:]
    ref_loss = json.loads((ref / "manifest.json").read_text())["metrics"]["final_train_loss"]

    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([PY, *_pretrain_cmd(inputs, out)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    latest = out.with_name("killed.run") / "latest"
    deadline = time.time() + 300
    while time.time() < deadline and not (latest.exists() and latest.read_text().strip() >= "step_000008"):
        assert p.poll() is None, "run ended before it could be killed"
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not out.exists(), "a killed run must not leave a visible output directory"
    r = _run(_pretrain_cmd(inputs, out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "resumed from" in r.stdout
    m = json.loads((out / "manifest.json").read_text())
    assert m["metrics"]["resumed_at"] >= 8
    assert m["metrics"]["final_train_loss"] == ref_loss


def test_corrupted_tokenizer_is_refused(inputs, tmp_path):
    import shutil

    bad = tmp_path / "tokenizer"
    shutil.copytree(inputs / "tokenizer", bad)
    with open(bad / "tokenizer.json", "a") as f:
        f.write(" ")
    r = _run(["-m", "pretrain_ckpt.03_pretrain", "--corpus", str(inputs / "corpus"), "--tokenizer", str(bad),
              "--out", str(tmp_path / "base"), "--recipe", "micro_cpu"])
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()[-1]
    assert "tokenizer.json" in line and "sha256 mismatch" in line
    assert not (tmp_path / "base").exists()


def test_bad_parallel_sizes_fail_before_work(inputs, tmp_path):
    r = _run(_pretrain_cmd(inputs, tmp_path / "b") + ["--set", "parallel.tp=3"])
    assert r.returncode == 2
    assert "world size 1 is not divisible by TP*PP*CP=3*1*1=3" in r.stderr.strip().splitlines()[-1]


def test_unknown_recipe_names_the_choices(inputs, tmp_path):
    r = _run(_pretrain_cmd(inputs, tmp_path / "b")[:-1] + ["nope"])
    assert r.returncode == 2
    assert "recipe 'nope' not found" in r.stderr and "tiny_cpu" in r.stderr


@pytest.fixture(scope="module")
def domains_datasets(tmp_path_factory):
    d = tmp_path_factory.mktemp("dom")
    r = _run(["-m", "domains", "datasets", "--out", str(d / "with"), "--families", "math", "--sft-per-domain", "0",
              "--rl-per-domain", "0", "--eval-per-domain", "0", "--corpus-per-domain", "2", "--max-difficulty", "0"])
    assert r.returncode == 0, r.stderr
    r = _run(["-m", "domains", "datasets", "--out", str(d / "without"), "--families", "math", "--sft-per-domain", "0",
              "--rl-per-domain", "0", "--eval-per-domain", "1", "--max-difficulty", "0"])
    assert r.returncode == 0, r.stderr
    return d


def test_corpus_adds_the_domains_mid_training_text_and_names_its_parent(domains_datasets, tmp_path):
    from datasets import concatenate_datasets, load_from_disk
    r = _run(["-m", "pretrain_ckpt.01_corpus", "--out", str(tmp_path / "c"), "--max-mb", "0.05", "--drill-docs", "5",
              "--domains", str(domains_datasets / "with")])
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "c" / "manifest.json").read_text())
    want = list(load_from_disk(str(domains_datasets / "with" / "corpus"))["text"])
    assert m["metrics"]["domain_documents"] == len(want) > 0
    assert m["parent"]["path"] == str(domains_datasets / "with")
    got = concatenate_datasets([load_from_disk(str(tmp_path / "c" / s)) for s in ("train", "validation")])["text"]
    assert set(want) <= set(got)


def test_corpus_refuses_datasets_without_corpus_rows(domains_datasets, tmp_path):
    r = _run(["-m", "pretrain_ckpt.01_corpus", "--out", str(tmp_path / "c"),
              "--domains", str(domains_datasets / "without")])
    assert r.returncode == 2 and "--corpus-per-domain" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "c").exists()
