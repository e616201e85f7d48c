"""Medians of bench/polling/run.sh's spin.csv: a markdown table and a bar plot."""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
stem = sys.argv[2]
cfgs = sorted({(int(r["service_spin_us"]), int(r["client_spin_us"])) for r in rows})
clients = sorted({int(r["clients"]) for r in rows})
med = {}
for c in cfgs:
    for n in clients:
        xs = [float(r["qps"]) for r in rows if (int(r["service_spin_us"]), int(r["client_spin_us"])) == c
              and int(r["clients"]) == n]
        med[(c, n)] = (statistics.median(xs), min(xs), max(xs), len(xs))
lines = ["| service_spin_us | client_spin_us | clients | median q/s | min | max | runs | vs default |",
         "|---|---|---|---|---|---|---|---|"]
for (c, n), (m, lo, hi, k) in med.items():
    base = med[(cfgs[0], n)][0]
    lines.append(f"| {c[0]} | {c[1]} | {n} | {m:,.0f} | {lo:,.0f} | {hi:,.0f} | {k} | {m / base:.2f} |")
open(stem + ".md", "w").write("\n".join(lines) + "\n")
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, axes = plt.subplots(1, len(clients), figsize=(8, 3.2))
for ax, n in zip(axes, clients):
    keys = [(c, n) for c in cfgs]
    ax.bar([f"{c[0]}/{c[1]} us" for c in cfgs], [med[k][0] for k in keys],
           yerr=[[med[k][0] - med[k][1] for k in keys], [med[k][2] - med[k][0] for k in keys]], capsize=3)
    ax.set_title(f"{n} client{'s' if n > 1 else ''}")
    ax.set_ylabel("queries/s (median, min-max)")
fig.suptitle("Search q/s by service / client polling")
fig.tight_layout()
fig.savefig(stem + ".png", dpi=110)
