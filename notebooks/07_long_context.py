# %% [markdown]
# # Long context: score over length × needle depth, and effective length with and without RoPE scaling
# Reads the long-context summaries written by `eval/01_eval.py` (schemas in eval/README.md): `results/eval/*.json`
# (`eval.stage`, suite `longctx`; `rope` null, or the override of `--rope`), and `eval.longctx` files written by
# eval/01_longctx.py before 01_eval took it over (same summary, at top level), for the grid:
# `grid[length][depth].score` (exact-match %, RULER-style), `effective_length` (longest length scoring ≥
# `threshold`, RULER's 85.6); `results/eval/rope_study.json` (`eval.rope_study`, `make eval-rope`) for the
# RoPE study: per variant (none, linear:F, yarn:F) `effective_length` and `per_length[n].{score, tail_nll}`.

# %%
import numpy as np

from notebooks.common import find_all, load, plt, save, schema, skip, source

docs = []  # (path, doc, label, rope, summary)
for p in find_all("eval/*.json"):
    d = load(p)
    if schema(d) == "eval.stage" and "longctx" in d.get("suites", {}):
        summ, label = d["suites"]["longctx"]["summary"], d.get("stage") or p.stem
    elif schema(d) == "eval.longctx":
        summ, label = d["summary"], "no RoPE scaling"
    else:
        continue
    r = d.get("rope")  # absent from eval.stage files written before 01_eval took --rope
    if r:
        label = "no RoPE scaling" if r["type"] == "none" else f"{r['type']} ×{r['factor']:g}"
    docs.append((p, d, label, r, summ))
print("long-context results:", [(str(p.name), lab) for p, _, lab, _, _ in docs])


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
    skip("results/eval/<stage>.json (suite longctx)")
    print("no figure: longctx_grid")

# %%
# RoPE study: results/eval/rope_study.json (schema eval.rope_study, eval/03_rope_study.py): one checkpoint,
# variants none | linear:F | yarn:F, each {effective_length, per_length {n: {score, tail_nll}}} or {error}
variants, rope_src = [], []
for p in find_all("eval/rope_study.json"):
    d = load(p)
    if schema(d) != "eval.rope_study":
        skip(p, "unrecognised layout (want schema eval.rope_study)")
        continue
    for name, v in d.get("variants", {}).items():
        if "error" in v:
            print(f"rope variant {name} failed in that run: {v['error']}")
            continue
        label = "no RoPE scaling" if name == "none" else name.replace(":", " ×")
        variants.append((label, v["effective_length"], v["per_length"]))
    rope_src.append(source(p, d))
if not variants:  # single-variant files: eval/01_eval.py --rope, or eval.longctx files (none: the baseline)
    for p, d, lab, r, summ in docs:
        if r is not None or schema(d) == "eval.longctx":
            variants.append((lab, summ["effective_length"], summ["per_length"]))
            rope_src.append(source(p, d))
    if not any(lab != "no RoPE scaling" for lab, _, _ in variants):
        variants = []
if variants:
    nll = any(x.get("tail_nll") is not None for _, _, pl in variants for x in pl.values())
    fig, axes = plt.subplots(1, 3 if nll else 2, figsize=(17 if nll else 13, 4.6))
    cmap = plt.get_cmap("tab10")
    ticks = sorted({int(n) for _, _, pl in variants for n in pl})
    for i, (lab, eff, pl) in enumerate(variants):
        L = sorted(pl, key=int)
        axes[0].plot([int(n) for n in L], [pl[n]["score"] for n in L], "o-", color=cmap(i), label=f"{lab} (eff. {eff})")
        if nll:
            axes[2].plot([int(n) for n in L], [pl[n].get("tail_nll") for n in L], "o-", color=cmap(i), label=lab)
    axes[0].axhline(85.6, ls="--", color="gray", label="threshold 85.6")
    for ax in (axes[0], axes[2]) if nll else (axes[0],):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [klabel(n) for n in ticks])
        ax.set_xlabel("context length (tokens, log scale)")
    axes[0].set_ylabel("mean exact-match score (%)")
    axes[0].set_title("Score vs length per RoPE setting")
    axes[0].legend(fontsize=7)
    axes[1].bar(range(len(variants)), [v[1] for v in variants], color=[cmap(i) for i in range(len(variants))])
    axes[1].set_xticks(range(len(variants)), [v[0] for v in variants], rotation=25, fontsize=8)
    axes[1].set_ylabel("effective length (tokens)")
    axes[1].set_xlabel("RoPE scaling")
    axes[1].set_title("Effective length (mean score ≥ 85.6)")
    if nll:
        axes[2].set_ylabel("mean NLL of the prompt's last quarter (nats/token)")
        axes[2].set_title("Reading far positions (lower is better)")
        axes[2].legend(fontsize=7)
    fig.suptitle("RoPE scaling: effective context length with and without scaling")
    save(fig, "longctx_rope_scaling", rope_src)
else:
    print("no figure: longctx_rope_scaling (make eval-rope writes results/eval/rope_study.json)")
