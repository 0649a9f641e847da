#!/usr/bin/env bash
# e2e_get.sh — queryable state from outside the group: `sfs run --query
# q18` runs throttled (--max-rate) with checkpoints on each flush target,
# and while it runs `sfs get` reads q18.last for a (bidder, auction) pair
# that `sfs gen` says bids early in the stream: exit 0 and a row whose
# bidder and auction are the key's (the key is bidder | auction, 8 bytes
# each, big-endian: --key-hex; the value a struct q_bid, little-endian,
# query/records.h), read again as JSON; a key no bid has gives "absent"
# and exit 1; bad arguments, an unknown state and a job that does not run
# exit 2.  Then the run is stopped (SIGINT): no child failed, the
# segments are gone.  A q15 run gives counter and map state: its per-day
# count grows between two reads, its map of bidders lists entries, one
# user key reads alone.  TAP-style
# lines; SFS_GET_BACKENDS narrows the targets.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
BACKENDS=${SFS_GET_BACKENDS:-memory table rocksdb}
OUT=$(mktemp -d)
fails=0
runpid=

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }

cleanup() {
	[ -n "$runpid" ] && kill -9 "$runpid" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.e2e-get-$$*
	rm -rf "$OUT"
}
trap cleanup EXIT

# A bid of the first events: its bidder and auction, as the key's hex.
"$SFS" gen --events 2000 --out "$OUT/ev" >/dev/null || { nok "sfs gen"; exit 1; }
IFS=, read -r _ auction bidder _ < <(sed -n 2p "$OUT/ev/bid.csv")
KEY=$(printf '%016x%016x' "$bidder" "$auction")
ABSENT=$(printf '%016x%016x' 9223372036854775807 1)
le64() { # the little-endian hex of $1
	local h i out=
	h=$(printf '%016x' "$1")
	for ((i = 14; i >= 0; i -= 2)); do out+=${h:i:2}; done
	echo "$out"
}
WANT_AUCTION=$(le64 "$auction")
WANT_BIDDER=$(le64 "$bidder")

for b in $BACKENDS; do
	job=e2e-get-$$-$b
	timeout 120 "$SFS" run --job "$job" --query q18 --events 20000000 --max-rate 200000 \
		--workers 2 --backend "$b" --checkpoint-interval 100 --data "$OUT/data-$b" \
		>"$OUT/run-$b.out" 2>"$OUT/run-$b.err" &
	runpid=$!
	# Until the first checkpoint, the pair's bid may not be sealed yet.
	for ((t = 0; t < 200; t++)); do
		ls -d "$OUT/data-$b"/checkpoints/chk-* >/dev/null 2>&1 && break
		sleep 0.05
	done
	"$SFS" get --job "$job" --state q18.last --key-hex "$KEY" >"$OUT/get" 2>"$OUT/get.err"
	rc=$?
	v=$(cat "$OUT/get")
	# struct q_bid: tag(4) lens(10) pad(2) | seq auction bidder price date_time
	if [ $rc -eq 0 ] && [ "${v:0:10}" = 0x01000000 ] && [ "${v:50:16}" = "$WANT_AUCTION" ] &&
		[ "${v:66:16}" = "$WANT_BIDDER" ]; then
		ok "$b: sfs get of a live key: bidder $bidder's bid on auction $auction"
	else
		nok "$b: sfs get of a live key: exit $rc, '${v:0:90}' $(cat "$OUT/get.err")"
	fi
	"$SFS" get --job "$job" --state q18.last --key-hex "$KEY" --json >"$OUT/get.json" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q '"found": true' "$OUT/get.json" &&
		grep -q '"kind": "value"' "$OUT/get.json" && grep -q '"seq": [1-9]' "$OUT/get.json"; then
		ok "$b: --json"
	else
		nok "$b: --json: exit $rc, $(head -c 200 "$OUT/get.json")"
	fi
	"$SFS" get --job "$job" --state q18.last --key-hex "$ABSENT" >"$OUT/get" 2>&1
	rc=$?
	[ $rc -eq 1 ] && [ "$(cat "$OUT/get")" = absent ] && ok "$b: an absent key: exit 1" ||
		nok "$b: an absent key: exit $rc, $(cat "$OUT/get")"
	"$SFS" get --job "$job" --state q18.nope --key-hex "$KEY" >/dev/null 2>"$OUT/get.err"
	rc=$?
	[ $rc -eq 2 ] && grep -q "no state named 'q18.nope'" "$OUT/get.err" &&
		ok "$b: an unknown state: exit 2" || nok "$b: an unknown state: exit $rc"
	if kill -0 "$runpid" 2>/dev/null; then
		ok "$b: the run was live while read"
	else
		nok "$b: the run ended before the reads (raise --events)"
	fi
	kill -INT "$runpid" 2>/dev/null
	wait "$runpid"
	rc=$?
	runpid=
	# A query run stopped by a signal before the end of its input is a
	# planned stop: exit 0 (its summary says "ok": false).
	if [ $rc -eq 0 ] && ! grep -q "a child failed" "$OUT/run-$b.err" &&
		! ls /dev/shm/sfs."$job".* >/dev/null 2>&1; then
		ok "$b: the run stops cleanly after the reads (SIGINT: exit 0)"
	else
		nok "$b: sfs run exit $rc"; tail -n 5 "$OUT/run-$b.err" | sed 's/^/# /'
	fi
