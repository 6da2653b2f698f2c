"""Registry size, family coverage, splits fixed by seed, plug-ins by dotted path."""
import sys
import textwrap

import pytest

from domains import load_plugin, registry
from domains.chat import render
from domains.splits import assign_builtin_splits

FAMILIES = {"math", "structured", "retrieval", "docs", "scene", "agent", "code", "terminal"}


def test_at_least_200_domains_in_the_eight_families():
    reg = registry()
    assert len(reg) >= 200
    assert {d.family for d in reg.values()} >= FAMILIES


def test_heldout_split_covers_every_family_and_is_a_minority():
    reg = registry().values()
    held = {d.family for d in reg if d.split == "heldout"}
    assert held >= FAMILIES
    n_held = sum(d.split == "heldout" for d in reg)
    assert 0.1 * len(reg) < n_held < 0.35 * len(reg)


def test_splits_are_fixed_by_seed():
    ds = [d for d in registry().values() if d.family in FAMILIES]
    a, b = assign_builtin_splits(ds), assign_builtin_splits(ds)
    assert a == b and all(a[d.name] == d.split for d in ds)
    assert assign_builtin_splits(ds, seed=1) != a


def test_every_domain_has_an_easy_level_with_a_short_prompt():
    for d in registry().values():
        t = d.generate(0, min(d.difficulties))
        assert min(d.difficulties) <= 1, d.name
        assert len(render(t.messages)) < 1300, (d.name, len(render(t.messages)))  # ~300 tokens at ~4 chars/token


def test_easy_pure_answers_are_short():
    for d in registry().values():
        if d.needs_sandbox:
            continue
        t = d.generate(1, min(d.difficulties))
        for m in d.solve(t):
            if m["role"] == "assistant":
                assert len(m.get("content") or "") + len(str(m.get("tool_calls") or "")) < 300, d.name


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "my_plugin_pkg.py").write_text(textwrap.dedent('''
        from domains.base import AnswerDomain, Q
        def make(rng, d):
            a = rng.randint(1, 9)
            return Q(f"What is {a} doubled?", str(2 * a))
        def register():
            return [AnswerDomain("myfam.double", "myfam", make), AnswerDomain("math.triple_plugin", "math", make)]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_plugin_pkg"
    mod = sys.modules["domains.registry"]  # the module (domains.registry the attribute is the function)
    for n in ("myfam.double", "math.triple_plugin"):
        mod._plugins.pop(n, None)
    sys.modules.pop("my_plugin_pkg", None)


def test_plugin_by_dotted_path_registers_working_domains(plugin_module):
    before = {n: d.split for n, d in registry().items()}
    assert load_plugin(f"{plugin_module}:register") == ["myfam.double", "math.triple_plugin"]
    reg = registry()
    d = reg["myfam.double"]
    t = d.generate(0, 0)
    assert d.verify(t, d.solve(t)).passed and d.split in ("train", "heldout")
    assert all(reg[n].split == s for n, s in before.items())  # built-in splits unchanged


def test_plugin_from_environment_variable(plugin_module, monkeypatch):
    monkeypatch.setenv("DOMAINS_PLUGINS", plugin_module)
    assert "myfam.double" in registry()


def test_bad_plugin_path_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot import"):
        load_plugin("no_such_pkg_xyz.mod")
