"""Open-weights export: any stage's checkpoint -> an HF directory with a model card, servable as is.

    # tiny CPU (or any stage: base, sft, rl, fast)
    python -m serving.01_export --in checkpoints/sft --out checkpoints/export
    # bf16 weights, evaluation numbers looked up in another results folder
    python -m serving.01_export --in checkpoints/rl --out checkpoints/export --dtype bfloat16 --results results
    # cluster: the same (one process; the mcore/ -> hf/ conversion reshards any TP/PP/EP on load)
    python -m serving.01_export --in checkpoints/rl --out checkpoints/export --dtype bfloat16

Writes <out>/hf/ (model.safetensors, config.json, generation_config.json that ends turns at <|im_end|>,
tokenizer + chat template, README.md model card), <out>/serving.json (vLLM arguments for
serving/03_serve.py) and manifest.json (stage "export", parent = --in) last. The card lists every
results file under --results whose `measured.manifest_sha256` is --in's manifest hash, and the
provenance chain walked through the manifests' parents. An input without hf/ is converted from
mcore/ + model_config.json (model/to_hf.py).
"""
from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m serving.01_export ...")

from model import cli, manifest  # noqa: E402
from model.config import ConfigError  # noqa: E402
from serving import card, server  # noqa: E402

TURN_END = ("<|endoftext|>", "<|im_end|>")  # generation stops at either (chat servers end the turn)


def convert_weights(src: Path, dst: Path, dtype: str) -> int:
    """Copy the safetensors of src into dst in `dtype` (float tensors only); returns the bytes written."""
    import torch
    from safetensors.torch import load_file, save_file

    total = 0
    for f in sorted(src.glob("*.safetensors")):
        ts = load_file(str(f))
        ts = {k: (v.to(getattr(torch, dtype)) if v.is_floating_point() else v).contiguous() for k, v in ts.items()}
        save_file(ts, str(dst / f.name), metadata={"format": "pt"})
        total += (dst / f.name).stat().st_size
    return total


def build_hf(inp: Path, hf: Path, dtype: str) -> None:
    """hf/ of the input (copied, dtype converted) or converted from its mcore/."""
    src = inp / "hf"
    if (src / "config.json").is_file() and list(src.glob("*.safetensors")):
        conf = json.loads((src / "config.json").read_text())
        if conf.get("quantization_config") and dtype != conf.get("torch_dtype"):
            raise ValueError(f"{src} is quantized: export it with --dtype {conf.get('torch_dtype')} (its own)")
        hf.mkdir(parents=True)
        for p in src.iterdir():
            if p.is_file() and p.suffix != ".safetensors" and p.name != "README.md":
                shutil.copy2(p, hf / p.name)
        convert_weights(src, hf, dtype)
        conf["torch_dtype"] = dtype
        (hf / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
    elif (inp / "mcore").is_dir() and (inp / "model_config.json").is_file():
        from model.to_hf import convert_in_subprocess

        convert_in_subprocess(inp / "mcore", inp / "model_config.json", hf,
                              inp / "tokenizer" if (inp / "tokenizer").is_dir() else None, dtype)
    else:
        raise FileNotFoundError(f"{inp} has neither hf/ (config.json + *.safetensors) nor mcore/ + model_config.json: "
                                "pass a stage checkpoint directory")
    if not (hf / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{inp}: no tokenizer.json in hf/ or tokenizer/; the export would not be servable")


def end_turns(hf: Path) -> list[int]:
    """generation_config.json eos_token_id = every turn-ending token the tokenizer has."""
    tok = json.loads((hf / "tokenizer.json").read_text())
    vocab = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    ids = [vocab[t] for t in TURN_END if t in vocab]
    p = hf / "generation_config.json"
    gen = json.loads(p.read_text()) if p.is_file() else {}
    if ids:
        gen["eos_token_id"] = ids
    p.write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")
    return ids


def write_card(out_dir: Path, final: Path, inp: Path, results_dir: Path, name: str) -> tuple[list, list]:
    """README.md in out_dir/hf (out_dir is published as `final`): inp's evaluation numbers and provenance."""
    chain = card.provenance(inp)
    evals = card.evaluations(results_dir, manifest.manifest_hash(inp))
    conf = json.loads((out_dir / "hf" / "config.json").read_text())
    raw = shlex.join(["python"] + server.command(out_dir, name=name)[1:]).replace(str(out_dir.resolve()), str(final))
    serve_cmd = f"python -m serving.03_serve --in {final}\n# the same server, directly:\n{raw}"
    (out_dir / "hf" / "README.md").write_text(card.render(name, conf, chain, evals, serve_cmd))
    return chain, evals


def main(argv=None) -> int:
    ap = cli.parser(__doc__, inp="any stage's checkpoint directory", out="export directory to create")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="dtype of the exported weights")
    ap.add_argument("--results", type=Path, default=Path("results"), help="folder searched for results files")
    ap.add_argument("--name", default=None, help="model name on the card (default: <stage>-<manifest hash[:8]>)")
    a = ap.parse_args(argv)
    with cli.input_errors(ValueError):
        m = manifest.verify(a.inp)
        if a.out.resolve() == a.inp.resolve():
            raise ConfigError(f"--out {a.out} is --in: choose a new directory")
    name = a.name or f"{m['stage']}-{manifest.manifest_hash(a.inp)[:8]}"
    with cli.input_errors(FileNotFoundError, ValueError):  # what build_hf finds unusable in the checkpoint
        with manifest.staging(a.out) as tmp:
            build_hf(a.inp, tmp / "hf", a.dtype)
            eos = end_turns(tmp / "hf")
            (tmp / server.SERVING_JSON).write_text(json.dumps({"model": "hf", "dtype": a.dtype}, indent=2) + "\n")
            chain, evals = write_card(tmp, a.out, a.inp, a.results, name)
            cfg = {"in": str(a.inp), "dtype": a.dtype, "results": str(a.results), "name": name}
            manifest.write_manifest(
                tmp, stage="export", parent=a.inp, config=cfg, seed=m.get("seed", 0),
                metrics={"evaluations_found": len(evals), "provenance_depth": len(chain),
                         "weights_bytes": sum(p.stat().st_size for p in (tmp / "hf").glob("*.safetensors"))},
                model_config=m.get("model_config"),
                extra={"eos_token_ids": eos, "evaluations": [e["file"] for e in evals],
                       "provenance": [{k: c.get(k) for k in ("stage", "path", "manifest_sha256", "status")} for c in chain]})
            manifest.publish(tmp, a.out)
    print(f"export -> {a.out} ({len(evals)} results files on the card, provenance depth {len(chain)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
