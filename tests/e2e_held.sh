#!/usr/bin/env bash
# e2e_held.sh — the hang detector tells a worker held by its state backend's
# own back-pressure from a hung one (issue 32), and a run's --json summary
# counts the whole run across recoveries; the real binaries, q4 on
# rocksdb-direct (and table for the summary after a rollback in place):
#  - held: RocksDB's background work paused by the backend's fault point
#    (SFS_ROCKSDB_PAUSE_MS) with 64 KiB memtables, so the worker meets
#    RocksDB's own write stop for ~4 s > --hang-timeout-ms 1000: it is not
#    killed, the log and the summary's backend_held say why;
#  - hung: worker 0 stopped (SIGSTOP) mid-run: killed as hung, the job
#    recovers, and the summary's events are the whole stream's;
#  - hung while held: the worker stopped during such a stall — its held
#    report goes stale with it (the watcher thread stops too): killed;
#  - the whole run: worker 0 SIGKILLed mid-run on rocksdb-direct (a restart
#    from files) and table (a rollback in place): events = the stream,
#    events_per_sec = events / seconds, checkpoints counted over both
#    incarnations.
# TAP-style lines; every group it starts is stopped on exit.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
JOB=e2e-held-$$
EVENTS=${SFS_HELD_EVENTS:-200000}
OUT=$(mktemp -d)
fails=0

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
note() { echo "# $*"; }

cleanup() {
	pkill -9 -f -- "--job $JOB" 2>/dev/null
	wait 2>/dev/null
	for j in "$JOB" "$JOB-t" "$JOB-d"; do "$SFS" clean --job "$j" >/dev/null 2>&1; done
	rm -f /dev/shm/sfs."$JOB"*
	rm -rf "$OUT"
}
trap cleanup EXIT

# js FILE EXPR: a value of the summary in FILE (python expression over d).
js() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$1" "$2" 2>/dev/null
}

# run NAME [options]: q4 in the background; summary NAME.json, log NAME.err.
run() {
	local name=$1
	shift
	timeout 300 "$SFS" run --job "$JOB" --query q4 --events "$EVENTS" --workers 1 \
		--backend rocksdb-direct --heartbeat-ms 100 --hang-timeout-ms 1000 \
		--data "$OUT/data-$name" --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.err" &
	runner=$!
}

worker_pid() { pgrep -f -- "sfs-worker --job $1 --index 0 " | head -n 1; }

# wait_for SECONDS CMD...: poll until CMD succeeds.
wait_for() {
	local t=$(($1 * 20))
	shift
	while [ $t -gt 0 ]; do
		"$@" && return 0
		sleep 0.05
		t=$((t - 1))
	done
	return 1
}

# 1. Held by RocksDB's write stop: spared, and said.
SFS_ROCKSDB_PAUSE_MS=4000 SFS_ROCKSDB_WRITE_BUFFER_KB=64 run held --checkpoint-interval 0
wait "$runner"
rc=$?
if [ $rc -eq 0 ] && [ "$(js "$OUT/held.json" 'd["hang_kills"]')" = 0 ] &&
	[ "$(js "$OUT/held.json" 'd["backend_held"]["episodes"] >= 1')" = True ] &&
	[ "$(js "$OUT/held.json" 'd["backend_held"]["why"]')" = "RocksDB write stop" ] &&
	[ "$(js "$OUT/held.json" 'd["recoveries"]')" = 0 ] &&
	[ "$(js "$OUT/held.json" 'd["events"]')" = "$EVENTS" ] &&
	grep -q "held by its state backend's back-pressure (RocksDB write stop)" "$OUT/held.err" &&
	! grep -q "hung, killing it" "$OUT/held.err"; then
	ok "a worker held by RocksDB's write stop for $(js "$OUT/held.json" 'd["backend_held"]["ms"]') ms is not killed; the log and backend_held say why"
else
	nok "held worker: exit $rc, $(js "$OUT/held.json" '(d["hang_kills"], d["backend_held"], d["recoveries"])')"
	grep -v '^  ' "$OUT/held.err" | grep -i "held\|heartbeat\|kill\|fault" | head -n 5 | sed 's/^/# /'
fi

# 2. Hung (stopped) outside any back-pressure: killed; the job recovers and
# the summary counts the whole stream.
run hung --checkpoint-interval 200 --max-rate 50000
if wait_for 20 worker_pid "$JOB" && sleep 1.5 && kill -STOP "$(worker_pid "$JOB")"; then
	wait "$runner"
	rc=$?
else
	rc=99
	wait "$runner"
