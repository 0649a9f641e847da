#!/usr/bin/env bash
# e2e_supervisor.sh — the supervised process group, end to end, with the
# real binaries: arguments, start, stat, kill -9 of each role, a hung child,
# the restart budget, a child's fatal exit, SIGTERM, a killed supervisor
# and its stale segment.
# Prints TAP-style lines; every group it starts is stopped on exit.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
JOB=e2e-sup-$$
OUT=$(mktemp -d)
SUP=0
fails=0

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }
# check_rc WHAT RC WANT [CMD...]: the exit code RC is WANT and CMD, if any,
# succeeds (one verdict for both: `check ... [ $? -eq N ] && grep ...` said
# ok before the grep ran, so the grep's half was never checked).
check_rc() {
	local what=$1 rc=$2 want=$3
	shift 3
	if [ "$rc" -eq "$want" ] && { [ $# -eq 0 ] || "$@"; }; then ok "$what"; else nok "$what"; fi
}
note() { echo "# $*"; }

cleanup() {
	[ "$SUP" -gt 0 ] && kill -9 "$SUP" 2>/dev/null
	pkill -9 -f -- "--job $JOB" 2>/dev/null
	wait 2>/dev/null
	"$SFS" clean --job "$JOB" >/dev/null 2>&1
	rm -f /dev/shm/sfs."$JOB".*
	rm -rf "$OUT"
}
trap cleanup EXIT

# field ROLE INDEX KEY: a value from 'sfs stat --json' (empty if absent).
field() {
	"$SFS" stat --job "$JOB" --json 2>/dev/null | python3 -c '
import json, sys
role, index, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for p in json.load(sys.stdin)["processes"]:
    if p["role"] == role and p["index"] == index:
        print(p[key]); break' "$1" "$2" "$3" 2>/dev/null
}

# wait_for SECONDS CMD...: poll until CMD succeeds.
wait_for() {
	local t=$(($1 * 20)); shift
	while [ $t -gt 0 ]; do
		"$@" && return 0
		sleep 0.05; t=$((t - 1))
	done
	return 1
}

all_running() {
	local n
	n=$("$SFS" stat --job "$JOB" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for p in d["processes"] if p["state"] == "running" and p["role"] != "client"))' 2>/dev/null)
	[ "${n:-0}" -eq "$1" ]
}

start_group() {
	"$SFS" run --job "$JOB" --workers 2 --heartbeat-ms 50 --hang-timeout-ms 1000 "$@" \
		>"$OUT/run.out" 2>"$OUT/run.err" &
	SUP=$!
	# supervisor + 2 workers + compactor + checkpointer
	wait_for 10 all_running 5
}

alive() { kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ]; }
gone() { ! alive "$1"; }

# ---- arguments ------------------------------------------------------------
"$SFS" --help >/dev/null;                      check "sfs --help exits 0" [ $? -eq 0 ]
"$SFS" >/dev/null 2>&1;                        check "sfs without a command exits 2" [ $? -eq 2 ]
"$SFS" frobnicate >/dev/null 2>&1;             check "unknown command exits 2" [ $? -eq 2 ]
for c in run stat clean top; do
	"$SFS" $c --help >/dev/null;           check "sfs $c --help exits 0" [ $? -eq 0 ]
done
"$SFS" run >/dev/null 2>&1;                    check "run without --job exits 2" [ $? -eq 2 ]
"$SFS" run --job "$JOB" --workers abc >/dev/null 2>"$OUT/e"
check_rc "run --workers abc exits 2 naming the option" $? 2 grep -q -- --workers "$OUT/e"
"$SFS" run --job 'bad/name' >/dev/null 2>&1;   check "run with a bad job name exits 2" [ $? -eq 2 ]
"$SFS" stat --job "$JOB" >/dev/null 2>"$OUT/e"
check_rc "stat of a job that is not running exits 1 and says so" $? 1 grep -q "running" "$OUT/e"
"$BIN/sfs-worker" --index 1 >/dev/null 2>&1;   check "sfs-worker without --job exits 2" [ $? -eq 2 ]
# jemalloc is every sfs process's malloc (ASan builds bring their own).
alloc=${SFS_EXPECT_ALLOC:-jemalloc}
"$SFS" version | grep -q "allocator $alloc"
check "sfs processes allocate with $alloc" [ $? -eq 0 ]

