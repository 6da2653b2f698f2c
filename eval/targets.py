"""What eval talks to: an in-process vLLM engine on a checkpoint, or any OpenAI-compatible endpoint.

    t = VLLMTarget(Path("checkpoints/sft"), max_model_len=1024)
    t = EndpointTarget("http://127.0.0.1:8000/v1", timeout_s=600, retries=2, concurrency=8)
    gens = t.generate([[{"role": "user", "content": "hi"}]], n=1, temperature=0.0, max_tokens=32)
    gens[0].texts, gens[0].error          # error: one line when nothing usable came back (never raises)

Both take conversations in the domains.chat message format and are targets of the one evaluation protocol
(domains/evaluate.py; VLLMTarget is its EngineTarget on an in-process engine). The engine and the endpoint's
"completions" API see the prompt rendered by domains.chat.render (the project's template); api="chat" sends the messages to
/chat/completions so a foreign model applies its own template (tool calls are kept as tagged text).
A timeout, a refused connection, an HTTP error or a malformed body becomes Gen.error for that prompt after
the retries, so a dead or broken endpoint gives one recorded error per task, not a crash and not a 0.
"""
from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from domains import chat
from domains.evaluate import EngineTarget, Gen  # noqa: F401 - Gen: what targets return


class VLLMTarget(EngineTarget):
    """model.vllm_engine.Engine on <ckpt>/hf (or a bare HF directory); over-long prompts become errors."""

    def __init__(self, path: Path, *, max_model_len: int | None = None, dtype: str = "float32", seed: int = 0,
                 kv_cache_gib: int = 2, tensor_parallel_size: int = 1):
        from model.vllm_engine import Engine

        path = Path(path)
        hf = path / "hf" if (path / "hf" / "config.json").exists() else path
        # a serving directory (export, fast) runs in the dtype it is served in, over `dtype`: the fast variant's int8
        # GEMMs take no other on AMX CPUs (serving/02_fast.py)
        if (path / "serving.json").is_file():
            dtype = json.loads((path / "serving.json").read_text()).get("dtype", dtype)
        self.dtype = dtype  # recorded in results/eval/<stage>.json (an endpoint's is unknown: None)
        super().__init__(Engine(hf, dtype=dtype, max_model_len=max_model_len, seed=seed, kv_cache_gib=kv_cache_gib,
                                tensor_parallel_size=tensor_parallel_size), f"vllm:{path}")

    def prompt_nll(self, convs: list[list[dict]], tail_frac: float = 0.25) -> list[float | None]:
        """Mean negative log-likelihood of the last `tail_frac` of each prompt's tokens (None if it does not fit).

        The length-extrapolation signal of the RoPE study: it moves with the position encoding even when a
        weak model scores 0 on every task."""
        ids = self.engine.tokenizer([chat.render(c, add_generation_prompt=True) for c in convs],
                                    add_special_tokens=False)["input_ids"]
        keep = [i for i, x in enumerate(ids) if 1 < len(x) < self.max_model_len]
        out: list[float | None] = [None] * len(convs)
        for i, lps in zip(keep, self.engine.score([ids[i] for i in keep]) if keep else []):
            start = max(1, int(len(ids[i]) * (1 - tail_frac)))  # lps[j - 1] is token j's: the first has no context
            vals = lps[start - 1:]
            nll = -sum(vals) / len(vals)
            out[i] = nll if math.isfinite(nll) else None  # NaN/inf: positions the model cannot represent
        return out

    def close(self) -> None:
        self.engine = None


class BadResponse(Exception):
    pass


def _as_chat(conv: list[dict]) -> list[dict]:
    """domains.chat messages -> OpenAI chat messages (tool calls as tagged text, tool results as user turns)."""
    out = []
    for m in conv:
        body = chat.render_message(m)[len(chat.IM_START) + len(m["role"]) + 1:-len(chat.IM_END) - 1]
        out.append({"role": "user" if m["role"] == "tool" else m["role"], "content": body})
    return out


