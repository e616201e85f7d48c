#!/usr/bin/env python3
"""The table of bench/before-after.sh: old against new, from the raw folder it fills
(meta.tsv, steps.tsv, store/SIDE-rN/bench_store.csv, sql/search-DATASET-SIDE-rN.csv).

    before-after-table.py RAW OUTDIR     writes OUTDIR/before-after.md, store.csv, sql.csv

Each figure is the median over rounds of what one run reports (a store run: its own
best-of-2 / p50; a SQL run: the median of its repeats); new/old is the ratio of those
medians; spread is (max - min) / median over the rounds of one side.  A figure is
"ok" when new is at most 5 % worse than old (the issue's bar), "better" when it is more
than 5 % better, "WORSE" otherwise.  Standard library only."""
import csv
import glob
import math
import os
import re
import statistics
import sys
import textwrap

TOL = 0.05


def read_tsv(path):
    try:
        with open(path) as f:
            return [line.rstrip("\n").split("\t", 1) for line in f if "\t" in line]
    except OSError:
        return []


def run_of(path):
    m = re.search(r"(old|new)-r(\d+)", path)
    return (m.group(1), int(m.group(2))) if m else (None, None)


# ---- store ----------------------------------------------------------------------------
def store_rows(path):
    """The result rows of one bench_store.run output: its printed table (stdout is
    flushed after every row, so a run cut short keeps what it printed; the CSV beside it
    is only complete once the run ends)."""
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("| ") or line.startswith("| bench "):
                continue
            cells = [c.strip() for c in line.rstrip("\n").split(" | ")]
            if len(cells) < 5:
                continue
            rows.append(dict(bench=cells[0].lstrip("| ").strip(), params=cells[1],
                             metric=cells[2], value=(cells[3].split() or [""])[0],
                             note=" | ".join(cells[5:])))
    return rows


def store_figures(path):
    """{key: (value, label, unit, better)} of one run; search keys are
    ('search', batch, probes) with (p50 ms, recall)."""
    figs, ingest = {}, {}
    for r in store_rows(path):
        b, p, m, note = r["bench"], r["params"], r["metric"], r.get("note", "")
        try:
            v = float(r["value"])
        except (TypeError, ValueError):
            continue
        if not math.isfinite(v):
            continue
        if b == "bandwidth" and m == "device to device":
            figs["bw"] = (v, "copy bandwidth device to device (context)", "GB/s", "higher")
        elif b == "ingest":
            hm = re.search(r"copy helpers (-?\d+)", p)
            ingest.setdefault(hm.group(1) if hm else "?", {})[m] = v
        elif b == "memory" and "after build" in p and m == "device bytes / raw - 1":
            figs["mem"] = (100 * v, "device memory over raw vectors after the build",
                           "%", "lower")
        elif b == "delete" and m == "wall ms":
            figs["del"] = (v, "delete 10K of N, wall (p50 of 7)", "ms", "lower")
        elif b == "delete" and m == "device ms":
            figs["deld"] = (v, "delete 10K of N, device (p50 of 7)", "ms", "lower")
        elif b == "window" and "chunk default" in p and "helpers -1" in p:
            if m == "step p50 wall ms":
                figs["win"] = (v, "sliding window W 200K B 10K: step p50, wall", "ms", "lower")
            elif m == "insert p50 device ms":
                figs["wind"] = (v, "sliding window: insert p50, device", "ms", "lower")
        elif b == "search" and m == "QPS":
            bm = re.search(r"batch (\d+), probes (\d+)", p)
            pm = re.search(r"p50 ([0-9.]+) ms", note)
            rm = re.search(r"recall@10 ([0-9.]+)", note)
            if bm and pm:
                figs[("search", int(bm.group(1)), int(bm.group(2)))] = (
                    float(pm.group(1)), float(rm.group(1)) if rm else None)
    # the default copy helpers (-1); a module without the hook runs one configuration
    cfg = ingest.get("-1") or (list(ingest.values())[-1] if ingest else {})
    if "wall vectors/s" in cfg:
        figs["ing"] = (cfg["wall vectors/s"] / 1e6, "ingestion, batches of 100K, wall",
                       "M vectors/s", "higher")
    if "device vectors/s" in cfg:
        figs["ingd"] = (cfg["device vectors/s"] / 1e6, "ingestion, device busy time",
                        "M vectors/s", "higher")
    return figs


