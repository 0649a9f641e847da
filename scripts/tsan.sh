#!/usr/bin/env bash
# tsan.sh — the multi-threaded processes of sfs under ThreadSanitizer
# (`make tsan`): the compactor (its maintenance threads, the table target's
# background merges, RocksDB's threads) and the supervisor (the metrics
# server's thread), in real runs, with binaries built by make tsan in
# build-tsan/.  The workers are single-threaded: TSan has nothing to see
# there.  Criterion's runner does not start under TSan (its arena at a fixed
# address collides with TSan's shadow memory), so the unit tests are not run
# here.  Exits 1 when any process reported a race (every report is kept in
# $OUT), 0 when all runs were clean.  tests/tsan.supp says what is
# suppressed and why.
set -u
BIN=${SFS_BIN:-$PWD/build-tsan/bin}
OUT=${TSAN_OUT:-$(mktemp -d)}
SUPP=$(cd "$(dirname "$0")/.." && pwd)/tests/tsan.supp
job=tsan-$$
fails=0
export TSAN_OPTIONS="halt_on_error=0 suppressions=$SUPP log_path=$OUT/tsan"
cleanup() { pkill -9 -f -- "--job $job" 2>/dev/null; wait 2>/dev/null; rm -f /dev/shm/sfs.$job*; }
trap cleanup EXIT

run() { # name args...: one run; its reports counted
	local name=$1 n
	shift
	rm -rf "$OUT/data" "$OUT"/tsan.*
	timeout 600 "$BIN/sfs" run --job "$job" --data "$OUT/data" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	n=$(cat "$OUT"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer')
	if [ "$n" -eq 0 ]; then
		echo "ok - $name: no race reported"
	else
		echo "not ok - $name: $n reports"
		cat "$OUT"/tsan.* | grep '^SUMMARY' | sort | uniq -c | sed 's/^/# /'
		mkdir -p "$OUT/reports-$name" && mv "$OUT"/tsan.* "$OUT/reports-$name/"
		fails=$((fails + 1))
	fi
}

for b in table memory rocksdb; do
	for q in q20 q9; do
		run "$q-$b" --query "$q" --events 300000 --workers 2 --backend "$b" \
			--maintenance-threads 2 --checkpoint-interval 100 --json
	done
done
# The metrics server's thread, scraped while the group runs.
port=$((20000 + $$ % 20000))
( for i in $(seq 1 30); do curl -s "http://127.0.0.1:$port/metrics" >/dev/null 2>&1; sleep 0.1; done ) &
run "metrics-scrapes" --query q18 --events 400000 --workers 2 --backend table --max-rate 200000 \
	--maintenance-threads 2 --checkpoint-interval 100 --metrics-addr "127.0.0.1:$port" --json
wait
echo "# reports and logs in $OUT"
[ "$fails" -eq 0 ]
