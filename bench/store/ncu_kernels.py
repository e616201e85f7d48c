"""ncu-kernels.sh's raw Nsight Compute CSVs (one a profile, named B-P-R-K.csv): the median
duration of each kernel per profile, its launches a search and its share of the kernels'
sum, as OUTDIR STEM.csv and STEM.md.   python3 ncu_kernels.py STEM RAW.csv ..."""
import collections
import csv
import os
import statistics
import sys

SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def kernels(path):
    """kernel name -> durations in us, in the order the kernels first ran"""
    rows = [r for r in csv.reader(open(path)) if len(r) > 5]
    # the program's own output shares stdout with ncu's CSV: start at ncu's header
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r),
                 None)
    if start is None:
        return collections.OrderedDict()
    rows = rows[start:]
    h = rows[0]
    ki, vi, ui = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit")
    d = collections.OrderedDict()
    for r in rows[1:]:
        try:
            v = float(r[vi].replace(",", "")) * SCALE.get(r[ui], 1.0)
        except ValueError:
            continue
        d.setdefault(r[ki].split("(")[0].strip(), []).append(v)
    return d


stem = sys.argv[1]
out = [["profile", "kernel", "launches_per_search", "median_us", "share"]]
md = ["# Kernel durations at the store (ncu)", "",
      "Median gpu__time_duration of each kernel, per profile (batch:probes:searches:k); "
      "launches a search; share of the kernels' medians summed over a search.", "",
      "| profile | kernel | launches a search | median µs | share |", "|---|---|---|---|---|"]
for path in sys.argv[2:]:
    prof = os.path.basename(path)[:-4].replace("-", ":")
    d = kernels(path)
    searches = int(prof.split(":")[2]) if prof.count(":") == 3 else 1
    per = {k: statistics.median(v) * len(v) / searches for k, v in d.items()}
    total = sum(per.values()) or 1.0
    for k, v in d.items():
        m = statistics.median(v)
        n = len(v) / searches
        out.append([prof, k, f"{n:g}", f"{m:.2f}", f"{per[k] / total:.2f}"])
        md.append(f"| {prof} | `{k}` | {n:g} | {m:.2f} | {per[k] / total:.2f} |")
    md.append(f"| {prof} | all kernels of a search | | {total:.2f} | 1 |")
with open(stem + ".csv", "w", newline="") as f:
    csv.writer(f).writerows(out)
open(stem + ".md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