# ---- start, stat ------------------------------------------------------------
start_group --maintenance-cpus spare
check "group starts: supervisor, 2 workers, compactor, checkpointer running" all_running 5
check "segment exists with mode 0600" [ "$(stat -c %a /dev/shm/sfs."$JOB".0 2>/dev/null)" = 600 ]
"$SFS" stat --job "$JOB" >"$OUT/stat.txt"
check "sfs stat prints processes and segments" grep -q "checkpointer" "$OUT/stat.txt"
"$SFS" stat --job "$JOB" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["job"] == sys.argv[1]
roles = sorted(p["role"] for p in d["processes"])
assert roles == ["checkpointer", "compactor", "supervisor", "worker", "worker"], roles
for p in d["processes"]:
    for k in ("role", "pid", "state", "restarts"):
        assert k in p, k
assert d["segments"] and d["segments"][0]["size"] > 0' "$JOB"
check "sfs stat --json has the documented fields" [ $? -eq 0 ]
w0=$(field worker 0 pid); w1=$(field worker 1 pid)
check "workers pinned to distinct cpus" [ "$(field worker 0 cpu)" != "$(field worker 1 cpu)" ]
# --maintenance-cpus spare: maintenance runs SCHED_BATCH on the cores no
# worker holds (all of them when the workers hold every core, as 2 workers
# do on a 2-core machine).
maint_placed() {
	python3 - "$(field compactor 0 pid)" "$(field checkpointer 0 pid)" \
		"$(field worker 0 cpu)" "$(field worker 1 cpu)" <<'EOF'
import os, sys
pids, workers = sys.argv[1:3], {int(c) for c in sys.argv[3:5]}
mine = os.sched_getaffinity(0)
want = (mine - workers) or mine
for p in pids:
    assert os.sched_getscheduler(int(p)) == os.SCHED_BATCH, (p, "policy")
    assert os.sched_getaffinity(int(p)) == want, (p, os.sched_getaffinity(int(p)), want)
EOF
}
check "compactor and checkpointer: SCHED_BATCH, on the cores no worker holds" maint_placed
"$SFS" run --job "$JOB" --workers 1 >/dev/null 2>"$OUT/e2"
check_rc "a second run of the same job is refused" $? 2 grep -q "running" "$OUT/e2"

# ---- kill -9 of each role is restarted ------------------------------------
for spec in "worker 0" "compactor 0" "checkpointer 0"; do
	set -- $spec
	old=$(field "$1" "$2" pid)
	kill -9 "$old"
	restarted() { local p; p=$(field "$1" "$2" pid)
		[ "$(field "$1" "$2" restarts)" = 1 ] && [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != "$old" ] &&
		[ "$(field "$1" "$2" state)" = running ]; }
	check "kill -9 of $1 $2 is restarted (new pid, restarts=1)" wait_for 10 restarted "$1" "$2"
	check "the killed $1 was reaped (no zombie)" gone "$old"
done

# ---- a child without heartbeat is killed and restarted -----------------------
old=$(field worker 1 pid)
kill -STOP "$old"
hung() { [ "$(field worker 1 hang_kills)" = 1 ] && [ "$(field worker 1 state)" = running ] &&
	[ "$(field worker 1 pid)" != "$old" ]; }
check "a stopped (hung) worker is killed and restarted" wait_for 15 hung
check "the hung worker is gone" wait_for 5 gone "$old"

