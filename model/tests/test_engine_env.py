"""Engines run without the trainers' passive OpenMP waiting (model/vllm_engine.engine_omp_env: 25% of int8 decode)."""
from __future__ import annotations

from model.vllm_engine import engine_env, engine_omp_env


def test_passive_wait_policy_is_removed_and_returned():
    env = {"OMP_WAIT_POLICY": "passive", "OMP_NUM_THREADS": "2"}
    assert engine_omp_env(env) == {"OMP_WAIT_POLICY": "passive"}
    assert env == {"OMP_NUM_THREADS": "2"}


def test_the_trainers_spin_count_is_removed_too():
    env = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "20000", "PATH": "/bin"}
    assert engine_omp_env(env) == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "20000"} and env == {"PATH": "/bin"}


def test_another_wait_policy_is_left_alone():
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert engine_omp_env(env) == {} and env == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_an_engine_leaves_the_trainers_world_and_takes_its_ranks_gpus():
    parent = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "TORCHELASTIC_RUN_ID": "x", "PATH": "/bin",
              "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    env = engine_env(parent, devices=[2, 3])  # the 3rd and 4th GPU this process sees
    assert env["CUDA_VISIBLE_DEVICES"] == "6,7" and env["PATH"] == "/bin"
    assert not {"RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"} & env.keys()
    assert engine_env({"PATH": "/bin"}, devices=[1])["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in engine_env({"PATH": "/bin"})
