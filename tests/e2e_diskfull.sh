#!/usr/bin/env bash
# e2e_diskfull.sh — a disk that fills up mid-run (issue 22, part 1).  The
# job's data directory (flush target files, checkpoints, the sink's epoch
# changelogs) lives on a small tmpfs mounted for the test; while q20 runs,
# a filler file takes every free byte, stays a few seconds, and is
# removed.  Every writer meets ENOSPC meanwhile (the compactor's flushes
# and merges, the checkpointer's links and _metadata, the sink's epochs):
#  - the run resumes by itself once space returns (no recovery: every
#    writer retried and back-pressured) and its --output equals
#    an uninterrupted run's, byte for byte, on the table target (make
#    soak: table, rocksdb and memory);
#  - a failing file is logged once per episode, not once per retry;
#  - every checkpoint `sfs checkpoints` lists afterwards is valid;
#  - a disk that never frees stops the run within --io-stall-timeout-ms
#    with one line naming the problem, its last completed checkpoint
#    intact, nothing left running.
# Needs root (mount); without it every case is skipped.  TAP-style lines.
# SFS_DISKFULL_EVENTS, SFS_DISKFULL_BACKENDS narrow it.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_DISKFULL_EVENTS:-1500000}
# make test: the table target (~40 s); make soak: the three
BACKENDS=${SFS_DISKFULL_BACKENDS:-table}
[ -n "${SFS_SOAK:-}" ] && BACKENDS=${SFS_DISKFULL_BACKENDS:-table rocksdb memory}
RATE=${SFS_DISKFULL_RATE:-150000}   # ~10 s a run: room for a full spell in the middle
FS_MB=${SFS_DISKFULL_MB:-1536}   # room for the run's own data (q20 at 1.5M: ~0.5 GB)
OUT=$(mktemp -d)
FS=$OUT/fs
fails=0
spells=0
differences=0
job=e2e-df-$$

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
note() { echo "# $*"; }

