#!/usr/bin/env bash
# e2e_nexmark.sh — the correctness oracle of the query runtime: generate
# events with `sfs gen`, compute every implemented query as a batch in
# SQLite (tests/nexmark/oracle.sh) and compare with `sfs run --output` on
# every backend for 1, 2 and 3 workers, with barriers every 20 ms so that
# alignment and the seal run many times per job.  Then the bad-input rules
# of `sfs run --query`.  TAP-style lines; SFS_NEXMARK_EVENTS sets the size
# (200000 in make test, 2000000 in make bench).
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_NEXMARK_EVENTS:-200000}
QUERIES=${SFS_NEXMARK_QUERIES:-q3 q4 q9 q15 q17 q18 q19 q20}
BACKENDS=${SFS_NEXMARK_BACKENDS:-memory rocksdb-direct}
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

if ! "$SFS" gen --events "$EVENTS" --out "$OUT/events" >"$OUT/gen.log" 2>&1; then
	nok "sfs gen --events $EVENTS"; cat "$OUT/gen.log"; exit 1
fi
ok "sfs gen --events $EVENTS"

for q in $QUERIES; do
	if ! bash "$HERE/nexmark/oracle.sh" "$q" "$OUT/events" "$OUT/$q.expected" 2>"$OUT/oracle.err"; then
		nok "$q: oracle"; cat "$OUT/oracle.err"; continue
	fi
	for b in $BACKENDS; do
		for w in $WORKERS; do
			job=e2e-nx-$$-$q-$w
			rm -f "$OUT/$q.out"
			if ! timeout 300 "$SFS" run --job "$job" --query "$q" --events "$EVENTS" \
				--workers "$w" --backend "$b" --checkpoint-interval 20 \
				--data "$OUT/data-$q-$b-$w" --output "$OUT/$q.out" --json \
				>"$OUT/run.json" 2>"$OUT/run.err"; then
				nok "$q on $b, $w workers: sfs run failed"
				grep -v '^  ' "$OUT/run.err" | tail -n 8 | sed 's/^/# /'
				continue
			fi
			if bash "$HERE/nexmark/compare.sh" "$OUT/$q.expected" "$OUT/$q.out" >"$OUT/cmp" 2>&1; then
				ok "$q on $b, $w workers: $(($(wc -l <"$OUT/$q.out") - 1)) rows equal SQLite's"
			else
				nok "$q on $b, $w workers: result differs from SQLite's"
				head -n 30 "$OUT/cmp" | sed 's/^/# /'
			fi
			note "$(cat "$OUT/run.json")"
			rm -rf "$OUT/data-$q-$b-$w"
		done
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

[ $fails -eq 0 ]
