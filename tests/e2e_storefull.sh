#!/usr/bin/env bash
# e2e_storefull.sh — a memory-backend run whose state outgrows --store-mb
# stops: exit 1 within a timeout (it never waits for ever on a flush that
# cannot succeed), one stderr line naming the full store and what to do
# (raise --store-mb, or use --backend table), and its last completed
# checkpoint listed valid by `sfs checkpoints`.  TAP-style lines.
# SFS_STOREFULL_EVENTS, SFS_STOREFULL_MB size the run.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_STOREFULL_EVENTS:-2000000}
MB=${SFS_STOREFULL_MB:-8}
OUT=$(mktemp -d)
job=e2e-sf-$$
fails=0

ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }

cleanup() {
	pkill -9 -f -- "--job $job " 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$job*
	rm -rf "$OUT"
}
trap cleanup EXIT

# Throttled so that checkpoints complete before the store fills.
start=$(date +%s)
timeout 120 "$SFS" run --job "$job" --query q20 --backend memory --events "$EVENTS" \
	--store-mb "$MB" --workers 1 --checkpoint-interval 100 --max-rate 40000 \
	--data "$OUT/data" --json >"$OUT/run.json" 2>"$OUT/run.err"
rc=$?
secs=$(($(date +%s) - start))
said=$(grep -c "memory store 0 is full.*raise --store-mb or use --backend table" "$OUT/run.err")
if [ $rc -eq 1 ] && [ "$said" -eq 1 ]; then
	ok "a full store stops the run: exit 1 after ${secs}s, $(grep -o 'memory store 0 is full.*' "$OUT/run.err")"
else
	nok "a full store stops the run: exit $rc after ${secs}s (124: it waited), the line said $said times"
	grep -v '^  ' "$OUT/run.err" | tail -n 8 | sed 's/^/# /'
fi
"$SFS" checkpoints --data "$OUT/data" --json >"$OUT/ck.json" 2>"$OUT/ck.err"
valid=$(grep -o '"valid": true' "$OUT/ck.json" | wc -l)
if grep -q '"checkpoints": \[{"id": [0-9]*, "valid": true' "$OUT/ck.json" &&
   ! grep -q '"valid": false' "$OUT/ck.json"; then
	ok "its last completed checkpoint is intact ($valid listed, all valid)"
else
	nok "its checkpoints: $(head -c 300 "$OUT/ck.json") $(head -n 2 "$OUT/ck.err")"
fi
if ! pgrep -f -- "--job $job " >/dev/null && [ ! -e /dev/shm/sfs.$job.0 ]; then
	ok "nothing left running"
else
	nok "processes or segments of $job left behind"
fi
[ $fails -eq 0 ]
