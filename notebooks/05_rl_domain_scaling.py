# %% [markdown]
# # Generalization from domain coverage: held-out pass rate vs number of RL training domains
# Reads `results/rl/experiments/domain_scaling.json` (schema `rl.experiment.domain_scaling`, written by
# `rl/03_experiments.py domain_scaling`, `make rl-scaling`): per arm `k<K>_s<S>` (K training domains or
# `all`, equal step budget, seed S) the held-out pass rate at the end (`heldout_pass_rate`) and the parent's
# under the same protocol before training (`heldout_pass_rate_at_start`), plus the paired change
# (`heldout_delta`). Dots are seeds, the line their mean, the band their min-max spread; the dashed line
# is the SFT starting point measured by the same eval (mean over arms).

# %%
import re
from collections import defaultdict

import numpy as np

from notebooks.common import find, load, plt, save, skip, source

runs, start = defaultdict(list), []
p = find("rl/experiments/domain_scaling.json")
doc = load(p) if p else None
for name, arm in ((doc or {}).get("arms") or {}).items():
    m = re.fullmatch(r"k(\d+|all)_s(\d+)", name)
    if not m or arm.get("heldout_pass_rate") is None:
        skip(f"{p}: arm {name}", "unrecognised arm (want k<K>_s<S> with heldout_pass_rate)")
        continue
    runs[m.group(1)].append(100 * arm["heldout_pass_rate"])
    if arm.get("heldout_pass_rate_at_start") is not None:
        start.append(100 * arm["heldout_pass_rate_at_start"])
print({k: v for k, v in runs.items()}, "start:", start)

# %%
if runs:
    ks = sorted((k for k in runs if k != "all"), key=int)
    pos = {k: int(k) for k in ks}
    if "all" in runs:
        pos["all"] = 2 * max(pos.values(), default=1)
        ks.append("all")
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    xs = [pos[k] for k in ks]
    means = [np.mean(runs[k]) for k in ks]
    ax.fill_between(xs, [min(runs[k]) for k in ks], [max(runs[k]) for k in ks], color="#dd8452", alpha=0.2,
                    label="seed spread (min-max)")
    ax.plot(xs, means, "o-", color="#dd8452", label="RL, mean over seeds")
    for k in ks:
        ax.scatter([pos[k]] * len(runs[k]), runs[k], color="#dd8452", s=12, alpha=0.7)
    if start:
        ax.axhline(np.mean(start), ls="--", color="#4c72b0", label="SFT starting point (same eval)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, ks)
    ax.set_xlabel("number of RL training domains (log scale)")
    ax.set_ylabel("held-out pass rate (%)")
    ax.set_title(f"Held-out pass rate vs RL domain coverage (equal step budget, recipe {doc.get('recipe', '?')})",
                 fontsize=10)
    ax.legend(fontsize=8)
    save(fig, "rl_domain_scaling", [source(p, doc)])
else:
    print("no figure: rl_domain_scaling")
