#!/usr/bin/env bash
# e2e_layers.sh — the include graph and the call graph respect the layers
# of issue 19: no include or call from a lower layer to a higher one, no
# cycle (scripts/check-layers.sh prints both graphs and every finding).
# The calls are read from the objects of $BUILD: make test has built them
# (and sets BUILD); run alone, this builds them first with make.
set -u
cd "$(dirname "$0")/.." || exit 2
if [ -z "${BUILD:-}" ]; then
	make -s -j2 >/dev/null || { echo "not ok - call layers: make failed"; exit 1; }
fi
exec bash scripts/check-layers.sh
