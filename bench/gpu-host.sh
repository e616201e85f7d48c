#!/bin/bash
# The SQL benchmarks on a GPU host, in one command (issue 5):
#
#   bash bench/gpu-host.sh OUTDIR
#
# For a machine with a GPU, CUDA's nvcc and a python3 that has numpy and matplotlib, but
# no PostgreSQL, no psycopg and no network (this workplace's device machines).  It
#   1. unpacks PostgreSQL 15 from the carried Debian packages (tools/gpu-host/setup-postgres.sh;
#      the server runs as a non-root user) and drops Debian's llvmjit.so (no libLLVM-14);
#   2. installs the carried wheels (psycopg, psycopg-binary, faiss-cpu, cuVS; the Faiss
#      GPU wheel into a folder of its own, see below) into a target
#      folder put on PYTHONPATH (numpy, matplotlib: the machine's own);
#   3. builds and installs gpuindex (gpuindex_cuda.so too, with nvcc) and pgvector from
#      the carried Debian source, while it generates the seeded datasets with their exact
#      ground truth (PyTorch on the GPU) -- nothing of the data is carried but minilm-20k;
#   4. runs the scenarios in order of importance with gpuindex.device = cuda, each under
#      its own time limit and a --deadline a little shorter, within one overall budget
#      (BENCH_GPU_BUDGET seconds, default 470), skipping what no longer fits;
#   5. after every step refreshes OUTDIR: results.tar.gz (docs/benchmarks/gpu-TAG/: CSV,
#      PNG, markdown; gpu-host-logs/: step, build and server logs), SUMMARY.md (steps,
#      times, the result tables) and gpu-host.log (everything printed).
#
# Carried paths (ignored, from the Debian machine; see bench/README.md):
#   .gpuhost/debs              PostgreSQL 15 packages (required)
#   .benchwheels               psycopg + psycopg-binary wheels for CPython 3.12 (required)
#   .benchwheels-faiss         the faiss-cpu wheel (optional: the Faiss CPU references)
#   bench/.cache/src-trixie    pgvector's Debian source, unpacked (required for the peers)
#   .faissgpu                  the Faiss GPU IVF-Flat and IVF-PQ program (optional, bench/faiss-gpu/)
#   bench/.cache/data/minilm-20k  the real-text set (optional)
#   .parts/cuvs/pN, .parts/faiss-gpu/pN  wheels in parts (optional: the cuVS and the Faiss
#                              GPU wheel references; bench/setup/wheel-parts.sh; they come in several calls
#                              to one warm machine, each stashed, see bench/README.md)
#
# Environment (defaults in brackets):
#   GPUINDEX_BENCH_DEVICE  gpuindex.device [cuda]; cpu for a dry run on a machine without GPU
#   BENCH_GPU_PLAN         full [full] | tiny (dry run: 20K rows, 3 stream steps, short runs)
#   BENCH_GPU_BUDGET       seconds for everything before the final packaging [470]
#   BENCH_GPU_STEPS        the scenarios to run, in this order [search batchcost stream
#                          mutate build search-minilm; pqmodes when named]: one call
#                          of the device tool (10 minutes) does
#                          not hold them all with 3 repeats and 50 window steps
#   BENCH_GPU_TAG          results folder docs/benchmarks/gpu-TAG [from nvidia-smi: h200, h100]
#   BENCH_GPU_ARGS         extra bench.py arguments for every scenario (e.g. --set X=Y)
#   BENCH_GPU_DEADLINE_MARGIN  seconds between a step's --deadline and its hard limit
#                          [limit/6, at least 25]
#   BENCH_PYTHON [python3], BENCH_WHEELS [.benchwheels .benchwheels-faiss: folders],
#   BENCH_PG_DEBS [.gpuhost/debs],
#   BENCH_PG_PREFIX [/tmp/pg-bench], BENCH_WORK [/tmp/gpuindex-gpu-bench], BENCH_PORT [54395]
set -u
t_start=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
[ $# -ge 1 ] || { echo "usage: bash bench/gpu-host.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
cd "$root" || exit 1

device=${GPUINDEX_BENCH_DEVICE:-cuda}
plan=${BENCH_GPU_PLAN:-full}
budget=${BENCH_GPU_BUDGET:-470}
py=${BENCH_PYTHON:-python3}
wheels=${BENCH_WHEELS:-$root/.benchwheels $root/.benchwheels-faiss}
debs=${BENCH_PG_DEBS:-$root/.gpuhost/debs}
prefix=${BENCH_PG_PREFIX:-/tmp/pg-bench}
work=${BENCH_WORK:-/tmp/gpuindex-gpu-bench}
port=${BENCH_PORT:-54395}
site=$work/site
steps_sel=" ${BENCH_GPU_STEPS:-search batchcost stream mutate build search-minilm} "
export root here out work device plan py wheels debs prefix site steps_sel
want() { case $steps_sel in *" $1 "*) return 0 ;; esac; return 1; }

