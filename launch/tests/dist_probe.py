"""A torchrun probe for the launcher tests: all-reduce over gloo, rank 0 writes the result to --out.

    .venv-launch/bin/python -m launch --executor local --nproc 2 -- launch/tests/dist_probe.py --out /tmp/p.json
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, help="JSON written by rank 0")
    ap.add_argument("--exit-code", type=int, default=0, help="exit with this code after the all-reduce (tests failures)")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    if dist.get_rank() == 0:
        with open(a.out, "w") as f:
            json.dump({"world_size": dist.get_world_size(), "sum": t.item(), "cwd": os.getcwd()}, f)
    dist.destroy_process_group()
    sys.exit(a.exit_code)
