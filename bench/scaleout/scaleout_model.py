"""A model of N shards from the measured figures (docs/scale-out.md states its
assumptions). On a small machine the two shards, the coordinator and the client share the
cores, so the two-shard latency is inflated by contention; the model therefore takes each
shard's and the coordinator's own costs apart, from the one-shard runs and from CPU times,
and adds them along the critical path of one query, as if every server had a machine of
its own.

Inputs, at one probes setting (the fewest probes with which the union form reaches the
target recall) and one plan mode (--model-plan):
  s1, s2   p50 of the query sent straight to each shard (its n/2 rows)
  one      p50 of the one server with all n rows (same probes)
  u1       p50 of the union form over shard 1 alone (union1)
  CPU time per query: the coordinator's backend under union1 (k1) and union (k2) and
  plain-fetch11 (kp); the shards' postgres_fdw backends under union (both) and their
  backends under the direct queries; the device services.

Latency of one query:
  S(m)      = alpha + beta * sqrt(m): one shard's query of m rows, through (n/2, mean of
              s1, s2) and (n, one); with lists = sqrt(m) and fixed probes an IVF search reads
              probes * sqrt(m) rows and compares with sqrt(m) centroids
  c1        = (k2 - k1) + f: what each further shard adds to the critical path: the
              coordinator's CPU for one more foreign scan, and f, the shard backend's CPU
              for the postgres_fdw protocol around the search (START TRANSACTION, DECLARE
              with its parse and plan, the rows out as text, CLOSE, COMMIT: union's shard
              backends over 2, less a direct query's backend), which the coordinator waits
              for shard after shard (only the FETCH that runs the search overlaps)
  c0        = (u1 - s1) - c1: the rest of the coordinator's overhead
  union(N)  = c0 + c1 N + S(n / N) + rtt (4 N + 1)
  plain(N)  = c0 + c1' N + N S(n / N) + rtt 5 N, c1' = c1 + (kp - k2) / 2: the Merge Append
              starts one shard's search after the other
Throughput with many clients, C cores per machine, every query on every shard, the busiest
machine the bound: the coordinator C / (k1 + (k2 - k1) (N - 1)); each shard C / (its fdw
backend + its service, scaled by sqrt(m / (n/2))); one server C / (backend + service,
scaled by sqrt(rows / n)).
"""
import csv
import math

COLUMNS = ["layout", "shards", "rows_per_shard", "shard_query_ms", "union_ms", "union_ms_rtt",
           "plain_ms_rtt", "one_server_ms", "ratio_union", "qps_coordinator", "qps_shard",
           "qps", "qps_one_server"]
SHARDS = [1, 2, 4, 8, 16]


def _pick(rows, engine, plan, setting):
    for r in rows:
        if r["engine"] == engine and r["plan"] == plan and str(r["probes_setting"]) == str(setting):
            return r
    return None


