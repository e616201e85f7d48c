"""No-database references on the same vectors: Faiss CPU (IVF-Flat, HNSW-Flat) always;
Faiss GPU IVF-Flat and cuVS IVF-Flat / CAGRA when a GPU and their wheels are present.
Each engine: build(x, metric, params) -> handle; search(handle, q, k, knob) -> ids."""
import time

import numpy as np

from .engines import default_lists, sweep_values


def _prep(x, metric):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if metric == "cosine":
        n = np.linalg.norm(x, axis=1, keepdims=True)
        n[n == 0] = 1
        x = x / n
    return x


def _train_sample(x, lists, seed, per_list=50):
    """The k-means training rows, a seeded sample like pgvector's IVFFlat's (50 a list;
    per_list <= 0: every row)."""
    m = min(len(x), per_list * lists) if per_list > 0 else len(x)
    if m == len(x):
        return x
    rng = np.random.default_rng(seed)
    return x[np.sort(rng.choice(len(x), m, replace=False))]


class FaissCpu:
    kind = "faiss"

    def __init__(self, name, structure):
        import faiss
        self.faiss, self.name, self.structure = faiss, name, structure

    def threads(self, n):
        self.faiss.omp_set_num_threads(n)

    def params(self, n, opts):
        if self.structure == "hnsw":
            return {"m": opts.m, "ef_construction": opts.ef_construction}
        return {"lists": opts.lists or default_lists(n)}

    def knob_values(self, params, opts):
        return sweep_values(self.structure, params, opts)

    def default_knob(self, params):
        return 80 if self.structure == "hnsw" else min(32, params["lists"])

    def build(self, x, metric, params, seed=1):
        f = self.faiss
        x = _prep(x, metric)
        mt = f.METRIC_L2 if metric == "l2" else f.METRIC_INNER_PRODUCT
        d = x.shape[1]
        if self.structure == "hnsw":
            index = f.IndexHNSWFlat(d, params["m"], mt)
            index.hnsw.efConstruction = params["ef_construction"]
        else:
            quant = f.IndexFlatL2(d) if mt == f.METRIC_L2 else f.IndexFlatIP(d)
            index = f.IndexIVFFlat(quant, d, params["lists"], mt)
            index.cp.seed = seed
            index.train(_train_sample(x, params["lists"], seed))
        index.add(x)
        return index

    def set_knob(self, index, value):
        if self.structure == "hnsw":
            index.hnsw.efSearch = int(value)
        else:
            index.nprobe = int(value)

    def search(self, index, q, k, metric):
        return index.search(_prep(q, metric), k)[1]

    def size_bytes(self, index):
        return len(self.faiss.serialize_index(index))


class FaissGpu(FaissCpu):
    """Faiss GPU IVF-Flat from the faiss-gpu wheel: trained and filled on the GPU
    (GpuIndexIVFFlat, training sample of 50 rows a list as Faiss CPU here), one query a
    call or all in one call, host arrays in and out as a Python user would."""

    def build(self, x, metric, params, seed=1):
        f = self.faiss
        x = _prep(x, metric)
        mt = f.METRIC_L2 if metric == "l2" else f.METRIC_INNER_PRODUCT
        self._res = getattr(self, "_res", None) or f.StandardGpuResources()
        index = f.GpuIndexIVFFlat(self._res, x.shape[1], params["lists"], mt)
        index.train(_train_sample(x, params["lists"], seed))
        index.add(x)
        return index

    def set_knob(self, index, value):
        index.nprobe = int(value)

    def size_bytes(self, index):
        return None


