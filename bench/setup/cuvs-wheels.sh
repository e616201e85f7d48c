#!/bin/bash
# The cuVS wheels (cuvs-cu13 and what it needs beyond the GPU host's own packages),
# fetched here and cut into parts that each fit one device call's carry (64 MiB with the
# working tree), because libcuvs-cu13 alone is a 241 MB wheel.  nvJitLink comes too:
# libcuvs 26.10 links against symbols of nvJitLink 13.3, the GPU host has 13.0.
#
#   bash bench/setup/cuvs-wheels.sh split      # here: .cuvswheels/*.whl -> .cuvs/p1 .. pN
#   bash bench/setup/cuvs-wheels.sh join DIR   # GPU host: the parts -> DIR/*.whl
#
# The parts travel in consecutive calls to one warm machine (ignored paths stay there
# between calls; `join` also looks in $CUVS_PARTS_STASH, where each call can copy its
# part); see bench/README.md.  Every part carries the sha256 of the whole stream, so a
# missing or stale part is an error, never a broken install.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
wheels=$root/.cuvswheels
parts=$root/.cuvs
stash=${CUVS_PARTS_STASH:-/tmp/cuvs-parts}
version=${CUVS_VERSION:-26.10}
part_bytes=${CUVS_PART_BYTES:-55000000}

fetch() {
	local p="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp"
	local plat
	for plat in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
		manylinux_2_17_x86_64 manylinux2014_x86_64; do
		p="$p --platform $plat"
	done
	mkdir -p "$wheels"
	# shellcheck disable=SC2086
	python3 -m pip download $p -d "$wheels" "cuvs-cu13==$version.*" "libcuvs-cu13==$version.*" \
		"pylibraft-cu13==$version.*" "libraft-cu13==$version.*" "librmm-cu13==$version.*" \
		"rmm-cu13==$version.*" "libkvikio-cu13==$version.*" "rapids-logger==0.3.*" \
		"nvidia-nvjitlink>=13.3,<14"
}

case ${1:-} in
split)
	ls "$wheels"/libcuvs_cu13-*.whl >/dev/null 2>&1 || fetch
	rm -rf "$parts" && mkdir -p "$parts/tmp"
	(cd "$wheels" && tar -cf - ./*.whl) | split -b "$part_bytes" -d -a 2 - "$parts/tmp/part-"
	sum=$(cat "$parts"/tmp/part-* | sha256sum | cut -d' ' -f1)
	n=0
	for f in "$parts"/tmp/part-*; do
		n=$((n + 1))
		mkdir -p "$parts/p$n"
		mv "$f" "$parts/p$n/"
		echo "$sum" >"$parts/p$n/sha256"
	done
	rmdir "$parts/tmp"
	echo "$n parts of at most $part_bytes bytes under $parts (stream sha256 $sum):"
	du -b "$parts"/p* | sed 's|'"$root"'/||'
	;;
join)
	dest=${2:?usage: cuvs-wheels.sh join DIR}
	mkdir -p "$dest"
	# the parts: carried ones under .cuvs/, else those stashed by earlier calls
	list=$(ls "$parts"/p*/part-* "$stash"/part-* 2>/dev/null | awk -F/ '{print $NF, $0}' |
		sort -k1,1 | awk '!seen[$1]++ {print $2}')
	[ -n "$list" ] || { echo "no cuVS parts under $parts or $stash" >&2; exit 1; }
	want=$(cat "$parts"/p*/sha256 "$stash"/sha256 2>/dev/null | sort -u)
	[ "$(echo "$want" | wc -l)" = 1 ] || { echo "cuVS parts of different streams: $want" >&2; exit 1; }
	# shellcheck disable=SC2086
	got=$(cat $list | sha256sum | cut -d' ' -f1)
	if [ "$got" != "$want" ]; then
		echo "cuVS parts incomplete or damaged ($(echo "$list" | wc -l) present): sha256 $got, want $want" >&2
		exit 1
	fi
	# shellcheck disable=SC2086
	cat $list | tar -xf - -C "$dest"
	ls "$dest"/*.whl
	;;
stash)
	# copy the carried parts out of the working tree (a later call may not carry them)
	mkdir -p "$stash"
	for d in "$parts"/p*/; do
		[ -d "$d" ] && cp "$d"part-* "$d"sha256 "$stash"/
	done
	ls -l "$stash"
	;;
*)
	echo "usage: cuvs-wheels.sh split | join DIR | stash" >&2
	exit 2
	;;
esac
