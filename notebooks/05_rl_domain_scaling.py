# %% [markdown]
# # Generalization from domain coverage: held-out pass rate vs number of RL training domains
# Reads `results/rl/experiments/domains_k<K>_seed<S>/eval.json` (schema `rl.eval`, written by the RL
# domain-scaling experiment: K training domains, equal step budget, seed S; K may be `all`), the
# held-out pass rate over all families (`per_family.all.heldout`). Dots are seeds, the line their mean,
# the band their min-max spread; the dashed line is the SFT starting point (`results/sft/eval.json`).

# %%
import re
from collections import defaultdict

import numpy as np

from notebooks.common import RESULTS, find, find_all, load, plt, save, skip, source

runs = defaultdict(list)
sources = []
for p in find_all("rl/experiments/domains_k*_seed*/eval.json"):
    m = re.fullmatch(r"domains_k(\d+|all)_seed(\d+)", p.parent.name)
    cell = load(p).get("per_family", {}).get("all", {}).get("heldout") if m else None
    if not cell or cell.get("pass_rate") is None:
        skip(p, "unrecognised layout (want per_family.all.heldout.pass_rate)")
        continue
    runs[m.group(1)].append(100 * cell["pass_rate"])
    sources.append(str(p.parent.name))

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
    sft = find("sft/eval.json")
    if sft:
        c = load(sft)["per_family"].get("all", {}).get("heldout", {})
        if c.get("pass_rate") is not None:
            ax.axhline(100 * c["pass_rate"], ls="--", color="#4c72b0", label="SFT starting point")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, ks)
    ax.set_xlabel("number of RL training domains (log scale)")
    ax.set_ylabel("held-out pass rate (%)")
    ax.set_title("Held-out pass rate vs RL domain coverage (equal step budget)")
    ax.legend(fontsize=8)
    save(fig, "rl_domain_scaling", [f"{RESULTS / 'rl/experiments'}: " + ", ".join(sorted(sources))])
else:
    print("no figure: rl_domain_scaling")
