"""pq-ab.sh's log into STEM.csv, STEM.md and STEM.png: per (metric, probes, bits, mode)
the median time of each module over the rounds and its ratio to the first module's.
    python3 pq_ab_table.py LOG STEM"""
import collections
import csv
import re
import statistics
import sys

log, stem = sys.argv[1], sys.argv[2]
head = re.compile(r"^## (\S+) metric (\S+) probes (\d+) bits (\d+) round (\d+)")
times = collections.OrderedDict()
modules = []
cur = None
for line in open(log):
    m = head.match(line)
    if m:
        cur = m.groups()
        if cur[0] not in modules:
            modules.append(cur[0])
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cur is None or len(cells) < 12 or cells[0] == "mode":
        continue
    key = (cur[1], int(cur[2]), int(cur[3]), cells[0])
    times.setdefault(key, collections.defaultdict(list))[cur[0]].append(float(cells[9]))

rows = []
for (metric, probes, bits, mode), per in times.items():
    base = statistics.median(per[modules[0]]) if per.get(modules[0]) else None
    row = {"metric": metric, "probes": probes, "bits": bits, "mode": mode}
    for mod in modules:
        if per.get(mod):
            med = statistics.median(per[mod])
            row[f"{mod}_ms"] = round(med, 4)
            row[f"{mod}_runs"] = " ".join(f"{v:.3f}" for v in per[mod])
            row[f"{mod}_x"] = round(med / base, 3) if base else None
    rows.append(row)

cols = ["metric", "probes", "bits", "mode"] + [f"{m}_{s}" for m in modules
                                             for s in ("ms", "x", "runs")]
with open(stem + ".csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
md = ["# IVF-PQ search alone, modules in turns (bench_pq)", "",
      f"1,000 queries, k 10, 450,000 rows x 128, 64 sub-spaces, 700 lists; median ms over "
      f"the rounds (each a median of 7 searches); x: time / {modules[0]}'s.", "",
      "| metric | probes | bits | mode | " + " | ".join(f"{m} ms | {m} x" for m in modules) + " |",
      "|" + "---|" * (4 + 2 * len(modules))]
for r in rows:
    md.append(f"| {r['metric']} | {r['probes']} | {r['bits']} | {r['mode']} | " +
              " | ".join(f"{r.get(m + '_ms', '')} | {r.get(m + '_x', '')}" for m in modules) + " |")
open(stem + ".md", "w").write("\n".join(md) + "\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['metric']} p{r['probes']} {r['bits']}b {r['mode']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(rows)), 4))
    width = 0.8 / len(modules)
    for i, mod in enumerate(modules):
        ax.bar([j + i * width for j in range(len(rows))], [r.get(mod + "_ms", 0) for r in rows],
               width, label=mod)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms, 1,000 queries")
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=120)
except ImportError:
    pass
