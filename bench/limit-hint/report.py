"""Medians of bench/limit-hint/run.sh's limit-hint.csv: a markdown table and a bar plot.
   python3 report.py limit-hint.csv STEM [TITLE]"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
stem = sys.argv[2]
title = sys.argv[3] if len(sys.argv) > 3 else "pgbench search q/s, first search by LIMIT or by scan_batch"
cases = sorted({(int(r["limit"]), int(r["clients"])) for r in rows})
med = {}
for case in cases:
    for h in ("on", "off"):
        xs = [float(r["qps"]) for r in rows if r["limit_hint"] == h and (int(r["limit"]), int(r["clients"])) == case]
        med[(case, h)] = (statistics.median(xs), min(xs), max(xs), len(xs))
lines = ["| LIMIT | clients | hint on: median q/s (min–max) | hint off: median q/s (min–max) | rounds | on ÷ off |",
         "|---|---|---|---|---|---|"]
for case in cases:
    on, off = med[(case, "on")], med[(case, "off")]
    lines.append(f"| {case[0]} | {case[1]} | {on[0]:,.0f} ({on[1]:,.0f}–{on[2]:,.0f}) | "
                 f"{off[0]:,.0f} ({off[1]:,.0f}–{off[2]:,.0f}) | {on[3]} | {on[0] / off[0]:.2f} |")
open(stem + ".md", "w").write("\n".join(lines) + "\n")
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(7, 3.4))
w = 0.38
for i, h in enumerate(("on", "off")):
    ms = [med[(c, h)] for c in cases]
    ax.bar([j + (i - 0.5) * w for j in range(len(cases))], [m[0] for m in ms], w,
           yerr=[[m[0] - m[1] for m in ms], [m[2] - m[0] for m in ms]], capsize=3,
           label=f"gpuindex.limit_hint = {h}")
ax.set_xticks(range(len(cases)), [f"LIMIT {c[0]}, {c[1]} client{'s' if c[1] > 1 else ''}" for c in cases])
ax.set_ylabel("queries/s (median, min-max)")
ax.set_title(title, fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(stem + ".png", dpi=110)
