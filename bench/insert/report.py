"""Medians of bench/insert/run.sh's CSV: a markdown table and a bar plot."""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
stem, note = sys.argv[2], sys.argv[3]
med = {}
for v in sorted({r["variant"] for r in rows}, reverse=True):
    for e in ("none", "gpuivf", "ivfflat"):
        xs = [float(r["latency_ms"]) for r in rows
              if r["variant"] == v and r["engine"] == e and r["latency_ms"]]
        if xs:
            med[(v, e)] = (statistics.median(xs), min(xs), max(xs), len(xs))
lines = [f"# Single-row INSERT latency (pgbench)", "", note, "",
         "| gpuindex.so | table | median ms | min | max | runs | inserts/s | gpuivf ÷ IVFFlat latency |",
         "|---|---|---|---|---|---|---|---|"]
for (v, e), (m, lo, hi, k) in med.items():
    ratio = ""
    if e == "gpuivf" and (v, "ivfflat") in med:
        ratio = f"{m / med[(v, 'ivfflat')][0]:.2f}"
    name = {"none": "no index", "gpuivf": "gpuivf", "ivfflat": "IVFFlat"}[e]
    lines.append(f"| {v} | {name} | {m:.3f} | {lo:.3f} | {hi:.3f} | {k} | {1000 / m:,.0f} | {ratio} |")
if ("old", "gpuivf") in med and ("new", "gpuivf") in med:
    lines += ["", f"gpuivf new ÷ old latency: {med[('new', 'gpuivf')][0] / med[('old', 'gpuivf')][0]:.2f}"]
open(stem + ".md", "w").write("\n".join(lines) + "\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(med)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([f"{v}\n{e}" for v, e in keys], [med[k][0] for k in keys],
           yerr=[[med[k][0] - med[k][1] for k in keys], [med[k][2] - med[k][0] for k in keys]],
           capsize=3)
    ax.set_ylabel("ms per INSERT (median, min-max)")
    ax.set_title("Single-row INSERT latency")
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
except ImportError:
    pass
