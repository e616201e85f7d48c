"""No-database references on the same vectors: Faiss CPU (IVF-Flat, HNSW-Flat) always;
Faiss GPU IVF-Flat and cuVS IVF-Flat / CAGRA when a GPU and their wheels are present.
Each engine: build(x, metric, params) -> handle; search(handle, q, k, knob) -> ids."""
import time

import numpy as np

from .engines import HNSW_EF, IVF_PROBES, default_lists


def _prep(x, metric):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if metric == "cosine":
        n = np.linalg.norm(x, axis=1, keepdims=True)
        n[n == 0] = 1
        x = x / n
    return x


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
        if opts.knobs:
            return [int(v) for v in opts.knobs.split(",")]
        if self.structure == "hnsw":
            return list(HNSW_EF)
        return [p for p in IVF_PROBES if p <= params["lists"]]

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
            # train on a sample like pgvector's IVFFlat (50 rows per list)
            rng = np.random.default_rng(seed)
            m = min(len(x), 50 * params["lists"])
            index.train(x[np.sort(rng.choice(len(x), m, replace=False))])
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
    """Faiss GPU IVF-Flat (faiss-gpu wheels): same API, index moved to device 0."""

    def build(self, x, metric, params, seed=1):
        f = self.faiss
        cpu = super().build(x, metric, params, seed)
        self._res = getattr(self, "_res", None) or f.StandardGpuResources()
        return f.index_cpu_to_gpu(self._res, 0, cpu)

    def set_knob(self, index, value):
        index.nprobe = int(value)

    def size_bytes(self, index):
        return None


class Cuvs:
    """cuVS IVF-Flat and CAGRA (cuvs-cu13 wheel), inputs/outputs through cupy."""
    kind = "faiss"

    def __init__(self, name, structure):
        import cupy
        from cuvs.neighbors import cagra, ivf_flat
        self.cp, self.cagra, self.ivf_flat = cupy, cagra, ivf_flat
        self.name, self.structure = name, structure
        self.knob = None

    def threads(self, n):
        pass

    params = FaissCpu.params

    def knob_values(self, params, opts):
        if opts.knobs:
            return [int(v) for v in opts.knobs.split(",")]
        if self.structure == "cagra":
            return [16, 32, 64, 128, 256]
        return [p for p in IVF_PROBES if p <= params["lists"]]

    def default_knob(self, params):
        return 64 if self.structure == "cagra" else min(32, params["lists"])

    def build(self, x, metric, params, seed=1):
        x = self.cp.asarray(_prep(x, metric))
        mt = "sqeuclidean" if metric == "l2" else "inner_product"
        if self.structure == "cagra":
            p = self.cagra.IndexParams(metric=mt, graph_degree=2 * params.get("m", 16))
            return self.cagra.build(p, x)
        p = self.ivf_flat.IndexParams(n_lists=params["lists"], metric=mt)
        return self.ivf_flat.build(p, x)

    def set_knob(self, index, value):
        self.knob = int(value)

    def search(self, index, q, k, metric):
        qd = self.cp.asarray(_prep(q, metric))
        if self.structure == "cagra":
            sp = self.cagra.SearchParams(itopk_size=max(self.knob, k))
            _, ids = self.cagra.search(sp, index, qd, k)
        else:
            sp = self.ivf_flat.SearchParams(n_probes=self.knob)
            _, ids = self.ivf_flat.search(sp, index, qd, k)
        self.cp.cuda.runtime.deviceSynchronize()
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
    """The reference engines named (faiss-ivf, faiss-hnsw, faiss-gpu-ivf, cuvs-ivf,
    cuvs-cagra); GPU ones are skipped with a note when no GPU or wheel is present."""
    out, notes = [], []
    for name in names:
        try:
            if name == "faiss-ivf":
                out.append(FaissCpu(name, "ivf"))
            elif name == "faiss-hnsw":
                out.append(FaissCpu(name, "hnsw"))
            elif name == "faiss-gpu-ivf":
                if not _cuda_available():
                    raise RuntimeError("no GPU visible to faiss")
                out.append(FaissGpu(name, "ivf"))
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
