# %% [markdown]
# # Fast vs standard variant: output tokens/s at equal quality
# Reads `results/bench/fast.json` (schema `bench.fast`, `serving/bench_fast.py`, `make bench-fast`): both
# variants in their own vLLM engines, measurements interleaved in one run. `output_tok_per_s[side][batch]
# .median` for side standard, fast (and the quant-only / spec-only ablations when run),
# `ratio_vs_standard[side][batch]`, `mean_acceptance_length[side][batch]` (speculative decoding), and
# `pass_rate[side].pass_rate` on the domains eval split (empty with --no-quality).

# %%
import numpy as np

from notebooks.common import find, load, plt, save, skip, source

p = find("bench/fast.json")
doc = load(p) if p else None
tok = (doc or {}).get("output_tok_per_s")
if doc and not (isinstance(tok, dict) and "standard" in tok and "fast" in tok):
    skip(p, "unrecognised layout (want output_tok_per_s.{standard,fast}[batch].median)")
    doc = None

# %%
if doc:
    sides = ["standard", "fast"] + sorted(s for s in tok if s not in ("standard", "fast"))
    colors = {"standard": "#dd8452", "fast": "#55a868"}
    bs = sorted(tok["standard"], key=int)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1.7, 1]})
    x = np.arange(len(bs))
    w = 0.8 / len(sides)
    for i, s in enumerate(sides):
        ys = [tok[s].get(b, {}).get("median", np.nan) for b in bs]
        a1.bar(x + (i - (len(sides) - 1) / 2) * w, ys, w, color=colors.get(s, plt.get_cmap("Set2")(i + 2)), label=s)
        if s == "fast":
            for j, b in enumerate(bs):
                r = doc.get("ratio_vs_standard", {}).get("fast", {}).get(b)
                acc = (doc.get("mean_acceptance_length", {}).get("fast") or {}).get(b)
                if r is not None:
                    a1.annotate(f"×{r:.2f}" + (f"\nacc {acc:.2f}" if acc else ""),
                                (j + (i - (len(sides) - 1) / 2) * w, ys[j]), ha="center", va="bottom", fontsize=8)
    a1.set_ylim(0, 1.2 * np.nanmax([tok[s].get(b, {}).get("median", np.nan) for s in sides for b in bs]))
    a1.set_xticks(x, bs)
    a1.set_xlabel("batch size (concurrent sequences)")
    a1.set_ylabel("output throughput (tokens/s, median of reps)")
    a1.set_title("Decode throughput (×: fast / standard; acc: mean acceptance length)")
    a1.legend(title="variant", fontsize=8)
    pr = {s: v.get("pass_rate") for s, v in (doc.get("pass_rate") or {}).items() if isinstance(v, dict)}
    pr = {s: v for s, v in pr.items() if v is not None}
    if pr:
        names = [s for s in sides if s in pr]
        a2.bar(names, [100 * pr[s] for s in names], color=[colors.get(s, "#8da0cb") for s in names])
        a2.set_ylabel("pass rate on the domains eval split (%)")
        a2.set_xlabel("variant")
        a2.set_ylim(0, 100)
        d = doc.get("pass_rate_delta_points")
        a2.set_title("Quality" + (f": Δ fast - standard = {d:+.1f} points" if d is not None else ""))
    else:
        a2.set_axis_off()
        a2.set_title("pass rate: not measured in this run (--no-quality)")
    la = (doc.get("load_average") or {}).get("before")
    fig.suptitle("Fast vs standard variant: tokens/s at equal quality"
                 + (f" (load average {la[0]:.1f} on {doc['load_average'].get('cores')} cores: ratios, not absolutes)"
                    if la else ""))
    save(fig, "fast_vs_standard", [source(p, doc)])
else:
    print("no figure: fast_vs_standard")
