#!/usr/bin/env bash
# bench/table.sh — the `table` backend (issue 7) against the other backends,
# and each of its design points switched off one at a time, in one run.
#
# Part 1, per query: REPS runs of `sfs run --query Q --json` on table,
# memory, rocksdb and rocksdb-direct (EVENTS events, WORKERS workers, a
# checkpoint every CKPT ms, 500 by default as the issue asks), the backend
# order rotated per repetition (the machine is shared and noisy).  Prints
# the median events/s per backend, the medians of the per-repetition ratios
# table/memory and table/rocksdb-direct, and the table's synchronous work
# per barrier: the compactor's commit of a buffer (data commits + minimal
# rounds of every table it touched; mean and max over the runs), the
# longest commit of one table (the synchronous work per operator) and the
# checkpoint duration.
#
# Part 2 (ABLATE_QUERIES, default q4 q20): the table backend with one design
# point off against all on, interleaved, REPS pairs each:
#   SFS_TABLE_ROUND=0     up-levelling in the background only (reads merge L0)
#   SFS_TABLE_SESSION=0   the whole manifest chain re-read before every commit
#   SFS_TABLE_MAP_DIFF=0  every touched map rewritten whole
#   SFS_TABLE_HASH_IN=0   batch probes compare each row with every literal
#   SFS_TABLE_SHAPING=0   no background shaping merges
#   SFS_TABLE_CKPT_SYNC=0 every table file fsynced at its commit, not by the
#                         checkpoint that links it
#   SFS_TABLE_BG_IDLE=0   shaping merges at the compactor's priority, not
#                         on idle CPU time
#   SFS_CK_LINK_ALL=1     checkpoints link every live file, not the new ones
# and prints events/s off/on (median of pair ratios) with the counter that
# shows what the point buys.
#
#   bench/table.sh [EVENTS] [REPS]     env: WORKERS, CKPT, QUERIES, BACKENDS,
#                                      ABLATE_QUERIES (" " for none)
set -u
BIN=${SFS_BIN:-$PWD/bin}
EVENTS=${1:-2000000}
REPS=${2:-3}
WORKERS=${WORKERS:-1}
CKPT=${CKPT:-500}
QUERIES=${QUERIES:-q3 q4 q5 q7 q8 q9 q11 q12 q15 q17 q18 q19 q20}
ABLATE_QUERIES=${ABLATE_QUERIES:-q4 q20}
BACKENDS=${BACKENDS:-table memory rocksdb rocksdb-direct}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

run() { # LABEL QUERY BACKEND [env...]
	local label=$1 q=$2 b=$3
	shift 3
	env "$@" "$BIN/sfs" run --job "bench-tbl-$$" --query "$q" --events "$EVENTS" \
		--workers "$WORKERS" --backend "$b" --checkpoint-interval "$CKPT" \
		--data "$OUT/data" --json 2>"$OUT/err" |
		sed "s/^{/{\"label\": \"$label\", /" >>"$OUT/runs.jsonl" ||
		{ echo "FAILED: $label $q $b"; tail -n 5 "$OUT/err"; }
	rm -rf "$OUT/data"
}

echo "# table bench: $EVENTS events, $WORKERS worker(s), checkpoint every $CKPT ms, $REPS reps," \
     "$(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$REPS"); do
	set -- $BACKENDS
	[ $((r % 2)) -eq 0 ] && set -- $(echo $BACKENDS | tr ' ' '\n' | tac)
	for q in $QUERIES; do
		for b in "$@"; do
			run "cmp-$r" "$q" "$b"
		done
	done
done
for r in $(seq 1 "$REPS"); do
	for q in $ABLATE_QUERIES; do
		for k in SFS_TABLE_ROUND=0 SFS_TABLE_SESSION=0 SFS_TABLE_MAP_DIFF=0 SFS_TABLE_HASH_IN=0 \
			 SFS_TABLE_SHAPING=0 SFS_TABLE_CKPT_SYNC=0 SFS_TABLE_BG_IDLE=0 SFS_CK_LINK_ALL=1; do
			if [ $((r % 2)) -eq 0 ]; then
				run "abl-$r-$k" "$q" table "$k"; run "abl-$r-on-$k" "$q" table
			else
				run "abl-$r-on-$k" "$q" table; run "abl-$r-$k" "$q" table "$k"
			fi
		done
	done
