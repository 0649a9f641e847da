#!/usr/bin/env bash
# e2e_memdump.sh — the memory backend's checkpoint dump, written by a
# compactor thread beside the flush (store/memory/memdump.h), survives kill -9 of
# the compactor in the middle of a dump (while a store.dump.tmp exists):
# the successor redoes the dump in flight, checkpoints go on completing
# after the last kill without a job recovery, and the result equals an
# uninterrupted run's.
# TAP-style lines.  SFS_MEMDUMP_EVENTS, SFS_MEMDUMP_KILLS size it.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_MEMDUMP_EVENTS:-1000000}
KILLS=${SFS_MEMDUMP_KILLS:-3}
OUT=$(mktemp -d)
job=e2e-md-$$
fails=0

ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }

cleanup() {
	pkill -9 -f -- "--job $job" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$job*
	rm -rf "$OUT"
}
trap cleanup EXIT

run() { # job data output [options]
	local j=$1 data=$2 out=$3
	shift 3
	timeout 300 "$SFS" run --job "$j" --query q20 --backend memory --events "$EVENTS" \
		--workers 1 --checkpoint-interval 50 --data "$data" --output "$out" --json "$@"
}

run "$job-base" "$OUT/base" "$OUT/base.csv" >/dev/null 2>"$OUT/base.err" ||
	nok "the uninterrupted run failed"
run "$job" "$OUT/kill" "$OUT/kill.csv" --max-rate 150000 >"$OUT/kill.json" 2>"$OUT/kill.err" &
sup=$!
kills=0
for ((i = 0; i < 3000 && kills < KILLS; i++)); do
	kill -0 $sup 2>/dev/null || break
	if ls "$OUT"/kill/stage/w0/b*/store.dump.tmp >/dev/null 2>&1; then
		sleep "0.0$((RANDOM % 9 + 1))"
		pid=$(pgrep -f -- "sfs-compactor --job $job ")
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
		sleep 0.7
	fi
	sleep 0.01
done
wait $sup
rc=$?
# checkpoints completed after the last kill: the one in flight was redone
after=$(awk '/compactor 0 died/ { n = 0 } /checkpoint [0-9]+ complete/ { n++ } END { print n + 0 }' \
	"$OUT/kill.err")
# no recovery either: a dump left pinned stalls the job until a restart
recov=$(grep -o '"recoveries": [0-9]*' "$OUT/kill.json" | awk '{print $2}')
if [ $rc -eq 0 ] && [ $kills -eq "$KILLS" ] && [ "$after" -ge 1 ] && [ "${recov:-x}" = 0 ] &&
   cmp -s "$OUT/base.csv" "$OUT/kill.csv"; then
	ok "compactor killed $kills times mid-dump: $after checkpoints complete after the last kill, result equals the uninterrupted run"
else
	nok "compactor killed $kills times mid-dump: exit $rc, $after checkpoints after the last kill, ${recov:-?} recoveries, $(cmp "$OUT/base.csv" "$OUT/kill.csv" 2>&1 | head -n 1)"
	grep -v '^  ' "$OUT/kill.err" | tail -n 8 | sed 's/^/# /'
fi
[ $fails -eq 0 ]
