#!/usr/bin/env bash
# e2e_recovery.sh — exactly-once through checkpoints (the checkpointer issue):
#  - kills: a query job's processes are SIGKILLed at random moments while it
#    runs (workers: the group rolls back in place to its last checkpoint on
#    the table and rocksdb backends, restarts from the checkpoint's files on
#    the others or with --recovery restart; the compactor and the
#    checkpointer: restarted alone); the final --output must equal an
#    uninterrupted run's, byte for byte, for q4, q17 and q18 on every
#    backend, and on table and rocksdb at least one recovery of each run
#    must have been in place (recovery_kind);
#  - restart as the baseline: the same kills with --recovery restart on
#    RESTART_BACKENDS (every recovery a restart);
#  - a crash during the rollback (the compactor killed at flush.rollback, the
#    checkpointer at ck.rollback): the group falls back to a restart, says
#    why, and the result is the uninterrupted run's;
#  - stop and --restore latest: a run stopped by --duration-ms, continued by
#    a second `sfs run --restore latest`, gives the uninterrupted result;
#  - bad checkpoints: a corrupt _metadata is refused by name, `latest` falls
#    back to the newest valid checkpoint and says so; a foreign job's
#    checkpoint and a missing directory are refused (exit 2).
# TAP-style lines.  SFS_RECOVERY_EVENTS sets the stream size, SFS_RECOVERY_KILLS
# the kills per run (make soak raises both).  The killed runs' compactors
# run SFS_E2E_KILL_MTHREADS maintenance threads (default 2, one per worker:
# compactor/flush.h), every other run SFS_E2E_MTHREADS (default: sfs run's,
# the spare cores); SFS_E2E_MTHREADS alone sets both.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_RECOVERY_EVENTS:-600000}
KILLS=${SFS_RECOVERY_KILLS:-3}
RATE=${SFS_RECOVERY_RATE:-200000}   # --max-rate of the interrupted runs: ~3 s each
# How long the stopped runs run: long enough for a first checkpoint on a
# loaded 2-core machine (the rocksdb target's first snapshot took 0.4-0.8 s
# there), short of the ~3 s a run takes.
STOP_MS=${SFS_RECOVERY_STOP_MS:-2000}
QUERIES=${SFS_RECOVERY_QUERIES:-q4 q17 q18}
BACKENDS=${SFS_RECOVERY_BACKENDS:-rocksdb-direct memory rocksdb table}
# backends that roll back in place (store/target.h: pin and rollback)
IN_PLACE_BACKENDS=${SFS_RECOVERY_IN_PLACE_BACKENDS:-rocksdb table}
# the restart path, kept as the baseline: these backends again with --recovery restart
RESTART_BACKENDS=${SFS_RECOVERY_RESTART_BACKENDS:-table}
RESTART_QUERIES=${SFS_RECOVERY_RESTART_QUERIES:-q17}
WORKERS=${SFS_RECOVERY_WORKERS:-2}
RESCALE_BACKENDS=${SFS_RECOVERY_RESCALE_BACKENDS:-rocksdb-direct memory rocksdb table}
STOP_BACKENDS=${SFS_RECOVERY_STOP_BACKENDS:-rocksdb-direct memory rocksdb table}
MTHREADS=${SFS_E2E_MTHREADS:-}
KILL_MTHREADS=${SFS_E2E_KILL_MTHREADS:-${MTHREADS:-2}}
if [ -n "${SFS_SOAK:-}" ]; then
	# the soak (make soak): five queries x four backends x 6 kills = 120
	EVENTS=${SFS_RECOVERY_EVENTS:-2000000}
	KILLS=${SFS_RECOVERY_KILLS:-6}
	QUERIES=${SFS_RECOVERY_QUERIES:-q4 q9 q17 q18 q20}
fi
OUT=$(mktemp -d)
fails=0
total_kills=0
total_recoveries=0
differences=0
refused=0
rec_checked=0   # killed runs whose summary's recovery_* lists were checked
rec_bad=""

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
note() { echo "# $*"; }

cleanup() {
	pkill -9 -f -- "--job e2e-rc-$$" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.e2e-rc-$$*
	rm -rf "$OUT"
}
trap cleanup EXIT

run() { # job data output [options]: one uninterrupted `sfs run` (MT: its threads)
	local job=$1 data=$2 out=$3 mt=${MT:-$MTHREADS}
	shift 3
	timeout 600 "$SFS" run --job "$job" --events "$EVENTS" --workers "$WORKERS" \
		--checkpoint-interval 50 --data "$data" --output "$out" --json \
		${mt:+--maintenance-threads "$mt"} "$@"
}

