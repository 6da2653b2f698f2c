"""SFT side by side with TRL: real (non-pad) tokens/s of sft/02_train.py and of TRL's SFTTrainer on the same HF
model, documents, sequence length, rows per step, learning rate, dtype and threads (`make bench-peers`).

    python -m sft.bench_peers --base checkpoints/base --data data/sft --out results/bench/peers.json
    python -m sft.bench_peers --base checkpoints/base --data data/sft --out /tmp/peers.json --steps 8 --warmup 2 --rounds 1

The documents are the SFT dataset's packs split back into documents (the same token ids and loss masks); ours
trains on its packs of them (document-causal attention), TRL on `max_length` rows with each of its settings:
  trl_bfd      packing="bfd" (padding-free; documents isolated through restarting position ids: measured below)
  trl_wrapped  packing="wrapped" (documents cut and concatenated; attention crosses documents: its fastest)
  trl_none     no packing, one document per row, padded to the batch's longest
  trl_bfd_compiled, trl_wrapped_compiled   the same with torch_compile=True (the Trainer compiles the model with
               Inductor; its steps after the first are steady, measured); ours compiles its norms, experts'
               activation and loss when the recipe says train.fuse_elementwise. --no-trl-compiled leaves them out
  trl_bfd_mb<m>, trl_wrapped_mb<m>   the same rows per step in micro batches of m rows (gradient accumulation over
               the rest): every split of the recipe's global batch into one or two micro batches, and micro
               batches of one row, that is not the recipe's own (TRL's fastest split differs by setting: measured,
               4 x 1 rows was 10% slower than 2 x 2 with bfd and 9% faster with wrapped), so each side is compared
               at its own best micro batch
Each arm is its own process (TRL from `make peers-venv`), arms run back to back, `--rounds` times in alternating
order. Rates: real tokens of the steps after `--warmup` over the time between their lines (this process
timestamps each step's line), so start-up and warm-up are left out on both sides. Each TRL arm also reports how
isolated its documents were (max |logit(row) - logit(document alone)|). Writes the "sft" section of --out.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m sft.bench_peers ...")

from model import cli, peers  # noqa: E402
from model.config import ConfigError  # noqa: E402

PACKED = ("bfd", "wrapped")  # TRL's packing settings; "none" is the unpacked floor the isolation is judged against


def trl_arms(micro_batch: int, global_batch: int, compiled: bool = True) -> dict[str, tuple[str, bool, int]]:
    """Arm name -> (packing, torch_compile, micro batch rows): each setting at the recipe's micro batch, the packed
    ones also compiled and at the other one- or two-micro-batch splits of the global batch and at one row."""
    arms = {f"trl_{p}": (p, False, micro_batch) for p in (*PACKED, "none")}
    if compiled:
        arms.update({f"trl_{p}_compiled": (p, True, micro_batch) for p in PACKED})
    for m in sorted({global_batch, global_batch // 2, 1} - {micro_batch, 0}):
        if global_batch % m == 0:
            arms.update({f"trl_{p}_mb{m}": (p, False, m) for p in PACKED})
    return arms


STEP_LINE = re.compile(r"^step (\d+)/\d+ \|")


def real_lengths(packs) -> list[int]:
    """Non-pad tokens per pack: sft/packing.pack pads with one-position documents after the last real one (a real
    document is a prompt and an answer: never one token)."""
    out = []
    for doc in packs["doc_ids"]:
        counts: dict[int, int] = {}
        for d in doc:
            counts[d] = counts.get(d, 0) + 1
        out.append(sum(c for c in counts.values() if c > 1))
    return out


def documents(packs, pad_len: list[int]) -> list[dict]:
    """The packs' documents as TRL reads them: the token ids (inputs plus the last label) and a completion mask
    (1 where the loss is taken), in pack order; documents without a trained token are left out (none, checked)."""
    docs = []
    for row, real in zip(packs, pad_len):
        ids, lab, lm, doc = row["input_ids"][:real], row["labels"][:real], row["loss_mask"][:real], row["doc_ids"][:real]
        s = 0
        for i in range(1, real + 1):
            if i == real or doc[i] != doc[s]:
                if not any(lm[s:i]):
                    raise ValueError(f"a document of {i - s} tokens has no trained token")
                docs.append({"input_ids": list(ids[s:i]) + [lab[i - 1]], "completion_mask": [0] + list(lm[s:i])})
                s = i
    return docs


def ours(a, rc, real: list[int], out: Path) -> dict:
    """sft/02_train.py from --base on --data; each step's real tokens from the rows its samples map to."""
    from model.parallel import single_process_env

    packs = importlib.import_module("sft.02_train").Packs
    gbs, steps = rc["parallel"]["global_batch_size"], a.steps
    order = packs(list(range(len(real))), rc["train"]["seed"])  # Packs maps sample index -> row; rows are ints here
    per_step = [sum(real[order.row(k * gbs + j)] for j in range(gbs)) for k in range(steps)]
    cmd = [sys.executable, "-m", "sft.02_train", "--in", str(a.base), "--data", str(a.data), "--out", str(out),
           "--recipe", a.recipe]
    for s in (f"train.steps={steps}", f"train.save_every={steps}", f"train.eval_every={steps}",
              "train.eval_batches=1", "optim.warmup_steps=0", f"train.dtype={a.dtype}", *a.overrides):
        cmd += ["--set", s]
    lines = peers.timed_lines(cmd, env=single_process_env(), what="sft/02_train")
    pts = [(t, int(m.group(1)), per_step[int(m.group(1)) - 1]) for t, ln in lines if (m := STEP_LINE.match(ln))]
    return {"rate": peers.steady(pts, a.warmup), "positions_per_step": gbs * rc["train"]["seq_length"],
            "real_tokens_per_step_mean": statistics.mean(per_step[a.warmup:]),
            "isolation": {"measured_here": False, "how": "document-causal masks; sft/tests/test_packing.py checks "
                                                         "that a packed document's loss equals its loss alone"}}


