"""Plot and tabulate the store-level search runs recorded in a bench_store results file.

   python3 bench/store/plot_search.py bench/store/results-2026-11-22-tiles.txt docs/benchmarks/store

Reads the '| search | batch B, probes P, k 10 | QPS | ...' rows of each section of the file
(sections start with '## ' or '# call'), and writes search-store.csv and
search-store-bBATCH.png (QPS against recall@10, one line per section) into OUTDIR.
"""
import csv
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW = re.compile(r"^\| search\s+\| batch (\d+), probes (\d+), k 10\s+\| QPS\s+\|\s+([0-9.e+]+) q/s"
                 r".*recall@10 ([0-9.]+), p50 ([0-9.]+) ms")


def sections(path):
    name, rows = None, []
    for line in open(path, encoding="utf-8"):
        if line.startswith("## ") or line.startswith("# call"):
            if rows:
                yield name, rows
            name, rows = line.strip("# \n"), []
            continue
        m = ROW.match(line)
        if m:
            b, p, qps, rec, p50 = m.groups()
            rows.append((int(b), int(p), float(qps), float(rec), float(p50)))
    if rows:
        yield name, rows


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    secs = [(n, r) for n, r in sections(src)]
    with open(os.path.join(out, "search-store.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "batch", "probes", "qps", "recall10", "p50_ms"])
        for n, rows in secs:
            for r in rows:
                w.writerow([n] + list(r))
    for batch in sorted({r[0] for _, rows in secs for r in rows}):
        plt.figure(figsize=(6, 4))
        for n, rows in secs:
            pts = sorted((r[3], r[2]) for r in rows if r[0] == batch)
            if pts:
                plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=n[:60])
        plt.yscale("log")
        plt.xlabel("recall@10")
        plt.ylabel("queries / s")
        plt.title(f"1M x 128, 1,024 lists, batch {batch}")
        plt.legend(fontsize=6)
        plt.grid(True, which="both", alpha=0.3)
        plt.tight_layout()
        plt.savefig(os.path.join(out, f"search-store-b{batch}.png"), dpi=110)
        plt.close()


if __name__ == "__main__":
    main()
