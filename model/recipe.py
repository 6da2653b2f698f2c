"""Recipes: YAML files named for their hardware (`<stage>/recipes/<name>.yaml`), plus CLI overrides.

    cfg = load_recipe("sft", "tiny_cpu", overrides=["train.steps=20", "parallel.tp=2"])

`--set a.b=v` values are parsed as YAML scalars (numbers, booleans, lists). The resolved config is
what the stage writes beside its checkpoint, so a run can be repeated from its manifest alone.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from model.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def recipe_path(stage: str, name: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    p = ROOT / stage / "recipes" / f"{name}.yaml"
    if not p.exists():
        names = sorted(q.stem for q in (ROOT / stage / "recipes").glob("*.yaml"))
        raise ConfigError(f"recipe {name!r} not found at {p}: choose one of {names} (RECIPE=...)")
    return p


def apply_overrides(cfg: dict, overrides: list[str]) -> dict:
    cfg = copy.deepcopy(cfg)
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key.path=value")
        key, raw = item.split("=", 1)
        node = cfg
        parts = key.split(".")
        for k in parts[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {k!r} is not a section")
        node[parts[-1]] = yaml.safe_load(raw)
    return cfg


def load_recipe(stage: str, name: str, overrides: list[str] | None = None) -> dict[str, Any]:
    cfg = yaml.safe_load(recipe_path(stage, name).read_text()) or {}
    cfg = apply_overrides(cfg, overrides or [])
    cfg["recipe"] = name
    return cfg


def dump(cfg: dict, path: Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg, sort_keys=True))