fi
if [ $rc -eq 0 ] && [ "$(js "$OUT/hung.json" 'd["hang_kills"] >= 1')" = True ] &&
	[ "$(js "$OUT/hung.json" 'd["recoveries"] >= 1')" = True ] &&
	[ "$(js "$OUT/hung.json" 'd["backend_held"]["episodes"]')" = 0 ] &&
	[ "$(js "$OUT/hung.json" 'd["events"]')" = "$EVENTS" ] &&
	grep -q "not held by its state backend: hung, killing it" "$OUT/hung.err"; then
	ok "a stopped worker, not held, is killed as hung; after the recovery the summary's events are the stream's ($EVENTS)"
else
	nok "hung worker: exit $rc, $(js "$OUT/hung.json" '(d["hang_kills"], d["recoveries"], d["events"], d["backend_held"])')"
	grep -v '^  ' "$OUT/hung.err" | grep -i "held\|heartbeat\|kill" | head -n 5 | sed 's/^/# /'
fi

# 3. Stopped while held: its report goes stale, and it is a hang.
SFS_ROCKSDB_PAUSE_MS=6000 SFS_ROCKSDB_WRITE_BUFFER_KB=64 run stale --checkpoint-interval 0
said() { grep -q "not hung: not killing it" "$OUT/stale.err" 2>/dev/null; }
if wait_for 20 said && kill -STOP "$(worker_pid "$JOB")"; then
	wait "$runner"
	rc=$?
else
	rc=99
	wait "$runner"
fi
if [ $rc -eq 0 ] && [ "$(js "$OUT/stale.json" 'd["hang_kills"] >= 1')" = True ] &&
	grep -q "not held by its state backend: hung, killing it" "$OUT/stale.err"; then
	ok "a worker stopped while RocksDB held it is killed: its held report went stale"
else
	nok "stopped while held: exit $rc, $(js "$OUT/stale.json" '(d["hang_kills"], d["backend_held"])')"
	grep -v '^  ' "$OUT/stale.err" | grep -i "held\|heartbeat\|kill" | head -n 6 | sed 's/^/# /'
fi

# 4. The whole run across a recovery: a restart from files (rocksdb-direct)
# and a rollback in place (table).
for b in rocksdb-direct table; do
	j=$JOB-d
	[ $b = table ] && j=$JOB-t
	timeout 300 "$SFS" run --job "$j" --query q4 --events "$EVENTS" --workers 2 --backend $b \
		--checkpoint-interval 100 --max-rate 60000 --data "$OUT/data-w-$b" --json \
		>"$OUT/w-$b.json" 2>"$OUT/w-$b.err" &
	runner=$!
	for ((t = 0; t < 200; t++)); do
		ls -d "$OUT/data-w-$b"/checkpoints/chk-* >/dev/null 2>&1 && break
		sleep 0.05
	done
	sleep 1
	pkill -9 -f -- "sfs-worker --job $j --index 0 "
	wait "$runner"
	rc=$?
	if [ $rc -eq 0 ] && [ "$(js "$OUT/w-$b.json" 'd["recoveries"] >= 1')" = True ] &&
		[ "$(js "$OUT/w-$b.json" 'd["events"]')" = "$EVENTS" ] &&
		[ "$(js "$OUT/w-$b.json" 'abs(d["events_per_sec"] * d["seconds"] / d["events"] - 1) < 0.002')" = True ] &&
		[ "$(js "$OUT/w-$b.json" 'd["seconds"] >= 2.5')" = True ] &&
		[ "$(js "$OUT/w-$b.json" 'sum(d["events_per_sec_per_worker"]) * d["seconds"] >= 0.99 * d["events"]')" = True ] &&
		[ "$(js "$OUT/w-$b.json" 'd["checkpoints_completed"] >= 2')" = True ]; then
		ok "$b, worker 0 killed mid-run ($(js "$OUT/w-$b.json" 'd["recovery_kind"]')): the summary counts the whole run: $EVENTS events in $(js "$OUT/w-$b.json" 'd["seconds"]') s, $(js "$OUT/w-$b.json" 'd["checkpoints_completed"]') checkpoints"
	else
		nok "$b whole-run summary: exit $rc, $(js "$OUT/w-$b.json" '(d["recoveries"], d["events"], d["seconds"], d["events_per_sec"], d["checkpoints_completed"])')"
		grep -v '^  ' "$OUT/w-$b.err" | grep -i "recover\|died\|fail" | head -n 5 | sed 's/^/# /'
	fi
done

[ $fails -eq 0 ] || exit 1
