# Shared helpers for gpuindex's test and demo scripts (sourced, not run).
#
# PostgreSQL refuses to run as root, so the server runs as $PG_USER
# (default: postgres, which Debian's packages create); everything it reads
# and writes lives under a scratch directory that user owns.

: "${PG_CONFIG:=pg_config}"
: "${PG_USER:=postgres}"
PG_BIN=${PG_BIN:-$($PG_CONFIG --bindir)}
export PG_CONFIG PG_USER PG_BIN

# run a command as the PostgreSQL user (or as ourselves when not root)
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		su "$PG_USER" -s /bin/bash -c "export PATH='$PG_BIN':\$PATH LD_LIBRARY_PATH='${LD_LIBRARY_PATH:-}'; $*"
	else
		bash -c "export PATH='$PG_BIN':\$PATH; $*"
	fi
}

# make a directory the PostgreSQL user owns
pg_scratch() {
	mkdir -p "$1"
	if [ "$(id -u)" = 0 ]; then chown "$PG_USER" "$1"; fi
}

# cluster_start DIR PORT [extra postgresql.conf lines...]
cluster_start() {
	local dir=$1 port=$2
	shift 2
	pg_scratch "$dir"
	as_pg "initdb -D '$dir/data' -A trust -U postgres --no-sync >'$dir/initdb.log' 2>&1" ||
		{ cat "$dir/initdb.log"; return 1; }
	{
		echo "port = $port"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "fsync = off"
		echo "max_connections = 50"
		for line in "$@"; do echo "$line"; done
		# GPUINDEX_TEST_CONF: more settings for every test cluster, after the test's own
		# (e.g. "gpuindex.service_overlap = on" to run every scenario with flights)
		if [ -n "${GPUINDEX_TEST_CONF:-}" ]; then echo "$GPUINDEX_TEST_CONF"; fi
	} >>"$dir/data/postgresql.conf"
	as_pg "pg_ctl -D '$dir/data' -l '$dir/server.log' -w -t 60 start >/dev/null" ||
		{ cat "$dir/server.log"; return 1; }
}

cluster_stop() {
	as_pg "pg_ctl -D '$1/data' -m fast -w stop >/dev/null 2>&1" || true
}

# remove a test's directory (clusters, logs) unless GPUINDEX_TEST_KEEP=1
scratch_remove() {
	[ "${GPUINDEX_TEST_KEEP:-0}" = 1 ] && return 0
	rm -rf "$1" 2>/dev/null || as_pg "rm -rf '$1'" || true
}

# at the script's exit: stop its cluster in DIR, and remove DIR when the
# script passed (a failed one keeps it, for its logs)
cluster_cleanup_on_exit() {
	trap "rc=\$?; cluster_stop '$1'; [ \$rc = 0 ] && scratch_remove '$1'" EXIT
}

# psql against the test cluster: cluster_psql DIR PORT [psql args...]
cluster_psql() {
	local dir=$1 port=$2
	shift 2
	local args=""
	for a in "$@"; do args+=" $(printf '%q' "$a")"; done
	as_pg "psql -X -q -v ON_ERROR_STOP=1 -h '$dir' -p $port -U postgres -d postgres $args"
}

# Single searches of a table's own rows (id 1 .. n, a real[] column v),
# each timed into the table lat(ms): timed_searches DIR PORT TABLE N
# "SETTINGS" DELAY PAUSE (seconds before the first, between two)
timed_searches() {
	cluster_psql "$1" "$2" -Atc "$5
	  DO \$\$ DECLARE t0 timestamptz; qv real[]; n int; BEGIN
	    PERFORM pg_sleep($6);
	    FOR i IN 1 .. $4 LOOP
	      SELECT v INTO qv FROM $3 WHERE id = i;
	      t0 := clock_timestamp();
	      SELECT count(*) INTO n FROM (SELECT id FROM $3 ORDER BY v <-> qv LIMIT 10) s;
	      INSERT INTO lat VALUES (extract(epoch FROM clock_timestamp() - t0) * 1000);
	      PERFORM pg_sleep($7);
	    END LOOP; END \$\$"
}

# count|p99|max|p50 (ms) of the timings in lat: latency_stats DIR PORT
latency_stats() {
	cluster_psql "$1" "$2" -Atc "SELECT count(*), round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2),
	  round(max(ms)::numeric, 2), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) FROM lat"
}

# the plain closing line CI reads: "N passed, N failed"
TESTS_PASSED=0
TESTS_FAILED=0
pass() { TESTS_PASSED=$((TESTS_PASSED + 1)); echo "ok - $*"; }
fail() { TESTS_FAILED=$((TESTS_FAILED + 1)); echo "FAILED - $*"; }
check() {
	# check NAME EXPECTED ACTUAL
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; return 1; fi
}
