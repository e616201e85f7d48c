"""Results out: CSV (every column), a markdown table (chosen columns) with the run's
environment and options, and PNG plots, all in docs/benchmarks/."""
import csv
import math

from .paths import OUT


def _fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(v)


def _raw(v):
    """CSV cells keep 6 significant digits (the markdown rounds more)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


class Report:
    def __init__(self, scenario, dataset, env, options, notes=()):
        tag = f"-{options['tag']}" if options.get("tag") else ""
        name = dataset.replace(":", "_").replace("/", "_").replace(",", "_")
        self.stem = f"{scenario}-{name}{tag}"
        self.title = f"{scenario} on {dataset}"
        self.env, self.options, self.notes = env, options, list(notes)
        self.rows, self.tables, self.plots = [], [], []

    def add(self, **row):
        self.rows.append(row)
        return row

    def table(self, title, columns, rows=None):
        self.tables.append((title, columns, rows))

    def note(self, text):
        self.notes.append(text)

    def plot(self, fn):
        """fn(rows, path_stem) -> list of written PNG names."""
        self.plots.append(fn)

    def checkpoint(self, finish, done):
        """Writes what is measured so far (finish(self) adds the tables and plots, which
        are then dropped again), marked partial: a run killed later keeps these files."""
        finish(self)
        try:
            self.write(partial=f"PARTIAL: written after {done}; the run did not reach its end")
        finally:
            self.tables, self.plots = [], []

    def write(self, partial=None):
        OUT.mkdir(parents=True, exist_ok=True)
        cols = []
        for r in self.rows:
            cols += [c for c in r if c not in cols]
        with open(OUT / f"{self.stem}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in self.rows:
                w.writerow({c: _raw(r.get(c)) for c in cols})
        pngs = []
        for fn in self.plots:
            pngs += fn(self.rows, OUT / self.stem)
        lines = [f"# {self.title}", ""]
        lines += [f"- {k}: {v}" for k, v in self.env.items()]
        lines += [f"- options: {self.options}", ""]
        notes = ([partial] if partial else []) + self.notes
        lines += [f"> {n}" for n in notes] + ([""] if notes else [])
        for title, columns, rows in self.tables:
            rows = self.rows if rows is None else rows
            lines += [f"## {title}", "", "| " + " | ".join(columns) + " |",
                      "|" + "---|" * len(columns)]
            for r in rows:
                if any(c in r for c in columns):
                    lines.append("| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |")
            lines.append("")
        lines += [f"![{p}]({p})" for p in pngs]
        lines += ["", f"CSV: [{self.stem}.csv]({self.stem}.csv)", ""]
        (OUT / f"{self.stem}.md").write_text("\n".join(lines))
        return OUT / f"{self.stem}.md"
