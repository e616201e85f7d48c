"""Comparisons at equal recall: for each engine the best QPS among the settings that
reach a recall@10 target, and gpuivf's ratio to each peer."""

TARGETS = (0.80, 0.90, 0.95, 0.99)


def best_at(rows, engine, col, target):
    vals = [r[col] for r in rows if r["engine"] == engine and r.get(col)
            and r.get("recall") is not None and r["recall"] >= target]
    return max(vals) if vals else None


def at_recall(rows, col, ours="gpuivf", targets=TARGETS):
    """Rows for a markdown table: target, then QPS per engine, then ratio columns."""
    engines = list(dict.fromkeys(r["engine"] for r in rows if r.get(col)))
    out = []
    for t in targets:
        row = {"mode": col, "recall >=": t}
        for e in engines:
            row[e] = best_at(rows, e, col, t)
        if row.get(ours):
            for e in engines:
                if e != ours and row.get(e):
                    row[f"{ours}/{e}"] = row[ours] / row[e]
        out.append(row)
    return out, engines
