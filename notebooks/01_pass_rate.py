# %% [markdown]
# # What post-training unlocks: pass rate per task family, base → SFT → RL
# Reads `results/{base,sft,rl}/eval.json` (schema `eval.quick` from `sft/03_eval.py`, `rl.eval` from
# `rl/01_train.py`: `per_family[family][train|heldout] = {tasks, passed, infra_errors, pass_rate}`).
# Bars are pass rates over the scored tasks (infra errors excluded, as in the eval); error bars are 95%
# Wilson intervals, so small task counts show as wide bars.
# An RL eval with a sampled protocol (`protocol.samples > 0`: n completions per task at a temperature, the
# SFT weights evaluated at step 0 on the same items and seeds, `per_family_at_start`) is not comparable with
# the greedy quick evals: it gets its own panel, SFT (start) vs RL (end), with the paired change per task
# (`paired_delta`, bootstrap 95% interval) in the panel title.

# %%
import numpy as np

from notebooks.common import FAMILIES, STAGE_COLORS, find, load, plt, save, source, wilson

stages, sampled = {}, None
for st in ("base", "sft", "rl"):
    p = find(f"{st}/eval.json")
    if p is None:
        continue
    d = load(p)
    if st == "rl" and (d.get("protocol") or {}).get("samples", 0) > 0:
        sampled = (p, d)
    else:
        stages[st] = (p, d)
print("greedy stages:", list(stages), "| sampled RL eval:", sampled is not None)


def bars(ax, x, i, n, cells, color, label):
    """Bars of pass rate (%) at x for the cells (dict or None) with Wilson or stored ci95 error bars."""
    rates, lo, hi = [], [], []
    for cell in cells:
        scored = (cell["tasks"] - cell["infra_errors"]) if cell else 0
        if not cell or scored <= 0:
            rates.append(np.nan), lo.append(0), hi.append(0)
            continue
        if "samples" in cell:  # sampled protocol: pass rate over samples, interval with tasks as n (stored)
            r, (a, b) = cell["pass_rate"], cell["ci95"]
        else:
            r = cell["passed"] / scored
            a, b = wilson(cell["passed"], scored)
        rates.append(100 * r), lo.append(100 * max(0.0, r - a)), hi.append(100 * max(0.0, b - r))
    width = 0.8 / n
    ax.bar(x + (i - (n - 1) / 2) * width, rates, width, yerr=[lo, hi], capsize=2, color=color, label=label,
           error_kw={"alpha": 0.6})
    return [r + h for r, h in zip(rates, hi) if r == r]  # bar tops with their error bars (for the y range)


# %%
if not stages and sampled is None:
    print("no figure: no stage has eval results")
else:
    ncol = (2 if stages else 0) + (1 if sampled else 0)
    fig, axes = plt.subplots(1, ncol, figsize=(6.5 * ncol, 4.6), squeeze=False)
    axes = list(axes[0])
    if stages:
        fams = [f for f in FAMILIES if any(f in d["per_family"] for _, d in stages.values())] + ["all"]
        for ax, split, title in zip(axes[:2], ("train", "heldout"), ("training domains", "held-out domains")):
            x = np.arange(len(fams))
            for i, (st, (_, d)) in enumerate(stages.items()):
                bars(ax, x, i, len(stages), [d["per_family"].get(f, {}).get(split) for f in fams],
                     STAGE_COLORS[st], st.upper() if st != "base" else "base")
            ax.set_xticks(x, fams, rotation=30)
            ax.set_title(f"{title}, greedy")
            ax.set_xlabel("task family")
            ax.set_ylim(0, 105)
            ax.axvline(len(fams) - 1.5, color="gray", lw=0.8, ls=":")  # "all" is the aggregate, not a family
        axes[0].set_ylabel("pass rate (%)")
        axes[1].legend(title="checkpoint", loc="upper right")
    if sampled:
        ax = axes[-1]
        p, d = sampled
        proto, split = d["protocol"], (d["protocol"].get("splits") or ["heldout"])[0]
        fams = [f for f in FAMILIES if f in d["per_family"]] + ["all"]
        x = np.arange(len(fams))
        top = bars(ax, x, 0, 2, [d["per_family_at_start"].get(f, {}).get(split) for f in fams],
                   STAGE_COLORS["sft"], "SFT (RL step 0)")
        top += bars(ax, x, 1, 2, [d["per_family"].get(f, {}).get(split) for f in fams],
                    STAGE_COLORS["rl"], f"RL (step {d.get('steps', '?')})")
        pd = (d.get("paired_delta") or {}).get("all", {}).get(split)
        delta = (f"\npaired Δ {100 * pd['delta']:+.1f} pts, 95% [{100 * pd['ci95'][0]:+.1f}, "
                 f"{100 * pd['ci95'][1]:+.1f}] over {pd['tasks']} tasks") if pd else ""
        ax.set_xticks(x, fams, rotation=30)
        ax.set_title(f"{split} domains, {proto['samples']} samples/task at T={proto['temperature']:g}{delta}",
                     fontsize=10)
        ax.set_xlabel("task family (those RL trained on)")
        ax.set_ylabel("pass@1 over samples (%)")
        ax.set_ylim(0, min(105.0, max([5.0] + top) * 1.25))  # small rates: a zoomed axis, labelled in %
        ax.axvline(len(fams) - 1.5, color="gray", lw=0.8, ls=":")
        ax.legend(title="weights", loc="upper left")
    fig.suptitle("Pass rate per task family: base vs SFT vs RL (multi-turn, verified)")
    srcs = [source(p, d) for p, d in stages.values()] + ([source(*sampled)] if sampled else [])
    save(fig, "pass_rate_by_family", srcs)