rm -rf "$work"
mkdir -p "$work/logs" "$work/results"
exec > >(tee -a "$out/gpu-host.log") 2>&1
export PYTHONUNBUFFERED=1

# A full run takes several calls to one warm machine, each carrying what fits; the
# machine keeps /tmp between calls but not the paths an earlier call carried.  So what
# this call carried is stashed, and what it did not is restored from the stash.
carry_stash=${BENCH_CARRY_STASH:-/tmp/gpuindex-carry}
for p in .gpuhost/debs .benchwheels .benchwheels-faiss .faissgpu bench/.cache/src-trixie \
	bench/.cache/data/minilm-20k; do
	if [ -e "$root/$p" ]; then
		mkdir -p "$carry_stash/$(dirname "$p")"
		rm -rf "${carry_stash:?}/$p"
		cp -a "$root/$p" "$carry_stash/$p"
	elif [ -e "$carry_stash/$p" ]; then
		mkdir -p "$root/$(dirname "$p")"
		cp -a "$carry_stash/$p" "$root/$p"
		echo "restored $p (carried by an earlier call)"
	fi
done
for set in cuvs faiss-gpu; do
	ls "$root"/.parts/$set/p*/part-* >/dev/null 2>&1 &&
		bash "$here/setup/wheel-parts.sh" $set stash >/dev/null
done

