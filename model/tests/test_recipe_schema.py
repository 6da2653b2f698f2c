"""Typed recipe sections (model/sections.py): what load_recipe refuses, what it fills in, and what --help shows."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from model import sections
from model.config import ConfigError
from model.recipe import dump, load_recipe

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/recipes/*.yaml"))
STAGES = sorted({Path(p).parts[0] for p in SHIPPED})


def bad_recipe(tmp_path, stage: str, name: str, section: str, key: str, value) -> Path:
    """A shipped recipe with one extra key, written to tmp_path."""
    cfg = yaml.safe_load((ROOT / stage / "recipes" / f"{name}.yaml").read_text())
    node = cfg.setdefault(section, {})
    for k in key.split(".")[:-1]:
        node = node.setdefault(k, {})
    node[key.split(".")[-1]] = value
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def refusal(fn) -> str:
    with pytest.raises(ConfigError) as ei:
        fn()
    msg = str(ei.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("stage,section,key,hint", [
    ("eval", "heldout", "temprature", "temperature"),
    ("serving", "distill", "num_promts", "num_prompts"),
    ("sft", "data", "num_demo", "num_demos"),
    ("rl", "rollout", "temprature", "temperature"),
    ("pretrain_ckpt", "train", "stpes", "steps"),
    ("pretrain_ckpt", "corpus", "max_mbs", "max_mb"),
    ("domains", "datasets", "sft_per_domian", "sft_per_domain"),
])
def test_typo_in_a_recipe_file_is_refused(tmp_path, stage, section, key, hint):
    p = bad_recipe(tmp_path, stage, "micro_cpu", section, key, 1)
    msg = refusal(lambda: load_recipe(stage, str(p)))
    assert msg.startswith(f"{section}.{key} is not a key of {section} (did you mean {hint}?)") and str(p) in msg


@pytest.mark.parametrize("stage,item,path,hint", [
    ("eval", "heldout.temprature=1", "heldout.temprature", "temperature"),
    ("serving", "speculative.num_speculative=2", "speculative.num_speculative", "num_speculative_tokens"),
    ("sft", "optim.warmup=3", "optim.warmup", "warmup_steps"),
    ("rl", "sched.mod=uniform", "sched.mod", "mode"),
    ("pretrain_ckpt", "parallel.micro_batch=2", "parallel.micro_batch", "micro_batch_size"),
])
def test_typo_in_a_set_override_is_refused(stage, item, path, hint):
    msg = refusal(lambda: load_recipe(stage, "micro_cpu", [item]))
    assert msg.startswith(f"{path} is not a key of") and f"did you mean {hint}?" in msg and f"(--set {item})" in msg


def test_a_typo_deep_in_a_nested_section_names_the_whole_path():
    msg = refusal(lambda: load_recipe("pretrain_ckpt", "micro_cpu", ["model.rope_scaling.facter=2"]))
    assert msg.startswith("model.rope_scaling.facter is not a key of model.rope_scaling (did you mean factor?)")


def test_an_unknown_section_is_refused_with_the_close_match():
    msg = refusal(lambda: load_recipe("eval", "micro_cpu", ["heldot.n=2"]))
    assert msg.startswith("heldot is not a key of the recipe") and "did you mean heldout?" in msg


def test_an_unknown_key_without_a_close_match_lists_the_valid_keys():
    msg = refusal(lambda: load_recipe("eval", "micro_cpu", ["target.zzzz=1"]))
    assert "did you mean" not in msg and "valid keys are max_model_len, dtype, kv_cache_gib, tp" in msg


@pytest.mark.parametrize("item,needle", [
    ("heldout.n=four", "heldout.n='four' must be int"),
    ("heldout.temperature=hot", "heldout.temperature='hot' must be float"),
    ("train.steps=true", "train.steps=True must be int"),
    ("heldout.k=2", "heldout.k=2 must be list"),
])
def test_a_value_of_the_wrong_kind_is_refused(item, needle):
    stage = "sft" if item.startswith("train") else "eval"
    assert needle in refusal(lambda: load_recipe(stage, "micro_cpu", [item]))


def test_an_int_is_a_valid_float():
    assert load_recipe("eval", "micro_cpu", ["heldout.temperature=1"])["heldout"]["temperature"] == 1


def test_every_default_is_filled_into_a_plain_dict():
    cfg = load_recipe("eval", "micro_cpu")  # micro_cpu sets no heldout.sandbox_slots, no longctx.batch_tokens
    assert type(cfg["heldout"]) is dict and cfg["heldout"]["sandbox_slots"] == 2
    assert cfg["longctx"]["batch_tokens"] == 1 << 20 and cfg["longctx"]["nll"] is False
    assert cfg["regression"]["only"] == [0, 8, 16, 24]  # a recipe's own value is kept


def test_a_section_missing_from_the_recipe_is_filled_with_its_defaults():
    cfg = load_recipe("sft", "micro_cpu")  # no data.seed, no optim.min_lr
    assert cfg["data"]["seed"] == 1234 and cfg["optim"]["min_lr"] == 3e-5


def test_model_and_cluster_are_checked_but_not_filled():
    """The model comes from the parent checkpoint (only the keys a recipe sets are compared with it); cluster holds
    required site values the launcher resolves."""
    cfg = load_recipe("sft", "micro_cpu")
    assert "model" not in cfg and "cluster" not in cfg
    assert load_recipe("sft", "micro_cpu", ["model.num_layers=2"])["model"] == {"num_layers": 2}


def test_a_written_config_loads_again_with_the_same_values(tmp_path):
    """config.yaml beside a checkpoint is a valid recipe of its stage (a run can be repeated from it)."""
    cfg = load_recipe("rl", "micro_cpu", ["train.steps=3"])
    dump(cfg, tmp_path / "config.yaml")
    again = load_recipe("rl", str(tmp_path / "config.yaml"))
    assert {k: v for k, v in again.items() if k != "recipe"} == {k: v for k, v in cfg.items() if k != "recipe"}


@pytest.mark.parametrize("path", SHIPPED)
def test_every_shipped_recipe_validates_against_its_stage(path):
    load_recipe(Path(path).parts[0], Path(path).stem)


@pytest.mark.parametrize("stage", STAGES)
def test_every_recipe_field_has_help(stage):
    def missing(cls, prefix):
        for f in dataclasses.fields(cls):
            tp = typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(tp):
                yield from missing(tp, f"{prefix}{f.name}.")
            elif not sections.help_of(cls, f):
                yield prefix + f.name
    bad = [x for name, spec in sections.schema(stage).items()
           for x in missing(getattr(spec, "cls", spec), f"{name}.")]
    assert not bad, f"{stage}: fields without help (a trailing comment): {bad}"


def test_help_is_the_fields_trailing_comment():
    f = {f.name: f for f in dataclasses.fields(sections.TrainConfig)}["eval_every"]
    assert sections.help_of(sections.TrainConfig, f) == "held-out loss interval (0 = only at the end)"


def test_an_unknown_stage_is_refused():
    assert "declares no recipe schema" in refusal(lambda: sections.schema("nostage"))


# ---- the base's entry script (the other stages' scripts: <stage>/tests/test_config_*.py) -----------------------
def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_pretrain_refuses_a_mistyped_set_before_anything_is_written(tmp_path):
    out = tmp_path / "base"
    r = run(["-m", "pretrain_ckpt.03_pretrain", "--corpus", str(tmp_path / "corpus"), "--tokenizer", str(tmp_path / "tok"),
             "--out", str(out), "--recipe", "micro_cpu", "--set", "train.stpes=3"])
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "train.stpes is not a key of train" in lines[0], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_pretrain_help_shows_the_recipe_fields():
    r = run(["-m", "pretrain_ckpt.03_pretrain", "--help"])
    assert r.returncode == 0
    want = "eval_every = 100 held-out loss interval (0 = only at the end)"
    assert any(" ".join(ln.split()) == want for ln in r.stdout.splitlines()), r.stdout


def test_corpus_and_tokenizer_refuse_a_mistyped_set_before_anything_is_written(tmp_path):
    for args in (["-m", "pretrain_ckpt.01_corpus", "--out", str(tmp_path / "c"), "--set", "corpus.drill_doc=3"],
                 ["-m", "pretrain_ckpt.02_tokenizer", "--in", str(tmp_path / "c"), "--out", str(tmp_path / "t"),
                  "--set", "tokenizer.max_char=3"],
                 ["-m", "domains", "datasets", "--out", str(tmp_path / "d"), "--recipe", "micro_cpu",
                  "--set", "datasets.rl_per_domian=3"]):
        r = run(args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "is not a key of" in lines[0] and "did you mean" in lines[0], \
            (args, r.stderr)
    assert list(tmp_path.iterdir()) == []


def test_the_corpus_sizes_are_the_recipes_and_a_flag_overrides_them(tmp_path):
    """micro_cpu: corpus.drill_docs 300 and mid_training false (a --domains given is not read: it need not even
    exist); --max-mb overrides the recipe's corpus.max_mb."""
    out = tmp_path / "c"
    r = run(["-m", "pretrain_ckpt.01_corpus", "--out", str(out), "--recipe", "micro_cpu", "--max-mb", "0.05",
             "--domains", str(tmp_path / "no_datasets")])
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["corpus"] == {"max_mb": 0.05, "drill_docs": 300, "val_fraction": 0.02, "seed": 1234,
                                     "mid_training": False}
    assert m["parent"] is None and m["metrics"]["domain_documents"] == 0
