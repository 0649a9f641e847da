#!/usr/bin/env bash
# test_tm_kill.sh — a TaskManager killed with kill -9 mid-run; Flink brings the job back on a
# replacement TaskManager from the last checkpoint and the result is exactly once.
#
# A standalone cluster (standalone.sh: a JobManager and two TaskManagers of 2 slots, sfs as
# the state backend, checkpoints every 500 ms to a directory all TaskManagers share) runs
# KillTmJob: a throttled sum over 0..N-1 by x % 97 in value and map state, each key's line
# emitted once at the end of input. Parallelism 4 fills all 4 slots, so after the kill the job
# cannot run again until the replacement TaskManager registers: the restored subtasks must run
# on it (their state restored from checkpoint files another TaskManager wrote). Then:
# the result is exactly the closed-form one (KillTmCheck: no key missing or emitted twice,
# sums and counts right), the killed TaskManager's sfs group (flink-<its pid>-k) left no
# process and no /dev/shm segment, and after stop nothing of the cluster is left.
#
# TAP output (ok / not ok lines, the plan at the end); exit 1 if anything failed. Every wait
# has a timeout, a watchdog ends the whole run after TEST_TIMEOUT seconds, and a trap stops the
# cluster whatever happens. Takes about 1-1.5 min.
#
# Environment: SFS_BIN_DIR, SFS_JNI_DIR (as standalone.sh), N (records, 1000000), EVERY
# (throttle: 1 ms sleep per EVERY records per source subtask, 10), KILL_AFTER (completed
# checkpoints before the kill, 5), BUILD (1: mvn package first), KEEP (1: keep the cluster's
# directory; it is kept anyway when a test failed), TEST_TIMEOUT (300), JOB_TIMEOUT (seconds
# for the job to finish after the kill, 120), LOCAL_RECOVERY (1: state.backend.local-recovery
# on, and the surviving TaskManager must restore at least one subtask in place, from its
# parked sfs slot, while the replacement restores from files).
# SFS_TEST_BREAK shows the test can fail: "sums" (the checker expects every sum 1 higher),
# "no-replacement" (no new TaskManager: the job cannot get its slots back), "stop-group" (the
# victim's sfs processes are stopped with SIGSTOP before the kill, so they cannot clean up).

set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODULE=$(dirname "$HERE")
SA=$HERE/standalone.sh
N=${N:-1000000}
P=4
EVERY=${EVERY:-10}
KILL_AFTER=${KILL_AFTER:-5}
BREAK=${SFS_TEST_BREAK:-}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/sfs-flink-cluster.XXXXXX")
T0=$SECONDS
tests=0
fails=0
CLIENT=
JOB=
WATCHDOG=
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
LOCAL_RECOVERY=${LOCAL_RECOVERY:-0}

ok() { tests=$((tests + 1)); echo "ok $tests - $*"; }
notok() { tests=$((tests + 1)); fails=$((fails + 1)); echo "not ok $tests - $*"; }
diag() { sed 's/^/# /'; }
bail() { notok "$*"; exit 1; } # the trap cleans up

alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}

# live processes whose command line contains $1 (the ps/grep processes of this check excluded)
procs_with() {
    local p cmd
    for p in /proc/[0-9]*; do
        cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
        [[ $cmd == *"$1"* ]] || continue
        alive "${p#/proc/}" && echo "${p#/proc/} $cmd"
    done
}

# what is left of TaskManager pid $1's sfs groups: processes and segments
sfs_left() {
    procs_with "flink-$1-"
    ls -d /dev/shm/sfs.flink-"$1"-* 2>/dev/null
}

rest() { curl -fsS --max-time 5 "http://localhost:$(cat "$DIR/rest.port")$1"; }
job_state() { rest "/jobs/$JOB" 2>/dev/null | jq -r .state; }
keyed_vertex() { rest "/jobs/$JOB" | jq -r '.vertices[] | select(.name | test("sum-per-key")) | .id'; }

cleanup() {
    local rc=$? pid f
    [[ -n $WATCHDOG ]] && kill "$WATCHDOG" 2>/dev/null
    if [[ -n $CLIENT ]] && alive "$CLIENT"; then
        kill -TERM "$CLIENT" 2>/dev/null
    fi
    timeout 120 "$SA" stop "$DIR" >/dev/null 2>&1
    # last resort, after a failure only: what the cluster's TaskManagers left (their sfs
    # processes by pid, their segments), so one failed run does not spoil the next
    for f in "$DIR"/pids/tm-*; do
        [[ -e $f ]] || continue
        pid=$(cat "$f")
        procs_with "flink-$pid-" | while read -r p _; do kill -CONT "$p"; kill -TERM "$p"; done 2>/dev/null
        sleep 0.5
        procs_with "flink-$pid-" | while read -r p _; do kill -KILL "$p" 2>/dev/null; done
        rm -f /dev/shm/sfs.flink-"$pid"-*
    done
    [[ -n $CLIENT ]] && alive "$CLIENT" && kill -KILL "$CLIENT" 2>/dev/null
    echo "1..$tests"
    echo "# took $((SECONDS - T0)) s"
    if ((fails > 0 || rc != 0)); then
        for f in "$DIR"/log/hs_err_pid*.log; do
            [[ -e $f ]] && echo "# JVM crash: $f: $(grep -A1 'Problematic frame' "$f" | tail -1)"
        done
        echo "# FAILED ($fails of $tests); logs kept in $DIR/log"
        exit 1
    fi
    if [[ ${KEEP:-0} == 1 ]]; then
        echo "# kept $DIR"
    else
        rm -rf "$DIR"
    fi
    exit 0
}
trap cleanup EXIT
trap 'exit 1' INT
trap 'notok "the whole run within TEST_TIMEOUT=$TEST_TIMEOUT s (the watchdog ended it)"; exit 1' TERM
# the watchdog: a subshell whose sleep ends with it ($$ is this script's pid in it too)
(
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep "$TEST_TIMEOUT" &
    s=$!
    wait "$s" && kill -TERM $$
) >/dev/null 2>&1 &
WATCHDOG=$!

