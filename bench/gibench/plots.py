"""Matplotlib figures (PNG, no display)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"gpuivf": ("tab:red", "o"), "ivfflat": ("tab:blue", "s"), "hnsw": ("tab:green", "^"),
         "faiss-ivf": ("tab:purple", "v"), "faiss-hnsw": ("tab:olive", "D"),
         "faiss-gpu-ivf": ("tab:pink", "P"), "faiss-gpu-wheel": ("tab:cyan", "p"),
         "cuvs-ivf": ("tab:brown", "X"), "cuvs-cagra": ("tab:gray", "*")}


# legend names of the no-database references
LABELS = {"faiss-ivf": "faiss-ivf (Faiss CPU IVF-Flat, no database)",
          "faiss-hnsw": "faiss-hnsw (Faiss CPU HNSW, no database)",
          "faiss-gpu-ivf": "faiss-gpu-ivf (Faiss GPU IVF-Flat, no database)",
          "faiss-gpu-wheel": "faiss-gpu-wheel (Faiss GPU IVF-Flat, PyPI wheel, no database)",
          "cuvs-ivf": "cuvs-ivf (cuVS IVF-Flat, no database)",
          "cuvs-cagra": "cuvs-cagra (cuVS CAGRA, no database)"}


def _label(name):
    return LABELS.get(name, name)


def _save(fig, stem):
    """Write the figure as STEM.png; returns [its file name] for the report."""
    path = f"{stem}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path.rsplit("/", 1)[-1]]


def _style(name):
    return STYLE.get(name, ("black", "."))


def recall_qps(rows, stem, modes):
    """One panel per mode (column of QPS): QPS (log) against recall@10 per engine."""
    modes = [(m, t) for m, t in modes if any(r.get(m) for r in rows)]
    if not modes:
        return []
    fig, axes = plt.subplots(1, len(modes), figsize=(5.2 * len(modes), 4.2), squeeze=False)
    for ax, (col, title) in zip(axes[0], modes):
        for eng in dict.fromkeys(r["engine"] for r in rows):
            pts = sorted((r.get("knob_value", 0), r["recall"], r[col]) for r in rows
                         if r["engine"] == eng and r.get(col) and r.get("recall") is not None)
            if pts:
                c, m = _style(eng)
                ax.plot([p[1] for p in pts], [p[2] for p in pts], marker=m, color=c,
                        label=_label(eng))
        ax.set_yscale("log")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("queries per second")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    # one legend under the panels: inside them it hid the slow engines' curves
    named = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            named.setdefault(lab, h)
    ncol = min(3, len(named)) or 1
    legend_rows = (len(named) + ncol - 1) // ncol
    height = 4.2 + 0.18 * legend_rows
    bottom = (0.08 + 0.17 * legend_rows) / height
    fig.set_size_inches(5.2 * len(modes), height)
    fig.legend(list(named.values()), list(named), loc="lower center", ncol=ncol, fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return _save(fig, stem)


def per_step(rows, stem, panels):
    """Stream scenario: one panel per (column, title), a line per engine over steps."""
    ncols = min(3, len(panels))
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (col, title, log) in zip(axes.flat, panels):
        for eng in dict.fromkeys(r["engine"] for r in rows):
            pts = [(r["step"], r[col]) for r in rows
                   if r["engine"] == eng and r.get(col) is not None]
            if pts:
                c, m = _style(eng)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, marker=m,
                        markersize=3, label=_label(eng))
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, stem)


def lines(rows, stem, xcol, ycol, group, title, xlabel, ylabel):
    """One line per group(row) of ycol against xcol, both axes logarithmic."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name in dict.fromkeys(group(r) for r in rows):
        pts = sorted((r[xcol], r[ycol]) for r in rows if group(r) == name and r.get(ycol))
        if pts:
            c, m = _style(name.split(",")[0])
            ls = "-" if name.endswith("k 10") else "--"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, marker=m, ls=ls,
                    label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, stem)


def bars(rows, stem, col, title, ylabel, log=True):
    rows = [r for r in rows if r.get(col)]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(rows), 3.8))
    names = [r["engine"] for r in rows]
    ax.bar(names, [r[col] for r in rows], color=[_style(n)[0] for n in names])
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return _save(fig, f"{stem}-{col}")
