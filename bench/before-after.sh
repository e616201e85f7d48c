#!/bin/bash
# The code before a change against the code after it, on one GPU host in one call:
# the store benchmark (bench/store) and the SQL search benchmark (gpuivf only), each
# tree built from its own sources, run back to back on the same GPU, alternating.
#
#   bash bench/before-after.sh OUTDIR
#
# The old tree is .baseline/ (a `git archive` extraction, ignored through .git/info/exclude,
# carried), the new tree is the repository root.  Both are copied under BA_WORK (no build
# output of either travels or is reused) and each is built there (make -jN: gpuindex.so,
# gpuindex_cuda.so, bench/store/bench_store.run) and installed into a PostgreSQL prefix of
# its own, unpacked from the carried Debian packages (tools/gpu-host/setup-postgres.sh).
# Then, in rounds (old first in odd rounds, new first in even ones):
#   store  each tree's bench_store.run on its own gpuindex_cuda.so: N = 1M, d 128, 1,024
#          lists (no 4,096-list run): ingestion, memory, search sweep, delete, window;
#   sql    bench.py search, gpuivf only (no pgvector, no references), on one dataset made
#          once for both (default synth-500k-128, the docs' data: 300 queries, lists 707),
#          probes around recall 0.95 (8,16,32), 1 client and the batch API, medians of 3;
#          each tree on its own cluster (loaded in its first round, stopped between runs).
# Every step runs under `timeout` inside one budget (BA_BUDGET); a round that no longer
# fits is skipped.  After every run OUTDIR is refreshed with before-after.md (the table,
# old / new / new÷old, device, date), store.csv, sql.csv, before-after.log and raw.tar.gz
# (every run's CSV and output, build and server logs): partial results survive a kill.
#
# Carried (ignored paths): .baseline, .gpuhost/debs, .benchwheels (psycopg for cp312).
#
# Environment [default]:
#   BA_BUDGET [540] seconds for everything      BA_STEPS ["store sql"]
#   GPUINDEX_BENCH_DEVICE [cuda] gpuindex.device of the SQL runs (cpu: dry run)
#   BA_STORE_MODULE [cuda] the store benchmark's module: cuda (each tree's gpuindex_cuda.so)
#                   or stub (each tree's bench/faiss-gpu/synth_stub.c: dry run, no GPU)
#   BA_STORE_N [1000000]   BA_STORE_ROUNDS [4]
#   BA_DATASET [synth-500k-128]  BA_NQ [300]  BA_PROBES [8,16,32]  BA_REPEATS [3]
#   BA_SQL_ROUNDS [4]      BA_RUN_LIMIT [300] seconds at most for one run of either benchmark
#   BA_OLD [.baseline]  BA_NEW [repository root]  BA_JOBS [nproc]  BA_MAKE_ARGS [with_llvm=no]
#   BA_WORK [/tmp/gpuindex-before-after]  BA_PG_BASE [BA_WORK/pg]  BA_PORT [54396, and +1]
#   BA_PG_DEBS [.gpuhost/debs]  BA_WHEELS [.benchwheels]  BENCH_PYTHON [python3]
set -u
t_start=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
[ $# -ge 1 ] || { echo "usage: bash bench/before-after.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)

budget=${BA_BUDGET:-540}
steps_sel=" ${BA_STEPS:-store sql} "
device=${GPUINDEX_BENCH_DEVICE:-cuda}
module=${BA_STORE_MODULE:-cuda}
store_n=${BA_STORE_N:-1000000}
store_rounds=${BA_STORE_ROUNDS:-4}
dataset=${BA_DATASET:-synth-500k-128}
nq=${BA_NQ:-300}
probes=${BA_PROBES:-8,16,32}
repeats=${BA_REPEATS:-3}
sql_rounds=${BA_SQL_ROUNDS:-4}
run_limit=${BA_RUN_LIMIT:-300}
old_src=${BA_OLD:-$root/.baseline}
new_src=${BA_NEW:-$root}
jobs=${BA_JOBS:-$(nproc)}
make_args=${BA_MAKE_ARGS:-with_llvm=no}
work=${BA_WORK:-/tmp/gpuindex-before-after}
pgbase=${BA_PG_BASE:-$work/pg}
port=${BA_PORT:-54396}
debs=${BA_PG_DEBS:-$root/.gpuhost/debs}
wheels=${BA_WHEELS:-$root/.benchwheels}
py=${BENCH_PYTHON:-python3}
raw=$work/raw
gpu=
export budget device module store_n dataset nq probes repeats old_src new_src jobs make_args \
	work pgbase port debs wheels py raw root here gpu
want() { case $steps_sel in *" $1 "*) return 0 ;; esac; return 1; }

