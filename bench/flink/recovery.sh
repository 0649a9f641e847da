#!/usr/bin/env bash
# Recovery of a Nexmark job on a standalone Flink cluster, per state backend: how long from a
# failure until the job runs again, and what the restore read.
#
#   BACKENDS="sfs rocksdb hashmap forst" QUERY=q20 KILL_AFTER=6 CKPT_MS=10000 \
#       bench/flink/recovery.sh
#
# Per backend, one fresh cluster (flink/cluster/standalone.sh): a JobManager and two
# TaskManagers of one slot each, 2800 MiB of managed memory and an 8 GiB process (so the heap
# backend has about 3.3 GiB of heap), local recovery on (state.backend.local-recovery: what a
# user who wants fast restarts sets; RocksDB and ForSt then keep a local copy of each
# checkpoint, sfs keeps the slot), no restart delay (Flink's default waits 1 s first: the same
# for every backend, and not the backend's cost). The query runs at parallelism 1 (its job is
# one pipelined region) with incremental checkpoints every CKPT_MS, and after KILL_AFTER
# completed checkpoints:
#
# 1. task failure: the source task throws (NexmarkJob's fail file); Flink restarts the job's
#    tasks on the same TaskManager, from the last checkpoint, locally where the backend can;
# 2. after two more completed checkpoints, TaskManager kill: kill -9 of the TaskManager that
#    runs the job; the job restarts on the other, which restores from the checkpoint's files.
#
# One JSON line per backend and failure: query, backend, failure (task|tm_kill), state_bytes
# (the restored checkpoint's state size: everything it refers to, which a restore from files
# reads in full), recovery_ms (from the failure — the failed attempt's end as Flink records it,
# or the kill's wall time — until every task of the job is RUNNING again: state restored, records
# flowing), detect_ms (failure until the first new attempt is created), restore_ms (the longest
# INITIALIZING of a new attempt: where the backend restores its state), restored_in_place (sfs
# only: the TaskManager's log says the subtask was restored from its parked slot, no file read).
# Times come from the JobManager's own state timestamps (REST), the kill's from this script.
#
# Environment: BACKENDS, QUERY (q20: its state grows with every bid), EVENTS (more than the run
# reads; the job is cancelled after the measurement), CKPT_MS (10000), KILL_AFTER (6), KEEP=1
# keeps the clusters' directories, BUILD=0 skips the builds. Needs curl and jq.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SA=$root/flink/cluster/standalone.sh
BACKENDS=${BACKENDS:-"sfs rocksdb hashmap forst"}
QUERY=${QUERY:-q20}
EVENTS=${EVENTS:-1000000000}
CKPT_MS=${CKPT_MS:-10000}
KILL_AFTER=${KILL_AFTER:-6}

if [[ ${BUILD:-1} == 1 ]]; then
	make -C "$root" -s all jni >&2
	(cd "$root/flink" && mvn -B -q -DskipTests install) >&2
	(cd "$here/nexmark" && mvn -B -q -DskipTests package dependency:build-classpath \
		-Dmdep.outputFile=target/cp.txt) >&2
fi
# the harness's classes and its dependencies, without the installed sfs-flink (the cluster has
# the module's own classes) and without slf4j-simple (the cluster logs through log4j)
export CLASSPATH_EXTRA="$here/nexmark/target/classes:$(tr ':' '\n' <"$here/nexmark/target/cp.txt" |
	grep -v '/sfs-flink-\|/slf4j-simple-' | paste -sd: -)"
export FLINK_CONF_EXTRA="taskmanager.numberOfTaskSlots: 1
taskmanager.memory.process.size: 8g
taskmanager.memory.managed.size: 2800m
state.backend.local-recovery: true
metrics.fetcher.update-interval: 500
restart-strategy.fixed-delay.delay: 0 s"

