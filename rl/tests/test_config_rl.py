"""rl recipes through the real entry script: a mistyped key (file or --set) is one line naming it, nothing is
written; --help lists the recipe fields with their help (rl/config.py); RLConfig.from_dict checks keys the same way."""
from __future__ import annotations

import sys

import pytest
import yaml

from model.config import ConfigError
from rl.tests.conftest import ROOT, run


def train(tmp_path, *extra: str):
    out = tmp_path / "rl"
    r = run([sys.executable, "-m", "rl.01_train", "--in", str(tmp_path / "sft"), "--data", str(tmp_path / "data"),
             "--out", str(out), "--results", str(tmp_path / "results"), *extra], timeout=300)
    return r, out


def test_mistyped_set_is_refused_by_name_and_writes_nothing(tmp_path):
    r, out = train(tmp_path, "--recipe", "micro_cpu", "--set", "rollout.temprature=1")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "rollout.temprature is not a key of rollout (did you mean temperature?)" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no rl/, rl.run/ or results/


def test_mistyped_recipe_file_key_is_refused_by_name(tmp_path):
    cfg = yaml.safe_load((ROOT / "rl/recipes/micro_cpu.yaml").read_text())
    cfg["algo"]["clip_hgh"] = cfg["algo"].pop("clip_high")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    r, out = train(tmp_path, "--recipe", str(bad))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "algo.clip_hgh is not a key of algo (did you mean clip_high?)" \
        in lines[0], r.stderr
    assert not out.exists()


def test_help_lists_the_recipe_fields_with_their_help():
    r = run([sys.executable, "-m", "rl.01_train", "--help"], timeout=300)
    assert r.returncode == 0
    assert any(ln.split()[:3] == ["samples_per_prompt", "=", "4"] and "the GRPO group size" in ln
               for ln in r.stdout.splitlines()), r.stdout


def test_from_dict_refuses_a_mistyped_key_with_the_close_match():
    from rl.config import RLConfig

    with pytest.raises(ConfigError, match=r"^sched\.windw is not a key of sched \(did you mean window\?\)"):
        RLConfig.from_dict({"sched": {"windw": 4}})


def test_from_dict_refuses_a_value_of_the_wrong_kind():
    from rl.config import RLConfig

    with pytest.raises(ConfigError, match=r"^rollout\.groups_per_step='8' must be int"):
        RLConfig.from_dict({"rollout": {"groups_per_step": "8"}})


@pytest.mark.parametrize("algo,match", [({"mis_low": 0.5, "mis_high": 0.9}, r"algo\.mis_low=0\.5, algo\.mis_high=0\.9"),
                                        ({"mis_low": 0.5}, r"algo\.mis_low=0\.5 without algo\.mis_high"),
                                        ({"is_level": "trajectory"}, r"algo\.is_level='trajectory'")])
def test_an_importance_correction_that_cannot_work_is_refused_by_name(algo, match):
    from rl.config import RLConfig

    with pytest.raises(ConfigError, match=match):
        RLConfig.from_dict({"algo": algo})
    RLConfig.from_dict({"algo": {"mis_low": 0.5, "mis_high": 2.0, "is_level": "sequence"}})  # a valid band


@pytest.mark.parametrize("cfg,match", [({"algo": {"routing_replay": True}}, r"needs the engine's routing"),
                                       ({"rollout": {"router_flip_frac": 1.0}}, r"router_flip_frac=1\.0 must be"),
                                       ({"rollout": {"record_routing": True, "tensor_parallel_size": 2}},
                                        r"need rollout\.tensor_parallel_size=1")])
def test_routing_options_that_cannot_work_are_refused_by_name(cfg, match):
    from rl.config import RLConfig

    with pytest.raises(ConfigError, match=match):
        RLConfig.from_dict(cfg)
