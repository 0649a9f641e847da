#!/usr/bin/env bash
# e2e_export.sh — `sfs export` on the checkpoints of real runs: Nexmark q4
# on each flush target (table, rocksdb, memory), its newest checkpoint
# exported as CSV and JSONL, and the rows checked against what q4's state
# must hold at a consistent cut: every auction with a maximum has its
# auction row; per category, COUNT is the number of auctions whose maximum
# is in that category and SUM the sum of those maxima (stage 1's counters
# equal stage 0's values exactly, or the cut is not consistent or a merge
# was not folded); CSV and JSONL hold the same rows; --state keeps one
# state; a savepoint exports the same as its checkpoint.  Then bad input:
# not a checkpoint, an unknown --state, a bad --format (one line, exit 2),
# a corrupt file (exit 1 naming it), a rocksdb-direct checkpoint (exit 1,
# one line: no offline reader).  TAP-style lines.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${SFS_EXPORT_EVENTS:-400000}
fails=0
ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
job=e2e-exp-$$
cleanup() {
	pkill -9 -f -- "--job $job" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$job*
	rm -rf "$tmp"
}
trap cleanup EXIT

# run BACKEND: a throttled q4 run (a few seconds: several checkpoints)
run() {
	timeout 300 "$SFS" run --job "$job" --query q4 --events "$EVENTS" --workers 2 \
		--backend "$1" --checkpoint-interval 50 --max-rate 100000 \
		--data "$tmp/$1" --json >/dev/null 2>"$tmp/$1.err"
}
newest() { ls -d "$1"/checkpoints/chk-* 2>/dev/null | sort -t- -k2 -n | tail -n 1; }

check_q4() { # csv jsonl: q4's invariants; prints a summary, exit 1 on a violation
	python3 - "$1" "$2" <<'PY'
import csv, json, struct, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
js = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == len(js), f"csv {len(rows)} rows, jsonl {len(js)}"
def b(v):
    return bytes.fromhex(v[2:]) if v.startswith('0x') else v.encode()
by = {}
for r in rows:
    by.setdefault(r['state'], []).append(r)
auction = {(r['worker'], b(r['key'])) for r in by.get('q4.auction', [])}
cnt, tot = {}, {}
for r in by.get('q4.max', []):
    assert (r['worker'], b(r['key'])) in auction, f"a max without its auction: {r}"
    final, cat = struct.unpack('<qq', b(r['value']))
    cnt[cat] = cnt.get(cat, 0) + 1
    tot[cat] = tot.get(cat, 0) + final
def counters(name):
    out = {}
    for r in by.get(name, []):
        assert r['kind'] == 'counter' and r['user_key'] == '', r
        out[struct.unpack('>q', b(r['key']))[0]] = int(r['value'])
    return out
c, s = counters('q4.count'), counters('q4.sum')
assert c == cnt, f"COUNT per category {c}, auctions with a max {cnt}"
assert s == tot, f"SUM per category {s}, sum of maxima {tot}"
for r in by.get('q4.bids', []):
    assert r['kind'] == 'map' and r['user_key'] != '', r
assert by.get('q4.max') and by.get('q4.bids'), "state in the checkpoint"
print(f"{len(rows)} rows: {len(auction)} auctions, {len(by['q4.max'])} maxima, "
      f"{len(by['q4.bids'])} bids, {len(c)} categories, count {sum(c.values())}")
PY
}

for b in table rocksdb memory; do
	if ! run "$b"; then
		nok "$b: the q4 run"; tail -n 5 "$tmp/$b.err" | sed 's/^/# /'; continue
	fi
	ck=$(newest "$tmp/$b")
	if [ -z "$ck" ]; then nok "$b: no checkpoint"; continue; fi
	if "$SFS" export --checkpoint "$ck" --out "$tmp/$b.csv" 2>"$tmp/err" &&
	   "$SFS" export --checkpoint "$ck" --format jsonl >"$tmp/$b.jsonl" 2>>"$tmp/err" &&
	   sum=$(check_q4 "$tmp/$b.csv" "$tmp/$b.jsonl" 2>&1); then
		ok "$b: $(basename "$ck") exported: $sum"
	else
		nok "$b: export of $(basename "$ck")"; { cat "$tmp/err"; echo "$sum"; } | head -n 5 | sed 's/^/# /'
	fi
	n=$("$SFS" export --checkpoint "$ck" --state q4.count | tail -n +2 | wc -l)
	want=$(grep -c ',q4.count,' "$tmp/$b.csv")
	[ "$n" -eq "$want" ] && ok "$b: --state q4.count: $n rows" || nok "$b: --state q4.count: $n rows, want $want"
done

# a savepoint reads as its checkpoint; damage in it is named
ck=$(newest "$tmp/table")
if [ -n "$ck" ] && "$SFS" savepoint --data "$tmp/table" --id "${ck##*chk-}" --out "$tmp/sp" >/dev/null 2>&1; then
	sp=$(ls -d "$tmp"/sp/chk-* | head -n 1)
	if "$SFS" export --checkpoint "$sp" >"$tmp/sp.csv" 2>"$tmp/err" && cmp -s "$tmp/sp.csv" "$tmp/table.csv"; then
		ok "a savepoint exports as its checkpoint"
	else
		nok "a savepoint's export differs"; head -n 3 "$tmp/err" | sed 's/^/# /'
	fi
	victim=$(ls "$tmp"/sp/shared/* | head -n 1)
	# a copy of its own first: a savepoint links the checkpoint's files
	cp "$victim" "$victim.tmp" && mv "$victim.tmp" "$victim"
	printf '\xff' | dd of="$victim" bs=1 seek=100 conv=notrunc status=none
	"$SFS" export --checkpoint "$sp" >/dev/null 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "$(basename "$victim")" "$tmp/err"; then
		ok "a corrupt file: exit 1, '$(cut -c1-140 "$tmp/err")'"
	else
		nok "a corrupt file: exit $rc"; head -n 3 "$tmp/err" | sed 's/^/# /'
	fi
else
	nok "the savepoint to damage"
fi

bad() { # what want-rc args...
	local what=$1 want=$2 rc
	shift 2
	"$SFS" export "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then
		ok "$what: exit $rc, '$(cut -c1-120 "$tmp/err")'"
	else
		nok "$what: exit $rc (want $want)"; head -n 3 "$tmp/err" | sed 's/^/# /'
	fi
}
ck=$(newest "$tmp/table")
bad "not a checkpoint" 2 --checkpoint "$tmp"
bad "an unknown --state" 2 --checkpoint "$ck" --state no.such
bad "a bad --format" 2 --checkpoint "$ck" --format xml
if run rocksdb-direct && ck=$(newest "$tmp/rocksdb-direct") && [ -n "$ck" ]; then
	bad "a rocksdb-direct checkpoint" 1 --checkpoint "$ck"
	grep -q "cannot be read offline" "$tmp/err" || nok "rocksdb-direct: the reason"
else
	nok "the rocksdb-direct run"
fi

[ "$fails" -eq 0 ]