def fit(rows, a):
    plan = a.model_plan
    settings = []
    for r in rows:
        if (r["engine"] == "union" and r["plan"] == plan and r.get("recall") is not None
                and r["recall"] >= a.target_recall and str(r["probes_setting"]) != "all"):
            settings.append((r["probes"], r["probes_setting"]))
    if not settings:
        return None
    setting = min(settings)[1]
    get = {e: _pick(rows, e, plan, setting) for e in
           ("one", "union", "union1", "plain-fetch11", "shard1", "shard2")}
    if any(v is None for v in get.values()):
        return None

    def cpu(e, role):
        return get[e].get(f"cpu_{role}_ms") or 0.0
    n = int(a.model_rows)
    s1, s2 = get["shard1"]["p50_ms"], get["shard2"]["p50_ms"]
    s, one, u1 = (s1 + s2) / 2, get["one"]["p50_ms"], get["union1"]["p50_ms"]
    beta = max(0.0, (one - s) / (math.sqrt(n) - math.sqrt(n / 2)))
    alpha = s - beta * math.sqrt(n / 2)

    def search(m):
        return alpha + beta * math.sqrt(m)
    k1, k2 = cpu("union1", "coord_backend"), cpu("union", "coord_backend")
    kp = cpu("plain-fetch11", "coord_backend")
    direct_backend = (cpu("shard1", "shard_backend") + cpu("shard2", "shard_backend")) / 2
    fdw_backend = cpu("union", "shard_backend") / 2
    f = max(0.0, fdw_backend - direct_backend)
    c1 = (k2 - k1) + f
    c0 = (u1 - s1) - c1
    c1p = c1 + (kp - k2) / 2
    service = cpu("union", "service") / 2
    one_cpu = cpu("one", "coord_backend"), cpu("one", "service")
    cores, rtt = a.model_cores, a.model_rtt_ms
    out = []
    for layout in ("same rows", "same shard size"):
        for N in SHARDS:
            total = n if layout == "same rows" else N * n // 2
            m = total / N
            sm = search(m)
            union = c0 + c1 * N + sm
            one_ms = search(total)
            qc = cores / max(1e-9, k1 + (k2 - k1) * (N - 1)) * 1e3
            qs = cores / max(1e-9, fdw_backend + service * math.sqrt(m / (n / 2))) * 1e3
            q1 = cores / max(1e-9, one_cpu[0] + one_cpu[1] * math.sqrt(total / n)) * 1e3
            out.append({"layout": layout, "shards": N, "rows_per_shard": round(m),
                        "shard_query_ms": sm, "union_ms": union,
                        "union_ms_rtt": union + rtt * (4 * N + 1),
                        "plain_ms_rtt": c0 + c1p * N + N * sm + rtt * 5 * N,
                        "one_server_ms": one_ms, "ratio_union": union / one_ms,
                        "qps_coordinator": qc, "qps_shard": qs, "qps": min(qc, qs),
                        "qps_one_server": q1})
    u2 = get["union"]["p50_ms"]
    note = (f"model ({plan} plans; probes {get['union']['probes']} on the shards, "
            f"{get['one']['probes']} on the one server; recall@10 {get['union']['recall']:.3f} "
            f"and {get['one']['recall']:.3f}): shard query S(m) = {alpha:.3f} + "
            f"{beta * 1e3:.3f}e-3 sqrt(m) ms; per shard c1 = {c1:.3f} ms (coordinator CPU "
            f"{k2 - k1:.3f} + shard fdw CPU {f:.3f}), fixed c0 = {c0:.3f} ms (union1 {u1:.3f} - "
            f"shard1 {s1:.3f} - c1); the model gives {c0 + 2 * c1 + search(n / 2):.3f} ms for "
            f"the union form over 2 shards, this machine measured {u2:.3f} ms (its shards, "
            f"coordinator and client share {os_cores()} cores); throughput with {cores} cores "
            f"per machine; union_ms_rtt and plain_ms_rtt add {rtt} ms per network round trip")
    return {"rows": out, "note": note, "setting": setting, "rtt": rtt}


def os_cores():
    import os
    return os.cpu_count()


def write_csv(rows, rep):
    from gibench.paths import OUT
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / f"{rep.stem}-model.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in COLUMNS})


def plot(model, stem):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = model["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, layout in zip(axes, ("same rows", "same shard size")):
        rs = [r for r in rows if r["layout"] == layout]
        x = [r["shards"] for r in rs]
        for col, label, c in (("union_ms", "UNION ALL, async (no network)", "tab:red"),
                              ("union_ms_rtt", f"UNION ALL, async, {model['rtt']} ms round trips",
                               "tab:orange"),
                              ("plain_ms_rtt", f"plain (Merge Append), {model['rtt']} ms round trips",
                               "tab:blue"),
                              ("one_server_ms", "one server with every row", "black")):
            ax.plot(x, [r[col] for r in rs], marker="o", color=c, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels([str(v) for v in x])
        ax.set_xlabel("shards")
        ax.set_ylabel("modelled latency of one query (ms)")
        total = "the measured rows" if layout == "same rows" else "rows grow with the shards"
        ax.set_title(f"{layout}: {total}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = f"{stem}-model.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path.rsplit("/", 1)[-1]]
