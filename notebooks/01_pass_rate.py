# %% [markdown]
# # What post-training unlocks: pass rate per task family, base → SFT → RL
# Reads `results/{base,sft,rl}/eval.json` (schema `eval.quick` from `sft/03_eval.py`, `rl.eval` from
# `rl/02_train.py`: `per_family[family][train|heldout] = {tasks, passed, infra_errors, pass_rate}`).
# Bars are pass rates over the scored tasks (infra errors excluded, as in the eval); error bars are 95%
# Wilson intervals, so small task counts show as wide bars.

# %%
import numpy as np

from notebooks.common import FAMILIES, STAGE_COLORS, find, load, plt, save, source, wilson

stages = {}
for st in ("base", "sft", "rl"):
    p = find(f"{st}/eval.json")
    if p is not None:
        stages[st] = (p, load(p))
print("stages with results:", list(stages))

# %%
if not stages:
    print("no figure: no stage has eval results")
else:
    fams = [f for f in FAMILIES if any(f in d["per_family"] for _, d in stages.values())] + ["all"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), sharey=True)
    width = 0.8 / len(stages)
    for ax, split, title in zip(axes, ("train", "heldout"), ("training domains", "held-out domains")):
        x = np.arange(len(fams))
        for i, (st, (_, d)) in enumerate(stages.items()):
            rates, lo, hi = [], [], []
            for f in fams:
                cell = d["per_family"].get(f, {}).get(split)
                scored = (cell["tasks"] - cell["infra_errors"]) if cell else 0
                if not cell or scored <= 0:
                    rates.append(np.nan), lo.append(0), hi.append(0)
                    continue
                r = cell["passed"] / scored
                a, b = wilson(cell["passed"], scored)
                rates.append(100 * r), lo.append(100 * (r - a)), hi.append(100 * (b - r))
            ax.bar(x + (i - (len(stages) - 1) / 2) * width, rates, width, yerr=[lo, hi], capsize=2,
                   color=STAGE_COLORS[st], label=st.upper() if st != "base" else "base", error_kw={"alpha": 0.6})
        ax.set_xticks(x, fams, rotation=30)
        ax.set_title(f"{title}")
        ax.set_xlabel("task family")
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("pass rate (%)")
    axes[1].legend(title="checkpoint", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for ax in axes:  # "all" is the aggregate, not a family
        ax.axvline(len(fams) - 1.5, color="gray", lw=0.8, ls=":")
    fig.suptitle("Pass rate per task family: base vs SFT vs RL (greedy, multi-turn, verified)")
    save(fig, "pass_rate_by_family", [source(p, d) for p, d in stages.values()])