# until SECONDS COMMAND...: 0 once COMMAND succeeds, 1 after SECONDS
until_ok() {
    local until=$((SECONDS + $1))
    shift
    while ! "$@"; do
        ((SECONDS < until)) || return 1
        sleep 0.3
    done
}

echo "# dir $DIR; n=$N parallelism=$P throttle 1 ms/$EVERY records; local recovery $LOCAL_RECOVERY; break=${BREAK:-none}"
if [[ $LOCAL_RECOVERY == 1 ]]; then
    export FLINK_CONF_EXTRA="state.backend.local-recovery: true${FLINK_CONF_EXTRA:+
$FLINK_CONF_EXTRA}"
fi

# ---- build and start ------------------------------------------------------------------------
if [[ ${BUILD:-1} == 1 ]]; then
    (cd "$MODULE" && timeout 300 mvn -B -q -DskipTests package) >"$DIR/mvn-package.log" 2>&1 ||
        bail "mvn package (see $DIR/mvn-package.log)"
fi
t=$SECONDS
timeout 180 "$SA" start "$DIR" 2 2>"$DIR/start.err" || { diag <"$DIR/start.err"; bail "cluster start"; }
ok "cluster up: JobManager + 2 TaskManagers on REST port $(cat "$DIR/rest.port") in $((SECONDS - t)) s"

# ---- the job, until some checkpoints completed ------------------------------------------------
java -cp "$(cat "$DIR/classpath")" io.sfs.flink.cluster.KillTmJob \
    localhost "$(cat "$DIR/rest.port")" "$DIR/out" "$N" "$P" "$EVERY" \
    </dev/null >"$DIR/log/client.out" 2>&1 &
CLIENT=$!
submitted() { JOB=$(sed -n 's/^JOB \([0-9a-f]*\)$/\1/p' "$DIR/log/client.out" 2>/dev/null); [[ -n $JOB ]]; }
until_ok 60 submitted || { diag <"$DIR/log/client.out"; bail "job submitted within 60 s"; }
t_job=$SECONDS
completed() { [[ $(rest "/jobs/$JOB/checkpoints" 2>/dev/null | jq -r '.counts.completed') -ge $KILL_AFTER ]]; }
until_ok 90 completed || bail "$KILL_AFTER checkpoints completed within 90 s (job $(job_state))"
ok "job $JOB running, $(rest "/jobs/$JOB/checkpoints" | jq -r '.counts.completed') checkpoints completed"

# ---- kill -9 a TaskManager that runs keyed subtasks ------------------------------------------
VERTEX=$(keyed_vertex)
victim=$(rest "/jobs/$JOB/vertices/$VERTEX" |
    jq -r '[.subtasks[] | select(.status == "RUNNING") | ."taskmanager-id"] | sort | .[0] // empty')
