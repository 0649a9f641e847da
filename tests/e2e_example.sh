#!/usr/bin/env bash
# e2e_example.sh — the example stream processor (examples/clicks), built
# from an installed sfs with pkg-config's flags alone and run as the workers
# of `sfs run --exec`:
#  - kills: workers are SIGKILLed at random moments; the job goes back to
#    its last checkpoint (in place on table and rocksdb: the surviving
#    program rolls back in its process, the killed one is started again
#    as restored, the state already rolled back) and the
#    committed output equals an uninterrupted run's, line for line;
#  - kills at the output's fault points (include/sfs_output.h: after an
#    epoch is staged and before its seal, after its checkpoint completed
#    and before its commit, after the rename): a worker's first incarnation
#    runs with SFS_FAULT armed, dies there, and the output is still the
#    uninterrupted run's;
#  - rescale: a run of 2 workers stopped by --duration-ms, continued with
#    --restore latest and 3 workers, gives the uninterrupted output; again
#    with the restored run's workers killed at output fault points;
#  - bad input: --exec of a missing or non-executable file, and a program
#    that exits 2 at once, are one line and exit 2; a program calling the
#    lifecycle out of order (tests/exec_misuse.c: an id going backwards,
#    bytes over the limit, an unrequested id, a state of another kind, a
#    seal without its barrier, a barrier of an unrequested id, an open of
#    another parallelism than the group's, after which the right one opens) is
#    refused by the library, exits 2, the run exits 2, and the checkpoints
#    already in its data directory stay as they were.
# TAP-style lines.  SFS_EXAMPLE_EVENTS sets the stream (make soak: longer).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
EVENTS=${SFS_EXAMPLE_EVENTS:-300000}
RATE=${SFS_EXAMPLE_RATE:-100000}     # events/s each worker reads: ~3 s a run
KILLS=${SFS_EXAMPLE_KILLS:-3}
[ -n "${SFS_SOAK:-}" ] && EVENTS=${SFS_EXAMPLE_EVENTS:-1500000} KILLS=${SFS_EXAMPLE_KILLS:-10}
fails=0
ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }
show() { grep -v '^  ' "$1" | tail -n "${2:-8}" | sed 's/^/# /'; }

tmp=$(mktemp -d)
job=e2e-ex-$$
cleanup() {
	pkill -9 -f -- "--job $job" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$job*
	rm -rf "$tmp"
}
trap cleanup EXIT

# The installed copy, and the example built against it alone.
prefix=$tmp/prefix
if ! DESTDIR='' "$root/scripts/install.sh" "$prefix" "$build/install.env" >"$tmp/install.log" 2>&1; then
	nok "install into $prefix"; show "$tmp/install.log"; exit 1
fi
# shellcheck source=/dev/null
. "$build/install.env"
read -r -a san <<<"$SFS_SAN"
if ! PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -B -C "$root/examples/clicks" clicks \
	CC="$SFS_CC ${san[*]}" >"$tmp/build.log" 2>&1; then
	nok "examples/clicks against the installed library"; show "$tmp/build.log"; exit 1
fi
mv "$root/examples/clicks/clicks" "$tmp/clicks"
export LD_LIBRARY_PATH=$prefix/lib
SFS=$prefix/bin/sfs
ok "examples/clicks built with pkg-config --cflags --libs sfs against $prefix"