# kill_loop JOB N: SIGKILL N processes of JOB's group, one at a time, at
# random moments (workers twice as often as the others).
kill_loop() {
	local job=$1 n=$2 data=$3 i role pid t
	# the first kill: a worker, once a checkpoint exists (a recovery that
	# restores state, not a restart from the beginning)
	for ((t = 0; t < 100; t++)); do
		ls -d "$data"/checkpoints/chk-* >/dev/null 2>&1 && break
		sleep 0.05
	done
	for ((i = 0; i < n; i++)); do
		sleep "0.$((RANDOM % 6 + 3))"
		case $((i == 0 ? 2 : RANDOM % 4)) in
		0) role=sfs-compactor ;;
		1) role=sfs-checkpointer ;;
		*) role=sfs-worker ;;
		esac
		pid=$(pgrep -f -- "$role --job $job " | shuf -n 1)
		[ -n "$pid" ] || pid=$(pgrep -f -- "sfs-worker --job $job " | shuf -n 1)
		[ -n "$pid" ] || return 0
		kill -9 "$pid" 2>/dev/null && echo "$role" >>"$OUT/kills.$job"
	done
}

plan=""
for b in $BACKENDS; do for q in $QUERIES; do plan="$plan $b:$q:default"; done; done
for b in $RESTART_BACKENDS; do for q in $RESTART_QUERIES; do plan="$plan $b:$q:restart"; done; done
for item in $plan; do
	IFS=: read -r b q mode <<<"$item"
	want=restart extra=()
	[ "$mode" = restart ] && extra=(--recovery restart)
	if [ "$mode" = default ] && [[ " $IN_PLACE_BACKENDS " == *" $b "* ]]; then
		want=in-place
	fi
	job=e2e-rc-$$-$q
	if [ ! -s "$OUT/base-$q-$b.csv" ] && ! run "$job" "$OUT/base-$q-$b" "$OUT/base-$q-$b.csv" \
		--query "$q" --backend "$b" >"$OUT/base.json" 2>"$OUT/base.err"; then
		nok "$q on $b: uninterrupted run failed"; tail -n 5 "$OUT/base.err" | sed 's/^/# /'
		continue
	fi
	cp "$OUT/base-$q-$b.csv" "$OUT/base.csv"
	rm -f "$OUT/kills.$job"
	MT=$KILL_MTHREADS run "$job" "$OUT/kill-$q-$b-$mode" "$OUT/kill.csv" --query "$q" \
		--backend "$b" --max-rate "$RATE" "${extra[@]}" >"$OUT/kill.json" 2>"$OUT/kill.err" &
	runner=$!
	kill_loop "$job" "$KILLS" "$OUT/kill-$q-$b-$mode"
	wait "$runner"
	rc=$?
	kills=$(wc -l <"$OUT/kills.$job" 2>/dev/null || echo 0)
	total_kills=$((total_kills + kills))
	recs=$(grep -o '"recoveries": [0-9]*' "$OUT/kill.json" | awk '{print $2}')
	total_recoveries=$((total_recoveries + ${recs:-0}))
	refused=$((refused + $(grep -c "not valid\|refused" "$OUT/kill.err")))
	# the summary times each recovery: one positive recovery_ms and a
	# recovery_kind per recovery — "restart" only where no rollback in
	# place is wanted, at least one "in-place" where it is (a worker
	# killed soon after the compactor restarted falls back: the new
	# compactor pinned no checkpoint yet)
	if why=$(python3 -c '
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
want = sys.argv[2]
n, ms, kind = s["recoveries"], s["recovery_ms"], s["recovery_kind"]
if len(ms) != n or len(kind) != n or len(s["recovery_stop_ms"]) != n:
    sys.exit(f"{n} recoveries, recovery_ms {ms}, recovery_kind {kind}")
if any(not isinstance(x, (int, float)) or x <= 0 for x in ms) or any(k not in ("restart", "in-place") for k in kind):
    sys.exit(f"recovery_ms {ms}, recovery_kind {kind}")
if want == "restart" and "in-place" in kind:
    sys.exit(f"recovery_kind {kind}: wanted restarts only")
if want == "in-place" and n and "in-place" not in kind:
    sys.exit(f"recovery_kind {kind}: no recovery in place")
' "$OUT/kill.json" "$want" 2>&1); then
		rec_checked=$((rec_checked + 1))
	else
		rec_bad="$rec_bad $q/$b/$mode: ${why##*$'\n'};"
	fi
	restored=$(grep -c "(recovery)\|rolled back in place to checkpoint" "$OUT/kill.err")
	inplace=$(grep -c "rolled back in place to checkpoint" "$OUT/kill.err")
	# the workers that outlived a death and rolled back in their processes
	kept=$(grep -o "[0-9]* worker(s) started over in their processes" "$OUT/kill.err" |
		awk '{ n += $1 } END { print n + 0 }')
	wkills=$(grep -c sfs-worker "$OUT/kills.$job" 2>/dev/null)
	if [ "$kills" -eq 0 ] || { [ "${wkills:-0}" -gt 0 ] && [ "$restored" -eq 0 ]; }; then
		# a run that nothing interrupted, or whose killed workers never
		# came back from a checkpoint, proves nothing
		nok "$q on $b ($mode): $kills kills, $restored restores from a checkpoint (want >= 1 each)"
		grep -v '^  ' "$OUT/kill.err" | tail -n 5 | sed 's/^/# /'
	elif [ "$inplace" -gt 0 ] && [ "$kept" -eq 0 ]; then
		# 2 workers: a rollback after one died keeps the other's process
		nok "$q on $b ($mode): $inplace rollbacks in place, none kept a surviving worker's process"
		grep "rolled back in place" "$OUT/kill.err" | tail -n 3 | sed 's/^/# /'
	elif [ "$rc" -ne 0 ]; then
		nok "$q on $b ($mode) with $kills kills: sfs run exit $rc"
		grep -v '^  ' "$OUT/kill.err" | tail -n 8 | sed 's/^/# /'
	elif cmp -s "$OUT/base.csv" "$OUT/kill.csv"; then
		ok "$q on $b ($mode recovery), $(grep -o '[0-9]* maintenance thread' "$OUT/kill.err" | head -n 1)s: $kills kills ($(sort "$OUT/kills.$job" 2>/dev/null | uniq -c |
			awk '{printf "%s %s ", $1, $2}')), $(grep -o '"recoveries": [0-9]*' \
			"$OUT/kill.json" | awk '{print $2}') recoveries ($restored from a checkpoint, $inplace in place, $kept surviving workers kept their processes), result equals the uninterrupted run"
	else
		differences=$((differences + 1))
		nok "$q on $b ($mode) with $kills kills: result differs ($(wc -l <"$OUT/base.csv") vs $(wc -l <"$OUT/kill.csv") lines)"
		diff "$OUT/base.csv" "$OUT/kill.csv" | head -n 6 | sed 's/^/# /'
	fi