STORE_ORDER = ["ing", "ingd", "mem", "del", "deld", "win", "wind", "bw"]


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def spread(vals):
    vals = [v for v in vals if v is not None]
    if len(vals) < 2:
        return None
    m = statistics.median(vals)
    return (max(vals) - min(vals)) / m if m else None


def verdict(old, new, better):
    if old is None or new is None or old == 0 or not math.isfinite(old / 1.0) \
            or not math.isfinite(new / 1.0):
        return "", None
    r = new / old
    worse = (r - 1) if better == "lower" else (1 - r)
    if worse > TOL:
        return f"WORSE ({worse * 100:.1f} %)", r
    if worse < -TOL:
        return "better", r
    return "ok", r


def fmt(v, digits=4):
    if v is None or not math.isfinite(v):
        return "—"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def pct(v):
    return "—" if v is None else f"{v * 100:.1f} %"


def store_section(raw, md, rows_csv):
    runs = {"old": {}, "new": {}}
    for path in sorted(glob.glob(os.path.join(raw, "logs", "store-*-r*.log"))):
        side, r = run_of(path)
        if side:
            try:
                figs = store_figures(path)
            except OSError:
                continue
            if figs:
                runs[side][r] = figs
    n_old, n_new = len(runs["old"]), len(runs["new"])
    md.append(f"## Store benchmark (bench/store/bench_store.run), {n_old} old / {n_new} new runs")
    md.append("")
    if not (n_old and n_new):
        md.append("> not measured in both trees (see the steps below)")
        md.append("")
        return
    md.append("| figure | unit | old | new | new/old | verdict | spread old / new |")
    md.append("|---|---|---:|---:|---:|---|---|")
    for key in STORE_ORDER:
        per = {s: [runs[s][r][key][0] for r in sorted(runs[s]) if key in runs[s][r]]
               for s in runs}
        any_run = next((runs[s][r][key] for s in runs for r in runs[s] if key in runs[s][r]), None)
        if any_run is None:
            continue
        _, label, unit, better = any_run
        o, n = med(per["old"]), med(per["new"])
        vd, ratio = verdict(o, n, better)
        if key == "bw":
            vd = "(machine)"
        md.append(f"| {label} | {unit} | {fmt(o)} | {fmt(n)} | {fmt(ratio, 3)} | {vd} | "
                  f"{pct(spread(per['old']))} / {pct(spread(per['new']))} |")
        rows_csv.append(dict(part="store", figure=label, batch="", probes="", unit=unit,
                             better=better, old=o, new=n, ratio=ratio, verdict=vd,
                             old_runs=";".join(f"{v:.6g}" for v in per["old"]),
                             new_runs=";".join(f"{v:.6g}" for v in per["new"])))
    md.append("")
    keys = sorted({k for s in runs for r in runs[s] for k in runs[s][r] if isinstance(k, tuple)},
                  key=lambda k: (k[2], k[1]))
    if keys:
        md.append("Search, k = 10, p50 wall ms of repeated calls (300 / 40 / 4 / 2 calls for "
                  "batches 1 / 32 / 1,024 / 10,000), queries up and results down included:")
        md.append("")
        md.append("| batch | probes | recall@10 old / new | old ms | new ms | new/old | verdict "
                  "| spread old / new |")
        md.append("|---:|---:|---|---:|---:|---:|---|---|")
        for k in keys:
            per = {s: [runs[s][r][k][0] for r in sorted(runs[s]) if k in runs[s][r]] for s in runs}
            rec = {s: med([runs[s][r][k][1] for r in runs[s] if k in runs[s][r]]) for s in runs}
            o, n = med(per["old"]), med(per["new"])
            vd, ratio = verdict(o, n, "lower")
            md.append(f"| {k[1]:,} | {k[2]} | {fmt(rec['old'], 3)} / {fmt(rec['new'], 3)} | "
                      f"{fmt(o)} | {fmt(n)} | {fmt(ratio, 3)} | {vd} | "
                      f"{pct(spread(per['old']))} / {pct(spread(per['new']))} |")
            rows_csv.append(dict(part="store-search", figure="p50 ms", batch=k[1], probes=k[2],
                                 unit="ms", better="lower", old=o, new=n, ratio=ratio,
                                 verdict=vd, recall_old=rec["old"], recall_new=rec["new"],
                                 old_runs=";".join(f"{v:.6g}" for v in per["old"]),
                                 new_runs=";".join(f"{v:.6g}" for v in per["new"])))
        md.append("")


