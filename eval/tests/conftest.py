"""Shared fixtures: the micro chain's tokenizer, a fake OpenAI-compatible server, oracle/empty targets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAIN = Path(os.environ.get("EVAL_CHAIN", "/work/chain_micro"))


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory) -> Path:
    """A tokenizer.json with the chat special tokens: the micro chain's, else one trained here (CI)."""
    if (CHAIN / "base" / "hf" / "tokenizer.json").exists():
        return CHAIN / "base" / "hf"
    d = tmp_path_factory.mktemp("eval_tok")
    r = run([sys.executable, "-m", "pretrain_ckpt.01_corpus", "--out", str(d / "corpus"), "--max-mb", "0.4",
             "--drill-docs", "100"])
    assert r.returncode == 0, r.stderr
    r = run([sys.executable, "-m", "pretrain_ckpt.02_tokenizer", "--in", str(d / "corpus"), "--out", str(d / "tok"),
             "--vocab-size", "1024"])
    assert r.returncode == 0, r.stderr
    return d / "tok"


@pytest.fixture(scope="session")
def micro_ckpt(tok_dir, tmp_path_factory) -> Path:
    """A checkpoint to evaluate end to end: the micro chain's SFT (or base), else a 2-step micro base trained here."""
    for stage in ("sft", "base"):
        if (CHAIN / stage / "manifest.json").exists():
            return CHAIN / stage
    out = tmp_path_factory.mktemp("eval_ckpt") / "base"
    r = run([sys.executable, "-m", "pretrain_ckpt.03_pretrain", "--corpus", str(tok_dir.parent / "corpus"), "--tokenizer",
             str(tok_dir), "--out", str(out), "--recipe", "micro_cpu", "--set", "model.vocab_size=1024",
             "--set", "train.steps=2", "--set", "optim.warmup_steps=1", "--set", "train.save_every=100"])
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def tok(tok_dir):
    from eval.haystack import Tokens

    return Tokens.load(tok_dir)


class FakeOpenAI:
    """A local stand-in for the network: /v1/models and /v1/completions, behaviour chosen per test.

    mode: "answer" (reply = answers[prompt] or ""), "slow" (sleep past the client's timeout), "garbage" (non-JSON),
    "no_choices" (JSON without choices), "flaky" (HTTP 500 on the first attempt of each prompt, then answer)."""

    def __init__(self, mode: str = "answer", answers: dict | None = None, sleep_s: float = 3.0):
        self.mode, self.answers, self.sleep_s = mode, answers or {}, sleep_s
        self.calls: list[dict] = []
        self.seen: set[str] = set()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code: int, body: bytes):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._send(200, json.dumps({"data": [{"id": "fake-model"}]}).encode())

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.calls.append(req)
                prompt = req.get("prompt") or json.dumps(req.get("messages"))
                if outer.mode == "slow":
                    time.sleep(outer.sleep_s)
                    return self._send(200, b"{}")
                if outer.mode == "garbage":
                    return self._send(200, b"<html>oops</html>")
                if outer.mode == "no_choices":
                    return self._send(200, json.dumps({"id": "x", "object": "text_completion"}).encode())
                if outer.mode == "flaky" and prompt not in outer.seen:
                    outer.seen.add(prompt)
                    return self._send(500, b'{"error": "try again"}')
                text = outer.answers.get(prompt, "")
                choices = [{"index": i, "text": text, "finish_reason": "stop"} for i in range(req.get("n", 1))]
                self._send(200, json.dumps({"choices": choices}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_openai():
    servers = []

    def make(**kw):
        s = FakeOpenAI(**kw)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()


class OracleTarget:
    """Replays each domain task's oracle demonstration turn by turn (a target that is always right)."""

    def __init__(self, items, pool=None):
        from domains import chat

        self.by_prompt = {}
        for d, t in items:
            traj = d.solve(t, pool)
            turns = [chat.render_message(m)[len(chat.ASSISTANT_PREFIX):-len(chat.IM_END) - 1]
                     for m in traj if m["role"] == "assistant"]
            self.by_prompt[chat.render(t.messages)] = turns
        self.name = "oracle"

    def generate(self, convs, *, n=1, temperature=0.0, max_tokens=64, seed=0):
        from domains import chat
        from eval.targets import Gen

        out = []
        for c in convs:
            k = next(i for i in range(len(c), 0, -1) if chat.render(c[:i]) in self.by_prompt)
            turns = self.by_prompt[chat.render(c[:k])]
            step = sum(1 for m in c[k:] if m["role"] == "assistant")
            out.append(Gen([turns[step]] * n))
        return out


class EmptyTarget:
    name = "empty"

    def generate(self, convs, *, n=1, **kw):
        from eval.targets import Gen

        return [Gen([""] * n) for _ in convs]
