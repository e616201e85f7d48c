"""Figures of the genie benchmark (matplotlib through gibench.plots: styles, saving)."""
from gibench import plots
from gibench.plots import plt


def accuracy_qps(rows, stem, xlabel, title):
    """QPS (log) against an accuracy column ('recall') per engine, points by knob."""
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7.4, 4.6))
    for eng in dict.fromkeys(r["engine"] for r in rows):
        pts = sorted((r.get("knob_value") or 0, r["recall"], r["qps"]) for r in rows
                     if r["engine"] == eng)
        c, m = plots._style(eng)
        ax.plot([p[1] for p in pts], [p[2] for p in pts], marker=m, color=c,
                label=plots._label(eng))
        for kv, x, y in pts:
            if kv:
                ax.annotate(f"{kv:g}", (x, y), textcoords="offset points", xytext=(4, 3),
                            fontsize=7, color=c)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("queries per second")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return plots._save(fig, stem)
