"""Training-step throughput: Megatron-Core (model.train.train_step) vs transformers + a plain torch loop.

    python -m pretrain_ckpt.bench_train --out results/bench/train.json [--threads 2] [--dtype bf16]
    python -m pretrain_ckpt.bench_train --recipe smollm2_cpu --out results/bench/train_smollm2_cpu.json
    make bench-train RECIPE=smollm2_cpu BENCH_DTYPE=bf16

The model is the recipe's `model:` block (pretrain_ckpt/recipes/<name>.yaml; default tiny_cpu, the tiny MoE base),
the sizes its `bench:` section (seq_length, batch, warmup, steps, mode_cost, fused_cost; flags win). Weights are a
seeded random init (model.hf_mapping.init_hf_state): a speed benchmark, whose losses are ~ln(vocab); --base loads an
imported base's weights instead (checkpoints/real/base), whose model must be the recipe's.
Same run, same machine, same threads, same weights, same batch, same dtype:
- megatron: the model as a Megatron-Core GPTModel (local spec, single process, gloo, CPU compatibility layer),
  Megatron DDP + Megatron's optimizer (torch AdamW, switched to its fused CPU kernel by model.train.fuse_cpu_adam,
  as in every training stage) + grad clip 1.0 through model.train.train_step;
- baseline: the same weights converted with model.hf_mapping.to_hf + model.hf_io.save_hf, loaded as transformers
  LlamaForCausalLM (dense) or Qwen3MoeForCausalLM (MoE), trained by a plain loop (forward, loss with labels, + the
  router aux loss for MoE, backward, clip_grad_norm_ 1.0, torch.optim.AdamW with its defaults: the single-tensor
  loop on CPU). A few extra baseline steps with AdamW(fused=True) are timed too and reported beside (--fused-cost).
Each step is split into forward+backward and optimizer (Megatron: optimizer.step incl. grad clip; baseline:
clip_grad_norm_ + AdamW.step). Both sides live in one process and their steps are interleaved (megatron, hf, megatron, ...), so load
from other users of the 2 shared cores hits both alike; the baseline runs with torch function handling
disabled, so the CPU compatibility layer's process-wide TorchFunctionMode does not tax it. MFU is against the
matmul peak of the dtype the model computes in (--dtype), measured in the same run with the same threads: a
2048^3 matmul, warmed up, best of 10 reps at start and end and of 3 after each timed step (PeakMeter); medians
of step times are reported. Small mode: --steps 1 --warmup 1 --mode-cost 0 --fused-cost 0 --batch 1.
Model FLOPs per step = 6 * matmul params * tokens + causal attention (3 * 2 * 2 * b * s^2/2 * heads*head_dim * layers),
where the matmul params are the weights a token's activations are multiplied by: per layer the QKV and output
projections and the MLP (MoE: the router and the top-k experts), and the output layer (hidden x vocab). Not counted:
the input embedding (a row lookup, no FLOPs; tied embeddings are one matrix, counted once as the output layer), norms.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m pretrain_ckpt.bench_train ...")

import torch  # noqa: E402

from model import cli  # noqa: E402
from model.config import ConfigError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = "tiny_cpu"  # its model block is the tiny MoE base; results/bench/train.json


def default_out(recipe: str, dtype: str, fused: bool = False, attention: str = "flash") -> str:
    """results/bench/train.json for the tiny default in fp32 (the committed reference's name), else
    train_<recipe>[_bf16][_fused][_gemm].json, so a run of another recipe, dtype, --fuse-elementwise or
    --cpu-attention never overwrites it (the Makefile's names)."""
    tag = (("" if recipe == DEFAULT_RECIPE else f"_{Path(recipe).stem}") + ("_bf16" if dtype == "bf16" else "")
           + ("_fused" if fused else "") + ("_gemm" if attention == "gemm" else ""))
    return f"results/bench/train{tag}.json"


def load_bench(recipe: str, overrides: list[str]) -> tuple[dict, "ModelConfig", dict]:
    """(the loaded recipe, its model, its bench sizes with the defaults of pretrain_ckpt.config.BenchConfig)."""
    from model import recipe as recipes, sections
    from model.config import ModelConfig
    from pretrain_ckpt.config import BenchConfig

    rc = recipes.load_recipe("pretrain_ckpt", recipe, overrides)
    if not rc.get("model"):
        raise ConfigError(f"recipe {recipe} has no model block: the benchmark needs the model's shape")
    cfg = ModelConfig.from_dict(rc["model"])
    bench = sections.check_section(BenchConfig, rc.get("bench"), "bench")
    return rc, cfg, bench


def model_flops_per_step(cfg, batch: int, seq: int) -> dict:
    """Model FLOPs of one training step: forward 2 FLOPs per multiply-add, backward twice the forward."""
    h, L, hd = cfg.hidden_size, cfg.num_layers, cfg.head_dim
    attn_proj = h * hd * (cfg.num_attention_heads + 2 * cfg.num_query_groups) + cfg.num_attention_heads * hd * h
    if cfg.is_moe:  # the router, then the top-k experts each token visits
        mlp = cfg.num_experts * h + cfg.moe_router_topk * 3 * h * cfg.moe_ffn_hidden_size
    else:
        mlp = 3 * h * cfg.ffn_hidden_size  # SwiGLU: gate, up, down
    matmul = L * (attn_proj + mlp) + cfg.vocab_size * h  # + the output layer, tied or not
    tokens = batch * seq
    dense = 6 * matmul * tokens
    # QK^T and AV: 2 matmuls * 2 flops/MAC * b * s^2 * (heads*head_dim), halved by the causal mask, x3 fwd+bwd
    attn = 3 * 2 * 2 * batch * seq * seq // 2 * cfg.num_attention_heads * hd * L
    return {"matmul_params": matmul, "active_params": cfg.num_parameters(active=True),
            "total_params": cfg.num_parameters(), "tokens": tokens, "flops_6nd": dense, "flops_attention": attn,
            "flops_per_step": dense + attn,
            "counted": "6 * matmul_params * tokens + causal attention; matmul_params = per layer QKV + output "
                       "projection + MLP (MoE: router + top-k experts), + the output layer (hidden x vocab, counted "
                       "once whether tied or not); not counted: the input embedding lookup and the norms",
            "tied_embeddings": cfg.tie_word_embeddings}


PEAK_N = 2048        # square matmul size of the peak: large enough for the GEMM kernels' full speed
PEAK_REPS = 10       # timed reps; the best one is the peak (the machine is shared: slow reps are other users)
PEAK_WARMUP_S = 0.5  # untimed matmuls first, at least this long (and at least 3): caches, frequency, thread pool


def matmul_peak(dtype: torch.dtype, threads: int, n: int = PEAK_N, reps: int = PEAK_REPS,
                warmup_s: float = PEAK_WARMUP_S) -> dict:
    """GFLOP/s of an n x n x n matmul in `dtype` on `threads` torch threads: best of `reps` timed calls after warm-up.

    The output is preallocated (out=), so no rep pays for allocating and page-faulting its result."""
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=g).to(dtype), torch.randn(n, n, generator=g).to(dtype)
        c = torch.empty(n, n, dtype=dtype)
        warm, t_end = 0, time.perf_counter() + warmup_s
        while warm < 3 or time.perf_counter() < t_end:
            torch.matmul(a, b, out=c)
            warm += 1
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.matmul(a, b, out=c)
            times.append(time.perf_counter() - t0)
        used = torch.get_num_threads()
    finally:
        torch.set_num_threads(prev)
    return {"gflops": 2 * n**3 / min(times) / 1e9, "n": n, "dtype": str(dtype).replace("torch.", ""),
            "threads": used, "reps": reps, "warmup_calls": warm,
            "rep_gflops": [round(2 * n**3 / t / 1e9, 2) for t in times]}


def implausible_peak(peak: float, single_thread: float | None, threads: int) -> str | None:
    """Why `peak` cannot be MFU's denominator (one line), or None. A peak on `threads` threads below what one thread
    reached in the same run was measured while other work held the cores: an MFU against it would be inflated."""
    if threads > 1 and single_thread is not None and peak < single_thread:
        return (f"the {threads}-thread matmul peak {peak:.0f} GFLOP/s is below one thread's {single_thread:.0f} in "
                "the same run: the cores were busy while it was measured, so no MFU is reported (rerun idle)")
    return None


def cpu_has_bf16() -> bool:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


class PeakMeter:
    """The matmul peak of the dtype the model computes in, sampled at the start, between timed steps and at the end
    of the run, with the run's threads; the peak is the best sample (load from other users only lowers samples)."""

    def __init__(self, dtype: str, threads: int, between_reps: int = 3):
        self.dtype, self.threads, self.between_reps = dtype, threads, between_reps
        self.torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        self.samples: list[dict] = []

    def sample(self, reps: int = PEAK_REPS, warmup_s: float = PEAK_WARMUP_S) -> None:
        self.samples.append(matmul_peak(self.torch_dtype, self.threads, reps=reps, warmup_s=warmup_s))

    @property
    def gflops(self) -> float:
        return max(s["gflops"] for s in self.samples)

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "gflops": self.gflops, "n": PEAK_N, "threads": self.threads,
                "samples_gflops": [s["gflops"] for s in self.samples], "samples": self.samples,
                "how": f"{PEAK_N}^3 matmul, out= preallocated, >= {PEAK_WARMUP_S} s warm-up, best of {PEAK_REPS} reps at "
                       f"start and end and of {self.between_reps} after each interleaved step; max of the samples"}


