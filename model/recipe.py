"""Recipes: YAML files named for their hardware (`<stage>/recipes/<name>.yaml`), plus CLI overrides.

    cfg = load_recipe("sft", "tiny_cpu", overrides=["train.steps=20", "parallel.tp=2"])

`--set a.b=v` values are parsed as YAML scalars (numbers, booleans, lists). The file, then each override, is
checked against the stage's typed sections (`<stage>/config.py` SCHEMA, model/sections.py): an unknown key or a
value of the wrong kind is a one-line ConfigError naming it. The result is a plain dict with every default
filled in; it is what the stage writes beside its checkpoint, so a run can be repeated from its manifest alone.
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
    from model import sections

    sec = sections.schema(stage)
    path = recipe_path(stage, name)
    cfg = yaml.safe_load(path.read_text()) or {}
    where = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
    try:
        sections.check(sec, cfg, where)
    except ConfigError as e:
        raise ConfigError(f"{e} (in {where})") from None
    for item in overrides or []:  # one at a time, so an error names the --set that caused it
        cfg = apply_overrides(cfg, [item])
        try:
            sections.check(sec, cfg, f"--set {item}")
        except ConfigError as e:
            raise ConfigError(f"{e} (--set {item})") from None
    cfg = sections.check(sec, cfg, where)
    cfg["recipe"] = name
    return cfg


def dump(cfg: dict, path: Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg, sort_keys=True))