done
if [ -z "$rec_bad" ]; then
	ok "the killed runs' summaries ($rec_checked) time each recovery: recovery_ms has one positive entry per recovery ($total_recoveries), recovery_kind in place on $IN_PLACE_BACKENDS, restart elsewhere"
else
	nok "recovery_ms / recovery_kind:$rec_bad"
fi
note "$total_kills processes killed"
# what make soak sums over its scripts (scripts/run-tests.sh)
note "counts: kills=$total_kills recoveries=$total_recoveries differences=$differences refused=$refused"

# fault_run BACKEND POINT NAME: q17 on BACKEND with SFS_FAULT=POINT:1, worker
# 0 killed once a checkpoint exists; the summary, stderr and result in
# $OUT/NAME.{json,err,csv}, the exit code in $rc.
fault_run() {
	local b=$1 point=$2 name=$3 q=q17 job=e2e-rc-$$-$3 data=$OUT/$3-$1 t runner
	[ -s "$OUT/base-$q-$b.csv" ] || run "$job" "$OUT/base-$name-$b" "$OUT/base-$q-$b.csv" \
		--query $q --backend "$b" >/dev/null 2>"$OUT/base.err"
	SFS_FAULT=$point:1 run "$job" "$data" "$OUT/$name.csv" --query $q --backend "$b" \
		--max-rate "$RATE" >"$OUT/$name.json" 2>"$OUT/$name.err" &
	runner=$!
	for ((t = 0; t < 100; t++)); do
		ls -d "$data"/checkpoints/chk-* >/dev/null 2>&1 && break
		sleep 0.05
	done
	sleep 0.3
	pkill -9 -f -- "sfs-worker --job $job --index 0 " 2>/dev/null
	wait "$runner"
	rc=$?
}

