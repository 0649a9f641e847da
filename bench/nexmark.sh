#!/usr/bin/env bash
# bench/nexmark.sh — the Nexmark suite on every backend, in one run.
#
# For each query and backend: REPS runs of `sfs run --query Q --json`
# (EVENTS events, WORKERS workers, a barrier every CKPT ms), rotating the
# backend order per repetition because the machine is shared and noisy.
# Prints, per query (medians over the repetitions), events per CPU-second —
# events ÷ the CPU time of every process serving the job: workers,
# compactor and checkpointer (the summary's events_per_cpu_s, from
# cpu_ms_by_role; FLINK.md, "Comparing fairly") — and events/s per core of
# wall time, the ratio sfs/rocksdb-direct of each (median of the
# per-repetition ratios) and their geometric means; the per-CPU-second
# ratio is the headline (a wall-clock rate leaves out sfs's compactor,
# which runs on another core).  rocksdb-direct runs as Flink configures
# RocksDB for one slot (baseline/rocksdb_direct.c; --rocksdb-memory-mb
# through RDB_MEMORY_MB).  Grouped per NUMA node (each node runs its own
# group: one segment, its workers pinned to its cores); draws
# bench/nexmark.png with gnuplot, then counts the worker's syscalls per 1M
# events in steady state with strace (between its start and end-of-input
# log lines, no barriers requested; SYSCALLS=0 skips it).
#
#   bench/nexmark.sh [EVENTS] [REPS]       env: WORKERS, CKPT, QUERIES, SUBJECT,
#                                               RDB_MEMORY_MB, RAW, SYSCALLS
#   (SUBJECT=table|memory|rocksdb: the sfs backend measured against the baseline;
#    RAW=DIR keeps every run's JSON line there)
set -u
BIN=${SFS_BIN:-$PWD/bin}
EVENTS=${1:-5000000}
REPS=${2:-3}
WORKERS=${WORKERS:-1}
CKPT=${CKPT:-1000}
QUERIES=${QUERIES:-q4 q9 q17 q18 q20}
SUBJECT=${SUBJECT:-memory}          # the sfs backend compared with rocksdb-direct
RDB_MEMORY_MB=${RDB_MEMORY_MB:-}    # rocksdb-direct's managed memory (default: sfs run's, Flink's slot)
RAW=${RAW:-}
SYSCALLS=${SYSCALLS:-1}
BACKENDS="$SUBJECT rocksdb-direct"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
nodes=$(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)
[ "$nodes" -ge 1 ] || nodes=1

echo "# nexmark: $EVENTS events, $WORKERS worker(s) per node, barrier every $CKPT ms," \
     "$REPS repetitions, $(nproc) cpus, $nodes node(s), load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "$(date -u +%FT%TZ)"
echo "# each run: sfs run --query Q --events $EVENTS --workers $WORKERS --backend B" \
     "--checkpoint-interval $CKPT${RDB_MEMORY_MB:+ --rocksdb-memory-mb $RDB_MEMORY_MB} --json"
for node in $(seq 0 $((nodes - 1))); do
	pin=""
	[ "$nodes" -gt 1 ] && pin="numactl --cpunodebind=$node --membind=$node"
	for r in $(seq 1 "$REPS"); do
		set -- $BACKENDS
		[ $((r % 2)) -eq 0 ] && set -- $(echo $BACKENDS | tr ' ' '\n' | tac)
		for q in $QUERIES; do
			for b in "$@"; do
				$pin "$BIN/sfs" run --job "bench-nx-$node" --query "$q" --events "$EVENTS" \
					--workers "$WORKERS" --backend "$b" --checkpoint-interval "$CKPT" \
					${RDB_MEMORY_MB:+--rocksdb-memory-mb "$RDB_MEMORY_MB"} \
					--data "$OUT/data" --json 2>"$OUT/err" >>"$OUT/node$node.jsonl" ||
					{ echo "FAILED: $q $b"; tail -n 5 "$OUT/err"; }
				rm -rf "$OUT/data"
			done
		done
	done
	[ -n "$RAW" ] && mkdir -p "$RAW" && cp "$OUT/node$node.jsonl" "$RAW/"
done

python3 - "$OUT" "$nodes" "$WORKERS" "$QUERIES" "$SUBJECT" <<'PY' | tee "$OUT/table"
import json, math, statistics, sys
out, nodes, workers, queries, subject = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                         sys.argv[4].split(), sys.argv[5])