case $work in /tmp/?* | /work/?* | /opt/?*) ;; *) echo "BA_WORK=$work: refusing to clear it" >&2; exit 2 ;; esac
rm -rf "$work"
mkdir -p "$raw/store" "$raw/sql" "$raw/logs" "$pgbase"
exec > >(tee -a "$out/before-after.log") 2>&1
export PYTHONUNBUFFERED=1

left() { echo $((t_start + budget - $(date +%s))); }
stamp() { date -u +%H:%M:%S; }
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$raw/steps.tsv"; }
printf 'step\tstatus\tseconds\n' >"$raw/steps.tsv"
meta() { printf '%s\t%s\n' "$1" "$2" >>"$raw/meta.tsv"; }
: >"$raw/meta.tsv"

# the table (bench/before-after-table.py) and the raw files into OUTDIR, after every run
package() {
	"$py" "$here/before-after-table.py" "$raw" "$out" >/dev/null 2>"$raw/logs/table.err" ||
		{ echo "NOTE: the table script failed:"; cat "$raw/logs/table.err"; }
	tar -C "$raw" -czf "$out/raw.tar.gz.tmp" . && mv "$out/raw.tar.gz.tmp" "$out/raw.tar.gz"
}

# step NAME MAX MIN command...: the command under `timeout` (at most what the budget has
# left), output in raw/logs/NAME.log; skipped when less than MIN seconds are left
step() {
	local name=$1 max=$2 min=$3 l t t0 rc status
	shift 3
	l=$(left)
	if [ "$l" -lt "$min" ]; then
		echo "== $name: skipped, ${l} s of the budget left (needs $min)"
		record "$name" "skipped (budget)" 0
		LAST_SECONDS=0
		return 3
	fi
	t=$((max < l ? max : l))
	echo "== $name (limit ${t} s) $(stamp)"
	t0=$(date +%s)
	# functions of this script run in a child bash (export -f below)
	STEP_LIMIT=$t timeout -k 15 "$t" bash -c '"$@"' "$name" "$@" >"$raw/logs/$name.log" 2>&1
	rc=$?
	case $rc in
	0) status=ok ;;
	124 | 137) status="timed out after ${t} s" ;;
	*) status="failed (exit $rc)" ;;
	esac
	LAST_SECONDS=$(($(date +%s) - t0))
	echo "== $name: $status in ${LAST_SECONDS} s"
	record "$name" "$status" "$LAST_SECONDS"
	return $rc
}

echo "== before-after.sh $(date -u '+%Y-%m-%d %H:%M:%S') UTC: budget ${budget} s, steps${steps_sel}, device $device, store module $module"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
export gpu
echo "GPU: ${gpu:-none}"
meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"
meta gpu "${gpu:-none}"
meta clocks "$(nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null | head -1)"
meta nvcc "$(nvcc --version 2>/dev/null | grep -o "release [0-9.]*, V[0-9.]*")"
meta cpu "$(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
meta os "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
meta python "$("$py" --version 2>&1)"
meta device "$device"
meta module "$module"
meta store_n "$store_n"
meta dataset "$dataset"
meta nq "$nq"
meta probes "$probes"
meta repeats "$repeats"
meta budget "$budget"
"$py" -c 'import numpy, matplotlib' || { echo "FATAL: $py lacks numpy/matplotlib"; exit 1; }
[ -f "$old_src/Makefile" ] || { echo "FATAL: no old tree at $old_src (carry .baseline)"; exit 1; }
meta old_commit "$(cat "$old_src/BASELINE_COMMIT" 2>/dev/null || echo "?")"
if git -C "$new_src" rev-parse --show-toplevel 2>/dev/null | grep -qx "$new_src"; then
	meta new_commit "$(git -C "$new_src" log -1 --format='%h %s' | cut -c1-80)"
	meta new_dirty "$(git -C "$new_src" status --short -uno 2>/dev/null | wc -l) modified tracked files, as git saw them there"