# A crash during the rollback itself: the compactor killed as it begins
# one worker's rollback (flush.rollback), the checkpointer killed after it
# abandoned the checkpoint in flight and before it answered (ck.rollback).
# The group must fall back to a restart from files, say why, and produce
# the uninterrupted result.
for fb in table:flush.rollback rocksdb:ck.rollback; do
	b=${fb%%:*} point=${fb#*:}
	fault_run "$b" "$point" fb
	if [ $rc -eq 0 ] && grep -q "no rollback in place" "$OUT/fb.err" &&
		grep -q '"recovery_kind": \["restart"' "$OUT/fb.json" &&
		cmp -s "$OUT/base-q17-$b.csv" "$OUT/fb.csv"; then
		ok "$point killed mid-rollback on $b: the group fell back to a restart ($(grep -o 'no rollback in place ([^)]*' "$OUT/fb.err" | head -n 1 | cut -c23-)), result equals the uninterrupted run"
	else
		nok "$point killed mid-rollback on $b: exit $rc"
		grep -v '^  ' "$OUT/fb.err" | grep -i "roll\|recover\|died" | tail -n 6 | sed 's/^/# /'
	fi
done

# A second death during the rollback: worker 0 killed, worker 1 killed as
# it has halted for the rollback (task.halted, its first halt).  The
# rollback goes on in place and starts both again; the result stands.
for b in table rocksdb; do
	fault_run "$b" task.halted halt
	if [ $rc -eq 0 ] && grep -q "worker 1 died during the rollback" "$OUT/halt.err" &&
		grep -q "0 worker(s) started over in their processes, 2 started again" "$OUT/halt.err" &&
		grep -q '"recovery_kind": \["in-place"' "$OUT/halt.json" &&
		cmp -s "$OUT/base-q17-$b.csv" "$OUT/halt.csv"; then
		ok "a surviving worker killed while halted for the rollback on $b: rolled back in place all the same, both workers started again, result equals the uninterrupted run"
	else
		nok "a surviving worker killed while halted for the rollback on $b: exit $rc"
		grep -v '^  ' "$OUT/halt.err" | grep -i "roll\|recover\|died" | tail -n 6 | sed 's/^/# /'
	fi
done

# Stop after a while, then continue from the newest checkpoint.
q=q17
for b in $STOP_BACKENDS; do
	job=e2e-rc-$$-stop
	run "$job" "$OUT/base-stop-$b" "$OUT/base.csv" --query $q --backend "$b" \
		>/dev/null 2>"$OUT/base.err" || { nok "stop/restore on $b: base run failed"; continue; }
	cp "$OUT/base.csv" "$OUT/base-stop.csv"
	run "$job" "$OUT/stop-$b" "$OUT/stop.csv" --query $q --backend "$b" --duration-ms "$STOP_MS" \
		--max-rate "$RATE" >/dev/null 2>"$OUT/stop1.err"
	if ! ls -d "$OUT/stop-$b"/checkpoints/chk-* >/dev/null 2>&1; then
		nok "stop/restore on $b: no checkpoint after $STOP_MS ms"; continue
	fi
	if run "$job" "$OUT/stop-$b" "$OUT/stop.csv" --query $q --backend "$b" --restore latest \
		>/dev/null 2>"$OUT/stop2.err" && cmp -s "$OUT/base.csv" "$OUT/stop.csv"; then
		ok "stop after $STOP_MS ms and --restore latest on $b: result equals the uninterrupted run"
	else
		nok "stop and --restore latest on $b"; tail -n 5 "$OUT/stop2.err" | sed 's/^/# /'
	fi
done

# The supervisor itself killed: its children stop (parent-death signal), and
# `sfs run --restore latest` continues from the newest checkpoint.
for b in $STOP_BACKENDS; do
	job=e2e-rc-$$-stop
	data=$OUT/supkill-$b
	run "$job" "$data" "$OUT/sk.csv" --query $q --backend "$b" --max-rate "$RATE" \
		>/dev/null 2>"$OUT/sk1.err" &
	sup=$!
	for ((t = 0; t < 100; t++)); do
		ls -d "$data"/checkpoints/chk-* >/dev/null 2>&1 && break
		sleep 0.05
	done
	sleep 0.3
	pkill -9 -f -- "sfs run --job $job " 2>/dev/null
	wait "$sup" 2>/dev/null
	for ((t = 0; t < 100; t++)); do
		pgrep -f -- "--job $job " >/dev/null || break
		sleep 0.05
	done
	if pgrep -f -- "--job $job " >/dev/null; then
		nok "supervisor killed on $b: children still running 5 s after"
		pkill -9 -f -- "--job $job " 2>/dev/null
	elif run "$job" "$data" "$OUT/sk.csv" --query $q --backend "$b" --restore latest \
		>/dev/null 2>"$OUT/sk2.err" && cmp -s "$OUT/base-stop.csv" "$OUT/sk.csv"; then
		ok "supervisor killed on $b: every child gone within 5 s, the stale segments cleaned by the next run, --restore latest gives the uninterrupted result"
	else
		nok "supervisor killed on $b: restore"; grep -v '^  ' "$OUT/sk2.err" | tail -n 5 | sed 's/^/# /'
	fi
done

# Rescale: stop with W1 workers, continue with W2 (the key groups and the
# source splits move), against the uninterrupted run of the stop test.
for b in $RESCALE_BACKENDS; do
	for pair in 1:2 2:1 2:3; do
		w1=${pair%:*} w2=${pair#*:}
		job=e2e-rc-$$-stop
		data=$OUT/rescale-$b-$w1-$w2
		WORKERS=$w1 run "$job" "$data" "$OUT/rs.csv" --query $q --backend "$b" \
			--duration-ms "$STOP_MS" --max-rate "$RATE" >/dev/null 2>"$OUT/rs1.err"
		if ! ls -d "$data"/checkpoints/chk-* >/dev/null 2>&1; then
			nok "rescale $w1→$w2 on $b: no checkpoint after $STOP_MS ms"; continue
		fi
		if WORKERS=$w2 run "$job" "$data" "$OUT/rs.csv" --query $q --backend "$b" \
			--restore latest >/dev/null 2>"$OUT/rs2.err" &&
			cmp -s "$OUT/base-stop.csv" "$OUT/rs.csv"; then
			ok "rescale $w1→$w2 workers on $b: result equals the uninterrupted run"
		else
			nok "rescale $w1→$w2 on $b"; grep -v '^  ' "$OUT/rs2.err" | tail -n 5 | sed 's/^/# /'
		fi
	done
done

# Bad checkpoints (on the last data directory of the stop test).
b=rocksdb-direct
data=$OUT/stop-$b
job=e2e-rc-$$-stop
latest=$(ls -d "$data"/checkpoints/chk-* 2>/dev/null | awk -F"chk-" "{print \$NF, \$0}" | sort -n | tail -n 1 | cut -d" " -f2-)
if [ -n "$latest" ] && [ "$(ls -d "$data"/checkpoints/chk-* | wc -l)" -ge 2 ]; then
	printf 'garbage' >>"$latest/_metadata"
	run "$job" "$data" "$OUT/bad.csv" --query $q --backend $b --restore latest --duration-ms 300 \
		>/dev/null 2>"$OUT/bad.err"
	if grep -q "_metadata" "$OUT/bad.err" && grep -qi "falling back" "$OUT/bad.err"; then
		ok "a corrupt newest checkpoint is named and --restore latest falls back"
	else
		nok "corrupt newest checkpoint: no fallback message"; tail -n 5 "$OUT/bad.err" | sed 's/^/# /'
	fi
	run "$job" "$data" "$OUT/bad.csv" --query $q --backend $b --restore "$latest" \
		>/dev/null 2>"$OUT/bad.err"
	rc=$?
	if [ $rc -eq 2 ] && grep -q "$latest" "$OUT/bad.err"; then
		ok "--restore of a corrupt checkpoint: exit 2, the file named"
	else
		nok "--restore of a corrupt checkpoint: exit $rc"; tail -n 3 "$OUT/bad.err" | sed 's/^/# /'
	fi
else
	nok "bad checkpoints: fewer than 2 checkpoints to corrupt"
fi
run "other-job-$$" "$data" "$OUT/bad.csv" --query $q --backend $b --restore latest \
	>/dev/null 2>"$OUT/bad.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "no valid checkpoint" "$OUT/bad.err"; then
	ok "another job's checkpoints are not restored (exit 2)"
else
	nok "another job's checkpoints: exit $rc"; tail -n 3 "$OUT/bad.err" | sed 's/^/# /'
fi
pkill -9 -f -- "--job other-job-$$" 2>/dev/null
rm -f /dev/shm/sfs.other-job-$$*
run "$job" "$data" "$OUT/bad.csv" --query $q --backend $b --restore "$OUT/nope" >/dev/null 2>"$OUT/bad.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "$OUT/nope" "$OUT/bad.err"; then
	ok "--restore of a missing directory: exit 2, named"
else
	nok "--restore of a missing directory: exit $rc"; tail -n 3 "$OUT/bad.err" | sed 's/^/# /'
fi

[ "$fails" -eq 0 ] && echo "# all recovery checks passed" || echo "# $fails recovery checks failed"
exit $((fails > 0))