# ---- sql ------------------------------------------------------------------------------
SQL_FIGS = [("qps_1", "1 client, QPS", "q/s", "higher"),
            ("p50_ms", "1 client, latency p50", "ms", "lower"),
            ("p99_ms", "1 client, latency p99", "ms", "lower"),
            ("batch_ms", "batch of all queries in one statement (rows sent)", "ms", "lower"),
            ("batch_warm_ms", "batch, warm (second of two back to back)", "ms", "lower"),
            ("batch_server_ms", "batch, warm, rows counted on the server", "ms", "lower")]


def fnum(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def sql_section(raw, meta, md, rows_csv):
    runs = {"old": {}, "new": {}}
    backends = {"old": set(), "new": set()}
    partial = []
    for path in sorted(glob.glob(os.path.join(raw, "sql", "search-*-r*.csv"))):
        side, r = run_of(path)
        if not side:
            continue
        with open(path, newline="") as f:
            rows = [x for x in csv.DictReader(f) if x.get("engine") == "gpuivf"]
        runs[side][r] = {int(float(x["knob_value"])): x for x in rows if x.get("knob_value")}
        mdp = path[:-4] + ".md"
        try:
            text = open(mdp).read()
            for m in re.finditer(r"^- gpuindex_backend: (.*)$", text, re.M):
                backends[side].add(m.group(1))
            if "PARTIAL" in text or "--deadline reached" in text or "failed" in text:
                partial.append(os.path.basename(mdp))
        except OSError:
            pass
    n_old, n_new = len(runs["old"]), len(runs["new"])
    md.append(f"## SQL search, gpuivf only ({meta.get('dataset', '?')}, {meta.get('nq', '?')} "
              f"queries, lists round(sqrt(rows)), k = 10), {n_old} old / {n_new} new runs")
    md.append("")
    for s in ("old", "new"):
        if backends[s]:
            md.append(f"- {s}: gpuindex backend {', '.join(sorted(backends[s]))}")
    want = meta.get("device", "cuda")
    for s in ("old", "new"):
        if want == "cuda" and backends[s] and not any(b.startswith("cuda") for b in backends[s]):
            md.append(f"- **WARNING: the {s} tree's server did not run the CUDA backend**")
    for p in partial:
        md.append(f"- note: {p} is partial or has a failure (see raw.tar.gz)")
    md.append("")
    if not (n_old and n_new):
        md.append("> not measured in both trees (see the steps below)")
        md.append("")
        return
    knobs = sorted({k for s in runs for r in runs[s] for k in runs[s][r]})
    md.append("| figure | probes | recall@10 old / new | unit | old | new | new/old | verdict "
              "| spread old / new |")
    md.append("|---|---:|---|---|---:|---:|---:|---|---|")
    for col, label, unit, better in SQL_FIGS:
        for k in knobs:
            per = {s: [fnum(runs[s][r][k].get(col)) for r in sorted(runs[s]) if k in runs[s][r]]
                   for s in runs}
            if not any(v is not None for s in per for v in per[s]):
                continue
            rec = {s: med([fnum(runs[s][r][k].get("recall")) for r in runs[s] if k in runs[s][r]])
                   for s in runs}
            o, n = med(per["old"]), med(per["new"])
            vd, ratio = verdict(o, n, better)
            md.append(f"| {label} | {k} | {fmt(rec['old'], 3)} / {fmt(rec['new'], 3)} | {unit} | "
                      f"{fmt(o)} | {fmt(n)} | {fmt(ratio, 3)} | {vd} | "
                      f"{pct(spread(per['old']))} / {pct(spread(per['new']))} |")
            rows_csv.append(dict(part="sql", figure=label, batch="", probes=k, unit=unit,
                                 better=better, old=o, new=n, ratio=ratio, verdict=vd,
                                 recall_old=rec["old"], recall_new=rec["new"],
                                 old_runs=";".join("" if v is None else f"{v:.6g}" for v in per["old"]),
                                 new_runs=";".join("" if v is None else f"{v:.6g}" for v in per["new"])))
    builds = {s: [fnum(next(iter(runs[s][r].values())).get("build_s")) for r in sorted(runs[s])
                  if runs[s][r]] for s in runs}
    o, n = med(builds["old"]), med(builds["new"])
    vd, ratio = verdict(o, n, "lower")
    md.append(f"| CREATE INDEX (context: one per run) | — | — | s | {fmt(o)} | {fmt(n)} | "
              f"{fmt(ratio, 3)} | {vd} | {pct(spread(builds['old']))} / {pct(spread(builds['new']))} |")
    rows_csv.append(dict(part="sql", figure="CREATE INDEX", unit="s", better="lower", old=o,
                         new=n, ratio=ratio, verdict=vd))
    md.append("")


def write_csv(path, rows):
    cols = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols or ["part"])
        w.writeheader()
        for r in rows:
            w.writerow({c: (f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v))
                        for c, v in r.items()})