# GPU and the results' folder name
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
gpu_present=0
[ -n "$gpu" ] && gpu_present=1
export gpu gpu_present
if [ -z "${BENCH_GPU_TAG:-}" ]; then
	if [ "$device" = cuda ] && [ -n "$gpu" ]; then
		BENCH_GPU_TAG=$(echo "${gpu%%,*}" | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/ .*//; s/[^a-z0-9]/-/g')
	else
		BENCH_GPU_TAG=dryrun-$device
	fi
fi
results=$work/results/docs/benchmarks/gpu-$BENCH_GPU_TAG
mkdir -p "$results"
export BENCH_OUT=$results

left() { echo $((t_start + budget - $(date +%s))); }
stamp() { date -u +%H:%M:%S; }
steps=$work/steps.tsv
printf 'step\tstatus\tseconds\n' >"$steps"

package() {
	# results + logs into OUTDIR (at most a few files: the device tool returns 8)
	mkdir -p "$work/results/gpu-host-logs"
	cp "$work"/logs/*.log "$work/results/gpu-host-logs/" 2>/dev/null
	for d in "$work"/clusters/*/; do
		[ -f "$d/server.log" ] && tail -c 2000000 "$d/server.log" \
			>"$work/results/gpu-host-logs/server-$(basename "$d").log"
	done
	tar -C "$work/results" -czf "$out/results.tar.gz.tmp" . && mv "$out/results.tar.gz.tmp" "$out/results.tar.gz"
	{
		echo "# gpuindex SQL benchmarks on a GPU host ($BENCH_GPU_TAG)"
		echo
		echo "- started $(date -u -d @"$t_start" '+%Y-%m-%d %H:%M:%S') UTC, budget ${budget} s, plan $plan, gpuindex.device = $device"
		echo "- GPU: ${gpu:-none}; CPU: $(nproc) cores; python: $("$py" --version 2>&1)"
		grep -h '^- gpuindex_backend\|^- gpu:\|^- gpuindex_so' "$results"/*.md 2>/dev/null | sort | uniq -c |
			sed 's/^ *\([0-9]*\) - /- (\1 result files) /'
		echo "- results: results.tar.gz (extract at the repository root: docs/benchmarks/gpu-$BENCH_GPU_TAG/, gpu-host-logs/)"
		echo
		echo "| step | status | seconds |"
		echo "|---|---|---|"
		tail -n +2 "$steps" | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
		echo
		# the result tables without the environment lines (in the .md files); the search
		# on the synthetic set last, where the end of the printed output shows it
		for f in "$results"/build*.md "$results"/mutate*.md "$results"/stream*.md \
			"$results"/search-minilm*.md "$results"/search-synth*.md; do
			[ -f "$f" ] || continue
			echo "---"
			echo
			grep -v '^!\[\|^CSV: \|^- \(cpu\|memory_gib\|os\|postgres\|gpuindex_commit\|python\|numpy\|ext_vector\|ext_gpuindex\|faiss\|gpuindex_so\|date\|settings\|options\|dataset\|gpu\):' "$f" |
				sed 's/^# /## /'
		done
	} >"$out/SUMMARY.md"
}

record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$steps"; }

# run_step NAME MAX_SECONDS MIN_SECONDS command...: the command under `timeout`, limited
# to what the budget has left; skipped when less than MIN_SECONDS is left
run_step() {
	local name=$1 max=$2 min=$3 l t t0 rc status
	shift 3
	l=$(left)
	if [ "$l" -lt "$min" ]; then
		echo "== $name: skipped, ${l} s of the budget left (needs $min)"
		record "$name" "skipped (budget)" 0
		return 3
	fi
	t=$((max < l ? max : l))
	echo "== $name (limit ${t} s) $(stamp)"
	t0=$(date +%s)
	# functions of this script run in a child bash (exported with export -f)
	STEP_LIMIT=$t timeout -k 20 "$t" bash -c '"$@"' "$name" "$@" 2>&1 | tee "$work/logs/$name.log"
	rc=${PIPESTATUS[0]}
	case $rc in
	0) status=ok ;;
	124 | 137) status="timed out after ${t} s" ;;
	*) status="failed (exit $rc)" ;;
	esac
	echo "== $name: $status in $(($(date +%s) - t0)) s"
	record "$name" "$status" $(($(date +%s) - t0))
	package
	return $rc
}

echo "== gpu-host.sh $(date -u '+%Y-%m-%d %H:%M:%S') UTC: device $device, plan $plan, budget ${budget} s, tag $BENCH_GPU_TAG"
echo "GPU: ${gpu:-none}"
command -v nvcc >/dev/null && nvcc --version | tail -2
echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
free -g | head -2
df -h /dev/shm /tmp 2>/dev/null
"$py" -c 'import sys, numpy, matplotlib; print("python", sys.version.split()[0], sys.executable, "numpy", numpy.__version__, "matplotlib", matplotlib.__version__)' ||
	{ echo "FATAL: $py lacks numpy/matplotlib"; record python failed 0; package; exit 1; }
[ -f /etc/os-release ] && . /etc/os-release && echo "OS: $PRETTY_NAME"
git -C "$root" rev-parse HEAD 2>/dev/null | sed 's/^/commit: /'

# ---- 1. PostgreSQL from the carried packages ---------------------------------------------
setup_pg() {
	bash "$root/tools/gpu-host/setup-postgres.sh" "$debs" "$prefix" >"$work/pg.env" || return 1
	# the server user must read the tree; no libLLVM-14 here: no JIT provider
	chmod -R a+rX "$prefix"
	rm -f "$prefix"/usr/lib/postgresql/*/lib/llvmjit*.so
	. "$work/pg.env"
	"$PG_BIN/postgres" --version && "$PG_CONFIG" --version
}
export -f setup_pg
run_step postgres 120 10 setup_pg || { echo "FATAL: no PostgreSQL"; package; exit 1; }
. "$work/pg.env"
export PG_PREFIX PG_BIN PATH LD_LIBRARY_PATH PG_CONFIG PG_USER
. "$root/test/lib.sh"
command -v clang-14 >/dev/null || export GPUINDEX_MAKE_ARGS="with_llvm=no ${GPUINDEX_MAKE_ARGS:-}"

# ---- 2. wheels -------------------------------------------------------------------------
# The Faiss GPU wheel goes to a folder of its own: its faiss module would replace
# faiss-cpu's, and the Faiss CPU references want faiss-cpu (its CPU code is built per
# instruction set: IVF-Flat's k-means took 20 s on 1M x 128 under faiss-gpu-cu12, 2.1 s
# under faiss-cpu, on one H200 host).  bench/faiss-gpu/wheel_sweep.py runs it apart.
site_faiss_gpu=$work/site-faiss-gpu
export site_faiss_gpu

install_wheels() {
	local list set extra= apart=
	# the wheel sets that come in parts (carried now or stashed by earlier calls)
	for set in cuvs faiss-gpu; do
		bash "$here/setup/wheel-parts.sh" $set present || continue
		if ! bash "$here/setup/wheel-parts.sh" $set join "$work/parts-$set" >/dev/null; then
			echo "NOTE: the $set wheels are incomplete: its references are left out"
		elif [ $set = faiss-gpu ]; then
			apart=$work/parts-$set
		else
			extra="$extra $work/parts-$set"
		fi
	done
	# shellcheck disable=SC2086
	list=$(find $wheels $extra -name '*.whl' 2>/dev/null | sort)
	[ -n "$list" ] || { echo "no wheels under $wheels"; return 1; }
	echo "$list" | sed 's|.*/|  |'
	# shellcheck disable=SC2086
	"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
		--target "$site" $list || return 1
	PYTHONPATH=$site "$py" -c 'import psycopg; print("psycopg", psycopg.__version__, psycopg.pq.__impl__, "libpq", psycopg.pq.version())' || return 1
	PYTHONPATH=$site "$py" -c 'import faiss; print("faiss", faiss.__version__)' ||
		echo "NOTE: faiss not importable: the Faiss CPU references are left out"
	if [ -n "$apart" ]; then
		list=$(find "$apart" -name '*.whl' | sort)
		echo "$list" | sed 's|.*/|  (apart) |'
		# shellcheck disable=SC2086
		"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
			--target "$site_faiss_gpu" $list || echo "NOTE: the Faiss GPU wheel did not install"
		# Faiss GPU IVF-Flat probing every list of a small index: exact
		PYTHONPATH=$site_faiss_gpu "$py" - <<'PY' || echo "NOTE: the Faiss GPU wheel does not run here: its references are left out"
import numpy as np, faiss
rng = np.random.default_rng(7)
x = rng.standard_normal((20000, 64), dtype=np.float32)
q = x[:100] + 0.01 * rng.standard_normal((100, 64), dtype=np.float32)
want = np.argsort(((q[:, None, :] - x[None, :, :]) ** 2).sum(-1), axis=1)[:, :10]
res = faiss.StandardGpuResources()
i = faiss.GpuIndexIVFFlat(res, 64, 64, faiss.METRIC_L2)
i.train(x)
i.add(x)
i.nprobe = 64
got = i.search(q, 10)[1]
r = np.mean([len(set(a) & set(w)) / 10 for a, w in zip(got, want)])
assert r > 0.999, r
print(f"faiss-gpu {faiss.__version__}: IVF-Flat all lists recall {r:.3f}")
PY
	fi
	case $extra in
	*parts-cuvs*)
		# cuVS: a small IVF-Flat and CAGRA index on the GPU, checked against brute force
		PYTHONPATH=$site "$py" - <<'PY' || echo "NOTE: cuVS does not run here: the cuVS references are left out"
import cupy as cp, numpy as np, cuvs
from cuvs.neighbors import cagra, ivf_flat
rng = np.random.default_rng(7)
x = rng.standard_normal((20000, 64), dtype=np.float32)
q = x[:100] + 0.01 * rng.standard_normal((100, 64), dtype=np.float32)
want = np.argsort(((q[:, None, :] - x[None, :, :]) ** 2).sum(-1), axis=1)[:, :10]
xd, qd = cp.asarray(x), cp.asarray(q)
i = ivf_flat.build(ivf_flat.IndexParams(n_lists=64), xd)
_, a = ivf_flat.search(ivf_flat.SearchParams(n_probes=64), i, qd, 10)
g = cagra.build(cagra.IndexParams(graph_degree=32), xd)
_, b = cagra.search(cagra.SearchParams(itopk_size=64), g, qd, 10)
ra = np.mean([len(set(r) & set(w)) / 10 for r, w in zip(cp.asnumpy(cp.asarray(a)), want)])
rb = np.mean([len(set(r) & set(w)) / 10 for r, w in zip(cp.asnumpy(cp.asarray(b)), want)])
# all lists probed: IVF-Flat is exact; CAGRA on unclustered Gaussian data (the hardest
# case for a graph) found 0.875 at itopk 64 on an H200
assert ra > 0.999 and rb > 0.8, (ra, rb)
print(f"cuvs {cuvs.__version__}: IVF-Flat all lists recall {ra:.3f}, CAGRA recall {rb:.3f}")
PY
		;;
	esac
	return 0
}
export -f install_wheels
run_step wheels 180 10 install_wheels || { echo "FATAL: no psycopg"; package; exit 1; }
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
cuvs_ok=0
grep -q '^cuvs .*CAGRA recall' "$work/logs/wheels.log" 2>/dev/null && cuvs_ok=1
faiss_gpu_ok=0
if grep -q '^faiss-gpu .*recall' "$work/logs/wheels.log" 2>/dev/null; then
	faiss_gpu_ok=1
	export BENCH_FAISS_GPU_WHEEL_SITE=$site_faiss_gpu
	BENCH_FAISS_GPU_WHEEL_VERSION=$(sed -n 's/^faiss-gpu \([^:]*\):.*/\1/p' "$work/logs/wheels.log" | head -1)
	export BENCH_FAISS_GPU_WHEEL_VERSION
fi
faiss_cpu=0
"$py" -c 'import faiss' 2>/dev/null && faiss_cpu=1

# ---- 3. builds (in the background) and data -------------------------------------------
case $plan in
tiny) search_ds=synth-20k-128 big_ds=synth-20k-128 pq_ds=synth-20k-128 ;;
*) search_ds=synth-500k-128 big_ds=synth-1m-128 pq_ds=synth-450k-128 ;;
esac
minilm=0
[ -f "$root/bench/.cache/data/minilm-20k/meta.json" ] && minilm=1

