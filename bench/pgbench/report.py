"""Medians of bench/pgbench/settings-ab.sh's CSV (round, setting, limit, clients, qps; also
   the older limit-hint.csv with limit_hint on/off): a markdown table and a bar plot.
   python3 report.py CSV STEM [TITLE]"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    r.setdefault("setting", r.get("limit_hint"))
stem = sys.argv[2]
title = sys.argv[3] if len(sys.argv) > 3 else "pgbench search q/s"
names = list(dict.fromkeys(r["setting"] for r in rows))
cases = sorted({(int(r["limit"]), int(r["clients"])) for r in rows})
med = {}
for case in cases:
    for h in names:
        xs = [float(r["qps"]) for r in rows if r["setting"] == h and (int(r["limit"]), int(r["clients"])) == case]
        med[(case, h)] = (statistics.median(xs), min(xs), max(xs), len(xs))
a, b = names[0], names[1]
lines = [f"| LIMIT | clients | {a}: median q/s (min–max) | {b}: median q/s (min–max) | rounds | {a} ÷ {b} |",
         "|---|---|---|---|---|---|"]
for case in cases:
    on, off = med[(case, a)], med[(case, b)]
    lines.append(f"| {case[0]} | {case[1]} | {on[0]:,.0f} ({on[1]:,.0f}–{on[2]:,.0f}) | "
                 f"{off[0]:,.0f} ({off[1]:,.0f}–{off[2]:,.0f}) | {on[3]} | {on[0] / off[0]:.2f} |")
open(stem + ".md", "w").write("\n".join(lines) + "\n")
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(7, 3.4))
w = 0.38
for i, h in enumerate(names):
    ms = [med[(c, h)] for c in cases]
    ax.bar([j + (i - 0.5) * w for j in range(len(cases))], [m[0] for m in ms], w,
           yerr=[[m[0] - m[1] for m in ms], [m[2] - m[0] for m in ms]], capsize=3,
           label=h)
ax.set_xticks(range(len(cases)), [f"LIMIT {c[0]}, {c[1]} client{'s' if c[1] > 1 else ''}" for c in cases])
ax.set_ylabel("queries/s (median, min-max)")
ax.set_title(title, fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(stem + ".png", dpi=110)
