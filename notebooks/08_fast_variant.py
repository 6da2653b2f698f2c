# %% [markdown]
# # Fast vs standard variant: output tokens/s at equal quality
# Reads `results/bench/fast.json` (`make bench-fast`, serving/): output tok/s of the standard and the fast
# variant (quantized + speculative decoding) per batch size, measured in the same run, and the regression
# pass rate of both. Expected layout: `per_batch[<batch>] = {standard_tok_s, fast_tok_s}` and
# `pass_rate = {standard, fast}` (other layouts are reported, never guessed).

# %%
import numpy as np

from notebooks.common import find, load, plt, save, skip, source

p = find("bench/fast.json")
doc = load(p) if p else None
per = (doc or {}).get("per_batch")
if doc and not (isinstance(per, dict) and all({"standard_tok_s", "fast_tok_s"} <= set(v) for v in per.values())):
    skip(p, "unrecognised layout (want per_batch[b].standard_tok_s / fast_tok_s)")
    doc = None

# %%
if doc:
    bs = sorted(per, key=int)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1.6, 1]})
    x = np.arange(len(bs))
    a1.bar(x - 0.2, [per[b]["standard_tok_s"] for b in bs], 0.4, color="#dd8452", label="standard")
    a1.bar(x + 0.2, [per[b]["fast_tok_s"] for b in bs], 0.4, color="#55a868", label="fast")
    for i, b in enumerate(bs):
        a1.annotate(f"×{per[b]['fast_tok_s'] / per[b]['standard_tok_s']:.2f}", (i + 0.2, per[b]["fast_tok_s"]),
                    ha="center", va="bottom", fontsize=9)
    a1.set_xticks(x, bs)
    a1.set_xlabel("batch size (concurrent requests)")
    a1.set_ylabel("output throughput (tokens/s)")
    a1.set_title("Decode throughput, same run")
    a1.legend()
    pr = doc.get("pass_rate") or {}
    if pr.get("standard") is not None and pr.get("fast") is not None:
        a2.bar(["standard", "fast"], [100 * pr["standard"], 100 * pr["fast"]], color=["#dd8452", "#55a868"])
        a2.set_ylabel("regression-set pass rate (%)")
        a2.set_xlabel("variant")
        a2.set_ylim(0, 100)
        a2.set_title(f"Quality: Δ = {100 * (pr['fast'] - pr['standard']):+.1f} points")
    else:
        a2.set_axis_off()
        a2.set_title("pass rate: not in this results file")
    fig.suptitle("Fast vs standard variant: tokens/s at equal quality")
    save(fig, "fast_vs_standard", [source(p, doc)])
else:
    print("no figure: fast_vs_standard")
