"""Medians of bench/ab/run.sh's CSV: a markdown table (old, new, new / old) and a plot."""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
stem, note = sys.argv[2], sys.argv[3]
variants = [v for v in ("old", "new") if any(r["variant"] == v for r in rows)]
measures = []
for r in rows:
    m = (r["step"], r["clients"], r["unit"])
    if m not in measures:
        measures.append(m)


def label(m):
    step, clients, unit = m
    if step == "single":
        return f"single queries, {clients} client{'s' if clients != '1' else ''} ({unit})"
    return f"{step} (ms)"


med = {}
for v in variants:
    for m in measures:
        xs = [float(r["value"]) for r in rows
              if r["variant"] == v and (r["step"], r["clients"], r["unit"]) == m and r["value"]]
        if m[2] == "us":
            xs = [x / 1000 for x in xs]
        if xs:
            med[(v, m)] = (statistics.median(xs), min(xs), max(xs), len(xs))
head = "| measure | " + " | ".join(f"{v}: median (min–max), n" for v in variants)
lines = ["# One gpuindex.so against another", "", note, "",
         head + (" | new ÷ old |" if len(variants) == 2 else " |"),
         "|---|" + "---|" * len(variants) + ("---|" if len(variants) == 2 else "")]
for m in measures:
    cells = []
    for v in variants:
        if (v, m) in med:
            x, lo, hi, n = med[(v, m)]
            fmt = "{:,.0f}" if m[2] == "q/s" else "{:.3f}" if x < 1 else "{:.2f}"
            cells.append(f"{fmt.format(x)} ({fmt.format(lo)}–{fmt.format(hi)}), {n}")
        else:
            cells.append("")
    ratio = ""
    if len(variants) == 2 and ("old", m) in med and ("new", m) in med:
        ratio = f" {med[('new', m)][0] / med[('old', m)][0]:.2f} |"
    lines.append(f"| {label(m)} | " + " | ".join(cells) + " |" + ratio)
md5s = {v: sorted({r["md5"] for r in rows if r["variant"] == v and r["md5"]}) for v in variants}
if len(variants) == 2 and any(md5s.values()):
    same = len({x for s in md5s.values() for x in s}) == 1
    lines += ["", "Batch rows (md5 of every query's keys in order): "
              + ("the same for both libraries in every turn." if same else
                 "DIFFERENT: " + "; ".join(f"{v} {', '.join(s)}" for v, s in md5s.items()))]
open(stem + ".md", "w").write("\n".join(lines) + "\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = [m for m in measures if all((v, m) in med for v in variants)]
    fig, axes = plt.subplots(1, len(shown), figsize=(2.2 * len(shown) + 1, 3.2), squeeze=False)
    for ax, m in zip(axes[0], shown):
        ys = [med[(v, m)][0] for v in variants]
        err = [[med[(v, m)][0] - med[(v, m)][1] for v in variants],
               [med[(v, m)][2] - med[(v, m)][0] for v in variants]]
        ax.bar(variants, ys, yerr=err, capsize=3, color=["#999999", "#3a7bd5"][:len(variants)])
        ax.set_title(label(m), fontsize=8)
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
except ImportError:
    pass