class Cuvs:
    """cuVS IVF-Flat and CAGRA (cuvs-cu13 wheel), inputs/outputs through cupy."""
    kind = "faiss"

    def __init__(self, name, structure):
        import cupy
        from cuvs.common import Resources
        from cuvs.neighbors import cagra, ivf_flat
        self.cp, self.cagra, self.ivf_flat = cupy, cagra, ivf_flat
        self.name, self.structure = name, structure
        self.knob = None
        # one handle (stream, cuBLAS handle, workspace) for every call, as a server
        # would keep it: a fresh one a call would charge its setup to each query
        self.res = Resources()

    def threads(self, n):
        pass

    params = FaissCpu.params

    def knob_values(self, params, opts):
        if self.structure == "cagra":
            return [int(v) for v in opts.knobs.split(",")] if opts.knobs else \
                [16, 32, 64, 128, 256]
        return sweep_values("ivf", params, opts)

    def default_knob(self, params):
        return 64 if self.structure == "cagra" else min(32, params["lists"])

    def build(self, x, metric, params, seed=1):
        x = self.cp.asarray(_prep(x, metric))
        mt = "sqeuclidean" if metric == "l2" else "inner_product"
        if self.structure == "cagra":
            # graph degree 2m as HNSW's layer 0 (m = 16: 32), cuVS's default
            # intermediate degree (128) and graph build (IVF-PQ)
            p = self.cagra.IndexParams(metric=mt, graph_degree=2 * params.get("m", 16))
            index = self.cagra.build(p, x, resources=self.res)
        else:
            # cuVS's own k-means defaults (20 iterations on half the rows)
            p = self.ivf_flat.IndexParams(n_lists=params["lists"], metric=mt)
            index = self.ivf_flat.build(p, x, resources=self.res)
        self.res.sync()
        return index

    def set_knob(self, index, value):
        self.knob = int(value)

    def search(self, index, q, k, metric):
        qd = self.cp.asarray(_prep(q, metric))
        if self.structure == "cagra":
            sp = self.cagra.SearchParams(itopk_size=max(self.knob, k))
            _, ids = self.cagra.search(sp, index, qd, k, resources=self.res)
        else:
            sp = self.ivf_flat.SearchParams(n_probes=self.knob)
            _, ids = self.ivf_flat.search(sp, index, qd, k, resources=self.res)
        self.res.sync()
        return self.cp.asnumpy(self.cp.asarray(ids))

    def size_bytes(self, index):
        return None


def _cuda_available():
    try:
        import faiss
        return faiss.get_num_gpus() > 0
    except Exception:
        return False


def engines(names):
    """The reference engines named (faiss-ivf, faiss-hnsw, faiss-gpu-ivf: the C++ program
    of bench/faiss-gpu/ or else the faiss-gpu wheel, faiss-gpu-ivfpq: that program's
    IVF-PQ, faiss-gpu-wheel: the wheel, installed
    apart and run by wheel_sweep.py, or else in this process when its faiss is a GPU build,
    cuvs-ivf, cuvs-cagra); GPU ones are skipped with a note when no GPU or wheel is
    present."""
    out, notes = [], []
    for name in names:
        try:
            if name == "faiss-ivf":
                out.append(FaissCpu(name, "ivf"))
            elif name == "faiss-hnsw":
                out.append(FaissCpu(name, "hnsw"))
            elif name == "faiss-gpu-ivf":
                # the C++ program when it is there and a GPU is, else the faiss-gpu wheel
                cli = faiss_gpu_cli()
                if cli and gpu_present():
                    out.append(FaissGpuCli(name, cli))
                elif not _cuda_available():
                    raise RuntimeError("no GPU, or neither the Faiss GPU program "
                                       "(.faissgpu/faiss_gpu_bench) nor a faiss-gpu wheel")
                else:
                    out.append(FaissGpu(name, "ivf"))
            elif name == "faiss-gpu-ivfpq":
                cli = faiss_gpu_cli()
                if not (cli and gpu_present()):
                    raise RuntimeError("no GPU, or no Faiss GPU program "
                                       "(.faissgpu/faiss_gpu_bench)")
                out.append(FaissGpuPqCli(name, cli))
            elif name == "faiss-gpu-wheel":
                wheel = faiss_gpu_wheel(name)
                if wheel:
                    out.append(wheel)
                elif _cuda_available():
                    out.append(FaissGpu(name, "ivf"))
                else:
                    raise RuntimeError("no GPU, or no faiss-gpu wheel (BENCH_FAISS_GPU_WHEEL_SITE)")
            elif name in ("cuvs-ivf", "cuvs-cagra"):
                out.append(Cuvs(name, "cagra" if name.endswith("cagra") else "ivf"))
            else:
                raise SystemExit(f"unknown reference engine {name}")
        except (ImportError, RuntimeError, AttributeError) as e:
            notes.append(f"{name} skipped: {e}")
    return out, notes


def timed_search(engine, index, q, k, metric, one_by_one):
    """(ids, seconds per query list or total seconds)."""
    if one_by_one:
        lat, ids = [], []
        for row in q:
            t0 = time.perf_counter()
            ids.append(engine.search(index, row[None, :], k, metric)[0])
            lat.append(time.perf_counter() - t0)
        return ids, lat
    t0 = time.perf_counter()
    ids = engine.search(index, q, k, metric)
    return list(ids), time.perf_counter() - t0