done

python3 - "$OUT/runs.jsonl" "$QUERIES" "$ABLATE_QUERIES" "$REPS" <<'PY'
import json, math, statistics as st, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
queries, aq, reps = sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
def get(label, q, b):
    for j in runs:
        if j["label"] == label and j["query"] == q and j["backend"] == b:
            return j
    return None
med = lambda xs: st.median(xs) if xs else float("nan")
print(f"{'query':6} {'table ev/s':>11} {'memory':>10} {'rocksdb':>10} {'direct':>10} "
      f"{'x memory':>9} {'x direct':>9} {'commit ms':>10} {'max':>7} {'table max':>9} {'ckpt ms':>8}")
gm, gd = [], []
for q in queries:
    ev = {b: [] for b in ("table", "memory", "rocksdb", "rocksdb-direct")}
    rm, rd, cm, cx, ck, tx = [], [], [], [], [], []
    for r in range(1, reps + 1):
        js = {b: get(f"cmp-{r}", q, b) for b in ev}
        for b, j in js.items():
            if j: ev[b].append(j["events_per_sec"])
        t = js["table"]
        if t and js["memory"]: rm.append(t["events_per_sec"] / js["memory"]["events_per_sec"])
        if t and js["rocksdb-direct"]:
            rd.append(t["events_per_sec"] / js["rocksdb-direct"]["events_per_sec"])
        if t:
            cm.append(t["table_commit_ms"]); cx.append(t["table_commit_max_ms"])
            tx.append(t.get("table_sync_max_ms", 0))
            ck.append(t["checkpoint_last_ms"])
    if rm: gm.append(med(rm))
    if rd: gd.append(med(rd))
    print(f"{q:6} {med(ev['table']):11.0f} {med(ev['memory']):10.0f} {med(ev['rocksdb']):10.0f} "
          f"{med(ev['rocksdb-direct']):10.0f} {med(rm):9.2f} {med(rd):9.2f} {med(cm):10.1f} "
          f"{max(cx) if cx else 0:7.1f} {max(tx) if tx else 0:9.1f} {max(ck) if ck else 0:8.1f}")
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print(f"geomean: table/memory {g(gm):.2f}x, table/rocksdb-direct {g(gd):.2f}x")
print()
print(f"{'query':6} {'switched off':22} {'off/on ev/s':>11}  what it shows (median off vs on)")
show = {"SFS_TABLE_ROUND=0": ("table_commit_ms", "commit ms"),
        "SFS_TABLE_SESSION=0": ("table_commit_ms", "commit ms"),
        "SFS_TABLE_MAP_DIFF=0": ("table_rows_written", "rows written"),
        "SFS_TABLE_HASH_IN=0": ("table_round_ms", "round ms"),
        "SFS_TABLE_SHAPING=0": ("table_files", "live files at the end"),
        "SFS_TABLE_CKPT_SYNC=0": ("table_commit_ms", "commit ms"),
        "SFS_TABLE_BG_IDLE=0": ("table_merges", "shaping merges in the run"),
        "SFS_CK_LINK_ALL=1": ("checkpoint_files_linked", "files linked")}
for q in aq:
    for k, (field, what) in show.items():
        ratio, off, on = [], [], []
        for r in range(1, reps + 1):
            a, b = get(f"abl-{r}-{k}", q, "table"), get(f"abl-{r}-on-{k}", q, "table")
            if a and b:
                ratio.append(a["events_per_sec"] / b["events_per_sec"])
                off.append(a[field]); on.append(b[field])
        print(f"{q:6} {k:22} {med(ratio):11.2f}  {what}: {med(off):.1f} vs {med(on):.1f}")
PY