build_all() {
	echo "-- gpuindex: make -j$(nproc) ${GPUINDEX_MAKE_ARGS:-}"
	make -s -C "$root" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" ${GPUINDEX_MAKE_ARGS:-} || return 1
	make -s -C "$root" PG_CONFIG="$PG_CONFIG" ${GPUINDEX_MAKE_ARGS:-} install || return 1
	echo "-- pgvector"
	bash "$here/setup/pgvector.sh" || echo "WARNING: pgvector failed: its engines are left out"
	chmod -R a+rX "$prefix"
	ls -l "$($PG_CONFIG --pkglibdir)"/{gpuindex,gpuindex_cuda,vector}.so 2>&1
}
export -f build_all
t_build=$(date +%s)
export t_build
rm -f "$work/build.rc"
(timeout -k 20 400 bash -c build_all >"$work/logs/compile-bg.log" 2>&1
	echo $? >"$work/build.rc") &

prepare_data() {
	local gtdev=
	[ "$gpu_present" = 1 ] && gtdev=cuda
	BENCH_GT_DEVICE=$gtdev "$py" - "$@" <<'EOF'
import sys, time
sys.path.insert(0, "bench")
from gibench import datasets
for name in sys.argv[1:]:
    t0 = time.time()
    ds = datasets.load(name)
    print(f"{name}: {ds.base.shape[0]} x {ds.dim}, {len(ds.queries)} queries, "
          f"ground truth {ds.gt.shape}, {time.time() - t0:.1f} s", flush=True)
EOF
}
export -f prepare_data
data_sets=
want search && data_sets=$search_ds
# batchcost makes its own 1,000-row table; the scenario still loads a (small) dataset
want batchcost && case " $data_sets " in *" synth-20k-128 "*) ;; *) data_sets="$data_sets synth-20k-128" ;; esac
if want stream || want mutate || want build; then
	case " $data_sets " in *" $big_ds "*) ;; *) data_sets="$data_sets $big_ds" ;; esac
