#!/usr/bin/env bash
# bench/rocksdb_ablation.sh — what each tuning of the rocksdb flush target
# buys (issue 5), measured in one run against the all-on baseline:
#
#  1. Nexmark on --backend rocksdb: per query, the all-on configuration and
#     each tuning that query targets switched off (store/rocksdb/tune.c's
#     SFS_RDBT_* knobs), REPS repetitions rotating the configuration order;
#     prints events/s (median) and the ratio off/all-on (median of the
#     per-repetition ratios: < 1 means the tuning helps), and the size of
#     the RocksDB state at the end of the run (du of the instance
#     directories) next to the worker's value cache (8 MiB by default).
#        q4, q9  joins (map state scans): adaptive prefix, partitioned filters,
#                LZ4 L0/L1, SST ingest, pacing, universal compaction
#        q17     counters: merge operator, hash-linklist memtable
#        q18     miss-heavy dedup (value state): partitioned filters,
#                hash-linklist memtable, SST ingest
#  2. The flush loop through the target (bench_rocksdb_flush target): all
#     on, SST ingest off (batches), hash memtable off on the batch path,
#     pacing off: entries/s and the loop's call latency.
#  3. db_bench (Debian's rocksdb-tools) on the same disk, WAL off: the raw
#     RocksDB reference (fillrandom, then readrandom on what it wrote).
#
#   bench/rocksdb_ablation.sh [EVENTS] [REPS]   env: SFS_BIN (frozen copy of bin/),
#     BUILD (where bench_rocksdb_flush is), DATA (directory on the disk measured),
#     CKPT (barrier period, ms), QUERIES, SKIP (any of: nexmark flush dbbench)
set -u
BIN=${SFS_BIN:-$PWD/bin}
BUILD=${BUILD:-$PWD/build}
EVENTS=${1:-2000000}
REPS=${2:-3}
CKPT=${CKPT:-500}
DATA=${DATA:-/tmp}
QUERIES=${QUERIES:-q4 q9 q17 q18}
SKIP=${SKIP:-}
OUT=$(mktemp -d "$DATA/rdb-ablation.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

knobs_of() {
	case $1 in
	q4)  echo "ALL SFS_RDBT_ADAPTIVE_PREFIX=0 SFS_RDBT_PARTITIONED_FILTERS=0 SFS_RDBT_INGEST_MIN=0 SFS_RDBT_UNIVERSAL=0" ;;
	q9)  echo "ALL SFS_RDBT_ADAPTIVE_PREFIX=0 SFS_RDBT_LZ4=0 SFS_RDBT_INGEST_MIN=0 SFS_RDBT_PACING=0 SFS_RDBT_UNIVERSAL=0" ;;
	q17) echo "ALL SFS_RDBT_MERGE=0 SFS_RDBT_HASH_MEMTABLE=0" ;;
	q18) echo "ALL SFS_RDBT_PARTITIONED_FILTERS=0 SFS_RDBT_HASH_MEMTABLE=0 SFS_RDBT_INGEST_MIN=0" ;;
	*)   echo "ALL" ;;
	esac
}

echo "# rocksdb ablation: $EVENTS events, barrier every $CKPT ms, $REPS repetitions," \
     "$(nproc) cpus, data on $(df --output=source "$DATA" | tail -n 1) ($DATA)," \
     "load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %T') UTC"

case " $SKIP " in *" nexmark "*) ;; *)
for r in $(seq 1 "$REPS"); do
	for q in $QUERIES; do
		set -- $(knobs_of "$q")
		[ $((r % 2)) -eq 0 ] && set -- $(echo "$@" | tr ' ' '\n' | tac)
		for k in "$@"; do
			env=""
			[ "$k" != ALL ] && env=$k
			env $env "$BIN/sfs" run --job "bench-abl" --query "$q" --events "$EVENTS" \
				--workers 1 --backend rocksdb --checkpoint-interval "$CKPT" \
				--data "$OUT/data" --json 2>"$OUT/err" >"$OUT/one.json" ||
				{ echo "FAILED: $q $k"; tail -n 5 "$OUT/err"; }
			bytes=$(du -sb "$OUT/data" 2>/dev/null | cut -f1)
			python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["knob"]=sys.argv[2]; r["state_bytes"]=int(sys.argv[3] or 0); print(json.dumps(r))' \
				"$OUT/one.json" "$k" "${bytes:-0}" >>"$OUT/runs.jsonl" 2>/dev/null ||
				echo "FAILED: $q $k (no summary)"
			rm -rf "$OUT/data"
		done
	done
