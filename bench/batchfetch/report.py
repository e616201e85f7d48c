"""Medians of bench/batchfetch/run.sh's CSV: a markdown table and a bar plot."""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
stem, note = sys.argv[2], sys.argv[3]
stages = [("visibility_us", "visibility"), ("search_us", "search"),
          ("rows_us", "result rows"), ("total_us", "total")]
variants = [v for v in ("old", "new") if any(r["variant"] == v for r in rows)]
med = {}
for v in variants:
    for col, _ in stages:
        xs = [float(r[col]) for r in rows if r["variant"] == v and r[col]]
        if xs:
            med[(v, col)] = (statistics.median(xs), min(xs), max(xs), len(xs))
lines = ["# Batch API row checks: one library against another", "", note, "",
         "| stage | " + " | ".join(f"{v} ms (min–max)" for v in variants)
         + (" | new ÷ old |" if len(variants) == 2 else " |"),
         "|---|" + "---|" * len(variants) + ("---|" if len(variants) == 2 else "")]
for col, name in stages:
    cells = []
    for v in variants:
        if (v, col) in med:
            m, lo, hi, _ = med[(v, col)]
            cells.append(f"{m / 1000:.2f} ({lo / 1000:.2f}–{hi / 1000:.2f})")
        else:
            cells.append("")
    ratio = ""
    if len(variants) == 2 and ("old", col) in med and ("new", col) in med:
        ratio = f" {med[('new', col)][0] / med[('old', col)][0]:.2f} |"
    lines.append(f"| {name} | " + " | ".join(cells) + " |" + ratio)
n = {v: med[(v, "total_us")][3] for v in variants if (v, "total_us") in med}
lines += ["", "Calls timed: " + ", ".join(f"{v} {k}" for v, k in n.items()) + "."]
open(stem + ".md", "w").write("\n".join(lines) + "\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.8 / max(1, len(variants))
    for i, v in enumerate(variants):
        xs = [j + i * w for j in range(len(stages))]
        ys = [med.get((v, c), (0,))[0] / 1000 for c, _ in stages]
        ax.bar(xs, ys, width=w, label=v)
    ax.set_xticks([j + w * (len(variants) - 1) / 2 for j in range(len(stages))])
    ax.set_xticklabels([s for _, s in stages])
    ax.set_ylabel("ms per call (median)")
    ax.set_title("Batch API call by stage")
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
except ImportError:
    pass
