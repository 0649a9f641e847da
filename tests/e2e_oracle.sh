#!/usr/bin/env bash
# e2e_oracle.sh — the Nexmark correctness oracle (tests/nexmark/): every
# query's SQL against the hand-computed answers in
# tests/nexmark/fixtures/*/expected/, the q11 fast path against its
# event-by-event simulation, empty input, the database cache, and the bad
# arguments of oracle.sh and compare.sh.  Needs sqlite3, not the generator.
# Prints TAP-style lines; fast (well under 10 s).
set -u
NX=$PWD/tests/nexmark
ORACLE=$NX/oracle.sh
COMPARE=$NX/compare.sh
OUT=$(mktemp -d)
fails=0
QUERIES="q3 q4 q5 q7 q8 q9 q11 q15 q17 q18 q19 q20"

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

cleanup() { rm -rf "$OUT"; }
trap cleanup EXIT

if ! command -v sqlite3 >/dev/null 2>&1; then
	nok "sqlite3 is installed (scripts/deps.sh installs it)"
	exit 1
fi

# The fixtures are copied: the oracle caches nexmark.db next to the CSVs.
for d in "$NX"/fixtures/*/; do
	cp -r "$d" "$OUT/"
done

# ---- every hand-computed answer ----------------------------------------------
for exp in "$NX"/fixtures/*/expected/*.csv; do
	fx=$(basename "$(dirname "$(dirname "$exp")")")
	q=$(basename "$exp" .csv)
	if bash "$ORACLE" "$q" "$OUT/$fx" "$OUT/$fx.$q.csv" 2>"$OUT/err" &&
		bash "$COMPARE" "$exp" "$OUT/$fx.$q.csv" >"$OUT/cmp"; then
		ok "$q on fixture $fx matches the hand-computed answer"
	else
		nok "$q on fixture $fx matches the hand-computed answer"
		sed 's/^/# /' "$OUT/err" "$OUT/cmp"
	fi
done

# ---- q11: the fast path agrees with the simulation ------------------------------
SFS_ORACLE_SIMULATE_ALL=1 bash "$ORACLE" q11 "$OUT/session" "$OUT/q11.sim.csv" &&
	bash "$COMPARE" "$NX/fixtures/session/expected/q11.csv" "$OUT/q11.sim.csv" >/dev/null
check "q11 with every bidder simulated event by event gives the same answer" [ $? -eq 0 ]

# ---- every query runs on every fixture ----------------------------------------------
bad=
for d in "$OUT"/*/; do
	for q in $QUERIES; do
		bash "$ORACLE" "$q" "$d" "$OUT/any.csv" 2>/dev/null &&
			head -n 1 "$OUT/any.csv" | grep -q '^[a-z_0-9]*\(,[a-z_0-9]*\)*$' ||
			bad="$bad $(basename "$d"):$q"
	done
done
check "every query runs on every fixture and writes a lower-case header${bad:+ (failed:$bad)}" [ -z "$bad" ]

# ---- empty input: a header and no rows ------------------------------------------------
mkdir -p "$OUT/empty"
for f in person auction bid; do head -n 1 "$OUT/basic/$f.csv" >"$OUT/empty/$f.csv"; done
bad=
for q in $QUERIES; do
	bash "$ORACLE" "$q" "$OUT/empty" "$OUT/e.csv" 2>/dev/null && [ "$(wc -l <"$OUT/e.csv")" -eq 1 ] ||
		bad="$bad $q"
done
check "header-only CSVs give a header and no rows${bad:+ (failed:$bad)}" [ -z "$bad" ]

# ---- the database cache -------------------------------------------------------------
db=$OUT/hop/nexmark.db
check "the database is cached next to the CSVs" [ -f "$db" ]
before=$(stat -c %Y.%Z "$db")
sleep 1.1
bash "$ORACLE" q5 "$OUT/hop" "$OUT/c1.csv"
check "a fresh cache is reused" [ "$(stat -c %Y.%Z "$db")" = "$before" ]
echo "7,1,7,100,Google,u,12000," >>"$OUT/hop/bid.csv"
bash "$ORACLE" q5 "$OUT/hop" "$OUT/c2.csv"
check "a CSV newer than the cache rebuilds it" [ "$(stat -c %Y.%Z "$db")" != "$before" ]
check "... and the answer follows the new events" grep -qx '1,2' "$OUT/c2.csv"
check "a bare query number works (5 = q5)" bash -c "bash '$ORACLE' 5 '$OUT/hop' '$OUT/c3.csv' && cmp -s '$OUT/c2.csv' '$OUT/c3.csv'"