fi
want pqmodes && case " $data_sets " in *" $pq_ds "*) ;; *) data_sets="$data_sets $pq_ds" ;; esac
# shellcheck disable=SC2086
run_step data 240 30 prepare_data $data_sets

wait_build() {
	while [ ! -s "$work/build.rc" ]; do sleep 1; done
	cat "$work/logs/compile-bg.log"
	echo "build + install: $(($(date +%s) - t_build)) s (exit $(cat "$work/build.rc"))"
	[ "$(cat "$work/build.rc")" = 0 ]
}
export -f wait_build
run_step compile 400 5 wait_build || { echo "FATAL: gpuindex did not build"; package; exit 1; }
libdir=$($PG_CONFIG --pkglibdir)
if [ "$device" = cuda ] && [ ! -f "$libdir/gpuindex_cuda.so" ]; then
	echo "WARNING: gpuindex.device = cuda but no gpuindex_cuda.so was built (nvcc?)"
fi

# ---- 4. scenarios ------------------------------------------------------------------------
cdir=/tmp/gpuindex-bench-c1
cn=1
mkdir -p "$work/clusters"

force_stop() {
	# after a failed or timed-out step: stop the server whatever it is doing, and use a
	# fresh directory and port from now on (a server that would not stop cannot block us)
	local pid
	as_pg "pg_ctl -D '$cdir/data' -m immediate -w -t 20 stop" >/dev/null 2>&1
	pid=$(head -1 "$cdir/data/postmaster.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	cn=$((cn + 1))
	cdir=/tmp/gpuindex-bench-c$cn
	port=$((port + 1))
}

# bench NAME MAX MIN [--fresh|--reuse] [--last] bench.py-arguments...
bench() {
	local name=$1 max=$2 min=$3 mode=--fresh last="" rc
	shift 3
	[ "${1:-}" = --reuse ] && { mode=--reuse; shift; }
	[ "${1:-}" = --fresh ] && shift
	[ "${1:-}" = --last ] && { last=1; shift; }
	# shellcheck disable=SC2206
	local extra=(--device "$device" --dir "$cdir" --port "$port" --keep ${BENCH_GPU_ARGS:-})
	[ $mode = --reuse ] && extra+=(--reuse)
	run_step "$name" "$max" "$min" bash -c '
		m=${BENCH_GPU_DEADLINE_MARGIN:-$(( STEP_LIMIT / 6 > 25 ? STEP_LIMIT / 6 : 25 ))}
		d=$(( STEP_LIMIT - m ))
		[ $d -lt 10 ] && d=10
		exec "$0" "$@" --deadline $d' "$py" "$here/bench.py" "$@" "${extra[@]}"
	rc=$?
	mkdir -p "$work/clusters/c$cn"
	cp "$cdir/server.log" "$work/clusters/c$cn/server.log" 2>/dev/null
	if [ $rc != 0 ] && [ $rc != 3 ]; then
		force_stop
	elif [ -n "$last" ]; then
		cluster_stop "$cdir"
	fi
	return 0
}

refs_search=faiss-gpu-ivf
[ $faiss_cpu = 1 ] && refs_search=faiss-gpu-ivf,faiss-ivf,faiss-hnsw
refs_build=faiss-gpu-ivf
[ $faiss_cpu = 1 ] && refs_build=faiss-gpu-ivf,faiss-ivf
if [ $cuvs_ok = 1 ]; then
	refs_search=$refs_search,cuvs-ivf,cuvs-cagra
	refs_build=$refs_build,cuvs-ivf,cuvs-cagra
fi
if [ $faiss_gpu_ok = 1 ]; then
	refs_search=$refs_search,faiss-gpu-wheel
	refs_build=$refs_build,faiss-gpu-wheel
fi
echo "references: search $refs_search; build $refs_build"
# pqmodes' GPU peer: the program's IVF-PQ
refs_pq=none
if [ -x "$root/.faissgpu/faiss_gpu_bench" ] || [ -n "${BENCH_FAISS_GPU_BIN:-}" ]; then
	echo "Faiss GPU program: ${BENCH_FAISS_GPU_BIN:-$root/.faissgpu/faiss_gpu_bench}"
	refs_pq=faiss-gpu-ivfpq
else
	echo "NOTE: no .faissgpu/faiss_gpu_bench: the Faiss GPU reference is left out"
fi

# each step runs when BENCH_GPU_STEPS names it; a stream/mutate/build group shares one
# loaded cluster (--reuse), so the first of them that runs loads it (--fresh)
fresh_big=--fresh
big() { big_mode=$fresh_big; fresh_big=--reuse; }
if [ "$plan" = tiny ]; then
	want search && bench search 200 20 --fresh --last search --dataset "$search_ds" --nq 100 \
		--repeats 2 --seconds 1 --clients 8 --probes 1,4,16,64 --ef-search 20,80 \
		--refs "$refs_search"
	want batchcost && bench batchcost 90 20 --fresh --last batchcost --dataset synth-20k-128 \
		--engines gpuivf,ivfflat,hnsw --refs none --repeats 2
	want stream && big && bench stream 150 20 "$big_mode" stream --dataset "$big_ds" \
		--engines gpuivf,ivfflat --window 5000 --batch 1000 --steps 3 --searches 50 --nq 100 \
		--refs none --repeats 2
	want mutate && big && bench mutate 120 20 "$big_mode" mutate --dataset "$big_ds" \
		--engines gpuivf,ivfflat --rows 20000 --inserts 50 --deletes 3 --nq 100 --refs none \
		--repeats 2
	want build && big && bench build 120 20 "$big_mode" --last build --dataset "$big_ds" --engines gpuivf,ivfflat \
		--repeats 2 --nq 100 --refs "$refs_build"
	want search-minilm && [ $minilm = 1 ] && bench search-minilm 200 30 --fresh --last search \
		--dataset minilm-20k --nq 100 --repeats 2 --seconds 1 --clients 8 --probes 1,8,32 \
		--ef-search 40 --refs "$refs_search"
	want pqmodes && bench pqmodes 120 20 --fresh --last pqmodes --dataset "$pq_ds" \
		--engines gpuivf_pq,gpuivf_pq4 --probes 8 --nq 100 --repeats 2 --refs none
else
	# 500K x 128: the data of the VM's search results (same generator, seed, queries, lists
	# 707); probes to 64 (recall ~0.995), ef_search 20 to 320; medians of 3
	want search && bench search 480 120 --fresh --last search --dataset "$search_ds" \
		--nq 300 --repeats 3 --seconds 2 --clients 8 --probes 1,2,4,8,16,32,64 \
		--ef-search 20,40,80,160,320 --refs "$refs_search"
	# the batch statement's cost with a negligible scan (a 1,000-row 8-d table): what of
	# the search step's batch time is not the GPU's (24 s in the dry run here)
	want batchcost && bench batchcost 90 20 --fresh --last batchcost --dataset synth-20k-128 \
		--engines gpuivf,ivfflat,hnsw --refs none
	# 1M x 128: the issue's window W = 200K, B = 10K, 50 steps (HNSW left out: one
	# DELETE + VACUUM of 10K rows took 345 s on the VM), then 1M-row mutations and CREATE
	# INDEX on the same loaded cluster
	want stream && big && bench stream 300 60 "$big_mode" stream --dataset "$big_ds" \
		--engines gpuivf,ivfflat --window 200000 --batch 10000 --steps 50 --searches 100 \
		--nq 300 --refs none
	want mutate && big && bench mutate 110 45 "$big_mode" mutate --dataset "$big_ds" \
		--engines gpuivf,ivfflat --rows 1000000 --nq 300 --refs none
	# 540 s: HNSW's three 80-s builds at 1M fit beside the others only with that much
	want build && big && bench build 540 60 "$big_mode" --last build --dataset "$big_ds" \
		--engines gpuivf,ivfflat,hnsw --repeats 3 --nq 300 --refs "$refs_build"
	want search-minilm && [ $minilm = 1 ] && bench search-minilm 240 45 --fresh --last search \
		--dataset minilm-20k --nq 300 --repeats 3 --seconds 2 --clients 8 \
		--probes 1,2,4,8,16,32,64 --ef-search 20,40,80,160 --refs "$refs_search"
	# docs/pq.md's set: 450K x 128, 700 lists, 8-bit and 4-bit codes, every search mode
	want pqmodes && bench pqmodes 300 60 --fresh --last pqmodes --dataset "$pq_ds" --lists 700 \
		--engines gpuivf_pq,gpuivf_pq4,gpuivf_pq4d1,gpuivf --probes 8,32 --nq 1000 --repeats 3 \
		--refs "$refs_pq"
fi

# ---- 5. leave nothing running, package ---------------------------------------------------
for d in /tmp/gpuindex-bench-c*/; do
	[ -f "$d/data/postmaster.pid" ] && cluster_stop "${d%/}"
done
echo "== done in $(($(date +%s) - t_start)) s (budget $budget s)"
package
cat "$steps"
ls -l "$out"
echo "== SUMMARY.md"
cat "$out/SUMMARY.md"
# exit status: 0 when every step that ran ended well (steps skipped for the budget and
# measurements cut by a --deadline are in SUMMARY.md and the reports)
! tail -n +2 "$steps" | cut -f2 | grep -qv '^ok$\|^skipped'
