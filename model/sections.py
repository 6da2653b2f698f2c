"""Typed recipe sections: one dataclass per section of a stage's recipe, the single source of its keys, types,
defaults and help.

A field's help is its trailing comment (`steps: int = 300  # optimizer steps`, the style of every config
dataclass here) or `metadata={"help": ...}`. A stage declares `SCHEMA = {section: dataclass}` in
`<stage>/config.py`; `load_recipe` checks a recipe file and then its `--set` overrides against it (an unknown
key at any depth, or a value of the wrong kind, is one ConfigError naming the full key and a close match) and
hands back a plain dict with every default filled in. `epilog(stage)` renders the same fields for `--help`.

Pure Python (no torch): the cluster launcher validates recipes from its own venv (.venv-launch).
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import inspect
import io
import json
import textwrap
import tokenize
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from model.config import ConfigError, ModelConfig, ParallelConfig

RESERVED = ("recipe",)  # top-level keys load_recipe adds itself (a written config.yaml loads as a recipe again)


@dataclass(frozen=True)
class Partial:
    """A section whose keys (and value types) are checked but whose defaults are not filled in: `model` (a stage
    after the base takes the model from its parent checkpoint and compares only the keys a recipe sets; the
    draft's vocabulary comes from its target) and `cluster` (required site values and Slurm environment
    fallbacks, resolved by launch/cluster.py)."""
    cls: type
    types: bool = True  # False: leave value kinds to the section's own from_dict (cluster coerces mem/time)
    note: str = ""  # shown by --help beside the section name


BF16_ROUNDINGS = ("nearest", "stochastic")


@dataclass
class OptimConfig:
    lr: float = 3e-4  # peak learning rate
    min_lr: float = 3e-5  # final learning rate after decay
    warmup_steps: int = 10  # linear warmup steps
    decay_style: str = "cosine"  # cosine | linear | constant
    weight_decay: float = 0.1  # decoupled weight decay
    beta1: float = 0.9  # Adam beta1
    beta2: float = 0.95  # Adam beta2
    clip_grad: float = 1.0  # global grad-norm clip (0 = off)
    use_distributed_optimizer: bool = False  # shard optimizer state over DP (ZeRO-1), for GPU clusters
    bf16_rounding: str = "nearest"  # nearest | stochastic: bf16 weights from fp32 main copies (model/rounding.py)

    def __post_init__(self):
        if self.bf16_rounding not in BF16_ROUNDINGS:
            raise ConfigError(f"optim.bf16_rounding={self.bf16_rounding!r}: choose one of {', '.join(BF16_ROUNDINGS)}")
        if self.bf16_rounding == "stochastic" and self.use_distributed_optimizer:
            raise ConfigError("optim.bf16_rounding=stochastic is not implemented for the distributed optimizer: set "
                              "optim.use_distributed_optimizer=false or optim.bf16_rounding=nearest")


@dataclass
class TrainConfig:
    steps: int = 300  # optimizer steps
    seq_length: int = 256  # tokens per sequence
    seed: int = 1234  # seeds init, data order and RNG
    save_every: int = 50  # step checkpoint interval
    keep_steps: int = 2  # step checkpoints kept in <out>.run
    eval_every: int = 100  # held-out loss interval (0 = only at the end)
    eval_batches: int = 4  # global batches of held-out data per evaluation
    dtype: str = "float32"  # float32 | bfloat16 (bf16 on GPU)
    fuse_elementwise: bool = False  # norms, experts' activation and loss via torch.compile (model/fused.py; CPU: g++)
    cpu_attention: str = "flash"  # flash | gemm: causal attention of bf16 training on the CPU as GEMMs (model/attention.py)
    loss_rows_only: bool = False  # output layer + loss only where the loss mask counts (model/logit_rows.py): SFT

    def __post_init__(self):
        if self.cpu_attention not in ("flash", "gemm"):
            raise ConfigError(f"train.cpu_attention={self.cpu_attention!r}: choose flash or gemm")


def cluster() -> Partial:
    from model.cluster import ClusterConfig  # imported late: it imports model.config

    return Partial(ClusterConfig, types=False, note="read by the Slurm launcher, python -m launch (launch/README.md)")


LOOP = ["model", "parallel", "optim", "train"]  # the sections model/loop.py reads


def training() -> dict:
    """The sections of every stage that trains through model/loop.py."""
    return {"model": Partial(ModelConfig, note="the architecture; a stage after the base takes it from its input "
                                               "checkpoint, and the keys set here must match it"),
            "parallel": ParallelConfig, "optim": OptimConfig, "train": TrainConfig, "cluster": cluster()}


@cache
def schema(stage: str) -> dict:
    """`<stage>/config.py`'s SCHEMA."""
    try:
        mod = importlib.import_module(f"{stage}.config")
    except ModuleNotFoundError as e:
        if e.name not in (stage, f"{stage}.config"):
            raise
        mod = None
    if mod is None or not hasattr(mod, "SCHEMA"):
        raise ConfigError(f"stage {stage!r} declares no recipe schema ({stage}/config.py: SCHEMA): pass a recipe of "
                          "a stage folder (eval, pretrain_ckpt, rl, serving, sft)")
    return mod.SCHEMA