def trl(a, rc, py: Path, docs: Path, packing: str, compiled: bool, micro_batch: int) -> dict:
    par, tr = rc["parallel"], rc["train"]
    cmd = [str(py), str(Path(__file__).with_name("peer_trl.py")), "--model", str(a.base / "hf"), "--docs", str(docs),
           "--packing", packing, "--steps", str(a.steps), "--max-length", str(tr["seq_length"]),
           "--batch", str(micro_batch), "--accum", str(par["global_batch_size"] // micro_batch),
           "--lr", str(rc["optim"]["lr"]), "--threads", str(a.threads), "--seed", str(tr["seed"]),
           "--dtype", "bf16" if a.dtype == "bfloat16" else "fp32", "--out", str(docs.parent / f"trl_{packing}")]
    cmd += ["--compile"] if compiled else []
    lines = peers.timed_lines(cmd, what=f"TRL SFT ({packing}{', compiled' if compiled else ''}, micro batch "
                                        f"{micro_batch})")
    msgs = peers.messages(lines)
    pts = [(t, m["step"], m["real_tokens"]) for t, m in msgs if "step" in m]
    info = {k: v for _, m in msgs for k, v in m.items() if k in ("isolation", "done")}
    return {"rate": peers.steady(pts, a.warmup), "isolation": info["isolation"], "peer": info["done"]}


ISOLATION_MIN, ISOLATION_TIMES_NOISE = 1e-4, 4  # isolated_settings' tolerance: max(min, times x trl_none's noise)


def isolated_settings(arms: dict) -> tuple[list[str] | None, dict]:
    """TRL settings whose documents did not see each other: every run's max logit difference (packed vs alone)
    within 4x the noise of `trl_none`, whose documents sit alone in their rows by construction, and at least 1e-4.
    sft/peer_trl.py probes in float32 whatever the arm's dtype (floor ~1e-6): a bf16 probe's rounding differs with
    the row's shape, so on the 135M `bfd` read 0.25-0.72 logits while unpacked rows read 0.0 (in float32: 3.5e-5 and
    0.0; `wrapped` 25.7). The floor stays measured, so files from bf16 probes (~0.06 on the tiny model) are judged
    alike. None (not judged, with the reason) when the unpacked rows differ by more than 0.5: the probe is broken."""
    diff = {k: [x["isolation"]["max_abs_logit_difference"] for x in v] for k, v in arms.items() if k.startswith("trl_")}
    floor = max(diff["trl_none"])
    if floor > 0.5:
        return None, {"noise_floor_trl_none": floor, "judged": False,
                      "reason": f"TRL unpacked rows differ from their documents alone by {floor:g} logits: the "
                                "isolation probe is broken, so no setting can be called isolated"}
    tol = max(ISOLATION_MIN, ISOLATION_TIMES_NOISE * floor)
    return [k for k in diff if max(diff[k]) <= tol], {
        "max_abs_logit_difference": tol, "noise_floor_trl_none": floor,
        "rule": f"isolated when every run's max |logit packed - logit alone| <= max({ISOLATION_MIN:g}, "
                f"{ISOLATION_TIMES_NOISE:g} x trl_none's)"}


def main(argv=None) -> int:
    ap = cli.parser(__doc__, base="base checkpoint (hf/, mcore/, tokenizer/)", data="SFT dataset (sft/01_data.py)",
                    out="results JSON; its \"sft\" section is (re)written")
    cli.recipe_args(ap, "sft", "train.seq_length=512", recipe_help="SFT recipe: sequence length, rows per step, lr, "
                    "seed (both sides)")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                    help="both sides' dtype (default: the recipe's train.dtype, what the chain trains in)")
    peers.arm_args(ap, steps=24, warmup=4)
    ap.add_argument("--no-trl-compiled", action="store_true",
                    help="leave out TRL's torch_compile arms (trl_*_compiled): a shorter run")
    a = ap.parse_args(argv)
    from model import manifest, recipe

    with cli.input_errors():
        py = peers.check_arm_args(a)
        manifest.verify(a.base)
        manifest.verify(a.data, stage="sft_data")
        rc = recipe.load_recipe("sft", a.recipe, a.overrides)
        a.dtype = a.dtype or rc["train"]["dtype"]
        if not (a.base / "hf" / "config.json").exists():
            raise ConfigError(f"{a.base}/hf has no config.json: the base's HF export is what TRL loads")
    import datasets

    packs = datasets.load_from_disk(str(a.data / "train"))
    real = real_lengths(packs)
    with tempfile.TemporaryDirectory(prefix="bench_peers_sft_") as tmp:
        docs = Path(tmp) / "docs"
        rows = documents(packs, real)
        datasets.Dataset.from_list(rows).save_to_disk(str(docs))
        runs = {"ours": lambda: ours(a, rc, real, Path(tempfile.mkdtemp(dir=tmp)) / "sft"),
                **{k: (lambda p=p, c=c, m=m: trl(a, rc, py, docs, p, c, m))
                   for k, (p, c, m) in trl_arms(rc["parallel"]["micro_batch_size"], rc["parallel"]["global_batch_size"],
                                                not a.no_trl_compiled).items()}}
        arms = peers.alternate(runs, a.rounds, "per_s", "real tok/s")
    tok_s = peers.median_of(arms, "per_s")
    fastest = max((k for k in arms if k.startswith("trl_")), key=lambda k: tok_s[k])
    positions = rc["parallel"]["global_batch_size"] * rc["train"]["seq_length"]
    isolated, tolerance = isolated_settings(arms)
    best_isolated = max(isolated, key=lambda k: tok_s[k]) if isolated else None
    section = {
        "what": "real (non-pad) tokens/s of one SFT step, steady state, same model/documents/rows/lr/dtype/threads",
        "baseline": "TRL SFTTrainer (its best setting with documents isolated, and its fastest)",
        "model": str(a.base / "hf"), "data": str(a.data), "documents": len(rows), "recipe": a.recipe,
        "settings": {"seq_length": rc["train"]["seq_length"], "micro_batch": rc["parallel"]["micro_batch_size"],
                     "rows_per_step": rc["parallel"]["global_batch_size"], "lr": rc["optim"]["lr"],
                     "dtype": a.dtype, "fuse_elementwise": rc["train"]["fuse_elementwise"],
                     "cpu_attention": rc["train"]["cpu_attention"], "packing": rc["data"]["packing"],
                     "loss_rows_only": rc["train"]["loss_rows_only"],
                     "threads": a.threads, "steps": a.steps, "warmup_steps_left_out": a.warmup,
                     "rounds": a.rounds, "overrides": a.overrides,
                     "LD_PRELOAD": os.environ.get("LD_PRELOAD", ""), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
                     "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT")},
        "real_tok_per_s": tok_s,
        "peer": arms["trl_bfd"][0]["peer"],
        "trl_isolated_settings": isolated,
        "isolation_tolerance": tolerance,
        "trl_fastest_setting": fastest,
        "ratio_ours_over_trl_isolated": tok_s["ours"] / tok_s[best_isolated] if best_isolated else None,
        "ratio_ours_over_trl_fastest": tok_s["ours"] / tok_s[fastest],
        "ratio_ours_over_trl_unpacked": tok_s["ours"] / tok_s["trl_none"],
        "goals": {"ours_over_trl_isolated_ge_2": None if isolated is None else
                  bool(best_isolated) and tok_s["ours"] >= 2 * tok_s[best_isolated],
                  "ours_over_trl_fastest_ge_1": tok_s["ours"] >= tok_s[fastest]},
        # what the per-token rate is made of: positions per second (the step itself) and real tokens per position
        "positions_per_s_ours": positions / statistics.median(x["rate"]["step_s_median"] for x in arms["ours"]),
        "real_tokens_per_position_ours": statistics.mean(x["real_tokens_per_step_mean"] for x in arms["ours"])
        / positions,
        "where_the_step_goes": "make bench-train profiles the same model's step (results/bench/train.json: profile, "
                               "notes)",
        "arms": arms,
    }
    peers.write_section(a.out, "sft", section)
    print(json.dumps({k: section[k] for k in ("real_tok_per_s", "ratio_ours_over_trl_isolated",
                                              "ratio_ours_over_trl_fastest", "goals")}, indent=1))
    if isolated is None:  # the rates are written; the isolation verdict is not
        print(f"error: {tolerance['reason']} (rates written to {a.out}; rerun to judge isolation)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
