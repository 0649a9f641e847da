#!/usr/bin/env bash
# Runs every test: the Criterion binaries in $BUILD/tests (each test in its
# own process, $JOBS at a time) and the end-to-end scripts tests/e2e_*.sh
# (which print TAP-style "ok - ..." / "not ok - ..." lines and run the real
# binaries in $SFS_BIN).  Each binary or script is bounded by $TEST_TIMEOUT.
# Ends with one line "N passed, N failed" and a non-zero exit on any failure.
set -u
BUILD=${BUILD:-build}
JOBS=${JOBS:-2}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
export SFS_BIN=${SFS_BIN:-$PWD/bin}
log_dir=$BUILD/test-logs
mkdir -p "$log_dir"

passed=0 failed=0
failures=()

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	start=$(date +%s)
	# Soaks run the randomized and crash tests 20x longer: lift the
	# per-test timeouts the suites declare for make test.
	extra=()
	[ -n "${SFS_SOAK:-}" ] && extra=(--timeout "$TEST_TIMEOUT")
	timeout -k 10 "$TEST_TIMEOUT" "$t" --jobs "$JOBS" "${extra[@]}" >"$log_dir/$name.log" 2>&1
	rc=$?
	syn=$(grep -a 'Synthesis:' "$log_dir/$name.log" | tail -n 1)
	p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$syn")
	f=$(sed -n 's/.*Failing: \([0-9]*\).*/\1/p' <<<"$syn")
	c=$(sed -n 's/.*Crashing: \([0-9]*\).*/\1/p' <<<"$syn")
	p=${p:-0} f=${f:-0} c=${c:-0}
	if [ -z "$syn" ] || [ $rc -ne 0 ] && [ $((f + c)) -eq 0 ]; then
		f=$((f + 1))	# timed out or died without a synthesis line
	fi
	passed=$((passed + p)); failed=$((failed + f + c))
	printf '%-28s %3d passed %3d failed  %4ds\n' "$name" "$p" $((f + c)) $(($(date +%s) - start))
	if [ $((f + c)) -ne 0 ]; then
		failures+=("$name")
		grep -a -E '\[----\]|\[FAIL\]|CRASH|Timed out|Synthesis' "$log_dir/$name.log" | head -n 40
		[ $rc -eq 124 ] && echo "  $name: timed out after ${TEST_TIMEOUT}s"
	fi
done

# run_tap NAME LABEL TIMEOUT SCRIPT: a TAP script ("ok [N] - ", "not ok [N] - " lines)
# counted into the totals, its log in $log_dir/NAME.log: the end-to-end scripts, and the
# scripts after the Flink suite.
run_tap() {
	local name=$1 label=$2 limit=$3 script=$4 start rc p f
	start=$(date +%s)
	timeout -k 10 "$limit" bash "$script" >"$log_dir/$name.log" 2>&1
	rc=$?
	p=$(grep -a -E -c '^ok( [0-9]+)? - ' "$log_dir/$name.log")
	f=$(grep -a -E -c '^not ok( [0-9]+)? - ' "$log_dir/$name.log")
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
	fi
	passed=$((passed + p)); failed=$((failed + f))
	printf '%-28s %3d passed %3d failed  %4ds\n' "$label" "$p" "$f" $(($(date +%s) - start))
	if [ "$f" -ne 0 ]; then
		failures+=("$name")
		grep -a -E '^not ok|^#' "$log_dir/$name.log" | head -n 40
		[ $rc -eq 124 ] && echo "  $name: timed out after ${limit}s"
	fi
}

for s in tests/e2e_*.sh; do
	[ -f "$s" ] || continue
	run_tap "$(basename "$s" .sh)" "$(basename "$s" .sh)" "$TEST_TIMEOUT" "$s"
done

# The Flink backend's suite (flink/, JUnit through Maven; make test sets
# FLINK_TESTS=1 once the JNI library is built).  One line per test class;
# the first run downloads Flink's artifacts (count it in the budget).
if [ -n "${FLINK_TESTS:-}" ]; then
	start=$(date +%s)
	rm -rf flink/target/surefire-reports	# a report of a test since removed is no result
	(cd flink && timeout -k 10 "${FLINK_TEST_TIMEOUT:-900}" mvn -B -q -Dsfs.require=true \
		-Dsfs.bin="$SFS_BIN" test) >"$log_dir/flink.log" 2>&1
	rc=$?
	p=0 f=0
	for x in flink/target/surefire-reports/TEST-*.xml; do
		[ -f "$x" ] || continue
		read -r t e fl sk < <(sed -n 's/.*<testsuite[^>]* tests="\([0-9]*\)"[^>]* errors="\([0-9]*\)"[^>]* skipped="\([0-9]*\)"[^>]* failures="\([0-9]*\)".*/\1 \2 \4 \3/p' "$x" | head -n 1)
		t=${t:-0} e=${e:-0} fl=${fl:-0} sk=${sk:-0}
		cls=$(basename "$x" .xml); cls=${cls#TEST-io.sfs.flink.}
		printf '%-28s %3d passed %3d failed\n' "flink/$cls" $((t - e - fl - sk)) $((e + fl))
		p=$((p + t - e - fl - sk)); f=$((f + e + fl))
	done
	if [ $rc -ne 0 ] && [ $f -eq 0 ]; then
		f=1
	fi
	passed=$((passed + p)); failed=$((failed + f))
	printf '%-28s %3d passed %3d failed  %4ds\n' "flink (mvn test)" $p $f $(($(date +%s) - start))
	if [ $f -ne 0 ]; then
		failures+=("flink")
		grep -a -E 'Tests run:|FAIL|ERROR\]' "$log_dir/flink.log" | head -n 40
		[ $rc -eq 124 ] && echo "  flink: timed out"
	fi
	# A standalone cluster (a JobManager and two TaskManager JVMs) and a TaskManager killed
	# mid-run: the module's classes are built by the suite above.
	BUILD=0 SFS_BIN_DIR="$SFS_BIN" run_tap flink_tm_kill "flink/cluster/test_tm_kill" \
		"$TEST_TIMEOUT" flink/cluster/test_tm_kill.sh
	# Nexmark on Flink at a small size: digests on sfs and hashmap equal the C runtime's.
	run_tap flink_nexmark "bench/flink/nexmark digests" "${FLINK_TEST_TIMEOUT:-900}" \
		bench/flink/test_nexmark_digests.sh
fi

[ ${#failures[@]} -ne 0 ] && echo "failed: ${failures[*]} (logs in $log_dir)"
echo "$passed passed, $failed failed"
# The soak's one line: what the crash scripts counted ("# counts: k=v ..."
# lines: kills of random roles, recoveries, results that differ from an
# uninterrupted run's, checkpoints refused on the way), summed.
if [ -n "${SFS_SOAK:-}" ]; then
	grep -a -h '^# counts: ' "$log_dir"/e2e_*.log 2>/dev/null | sed 's/^# counts: //' | tr ' ' '\n' |
		awk -F= 'NF == 2 { s[$1] += $2 } END {
			printf "soak: %d kills, %d recoveries, %d result differences (must be 0), " \
			       "%d checkpoints refused, %d disk-full spells, %d power losses\n",
			       s["kills"], s["recoveries"], s["differences"], s["refused"],
			       s["diskfull"], s["powerloss"] }'
fi
[ "$failed" -eq 0 ]