class FaissGpuCli:
    """Faiss GPU IVF-Flat through a program of bench/faiss-gpu/: the C++ one (no Python
    wheel needed) or wheel_sweep.py in an interpreter of its own that imports the
    faiss-gpu wheel (its faiss module would replace faiss-cpu's in this process), run as
    `PROGRAM sweep --base B.npy --queries Q.npy --gt GT.npy
    --lists L --probes 1,2,.. --batch 1,NQ --metric M --repeats R --csv OUT.csv`.  The
    program builds its own index on the same vectors (training sample: 50 rows a list, as
    Faiss CPU here) and sweeps probes and batch sizes itself, R passes each (medians);
    its CSV has one row per (probes, batch): system,dataset_n,dim,lists,probes,batch,
    recall10,qps,p50_ms,build_s.  Batch 1 is our "1 client" column (one query a call),
    batch NQ (all the queries in one call) our "batch" column.  Recall is the program's,
    against the ground truth file we hand it (the top-10 the SQL engines are checked
    against)."""
    kind = "cli"
    structure = "ivf"
    label = "Faiss GPU IVF-Flat (no database)"

    mode = "sweep"

    def __init__(self, name, command, timeout=300, label=None, env=None):
        """command: the program (a path) or a list (interpreter, script); env: variables
        set for it (PYTHONPATH, LD_LIBRARY_PATH: prepended to this process's)."""
        self.command = [str(c) for c in ([command] if isinstance(command, str) else command)]
        self.binary = " ".join(self.command)
        self.name, self.timeout, self.env = name, timeout, env or {}
        self.label = label or self.label

    def mode_args(self, ds):
        """The mode's own options for dataset ds."""
        return []

    def threads(self, n):
        pass

    params = FaissCpu.params
    knob_values = FaissCpu.knob_values

    def default_knob(self, params):
        return min(32, params["lists"])

    def _files(self, ds, workdir):
        """(base, queries, gt) .npy paths: the cached base file, and the queries / ground
        truth actually used (the first --nq of them)."""
        workdir.mkdir(parents=True, exist_ok=True)
        nq = len(ds.queries)
        q, gt = workdir / f"queries-{nq}.npy", workdir / f"gt-{ds.metric}-{nq}.npy"
        np.save(q, np.ascontiguousarray(ds.queries, dtype=np.float32))
        np.save(gt, np.ascontiguousarray(ds.gt))
        return ds.folder / "base.npy", q, gt

    def run_sweep(self, ds, lists, probes, batches, workdir, repeats=5, timeout=None,
                  log=print):
        """One run of the program: its CSV rows as dicts (numbers as floats)."""
        import csv
        import os
        import subprocess
        base, q, gt = self._files(ds, workdir)
        out = workdir / f"{self.name}-sweep.csv"
        if out.exists():
            out.unlink()
        cmd = self.command + [self.mode, "--base", str(base), "--queries", str(q), "--gt", str(gt),
               "--lists", str(lists), "--probes", ",".join(str(p) for p in probes),
               "--batch", ",".join(str(b) for b in batches), "--metric", ds.metric,
               "--repeats", str(repeats), "--csv", str(out)] + self.mode_args(ds)
        env = os.environ.copy()
        d = os.path.dirname(os.path.abspath(self.command[-1]))
        extra = dict(self.env)
        extra["LD_LIBRARY_PATH"] = ":".join(
            [p for p in [extra.get("LD_LIBRARY_PATH")] if p] + [d, os.path.join(d, "lib")])
        for k, v in extra.items():
            env[k] = ":".join([v] + [p for p in [env.get(k)] if p])
        log("  " + " ".join(cmd))
        t0 = time.perf_counter()
        res = subprocess.run(cmd, text=True, capture_output=True, env=env,
                             timeout=timeout or self.timeout)
        lines = (res.stdout + res.stderr).strip().splitlines()
        for line in lines[-40:]:
            log(f"  | {line}")
        if res.returncode != 0:
            raise RuntimeError(f"{os.path.basename(self.command[-1])} exited {res.returncode}: "
                               + (lines[-1] if lines else ""))
        rows = []
        with open(out, newline="") as f:
            for r in csv.DictReader(f):
                rows.append({k: (v if k == "system" or v in ("", None) else float(v))
                             for k, v in r.items()})
        if not rows:
            raise RuntimeError(f"{out}: no rows")
        log(f"  {len(rows)} rows in {time.perf_counter() - t0:.1f} s")
        return rows

    def sweep_rows(self, rows, params, nq, passes):
        """The harness's search rows (one per probes value) from the program's rows."""
        out = []
        for p in sorted({int(r["probes"]) for r in rows}):
            one = [r for r in rows if int(r["probes"]) == p and int(r["batch"]) == 1]
            many = [r for r in rows if int(r["probes"]) == p and int(r["batch"]) > 1]
            row = dict(engine=self.name, params=str(params), build_s=rows[0].get("build_s"),
                       knob=p, knob_value=p)
            if one:
                row.update(recall=one[0]["recall10"], qps_1=one[0]["qps"],
                           p50_ms=one[0].get("p50_ms"), qps_1_runs=f"median of {passes}")
            if many:
                row.update(qps_batch=many[0]["qps"], recall_batch=many[0]["recall10"],
                           batch_s_runs=f"median of {passes}; batch {int(many[0]['batch'])}")
                row.setdefault("recall", many[0]["recall10"])
            out.append(row)
        return out


