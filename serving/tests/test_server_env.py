"""The API server process runs without the trainers' passive OpenMP waiting (model/vllm_engine.engine_omp_env)."""
from __future__ import annotations

from serving.server import server_env


def test_the_server_process_gets_no_passive_policy(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert "OMP_WAIT_POLICY" not in server_env()
