"""Model card pieces: the provenance chain of a checkpoint and the results files that measured it.

    chain = provenance(Path("checkpoints/rl"))          # [this, parent, grandparent, ...]
    evals = evaluations(Path("results"), manifest_hash)  # results JSON files naming this manifest
    text = render(name, hf_config, chain, evals, serve_cmd)

A parent is trusted only if its manifest still hashes to the value its child recorded; otherwise the
chain says so (moved, rebuilt or missing) instead of reporting another checkpoint's history.
"""
from __future__ import annotations

import json
from pathlib import Path

from model.manifest import MANIFEST, manifest_hash

MAX_DEPTH = 32  # a manifest chain longer than this is a cycle or a bug


def _link(path: Path, expected: str | None) -> dict:
    mpath = path / MANIFEST
    if not mpath.is_file():
        return {"path": str(path), "manifest_sha256": expected, "status": "missing"}
    got = manifest_hash(path)
    m = json.loads(mpath.read_text())
    return {"path": str(path), "manifest_sha256": got, "stage": m.get("stage"), "created": m.get("created"),
            "git": m.get("git"), "seed": m.get("seed"), "recipe": (m.get("config") or {}).get("recipe"),
            "metrics": m.get("metrics") or {}, "parent": m.get("parent"),
            "status": "ok" if expected in (None, got) else "changed since its child was made"}


def provenance(ckpt: Path) -> list[dict]:
    """This checkpoint and its ancestors, newest first, following manifest.parent."""
    chain = [_link(Path(ckpt), None)]
    while len(chain) < MAX_DEPTH:
        parent = chain[-1].get("parent")
        if chain[-1]["status"] != "ok" or not parent:
            break
        chain.append(_link(Path(parent["path"]), parent.get("manifest_sha256")))
    return [{k: v for k, v in c.items() if k != "parent"} for c in chain]


def evaluations(results_dir: Path, mhash: str) -> list[dict]:
    """Every results JSON under results_dir whose `measured.manifest_sha256` is mhash."""
    found = []
    for p in sorted(Path(results_dir).rglob("*.json")) if Path(results_dir).is_dir() else []:
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and (doc.get("measured") or {}).get("manifest_sha256") == mhash:
            found.append({"file": str(p), "doc": doc})
    return found


_META = {"schema", "created", "git_commit", "machine", "measured"}


def numbers(doc: dict, prefix: str = "") -> list[tuple[str, float]]:
    """The numeric leaves of a results document (metadata left out), as dotted names."""
    out = []
    for k, v in doc.items():
        if not prefix and k in _META:
            continue
        name = f"{prefix}{k}"
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)):
            out.append((name, v))
        elif isinstance(v, dict):
            out += numbers(v, name + ".")
    return out


def _fmt(v: float) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def render(name: str, hf_config: dict, chain: list[dict], evals: list[dict], serve_cmd: str,
           max_numbers: int = 60) -> str:
    c = hf_config
    arch = (c.get("architectures") or ["?"])[0]
    moe = f", {c['num_experts']} experts top-{c['num_experts_per_tok']}" if c.get("num_experts") else ""
    lines = [
        "---", "library_name: vllm", "pipeline_tag: text-generation", "tags: [post-training, megatron-core, vllm]", "---",
        f"# {name}", "",
        f"{arch}: {c.get('num_hidden_layers')} layers, hidden {c.get('hidden_size')}, {c.get('num_attention_heads')} "
        f"heads ({c.get('num_key_value_heads')} kv, head_dim {c.get('head_dim')}){moe}, vocab {c.get('vocab_size')}, "
        f"context {c.get('max_position_embeddings')}, weights {c.get('torch_dtype')}"
        + (f", quantized ({c['quantization_config'].get('format')})" if c.get("quantization_config") else "") + ".",
        "", "Chat format: `<|im_start|>role\\n...<|im_end|>` with tool calls as `<tool_call>{json}</tool_call>` "
        "(the tokenizer's chat template). Generation ends at `<|im_end|>`.", "",
        "## Serve", "", "```", serve_cmd, "```", "", "## Evaluation", "",
    ]
    if not evals:
        lines += ["No results file names this checkpoint's manifest yet (run the eval stage, then re-export).", ""]
    for e in evals:
        d = e["doc"]
        sch = d.get("schema") or {}
        lines += [f"### {sch.get('name', '?')} (v{sch.get('version', '?')})", "",
                  f"`{e['file']}`, created {d.get('created')}, git {str(d.get('git_commit'))[:12]}, "
                  f"machine {(d.get('machine') or {}).get('cpu')} / GPU {(d.get('machine') or {}).get('gpu')}", "",
                  "| metric | value |", "|---|---|"]
        nums = numbers(d)
        lines += [f"| {k} | {_fmt(v)} |" for k, v in nums[:max_numbers]]
        if len(nums) > max_numbers:
            lines.append(f"| ... {len(nums) - max_numbers} more in the file | |")
        lines.append("")
    lines += ["## Provenance", "", "Newest first; each manifest names its parent's manifest sha256.", "",
              "| stage | recipe | manifest sha256 | git commit | created | key metrics | status |",
              "|---|---|---|---|---|---|---|"]
    for link in chain:
        git = link.get("git") or {}
        commit = f"{str(git.get('commit', '?'))[:12]}{' (dirty)' if git.get('dirty') else ''}" if git else "?"
        mets = ", ".join(f"{k}={_fmt(v)}" for k, v in list(numbers(link.get("metrics") or {}))[:4])
        lines.append(f"| {link.get('stage', '?')} | {link.get('recipe') or '-'} | {str(link.get('manifest_sha256'))[:16]} | "
                     f"{commit} | {link.get('created', '?')} | {mets or '-'} | {link['status']} |")
    lines += ["", "Limitations: a research checkpoint of this repository's recipes; read the evaluation numbers above "
              "before using it for anything.", ""]
    return "\n".join(lines)