def plot_ratios(csv_path, png_path):
    """new / old of each figure of a store.csv or sql.csv as bars (needs matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for r in csv.DictReader(open(csv_path)) if r.get("ratio")]
    if not rows:
        return
    labels = [f"{r['figure']}" + (f", batch {r['batch']}" if r.get("batch") else "")
              + (f", probes {r['probes']}" if r.get("probes") else "") for r in rows]
    ratios = [float(r["ratio"]) for r in rows]
    colors = ["#3a7bd5" if (x <= 1) == (r.get("better") == "lower") or x == 1 else "#d5533a"
              for x, r in zip(ratios, rows)]
    fig, ax = plt.subplots(figsize=(10, 0.28 * len(rows) + 1))
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([textwrap.fill(x, 40) for x in labels], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("new / old (blue: better, red: worse)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main(raw, out):
    meta = dict(read_tsv(os.path.join(raw, "meta.tsv")))
    steps = read_tsv(os.path.join(raw, "steps.tsv"))[1:]
    md = [f"# Before / after, one GPU host, one call ({meta.get('date', '?')})", ""]
    md.append(f"- device: {meta.get('gpu', '?')}; clocks at start (SM, memory, temperature, "
              f"power): {meta.get('clocks', '?')}; {meta.get('nvcc', '')}")
    md.append(f"- host: {meta.get('cpu', '?')}; {meta.get('os', '')}; {meta.get('python', '')}")
    md.append(f"- old: commit {meta.get('old_commit', '?')[:12]} (.baseline), sources "
              f"{meta.get('old_src_hash', '?')}, gpuindex.so {meta.get('old_gpuindex.so', '?')}, "
              f"gpuindex_cuda.so {meta.get('old_gpuindex_cuda.so', '?')}")
    md.append(f"- new: working tree ({meta.get('new_commit', '?')}; "
              f"{meta.get('new_dirty', '?')}), sources {meta.get('new_src_hash', '?')}, "
              f"gpuindex.so {meta.get('new_gpuindex.so', '?')}, gpuindex_cuda.so "
              f"{meta.get('new_gpuindex_cuda.so', '?')}")
    md.append(f"- store: N = {meta.get('store_n', '?')}, d 128, 1,024 lists, module "
              f"{meta.get('module', '?')}; SQL: gpuindex.device = {meta.get('device', '?')}, "
              f"probes {meta.get('probes', '?')}, medians of {meta.get('repeats', '?')} a run")
    md.append("- each figure: median over rounds (old first in odd rounds, new first in even "
              "ones) of one run's figure; new/old = ratio of those medians; verdict: ok within "
              "5 %, WORSE beyond 5 % the wrong way; spread = (max - min) / median over rounds")
    md.append("")
    rows = []
    store_section(raw, md, rows)
    srows = []
    sql_section(raw, meta, md, srows)
    md.append("## Steps")
    md.append("")
    md.append("| step | status | seconds |")
    md.append("|---|---|---:|")
    for name, rest in steps:
        st, _, secs = rest.partition("\t")
        md.append(f"| {name} | {st} | {secs} |")
    md.append("")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "before-after.md"), "w") as f:
        f.write("\n".join(md))
    write_csv(os.path.join(out, "store.csv"), rows)
    write_csv(os.path.join(out, "sql.csv"), srows)
    for part, got in (("store", rows), ("sql", srows)):
        if got:
            plot_ratios(os.path.join(out, part + ".csv"), os.path.join(out, part + ".png"))


if __name__ == "__main__":
    if sys.argv[1] == "--plot":
        plot_ratios(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2])