def batch_tokens(batch: int, step: int, vocab: int, seq: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, vocab, (batch, seq + 1), generator=g)


def load_base(path: Path, cfg) -> tuple[dict, str]:
    """The HF tensors of an imported base (a base checkpoint directory, verified against its manifest, whose hf/ is
    read; or an HF directory) and where they came from. Its model must be the recipe's."""
    from model import hf_io, manifest

    path = Path(path)
    if (path / "manifest.json").exists():
        manifest.verify(path)
        hf_dir = path / "hf"
    else:
        hf_dir = path
    if not (hf_dir / "config.json").is_file():
        raise FileNotFoundError(f"{hf_dir}/config.json not found: --base takes a base checkpoint directory "
                                "(checkpoints/real/base) or an HF directory")
    want = cfg.to_dict()
    have = hf_io.model_config_from_hf(json.loads((hf_dir / "config.json").read_text())).to_dict()
    diff = {k: (want[k], have[k]) for k in want if want[k] != have[k]}
    if diff:  # before reading any weights
        raise ConfigError(f"--base {path} is another model than the recipe's: " +
                          ", ".join(f"model.{k}={w!r} but the base has {h!r}" for k, (w, h) in diff.items()))
    tensors, _ = hf_io.load_hf(hf_dir)
    return tensors, str(hf_dir)


