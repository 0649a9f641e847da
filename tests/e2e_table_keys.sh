#!/usr/bin/env bash
# e2e_table_keys.sh — sfs run --table-keys: compressed key pages make the
# table target's data files smaller (q4's keys: about half) and change no
# result; a bad value is refused as a usage error.  Flink's backend starts
# its groups with "compressed" (state.backend.sfs.table-keys): its keys are
# long, padded serialized rows.  About 5 s.
set -u
cd "$(dirname "$0")/.." || exit 2
D=$(mktemp -d /tmp/sfs-e2e-tkeys.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); bad=1; echo "not ok $n - $*"; }

for k in raw compressed; do
	if timeout 120 bin/sfs run --query q4 --events 400000 --workers 1 --checkpoint-interval 20 --table-keys "$k" \
		--job "e2e-tkeys-$$-$k" --data "$D/$k" --output "$D/$k.csv" --json >"$D/$k.json" 2>"$D/$k.log"; then
		ok "q4 on the table target with --table-keys $k"
	else
		notok "q4 with --table-keys $k: $(tail -1 "$D/$k.log")"
	fi
	# the run's own counts of data-file bytes and rows it wrote (how much is
	# flushed before the input ends varies: compare bytes per row)
	eval "bytes_$k=$(grep -o '"table_bytes_written": [0-9]*' "$D/$k.json" | grep -o '[0-9]*$' || echo 0)"
	eval "rows_$k=$(grep -o '"table_rows_written": [0-9]*' "$D/$k.json" | grep -o '[0-9]*$' || echo 0)"
done
if cmp -s "$D/raw.csv" "$D/compressed.csv" && [ -s "$D/raw.csv" ]; then
	ok "the same result either way"
else
	notok "the same result either way"
fi
# shellcheck disable=SC2154 # set by eval above
if [ "$rows_raw" -gt 0 ] && [ "$rows_compressed" -gt 0 ] &&
	[ $((bytes_compressed * rows_raw * 4)) -lt $((bytes_raw * rows_compressed * 3)) ]; then
	ok "compressed keys: $((bytes_compressed / rows_compressed)) data-file bytes per row, raw $((bytes_raw / rows_raw)) (< 3/4)"
else
	notok "compressed keys make < 3/4 of raw's data-file bytes per row (compressed $bytes_compressed B / $rows_compressed rows, raw $bytes_raw B / $rows_raw rows)"
fi
bin/sfs run --query q4 --table-keys zip >"$D/bad.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--table-keys zip: raw or compressed" "$D/bad.log"; then
	ok "--table-keys zip refused (exit 2) naming the choices"
else
	notok "--table-keys zip refused with exit 2 (got $rc: $(head -1 "$D/bad.log"))"
fi
echo "1..$n"
exit $bad
