#!/usr/bin/env bash
# e2e_nexmark.sh — the correctness oracle of the query runtime: generate
# events with `sfs gen`, compute every implemented query as a batch in
# SQLite (tests/nexmark/oracle.sh) and compare with `sfs run --output` on
# every backend for 1, 2 and 3 workers, with checkpoints every 50 ms so that
# alignment and the seal run many times per job.  At the default rate (10M
# events/s of event time) 200K events are 20 ms: every window fires at end
# of input.  So the windowed queries (q5 q7 q8 q11) run a second time over
# events at SFS_NEXMARK_WINDOW_RATE (10000/s: 20 s), where watermarks fire
# windows and sessions mid-stream, between barriers, and state is cleaned
# up as it goes.  q12 (processing time) cannot be checked against SQLite:
# its counts must add up to the number of bids.  Then the bad-input rules
# of `sfs run --query`.  TAP-style lines; SFS_NEXMARK_EVENTS sets the size
# (200000 in make test, 2000000 in make bench).
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_NEXMARK_EVENTS:-200000}
QUERIES=${SFS_NEXMARK_QUERIES:-q3 q4 q5 q7 q8 q9 q11 q15 q17 q18 q19 q20}
WINDOWED=${SFS_NEXMARK_WINDOWED:-q5 q7 q8 q11}
WINDOW_RATE=${SFS_NEXMARK_WINDOW_RATE:-10000}
BACKENDS=${SFS_NEXMARK_BACKENDS:-memory rocksdb table rocksdb-direct}
WORKERS=${SFS_NEXMARK_WORKERS:-1 2 3}
OUT=$(mktemp -d)
HERE=$(cd "$(dirname "$0")" && pwd)
fails=0

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
note() { echo "# $*"; }

cleanup() {
	pkill -9 -f -- "--job e2e-nx-$$" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.e2e-nx-$$*
	rm -rf "$OUT"
}
trap cleanup EXIT

# compare QUERY EVENTS_DIR LABEL [sfs run options]: the oracle's answer over
# EVENTS_DIR against `sfs run` on every backend and worker count.
compare() {
	local q=$1 ev=$2 label=$3 b w job
	shift 3
	if ! bash "$HERE/nexmark/oracle.sh" "$q" "$ev" "$OUT/$q.expected" 2>"$OUT/oracle.err"; then
		nok "$q$label: oracle"; cat "$OUT/oracle.err"; return
	fi
	for b in $BACKENDS; do
		for w in $WORKERS; do
			job=e2e-nx-$$-$q-$w
			rm -f "$OUT/$q.out"
			if ! timeout 300 "$SFS" run --job "$job" --query "$q" --events "$EVENTS" \
				--workers "$w" --backend "$b" --checkpoint-interval 50 \
				--data "$OUT/data-$q-$b-$w" --output "$OUT/$q.out" --json "$@" \
				>"$OUT/run.json" 2>"$OUT/run.err"; then
				nok "$q$label on $b, $w workers: sfs run failed"
				grep -v '^  ' "$OUT/run.err" | tail -n 8 | sed 's/^/# /'
				continue
			fi
			if bash "$HERE/nexmark/compare.sh" "$OUT/$q.expected" "$OUT/$q.out" >"$OUT/cmp" 2>&1; then
				ok "$q$label on $b, $w workers: $(($(wc -l <"$OUT/$q.out") - 1)) rows equal SQLite's"
			else
				nok "$q$label on $b, $w workers: result differs from SQLite's"
				head -n 30 "$OUT/cmp" | sed 's/^/# /'
			fi
			note "$(cat "$OUT/run.json")"
			rm -rf "$OUT/data-$q-$b-$w"
		done
	done
}

if ! "$SFS" gen --events "$EVENTS" --out "$OUT/events" >"$OUT/gen.log" 2>&1; then
	nok "sfs gen --events $EVENTS"; cat "$OUT/gen.log"; exit 1
fi
ok "sfs gen --events $EVENTS"

for q in $QUERIES; do
	compare "$q" "$OUT/events" ""
done

if [ -n "$WINDOWED" ]; then
	if ! "$SFS" gen --events "$EVENTS" --rate "$WINDOW_RATE" --out "$OUT/events-slow" \
		>"$OUT/gen.log" 2>&1; then
		nok "sfs gen --events $EVENTS --rate $WINDOW_RATE"; cat "$OUT/gen.log"; exit 1
	fi
	ok "sfs gen --events $EVENTS --rate $WINDOW_RATE"
	for q in $WINDOWED; do
		compare "$q" "$OUT/events-slow" " at $WINDOW_RATE events/s" --rate "$WINDOW_RATE"
	done
fi

# Tiny channels (8 KiB): records spill to the workers' overflow queues all
# the time, and barrier, watermark and end-of-input markers go through the
# queues too (a finished worker once kept its queued END for ever).
for q in ${SFS_NEXMARK_SPILL:-q4 q5 q20}; do
	SFS_CHAN_KB=8 BACKENDS=memory WORKERS="2 3" compare "$q" "$OUT/events" " with 8 KiB channels"
done

# Small buffers and a large cache: buffers fill and are flushed between
# barriers all the time, and the segment must hold the cache (it was once
# sized for the default cache: with --cache-mb 512 the memory store found
# no room, nothing was flushed, and a run of a few buffers ended "ok").
for q in ${SFS_NEXMARK_SMALLBUF:-q4 q20}; do
	BACKENDS="memory table" WORKERS=2 compare "$q" "$OUT/events" \
		" with 1 MiB buffers and a 512 MiB cache" --buffer-mb 1 --cache-mb 512
