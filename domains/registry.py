"""The domain registry: built-in families + user plug-ins, with splits assigned.

    import domains
    domains.registry()                       # {name: Domain}, sorted by name
    domains.get("math.add")
    domains.load_plugin("mypkg.tasks:register")   # register() returns an iterable of Domain objects
    DOMAINS_PLUGINS=mypkg.tasks,other.mod .venv/bin/python -m domains list   # same, from the environment

A plug-in module is "pkg.mod" (calls pkg.mod.register()) or "pkg.mod:func"; the function takes no arguments
and returns Domain instances. Plug-ins never change the split of built-in domains (see splits.py).
"""
from __future__ import annotations

import importlib
import os

from domains.core import Domain
from domains.splits import assign_builtin_splits, plugin_split

BUILTIN_FAMILIES = ["math", "structured", "retrieval", "docs", "scene", "agent", "code", "terminal"]

_builtin: dict[str, Domain] | None = None
_plugins: dict[str, Domain] = {}
_env_loaded: str | None = None


def _load_builtin() -> dict[str, Domain]:
    global _builtin
    if _builtin is None:
        found: dict[str, Domain] = {}
        for fam in BUILTIN_FAMILIES:
            mod = importlib.import_module(f"domains.families.{fam}")
            for d in mod.domains():
                if d.name in found:
                    raise RuntimeError(f"duplicate built-in domain name {d.name!r}")
                found[d.name] = d
        for name, split in assign_builtin_splits(list(found.values())).items():
            found[name].split = split
        _builtin = found
    return _builtin


def load_plugin(spec: str) -> list[str]:
    """Import 'pkg.mod' or 'pkg.mod:func', register the Domains it returns; returns their names."""
    mod_name, _, func_name = spec.strip().partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"plug-in {spec!r}: cannot import {mod_name!r} ({e}); is it on PYTHONPATH?") from None
    fn = getattr(mod, func_name or "register", None)
    if not callable(fn):
        raise ValueError(f"plug-in {spec!r}: {mod_name} has no callable {func_name or 'register'!r}")
    names = []
    builtin = _load_builtin()
    for d in fn():
        if not isinstance(d, Domain) or not d.name or not d.family:
            raise ValueError(f"plug-in {spec!r} returned {d!r}: expected Domain objects with name and family set")
        if d.name in builtin or (d.name in _plugins and _plugins[d.name] is not d):
            raise ValueError(f"plug-in {spec!r}: domain name {d.name!r} is already registered; rename it")
        if d.split not in ("train", "heldout"):
            d.split = plugin_split(d.name)
        _plugins[d.name] = d
        names.append(d.name)
    return names


def _load_env_plugins() -> None:
    global _env_loaded
    spec = os.environ.get("DOMAINS_PLUGINS", "")
    if spec != _env_loaded:
        for s in filter(None, (x.strip() for x in spec.split(","))):
            load_plugin(s)
        _env_loaded = spec


def registry() -> dict[str, Domain]:
    """All domains by name (built-in, DOMAINS_PLUGINS, load_plugin), sorted by name."""
    _load_env_plugins()
    alld = {**_load_builtin(), **_plugins}
    return dict(sorted(alld.items()))


def get(name: str) -> Domain:
    reg = registry()
    if name not in reg:
        close = [n for n in reg if n.split(".")[0] == name.split(".")[0]][:8]
        hint = f"; e.g. {', '.join(close)}" if close else "; run `python -m domains list` for the names"
        raise KeyError(f"unknown domain {name!r}{hint}")
    return reg[name]