[[ $victim == tm-* ]] || bail "a TaskManager running the keyed subtasks (got '$victim')"
n=${victim#tm-}
vpid=$(cat "$DIR/pids/$victim")
subtasks=$(rest "/jobs/$JOB/vertices/$VERTEX" |
    jq -r --arg tm "$victim" '[.subtasks[] | select(."taskmanager-id" == $tm) | .subtask] | join(",")')
before=$(sfs_left "$vpid")
if [[ -n $before ]]; then
    ok "$victim (pid $vpid) runs keyed subtasks $subtasks and its sfs group ($(wc -l <<<"$before") processes and segments)"
else
    notok "$victim (pid $vpid) has an sfs group before the kill (none found: the leftover check below would test nothing)"
fi
if [[ $BREAK == stop-group ]]; then
    procs_with "flink-$vpid-" | while read -r p _; do kill -STOP "$p"; done
    echo "# SFS_TEST_BREAK=stop-group: $victim's sfs processes stopped (SIGSTOP) before the kill"
fi
t_kill=$SECONDS
"$SA" kill-tm "$DIR" "$n" >/dev/null 2>"$DIR/kill.err" || { diag <"$DIR/kill.err"; bail "kill -9 $victim"; }
ok "kill -9 $victim (pid $vpid) $((t_kill - t_job)) s into the job"

# ---- a replacement TaskManager ----------------------------------------------------------------
if [[ $BREAK != no-replacement ]]; then
    new=$(timeout 120 "$SA" add-tm "$DIR" 2>"$DIR/add.err") || { diag <"$DIR/add.err"; bail "replacement TaskManager"; }
    ok "replacement tm-$new (pid $(cat "$DIR/pids/tm-$new")) registered $((SECONDS - t_kill)) s after the kill"
else
    echo "# SFS_TEST_BREAK=no-replacement: no new TaskManager"
    new=none
fi

# ---- the killed TaskManager's sfs group is gone ------------------------------------------------
gone() { [[ -z $(sfs_left "$vpid") ]]; }
if until_ok 15 gone; then
    ok "$victim's sfs group left no process and no /dev/shm/sfs.flink-$vpid-* segment"
else
    sfs_left "$vpid" | diag
    notok "$victim's sfs group left no process and no segment (15 s after the kill)"
fi

# ---- the job finishes, restored on the replacement ------------------------------------------
ended() { [[ $(job_state) =~ ^(FINISHED|FAILED|CANCELED)$ ]]; }
if until_ok "${JOB_TIMEOUT:-120}" ended; then
    state=$(job_state)
else
    state="$(job_state) after ${JOB_TIMEOUT:-120} s"
fi
if [[ $state == FINISHED ]]; then
    ok "job FINISHED $((SECONDS - t_kill)) s after the kill ($((SECONDS - t_job)) s in all)"
else
    rest "/jobs/$JOB/exceptions" 2>/dev/null | jq -r '.exceptionHistory.entries[0].stacktrace // empty' | head -3 | diag
    bail "job FINISHED (it is $state)"
fi
restored=$(rest "/jobs/$JOB/checkpoints" | jq -r '.latest.restored.id // empty')
failures=$(rest "/jobs/$JOB/exceptions" | jq -r '.exceptionHistory.entries | length')
if [[ -n $restored ]]; then
    ok "restored from checkpoint $restored (entries in the job's exception history: $failures)"
else
    notok "the job restored from a checkpoint (no restore recorded: it did not fail over?)"
fi
if [[ $LOCAL_RECOVERY == 1 ]]; then
    inplace=$(grep -h "restored in place from checkpoint" "$DIR"/log/tm-*.log | grep -c .)
    fromfiles=$(grep -l "restored in place from checkpoint" "$DIR/log/tm-$new.log" 2>/dev/null)
    if ((inplace > 0)) && [[ -z $fromfiles ]]; then
        ok "local recovery: $inplace keyed subtask attempts restored in place on the surviving TaskManager"
    else
        notok "local recovery: restores in place on the survivor only ($inplace in place; replacement: ${fromfiles:-none})"
    fi
fi
placement=$(rest "/jobs/$JOB/vertices/$VERTEX" |
    jq -r '.subtasks[] | "\(.subtask)@\(."taskmanager-id")#\(.attempt)"' | paste -sd' ' -)
if [[ $placement == *"@tm-$new#"* ]]; then
    ok "keyed subtasks after the restart (subtask@tm#attempt): $placement"
else
    notok "keyed subtasks ran on the replacement tm-$new after the restart: $placement"
fi

# ---- the result, exactly once -------------------------------------------------------------------
offset=0
[[ $BREAK == sums ]] && offset=1
if until_ok 30 grep -q '^FINISHED$' "$DIR/log/client.out"; then :; fi
if java -cp "$MODULE/target/test-classes" io.sfs.flink.cluster.KillTmCheck "$DIR/out" "$N" $offset \
    >"$DIR/check.out" 2>&1; then
    cat "$DIR/check.out"
    ok "result exactly once: 97 keys, each once, sums and counts exact"
else
    cat "$DIR/check.out"
    notok "result exactly once"
fi

# ---- stop: nothing left ---------------------------------------------------------------------------
t=$SECONDS
if timeout 120 "$SA" stop "$DIR" 2>"$DIR/stop.err"; then
    ok "cluster stopped in $((SECONDS - t)) s"
else
    diag <"$DIR/stop.err"
    notok "cluster stopped"
fi
crashed=$(ls "$DIR"/log/hs_err_pid*.log 2>/dev/null)
if [[ -z $crashed ]]; then
    ok "no JVM crashed (no hs_err file)"
else
    grep -h -A1 "Problematic frame" $crashed | diag
    notok "no JVM crashed: $(echo $crashed)"
fi
left=$(
    for f in "$DIR"/pids/*; do
        alive "$(cat "$f")" && echo "$(basename "$f") (pid $(cat "$f")) alive"
    done
    for f in "$DIR"/pids/tm-*; do
        sfs_left "$(cat "$f")"
    done
    procs_with "$DIR" # anything else started with the cluster's directory on its command line
)
if [[ -z $left ]]; then
    ok "nothing left: no JVM, no sfs process, no segment of the cluster's TaskManagers"
else
    diag <<<"$left"
    notok "nothing left after stop"
fi