cleanup() {
	pkill -9 -f -- "--job $job" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$job*
	umount "$FS" 2>/dev/null
	[ -n "${SFS_DISKFULL_KEEP:-}" ] && cp "$OUT"/*.err "$SFS_DISKFULL_KEEP"/ 2>/dev/null
	rm -rf "$OUT"
}
trap cleanup EXIT

mkdir -p "$FS"
if ! mount -t tmpfs -o size=${FS_MB}m,mode=0700 tmpfs "$FS" 2>/dev/null; then
	echo "ok - # SKIP cannot mount a tmpfs (not root?)"
	exit 0
fi

run() { # backend data output [options]
	local b=$1 data=$2 out=$3
	shift 3
	timeout 300 "$SFS" run --job "$job" --query q20 --backend "$b" --events "$EVENTS" \
		--workers 2 --checkpoint-interval 200 --data "$data" --output "$out" --json \
		--store-mb 1024 "$@"
}

# first_checkpoint: wait (10 s at most) for the run's first checkpoint, then 1 s more
first_checkpoint() {
	for ((t = 0; t < 200; t++)); do
		ls -d "$FS"/data/checkpoints/chk-* >/dev/null 2>&1 && break
		sleep 0.05
	done
	sleep 1
}

# fill: take every free byte of the tmpfs (dd stops at ENOSPC)
fill() { dd if=/dev/zero of="$FS/filler" bs=1M status=none 2>/dev/null; sync; }

for b in $BACKENDS; do
	run "$b" "$OUT/base-data" "$OUT/base.csv" >/dev/null 2>"$OUT/base.err" ||
		{ nok "$b: the uninterrupted run failed"; tail -n 5 "$OUT/base.err" | sed 's/^/# /'; continue; }
	rm -rf "$OUT/base-data"
	rm -rf "$FS"/*
	run "$b" "$FS/data" "$OUT/full.csv" --max-rate "$RATE" >"$OUT/full.json" \
		2>"$OUT/full.err" &
	pid=$!
	# fill once the first checkpoint exists, hold it 3 s, free it
	first_checkpoint
	fill
	sleep 3
	full_at=$(df -k --output=avail "$FS" | tail -n 1)
	rm -f "$FS/filler"
	spells=$((spells + 1))
	wait $pid
	rc=$?
	recs=$(grep -o '"recoveries": [0-9]*' "$OUT/full.json" | awk '{print $2}')
	if [ $rc -eq 0 ] && [ "${recs:-x}" = 0 ] && cmp -s "$OUT/base.csv" "$OUT/full.csv"; then
		ok "$b: a disk full for 3 s mid-run, then freed: the run resumed by itself (no recovery) and its result equals the uninterrupted one ($(wc -l <"$OUT/base.csv") lines; ${full_at} KB free while full)"
	else
		[ $rc -eq 0 ] && differences=$((differences + 1))
		nok "$b: after a full disk: exit $rc, ${recs:-?} recoveries, $(wc -l <"$OUT/full.csv" 2>/dev/null) vs $(wc -l <"$OUT/base.csv") lines"
		grep -v '^  ' "$OUT/full.err" | tail -n 12 | sed 's/^/# /'
	fi
	# each failing file is said once per episode, not at every retry (every
	# 100 ms: ~30 times in the 3 s).  Other writers free and take space while
	# it is full, so a file may see a few episodes, and each epoch of a sink
	# is a file of its own: bound the lines per file, not in all.
	said=$(grep -c -i "no space left" "$OUT/full.err")
	most=$(grep -i "no space left" "$OUT/full.err" | sort | uniq -c | sort -rn |
		awk 'NR == 1 { print $1 }')
	if [ "$said" -ge 1 ] && [ "${most:-0}" -le 3 ]; then
		ok "$b: the full disk was reported, $said lines in all, at most $most for one file"
	else
		nok "$b: 'no space left' said $said times, $most for one file"
		grep -i "no space" "$OUT/full.err" | sort | uniq -c | sort -rn | head -n 5 | sed 's/^/# /'
	fi
	"$SFS" checkpoints --data "$FS/data" --json >"$OUT/ck.json" 2>"$OUT/ck.err"
	if grep -q '"valid": true' "$OUT/ck.json" && ! grep -q '"valid": false' "$OUT/ck.json"; then
		ok "$b: every checkpoint listed afterwards is valid ($(grep -o '"valid": true' "$OUT/ck.json" | wc -l))"
	else
		nok "$b: checkpoints after the full disk: $(head -c 300 "$OUT/ck.json") $(head -n 2 "$OUT/ck.err")"
	fi
	rm -rf "$FS"/*
done

# A disk that never frees: the run stops within its bound, one line.
b=table
rm -rf "$FS"/*
start=$(date +%s)
run "$b" "$FS/data" "$OUT/stuck.csv" --max-rate "$RATE" --io-stall-timeout-ms 4000 \
	>/dev/null 2>"$OUT/stuck.err" &
pid=$!
first_checkpoint
fill
wait $pid
rc=$?
secs=$(($(date +%s) - start))
rm -f "$FS/filler"
line=$(grep -ci "cannot write for .* (no space left on device" "$OUT/stuck.err")
if [ $rc -eq 1 ] && [ "$line" -eq 1 ] && [ $secs -lt 60 ]; then
	ok "a disk that stays full stops the run: exit 1 after ${secs}s: $(grep -o 'cannot write for .*' "$OUT/stuck.err")"
else
	nok "a disk that stays full: exit $rc after ${secs}s, the line said $line times"
	grep -v '^  ' "$OUT/stuck.err" | tail -n 8 | sed 's/^/# /'
fi
"$SFS" checkpoints --data "$FS/data" --json >"$OUT/ck.json" 2>"$OUT/ck.err"
if grep -q '"valid": true' "$OUT/ck.json" && ! grep -q '"valid": false' "$OUT/ck.json"; then
	ok "its last completed checkpoint is intact"
else
	nok "its checkpoints: $(head -c 300 "$OUT/ck.json") $(head -n 2 "$OUT/ck.err")"
fi
if ! pgrep -f -- "--job $job" >/dev/null && ! ls /dev/shm/sfs.$job* >/dev/null 2>&1; then
	ok "nothing left running"
else
	nok "processes or segments of $job left behind"
fi
# what make soak sums (scripts/run-tests.sh)
echo "# counts: diskfull=$((spells + 1)) differences=$differences"
[ $fails -eq 0 ]
