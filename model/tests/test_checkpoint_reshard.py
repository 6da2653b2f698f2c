"""A torch_dist checkpoint saved at TP=2 reloads at TP=1 with the same eval loss."""
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