done
python3 - "$OUT/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
queries = list(dict.fromkeys(r["query"] for r in runs))
print(f"  {'query':6} {'switched off':30} {'ev/s (median)':>14} {'x all-on':>9}  per-rep ratios   state MB (median)")
for q in queries:
    base = [r for r in runs if r["query"] == q and r["knob"] == "ALL"]
    for k in dict.fromkeys(r["knob"] for r in runs if r["query"] == q):
        m = [r for r in runs if r["query"] == q and r["knob"] == k]
        ev = [r["events_per_sec"] for r in m]
        rr = sorted(a["events_per_sec"] / b["events_per_sec"] for a, b in zip(m, base))
        mb = statistics.median(r["state_bytes"] for r in m) / 2**20
        name = "(all on)" if k == "ALL" else k
        print(f"  {q:6} {name:30} {statistics.median(ev):14.0f} {statistics.median(rr):9.2f}  "
              + " ".join(f"{x:.2f}" for x in rr) + f"   {mb:.0f}")
PY
;; esac

case " $SKIP " in *" flush "*) ;; *)
echo "# the flush loop through the target: 40 buffers x 100000 entries, a spinning thread as the worker"
for r in $(seq 1 "$REPS"); do
	for k in ALL SFS_RDBT_INGEST_MIN=0 "SFS_RDBT_INGEST_MIN=0 SFS_RDBT_HASH_MEMTABLE=0" SFS_RDBT_PACING=0; do
		line=$(env ${k/ALL/X=1} "$BUILD/bench/bench_rocksdb_flush" target "$DATA" 40 100000 2>/dev/null)
		echo "$k|$line" >>"$OUT/flush.txt"
	done
done
python3 - "$OUT/flush.txt" <<'PY'
import re, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    k, line = l.rstrip("\n").split("|", 1)
    m = re.search(r"([\d.]+) entries/s; loop call ms p50 ([\d.]+) p99 ([\d.]+) max ([\d.]+); buffer ms p50 ([\d.]+) p99 ([\d.]+) max ([\d.]+)", line)
    if m:
        rows.setdefault(k, []).append([float(x) for x in m.groups()])
base = statistics.median(r[0] for r in rows.get("ALL", [[1]]))
print(f"  {'switched off':44} {'entries/s':>10} {'x all-on':>8} {'call p99 ms':>11} {'call max ms':>11} {'buffer p50 ms':>13} {'buffer max ms':>13}")
for k, v in rows.items():
    med = [statistics.median(c) for c in zip(*v)]
    name = "(all on)" if k == "ALL" else k
    print(f"  {name:44} {med[0]:10.0f} {med[0] / base:8.2f} {med[2]:11.2f} {med[3]:11.1f} {med[4]:13.1f} {med[6]:13.1f}")
PY
;; esac

case " $SKIP " in *" dbbench "*) ;; *)
if command -v db_bench >/dev/null; then
	echo "# db_bench $(db_bench --version 2>&1 | head -n 1): 2M keys of 20 B, values 32 B, WAL off, LZ4, 32 MiB block cache"
	for r in $(seq 1 "$REPS"); do
		rm -rf "$OUT/dbb"
		db_bench --db="$OUT/dbb" --benchmarks=fillrandom,readrandom --num=2000000 \
			--key_size=20 --value_size=32 --disable_wal=1 --compression_type=lz4 \
			--cache_size=33554432 --threads=1 --seed=$r 2>&1 |
			awk '/^(fillrandom|readrandom) /{print $1, $5}' >>"$OUT/dbb.txt"
	done
	rm -rf "$OUT/dbb"
	python3 - "$OUT/dbb.txt" <<'PY'
import statistics, sys
ops = {}
for l in open(sys.argv[1]):
    k, v = l.split()
    ops.setdefault(k, []).append(float(v))
for k, v in ops.items():
    print(f"  {k:12} {statistics.median(v):12.0f} ops/s (median of {len(v)}: " + " ".join(f"{x:.0f}" for x in sorted(v)) + ")")
PY
else
	echo "# db_bench missing: apt-get install -y rocksdb-tools (scripts/deps.sh lists it)"
fi
;; esac