def per_cpu(r):
    # events per CPU-second of workers + compactor + checkpointer
    if "events_per_cpu_s" in r:
        return r["events_per_cpu_s"]
    c = r["cpu_ms_by_role"]
    return r["events"] / ((c["worker"] + c["compactor"] + c["checkpointer"]) / 1e3)

def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))

rows = []
for node in range(nodes):
    runs = [json.loads(l) for l in open(f"{out}/node{node}.jsonl") if l.strip()]
    bad = [r for r in runs if not r.get("ok", True) or r.get("hang_kills", 0)]
    print(f"node {node}:")
    print(f"  {'query':6} {'sfs ev/CPU-s':>13} {'direct ev/CPU-s':>16} {'x CPU-s':>8}"
          f" {'sfs ev/s/core':>14} {'direct ev/s/core':>17} {'x wall':>7}  per-rep x CPU-s")
    rc, rw = [], []
    for q in queries:
        m = [r for r in runs if r["query"] == q and r["backend"] == subject]
        d = [r for r in runs if r["query"] == q and r["backend"] == "rocksdb-direct"]
        if not m or not d:
            continue
        cm, cd = [per_cpu(r) for r in m], [per_cpu(r) for r in d]
        pm = [r["events_per_sec"] / r["workers"] for r in m]
        pd = [r["events_per_sec"] / r["workers"] for r in d]
        xc = sorted(a / b for a, b in zip(cm, cd))
        xw = sorted(a / b for a, b in zip(pm, pd))
        rc.append(statistics.median(xc))
        rw.append(statistics.median(xw))
        rows.append((node, q, statistics.median(cm), statistics.median(cd)))
        print(f"  {q:6} {statistics.median(cm):13.0f} {statistics.median(cd):16.0f} {rc[-1]:8.2f}"
              f" {statistics.median(pm):14.0f} {statistics.median(pd):17.0f} {rw[-1]:7.2f}  "
              + " ".join(f"{x:.2f}" for x in xc))
    if rc:
        print(f"  geometric mean of the ratios: {gm(rc):.2f} per CPU-second (headline), "
              f"{gm(rw):.2f} by wall clock")
    for r in bad:
        print(f"  NOTE: {r['query']} {r['backend']}: ok={r.get('ok')} hang_kills={r.get('hang_kills')}"
              f" recoveries={r.get('recoveries')}")
with open(f"{out}/chart.dat", "w") as f:
    for node, q, a, b in rows:
        f.write(f"{q}@{node} {a:.0f} {b:.0f}\n")
PY

if command -v gnuplot >/dev/null; then
	chart=bench/nexmark.png
	[ "$SUBJECT" != memory ] && chart=bench/nexmark-$SUBJECT.png
	[ "$WORKERS" != 1 ] && chart=${chart%.png}-${WORKERS}workers.png
	gnuplot <<GP
set terminal pngcairo size 900,500 noenhanced
set output "$chart"
set title "Nexmark, $EVENTS events, $WORKERS worker(s)/node: events per CPU-second, every process (higher is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "events per CPU-second"
set logscale y
set grid ytics
set key top right
plot "$OUT/chart.dat" using 2:xtic(1) title "sfs ($SUBJECT target)", '' using 3 title "rocksdb-direct"
GP
	echo "# chart: $chart"
fi

# Syscalls of the worker per 1M events in steady state: every syscall of
# the worker between its "query ... on" and "end of input" log lines.
if [ "$SYSCALLS" != 0 ] && command -v strace >/dev/null; then
	for q in q17 q18; do
		rm -rf "$OUT/st" && mkdir -p "$OUT/st"
		strace -f -ff -s 256 -o "$OUT/st/t" "$BIN/sfs" run --job bench-nx-strace --query "$q" \
			--events 1000000 --workers 1 --checkpoint-interval 0 --data "$OUT/data" \
			>/dev/null 2>&1
		w=$(grep -l 'sfs-worker' "$OUT"/st/t.* | head -n 1)
		steady() { awk '/write\(2, ".*: query .* on /{on=1; next} /write\(2, ".*end of input/{on=0} on' "$w"; }
		n=$(steady | wc -l)
		echo "syscalls of the worker per 1M events, $q (no barriers requested; buffer-full seals ring the compactor): $n"
		steady |
			sed 's/(.*//' | sort | uniq -c | sort -rn | head -n 5 | sed 's/^/    /'
		rm -rf "$OUT/data"
	done
fi