# run DATA WORKERS [sfs run options...] -- [program args]: one run.
run() {
	local data=$1 workers=$2
	shift 2
	timeout 300 "$SFS" run --job "$job" --workers "$workers" --backend "${BACKEND:-table}" \
		--checkpoint-interval 50 --data "$data" "$@"
}
result() { cat "$1"/out/*.csv 2>/dev/null | sort; }

run "$tmp/base" 2 --exec "$tmp/clicks" "$EVENTS" >/dev/null 2>"$tmp/base.err" ||
	{ nok "uninterrupted run failed"; show "$tmp/base.err"; exit 1; }
result "$tmp/base" >"$tmp/base.csv"
lines=$(wc -l <"$tmp/base.csv")
if [ "$lines" -lt 100 ] || ls -A "$tmp/base/out/" | grep -q '\.pending$'; then
	nok "uninterrupted run: $lines session lines, pending files left"
	exit 1
fi
ok "uninterrupted run: $lines sessions, every epoch committed"

# Kills: SIGKILL a worker (the program) at random moments.
all_kills=0 all_recs=0 diffs=0
for backend in ${SFS_EXAMPLE_BACKENDS:-table rocksdb memory}; do
	data=$tmp/kill-$backend
	BACKEND=$backend run "$data" 2 --max-recoveries 50 --exec "$tmp/clicks" "$EVENTS" "$RATE" \
		>/dev/null 2>"$tmp/kill.err" &
	sup=$!
	killed=0
	for ((k = 0; k < KILLS; k++)); do
		sleep "0.$((RANDOM % 9 + 3))"
		pid=$(pgrep -f -- "^$tmp/clicks $EVENTS" | shuf -n 1)	# not sfs run's own line
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && killed=$((killed + 1))
	done
	wait "$sup"
	rc=$?
	result "$data" >"$tmp/kill.csv"
	rec=$(grep -c "recovery [0-9]* of" "$tmp/kill.err")
	inplace=$(grep -c "rolled back in place to checkpoint" "$tmp/kill.err")
	# the program rolls back in its process when it survives a death
	kept=$(grep -o "[0-9]* worker(s) started over in their processes" "$tmp/kill.err" |
		awk '{ n += $1 } END { print n + 0 }')
	all_kills=$((all_kills + killed))
	all_recs=$((all_recs + rec))
	if [ "$rc" -ne 0 ]; then
		nok "$backend: $killed kills: sfs run exit $rc"; show "$tmp/kill.err"
	elif [ "$killed" -eq 0 ] || [ "$rec" -eq 0 ]; then
		nok "$backend: no kill landed ($killed kills, $rec recoveries): the run was too short"
	elif [ "$inplace" -gt 0 ] && [ "$kept" -eq 0 ]; then
		nok "$backend: $inplace rollbacks in place, none kept the surviving program's process"
	elif cmp -s "$tmp/base.csv" "$tmp/kill.csv"; then
		ok "$backend: $killed workers killed, $rec recoveries from checkpoints ($inplace in place, $kept surviving programs rolled back in their processes): output equals the uninterrupted run's"
	else
		diffs=$((diffs + 1))
		nok "$backend: $killed kills: output differs ($(wc -l <"$tmp/kill.csv") vs $lines lines)"
		diff "$tmp/base.csv" "$tmp/kill.csv" | head -n 6 | sed 's/^/# /'
		[ -n "${SFS_EXAMPLE_KEEP:-}" ] && cp -r "$data" "$tmp/base.csv" "$tmp/kill.err" "$SFS_EXAMPLE_KEEP/"
	fi
done

# Kills at the output's fault points: worker W's first incarnation runs with
# SFS_FAULT=RULE (the wrapper arms it once: mkdir is the test-and-set), so
# each rule kills one process, at that point.
cat >"$tmp/armed" <<EOF
#!/bin/sh
# SFS_ARM="W:RULE[ W:RULE...]": worker W's first incarnation, armed with RULE
for a in \$SFS_ARM; do
	if [ "\$SFS_WORKER" = "\${a%%:*}" ] && mkdir "$tmp/once-\$SFS_ARM_RUN-\$SFS_WORKER" 2>/dev/null; then
		export SFS_FAULT="\${a#*:}"
	fi
done
exec "$tmp/clicks" "\$@"
EOF
chmod +x "$tmp/armed"
n=0
for arm in "1:output.staged:5" "0:output.commit:5" "1:output.committed:3" \
	   "0:output.staged:3 1:output.commit:4"; do
	n=$((n + 1))
	data=$tmp/point-$n
	SFS_ARM=$arm SFS_ARM_RUN=$n run "$data" 2 --max-recoveries 50 --exec "$tmp/armed" \
		"$EVENTS" "$RATE" >/dev/null 2>"$tmp/point.err"
	rc=$?
	result "$data" >"$tmp/point.csv"
	rec=$(grep -c "recovery [0-9]* of" "$tmp/point.err")
	want=$(wc -w <<<"$arm")
	if [ "$rc" -ne 0 ]; then
		nok "killed at $arm: sfs run exit $rc"; show "$tmp/point.err"
	elif [ "$rec" -lt "$want" ]; then
		nok "killed at $arm: $rec recoveries, $want expected: a point was not reached"
	elif cmp -s "$tmp/base.csv" "$tmp/point.csv"; then
		ok "killed at $arm: $rec recoveries, output equals the uninterrupted run's"
	else
		diffs=$((diffs + 1))
		nok "killed at $arm: output differs ($(wc -l <"$tmp/point.csv") vs $lines lines)"
		diff "$tmp/base.csv" "$tmp/point.csv" | head -n 6 | sed 's/^/# /'
	fi
done

# A death before the first checkpoint completed: the group rolls back in
# place to checkpoint 0 (fresh).  The dead worker may not have laid out its
# state yet (no compactor knows it: the supervisor answers for it, or the
# next incarnation's buffers would be dropped and no checkpoint complete),
# and the old run's pending epochs are none of the result's.  Tried up to 5
# times to land the kill before the first checkpoint.
early=""
for ((try = 0; try < 5; try++)); do
	data=$tmp/early
	rm -rf "$data"
	run "$data" 2 --max-recoveries 50 --exec "$tmp/clicks" "$EVENTS" "$RATE" \
		>/dev/null 2>"$tmp/early.err" &
	sup=$!
	sleep "0.0$((RANDOM % 4 + 1))"
	pid=$(pgrep -f -- "^$tmp/clicks $EVENTS" | shuf -n 1)
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait "$sup"
	rc=$?
	result "$data" >"$tmp/early.csv"
	if [ "$rc" -ne 0 ] || ! cmp -s "$tmp/base.csv" "$tmp/early.csv"; then
		early="exit $rc, $(wc -l <"$tmp/early.csv") vs $lines lines"
		diffs=$((diffs + 1))
		break
	fi
	grep -q "rolled back in place to checkpoint 0 " "$tmp/early.err" && { early=ok; break; }
done
case $early in
ok) ok "a worker killed before the first checkpoint: rolled back in place to checkpoint 0, output equals the uninterrupted run's" ;;
"") nok "a worker killed before the first checkpoint: no kill landed before it in 5 tries" ;;
*) nok "a worker killed before the first checkpoint: $early"; show "$tmp/early.err" ;;
esac

# what make soak sums (scripts/run-tests.sh)
echo "# counts: kills=$all_kills recoveries=$all_recs differences=$diffs"

# Rescale: 2 workers for a while, then the rest with 3 from the checkpoint.
data=$tmp/rescale
run "$data" 2 --duration-ms 2500 --exec "$tmp/clicks" "$EVENTS" "$RATE" >/dev/null 2>"$tmp/rs1.err"
if ! ls -d "$data"/checkpoints/chk-* >/dev/null 2>&1; then
	nok "rescale: no checkpoint after 2500 ms"; show "$tmp/rs1.err"
elif run "$data" 3 --restore latest --exec "$tmp/clicks" "$EVENTS" >/dev/null 2>"$tmp/rs2.err" &&
     result "$data" >"$tmp/rs.csv" && cmp -s "$tmp/base.csv" "$tmp/rs.csv"; then
	ok "rescale 2→3 workers with --restore latest: output equals the uninterrupted run's ($(grep -o 'restored .* in [0-9.]* ms' "$tmp/rs2.err" | head -n 1 | sed 's/.*\(checkpoint [0-9]*\).*/\1/'))"
else
	nok "rescale 2→3: output differs or the run failed"; show "$tmp/rs2.err"
	diff "$tmp/base.csv" "$tmp/rs.csv" 2>/dev/null | head -n 6 | sed 's/^/# /'
fi

# Rescale with kills: 2 workers stopped mid-stream, restored with 3 of
# which workers 2 and 0 die at output points of the rescaled run; the group
# goes back to a checkpoint of the rescaled run, or to the old one.
data=$tmp/rescale-kill
# (both runs through the wrapper: a restore checks the program is the same)
SFS_ARM="" run "$data" 2 --duration-ms 1500 --exec "$tmp/armed" "$EVENTS" "$RATE" >/dev/null \
	2>"$tmp/rk1.err"
arm="2:output.commit:2 0:output.staged:6"
if ! ls -d "$data"/checkpoints/chk-* >/dev/null 2>&1; then
	nok "rescale with kills: no checkpoint after 1500 ms"; show "$tmp/rk1.err"
elif SFS_ARM=$arm SFS_ARM_RUN=rk run "$data" 3 --restore latest --max-recoveries 50 \
	--exec "$tmp/armed" "$EVENTS" "$RATE" >/dev/null 2>"$tmp/rk2.err" &&
     result "$data" >"$tmp/rk.csv" && cmp -s "$tmp/base.csv" "$tmp/rk.csv" &&
     [ "$(grep -c "recovery [0-9]* of" "$tmp/rk2.err")" -ge 2 ]; then
	ok "rescale 2→3 with kills at $arm: $(grep -c "recovery [0-9]* of" "$tmp/rk2.err") recoveries, output equals the uninterrupted run's"
else
	nok "rescale 2→3 with kills at $arm: output differs, a point not reached or the run failed"
	show "$tmp/rk2.err"
	diff "$tmp/base.csv" "$tmp/rk.csv" 2>/dev/null | head -n 6 | sed 's/^/# /'
fi

# Bad input: one line, exit 2.
bad() { # what expected-text [run args...] (a later --data wins over $tmp/bad)
	local what=$1 want=$2 rc
	shift 2
	run "$tmp/bad" 1 "$@" >/dev/null 2>"$tmp/bad.err"
	rc=$?
	if [ "$rc" -eq 2 ] && grep -qi -- "$want" "$tmp/bad.err"; then
		ok "$what: exit 2, '$(grep -m1 -i -- "$want" "$tmp/bad.err" | sed 's/^[^:]*: //')'"
	else
		nok "$what: exit $rc"; show "$tmp/bad.err" 4
	fi
}
bad "--exec of a missing file" "no such" --exec "$tmp/nothing-here"
mkdir -p "$tmp/a-dir"
bad "--exec of a directory" "is a directory" --exec "$tmp/a-dir"
touch "$tmp/not-exec"
bad "--exec of a file that is not executable" "not executable" --exec "$tmp/not-exec"
printf '#!/bin/sh\nexit 2\n' >"$tmp/exit2" && chmod +x "$tmp/exit2"
bad "a program that exits 2 at once" "exited 2" --exec "$tmp/exit2"
bad "the example without its arguments" "exited 2" --exec "$tmp/clicks"

# The lifecycle out of order: refused by the library with a message, the
# program exits 2, the run exits 2, and a checkpoint already taken stays.
if ! PKG_CONFIG_PATH="$prefix/lib/pkgconfig" $SFS_CC "${san[@]}" -o "$tmp/misuse" \
	"$root/tests/exec_misuse.c" $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs sfs) \
	>"$tmp/misuse.log" 2>&1; then
	nok "tests/exec_misuse.c against the installed library"; show "$tmp/misuse.log"
