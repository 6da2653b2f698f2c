# %% [markdown]
# # Training throughput: Megatron-Core step against a transformers + AdamW loop
# Reads `results/bench/train.json` (schema `bench.train`, `pretrain_ckpt/bench_train.py`): both sides
# train the same weights on the same batch in one process, steps interleaved; tokens/s, MFU against the
# matmul peak measured in the same run, per-step times and the losses of both sides.

# %%
from notebooks.common import find, load, plt, save, source

p = find("bench/train.json")
doc = load(p) if p else None

# %%
if doc:
    sides = {"megatron": "Megatron-Core", "hf": "baseline: transformers + AdamW"}
    colors = {"megatron": "#4c72b0", "hf": "#9e9e9e"}
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.4))
    su, fl, m = doc.get("setup", {}), doc.get("flops", {}), doc.get("machine", {})
    tok = [doc[s]["tokens_per_s"] for s in sides]
    bars = a1.bar(["Megatron-Core", "transformers"], tok, color=[colors[s] for s in sides])
    for b, s in zip(bars, sides):
        mfu = doc[s].get("mfu")  # None: the bench refused a peak measured under load (matmul_peak_gflops.mfu_refused)
        a1.annotate(f"MFU {100 * mfu:.1f}%" if mfu is not None else "MFU not reported",
                    (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=9)
    a1.set_ylabel("training throughput (tokens/s)")
    a1.set_xlabel("implementation")
    a1.set_title(f"ratio Megatron/transformers = {doc['ratio_tokens_per_s_megatron_over_hf']:.2f}")
    for s, name in sides.items():
        st = doc[s]["step_s_all"]
        a2.plot(range(1, len(st) + 1), st, "o-", color=colors[s], label=name)
        a2.set_xticks(range(1, len(st) + 1))
        a3.plot(range(len(doc[s]["losses"])), doc[s]["losses"], "o-" if s == "megatron" else "x--", color=colors[s],
                label=name)
    a2.set_xlabel("timed step (interleaved)")
    a2.set_ylabel("step time (s)")
    a2.set_title("per-step time (shared machine: noisy)")
    a2.legend(fontsize=8, loc="best")
    a3.set_xlabel(f"step ({su.get('warmup_steps', '?')} warm-up + {su.get('timed_steps', '?')} timed)")
    a3.set_ylabel("training loss (nats/token)")
    a3.set_title(f"same numerics: first-step |Δloss| = {doc.get('first_step_loss_abs_diff', float('nan')):.1e}")
    a3.legend(fontsize=8, loc="best")
    la = m.get("load_average_at_start")
    fig.suptitle(f"Training step throughput, tiny MoE ({fl.get('total_params', 0) / 1e6:.1f}M params, "
                 f"{fl.get('active_params', 0) / 1e6:.1f}M active), {su.get('dtype')} · batch {su.get('micro_batch')}"
                 f"x{su.get('seq_length')} tokens · {m.get('cores')} cores"
                 + (f" · load avg {la[0]:.1f}" if la else ""))
    save(fig, "train_throughput", [source(p, doc)])
