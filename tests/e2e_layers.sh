#!/usr/bin/env bash
# e2e_layers.sh — the include graph respects the layers of issue 19: no
# include from a lower layer to a higher one, no cycle
# (scripts/check-layers.sh prints the graph and every finding).
set -u
cd "$(dirname "$0")/.." || exit 2
exec bash scripts/check-layers.sh
