"""torch_dist checkpoints: saved at TP=2 they reload at TP=1 with the same eval loss; a load into another
architecture is refused, naming the keys."""
from __future__ import annotations

import pytest

from model.tests.conftest import read_json, run_helper


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_tp2_checkpoint_reloads_at_tp1_with_same_eval_loss(tmp_path, moe):
    flags = ["--moe", "--sp"] if moe else []
    ckpt = tmp_path / "ckpt"
    run_helper("_run_layout.py", ["save", "--tp", "2", *flags, "--ckpt", str(ckpt), "--out", str(tmp_path / "s.json")],
               nproc=2)
    run_helper("_run_layout.py", ["load", *(["--moe"] if moe else []), "--ckpt", str(ckpt),
                                  "--out", str(tmp_path / "l.json")])
    saved, loaded = read_json(tmp_path / "s.json"), read_json(tmp_path / "l.json")
    # the checkpoint holds trained weights, not the seeded init the TP=1 model started from
    assert abs(loaded["init_eval_loss"] - saved["eval_loss"]) > 1e-3, (loaded, saved)
    assert abs(loaded["eval_loss"] - saved["eval_loss"]) <= 1e-6, \
        f"eval loss at TP=1 after reload {loaded['eval_loss']!r} != {saved['eval_loss']!r} at TP=2 when saved"


def test_loading_into_another_architecture_names_the_mismatched_keys(tmp_path):
    run_helper("_load_mismatch.py", ["--ckpt", str(tmp_path / "ckpt"), "--out", str(tmp_path / "o.json")])
    o = read_json(tmp_path / "o.json")
    assert o["same"] == "loaded"
    # an untied output layer has no place in a tied model: Megatron's default load dropped it silently
    assert o["tied"].startswith("CheckpointError") and "output_layer.weight" in o["tied"], o["tied"]
    assert o["moe"].startswith("CheckpointError") and "decoder.layers.mlp.router.weight" in o["moe"], o["moe"]