DIR=
cleanup() {
	[[ -n $DIR ]] || return 0
	timeout 120 "$SA" stop "$DIR" >/dev/null 2>&1 || true
	[[ ${KEEP:-0} == 1 ]] || rm -rf "$DIR"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
rest() { curl -fsS --max-time 5 "http://localhost:$(cat "$DIR/rest.port")$1"; }
# until SECONDS COMMAND...: 0 once COMMAND succeeds, 1 after SECONDS
until_ok() {
	local until=$((SECONDS + $1))
	shift
	while ! "$@"; do
		((SECONDS < until)) || return 1
		sleep 0.2
	done
}
completed() { rest "/jobs/$JOB/checkpoints" | jq -r .counts.completed; }
enough() { (($(completed) >= $1)); }
# every vertex's subtask 0 RUNNING in attempt $1 or later (parallelism 1)
running_again() {
	rest "/jobs/$JOB" | jq -e --argjson a "$1" '[.vertices[].id] | length > 0' >/dev/null || return 1
	local v
	for v in $(rest "/jobs/$JOB" | jq -r '.vertices[].id'); do
		rest "/jobs/$JOB/vertices/$v" | jq -e --argjson a "$1" \
			'.subtasks[0] | .attempt >= $a and .status == "RUNNING"' >/dev/null || return 1
	done
}
attempt() { rest "/jobs/$JOB/vertices/$1" | jq -r '.subtasks[0].attempt'; }

# report FAILURE T_FAIL_MS ATTEMPT: one JSON line from the new attempts' state timestamps
report() {
	local failure=$1 t_fail=$2 a=$3 v created=() running=() init=() j inplace restored size
	for v in $(rest "/jobs/$JOB" | jq -r '.vertices[].id'); do
		j=$(rest "/jobs/$JOB/vertices/$v" | jq -c '.subtasks[0]')
		# start-time is the DEPLOYING timestamp (Flink's REST); the others follow from durations
		created+=("$(jq -r '."start-time" - ."status-duration".SCHEDULED - ."status-duration".CREATED' <<<"$j")")
		running+=("$(jq -r '."start-time" + ."status-duration".DEPLOYING + ."status-duration".INITIALIZING' <<<"$j")")
		init+=("$(jq -r '."status-duration".INITIALIZING' <<<"$j")")
	done
	restored=$(rest "/jobs/$JOB/checkpoints" | jq -r '.latest.restored.id')
	size=$(rest "/jobs/$JOB/checkpoints/details/$restored" | jq -r .state_size)
	inplace=$(grep -h "restored in place from checkpoint $restored " "$DIR"/log/tm-*.log 2>/dev/null | grep -c . || true)
	python3 - "$QUERY" "$b" "$failure" "$t_fail" "$size" "$inplace" "$restored" \
		"${created[*]}" "${running[*]}" "${init[*]}" <<'PY'
import json, sys
q, b, failure, t_fail, size, inplace, restored, created, running, init = sys.argv[1:]
t_fail = int(t_fail)
created = [int(x) for x in created.split()]
running = [int(x) for x in running.split()]
init = [int(x) for x in init.split()]
out = {"query": q, "backend": b, "failure": failure, "restored_checkpoint": int(restored),
       "state_bytes": int(size), "recovery_ms": max(running) - t_fail,
       "detect_ms": min(created) - t_fail, "restore_ms": max(init)}
if b == "sfs":
    out["restored_in_place"] = int(inplace) > 0
print(json.dumps(out))
PY
}

for b in $BACKENDS; do
	DIR=$(mktemp -d /tmp/sfs-flink-recovery.XXXXXX)
	timeout 180 "$SA" start "$DIR" 2 >&2
	java -cp "$(cat "$DIR/classpath")" io.sfs.nexmark.flink.NexmarkJob --remote \
		"localhost:$(cat "$DIR/rest.port")" --query "$QUERY" --backend "$b" --events "$EVENTS" \
		--ckpt-ms "$CKPT_MS" --work "$DIR/job" --fail-file "$DIR/fail" >"$DIR/log/client.out" 2>&1
	JOB=$(sed -n 's/^JOB //p' "$DIR/log/client.out")
	[[ -n $JOB ]] || { cat "$DIR/log/client.out" >&2; exit 1; }
	src=$(rest "/jobs/$JOB" | jq -r '.vertices[0].id')

	# 1. task failure, restart on the same TaskManager
	until_ok $((KILL_AFTER * CKPT_MS / 1000 + 120)) enough "$KILL_AFTER" ||
		{ echo "recovery.sh: $b: $KILL_AFTER checkpoints did not complete" >&2; exit 1; }
	touch "$DIR/fail"
	until_ok 60 running_again 1 || { echo "recovery.sh: $b: no restart after the task failure" >&2; exit 1; }
	t_fail=$(rest "/jobs/$JOB/vertices/$src/subtasks/0/attempts/0" | jq -r '."end-time"')
	report task "$t_fail" 1

	# 2. TaskManager kill, restore on the other from files
	until_ok $((2 * CKPT_MS / 1000 + 120)) enough $(($(completed) + 2)) ||
		{ echo "recovery.sh: $b: no checkpoint after the restart" >&2; exit 1; }
	a=$(attempt "$src")
	tm=$(rest "/jobs/$JOB/vertices/$src" | jq -r '.subtasks[0]."taskmanager-id"')
	t_kill=$(now_ms)
	"$SA" kill-tm "$DIR" "${tm#tm-}" >/dev/null
	until_ok 300 running_again $((a + 1)) || { echo "recovery.sh: $b: no restart after the kill" >&2; exit 1; }
	report tm_kill "$t_kill" $((a + 1))

	rest "/jobs/$JOB?mode=cancel" -X PATCH >/dev/null || true
	cleanup
	DIR=
done
