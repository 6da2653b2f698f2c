"""One vLLM engine per process, driven over stdin/stdout: lets a benchmark hold the standard and the fast
variant side by side and interleave their measurements (vLLM cannot build a second, speculative engine
in a process that already holds one: measured '_lib_fn_wrapper' error in vLLM 0.32).

    w = Worker(Path("checkpoints/fast"))                       # serving.json of the directory
    w = Worker(Path("checkpoints/fast"), model=Path("checkpoints/sft/hf"))  # its draft on the unquantized target
    w = Worker(Path("checkpoints/fast"), speculative=False)   # the quantized target alone
    r = w.call("generate", prompts=[...], max_tokens=64, ignore_eos=True)  # token_ids, seconds, spec counters
    w.close()

Requests and answers are JSON lines; answers carry a prefix so vLLM's own stdout logging is skipped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

TAG = "@@serving-worker@@ "
ROOT = Path(__file__).resolve().parent.parent


class WorkerError(RuntimeError):
    pass


class Worker:
    def __init__(self, ckpt: Path, *, model: Path | None = None, speculative: bool | dict = True, kv_cache_gib: int = 1,
                 log: Path | None = None, max_model_len: int | None = None):
        """speculative: True = serving.json's, False = none, a dict = this speculative_config instead."""
        cmd = [sys.executable, "-m", "serving.workers", "--in", str(ckpt), "--kv-cache-gib", str(kv_cache_gib)]
        cmd += (["--model", str(model)] if model else []) + ([] if speculative else ["--no-speculative"])
        cmd += ["--speculative-config", json.dumps(speculative)] if isinstance(speculative, dict) else []
        cmd += ["--max-model-len", str(max_model_len)] if max_model_len else []
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(log, "ab") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1)
        self.info = self._read()

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(TAG):
                msg = json.loads(line[len(TAG):])
                if "error" in msg:
                    raise WorkerError(msg["error"])
                return msg
        raise WorkerError(f"worker exited with {self.proc.wait()} (see its log)")

    def call(self, op: str, **kw) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not subprocess.DEVNULL:
            self.log.close()


def _spec_counters(llm) -> dict:
    out = {}
    for m in llm.get_metrics():
        if m.name in ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                      "vllm:spec_decode_num_accepted_tokens"):
            out[m.name.split(":")[1]] = m.value
    return out


def _serve(args) -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

    def send(msg):
        sys.stdout.write(TAG + json.dumps(msg) + "\n")
        sys.stdout.flush()

    try:
        from model.vllm_engine import Engine
        from serving import server

        cfg = server.serving_config(Path(args.inp))
        kw = server.llm_kwargs(cfg)
        if args.no_speculative:
            kw.pop("speculative_config", None)
        elif args.speculative_config:
            kw["speculative_config"] = json.loads(args.speculative_config)
        hf = Path(args.model) if args.model else Path(cfg["model"])
        eng = Engine(hf, dtype=cfg.get("dtype", "float32"), kv_cache_gib=args.kv_cache_gib,
                     max_model_len=args.max_model_len, llm_kwargs={"disable_log_stats": False, **kw})
    except Exception as e:  # noqa: BLE001 - reported to the parent as one line
        send({"error": f"engine for {args.inp}: {type(e).__name__}: {e}"})
        return
    send({"ready": True, "model": str(hf), "speculative_config": kw.get("speculative_config")})
    from vllm import SamplingParams, TokensPrompt

    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "generate":  # raw greedy throughput: fixed length when ignore_eos
                ids = [eng.tokenizer(p, add_special_tokens=False)["input_ids"] for p in req["prompts"]]
                sp = SamplingParams(temperature=0.0, max_tokens=req["max_tokens"], ignore_eos=req.get("ignore_eos", False),
                                    stop_token_ids=[] if req.get("ignore_eos") else eng.stop_ids)
                before = _spec_counters(eng.llm)
                t0, c0 = time.perf_counter(), time.process_time()
                outs = eng.llm.generate([TokensPrompt(prompt_token_ids=x) for x in ids], sp, use_tqdm=False)
                secs, cpu = time.perf_counter() - t0, time.process_time() - c0  # cpu: all threads of this engine
                after = _spec_counters(eng.llm)
                send({"seconds": secs, "cpu_seconds": cpu, "token_ids": [list(o.outputs[0].token_ids) for o in outs],
                      "spec": {k: after[k] - before.get(k, 0) for k in after}})
            elif req["op"] == "chat":  # the stage's chat protocol: texts of greedy turns
                from domains import chat

                prompts = [chat.render(c, add_generation_prompt=True) for c in req["convs"]]
                send({"texts": [o[0].text for o in eng.generate(prompts, max_tokens=req["max_tokens"])]})
            else:
                send({"error": f"unknown op {req['op']!r}"})
        except Exception as e:  # noqa: BLE001
            send({"error": f"{type(e).__name__}: {e}"})


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="inp", required=True, help="serving/checkpoint directory")
    ap.add_argument("--model", default=None, help="HF directory to use as the target instead of serving.json's")
    ap.add_argument("--no-speculative", action="store_true", help="drop serving.json's speculative_config")
    ap.add_argument("--speculative-config", default=None, help="JSON speculative_config replacing serving.json's")
    ap.add_argument("--kv-cache-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE")
    ap.add_argument("--max-model-len", type=int, default=None, help="context length")
    _serve(ap.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