done

# q12: processing-time windows; whatever the clock did, every bid counts once.
bids=$(($(wc -l <"$OUT/events/bid.csv") - 1))
for b in $BACKENDS; do
	for w in $WORKERS; do
		rm -f "$OUT/q12.out"
		if ! timeout 300 "$SFS" run --job "e2e-nx-$$-q12-$w" --query q12 --events "$EVENTS" \
			--workers "$w" --backend "$b" --checkpoint-interval 50 \
			--data "$OUT/data-q12-$b-$w" --output "$OUT/q12.out" --json \
			>"$OUT/run.json" 2>"$OUT/run.err"; then
			nok "q12 on $b, $w workers: sfs run failed"
			grep -v '^  ' "$OUT/run.err" | tail -n 8 | sed 's/^/# /'
			continue
		fi
		sum=$(awk -F, 'NR == 1 && $0 != "bidder,bid_count,starttime,endtime" { print "header"; exit }
			       NR > 1 { s += $2 } END { print s + 0 }' "$OUT/q12.out")
		if [ "$sum" = "$bids" ]; then
			ok "q12 on $b, $w workers: counts add up to the $bids bids"
		else
			nok "q12 on $b, $w workers: counts add up to $sum, not $bids"
		fi
		note "$(cat "$OUT/run.json")"
		rm -rf "$OUT/data-q12-$b-$w"
	done
done

# Bad input: a one-line error, exit 2, nothing started or overwritten.
bad() {
	local what=$1; shift
	echo keep >"$OUT/precious.csv"
	"$SFS" run --job "e2e-nx-$$-bad" --events 1000 --data "$OUT/bad-data" "$@" \
		>"$OUT/bad.out" 2>"$OUT/bad.err"
	local rc=$? lines
	lines=$(wc -l <"$OUT/bad.err")
	if [ $rc -eq 2 ] && [ "$lines" -ge 1 ] && [ "$(cat "$OUT/precious.csv")" = keep ] &&
	   [ ! -e /dev/shm/sfs.e2e-nx-$$-bad.0 ]; then
		ok "refused: $what ($(head -n 1 "$OUT/bad.err"))"
	else
		nok "refused: $what (exit $rc)"; sed 's/^/# /' "$OUT/bad.err" | head -n 5
	fi
}
bad "unknown query" --query q99 --output "$OUT/precious.csv"
bad "unknown backend" --query q4 --backend nosuch --output "$OUT/precious.csv"
bad "zero workers" --query q4 --workers 0 --output "$OUT/precious.csv"
bad "absurd workers" --query q4 --workers 100000 --output "$OUT/precious.csv"
bad "unwritable output" --query q4 --output /proc/nonexistent/out.csv
bad "data is a file" --query q4 --data "$OUT/precious.csv"
bad "zero events" --query q4 --events 0
bad "zero-sized buffers" --query q4 --buffer-mb 0

# A job name already running.
"$SFS" run --job "e2e-nx-$$-busy" --workers 1 >/dev/null 2>&1 &
sup=$!
for _ in $(seq 100); do [ -e /dev/shm/sfs.e2e-nx-$$-busy.0 ] && break; sleep 0.05; done
"$SFS" run --job "e2e-nx-$$-busy" --query q4 --events 1000 --data "$OUT/busy" \
	--output "$OUT/precious.csv" >/dev/null 2>"$OUT/busy.err"
rc=$?
if [ $rc -eq 2 ] && grep -q running "$OUT/busy.err" && [ "$(cat "$OUT/precious.csv")" = keep ]; then
	ok "refused: a job name already running"
else
	nok "refused: a job name already running (exit $rc)"
fi
kill -TERM $sup; wait $sup 2>/dev/null

# A worker killed mid-run with no recovery allowed (--max-recoveries 0; the
# recovery itself is tests/e2e_recovery.sh's): the run must fail — never
# finish with a wrong result — and leave nothing behind.
job=e2e-nx-$$-kill
timeout 120 "$SFS" run --job "$job" --query q18 --events 200000000 --workers 2 \
	--max-recoveries 0 --data "$OUT/kill" --output "$OUT/kill.csv" >"$OUT/kill.out" \
	2>"$OUT/kill.err" &
sup=$!
w=""
for _ in $(seq 200); do
	w=$(pgrep -f -- "sfs-worker --job $job --index 1" | head -n 1)
	[ -n "$w" ] && grep -q "query q18" "$OUT/kill.err" && break
	sleep 0.05
done
sleep 0.5
kill -9 "$w" 2>/dev/null
wait $sup
rc=$?
if [ $rc -eq 1 ] && grep -q "worker 1 died" "$OUT/kill.err" && [ ! -e "$OUT/kill.csv" ] &&
   [ ! -e /dev/shm/sfs.$job.0 ] && ! pgrep -f -- "--job $job" >/dev/null; then
	ok "a killed worker fails the run (exit 1, no result, nothing left behind)"
else
	nok "a killed worker fails the run (exit $rc)"; grep -v '^  ' "$OUT/kill.err" | tail -n 5 | sed 's/^/# /'
fi

[ $fails -eq 0 ]