# ----------------------------------------------------------------------------------------- the two sides

class MegatronSide:
    """Megatron-Core GPTModel + DDP + Megatron optimizer, stepped by model.train.train_step."""

    def __init__(self, args, cfg, seq: int, hf_dir: Path, tensors: dict | None = None):
        from model import checkpoint, hf_io, hf_mapping, parallel, train
        from model.build import build_model
        from model.config import ParallelConfig

        self.train, self.args, self.cfg, self.seq = train, args, cfg, seq
        dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
        par = ParallelConfig(micro_batch_size=args.batch, global_batch_size=args.batch)
        parallel.init(par, self.cfg, seed=1, seq_length=seq)
        torch.set_num_threads(args.threads)
        m = build_model(self.cfg, par, dtype=dtype, fuse_elementwise=args.fuse_elementwise,
                        cpu_attention=args.cpu_attention)
        hf_mapping.load_hf_into(m, tensors if tensors is not None else hf_mapping.init_hf_state(self.cfg, 3), self.cfg)
        del tensors
        # the baseline's weights: converted from this very model
        hf_io.save_hf(hf_dir, hf_mapping.to_hf(checkpoint.full_state_dict(m), self.cfg), self.cfg, None)
        self.param_tensors = sum(1 for _ in m.parameters())
        self.ddp, self.opt, self.sch = train.setup(
            m, train.OptimConfig(lr=1e-4, min_lr=1e-4, warmup_steps=0, decay_style="constant", weight_decay=0.1,
                                 clip_grad=1.0), 10_000, args.batch)
        train.sync_main_params(self.opt)  # bf16: fp32 main params from the loaded weights, as the driver does
        self.opt_s = []  # optimizer.step seconds per step (grad clip included)
        step = self.opt.step

        def timed_opt_step():
            t0 = time.perf_counter()
            out = step()
            self.opt_s.append(time.perf_counter() - t0)
            return out

        self.opt.step = timed_opt_step

    def step(self, s: int) -> float:
        b, seq = self.args.batch, self.seq
        x = batch_tokens(b, s, self.cfg.vocab_size, seq)
        batches = [{"tokens": x[:, :-1], "labels": x[:, 1:], "loss_mask": torch.ones(b, seq),
                    "position_ids": torch.arange(seq).expand(b, seq)}]
        return self.train.train_step(self.ddp, self.opt, self.sch, batches, seq, b)["loss"]


def hf_class(cfg) -> str:
    return "Qwen3MoeForCausalLM" if cfg.is_moe else "LlamaForCausalLM"