else
	before=$(cd "$tmp/base/checkpoints" && ls -d chk-* | sort | tr '\n' ' ')
	for m in backwards:"goes backwards" bytes:"over the limit" early:"unrequested checkpoint" kind:"another kind" \
		nobarrier:"a seal without its barrier" unrequested:"an unrequested barrier" \
		shape:"another parallelism"; do
		BACKEND=table bad "misuse: ${m#*:}" "${m#*:} refused" --data "$tmp/base" --max-recoveries 0 \
			--retain 100 --exec "$tmp/misuse" "${m%%:*}"
	done
	# A worker that wrote state and exits 0 unfinished: the run ends (the
	# program's choice), and the group names the worker and the call.
	BACKEND=table run "$tmp/unfinished" 2 --exec "$tmp/misuse" unfinished >/dev/null 2>"$tmp/unf.err"
	rc=$?
	if [ "$rc" -eq 0 ] && [ "$(grep -c 'exited 0 without sfs_task_finish after writing state' "$tmp/unf.err")" -eq 2 ]; then
		ok "a worker exiting 0 unfinished after writing state is named: '$(grep -m1 'without sfs_task_finish' "$tmp/unf.err" | sed 's/^[^:]*: //')'"
	else
		nok "unfinished workers: exit $rc, not named once each"; show "$tmp/unf.err" 6
	fi
	# Worker 0 finishes early, worker 1 dies two checkpoints later: the
	# rollback in place takes the finished worker back to the version the
	# later checkpoints carry (it once said, falsely, that none was pinned
	# and restarted the group from files).
	BACKEND=table run "$tmp/finish-early" 2 --exec "$tmp/misuse" finish-early >/dev/null 2>"$tmp/fe.err"
	rc=$?
	if [ "$rc" -eq 0 ] && grep -q "rolled back in place" "$tmp/fe.err" &&
		! grep -q "no version of checkpoint\|no rollback in place" "$tmp/fe.err"; then
		ok "a worker finished early, another dies: rolled back in place ($(grep -m1 'worker 0: rolled back' "$tmp/fe.err" | sed 's/^[^:]*: //'))"
	else
		nok "finish early then a death: exit $rc"; show "$tmp/fe.err" 6
	fi
	lost=""
	for c in $before; do
		"$SFS" checkpoints --data "$tmp/base" 2>/dev/null |
			awk -v id="${c#chk-}" '$1 == id && !/invalid/ { f = 1 } END { exit !f }' || lost="$lost $c"
		[ -f "$tmp/base/checkpoints/$c/_metadata" ] || lost="$lost $c"
	done
	if [ -z "$lost" ]; then
		ok "the misusing runs left every committed checkpoint in place ($before)"
	else
		nok "checkpoints lost or invalid after the misuse:$lost"
	fi
fi

[ "$fails" -eq 0 ] || { echo "# $fails example checks failed"; exit 1; }