else
	meta new_commit "no git metadata"
	meta new_dirty "-"
fi

# ---- 1. the two trees, PostgreSQL for each, the wheels ----------------------------------
# the fingerprint of a tree's sources (compare with the same command where it came from:
# cd TREE && find src cuda bench/store Makefile -type f ... | sort | xargs cat | sha1sum)
src_hash() {
	(cd "$1" && find src cuda bench/store Makefile -type f \( -name '*.c' -o -name '*.h' \
		-o -name '*.cu' -o -name '*.cuh' -o -name 'Makefile' -o -name '*.sql' \) | LC_ALL=C sort |
		xargs cat | sha1sum | cut -c1-12)
}
copy_tree() {
	rm -rf "$2" && mkdir -p "$2" || return 1
	# no top-level dot folder (.git, .baseline, carried things), no cache, no build output
	tar -C "$1" --exclude='./.*' --exclude=./bench/.cache --exclude='*.o' --exclude='*.so' \
		--exclude='*.run' --exclude='*.bc' --exclude='./gpuindex--*.sql' -cf - . | tar -C "$2" -xf -
}
setup() {
	local side s pgs=$root/tools/gpu-host/setup-postgres.sh
	[ -f "$pgs" ] || pgs=$root/test/gpu/setup-postgres.sh
	copy_tree "$old_src" "$work/old" && copy_tree "$new_src" "$work/new" || return 1
	for side in old new; do
		s=$pgbase/$side
		rm -rf "$s"
		bash "$pgs" "$debs" "$s" >"$work/pg-$side.env" || return 1
		chmod -R a+rX "$s"
		rm -f "$s"/usr/lib/postgresql/*/lib/llvmjit*.so
		(. "$work/pg-$side.env" && "$PG_BIN/postgres" --version) || return 1
	done
	if [ -d "$wheels" ]; then
		"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
			--target "$work/site" "$wheels"/*.whl || return 1
	fi
	PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH} "$py" -c \
		'import psycopg; print("psycopg", psycopg.__version__, psycopg.pq.__impl__)'
}
export -f src_hash copy_tree setup
step setup 120 20 setup || { cat "$raw/logs/setup.log"; package; exit 1; }
tail -n 3 "$raw/logs/setup.log"
export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
meta old_src_hash "$(src_hash "$work/old")"
meta new_src_hash "$(src_hash "$work/new")"

# ---- 2. builds (both trees at once, in the background) and the dataset -------------------
build_side() {
	local side=$1 t=$work/$1 inc
	(
		set -e
		. "$work/pg-$side.env"
		echo "-- $side: make -j$jobs $make_args ($(src_hash "$t"))"
		# shellcheck disable=SC2086
		make -s -C "$t" -j"$jobs" PG_CONFIG="$PG_CONFIG" $make_args
		# shellcheck disable=SC2086
		make -s -C "$t" PG_CONFIG="$PG_CONFIG" $make_args install
		make -s -C "$t/bench/store" bench_store.run
		if [ "$module" = stub ]; then
			inc=$(cd "$t" && find src cuda -name '*.h' -printf '-I%h\n' | LC_ALL=C sort -u | sed "s|^-I|-I$t/|")
			# shellcheck disable=SC2086
			gcc -std=gnu99 -O2 -fPIC -shared $inc -o "$t/bench/store/synth_stub.so" \
				"$t/bench/faiss-gpu/synth_stub.c"
		fi
		chmod -R a+rX "$pgbase/$side"
		ls -l "$($PG_CONFIG --pkglibdir)"/gpuindex*.so
	)
}
build_all() {
	local pids=() rc=0 side
	for side in old new; do
		build_side $side >"$raw/logs/build-$side.log" 2>&1 &
		pids+=($!)
	done
	for side in 0 1; do wait "${pids[$side]}" || rc=1; done
	tail -n 25 "$raw/logs/build-old.log" "$raw/logs/build-new.log"
	return $rc
}
export -f build_side build_all
t_build=$(date +%s)
( step build 300 60 build_all; echo $? >"$work/build.rc" ) &
build_job=$!

prepare_data() {
	local gtdev=
	[ -n "$gpu" ] && gtdev=cuda
	BENCH_GT_DEVICE=$gtdev "$py" - "$dataset" <<'EOF'
import sys, time
sys.path.insert(0, "bench")
from gibench import datasets
t0 = time.time()
ds = datasets.load(sys.argv[1])
print(f"{sys.argv[1]}: {ds.base.shape[0]} x {ds.dim}, {len(ds.queries)} queries, "
      f"ground truth {ds.gt.shape}, {time.time() - t0:.1f} s", flush=True)
EOF
}
export -f prepare_data
data_ok=0
if want sql; then
	(cd "$root" && step data 240 30 prepare_data) && data_ok=1
	tail -n 2 "$raw/logs/data.log"
fi
wait $build_job
if [ "$(cat "$work/build.rc" 2>/dev/null)" != 0 ]; then
	grep -v '^$' "$raw/logs/build.log" | tail -n 40
	echo "FATAL: a tree did not build (logs in raw.tar.gz: logs/build-old.log, build-new.log)"
	package
	exit 1
fi
for side in old new; do
	lib=$(. "$work/pg-$side.env" && "$PG_CONFIG" --pkglibdir)
	for f in gpuindex.so gpuindex_cuda.so; do
		[ -f "$lib/$f" ] && meta "${side}_$f" "sha1 $(sha1sum <"$lib/$f" | cut -c1-12)"
	done
done
package

# ---- 3. the rounds --------------------------------------------------------------------
store_module_of() {
	case $module in
	stub) echo "$work/$1/bench/store/synth_stub.so" ;;
	*) echo "$work/$1/gpuindex_cuda.so" ;;
	esac
}
store_one() {
	local side=$1 r=$2 d
	d=$raw/store/$side-r$r
	mkdir -p "$d"
	BENCH_N=$store_n "$work/$side/bench/store/bench_store.run" "$(store_module_of "$side")" "$d"
}

cdir_of() { echo "$work/c-$1"; }
port_of() { [ "$1" = old ] && echo "$port" || echo $((port + 1)); }
# a side's cluster: pg_ctl as the server user, with that side's PostgreSQL
pg_side() {
	local side=$1
	shift
	(. "$work/pg-$side.env" && export PG_PREFIX PG_BIN PATH LD_LIBRARY_PATH PG_CONFIG PG_USER &&
		. "$root/test/lib.sh" && "$@")
}
pg_ctl_start() { as_pg "pg_ctl -D '$1/data' -l '$1/server.log' -w -t 60 start >/dev/null"; }
pg_ctl_stop() {
	local pid
	as_pg "pg_ctl -D '$1/data' -m fast -w -t 30 stop >/dev/null 2>&1" ||
		as_pg "pg_ctl -D '$1/data' -m immediate -w -t 20 stop >/dev/null 2>&1"
	pid=$(head -1 "$1/data/postmaster.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	return 0
}
sql_one() {
	local side=$1 r=$2 c extra=() m d
	c=$(cdir_of "$side")
	if [ -f "$work/loaded-$side" ]; then
		pg_side "$side" pg_ctl_start "$c" || { echo "restart of $c failed"; rm -f "$work/loaded-$side"; }
	fi
	[ -f "$work/loaded-$side" ] && extra=(--reuse)
	m=$((STEP_LIMIT / 6 > 20 ? STEP_LIMIT / 6 : 20))
	d=$((STEP_LIMIT - m))
	[ $d -lt 10 ] && d=10
	pg_side "$side" env BENCH_OUT="$raw/sql" "$py" "$root/bench/bench.py" search \
		--dataset "$dataset" --nq "$nq" --repeats "$repeats" --clients "" --probes "$probes" \
		--engines gpuivf --refs none --device "$device" --dir "$c" --port "$(port_of "$side")" \
		--keep --tag "$side-r$r" --deadline "$d" "${extra[@]}"
}
sql_after() {
	# the side's server stops between runs (only one server is up at any time); its log
	# is kept; a failed run's cluster is made afresh next time
	local side=$1 rc=$2 c
	c=$(cdir_of "$side")
	[ -f "$c/data/postmaster.pid" ] && pg_side "$side" pg_ctl_stop "$c"
	cp "$c/server.log" "$raw/logs/server-$side.log" 2>/dev/null
	if [ "$rc" = 0 ]; then touch "$work/loaded-$side"; else rm -f "$work/loaded-$side"; fi
}

export -f store_module_of store_one cdir_of port_of pg_side pg_ctl_start pg_ctl_stop sql_one
est_store=30    # a first guess of one store run (N = 1M on an H200: ~20 s), then the longest measured
est_sql=45      # a first SQL run (cluster, 500K rows loaded, index, sweep), then measured
final_reserve=15
rounds=$((store_rounds > sql_rounds ? store_rounds : sql_rounds))
for ((r = 1; r <= rounds; r++)); do
	order="old new"
	[ $((r % 2)) = 0 ] && order="new old"
	if want store && [ "$r" -le "$store_rounds" ]; then
		if [ "$(left)" -lt $((2 * est_store + final_reserve)) ]; then
			echo "== store round $r: skipped, $(left) s left (a pair needs ~$((2 * est_store)) s)"
			record "store-r$r" "skipped (budget)" 0
		else
			for side in $order; do
				step "store-$side-r$r" "$run_limit" 20 store_one "$side" "$r"
				[ "$LAST_SECONDS" -gt "$est_store" ] && est_store=$LAST_SECONDS
				grep -E "^\| (ingest|delete|window)" "$raw/logs/store-$side-r$r.log" |
					grep -E "helpers -1|wall ms|7 sets" | cut -c1-150 | head -n 4
				package
			done
		fi
	fi
	if want sql && [ $data_ok = 1 ] && [ "$r" -le "$sql_rounds" ]; then
		if [ "$(left)" -lt $((2 * est_sql + final_reserve)) ]; then
			echo "== sql round $r: skipped, $(left) s left (a pair needs ~$((2 * est_sql)) s)"
			record "sql-r$r" "skipped (budget)" 0
		else
			round_max=0
			for side in $order; do
				step "sql-$side-r$r" "$run_limit" 30 sql_one "$side" "$r"
				rc=$?
				sql_after "$side" $rc
				[ "$LAST_SECONDS" -gt "$round_max" ] && round_max=$LAST_SECONDS
				grep -E "gpuivf.probes|backend|FAILED|Error" "$raw/logs/sql-$side-r$r.log" | cut -c1-160 | head -n 6
				package
			done
			# the next round reuses the loaded clusters: this round's longest run is the
			# estimate (the first round's, with the loading, errs on the safe side)
			est_sql=$round_max
		fi
	fi
done

# ---- 4. leave nothing running; the table ----------------------------------------------------
for side in old new; do
	c=$(cdir_of "$side")
	[ -f "$c/data/postmaster.pid" ] && pg_side "$side" pg_ctl_stop "$c"
done
echo "== done in $(($(date +%s) - t_start)) s (budget $budget s)"
package
ls -l "$out"
echo
cat "$out/before-after.md"
! tail -n +2 "$raw/steps.tsv" | cut -f2 | grep -qv '^ok$\|^skipped'
