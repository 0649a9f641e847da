#!/usr/bin/env bash
# e2e_mthreads.sh — the compactor's maintenance threads change no result
# (compactor/flush.h: worker w is flushed by thread w mod N): q4, q9 and q20
# with 3 workers on the table, rocksdb and memory targets, once with
# `--maintenance-threads 1` (no thread: the main thread flushes every
# worker, as before) and once with each count of SFS_MTHREADS_COUNTS (4:
# one thread per worker and one idle; on the memory target also 2: one
# thread flushes two workers, interleaved with the other's; the memory
# target is the one where two threads flushing one worker showed as a
# wrong result), checkpoints every 50 ms.  Every output
# must be byte-identical to the 1-thread run's and equal to the SQLite
# oracle's; the compactor's log must show the thread count it ran with (a
# run that silently used one thread tests nothing).  Then the default
# (spare cores, at least 1) and the refusal of a bad count.  TAP-style
# lines; SFS_MTHREADS_EVENTS (200000), SFS_MTHREADS_QUERIES,
# SFS_MTHREADS_BACKENDS, SFS_MTHREADS_COUNTS (4) and
# SFS_MTHREADS_COUNTS_MEMORY ("2 4") set the size (~40 s on 2 idle cores).
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_MTHREADS_EVENTS:-200000}
QUERIES=${SFS_MTHREADS_QUERIES:-q4 q9 q20}
BACKENDS=${SFS_MTHREADS_BACKENDS:-table rocksdb memory}
COUNTS=${SFS_MTHREADS_COUNTS:-4}
COUNTS_MEMORY=${SFS_MTHREADS_COUNTS_MEMORY:-2 4}
WORKERS=3
OUT=$(mktemp -d)
HERE=$(cd "$(dirname "$0")" && pwd)
fails=0

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
note() { echo "# $*"; }

cleanup() {
	pkill -9 -f -- "--job e2e-mt-$$" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.e2e-mt-$$*
	rm -rf "$OUT"
}
trap cleanup EXIT

# run QUERY BACKEND THREADS OUT: one `sfs run`, its stderr in OUT.err
run() {
	local q=$1 b=$2 n=$3 out=$4
	rm -f "$out"
	timeout 120 "$SFS" run --job "e2e-mt-$$-$q-$b-$n" --query "$q" --events "$EVENTS" \
		--workers "$WORKERS" --backend "$b" --checkpoint-interval 50 \
		--data "$OUT/data-$q-$b-$n" --output "$out" --json --maintenance-threads "$n" \
		>"$out.json" 2>"$out.err"
	local rc=$?
	rm -rf "$OUT/data-$q-$b-$n"
	return $rc
}

# threads_used ERR: the maintenance threads the compactor logged
threads_used() {
	sed -n 's/.*flushing to the .* target, \([0-9]*\) maintenance thread(s).*/\1/p' "$1" |
		head -n 1
}

if ! "$SFS" gen --events "$EVENTS" --out "$OUT/events" >"$OUT/gen.log" 2>&1; then
	nok "sfs gen --events $EVENTS"; cat "$OUT/gen.log"; exit 1
fi
for q in $QUERIES; do
	if ! bash "$HERE/nexmark/oracle.sh" "$q" "$OUT/events" "$OUT/$q.expected" \
		2>"$OUT/oracle.err"; then
		nok "$q: oracle"; cat "$OUT/oracle.err"; continue
	fi
	for b in $BACKENDS; do
		base=$OUT/$q-$b-1.csv
		if ! run "$q" "$b" 1 "$base"; then
			nok "$q on $b, 1 thread: sfs run failed"
			grep -v '^  ' "$base.err" | tail -n 8 | sed 's/^/# /'
			continue
		fi
		if ! bash "$HERE/nexmark/compare.sh" "$OUT/$q.expected" "$base" >"$OUT/cmp" 2>&1; then
			nok "$q on $b, 1 thread: result differs from SQLite's"
			head -n 20 "$OUT/cmp" | sed 's/^/# /'
			continue
		fi
		counts=$COUNTS
		[ "$b" = memory ] && counts=$COUNTS_MEMORY
		for n in $counts; do
			got=$OUT/$q-$b-$n.csv
			if ! run "$q" "$b" "$n" "$got"; then
				nok "$q on $b, $n threads: sfs run failed"
				grep -v '^  ' "$got.err" | tail -n 8 | sed 's/^/# /'
				continue
			fi
			used=$(threads_used "$got.err")
			if [ "$used" != "$n" ]; then
				nok "$q on $b, $n threads: the compactor ran ${used:-?} thread(s)"
			elif cmp -s "$base" "$got"; then
				ok "$q on $b, $WORKERS workers: $n threads give the 1-thread result," \
				   "$(($(wc -l <"$got") - 1)) rows equal SQLite's"
			else
				nok "$q on $b, $n threads: result differs from the 1-thread run's"
				bash "$HERE/nexmark/compare.sh" "$base" "$got" | head -n 20 | sed 's/^/# /'
			fi
			note "$(cat "$got.json")"
		done
	done
done

# The default: the node's cores no worker holds, at least 1 — with as many
# workers as cores, 1; with one worker on a one-node machine, the others.
default_case() { # WORKERS WANT
	local w=$1 want=$2 used
	rm -f "$OUT/def.csv"
	if timeout 120 "$SFS" run --job "e2e-mt-$$-def" --query q20 --events 20000 --workers "$w" \
		--data "$OUT/data-def" --output "$OUT/def.csv" --json >/dev/null 2>"$OUT/def.err"; then
		used=$(threads_used "$OUT/def.err")
		[ "$used" = "$want" ] && ok "default with $w worker(s) on $ncpu cores: $want thread(s)" ||
			nok "default with $w worker(s) on $ncpu cores: ${used:-?} threads, want $want"
	else
		nok "default thread count: sfs run failed"; tail -n 5 "$OUT/def.err" | sed 's/^/# /'
	fi
	rm -rf "$OUT/data-def"
}
ncpu=$(nproc)
nnodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
[ "$ncpu" -le 48 ] && default_case "$ncpu" 1
[ "$nnodes" -le 1 ] && default_case 1 $((ncpu > 1 ? ncpu - 1 : 1))

for bad in 0 257 x; do
	"$SFS" run --job "e2e-mt-$$-bad" --query q20 --events 1000 --data "$OUT/bad" \
		--maintenance-threads "$bad" >/dev/null 2>"$OUT/bad.err"
	rc=$?
	if [ $rc -eq 2 ] && [ ! -e "/dev/shm/sfs.e2e-mt-$$-bad.0" ]; then
		ok "refused: --maintenance-threads $bad ($(head -n 1 "$OUT/bad.err"))"
	else
		nok "refused: --maintenance-threads $bad (exit $rc)"
	fi
done

echo "# $fails failed"
[ "$fails" -eq 0 ]
