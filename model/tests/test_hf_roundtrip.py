"""HF -> Megatron -> HF gives bit-identical tensors, directly at TP=1 and via a torch_dist checkpoint
saved at TP=2 and converted back at TP=1 (dense and MoE)."""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from model.tests._hf_fixtures import make_hf_dir
from model.tests.conftest import run_helper


@pytest.fixture(scope="module", params=[False, True], ids=["dense", "moe"])
def roundtrip(request, tmp_path_factory):
    moe = request.param
    root = tmp_path_factory.mktemp("rt_moe" if moe else "rt_dense")
    hf_dir = make_hf_dir(root, moe)
    ckpt = root / "mcore_tp2"
    run_helper("_run_layout.py", ["import", "--hf", str(hf_dir), "--tp", "2", *(["--sp"] if moe else []),
                                  "--ckpt", str(ckpt)], nproc=2)
    run_helper("_run_layout.py", ["to_hf", "--hf", str(hf_dir), "--ckpt", str(ckpt),
                                  "--direct-out", str(root / "direct"), "--hf-out", str(root / "via_ckpt")])
    return load_file(str(hf_dir / "model.safetensors")), root


def _assert_bit_identical(ref: dict, got: dict) -> None:
    assert set(got) == set(ref), f"tensor names differ: {sorted(set(got) ^ set(ref))[:5]}"
    bad = [k for k in ref if ref[k].dtype != got[k].dtype or not torch.equal(ref[k], got[k])]
    assert not bad, f"{len(bad)} tensors differ after the round trip, e.g. {bad[:3]}"


def test_roundtrip_direct_is_bit_identical(roundtrip):
    ref, root = roundtrip
    _assert_bit_identical(ref, load_file(str(root / "direct" / "model.safetensors")))


def test_roundtrip_via_tp2_dist_checkpoint_is_bit_identical(roundtrip):
    ref, root = roundtrip
    _assert_bit_identical(ref, load_file(str(root / "via_ckpt" / "model.safetensors")))