class FaissGpuPqCli(FaissGpuCli):
    """Faiss GPU IVF-PQ (GpuIndexIVFPQ) through the C++ program's pqsweep mode, in the
    shape of gpuivf's quantizer = 'pq' defaults: 2-d sub-spaces (M = dim / 2; dim when
    dim is odd), 8 bits, and our training's size (100 x 256 residuals, 10 iterations);
    with and without Faiss's precomputed tables (L2).  Its CSV adds m, nbits and the
    device bytes a vector; "system" names the table mode."""
    mode = "pqsweep"
    label = "Faiss GPU IVF-PQ (no database)"

    def mode_args(self, ds):
        m = ds.dim // 2 if ds.dim % 2 == 0 else ds.dim
        return ["--m", str(m), "--nbits", "8", "--pq-per-entry", "100", "--pq-niter", "10",
                "--precomputed", "0,1" if ds.metric == "l2" else "0"]


def gpu_present():
    """A GPU the programs can use: nvidia-smi lists one (BENCH_FAISS_GPU_FORCE=1 pretends,
    for dry runs of the harness with a stand-in program)."""
    import os
    import subprocess
    if os.environ.get("BENCH_FAISS_GPU_FORCE") == "1":
        return True
    try:
        res = subprocess.run(["nvidia-smi", "-L"], text=True, capture_output=True, timeout=30)
        return res.returncode == 0 and "GPU" in res.stdout
    except (OSError, subprocess.SubprocessError):
        return False


def faiss_gpu_cli():
    """Path of the Faiss GPU program (BENCH_FAISS_GPU_BIN, else .faissgpu/faiss_gpu_bench
    at the repository root), or None when it is not there."""
    import os
    from .paths import ROOT
    path = os.environ.get("BENCH_FAISS_GPU_BIN") or str(ROOT / ".faissgpu" / "faiss_gpu_bench")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def faiss_gpu_wheel(name):
    """The faiss-gpu wheel installed apart (BENCH_FAISS_GPU_WHEEL_SITE: its pip --target
    folder, with the nvidia-*-cu12 wheels it loads), run by bench/faiss-gpu/wheel_sweep.py
    in another interpreter; None when that folder is not set or no GPU is present."""
    import os
    import sys
    from .paths import ROOT
    site = os.environ.get("BENCH_FAISS_GPU_WHEEL_SITE")
    if not site or not os.path.isdir(site) or not gpu_present():
        return None
    libs = [os.path.join(site, "nvidia", c, "lib") for c in ("cuda_runtime", "cublas", "curand")]
    wheel = " ".join(w for w in ("faiss-gpu wheel", os.environ.get("BENCH_FAISS_GPU_WHEEL_VERSION"))
                     if w)
    return FaissGpuCli(name, [sys.executable, str(ROOT / "bench" / "faiss-gpu" / "wheel_sweep.py")],
                       label=f"Faiss GPU IVF-Flat, {wheel} (no database)",
                       env={"PYTHONPATH": site, "LD_LIBRARY_PATH": ":".join(libs)})
