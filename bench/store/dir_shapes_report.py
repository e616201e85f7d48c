"""dir-shapes.sh's and after-write.sh's CSV: a markdown table (p50 per shape or way and
   profile, ratio to the first) and a bar plot.
   python3 dir_shapes_report.py CSV STEM NOTE [TITLE]"""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
stem, note = sys.argv[2], sys.argv[3]
title, plot_title = ((sys.argv[4], sys.argv[4]) if len(sys.argv) > 4 else
                     ("The directory scan's shapes", "directory scan shapes (blocks/SM x words)"))
profiles = list(dict.fromkeys(r["profile"] for r in rows))
shapes = list(dict.fromkeys(r["shape"] for r in rows))
val = {(r["profile"], r["shape"]): r for r in rows}
lines = ["# " + title, "", note, "",
         "| profile | " + " | ".join(f"{s} p50 ms (p90)" for s in shapes) + " | best ÷ " + shapes[0] + " | hits differing |",
         "|---|" + "---|" * len(shapes) + "---|---|"]
for p in profiles:
    cells, best, differ = [], None, 0
    for s in shapes:
        r = val.get((p, s))
        if r is None:
            cells.append("")
            continue
        x = float(r["p50_ms"])
        best = x if best is None else min(best, x)
        differ += int(r["hits_differ"])
        cells.append(f"{x:.4f} ({float(r['p90_ms']):.4f})")
    base = val.get((p, shapes[0]))
    ratio = f"{best / float(base['p50_ms']):.2f}" if base and best else ""
    lines.append(f"| {p} | " + " | ".join(cells) + f" | {ratio} | {differ} |")
open(stem + ".md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, ax = plt.subplots(figsize=(8, 4))
w = 0.8 / len(shapes)
for i, s in enumerate(shapes):
    xs = [j + i * w for j in range(len(profiles))]
    ys = [float(val[(p, s)]["p50_ms"]) if (p, s) in val else 0 for p in profiles]
    ax.bar(xs, ys, w, label=s)
ax.set_xticks([j + w * (len(shapes) - 1) / 2 for j in range(len(profiles))])
ax.set_xticklabels(profiles)
ax.set_ylabel("p50 ms")
ax.set_title(plot_title)
ax.legend()
fig.tight_layout()
fig.savefig(stem + ".png")
