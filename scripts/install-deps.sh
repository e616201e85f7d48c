#!/bin/bash
# Debian 12 packages gpuindex needs to build and test (root or sudo).
set -eu
pkgs="build-essential postgresql-15 postgresql-server-dev-15 postgresql-contrib
	libcmocka-dev libipc-run-perl python3 python3-psycopg python3-numpy ca-certificates"
sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing=""
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=" $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	sudo_if apt-get update -qq
	sudo_if env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
# Debian's postgresql package starts a cluster of its own; ours run
# elsewhere on their own ports, so it may stay or go.
