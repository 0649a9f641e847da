#!/usr/bin/env bash
# e2e_inspect.sh — `sfs inspect` on what a real run leaves on disk (a q4
# job on the table target with checkpoints): a checkpoint, a table
# directory, a data file (text and --json, which must parse), then damaged
# copies — a flipped byte inside a data file, a truncated one, a checkpoint
# whose _metadata is edited, one with a shared file gone — each exit 1
# naming the file and the problem; bad arguments exit 2.  TAP-style lines.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
fails=0
ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
job=e2e-insp-$$
cleanup() {
	pkill -9 -f -- "--job $job" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$job*
	rm -rf "$tmp"
}
trap cleanup EXIT

data=$tmp/data
# throttled to ~1 s: unthrottled on an idle machine the run ends (0.2 s) before
# its first checkpoint completes
if ! timeout 300 "$SFS" run --job "$job" --query q4 --events 400000 --workers 2 --backend table \
	--checkpoint-interval 50 --max-rate 400000 --data "$data" --json >/dev/null 2>"$tmp/run.err"; then
	nok "the q4 run that makes the files"; tail -n 5 "$tmp/run.err" | sed 's/^/# /'; exit 1
fi
ckpt=$(ls -d "$data"/checkpoints/chk-* | sort -t- -k2 -n | tail -n 1)
table=$(dirname "$(find "$data"/sfs-table.* -name 'snapshot-*' | head -n 1)")
dfile=$(ls "$data"/checkpoints/shared/*.sst | head -n 1)

# good ones: exit 0, text and JSON
check() { # what path kind
	local what=$1 path=$2 kind=$3
	if "$SFS" inspect "$path" >"$tmp/out" 2>"$tmp/err" &&
	   "$SFS" inspect --json "$path" >"$tmp/json" 2>>"$tmp/err" &&
	   python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert d["kind"] == sys.argv[2], d["kind"]' \
		"$tmp/json" "$kind" 2>>"$tmp/err"; then
		ok "$what: exit 0; $(head -n 1 "$tmp/out" | cut -c1-110)"
	else
		nok "$what"; head -n 5 "$tmp/err" | sed 's/^/# /'
	fi
}
check "a checkpoint" "$ckpt" checkpoint
check "a checkpoint's _metadata" "$ckpt/_metadata" checkpoint
check "a table directory" "$table" table
check "a data file" "$dfile" "data file"
rows=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"])' "$tmp/json")
[ "$rows" -gt 0 ] && ok "the data file's rows: $rows, every page read" || nok "the data file has no rows"

# damaged ones: exit 1, the file named
damaged() { # what path expected-text
	local what=$1 path=$2 want=$3 rc
	"$SFS" inspect "$path" >/dev/null 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq 1 ] && grep -q -- "$want" "$tmp/err" && grep -qF -- "${path%/_metadata}" "$tmp/err"; then
		ok "$what: exit 1, '$(grep -m1 -- "$want" "$tmp/err" | cut -c1-150)'"
	else
		nok "$what: exit $rc"; head -n 3 "$tmp/err" | sed 's/^/# /'
	fi
}
size=$(stat -c %s "$dfile")
cp "$dfile" "$tmp/flipped.sst"
printf '\xff' | dd of="$tmp/flipped.sst" bs=1 seek=$((size / 3)) conv=notrunc status=none
cmp -s "$dfile" "$tmp/flipped.sst" && printf '\x00' | dd of="$tmp/flipped.sst" bs=1 seek=$((size / 3)) conv=notrunc status=none
damaged "a data file with a flipped byte" "$tmp/flipped.sst" "crc\|checksum\|corrupt"
head -c $((size - 100)) "$dfile" >"$tmp/short.sst"
damaged "a truncated data file" "$tmp/short.sst" "truncated\|corrupt\|bad"
cp -r "$data/checkpoints" "$tmp/ck"
c2=$tmp/ck/$(basename "$ckpt")
sed -i 's/^sink_epoch \([0-9]*\)$/sink_epoch 9\1/' "$c2/_metadata"
damaged "a checkpoint whose _metadata was edited" "$c2" "checksum mismatch"
rm -rf "$tmp/ck" && cp -r "$data/checkpoints" "$tmp/ck"
# a shared file the newest checkpoint references (not just any: with
# retention some belong to older checkpoints only)
rm -f "$tmp/ck/$(grep -a -o -m 1 'shared/[^ ]*' "$c2/_metadata")"
damaged "a checkpoint missing a shared file" "$c2" "missing"
head -c 4096 /dev/urandom >"$tmp/random"
damaged "a file of no known kind" "$tmp/random" "none of their magics"

# bad arguments: exit 2
for args in "" "--json" "$tmp/nothing-here" "--bad $ckpt" "$ckpt $ckpt"; do
	# shellcheck disable=SC2086
	"$SFS" inspect $args >/dev/null 2>&1
	rc=$?
	[ "$rc" -eq 2 ] && ok "bad arguments ($args): exit 2" || nok "bad arguments ($args): exit $rc"
done
[ "$fails" -eq 0 ] || { echo "# $fails inspect checks failed"; exit 1; }
