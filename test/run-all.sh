#!/bin/bash
# The whole test suite, from a fresh Debian 12 machine:
#   installs build and test dependencies (apt-get; needs root or sudo),
#   builds and installs gpuindex, runs the C unit tests of the store,
#   the pg_regress suite, the service/index scripts and the TAP tests.
# Set GPUINDEX_SKIP_DEPS=1 to skip apt-get, GPUINDEX_TEST_DEVICE=cuda to
# run everything on the CUDA backend (GPU host), GPUINDEX_TEST_CONF to add
# settings to every test cluster (e.g. "gpuindex.service_overlap = on").
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
cd "$top"

if [ "${GPUINDEX_SKIP_DEPS:-0}" != 1 ]; then
	bash "$top/scripts/install-deps.sh" || exit 1
fi
. "$here/lib.sh"

sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

echo "== build"
make -s clean >/dev/null 2>&1
# GPUINDEX_MAKE_ARGS: e.g. with_llvm=no where clang is missing (GPU host)
make -s -j4 PG_CONFIG="$PG_CONFIG" ${GPUINDEX_MAKE_ARGS:-} || exit 1
sudo_if make -s install PG_CONFIG="$PG_CONFIG" ${GPUINDEX_MAKE_ARGS:-} >/dev/null || exit 1

status=0
summary=""
# GPUINDEX_SUITE_PARTS="pg_regress tap multi_device": only the parts named (by
# the word before any blank of their name, or a scenario's file name)
run_part() {
	local name=$1
	shift
	if [ -n "${GPUINDEX_SUITE_PARTS:-}" ]; then
		case " $GPUINDEX_SUITE_PARTS " in
		*" ${name%% *} "*) ;;
		*) return 0 ;;
		esac
	fi
	echo "== $name"
	if "$@"; then summary+="$name: ok"$'\n'; else summary+="$name: FAILED"$'\n'; status=1; fi
}

run_part "unit tests (cmocka, host store)" make -s -C test/unit run
run_part "pg_regress" bash "$here/regress.sh"
run_part "device service" bash "$here/service.sh"
run_part "tap (crash recovery, standby, promotion)" bash "$here/tap.sh"
for t in "$here"/scenarios/*.sh; do
	[ -e "$t" ] || continue
	run_part "$(basename "$t" .sh)" bash "$t"
done

echo "== summary"
printf '%s' "$summary"
parts=$(printf '%s' "$summary" | grep -c .)
failed=$(printf '%s' "$summary" | grep -c FAILED)
echo "$((parts - failed)) passed, $failed failed"
exit $status
