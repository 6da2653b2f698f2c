# %% [markdown]
# # Sandbox: cold-start latency per isolation tier, throughput by concurrency
# Reads `results/bench/sandbox.json` (schema `bench.sandbox`, written by `python -m sandbox.bench`):
# per tier the end-to-end latency of `python3 -c print(1)` against a plain subprocess measured in the
# same run; tasks per second at concurrency 1/2/4/8 for the best tier against plain subprocesses.

# %%
import numpy as np

from notebooks.common import find, load, plt, save, source

p = find("bench/sandbox.json")
doc = load(p) if p else None

# %%
if doc:
    lat = {t: v for t, v in doc["latency"].items() if v.get("available")}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.4))
    tiers = list(lat)
    x = np.arange(len(tiers))
    for off, key, label, color in ((-0.2, "end_to_end", "sandboxed", "#4c72b0"),
                                   (0.2, "plain_subprocess", "plain subprocess (baseline)", "#9e9e9e")):
        p50 = [lat[t][key]["p50_ms"] for t in tiers]
        p99 = [lat[t][key]["p99_ms"] for t in tiers]
        a1.bar(x + off, p50, 0.4, color=color, label=f"{label}: p50")
        a1.scatter(x + off, p99, marker="_", s=300, color="black", zorder=3,
                   label="p99" if key == "plain_subprocess" else None)
    a1.set_xticks(x, tiers)
    a1.set_xlabel("isolation tier")
    a1.set_ylabel("latency per task (ms)")
    a1.set_title(f"Cold start of `{doc.get('task', 'task')}` (n={lat[tiers[0]]['end_to_end']['n']} per tier)")
    a1.legend(fontsize=8)
    thr = doc["throughput"]
    conc = sorted(thr, key=int)
    a2.plot([int(c) for c in conc], [thr[c]["tasks_per_s"] for c in conc], "o-", color="#4c72b0",
            label=f"sandboxed ({thr[conc[0]]['tier']})")
    a2.plot([int(c) for c in conc], [thr[c]["plain_subprocess_tasks_per_s"] for c in conc], "s--", color="#9e9e9e",
            label="plain subprocess (baseline)")
    a2.set_xscale("log", base=2)
    a2.set_xticks([int(c) for c in conc], conc)
    a2.set_xlabel("concurrent tasks (pool slots)")
    a2.set_ylabel("throughput (tasks/s)")
    a2.set_title(f"Throughput, {thr[conc[0]]['tasks']} tasks per point")
    a2.legend(fontsize=8)
    m = doc.get("machine", {})
    load_avg = m.get("loadavg_at_start") or m.get("load_average_at_start")
    note = f" (load average at start {load_avg[0]:.1f} on {m.get('cores')} cores: shared machine)" if load_avg else ""
    fig.suptitle("Sandbox latency and throughput by tier and concurrency" + note)
    save(fig, "sandbox_latency_throughput", [source(p, doc)])
