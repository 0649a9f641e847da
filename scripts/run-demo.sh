#!/usr/bin/env bash
# make run: the main job — Nexmark q4 on 1M events with the default backend
# (sfs on the table target; SFS_BACKEND=memory for the in-memory baseline),
# one worker per core, a barrier every second,
# as a supervised group; prints the summary.  Knobs: SFS_QUERY, SFS_EVENTS,
# SFS_WORKERS, SFS_BACKEND.
set -eu
BIN=${SFS_BIN:-$PWD/bin}
QUERY=${SFS_QUERY:-q4}
EVENTS=${SFS_EVENTS:-1000000}
WORKERS=${SFS_WORKERS:-$(nproc)}
BACKEND=${SFS_BACKEND:-table}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

"$BIN/sfs" run --query "$QUERY" --events "$EVENTS" --workers "$WORKERS" --backend "$BACKEND" \
	--checkpoint-interval 1000 --data "$OUT/data" --output "$OUT/$QUERY.csv" 2>"$OUT/log"
echo "== result: $(($(wc -l <"$OUT/$QUERY.csv") - 1)) rows; first lines:"
head -n 4 "$OUT/$QUERY.csv"
