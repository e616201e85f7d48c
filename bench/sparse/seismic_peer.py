"""Seismic (pyseismic-lsr, CPU, approximate) as a peer: builds and searches, timed.

run.py judges and reports what measure() returns. It imports this module when its own
interpreter has `seismic`; otherwise (pyseismic-lsr has a CPython 3.11 wheel only) it saves
the collection and the queries to an .npz and runs this file under another interpreter
(BENCH_SEISMIC_PYTHON), which needs numpy and seismic alone:

  python3.11 bench/sparse/seismic_peer.py DATA.npz SPEC.json OUT.json

DATA.npz: dim, qptr/qidx/qval (the queries' CSR arrays), and per block i offI, ptrI, idxI,
valI. SPEC.json: builds, searches, repeats, k, seconds (0: no deadline). OUT.json: the
result of measure().
"""
import gc
import json
import sys
import time

import numpy as np


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def measure(blocks, dim, queries, builds, searches, repeats, k, seconds=0, log=_log):
    """blocks: [(first row, indptr, indices, data)]; queries: (indptr, indices, data).

    Returns {"version", "notes", "runs": [{"build", "spec", "build_s", "load_s",
    "settings": [{"query_cut", "heap_factor", "passes", "lat", "found", "bpasses",
    "bfound"}]}]}: pass times and latencies in seconds, found ids per query.
    """
    import seismic
    from importlib.metadata import version

    t_start = time.time()

    def left():
        return float("inf") if not seconds else seconds - (time.time() - t_start)

    st = seismic.get_seismic_string()
    large = dim > 65535
    Dataset = seismic.SeismicDatasetLV if large else seismic.SeismicDataset
    Index = seismic.SeismicIndexLV if large else seismic.SeismicIndex
    qptr, qidx, qval = queries
    n = len(qptr) - 1
    qids = np.array([str(i) for i in range(n)], dtype=st)
    comps = [np.array([str(t) for t in qidx[qptr[i]:qptr[i + 1]]], dtype=st) for i in range(n)]
    vals = [np.asarray(qval[qptr[i]:qptr[i + 1]], dtype=np.float32) for i in range(n)]
    out = {"version": version("pyseismic-lsr"), "notes": [], "runs": []}
    for bi, spec in enumerate(builds.split(",")):
        npost, cf, se, mf = spec.split(":")
        bname = f"n_postings {npost}, centroid_fraction {cf}, summary_energy {se}, max_fraction {mf}"
        if left() <= 60:
            out["notes"].append(f"seismic: deadline reached before the build {bname}")
            break
        t0 = time.perf_counter()
        dset = Dataset(dim=dim)
        for off, ptr, idx, val in blocks:
            dset.add_documents_by_id([str(off + i) for i in range(len(ptr) - 1)],
                                     idx.astype(np.int64), val.astype(np.float32),
                                     ptr.astype(np.int64))
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = Index.build_from_dataset(dset, n_postings=int(npost), centroid_fraction=float(cf),
                                         summary_energy=float(se), max_fraction=float(mf))
        build_s = time.perf_counter() - t0
        del dset
        log(f"bench: seismic build ({bname}): {build_s:.1f} s (+{load_s:.1f} s to load)")
        run = {"build": bi + 1, "spec": spec, "name": bname, "build_s": build_s,
               "load_s": load_s, "settings": []}
        out["runs"].append(run)
        for sspec in searches.split(","):
            qc, hf = sspec.split(":")
            qc, hf = int(qc), float(hf)
            if left() <= 20:
                out["notes"].append(f"seismic: deadline reached, settings from query_cut {qc}, "
                                    f"heap_factor {hf} on left out")
                break
            for i in range(min(20, n)):
                index.search(str(i), comps[i], vals[i], k, qc, hf)
            passes, lat, found = [], [], None
            for _ in range(repeats):
                t = time.perf_counter()
                res = []
                for i in range(n):
                    s0 = time.perf_counter()
                    res.append([int(x[2]) for x in index.search(qids[i], comps[i], vals[i],
                                                                 k, qc, hf)])
                    lat.append(time.perf_counter() - s0)
                passes.append(time.perf_counter() - t)
                found = res
            bpasses = []
            for _ in range(repeats):
                t = time.perf_counter()
                bres = index.batch_search(qids, comps, vals, k, qc, hf, num_threads=0)
                bpasses.append(time.perf_counter() - t)
            # batch_search answers in the order its threads finish: map by query id
            bmap = {r[0][0]: [int(x[2]) for x in r] for r in bres if r}
            run["settings"].append({"query_cut": qc, "heap_factor": hf, "passes": passes,
                                    "lat": lat, "found": found, "bpasses": bpasses,
                                    "bfound": [bmap.get(str(i), []) for i in range(n)]})
        del index
        gc.collect()
    return out


def save_input(path, blocks, queries, dim):
    """The .npz the script reads: blocks as [(first row, csr)], queries as one csr."""
    arrs = {"dim": np.int64(dim), "qptr": queries.indptr, "qidx": queries.indices,
            "qval": queries.data, "nblocks": np.int64(len(blocks))}
    for i, (off, b) in enumerate(blocks):
        arrs[f"off{i}"] = np.int64(off)
        arrs[f"ptr{i}"], arrs[f"idx{i}"], arrs[f"val{i}"] = b.indptr, b.indices, b.data
    np.savez(path, **arrs)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    data = np.load(argv[1])
    with open(argv[2]) as f:
        spec = json.load(f)
    blocks = [(int(data[f"off{i}"]), data[f"ptr{i}"], data[f"idx{i}"], data[f"val{i}"])
              for i in range(int(data["nblocks"]))]
    out = measure(blocks, int(data["dim"]), (data["qptr"], data["qidx"], data["qval"]),
                  spec["builds"], spec["searches"], spec["repeats"], spec["k"],
                  spec.get("seconds", 0))
    with open(argv[3], "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
