# %% [markdown]
# # Generalization from domain coverage: held-out pass rate vs number of RL training domains
# Reads `results/rl/experiments/domain_scaling.json` (schema `rl.experiment.domain_scaling`, written by
# `rl/02_experiments.py domain_scaling`, `make rl-scaling`): per arm `k<K>_s<S>` (K training domains or
# `all`, equal step budget, seed S) the held-out pass rate at the end (`heldout_pass_rate`) and the parent's
# under the same protocol before training (`heldout_pass_rate_at_start`), plus the paired change
# (`heldout_delta`). Dots are seeds (bars: each run's 95% Wilson interval over held-out tasks), the line
# their mean, the band their min-max spread; the dashed line is the SFT starting point measured by the same
# eval (mean over arms). "all" sits at its real number of training domains.

# %%
import re
from collections import defaultdict

import numpy as np

from notebooks.common import find, load, plt, save, skip, source

runs, cis, deltas, start, n_all = defaultdict(list), defaultdict(list), defaultdict(list), [], []
p = find("rl/experiments/domain_scaling.json")
doc = load(p) if p else None
for name, arm in ((doc or {}).get("arms") or {}).items():
    m = re.fullmatch(r"k(\d+|all)_s(\d+)", name)
    if not m or arm.get("heldout_pass_rate") is None:
        skip(f"{p}: arm {name}", "unrecognised arm (want k<K>_s<S> with heldout_pass_rate)")
        continue
    k = m.group(1)
    runs[k].append(100 * arm["heldout_pass_rate"])
    ci = (((arm.get("eval") or {}).get("all") or {}).get("heldout") or {}).get("ci95")
    cis[k].append([100 * x for x in ci] if ci else None)
    d = arm.get("heldout_delta") or {}
    if d.get("delta") is not None and d.get("ci95"):
        deltas[k].append((100 * d["delta"], [100 * x for x in d["ci95"]]))
    if k == "all" and isinstance(arm.get("domains"), int):
        n_all.append(arm["domains"])  # how many training domains "all" was in that run
    if arm.get("heldout_pass_rate_at_start") is not None:
        start.append(100 * arm["heldout_pass_rate_at_start"])
print({k: v for k, v in runs.items()}, "start:", start)
print("paired change (pts):", {k: [round(x, 2) for x, _ in v] for k, v in deltas.items()})


# %%
def runs_with_bars(ax, pos, names, ks, vals, bars, label):
    """Seed dots with each run's 95% interval, their mean as a line, the seed min-max as a band; log2 x axis."""
    xs = [pos[k] for k in ks]
    ax.fill_between(xs, [min(vals[k]) for k in ks], [max(vals[k]) for k in ks], color="#dd8452", alpha=0.2,
                    label="seed spread (min-max)")
    ax.plot(xs, [np.mean(vals[k]) for k in ks], "o-", color="#dd8452", label="RL, mean over seeds")
    for k in ks:
        for i, (y, ci) in enumerate(zip(vals[k], bars[k])):
            x = pos[k] * (1 + 0.05 * (i - (len(vals[k]) - 1) / 2))  # seeds side by side
            ax.scatter([x], [y], color="#dd8452", s=12, alpha=0.8)
            if ci:
                ax.errorbar(x, y, yerr=[[y - ci[0]], [ci[1] - y]], color="#dd8452", alpha=0.35, lw=1, capsize=2,
                            label=label if k == ks[0] and i == 0 else None)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [names[k] for k in ks])
    ax.minorticks_off()
    ax.set_xlabel("number of RL training domains (log scale)")


if runs:
    ks = sorted((k for k in runs if k != "all"), key=int)
    pos = {k: int(k) for k in ks}
    names = {k: k for k in ks}
    if "all" in runs:  # at its real domain count when the arms recorded it, else one doubling past the largest k
        big = max(pos.values(), default=1)
        pos["all"] = max(n_all) if n_all and max(n_all) > big else 2 * big
        ks.append("all")
        names["all"] = f"all ({max(n_all)})" if n_all else "all"
    dks = [k for k in ks if deltas.get(k)]
    fig, axes = plt.subplots(1, 2 if dks else 1, figsize=(11 if dks else 7.5, 4.6), squeeze=False)
    ax = axes[0][0]
    runs_with_bars(ax, pos, names, ks, runs, cis, "one run's 95% interval (Wilson, tasks)")
    if start:
        ax.axhline(np.mean(start), ls="--", color="#4c72b0", label="SFT starting point (same eval)")
    ax.set_ylabel("held-out pass rate (%)")
    ax.set_title("Held-out pass rate after RL", fontsize=10)
    ax.legend(fontsize=8)
    if dks:  # the paired change on the same held-out tasks: far tighter than comparing two rates
        ax = axes[0][1]
        runs_with_bars(ax, pos, names, dks, {k: [x for x, _ in deltas[k]] for k in dks},
                       {k: [c for _, c in deltas[k]] for k in dks}, "one run's 95% interval (paired, tasks)")
        ax.axhline(0, color="#333333", lw=0.8)
        ax.set_ylabel("change vs SFT (percentage points)")
        ax.set_title("Paired change on the same held-out tasks", fontsize=10)
        ax.legend(fontsize=8)
    n_seeds = max(len(v) for v in runs.values())
    fig.suptitle(f"Held-out domains vs RL domain coverage (equal step budget, {n_seeds} seed(s), recipe "
                 f"{doc.get('recipe', '?')})", fontsize=11)
    save(fig, "rl_domain_scaling", [source(p, doc)])
else:
    print("no figure: rl_domain_scaling")
