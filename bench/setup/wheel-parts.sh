#!/bin/bash
# Sets of wheels too large for one device call's carry (64 MiB with the working tree),
# fetched here and cut into parts that travel in consecutive calls to one warm machine:
#
#   cuvs       cuVS 26.10 for CUDA 13 (libcuvs-cu13 alone is a 241 MB wheel) and what it
#              needs beyond the GPU host's own packages, nvJitLink 13.5 among them
#              (libcuvs links against symbols of nvJitLink 13.3; the host has 13.0)
#   faiss-gpu  the Faiss GPU wheel (faiss-gpu 1.15.1: code for sm_70 to sm_90 and PTX;
#              faiss-gpu-cu12 1.14.1 holds sm_70 and sm_80 only, no kernel image for an
#              H100/H200) with its CUDA 12 runtime, cuBLAS and cuRAND (the GPU host's
#              CUDA 13 libraries have other sonames)
#
#   bash bench/setup/wheel-parts.sh SET split      # here: .wheels-SET/*.whl -> .parts/SET/p1 ..
#   bash bench/setup/wheel-parts.sh SET stash      # GPU host: this call's parts -> $PARTS_STASH/SET
#   bash bench/setup/wheel-parts.sh SET join DIR   # GPU host: all parts -> DIR/*.whl
#   bash bench/setup/wheel-parts.sh SET present    # exit 0 when any part of SET is there
#
# Ignored paths an earlier call carried do not stay on the machine, /tmp does: each call
# stashes its part (gpu-host.sh does it too).  Every part carries the sha256 of the
# whole stream, so a missing or stale part is an error, never a broken install.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
set_name=${1:?usage: wheel-parts.sh SET split|stash|join DIR|present}
case $set_name in
cuvs)
	v=${CUVS_VERSION:-26.10}
	reqs=("cuvs-cu13==$v.*" "libcuvs-cu13==$v.*" "pylibraft-cu13==$v.*" "libraft-cu13==$v.*"
		"librmm-cu13==$v.*" "rmm-cu13==$v.*" "libkvikio-cu13==$v.*" "rapids-logger==0.3.*"
		"nvidia-nvjitlink>=13.3,<14")
	;;
faiss-gpu)
	reqs=("faiss-gpu==${FAISS_GPU_VERSION:-1.15.1}" "nvidia-cuda-runtime-cu12==12.9.79"
		"nvidia-cublas-cu12==12.9.3.13" "nvidia-curand-cu12==10.3.10.19")
	;;
*)
	echo "unknown wheel set $set_name (cuvs, faiss-gpu)" >&2
	exit 2
	;;
esac
wheels=$root/.wheels-$set_name
parts=$root/.parts/$set_name
stash=${PARTS_STASH:-/tmp/wheel-parts}/$set_name
part_bytes=${PART_BYTES:-55000000}

fetch() {
	local p="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp"
	local plat
	for plat in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
		manylinux_2_17_x86_64 manylinux2014_x86_64; do
		p="$p --platform $plat"
	done
	mkdir -p "$wheels"
	# shellcheck disable=SC2086
	python3 -m pip download $p -d "$wheels" "${reqs[@]}"
}

# the parts present (carried now or stashed earlier), one path a name, in stream order
list_parts() {
	ls "$parts"/p*/part-* "$stash"/part-* 2>/dev/null | awk -F/ '{print $NF, $0}' |
		sort -k1,1 | awk '!seen[$1]++ {print $2}'
}

case ${2:-} in
split)
	[ -n "$(ls "$wheels"/*.whl 2>/dev/null)" ] || fetch
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
	echo "$set_name: $n parts of at most $part_bytes bytes under $parts (stream sha256 $sum):"
	du -b "$parts"/p* | sed 's|'"$root"'/||'
	;;
stash)
	mkdir -p "$stash"
	for d in "$parts"/p*/; do
		[ -d "$d" ] && cp "$d"part-* "$d"sha256 "$stash"/
	done
	ls -l "$stash"
	;;
present)
	[ -n "$(list_parts)" ]
	;;
join)
	dest=${3:?usage: wheel-parts.sh SET join DIR}
	mkdir -p "$dest"
	list=$(list_parts)
	[ -n "$list" ] || { echo "no $set_name parts under $parts or $stash" >&2; exit 1; }
	want=$(cat "$parts"/p*/sha256 "$stash"/sha256 2>/dev/null | sort -u)
	[ "$(echo "$want" | wc -l)" = 1 ] || { echo "$set_name parts of different streams: $want" >&2; exit 1; }
	# shellcheck disable=SC2086
	got=$(cat $list | sha256sum | cut -d' ' -f1)
	if [ "$got" != "$want" ]; then
		echo "$set_name parts incomplete or damaged ($(echo "$list" | wc -l) present): sha256 $got, want $want" >&2
		exit 1
	fi
	# shellcheck disable=SC2086
	cat $list | tar -xf - -C "$dest"
	ls "$dest"/*.whl
	;;
*)
	echo "usage: wheel-parts.sh SET split | stash | join DIR | present" >&2
	exit 2
	;;
esac