class HFSide:
    """transformers LlamaForCausalLM (dense) or Qwen3MoeForCausalLM (MoE) + torch.optim.AdamW, a plain loop (no CPU
    compatibility mode)."""

    def __init__(self, args, cfg, seq: int, hf_dir: Path):
        from transformers import AutoModelForCausalLM

        self.args, self.cfg, self.seq = args, cfg, seq
        self.bf16 = args.dtype == "bf16"
        with _without_cpu_compat_mode():
            self.model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32)
        assert type(self.model).__name__ == hf_class(cfg), (type(self.model).__name__, hf_class(cfg))
        if cfg.is_moe:
            self.model.config.output_router_logits = True  # include the router load-balancing loss, as Megatron does
        self.model.train()
        self.param_tensors = sum(1 for _ in self.model.parameters())
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
        self.with_mode = False  # True: run under model.cpu_compat's TorchFunctionMode (to measure its cost)
        self.opt_s = []  # clip_grad_norm_ + AdamW.step seconds per step

    def step(self, s: int) -> float:
        x = batch_tokens(self.args.batch, s, self.cfg.vocab_size, self.seq)
        ctx = contextlib.nullcontext() if self.with_mode else _without_cpu_compat_mode()
        with ctx:
            self.opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                out = self.model(input_ids=x[:, :-1])  # every position scored against x[1:], as Megatron's labels
                lm = torch.nn.functional.cross_entropy(out.logits.float().view(-1, self.cfg.vocab_size),
                                                       x[:, 1:].reshape(-1))
            loss = lm + self.model.config.router_aux_loss_coef * out.aux_loss if self.cfg.is_moe else lm
            loss.backward()
            t0 = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt_s.append(time.perf_counter() - t0)
        return float(lm)

    def set_fused_adam(self, fused: bool) -> None:
        for g in self.opt.param_groups:
            g["fused"], g["foreach"] = fused, (False if fused else None)


def _without_cpu_compat_mode():
    """Pop model.cpu_compat's process-wide TorchFunctionMode for the duration (other modes, such as
    transformers' `with torch.device(...)` during loading, keep working)."""
    from model import cpu_compat

    n = torch._C._len_torch_function_stack()
    if n and cpu_compat._MODE is not None and torch._C._get_function_stack_at(n - 1) is cpu_compat._MODE:
        from torch.overrides import _pop_mode_temporarily

        return _pop_mode_temporarily()
    return contextlib.nullcontext()


