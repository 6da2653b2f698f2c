"""The SFT peer benchmark's bookkeeping: the documents TRL trains on are exactly those of the packs, and the real
tokens counted for ours are exactly the packs' non-pad positions."""
from __future__ import annotations

import importlib

import pytest

from sft.bench_peers import documents, real_lengths
from sft.packing import pack, to_example


def _examples():
    # (token ids, loss mask) of three documents of different lengths; the mask trains the tail of each
    raw = [(list(range(10, 17)), [0, 0, 0, 0, 1, 1, 1]), (list(range(20, 24)), [0, 0, 1, 1]),
           (list(range(30, 39)), [0, 0, 0, 1, 1, 1, 1, 1, 1])]
    return raw, [to_example(ids, m) for ids, m in raw]


def test_documents_round_trip_the_packed_examples():
    raw, ex = _examples()
    packs, _ = pack(ex, 12, pad_id=1)  # 6 + 3 fit one pack, 8 the next: both padded
    rows = {k: [p[k] for p in packs] for k in packs[0]}
    docs = documents(packs, real_lengths(rows))
    assert [d["input_ids"] for d in docs] == [ids for ids, _ in raw]
    assert [d["completion_mask"] for d in docs] == [[0] + m[1:] for _, m in raw]


def test_real_lengths_leave_out_exactly_the_pads():
    _, ex = _examples()
    packs, stats = pack(ex, 12, pad_id=1)
    real = real_lengths({"doc_ids": [p["doc_ids"] for p in packs]})
    assert real == [6 + 3, 8]
    assert sum(real) / (12 * len(packs)) == pytest.approx(stats["packing_efficiency"])


def test_a_document_without_trained_tokens_is_refused():
    packs, _ = pack([to_example([5, 6, 7], [0, 0, 0])], 4, pad_id=1)
    with pytest.raises(ValueError, match="no trained token"):
        documents(packs, [3])


def test_step_rows_follow_the_trainers_sample_order():
    """bench_peers counts ours' real tokens per step through Packs.row, the order sft/02_train feeds."""
    Packs = importlib.import_module("sft.02_train").Packs
    rows = [{"input_ids": [i], "labels": [i], "loss_mask": [1], "doc_ids": [0]} for i in range(5)]
    import datasets

    p = Packs(datasets.Dataset.from_list(rows), seed=7)
    for i in range(12):  # past the first epoch
        assert int(p(i)["tokens"][0]) == p.row(i)


def _arms(bfd, wrapped, none):
    return {k: [{"isolation": {"max_abs_logit_difference": v}} for v in vs]
            for k, vs in (("trl_bfd", bfd), ("trl_wrapped", wrapped), ("trl_none", none))}


@pytest.mark.parametrize("bfd, wrapped, none", [([4.3e-6, 4.3e-6], [6.60, 6.60], [3.3e-6, 3.3e-6]),  # float32, measured
                                                ([0.031, 0.031], [6.7, 6.7], [0.0625, 0.0625])])  # bfloat16, measured
def test_isolation_is_judged_against_the_unpacked_rows_noise_in_either_dtype(bfd, wrapped, none):
    from sft.bench_peers import isolated_settings

    isolated, tol = isolated_settings(_arms(bfd, wrapped, none))
    assert isolated == ["trl_bfd", "trl_none"] and tol["noise_floor_trl_none"] == max(none)


def test_one_run_over_the_tolerance_makes_a_setting_unisolated():
    from sft.bench_peers import isolated_settings

    assert "trl_bfd" not in isolated_settings(_arms([4e-6, 5e-3], [6.6], [1e-6]))[0]


def test_a_broken_probe_judges_no_setting_and_says_why():
    from sft.bench_peers import isolated_settings

    isolated, tol = isolated_settings(_arms([4e-6], [6.6], [3.0]))
    assert isolated is None and tol["judged"] is False and "probe is broken" in tol["reason"]


def test_compiled_arms_are_judged_like_the_others():
    # TRL's torch_compile arms are candidates for its best isolated and its fastest setting alike
    from sft.bench_peers import isolated_settings

    arms = _arms([0.031], [6.7], [0.0625])
    arms.update({k: [{"isolation": {"max_abs_logit_difference": v}}]
                 for k, v in (("trl_bfd_compiled", 0.031), ("trl_wrapped_compiled", 6.7))})
    assert isolated_settings(arms)[0] == ["trl_bfd", "trl_none", "trl_bfd_compiled"]


@pytest.mark.parametrize("micro, rows, others", [(4, 4, [1, 2]), (2, 4, [1, 4]), (1, 4, [2, 4]), (1, 2, [2])])
def test_trl_runs_its_packed_settings_at_every_one_or_two_micro_batch_split_and_at_one_row(micro, rows, others):
    # so TRL is compared at its own best micro batch, not only at ours
    from sft.bench_peers import trl_arms

    arms = trl_arms(micro, rows)
    assert {k: v for k, v in arms.items() if "_mb" not in k} == {
        "trl_bfd": ("bfd", False, micro), "trl_wrapped": ("wrapped", False, micro), "trl_none": ("none", False, micro),
        "trl_bfd_compiled": ("bfd", True, micro), "trl_wrapped_compiled": ("wrapped", True, micro)}
    assert sorted(v[2] for k, v in arms.items() if "_mb" in k) == sorted(others * 2)
    assert all(rows % v[2] == 0 for v in arms.values())
    assert "trl_bfd_compiled" not in trl_arms(micro, rows, compiled=False)
