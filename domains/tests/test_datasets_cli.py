"""Datasets layout/manifest/seed disjointness, and the CLI's outputs and exit codes."""
import hashlib
import json

import pytest

from domains import registry
from domains.cli import main
from domains.datasets import seeds_for, write_datasets
from domains.tests.conftest import every_oracle, run_cli_check


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("x") / "data"
    ds = [d for d in registry().values() if d.family in ("math", "agent")]
    m = write_datasets(str(out), ds, sft_per_domain=2, rl_per_domain=2, eval_per_domain=1, seed=3, max_difficulty=0,
                       corpus_per_domain=1)
    return out, m, ds


def test_write_datasets_writes_four_datasets_and_manifest(written):
    from datasets import load_from_disk
    out, m, ds = written
    sft = load_from_disk(str(out / "sft"))
    assert set(sft.column_names) == {"domain", "family", "split", "difficulty", "seed", "messages"}
    assert set(load_from_disk(str(out / "rl")).column_names) >= {"task", "prompt"}
    msgs = json.loads(sft[0]["messages"])
    assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "assistant"
    assert m["stage"] == "data" and m["counts"]["sft"]["rows"] == len(sft)
    assert set(load_from_disk(str(out / "corpus")).column_names) >= {"domain", "text"}


def test_corpus_rows_are_plain_text_of_train_domains_with_their_own_seeds(written):
    from datasets import load_from_disk

    from domains.chat import SPECIAL_TOKENS
    out, _, _ = written
    corpus = load_from_disk(str(out / "corpus"))
    assert set(corpus["split"]) == {"train"} and len(corpus) > 0
    assert not any(tok in text for text in corpus["text"] for tok in SPECIAL_TOKENS)
    assert all("Assistant: " in text for text in corpus["text"])
    others = set()
    for kind in ("sft", "rl", "eval"):
        others |= set(load_from_disk(str(out / kind))["seed"])
    assert not set(corpus["seed"]) & others


def test_write_datasets_manifest_hashes_every_file(written):
    out, m, _ = written
    files = [p for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert sorted(str(p.relative_to(out)) for p in files) == sorted(m["files"])
    for p in files:
        assert hashlib.sha256(p.read_bytes()).hexdigest() == m["files"][str(p.relative_to(out))]


def test_write_datasets_train_sets_exclude_heldout_and_eval_includes_it(written):
    from datasets import load_from_disk
    out, _, _ = written
    assert set(load_from_disk(str(out / "rl"))["split"]) == {"train"}
    assert set(load_from_disk(str(out / "eval"))["split"]) == {"train", "heldout"}


def test_eval_seeds_never_overlap_training_seeds(written):
    from datasets import load_from_disk
    out, _, _ = written
    train = set(load_from_disk(str(out / "sft"))["seed"]) | set(load_from_disk(str(out / "rl"))["seed"])
    assert not train & set(load_from_disk(str(out / "eval"))["seed"])
    assert not set(seeds_for("eval", 0, 1000)) & (set(seeds_for("sft", 0, 1000)) | set(seeds_for("rl", 0, 1000)))


def test_write_datasets_refuses_to_clobber_without_overwrite(written):
    out, _, ds = written
    with pytest.raises(FileExistsError):
        write_datasets(str(out), ds[:1], 1, 1, 1, 0, 0)


def test_cli_list_json_has_required_fields(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 200 and {"name", "family", "difficulties", "split", "needs_sandbox"} <= set(rows[0])


def test_cli_sample_is_deterministic(capsys):
    main(["sample", "docs.current_ratio", "--seed", "5", "--difficulty", "1"])
    a = capsys.readouterr().out
    main(["sample", "docs.current_ratio", "--seed", "5", "--difficulty", "1"])
    assert a == capsys.readouterr().out and json.loads(a)["domain"] == "docs.current_ratio"


def test_cli_bad_input_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:  # bad input exits 2 like an argparse usage error (model/cli.py)
        main(["sample", "math.nope", "--seed", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown domain") and "\n" not in err


def test_cli_check_on_pure_families_all_pass(tmp_path):
    """Every oracle of every pure domain at every difficulty passes its verifier (the sandboxed ones:
    test_sandbox_families.py::test_cli_check_every_sandboxed_oracle_passes)."""
    pure = sorted({d.family for d in registry().values()} - {d.family for d in registry().values() if d.needs_sandbox})
    assert {"math", "structured", "retrieval", "docs", "scene", "agent"} <= set(pure)
    rc, out, checked, failed = run_cli_check(["--families", ",".join(pure)], tmp_path)
    assert not failed and rc == 0 and "(100.0%)" in out, failed[:5]
    assert checked == every_oracle(sandboxed=False)
