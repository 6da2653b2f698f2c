# %% [markdown]
# # Long context: score over length × needle depth, and effective length with and without RoPE scaling
# Reads the long-context summaries written by `eval/`: `results/eval/<stage>.json` (schema `eval.stage`,
# suite `longctx`) and `results/eval/longctx_*.json` (schema `eval.longctx`; `rope` names the RoPE
# override, null = none). Summary fields: `grid[length][depth].score` (exact-match %, RULER-style),
# `per_length[length].score`, `effective_length` (longest length scoring ≥ `threshold`, RULER's 85.6).

# %%
import numpy as np

from notebooks.common import find_all, load, plt, save, schema, skip, source

docs = []  # (path, doc, label, rope, summary)
for p in find_all("eval/*.json"):
    d = load(p)
    if schema(d) == "eval.stage" and "longctx" in d.get("suites", {}):
        docs.append((p, d, d.get("stage") or p.stem, None, d["suites"]["longctx"]["summary"]))
    elif schema(d) == "eval.longctx":
        r = d.get("rope")
        label = "no RoPE scaling" if not r else f"{r['type']} ×{r['factor']:g}"
        docs.append((p, d, label, r, d["summary"]))
print("long-context results:", [(str(p.name), lab) for p, _, lab, _, _ in docs])


def lengths_of(summ):
    return sorted(summ["per_length"], key=int)


def klabel(n):
    n = int(n)
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


# %%
grids = [x for x in docs if x[3] is None and x[4].get("grid")]
if grids:
    order = {"rl": 0, "fast": 1, "sft": 2, "base": 3}
    p, d, lab, _, summ = sorted(grids, key=lambda x: order.get(x[2], 9))[0]
    L = sorted(summ["grid"], key=int)
    D = sorted({dp for v in summ["grid"].values() for dp in v}, key=float)
    M = np.array([[(summ["grid"][n].get(dp) or {}).get("score") for dp in D] for n in L], dtype=float)
    fig, ax = plt.subplots(figsize=(max(7.5, 1.1 * len(D) + 3), 0.5 * len(L) + 3))
    im = ax.imshow(M, vmin=0, vmax=100, cmap="viridis", aspect="auto", origin="lower")
    for i in range(len(L)):
        for j in range(len(D)):
            if not np.isnan(M[i, j]):
                ax.text(j, i, f"{M[i, j]:.0f}", ha="center", va="center", fontsize=8,
                        color="white" if M[i, j] < 60 else "black")
    ax.set_xticks(range(len(D)), [f"{float(x):.0%}" for x in D])
    ax.set_yticks(range(len(L)), [klabel(n) for n in L])
    ax.set_xlabel("needle depth (position in the context, % of length)")
    ax.set_ylabel("context length (tokens)")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="exact-match score (%)")
    ax.set_title(f"Long-context score (RULER-style), {lab}\neffective length {summ['effective_length']} tokens "
                 f"(mean score ≥ {summ['threshold']})")
    save(fig, "longctx_grid", [source(p, d)])
else:
    skip("results/eval/<stage>.json (suite longctx) or results/eval/longctx_*.json")
    print("no figure: longctx_grid")

# %%
rope = [x for x in docs if x[4].get("per_length")]
if any(x[3] for x in rope):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.4), gridspec_kw={"width_ratios": [1.6, 1]})
    cmap = plt.get_cmap("tab10")
    variants = sorted(rope, key=lambda x: (x[3] is not None, (x[3] or {}).get("type", ""), (x[3] or {}).get("factor", 0)))
    for i, (p, d, lab, r, summ) in enumerate(variants):
        L = lengths_of(summ)
        a1.plot([int(n) for n in L], [summ["per_length"][n]["score"] for n in L], "o-", color=cmap(i),
                label=f"{lab} (eff. {summ['effective_length']})")
    thr = variants[0][4]["threshold"]
    a1.axhline(thr, ls="--", color="gray", label=f"threshold {thr}")
    a1.set_xscale("log", base=2)
    ticks = sorted({int(n) for x in variants for n in x[4]["per_length"]})
    a1.set_xticks(ticks, [klabel(n) for n in ticks])
    a1.set_xlabel("context length (tokens, log scale)")
    a1.set_ylabel("mean exact-match score (%)")
    a1.set_title("Score vs length per RoPE setting")
    a1.legend(fontsize=7)
    a2.bar(range(len(variants)), [x[4]["effective_length"] for x in variants], color=[cmap(i) for i in range(len(variants))])
    a2.set_xticks(range(len(variants)), [x[2] for x in variants], rotation=20)
    a2.set_ylabel("effective length (tokens)")
    a2.set_xlabel("RoPE scaling")
    a2.set_title(f"Effective length (score ≥ {thr})")
    fig.suptitle("RoPE scaling: effective context length with and without scaling")
    save(fig, "longctx_rope_scaling", [source(x[0], x[1]) for x in variants])
else:
    skip("results/eval/longctx_*.json with a rope override (eval RoPE study)")
    print("no figure: longctx_rope_scaling")