def timed(fn, s: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    loss = fn(s)
    return time.perf_counter() - t0, loss


MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation")


def op_category(key: str) -> str:
    """matmul (the GEMMs the model FLOPs count), attention (SDPA kernels), optimizer, or other (elementwise, norms,
    softmax, copies, MoE permutation, dispatch)."""
    k = key.lower()
    if key in MATMUL_OPS:
        return "matmul"
    if "scaled_dot_product" in k or "flash_attention" in k:
        return "attention"
    if "adam" in k or "_foreach" in k:
        return "optimizer"
    return "other"


def _profile(step_fn, start: int, n: int = 2) -> dict:
    """Top CPU ops by self time over n steps, and the count of Python-level torch function calls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as p:
        for s in range(n):
            step_fn(start + s)
    ev = sorted(p.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in ev)
    cats: dict[str, float] = {}
    for e in ev:
        cats[op_category(e.key)] = cats.get(op_category(e.key), 0.0) + e.self_cpu_time_total / 1e6 / n
    return {"steps": n, "self_cpu_total_s": total / 1e6,
            "category_self_s_per_step": {k: round(v, 4) for k, v in sorted(cats.items(), key=lambda kv: -kv[1])},
            "top_ops": [{"op": e.key, "self_s": round(e.self_cpu_time_total / 1e6 / n, 4), "calls": e.count // n}
                        for e in ev[:15]],
            "ops_per_step": sum(e.count for e in ev) // n}


# ----------------------------------------------------------------------------------------- parent

def machine(threads: int) -> dict:
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu_model": model, "torch_threads": threads, "gpu": None,
            "avx512_bf16": cpu_has_bf16(), "torch": torch.__version__,
            "allocator": "tcmalloc" if "tcmalloc" in os.environ.get("LD_PRELOAD", "") else "default (glibc)",
            "openmp_wait": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
            "load_average_at_start": list(os.getloadavg())}


def git_commit() -> str:
    try:
        c = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout.strip()
        return c + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def summarize(times: list[float], losses: list[float], flops: dict, peak: float) -> dict:
    med = statistics.median(times)
    achieved = flops["flops_per_step"] / med / 1e9
    return {"step_s_median": med, "step_s_all": [round(t, 4) for t in times],
            "tokens_per_s": flops["tokens"] / med, "model_gflop_per_s": achieved,
            "mfu": achieved / peak, "mfu_peak_gflops": peak, "losses": losses}


def main() -> None:
    ap = cli.parser(__doc__, "pretrain_ckpt", ["model", "bench"])
    cli.recipe_args(ap, "pretrain_ckpt", "bench.steps=2", default=DEFAULT_RECIPE,
                    recipe_help="pretrain_ckpt/recipes/<name>.yaml or a path: its model: block is the model, its "
                                "bench: section the sizes (tiny_cpu: the tiny MoE base; smollm2_cpu: SmolLM2-135M)")
    ap.add_argument("--out", default=None, help="results file (default results/bench/train.json for tiny_cpu in fp32, "
                                                "else results/bench/train_<recipe>[_bf16].json)")
    ap.add_argument("--base", type=Path, default=None,
                    help="train an imported base's weights instead of a seeded random init: a base checkpoint "
                         "directory (checkpoints/real/base; its hf/ is read) or an HF directory, of the recipe's model")
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--batch", type=int, default=None,
                    help="micro batch = global batch (default: the recipe's bench.batch)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps per side (default: bench.warmup)")
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps per side, interleaved megatron/hf (default: bench.steps)")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--mode-cost", type=int, default=None,
                    help="extra HF steps under cpu_compat's TorchFunctionMode, to measure its overhead (0 = skip; "
                         "default: bench.mode_cost)")
    ap.add_argument("--fused-cost", type=int, default=None,
                    help="extra baseline steps with AdamW(fused=True) and as many without, reported beside (0 = skip; "
                         "default: bench.fused_cost)")
    ap.add_argument("--profile", action="store_true", help="also record torch.profiler top ops of 2 steps per side")
    ap.add_argument("--fuse-elementwise", action="store_true",
                    help="Megatron side: the norms, the experts' activation and the loss compiled (train.fuse_elementwise, "
                         "model/fused.py); compiling happens in the warm-up steps")
    ap.add_argument("--cpu-attention", choices=["flash", "gemm"], default="flash",
                    help="Megatron side: causal attention of bf16 training on the CPU (train.cpu_attention, "
                         "model/attention.py)")
    args = ap.parse_args()
    with cli.input_errors(FileNotFoundError, ValueError):  # bad input: one line, before any work
        rc, cfg, bench = load_bench(args.recipe, args.overrides)
        for k in ("batch", "warmup", "steps", "mode_cost", "fused_cost"):
            if getattr(args, k) is None:
                setattr(args, k, bench[k])
        seq = bench["seq_length"]
        if seq > cfg.max_position_embeddings:
            raise ConfigError(f"bench.seq_length={seq} > model.max_position_embeddings={cfg.max_position_embeddings}")
        if args.batch < 1 or args.steps < 1 or seq < 1:
            raise ConfigError(f"batch={args.batch}, steps={args.steps} and bench.seq_length={seq} must be >= 1")
        tensors, weights = None, "seeded random init (model.hf_mapping.init_hf_state, seed 3): a speed benchmark"
        if args.base is not None:
            tensors, src = load_base(args.base, cfg)
            weights = f"loaded from {src}"
    out = Path(args.out or default_out(args.recipe, args.dtype, args.fuse_elementwise, args.cpu_attention))

    torch.set_num_threads(args.threads)
    flops = model_flops_per_step(cfg, args.batch, seq)
    load_start = list(os.getloadavg())
    meter = PeakMeter(args.dtype, args.threads)  # the peak MFU is against: the dtype the model computes in
    meter.sample()
    other = "bf16" if args.dtype == "fp32" else "fp32"
    # for reference only; bf16 at 512^3 where the CPU lacks AVX512-BF16/AMX (emulated, ~1 GFLOP/s: 2048^3 takes minutes)
    other_peak = matmul_peak(torch.bfloat16 if other == "bf16" else torch.float32, args.threads,
                             n=PEAK_N if other == "fp32" or cpu_has_bf16() else 512, reps=3 if other == "bf16" else 10)
    # the plausibility floor of the peak: one thread, same dtype and size (bench_train.implausible_peak)
    single = matmul_peak(meter.torch_dtype, 1, reps=3) if args.threads > 1 else None
    with tempfile.TemporaryDirectory() as d:
        hf_dir = Path(d) / "hf"
        meg = MegatronSide(args, cfg, seq, hf_dir, tensors)  # builds, loads the weights, writes the baseline's HF dir
        del tensors
        hf = HFSide(args, cfg, seq, hf_dir)
    sides = {"megatron": meg, "hf": hf}
    losses = {k: [] for k in sides}
    times = {k: [] for k in sides}
    opt_times = {k: [] for k in sides}
    for s in range(args.warmup + args.steps):  # interleaved, so machine load hits both sides alike
        for name, side in sides.items():
            dt, loss = timed(side.step, s)
            losses[name].append(loss)
            if s >= args.warmup:
                times[name].append(dt)
                opt_times[name].append(side.opt_s[-1])
        if s >= args.warmup:
            meter.sample(reps=meter.between_reps, warmup_s=0.1)  # under the same load as the steps just timed
    fused_cost = None
    if args.fused_cost:  # what the baseline would gain from the fused optimizer kernel, interleaved
        fused, plain = [], []
        for i in range(args.fused_cost):
            hf.set_fused_adam(True)
            fused.append(timed(hf.step, 500 + i)[0])
            hf.set_fused_adam(False)
            plain.append(timed(hf.step, 600 + i)[0])
        fused_cost = {"hf_step_s_fused_adamw": fused, "hf_step_s_default_adamw": plain,
                      "relative_step_time": statistics.median(fused) / statistics.median(plain)}
    mode_cost = None
    if args.mode_cost:
        hf.with_mode = True
        with_mode = [timed(hf.step, 100 + i)[0] for i in range(args.mode_cost)]
        hf.with_mode = False
        without = [timed(hf.step, 200 + i)[0] for i in range(args.mode_cost)]
        mode_cost = {"hf_step_s_with_mode": with_mode, "hf_step_s_without_mode": without,
                     "relative_overhead": statistics.median(with_mode) / statistics.median(without) - 1}
    prof = None
    if args.profile:
        prof = {"megatron": _profile(meg.step, 300), "hf": _profile(hf.step, 400)}
    meter.sample()  # again at the end: the machine is shared, keep the best
    peak = {args.dtype: meter.gflops, other: other_peak["gflops"]}
    load_end = list(os.getloadavg())
    from model import parallel

    parallel.destroy()

    peak_used = meter.gflops
    m = summarize(times["megatron"], losses["megatron"], flops, peak_used)
    h = summarize(times["hf"], losses["hf"], flops, peak_used)
    refused = implausible_peak(peak_used, single and single["gflops"], args.threads)
    if refused:
        m["mfu"] = h["mfu"] = None
        print(f"warning: {refused}", file=sys.stderr)
    for side, name in ((m, "megatron"), (h, "hf")):
        side["optimizer_s_median"] = statistics.median(opt_times[name])
        side["fwd_bwd_s_median"] = statistics.median([a - b for a, b in zip(times[name], opt_times[name])])
        side["parameter_tensors"] = sides[name].param_tensors
    ratios = [b / a for a, b in zip(times["megatron"], times["hf"])]
    mach = machine(args.threads)
    # machine() runs after the steps: its load_average_at_start (the name the notebooks read) is the start's here
    mach["load_average_start"] = mach["load_average_at_start"] = load_start
    mach["load_average_end"] = load_end
    res = {
        "schema": {"name": "bench.train", "version": 2},
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "machine": mach,
        "recipe": rc["recipe"],
        "baseline": f"transformers {hf_class(cfg)} + torch AdamW loop",
        "model": "MoE" if cfg.is_moe else "dense",
        "weights": weights,
        "model_config": cfg.to_dict(),
        "setup": {"dtype": args.dtype, "fuse_elementwise": args.fuse_elementwise, "cpu_attention": args.cpu_attention,
                  "seq_length": seq,
                  "micro_batch": args.batch, "global_batch": args.batch,
                  "warmup_steps": args.warmup, "timed_steps": args.steps, "schedule": "interleaved megatron/hf steps",
                  "optimizer": "Adam(W) lr 1e-4 betas (0.9, 0.95) wd 0.1 clip 1.0",
                  "optimizer_impl": {"megatron": "Megatron optimizer over torch AdamW, fused CPU kernel (model.train.fuse_cpu_adam)",
                                     "hf": "torch.optim.AdamW defaults (single-tensor loop on CPU)"},
                  "precision": {"megatron": f"{args.dtype} parameters" + (", fp32 main params in the optimizer"
                                                                           if args.dtype == "bf16" else ""),
                                "hf": "fp32 parameters" + (", torch.autocast(cpu, bfloat16)" if args.dtype == "bf16"
                                                           else "")},
                  "moe_aux_loss": f"both sides ({cfg.moe_aux_loss_coeff})" if cfg.is_moe else "none (dense)",
                  "same_process": True, "hf_runs_without": "cpu_compat TorchFunctionMode (popped from the torch function mode stack)",
                  "megatron_runs_without_mode_in": "the model forward (model.train._forward_step, cpu_compat.suspended)"},
        "flops": flops,
        "matmul_peak_gflops": {"used": args.dtype, "used_gflops": peak_used, "run_dtype": meter.to_json(),
                               "other_dtype": other_peak, other: other_peak["gflops"], args.dtype: peak_used,
                               "single_thread": single, "mfu_refused": refused},
        "megatron": m,
        "hf": h,
        "ratio_tokens_per_s_megatron_over_hf": h["step_s_median"] / m["step_s_median"],
        "ratio_per_interleaved_step_median": statistics.median(ratios),
        "ratio_of_fastest_steps": min(times["hf"]) / min(times["megatron"]),
        "first_step_loss_abs_diff": abs(losses["megatron"][0] - losses["hf"][0]),
        "cpu_compat_mode_cost": mode_cost,
        "baseline_fused_adamw": fused_cost,
        "profile": prof,
    }
    res["notes"] = notes(res)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("ratio_tokens_per_s_megatron_over_hf", "ratio_per_interleaved_step_median",
                                          "first_step_loss_abs_diff", "cpu_compat_mode_cost", "baseline_fused_adamw")}
                     | {"out": str(out), "megatron_tok_s": m["tokens_per_s"], "hf_tok_s": h["tokens_per_s"],
                        "megatron_mfu": m["mfu"], "hf_mfu": h["mfu"], "peak_gflops": peak, "step_s": times,
                        "split_s": {k: {"fwd_bwd": v["fwd_bwd_s_median"], "optimizer": v["optimizer_s_median"]}
                                    for k, v in (("megatron", m), ("hf", h))}}, indent=2))


def _limits(res: dict) -> str:
    """What keeps this model's MFU below the peak, from its shapes."""
    c, su = res["model_config"], res["setup"]
    h, v, tokens = c["hidden_size"], c["vocab_size"], su["micro_batch"] * su["seq_length"]
    if c["num_experts"]:
        e, k = c["num_experts"], c["moe_router_topk"]
        gemms = (f"small GEMMs (hidden {h}; each of {e} experts sees ~tokens*topk/{e} = {tokens * k // e} rows x {h} x "
                 f"{c['moe_ffn_hidden_size']}), far below the peak's efficiency")
        extra = "MoE permute/unpermute cat/index ops, "
    else:
        qkv = c["head_dim"] * (c["num_attention_heads"] + 2 * c["num_query_groups"])
        gemms = (f"GEMMs of {tokens} rows (QKV {h}x{qkv}, MLP {h}x{2 * c['ffn_hidden_size']} and "
                 f"{c['ffn_hidden_size']}x{h}, output layer {h}x{v}), narrower than the {PEAK_N}^3 of the peak; "
                 f"attention as {c['num_attention_heads']} per-head {su['seq_length']}x{su['seq_length']} score "
                 "matrices")
        extra = ""
    return (f"It is limited by: {gemms}; memory-bound elementwise work (RMSNorm, SiLU*mul, RoPE, softmax/log-softmax "
            f"over a {v} vocab, {extra}Adam's per-parameter updates) that does no matmul FLOPs")


def notes(res: dict) -> list[str]:
    m, h, mach = res["megatron"], res["hf"], res["machine"]
    out = [
        f"Throughput ratio Megatron/HF (median step times) {res['ratio_tokens_per_s_megatron_over_hf']:.2f}; median of "
        f"per-interleaved-step ratios {res['ratio_per_interleaved_step_median']:.2f}; fastest-step ratio "
        f"{res['ratio_of_fastest_steps']:.2f}. The machine is shared (load average {mach['load_average_start'][0]:.1f} -> "
        f"{mach['load_average_end'][0]:.1f} on {mach['cores']} cores): single steps vary by 2-3x, so only the "
        "interleaved ratios are meaningful and a few-% difference is noise.",
        f"Both sides compute the same model ({res['recipe']}: {res['model']}, {res['flops']['total_params']:,} "
        f"parameters, weights: {res['weights']}): first-step LM loss differs by {res['first_step_loss_abs_diff']:.2g}.",
        (f"MFU not reported: {res['matmul_peak_gflops']['mfu_refused']}. " if res["matmul_peak_gflops"].get("mfu_refused")
         else "") +
        f"MFU is against the {res['matmul_peak_gflops']['used']} matmul peak measured in this run "
        f"({res['matmul_peak_gflops']['used_gflops']:.0f} GFLOP/s, {PEAK_N}^3, {mach['torch_threads']} threads, best "
        f"sample); model FLOPs count {res['flops']['counted']}. {_limits(res)}; the allocator ({mach['allocator']}); "
        "and other users' processes on the same cores.",
        (f"This CPU has bf16 matmul support (avx512_bf16/AMX): bf16 peak {res['matmul_peak_gflops']['bf16']:.0f} vs fp32 "
         f"{res['matmul_peak_gflops']['fp32']:.0f} GFLOP/s; --dtype bf16 computes in bf16 and reports MFU against the bf16 peak."
         if mach["avx512_bf16"] else
         f"This CPU has no avx512_bf16/AMX: bf16 GEMMs are emulated (bf16 peak {res['matmul_peak_gflops']['bf16']:.2f} "
         f"GFLOP/s at 512^3 vs fp32 {res['matmul_peak_gflops']['fp32']:.1f}), so bf16 is not useful here."),
    ]
    why = (", since SequentialMLP keeps one tensor per expert" if res["model"] == "MoE" else "")
    out.append(f"Split (medians): Megatron forward+backward {m['fwd_bwd_s_median']:.3f} s + optimizer "
               f"{m['optimizer_s_median']:.3f} s; baseline {h['fwd_bwd_s_median']:.3f} s + {h['optimizer_s_median']:.3f} s. "
               "Megatron's optimizer runs torch's fused AdamW CPU kernel (model.train.fuse_cpu_adam, used by every "
               "training stage; without it Megatron keeps torch's single-tensor loop over its "
               f"{m['parameter_tensors']} parameter tensors vs the baseline's {h['parameter_tensors']}{why}); the "
               "baseline keeps torch.optim.AdamW's defaults.")
    fc = res.get("baseline_fused_adamw")
    if fc:
        out.append(f"For reference, the baseline with AdamW(fused=True) takes {fc['relative_step_time']:.3f}x its default "
                   "step time (a few interleaved steps): the ratio above is against the plain default loop.")
    mc = res.get("cpu_compat_mode_cost")
    if mc:
        out.append(f"cpu_compat's TorchFunctionMode, applied to the HF step: {mc['relative_overhead'] * 100:+.0f}% step "
                   "time (median of a few steps; within noise here). Its cost is per torch call (a Python "
                   "__torch_function__ frame, ~4 us), so it grows with op count, not FLOPs; the Megatron step pops it "
                   "for the model forward (model.train._forward_step) and keeps it where Megatron makes device='cuda' "
                   "tensors (schedule, optimizer, grad clip).")
    prof = res.get("profile")
    if prof:
        pm, ph = prof["megatron"], prof["hf"]
        what = ("MoE alltoall dispatcher permute/sort/cat + per-expert SequentialMLP + DDP buffers"
                if res["model"] == "MoE" else "DDP buffers, fused QKV split, Megatron's loss and schedule")
        out.append(f"Profiler (2 steps each): Megatron issues {pm['ops_per_step']} torch ops/step vs HF {ph['ops_per_step']} "
                   f"({what}); op self time {pm['self_cpu_total_s'] / pm['steps']:.2f} s/step vs "
                   f"{ph['self_cpu_total_s'] / ph['steps']:.2f} s/step.")
        cm = pm.get("category_self_s_per_step")
        if cm:
            step = pm["self_cpu_total_s"] / pm["steps"]
            mm = cm.get("matmul", 0.0)
            rate = res["flops"]["flops_6nd"] / mm / 1e9 if mm else float("nan")
            out.append("Where Megatron's step goes (profiler self time per step): " + ", ".join(
                f"{k} {v:.3f} s ({v / step:.0%})" for k, v in cm.items()) + f". Its GEMMs run at {rate:.0f} GFLOP/s "
                f"({rate / res['matmul_peak_gflops']['used_gflops']:.0%} of the peak) on this model's shapes, so even "
                f"with no other work the MFU would be that; the non-matmul share is the rest of the gap.")
    return out


if __name__ == "__main__":
    main()
