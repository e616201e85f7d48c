#!/bin/bash
# Fetches Debian's own source package of pgvector (suite BENCH_PGVECTOR_SUITE, default
# trixie) with apt-get's source download, using a private sources list and private apt
# state under bench/.cache/apt (the system's apt configuration is not touched), builds it
# with PGXS against $PG_CONFIG and installs it.  Nothing fetched is ever committed:
# everything lands under bench/.cache/.  Idempotent: skips what is already done.
# A machine without Debian's archive (a GPU host) uses a carried bench/.cache/src-trixie/
# (built objects from another machine in it are cleaned first).  BENCH_PGXS_ARGS: extra
# make arguments; with_llvm=no is added when the server's clang (JIT bitcode) is missing.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
: "${PG_CONFIG:=pg_config}"
suite=${BENCH_PGVECTOR_SUITE:-trixie}
mirror=${BENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=${BENCH_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
cache=$here/.cache
apt=$cache/apt-$suite
src=$cache/src-$suite
sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

srcdir=$(ls -d "$src"/pgvector-*/ 2>/dev/null | head -1 || true)
if [ -z "$srcdir" ]; then
	command -v dpkg-source >/dev/null || sudo_if apt-get install -y -qq dpkg-dev >/dev/null
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$src"
	echo "deb-src [signed-by=$keyring] $mirror $suite main" >"$apt/sources.list"
	opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State=$apt" -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
		-o APT::Sandbox::User=root)
	echo "bench: fetching pgvector's Debian source package from $suite" >&2
	apt-get "${opts[@]}" -qq update >&2
	(cd "$src" && apt-get "${opts[@]}" -qq source pgvector >&2)
	srcdir=$(ls -d "$src"/pgvector-*/ | head -1)
fi
libdir=$($PG_CONFIG --pkglibdir)
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$srcdir/vector.control")
# a stamp per installation target, so a pgvector from elsewhere is never taken for ours
stamp=$srcdir/.installed-$(echo "$libdir" | md5sum | cut -c1-12)
if [ -f "$stamp" ] && [ -f "$libdir/vector.so" ] && [ "${BENCH_REBUILD:-0}" != 1 ]; then
	echo "bench: pgvector $version (Debian source, $suite) already installed in $libdir" >&2
else
	# shellcheck disable=SC2206
	args=(PG_CONFIG="$PG_CONFIG" ${BENCH_PGXS_ARGS:-})
	global=$(dirname "$(dirname "$($PG_CONFIG --pgxs)")")/Makefile.global
	clang=$(sed -n 's/^CLANG[[:space:]]*=[[:space:]]*//p' "$global" 2>/dev/null | head -1)
	if grep -q '^with_llvm[[:space:]]*=[[:space:]]*yes' "$global" 2>/dev/null &&
		! command -v "${clang:-clang}" >/dev/null 2>&1; then
		args+=(with_llvm=no)    # no clang here (a GPU host): no JIT bitcode
	fi
	echo "bench: building pgvector $version ($srcdir) against $($PG_CONFIG --version)" \
		"${args[*]:1}" >&2
	# objects built elsewhere (a carried tree) or for another server: start clean
	[ ! -f "$srcdir/vector.so" ] || make -s -C "$srcdir" "${args[@]}" clean >&2
	make -s -C "$srcdir" "${args[@]}" -j"$(nproc)" >&2
	sudo_if make -s -C "$srcdir" "${args[@]}" install >&2
	touch "$stamp"
fi
echo "$version"