# ---- SIGTERM stops the group in order, leaves nothing ------------------------
pids=$("$SFS" stat --job "$JOB" --json | python3 -c '
import json, sys
print(" ".join(str(p["pid"]) for p in json.load(sys.stdin)["processes"]))')
kill -TERM "$SUP"
wait "$SUP"; rc=$?
check "SIGTERM: supervisor exits 0" [ $rc -eq 0 ]
SUP=0
left=0; for p in $pids; do alive "$p" && left=$((left + 1)); done
check "SIGTERM leaves no process" [ $left -eq 0 ]
check "SIGTERM leaves no segment" [ ! -e /dev/shm/sfs."$JOB".0 ]
check "stop order: workers before compactor before checkpointer" python3 - "$OUT/run.err" <<'EOF'
import re, sys
order = [m.group(1) for l in open(sys.argv[1])
         for m in [re.match(r"(worker|compactor|checkpointer)\d+\[\d+\]: stopped", l)] if m]
rank = {"worker": 0, "compactor": 1, "checkpointer": 2}
assert order and [rank[r] for r in order] == sorted(rank[r] for r in order), order
EOF

# ---- a killed supervisor: children follow, the stale segment is recovered ----
start_group
pids=$("$SFS" stat --job "$JOB" --json | python3 -c '
import json, sys
print(" ".join(str(p["pid"]) for p in json.load(sys.stdin)["processes"] if p["role"] != "supervisor"))')
kill -9 "$SUP"; wait "$SUP" 2>/dev/null; SUP=0
none_left() { for p in $pids; do alive "$p" && return 1; done; return 0; }
check "children die with a killed supervisor (parent-death signal)" wait_for 10 none_left
check "the dead group's segment is left behind" [ -e /dev/shm/sfs."$JOB".0 ]
start_group
check "a new run recovers the stale segment and starts" all_running 5
check "... and says so" grep -q "stale segment" "$OUT/run.err"
check "... with the next generation" python3 -c '
import json, subprocess, sys
d = json.loads(subprocess.check_output([sys.argv[1], "stat", "--job", sys.argv[2], "--json"]))
assert d["generation"] == 2, d["generation"]' "$SFS" "$JOB"
kill -TERM "$SUP"; wait "$SUP"; SUP=0

# ---- the restart budget ------------------------------------------------------
start_group --restart-budget 1
w=$(field worker 0 pid); kill -9 "$w"
again() { local p; p=$(field worker 0 pid); [ "$(field worker 0 restarts)" = 1 ] && [ -n "$p" ] &&
	[ "$p" != 0 ] && [ "$p" != "$w" ]; }
wait_for 10 again
kill -9 "$(field worker 0 pid)"
timeout 20 tail --pid="$SUP" -f /dev/null
wait "$SUP"; rc=$?; SUP=0
check "restart budget spent: the group fails with exit 1" [ $rc -eq 1 ]
check "... naming the budget" grep -q "restart budget" "$OUT/run.err"
check "... and leaves no segment" [ ! -e /dev/shm/sfs."$JOB".0 ]

# ---- a child's fatal exit fails the group at once --------------------------------
# A compactor that exits 3 (SFS_CHILD_EXIT_FATAL: its store can never open)
# is not restarted: the group fails at its first exit, budget unspent.
mkdir -p "$OUT/fatal-bin"
for b in sfs-worker sfs-checkpointer; do ln -s "$BIN/$b" "$OUT/fatal-bin/$b"; done
printf '#!/bin/sh\necho "fake compactor: cannot open its store" >&2\nexit 3\n' >"$OUT/fatal-bin/sfs-compactor"
chmod +x "$OUT/fatal-bin/sfs-compactor"
timeout 20 "$SFS" run --job "$JOB" --workers 1 --bin-dir "$OUT/fatal-bin" --restart-budget 5 \
	>"$OUT/fatal.out" 2>"$OUT/fatal.err"
rc=$?
check "a fatal child exit (3): the group fails with exit 1" [ $rc -eq 1 ]
check "... without a restart" sh -c "! grep -q 'restart 1 in' '$OUT/fatal.err'"
check "... saying why" grep -q "no restart repairs" "$OUT/fatal.err"
check "... and leaves no segment" [ ! -e /dev/shm/sfs."$JOB".0 ]

# ---- --duration-ms ends the group by itself ------------------------------------
"$SFS" run --job "$JOB" --workers 1 --duration-ms 500 >"$OUT/d.out" 2>&1
check "--duration-ms: the group stops by itself with exit 0" [ $? -eq 0 ]
check "... and reports its children" grep -q "checkpointer" "$OUT/d.out"
# A query job stopped by --duration-ms before its input ends: a planned stop,
# exit 0 (1 is a failure only), its summary "ok": false (not all read).
"$SFS" run --job "$JOB" --query q4 --events 1000000000 --workers 1 --duration-ms 800 \
	--data "$OUT/dq" --json >"$OUT/dq.out" 2>"$OUT/dq.err"
rc=$?
check "--duration-ms stops a query job early with exit 0 (exit $rc)" [ $rc -eq 0 ]
check "... its summary says ok false" grep -q '"ok": false' "$OUT/dq.out"
# --segment-mb is the least size: the help says so, and the job's segment,
# raised to what its workers need, is logged with its real size.
"$SFS" run --help | grep -q -- "--segment-mb MB        the least size" &&
	seg_mb=$(sed -n 's/.*segment .*: \([0-9]*\) MiB on node.*/\1/p' "$OUT/dq.err" | head -n 1) &&
	[ "${seg_mb:-0}" -gt 64 ]
check "--segment-mb: the help says the least size; the query job's segment is ${seg_mb:-?} MiB" [ $? -eq 0 ]

echo "# $fails failure(s)"
exit $((fails > 0))
