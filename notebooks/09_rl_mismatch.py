# %% [markdown]
# # The mismatch lab: one source of engine/trainer mismatch at a time, per correction
# Reads `results/rl/experiments/mismatch.json` (schema `rl.experiment.mismatch`, written by
# `rl/02_experiments.py mismatch`, `make rl-mismatch-lab`): per arm `<source>_<correction>_s<S>` (source: `stale<k>`,
# the rollouts k weight versions behind the trainer, `bf16`, the engine in bfloat16 against the float32 trainer,
# `int8`, the engine W8A8 int8, or `flip<p>`, p% of the engine's router decisions forced to flip; correction: `none`,
# `tis`, `mis`, `seq_mis`, `replay` (routing replay); seed S) the mean logprob mismatch of the sampled tokens over the
# training steps (`mismatch_abs_mean`), the share of tokens the correction capped or masked, the reward curve and the
# paired held-out change against the SFT weights (`heldout_delta`). Left: the mismatch per source (dots: seeds x
# corrections). Right: the paired held-out change per arm with its 95% interval over tasks.

# %%
import re
from collections import defaultdict

import numpy as np

from notebooks.common import find, load, plt, save, skip

p = find("rl/experiments/mismatch.json")
doc = load(p) if p else None
mism, delta, shares = defaultdict(list), defaultdict(list), defaultdict(list)
for name, arm in ((doc or {}).get("arms") or {}).items():
    m = re.fullmatch(r"(stale\d+|bf16|int8|flip\d+)_(none|tis|mis|seq_mis|replay)_s(\d+)", name)
    if not m or arm.get("mismatch_abs_mean") is None:
        skip(f"{p}: arm {name}", "unrecognised arm (want <source>_<correction>_s<S> with mismatch_abs_mean)")
        continue
    src, cor = m.group(1), m.group(2)
    mism[src].append(arm["mismatch_abs_mean"])
    shares[(src, cor)].append(100 * ((arm.get("is_masked_frac_mean") or 0) + (arm.get("tis_capped_frac_mean") or 0)))
    d = arm.get("heldout_delta") or {}
    if d.get("delta") is not None and d.get("ci95"):
        delta[(src, cor)].append((100 * d["delta"], [100 * x for x in d["ci95"]]))
print("mismatch |dlogp| per source:", {k: [f"{x:.2e}" for x in v] for k, v in mism.items()})
print("capped or masked tokens (%):", {f"{s}/{c}": [round(x, 2) for x in v] for (s, c), v in shares.items()})
print("paired held-out change (pts):", {f"{s}/{c}": [round(x, 2) for x, _ in v] for (s, c), v in delta.items()})


# %%
def order(src: str) -> tuple:
    if src.startswith("stale"):
        return (0, int(src[5:]))
    return (2, int(src[4:])) if src.startswith("flip") else (1, ["bf16", "int8"].index(src))


if mism:
    srcs = sorted(mism, key=order)
    wide = max(6.0, 0.3 * len(delta))  # the right panel: one column per (source, correction)
    fig, axes = plt.subplots(1, 2 if delta else 1, figsize=(6 + wide if delta else 6, 5.2), squeeze=False,
                             gridspec_kw={"width_ratios": [6, wide]} if delta else None)
    ax = axes[0][0]
    for i, s in enumerate(srcs):
        ax.scatter([i] * len(mism[s]), mism[s], color="#4c72b0", s=16, alpha=0.8)
        ax.plot([i - 0.2, i + 0.2], [np.mean(mism[s])] * 2, color="#4c72b0")
    ax.set_yscale("log")
    ax.set_xticks(range(len(srcs)), srcs)
    ax.set_xlabel("mismatch source (stale<k>: rollouts k versions behind; flip<p>: p% router flips)")
    ax.set_ylabel("mean |trainer - engine| logprob of sampled tokens")
    ax.set_title("Logprob mismatch by source", fontsize=10)
    if delta:
        ax = axes[0][1]
        keys = sorted(delta, key=lambda k: (order(k[0]), ["none", "tis", "mis", "seq_mis", "replay"].index(k[1])))
        for j, k in enumerate(keys):
            for y, ci in delta[k]:
                ax.errorbar(j, y, yerr=[[y - ci[0]], [ci[1] - y]], fmt="o", color="#dd8452", capsize=2, ms=4)
        ax.axhline(0, color="#999999", lw=0.8)
        ax.set_xticks(range(len(keys)), [f"{s} {c}" for s, c in keys], fontsize=7, rotation=90)
        ax.set_ylabel("paired held-out change vs SFT (points)")
        ax.set_title("Held-out change per arm (95% over tasks)", fontsize=10)
    save(fig, "rl_mismatch", [str(p)])
