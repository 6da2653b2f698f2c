# %% [markdown]
# # Reference panel: the method's reported results next to this repository's regression dimensions
# Left: numbers **as reported by the method** (literature values quoted in the project's issue, not
# measured here): terminal coding 65.7% against 58.2% and 66.4% for the two compared models; financial
# document analysis 64.4. Right: this repository's four regression dimensions (`eval/regression_set.yaml`)
# with the pass rates measured here: from the regression set (`results/eval/<stage>.json` suite
# `regression`, or `results/eval/regression_<stage>.json`) when present, else from the quick eval's
# matching families (`results/<stage>/eval.json`). A tiny CPU model is not comparable in scale; the panel
# shows which of our measurements stands where the method reports its numbers.

# %%
import numpy as np
import yaml

from notebooks.common import ROOT, STAGE_COLORS, RESULTS, find, load, plt, save, schema, skip, source

REPORTED = {  # (label, value): as reported by the method; the compared models are not named in our source
    "terminal coding (%)": [("method", 65.7), ("compared model A", 58.2), ("compared model B", 66.4)],
    "financial document\nanalysis (score)": [("method", 64.4)],
}
reg_set = yaml.safe_load((ROOT / "eval" / "regression_set.yaml").read_text())
DIMS = list(reg_set["dimensions"])
n_tasks = {d: sum(1 for t in reg_set["tasks"] if t["dimension"] == d) for d in DIMS}
LABELS = {"terminal": "terminal coding", "docs": "professional knowledge\n(financial documents)",
          "scene": "3D / scene building", "agent": "agent tasks"}


def regression_summary(stage):
    """Per-dimension summary of the regression set for a stage, from whichever eval file has it."""
    for rel in (f"eval/{stage}.json", f"eval/regression_{stage}.json"):
        for base in (RESULTS, RESULTS / "reference"):
            p = base / rel
            if p.exists():
                d = load(p)
                if schema(d) == "eval.stage" and "regression" in d.get("suites", {}):
                    return p, d, d["suites"]["regression"]["summary"]
                if schema(d) == "eval.regression":  # the regression-only script's files, before eval/01_eval.py
                    return p, d, d["summary"]
    return None


# %%
measured, sources, how = {}, [], None
for st in ("base", "sft", "rl", "fast"):
    r = regression_summary(st)
    if r:
        p, d, summ = r
        measured[st] = {k: (100 * summ[k]["pass_rate"] if summ.get(k, {}).get("pass_rate") is not None else np.nan)
                        for k in DIMS}
        sources.append(source(p, d))
        how = "regression set"
if not measured:
    skip(RESULTS / "eval/<stage>.json (regression suite)")
    for st in ("base", "sft", "rl"):
        p = find(f"{st}/eval.json")
        if p is None:
            continue
        d = load(p)
        row = {}
        for k in DIMS:
            cells = [c for c in d["per_family"].get(k, {}).values()]
            scored = sum(c["tasks"] - c["infra_errors"] for c in cells)
            row[k] = 100 * sum(c["passed"] for c in cells) / scored if scored else np.nan
        measured[st] = row
        sources.append(source(p, d))
        how = "quick eval, matching families, train + held-out domains"

# %%
fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [1, 1.6]})
xt, xl = [], []
x = 0
palette = {"method": "#c44e52", "compared model A": "#8c8c8c", "compared model B": "#bdbdbd"}
seen = set()
for bench, vals in REPORTED.items():
    start = x
    for lab, v in vals:
        a1.bar(x, v, 0.8, color=palette[lab], label=lab if lab not in seen else None)
        a1.annotate(f"{v:.1f}", (x, v), ha="center", va="bottom", fontsize=9)
        seen.add(lab)
        x += 1
    xt.append((start + x - 1) / 2)
    xl.append(bench)
    x += 0.8
a1.set_xticks(xt, xl)
a1.set_ylim(0, 100)
a1.set_ylabel("reported score (% pass, or benchmark score)")
a1.set_xlabel("benchmark (as reported by the method)")
a1.set_title("Method: reported results (not measured here)")
a1.legend(fontsize=8, loc="upper right")

xs = np.arange(len(DIMS))
if measured:
    w = 0.8 / len(measured)
    for i, (st, row) in enumerate(measured.items()):
        a2.bar(xs + (i - (len(measured) - 1) / 2) * w, [row[k] for k in DIMS], w, color=STAGE_COLORS[st],
               label=st if st == "base" else st.upper())
    a2.legend(title="checkpoint (measured here)", fontsize=8)
    a2.set_title(f"This repository: pass rate per regression dimension ({how})", fontsize=9)
else:
    a2.set_title("This repository: regression dimensions (no measured results yet)", fontsize=9)
a2.set_xlim(-0.6, len(DIMS) - 0.4)
a2.set_xticks(xs, [f"{LABELS.get(k, k)}\n[{n_tasks[k]} regression tasks]" for k in DIMS], fontsize=8)
a2.set_ylim(0, 100)
a2.set_ylabel("pass rate (%)")
a2.set_xlabel("evaluation dimension")
fig.suptitle("Reported results of the method vs this repository's evaluation dimensions (tiny CPU model: not comparable in scale)")
save(fig, "reference_panel", ["reported values: the method's publication, quoted in issue 8",
                              "eval/regression_set.yaml"] + sources)