done

# Counter and map state: q15 keys by day (8 bytes, big-endian; every event
# of this stream is on 2015-07-15, day 16631); "q15.count" is a counter per
# day with the column in the namespace (0: all bids), "q15.bidders" a map
# day -> {bidder -> mask}.
job=e2e-get-$$-q15
DAY=$(printf '%016x' 16631)
UBID=$(printf '%016x' "$bidder")
timeout 120 "$SFS" run --job "$job" --query q15 --events 20000000 --max-rate 200000 \
	--workers 2 --backend memory --checkpoint-interval 100 --data "$OUT/data-q15" \
	>"$OUT/run-q15.out" 2>"$OUT/run-q15.err" &
runpid=$!
for ((t = 0; t < 200; t++)); do
	ls -d "$OUT/data-q15"/checkpoints/chk-* >/dev/null 2>&1 && break
	sleep 0.05
done
c1=$("$SFS" get --job "$job" --state q15.count --key-hex "$DAY" --ns 0 2>&1)
rc1=$?
sleep 0.5
c2=$("$SFS" get --job "$job" --state q15.count --key-hex "$DAY" --ns 0 2>&1)
rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [[ $c1 =~ ^[0-9]+$ ]] && [[ $c2 =~ ^[0-9]+$ ]] &&
	[ "$c1" -gt 0 ] && [ "$c2" -gt "$c1" ]; then
	ok "q15: a live counter grows between two reads ($c1, then $c2 bids)"
else
	nok "q15: counter reads: exit $rc1 '$c1', exit $rc2 '$c2'"
fi
"$SFS" get --job "$job" --state q15.bidders --key-hex "$DAY" >"$OUT/map" 2>&1
rc=$?
n=$(grep -c '^0x[0-9a-f]*=0x0[0-9a-f]$' "$OUT/map")
[ $rc -eq 0 ] && [ "$n" -gt 0 ] && ok "q15: a live map's entries ($n bidders)" ||
	nok "q15: map entries: exit $rc, $(head -c 200 "$OUT/map")"
"$SFS" get --job "$job" --state q15.bidders --key-hex "$DAY" --ukey-hex "$UBID" --json >"$OUT/map" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '"kind": "map"' "$OUT/map" && grep -q "\"ukey\": \"0x$UBID\"" "$OUT/map" &&
	ok "q15: one user key of a live map (bidder $bidder)" ||
	nok "q15: map get: exit $rc, $(head -c 200 "$OUT/map")"
"$SFS" get --job "$job" --state q15.count --key-hex "$DAY" --ukey x >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "q15: --ukey on counter state: exit 2" || nok "q15: --ukey on a counter: exit $rc"
kill -INT "$runpid" 2>/dev/null
wait "$runpid"
runpid=

# Refusals that need no job.
"$SFS" get --job "e2e-get-$$-none" --state q18.last --key a >/dev/null 2>"$OUT/get.err"
rc=$?
[ $rc -eq 2 ] && grep -q "no such job" "$OUT/get.err" && ok "no such job: exit 2" ||
	nok "no such job: exit $rc, $(cat "$OUT/get.err")"
for args in "--state x --key a" "--job j --key a" "--job j --state x" \
	"--job j --state x --key a --key-hex 61" "--job j --state x --key-hex 6" \
	"--job j --state x --key a --ns -1" "--job j --state x --key a extra"; do
	# shellcheck disable=SC2086
	"$SFS" get $args >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] && ok "bad arguments ($args): exit 2" || nok "bad arguments ($args): exit $rc"
done

echo "# e2e_get: $fails failed"
[ $fails -eq 0 ]
