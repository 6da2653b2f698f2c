"""Engines run without the trainers' passive OpenMP waiting (model/vllm_engine.engine_omp_env: 25% of int8 decode)."""
from __future__ import annotations

from model.vllm_engine import engine_omp_env


def test_passive_wait_policy_is_removed_and_returned():
    env = {"OMP_WAIT_POLICY": "passive", "OMP_NUM_THREADS": "2"}
    assert engine_omp_env(env) == {"OMP_WAIT_POLICY": "passive"}
    assert env == {"OMP_NUM_THREADS": "2"}


def test_another_wait_policy_is_left_alone():
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert engine_omp_env(env) == {} and env == {"OMP_WAIT_POLICY": "ACTIVE"}

