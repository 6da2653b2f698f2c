# %% [markdown]
# # RL training curves: pass rate per family, zero-variance groups, scheduler ablation
# Reads `results/rl/metrics.jsonl` (one line per step from `rl/01_train.py`: `step`, `pass_rate`,
# `per_family[f].pass_rate`, `zero_var_frac` = fraction of sampled groups whose rewards were all equal,
# i.e. no gradient) and, for the ablation, `results/rl/experiments/scheduler/<mode>_s<S>/metrics.jsonl`
# (`rl/02_experiments.py scheduler`, `make rl-sched-ablation`: uniform sampling vs the pass-rate-aware
# scheduler at equal steps). Curves are moving averages.

# %%
import re
from collections import defaultdict

import numpy as np

from notebooks.common import FAMILIES, find, find_all, load_jsonl, plt, save, source


def smooth(y, w=5):
    y = np.asarray(y, dtype=float)
    out = np.full_like(y, np.nan)
    for i in range(len(y)):
        win = y[max(0, i - w + 1):i + 1]
        win = win[~np.isnan(win)]
        out[i] = win.mean() if len(win) else np.nan
    return out


p = find("rl/metrics.jsonl")
rows = load_jsonl(p) if p else []

# %%
if rows:
    steps = [r["step"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.4))
    fams = [f for f in FAMILIES if any(f in r.get("per_family", {}) for r in rows)]
    cmap = plt.get_cmap("tab10")
    for i, f in enumerate(fams):
        y = [(r["per_family"].get(f) or {}).get("pass_rate") for r in rows]
        y = [np.nan if v is None else 100 * v for v in y]
        a1.plot(steps, smooth(y), color=cmap(i), label=f)
    a1.plot(steps, smooth([100 * r["pass_rate"] for r in rows]), color="black", lw=2, label="all")
    a1.set_xlabel("RL step")
    a1.set_ylabel("rollout pass rate (%, moving avg of 5 steps)")
    a1.set_title("Training pass rate per family")
    a1.legend(fontsize=7, ncol=2)
    a2.plot(steps, [100 * r["zero_var_frac"] for r in rows], color="#c44e52", alpha=0.35, label="per step")
    a2.plot(steps, smooth([100 * r["zero_var_frac"] for r in rows]), color="#c44e52", label="moving avg (5)")
    a2.set_xlabel("RL step")
    a2.set_ylabel("zero-variance groups (% of sampled groups)")
    a2.set_title("Groups with no learning signal (all rewards equal)")
    a2.set_ylim(0, 100)
    a2.legend(fontsize=8)
    fig.suptitle("RL training curves")
    save(fig, "rl_curves", [source(p)])
else:
    print("no figure: rl_curves")

# %%
runs = defaultdict(list)
for q in find_all("rl/experiments/scheduler/*_s*/metrics.jsonl"):  # rl/02_experiments.py scheduler: <mode>_s<S>/
    m = re.fullmatch(r"(.+)_s(\d+)", q.parent.name)
    if m:
        runs[m.group(1)].append(load_jsonl(q))
if runs:
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for i, (name, seeds) in enumerate(sorted(runs.items())):
        n = min(len(s) for s in seeds)
        curves = np.array([smooth([100 * r["pass_rate"] for r in s[:n]]) for s in seeds])
        x = [r["step"] for r in seeds[0][:n]]
        ax.plot(x, curves.mean(0), color=plt.get_cmap("tab10")(i), label=f"{name} ({len(seeds)} seeds)")
        if len(seeds) > 1:
            ax.fill_between(x, curves.min(0), curves.max(0), color=plt.get_cmap("tab10")(i), alpha=0.2)
    ax.set_xlabel("RL step")
    ax.set_ylabel("rollout pass rate (%, moving avg of 5 steps)")
    ax.set_title("Scheduler ablation: uniform vs pass-rate-aware sampling (equal steps)")
    ax.legend(fontsize=8, title="task scheduler")
    save(fig, "rl_scheduler_ablation", ["results/rl/experiments/scheduler/<mode>_s<seed>/metrics.jsonl"])
else:
    print("no figure: rl_scheduler_ablation")
