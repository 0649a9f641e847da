#!/usr/bin/env bash
# Installs the Debian packages sfs builds, tests and benchmarks with
# (libisal-dev: crc32c, common/crc32c.c; libmicrohttpd-dev: bin/sfs's
# /metrics server; prometheus: its promtool
# checks the metrics in tests/e2e_metrics.sh; tmux drives sfs top in
# tests/e2e_top.sh; curl scrapes).
# Idempotent: asks dpkg first, so a warm machine does no apt work at all.
# A fresh Debian image has no package lists: 'apt-get update' runs once,
# only when something is actually missing.
set -eu

PKGS="build-essential pkg-config librocksdb-dev rocksdb-tools liblz4-dev
libzstd-dev libisal-dev liburcu-dev libjemalloc-dev libnuma-dev libcriterion-dev
sqlite3 gnuplot-nox strace libmicrohttpd-dev prometheus tmux curl"

missing=""
for p in $PKGS; do
	if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
