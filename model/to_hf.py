"""Convert a Megatron dist checkpoint (saved at any TP/PP/EP) to an HF directory, in one process.

    python -m model.to_hf --mcore checkpoints/sft/mcore --model-config checkpoints/sft/manifest.json \
        --tokenizer checkpoints/tokenizer --out /tmp/hf

Megatron reshards the torch_dist checkpoint into a TP=PP=EP=1 model on load; the HF mapping
(model/hf_mapping.py) then renames and splits the fused tensors.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m model.to_hf ...")

import torch  # noqa: E402

from model import cli  # noqa: E402


def convert(mcore_dir: Path, model_config: dict, out_dir: Path, tokenizer_dir: Path | None,
            dtype: torch.dtype = torch.float32) -> None:
    from model import checkpoint, hf_io, hf_mapping, parallel
    from model.build import build_model
    from model.config import ModelConfig, ParallelConfig

    cfg = ModelConfig.from_dict(model_config)
    par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
    parallel.init(par, cfg, seed=0)
    model = build_model(cfg, par)
    checkpoint.load_model_only(model, mcore_dir)
    hf_io.save_hf(out_dir, hf_mapping.to_hf(checkpoint.full_state_dict(model), cfg), cfg, tokenizer_dir, dtype)
    parallel.destroy()


def convert_in_subprocess(mcore_dir: Path, model_config_json: Path, out_dir: Path, tokenizer_dir: Path | None,
                          dtype: str = "float32") -> None:
    """Run the conversion as a fresh single process (a stage's own process groups are torchrun's)."""
    import os
    import subprocess

    from model.parallel import single_process_env

    env = single_process_env()
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "model.to_hf", "--mcore", str(mcore_dir), "--model-config", str(model_config_json),
           "--out", str(out_dir), "--dtype", dtype] + (["--tokenizer", str(tokenizer_dir)] if tokenizer_dir else [])
    subprocess.run(cmd, check=True, env=env)


def main(argv=None) -> int:
    ap = cli.parser(__doc__, mcore="torch_dist checkpoint directory (a stage's mcore/)",
                    model_config="JSON with the model config, or a manifest.json holding it under model_config",
                    out="HF output directory")
    ap.add_argument("--tokenizer", type=Path, default=None, help="tokenizer directory to copy into the HF directory")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="dtype of the safetensors")
    a = ap.parse_args(argv)
    with cli.input_errors(FileNotFoundError, ValueError, RuntimeError):
        d = json.loads(a.model_config.read_text())
        convert(a.mcore, d.get("model_config", d), a.out, a.tokenizer, getattr(torch, a.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