class EndpointTarget:
    def __init__(self, base_url: str, *, model: str | None = None, api: str = "completions", timeout_s: float = 600.0,
                 retries: int = 2, backoff_s: float = 1.0, concurrency: int = 4, api_key: str | None = None):
        if api not in ("completions", "chat"):
            raise ValueError(f"api={api!r}: use completions or chat")
        self.base = base_url.rstrip("/")
        self.api, self.timeout_s, self.retries, self.backoff_s = api, timeout_s, retries, backoff_s
        self.concurrency, self.api_key = max(1, concurrency), api_key
        self.model = model or self._first_model()
        self.name = f"endpoint:{self.base}:{self.model}"
        self.max_model_len = None

    def _request(self, path: str, body: dict | None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})})
        with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
            raw = r.read()
        try:
            doc = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadResponse(f"body is not JSON: {raw[:80]!r}") from None
        if not isinstance(doc, dict):
            raise BadResponse(f"body is JSON {type(doc).__name__}, not an object")
        return doc

    def _first_model(self) -> str | None:
        try:
            return self._request("/models", None)["data"][0]["id"]
        except Exception:  # noqa: BLE001 - unknown here; each request then reports what went wrong
            return None

    def _call(self, conv: list[dict], n: int, temperature: float, max_tokens: int, seed: int | None) -> Gen:
        body = {"max_tokens": max_tokens, "temperature": temperature, "n": n,
                **({"seed": seed} if seed is not None else {}), **({"model": self.model} if self.model else {})}
        if self.api == "chat":
            path, body["messages"] = "/chat/completions", _as_chat(conv)
        else:
            path, body["prompt"] = "/completions", chat.render(conv, add_generation_prompt=True)
            body["stop"] = [chat.IM_END, chat.EOS]
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                return Gen(self._texts(self._request(path, body), n))
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}: {e.read()[:200].decode(errors='replace')}"
                if e.code < 500 and e.code != 429:
                    break  # the request itself is wrong (e.g. prompt over the server's max length): no retry
            except BadResponse as e:
                last = f"bad response: {e}"
            except http.client.HTTPException as e:  # not HTTP at all (garbage bytes, truncated body)
                last = f"bad response: {type(e).__name__}: {str(e)[:120]}"
            except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as e:
                reason = getattr(e, "reason", e)
                last = f"{'timeout' if isinstance(reason, TimeoutError) else 'connection'}: {reason}"
        return Gen(error=f"{last} (after {attempt + 1} attempt{'s' if attempt else ''})")

    def _texts(self, doc: dict, n: int) -> list[str]:
        ch = doc.get("choices")
        if not isinstance(ch, list) or len(ch) != n:
            raise BadResponse(f"expected {n} choices, got {type(ch).__name__}"
                              f"{'' if not isinstance(ch, list) else ' of ' + str(len(ch))}")
        ch = sorted(ch, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        texts = []
        for c in ch:
            t = (c.get("message") or {}).get("content") if self.api == "chat" and isinstance(c, dict) else \
                (c.get("text") if isinstance(c, dict) else None)
            if not isinstance(t, str):
                raise BadResponse("a choice has no text")
            texts.append(t)
        return texts

    def generate(self, convs: list[list[dict]], *, n: int = 1, temperature: float = 0.0, max_tokens: int = 64,
                 seed: int | None = 0) -> list[Gen]:
        with ThreadPoolExecutor(self.concurrency) as ex:
            return list(ex.map(lambda ic: self._call(ic[1], n, temperature, max_tokens,
                                                     None if seed is None else seed + ic[0]),
                               enumerate(convs)))

    def close(self) -> None:
        pass


def make(args) -> "VLLMTarget | EndpointTarget":
    """The target named by common CLI args (cli.add_target_args)."""
    if args.endpoint:
        return EndpointTarget(args.endpoint, model=args.model, api=args.api, timeout_s=args.timeout_s,
                              retries=args.retries, concurrency=args.concurrency)
    return VLLMTarget(args.inp, max_model_len=args.max_model_len, dtype=args.dtype, kv_cache_gib=args.kv_cache_gib,
                      tensor_parallel_size=args.tp)
