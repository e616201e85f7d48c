#!/bin/bash
# Seismic (pyseismic-lsr) for a GPU host, whose Python is 3.12 while Seismic's only wheel
# is for CPython 3.11: on the Debian machine, put Debian 12's Python 3.11 packages and a
# site folder with numpy and pyseismic-lsr (tests and build tools left out) into DIR:
#
#   bash tools/gpu-host/fetch-seismic-python.sh .seismic311     # about 14 MB
#
# Carry DIR; bench/sparse/gpu-host.sh finds .seismic311 there, unpacks it under /tmp and
# runs the Seismic peer with it (BENCH_SEISMIC_PYTHON).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1" && dir=$(cd "$1" && pwd)
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
chmod 777 "$work"
(cd "$work" && apt-get download python3.11-minimal libpython3.11-minimal libpython3.11-stdlib)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
	--implementation cp --platform manylinux_2_34_x86_64 --platform manylinux_2_17_x86_64 \
	--platform manylinux2014_x86_64 -d "$work" numpy==1.26.4 pyseismic-lsr==0.5.4
mkdir "$work/site"
for w in "$work"/*.whl; do (cd "$work/site" && python3 -m zipfile -e "$w" .); done
find "$work/site" -type d -name tests -prune -exec rm -rf {} +
rm -rf "$work"/site/numpy/{f2py,distutils,_pyinstaller,doc}
find "$work/site" -name '*.pyi' -delete
rm -f "$dir"/*.deb "$dir/site311.tar.xz"
cp "$work"/*.deb "$dir/"
tar cJf "$dir/site311.tar.xz" -C "$work/site" .
du -sh "$dir"
