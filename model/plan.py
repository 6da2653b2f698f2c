"""Plan a training run before launch: parallel sizes against the world size, memory per GPU, step time.

    python -m model.plan sft/recipes/qwen3_30b_a3b_h200x8.yaml
    make plan STAGE=sft RECIPE=kimi_k2_class_h200x256         # the same through make
    python -m model.plan sft/recipes/tiny_cpu.yaml --world-size 1 --set model.hidden_size=256
    make plan STAGE=rl RECIPE=qwen3_30b_a3b_h200x8             # + the rollout engine: weights, KV cache, sleep

Runs on the CPU with no GPU and builds nothing: it reads the recipe's `model:`, `parallel:`,
`optim:`, `train:` and `cluster:` blocks (cluster: gpu, nodes, gpus_per_node; world size =
nodes * gpus_per_node unless --world-size), validates the layout with the same rules the training
run uses (model.config.ParallelConfig.validate), and estimates for the most loaded GPU:

  weights   bf16 (2 B/param) or fp32 (4 B/param), dense params / (TP*PP), expert params / (EP*ETP*PP)
  grads     fp32 main grads (4 B/param; Megatron DDP with grad_reduce_in_fp32)
  optimizer fp32 master + Adam m, v (12 B/param), sharded over DP (dense) and expert-DP (experts)
            when optim.use_distributed_optimizer, else replicated
  activations per micro batch and layer from the tensor shapes kept for backward (flash attention:
            no s^2 score matrix), times the layers of a stage and the micro batches in flight (1F1B:
            min(PP, micro batches)), for recompute none / selective / full; plus fp32 logits.
  step time = model FLOPs (6 * active params * tokens + causal attention) / (world * peak * MFU).

An RL recipe (one with a `rollout:` block: `make plan STAGE=rl RECIPE=...`) adds the colocated vLLM engines
(rl/engines.py: one engine per rollout.tensor_parallel_size consecutive ranks, on their GPUs, each generating
its share of the step's groups; rollout.engines: one = rank 0's engine alone on the first GPUs), whose GPUs are
then the most loaded:

  engine    vLLM reserves rollout.gpu_memory_utilization of each of its GPUs: its weights (all params in
            rollout.dtype / engine TP) and, in the rest, the KV cache: 2 * layers * KV heads per GPU
            (ceil(groups / TP), at least 1: vLLM replicates KV heads past TP) * head_dim * bytes per token;
            rollouts in flight per engine = its share of groups_per_step (ceil(groups / engines)) *
            samples_per_prompt, each up to train.seq_length.
  rollout   trainer weights + grads + optimizer (they stay on the GPU) + the engine's whole reservation;
  update    trainer static + activations (the recipe's recompute) + the engine's reservation unless it sleeps
            (rollout.sleep_between: level 1 offloads its weights to host memory and frees the KV cache; an
            engine generating the next step beside the update, rollout.max_staleness > 0 with overlap, stays
            awake).
Not counted: vLLM's own activation workspace and CUDA graphs (enforce_eager), the reference model of a KL term.
It exits 1 when the recipe's layout does not fit in the GPU's memory (with a 10% reserve for the
CUDA context, NCCL buffers and fragmentation) in any phase, or the KV cache cannot hold one full-length
rollout; 2 when the layout is invalid.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m model.plan ...")

from model import cli  # noqa: E402
from model.config import ConfigError, ModelConfig, ParallelConfig  # noqa: E402

GiB = 1024 ** 3

# memory in GiB as the device reports it, dense bf16 peak without sparsity (vendor datasheets)
GPUS = {
    "h200": {"memory_gib": 139.8, "bf16_tflops": 989.0},
    "h100": {"memory_gib": 79.6, "bf16_tflops": 989.0},
    "a100": {"memory_gib": 79.2, "bf16_tflops": 312.0},
    "b200": {"memory_gib": 178.4, "bf16_tflops": 2250.0},
}
RESERVE = 0.10  # of GPU memory kept free: CUDA context, NCCL buffers, allocator fragmentation


@dataclass
class Params:
    dense: int  # everything but routed experts: embeddings, attention, norms, router, output layer
    expert: int  # routed expert weights (split by EP*ETP)
    active: int  # parameters a token passes through (for FLOPs)
    embedding: int  # one vocab x hidden matrix (input embedding; the output layer is another unless tied)


def count_params(m: ModelConfig) -> Params:
    total = m.num_parameters()
    expert = m.num_layers * m.num_experts * 3 * m.hidden_size * m.moe_ffn_hidden_size if m.is_moe else 0
    return Params(dense=total - expert, expert=expert, active=m.num_parameters(active=True),
                  embedding=m.vocab_size * m.hidden_size)


def activation_bytes_per_token_layer(m: ModelConfig, p: ParallelConfig, recompute: str, bytes_per: int) -> float:
    """Bytes one token keeps for backward in one layer (per GPU: TP/SP/CP splits applied)."""
    h, t = m.hidden_size, p.tp
    q = m.num_attention_heads * m.head_dim
    kv = 2 * m.num_query_groups * m.head_dim
    sp_div = t if p.sp else 1  # norms' inputs and residuals are split over TP only with sequence parallel
    if recompute == "full":
        return bytes_per * h / sp_div  # only the layer input; everything else is recomputed in backward
    norm_in = 2 * h / sp_div  # inputs of the two RMSNorms
    attn_in = h / sp_div  # input of the QKV projection (all-gathered under SP but stored split)
    qkv = (q + kv) / t
    core = (q / t) * (0 if recompute == "selective" else 2)  # attention output + softmax stats (flash)
    proj_in = q / t  # input of the output projection
    if m.is_moe:
        f, k = m.moe_ffn_hidden_size / p.expert_tp, m.moe_router_topk
        mlp = h / sp_div + k * (h + 2 * f + f)  # router input; per routed copy: fc1 input, gate+up, act
    else:
        f = m.ffn_hidden_size / t
        mlp = h / sp_div + 2 * f + f
    return bytes_per * (norm_in + attn_in + qkv + core + proj_in + mlp)


def plan(cfg: dict, world_size: int | None = None, mfu: float | None = None) -> dict:
    m = ModelConfig.from_dict(cfg.get("model", {}))
    p = ParallelConfig.from_dict(cfg.get("parallel", {}))
    train, optim, cluster = cfg.get("train", {}), cfg.get("optim", {}), cfg.get("cluster", {})
    gpu_name = str(cluster.get("gpu", "h200")).lower()
    if gpu_name not in GPUS:
        raise ConfigError(f"cluster.gpu={gpu_name!r} is unknown: use one of {sorted(GPUS)}")
    gpu = GPUS[gpu_name]
    world = world_size or int(cluster.get("nodes", 1)) * int(cluster.get("gpus_per_node", 1))
    seq = int(train.get("seq_length", m.max_position_embeddings))
    p.validate(m, world, seq)
    if p.cp > 1 and seq % (2 * p.cp):
        raise ConfigError(f"seq_length={seq} is not divisible by 2*CP={2 * p.cp} (context parallel load balancing)")
    dp = p.data_parallel_size(world)
    micro = p.num_microbatches(world)
    expert_dp = world // (p.pp * p.ep * p.expert_tp) if m.is_moe else dp
    bytes_w = 2 if train.get("dtype", "bfloat16") == "bfloat16" else 4
    distributed = bool(optim.get("use_distributed_optimizer", False))

    n = count_params(m)
    layers_per_stage = m.num_layers // p.pp
    # the most loaded stage: its share of the layers plus the larger of input embedding and output layer
    per_layer_dense = (n.dense - n.embedding * (1 if m.tie_word_embeddings else 2)) / m.num_layers
    dense_gpu = (per_layer_dense * layers_per_stage + n.embedding * (1 if p.pp > 1 else 2)) / p.tp
    expert_gpu = n.expert / (p.ep * p.expert_tp * p.pp)
    weights = (dense_gpu + expert_gpu) * bytes_w
    grads = (dense_gpu + expert_gpu) * 4
    opt_bytes = 12 if bytes_w == 2 else 8  # bf16 keeps an fp32 master copy; fp32 trains the weights in place
    optimizer = (dense_gpu * opt_bytes / (dp if distributed else 1)
                 + expert_gpu * opt_bytes / (expert_dp if distributed else 1))

    tokens_mb = p.micro_batch_size * seq / p.cp  # tokens of one micro batch on one GPU (CP splits the sequence)
    in_flight = min(p.pp, micro)
    logits = tokens_mb * m.vocab_size / p.tp * 4 * 2  # fp32 logits and their gradient on the last stage
    acts = {}
    for mode in ("none", "selective", "full"):
        per_layer = activation_bytes_per_token_layer(m, p, mode, bytes_w) * tokens_mb
        acts[mode] = per_layer * layers_per_stage * in_flight + logits
    usable = gpu["memory_gib"] * (1 - RESERVE) * GiB
    static = weights + grads + optimizer
    totals = {k: (static + v) / GiB for k, v in acts.items()}

    tokens_step = p.global_batch_size * seq
    attn_flops = 3 * 2 * 2 * m.num_layers * m.num_attention_heads * m.head_dim * seq * seq / 2 * p.global_batch_size
    flops = 6 * n.active * tokens_step + attn_flops
    mfu = mfu or float(cluster.get("mfu", 0.35))
    step_s = flops / (world * gpu["bf16_tflops"] * 1e12 * mfu)
    bubble = (p.pp - 1) / (micro + p.pp - 1) if p.pp > 1 else 0.0
    chosen = p.recompute
    return {
        "recipe_layout": {"world_size": world, "tp": p.tp, "pp": p.pp, "cp": p.cp, "ep": p.ep, "etp": p.expert_tp,
                          "dp": dp, "expert_dp": expert_dp, "sp": p.sp, "micro_batches": micro,
                          "recompute": chosen, "distributed_optimizer": distributed},
        "gpu": {"name": gpu_name, **gpu},
        "params": {"total": n.dense + n.expert, "active": n.active, "per_gpu": dense_gpu + expert_gpu},
        "memory_gib": {"weights": weights / GiB, "grads": grads / GiB, "optimizer": optimizer / GiB,
                       "activations": {k: v / GiB for k, v in acts.items()},
                       "total": totals, "usable": usable / GiB},
        "fits": {k: v * GiB <= usable for k, v in totals.items()},
        "step": {"tokens": tokens_step, "model_tflops": flops / 1e12, "mfu": mfu, "seconds": step_s,
                 "pipeline_bubble": bubble, "tokens_per_s_per_gpu": tokens_step / step_s / world},
    }


def rollout_plan(cfg: dict, r: dict) -> dict:
    """The colocated engine's memory beside the trainer's plan `r` (module docstring: engine, rollout, update)."""
    m = ModelConfig.from_dict(cfg.get("model", {}))
    ro, train = cfg["rollout"], cfg.get("train", {})
    gpu, mem = r["gpu"], r["memory_gib"]
    tp = int(ro.get("tensor_parallel_size", 1))
    if tp > r["recipe_layout"]["world_size"]:
        raise ConfigError(f"rollout.tensor_parallel_size={tp} > world size {r['recipe_layout']['world_size']}: "
                          "the engine's workers share the trainer's GPUs")
    seq = int(train.get("seq_length", m.max_position_embeddings))
    b = 2 if ro.get("dtype", "float32") == "bfloat16" else 4
    weights = m.num_parameters() * b / tp / GiB
    kv_heads = max(1, -(-m.num_query_groups // tp))
    kv_token = 2 * m.num_layers * kv_heads * m.head_dim * b  # bytes per token on one engine GPU
    budget = float(ro.get("gpu_memory_utilization", 0.9)) * gpu["memory_gib"]
    kv = budget - weights
    world, mode = r["recipe_layout"]["world_size"], ro.get("engines", "spread")
    if mode == "spread" and world % tp:
        raise ConfigError(f"world size {world} is not a multiple of rollout.tensor_parallel_size={tp}: every engine "
                          "takes that many consecutive ranks (or set rollout.engines: one)")
    engines = 1 if mode == "one" else world // tp
    in_flight = -(-int(ro.get("groups_per_step", 4)) // engines) * int(ro.get("samples_per_prompt", 4))
    concurrent = int(kv * GiB // (seq * kv_token)) if kv > 0 else 0
    overlap = int(ro.get("max_staleness", 0)) > 0 and bool(ro.get("overlap", True))
    sleeps = bool(ro.get("sleep_between", True)) and not overlap
    static = mem["weights"] + mem["grads"] + mem["optimizer"]
    chosen = r["recipe_layout"]["recompute"]
    phases = {"rollout": static + budget, "update": static + mem["activations"][chosen] + (0.0 if sleeps else budget)}
    return {"engine_tp": tp, "engine_gpus": tp, "engines": engines, "dtype": "bfloat16" if b == 2 else "float32",
            "reservation_gib": budget, "weights_gib": weights, "kv_cache_gib": kv, "kv_bytes_per_token": kv_token,
            "rollouts_per_engine": in_flight, "max_tokens_each": seq, "kv_full_length_gib": in_flight * seq * kv_token / GiB,
            "concurrent_full_length": concurrent, "sleeps_during_update": sleeps, "sleep_frees_gib": budget if sleeps else 0.0,
            "host_offload_gib_per_gpu": weights if sleeps else 0.0, "phases_gib": phases,
            "fits": {k: v <= mem["usable"] for k, v in phases.items()} | {"kv_cache": concurrent >= 1}}


def render_rollout(e: dict, usable: float) -> str:
    ph = e["phases_gib"]
    why = "sleeps during the update" if e["sleeps_during_update"] else "stays awake during the update"
    return "\n".join([
        f"engine  {e['engines']} x vLLM TP {e['engine_tp']} ({e['dtype']}), each reserves {e['reservation_gib']:.1f} GiB per GPU: weights "
        f"{e['weights_gib']:.1f} + KV cache {e['kv_cache_gib']:.1f} GiB ({e['kv_bytes_per_token'] / 1024:.0f} KiB/token)"
        f" -> {e['concurrent_full_length']} of its {e['rollouts_per_engine']} rollouts at {e['max_tokens_each']} tokens"
        " at once"
        f"{'' if e['fits']['kv_cache'] else ' DOES NOT FIT one rollout'}",
        f"        {why}: frees {e['sleep_frees_gib']:.1f} GiB, offloads {e['host_offload_gib_per_gpu']:.1f} GiB per GPU "
        f"to host memory",
        *(f"phase   {k:<8} trainer + engine {v:8.1f} GiB of {usable:.1f} {'fits' if e['fits'][k] else 'DOES NOT FIT'}"
          for k, v in ph.items())])


def _n(x: float) -> str:
    return f"{x / 1e9:.2f}B" if x >= 1e9 else f"{x / 1e6:.2f}M"


def render(r: dict) -> str:
    lay, mem, st = r["recipe_layout"], r["memory_gib"], r["step"]
    lines = [
        f"layout  world {lay['world_size']} = TP {lay['tp']} x PP {lay['pp']} x CP {lay['cp']} x DP {lay['dp']}; "
        f"experts EP {lay['ep']} x ETP {lay['etp']} x expert-DP {lay['expert_dp']}; SP {lay['sp']}; "
        f"{lay['micro_batches']} micro batches/step",
        f"params  {_n(r['params']['total'])} total, {_n(r['params']['active'])} active, "
        f"{_n(r['params']['per_gpu'])} on the most loaded GPU",
        f"memory  ({r['gpu']['name']}, {mem['usable']:.1f} GiB usable) weights {mem['weights']:.1f} + grads "
        f"{mem['grads']:.1f} + optimizer {mem['optimizer']:.1f} GiB + activations:",
    ]
    for k in ("none", "selective", "full"):
        mark = "<- recipe" if k == lay["recompute"] else ""
        lines.append(f"          recompute {k:<9} {mem['activations'][k]:8.1f} GiB -> total {mem['total'][k]:8.1f} GiB "
                     f"{'fits' if r['fits'][k] else 'DOES NOT FIT'} {mark}")
    lines.append(f"step    {st['model_tflops']:.1f} TFLOP for {st['tokens']} tokens: {st['seconds']:.2f} s at MFU "
                 f"{st['mfu']:.0%} ({st['tokens_per_s_per_gpu']:.0f} tok/s/GPU), pipeline bubble {st['pipeline_bubble']:.1%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("recipe", type=Path, help="a recipe YAML (any stage)")
    ap.add_argument("--world-size", type=int, default=None, help="GPUs in all (default: cluster.nodes * gpus_per_node)")
    ap.add_argument("--mfu", type=float, default=None, help="model FLOPs utilisation for the step time (default: cluster.mfu or 0.35)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a recipe value")
    ap.add_argument("--base", type=Path, default=None, help="checkpoint whose model_config.json supplies the model when the recipe has no model: block")
    ap.add_argument("--json", type=Path, default=None, help="also write the plan as JSON here")
    a = ap.parse_args(argv)
    from model import recipe

    with cli.input_errors(prefix=f"{a.recipe}: "):
        if not a.recipe.is_file():
            raise ConfigError(f"recipe {a.recipe} not found: pass a path like sft/recipes/tiny_cpu.yaml")
        cfg = recipe.load_recipe(a.recipe.parent.parent.name, str(a.recipe), a.set)
        if "model" not in cfg:  # stages after the base take the model from their input checkpoint
            mc = a.base / "model_config.json" if a.base else None
            if mc is None or not mc.is_file():
                raise ConfigError("the recipe has no model: block (it takes the model from its input checkpoint): "
                                  "pass --base CHECKPOINT_DIR (make plan does: $(CKPT)/base) or add a model: block")
            cfg["model"] = json.loads(mc.read_text())
        r = plan(cfg, a.world_size, a.mfu)
        if "rollout" in cfg:
            r["rollout"] = rollout_plan(cfg, r)
    print(render(r))
    if "rollout" in r:
        print(render_rollout(r["rollout"], r["memory_gib"]["usable"]))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(r, indent=2) + "\n")
    chosen = r["recipe_layout"]["recompute"]
    if not r["fits"][chosen]:
        print(f"error: {a.recipe}: needs {r['memory_gib']['total'][chosen]:.1f} GiB per GPU with recompute={chosen}, "
              f"{r['memory_gib']['usable']:.1f} GiB usable: raise TP/PP/EP, enable recompute or the distributed optimizer",
              file=sys.stderr)
        return 1
    if "rollout" in r and not all(r["rollout"]["fits"].values()):
        bad = [k for k, ok in r["rollout"]["fits"].items() if not ok]
        print(f"error: {a.recipe}: the trainer and the rollout engine do not fit ({', '.join(bad)}): lower "
              "rollout.gpu_memory_utilization or raise rollout.tensor_parallel_size, keep rollout.sleep_between on, "
              "or shard the trainer further", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