# ---- bad arguments and bad input: exit 2 with one line --------------------------------
exit2() {	# exit2 WHAT ARGS...: oracle.sh ARGS exits 2 with a one-line message
	local what=$1; shift
	bash "$ORACLE" "$@" >"$OUT/o" 2>"$OUT/e"
	local rc=$?
	if [ $rc -eq 2 ] && [ "$(wc -l <"$OUT/e")" -eq 1 ] && [ ! -s "$OUT/o" ]; then
		ok "$what exits 2 with a one-line message"
	else
		nok "$what exits 2 with a one-line message (rc $rc)"
		sed 's/^/# /' "$OUT/e"
	fi
}
exit2 "no arguments"
exit2 "two arguments" q3 "$OUT/basic"
exit2 "an unknown query" q12 "$OUT/basic" "$OUT/x.csv"
exit2 "a query name that is not one" 'q3;' "$OUT/basic" "$OUT/x.csv"
exit2 "a missing data directory" q3 "$OUT/nonexistent" "$OUT/x.csv"
mkdir -p "$OUT/nobid"; cp "$OUT/basic/person.csv" "$OUT/basic/auction.csv" "$OUT/nobid/"
exit2 "a missing bid.csv" q3 "$OUT/nobid" "$OUT/x.csv"
check "... and writes no output file" [ ! -e "$OUT/x.csv" ]
mkdir -p "$OUT/badhdr"; cp "$OUT/basic/"*.csv "$OUT/badhdr/"
sed -i '1s/price/cost/' "$OUT/badhdr/bid.csv"
exit2 "a bid.csv with another header" q3 "$OUT/badhdr" "$OUT/x.csv"
mkdir -p "$OUT/dup"; cp "$OUT/basic/"*.csv "$OUT/dup/"
echo "5,2000,1001,1,Google,u,1436918400010,dup" >>"$OUT/dup/bid.csv"	# seq 5 is an auction
exit2 "a seq used twice across the files" q3 "$OUT/dup" "$OUT/x.csv"
mkdir -p "$OUT/nonint"; cp "$OUT/basic/"*.csv "$OUT/nonint/"
echo "99,2000,1001,12.5,Google,u,1436918400010,x" >>"$OUT/nonint/bid.csv"
exit2 "a non-integer price" q3 "$OUT/nonint" "$OUT/x.csv"

# ---- compare.sh -------------------------------------------------------------------------
exp=$NX/fixtures/basic/expected/q17.csv
bash "$COMPARE" "$exp" "$exp" >"$OUT/o" 2>&1
check_rc "compare.sh: identical files exit 0 silently" $? 0 test ! -s "$OUT/o"
sed '3d; 5s/,1,/,2,/' "$exp" >"$OUT/changed.csv"
bash "$COMPARE" "$exp" "$OUT/changed.csv" >"$OUT/o" 2>&1
check "compare.sh: different files exit 1" [ $? -eq 1 ]
check "... printing both row counts" bash -c "grep -q 'expected: 8 rows' '$OUT/o' && grep -q 'actual:   7 rows' '$OUT/o'"
check "... and the differing lines with their line numbers" grep -q '^  -3: 2001,2015-07-15' "$OUT/o" &&
	grep -q '^  +4: 2003,2015-07-15,2,0' "$OUT/o"
bash "$COMPARE" "$exp" "$OUT/none.csv" >/dev/null 2>&1
check "compare.sh: a missing file exits 2" [ $? -eq 2 ]
bash "$COMPARE" "$exp" >/dev/null 2>&1
check "compare.sh: one argument exits 2" [ $? -eq 2 ]

echo "# $fails failure(s)"
exit $((fails > 0))
