"""Arguments every eval script shares: the target (--in checkpoint | --endpoint URL), recipe, output."""
from __future__ import annotations

import argparse
from pathlib import Path

from model import cli
from model.config import ConfigError


def parser(doc: str, sections: list[str] | None = None) -> argparse.ArgumentParser:
    """The shared arguments; `--help` ends with the recipe fields (of `sections`, default all: eval/config.py)."""
    ap = cli.parser(doc, "eval", sections)
    ap.add_argument("--in", dest="inp", type=Path, help="checkpoint directory (manifest.json + hf/): in-process vLLM")
    ap.add_argument("--endpoint", help="OpenAI-compatible base URL instead of --in, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="model name sent to the endpoint (default: the first of GET /models)")
    ap.add_argument("--api", choices=("completions", "chat"), default="completions",
                    help="endpoint API: completions = prompt rendered with domains.chat; chat = the server's template")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="endpoint: seconds per request before a retry")
    ap.add_argument("--retries", type=int, default=2, help="endpoint: retries after a timeout / 5xx / bad body")
    ap.add_argument("--concurrency", type=int, default=4, help="endpoint: requests in flight")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer dir for long-context lengths (default: <in>/hf)")
    ap.add_argument("--max-model-len", type=int, help="vLLM context length (default: the recipe's, else the model's)")
    ap.add_argument("--out", type=Path, required=True, help="results JSON path")
    cli.recipe_args(ap, "eval", recipe_help="eval/recipes/<name>.yaml", set_help="recipe override key.path=value")
    return ap


def resolve(a, need_tokenizer: bool = False) -> dict:
    """Load the recipe (first: a mistyped key fails before anything is read) and validate the target arguments;
    ConfigError/CheckpointError carry the one-line fix."""
    from model import manifest
    from model.recipe import load_recipe

    cfg = load_recipe("eval", a.recipe, a.overrides)  # eval/config.py: every key, its default and help
    if bool(a.inp) == bool(a.endpoint):
        raise ConfigError("pass exactly one of --in CHECKPOINT or --endpoint URL")
    if a.endpoint and not a.endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"--endpoint {a.endpoint!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
    if a.inp:
        manifest.verify(a.inp)
    if need_tokenizer and a.tokenizer is None:
        if a.endpoint:
            raise ConfigError("--endpoint with long-context tasks needs --tokenizer DIR (the served model's "
                              "tokenizer.json) to make exact lengths")
        a.tokenizer = a.inp / "hf"
    t = cfg["target"]
    a.max_model_len = a.max_model_len or t["max_model_len"]
    a.dtype, a.kv_cache_gib, a.tp = t["dtype"], t["kv_cache_gib"], t["tp"]
    return cfg