# ---- field help: the trailing comment of each field ----------------------------------------------------------
@cache
def _comments(cls: type) -> dict[str, str]:
    try:
        src = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    by_line: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            by_line[tok.start[0]] = tok.string.lstrip("#").strip()
    out = {}
    for node in ast.parse(src).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = " ".join(by_line[i] for i in range(node.lineno, node.end_lineno + 1) if i in by_line)
            out[node.target.id] = text
    return out


def help_of(cls: type, f: dataclasses.Field) -> str:
    return f.metadata.get("help") or _comments(cls).get(f.name, "")


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


# ---- checking ------------------------------------------------------------------------------------------------
def _kind_ok(v: Any, tp: Any) -> bool:
    """Cheap checks only: scalars, list vs mapping, Optional/union; anything else passes."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_kind_ok(v, a) for a in typing.get_args(tp))
    if tp is type(None):
        return v is None
    if tp is bool:
        return isinstance(v, bool)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if tp is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if tp is str:
        return isinstance(v, str)
    if tp is list or origin is list:
        return isinstance(v, list)
    if tp is dict or origin is dict or dataclasses.is_dataclass(tp):
        return isinstance(v, dict)
    return True


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return {type(None): "null", dict: "mapping"}.get(tp, getattr(tp, "__name__", str(tp)))


def _unknown(path: str, key: str, valid: list[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(f"{path} is not a key of {what}{hint}: valid keys are {', '.join(valid)}")


def check_section(cls: type, d: Any, path: str, *, fill: bool = True, kinds: bool = True) -> dict:
    """`d` (a recipe section) checked against dataclass `cls`: a new plain dict, defaults filled when `fill`."""
    if d is None:
        d = {}
    if not isinstance(d, dict):
        raise ConfigError(f"{path}={d!r} must be a mapping of {cls.__name__} keys")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for k in d:
        if k not in fields:
            raise _unknown(f"{path}.{k}", str(k), list(fields), path)
    out = {}
    for name, f in fields.items():
        tp = hints[name]
        if name in d:
            v = d[name]
            if kinds and not _kind_ok(v, tp):
                raise ConfigError(f"{path}.{name}={v!r} must be {_type_name(tp)}")
            if dataclasses.is_dataclass(tp) and isinstance(v, dict):
                v = check_section(tp, v, f"{path}.{name}", fill=fill, kinds=kinds)
            out[name] = v
        elif fill:
            v = default_of(f)
            if v is dataclasses.MISSING:
                continue
            out[name] = dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
    return out


def check(sections: dict, cfg: dict, where: str) -> dict:
    """A whole recipe checked against a stage's sections; every plain section present with its defaults."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: a recipe is a mapping of sections ({', '.join(sections)})")
    for k in cfg:
        if k not in sections and k not in RESERVED:
            raise _unknown(str(k), str(k), list(sections), f"the recipe ({where})")
    out = {k: v for k, v in cfg.items() if k in RESERVED}
    for name, spec in sections.items():
        if isinstance(spec, Partial):
            if name in cfg:
                out[name] = check_section(spec.cls, cfg[name], name, fill=False, kinds=spec.types)
        else:
            out[name] = check_section(spec, cfg.get(name), name)
    return out


# ---- --help --------------------------------------------------------------------------------------------------
def epilog(stage: str, only: list[str] | None = None) -> str:
    """The recipe fields of `stage` (or of the sections `only`; default all but cluster, which only the launcher
    reads) with default and help, for an argparse epilog."""
    sec = schema(stage)
    lines = [f"recipe fields ({stage}/recipes/<name>.yaml, or --set SECTION.KEY=VALUE; an unknown key is refused):"]
    for name in only or [n for n in sec if n != "cluster"]:
        spec = sec[name]
        cls = spec.cls if isinstance(spec, Partial) else spec
        lines.append(f"  {name}:" + (f" ({spec.note})" if isinstance(spec, Partial) and spec.note else ""))
        lines += _field_lines(cls)
    return "\n".join(lines)


def _field_lines(cls: type, prefix: str = "") -> list[str]:
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        d = default_of(f)
        if dataclasses.is_dataclass(hints[f.name]):  # a nested section: its own fields, dotted
            out += _field_lines(hints[f.name], f"{prefix}{f.name}.")
            continue
        shown = "(required)" if d is dataclasses.MISSING else json.dumps(d)  # YAML spelling: null, true, [1, 2]
        out.append(f"    {prefix}{f.name} = {shown}".ljust(44) + f"  {help_of(cls, f)}")
    return out


