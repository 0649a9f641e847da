#!/usr/bin/env bash
# Nexmark on Flink: each query on each state backend in a fresh local cluster (one JVM), one
# JSON line per run, and the result's digest checked against the C runtime's output for the same
# events (sfs run --output; not q0, which it does not run).
#
#   QUERIES="q0 q4 q7" BACKENDS="sfs rocksdb hashmap forst" EVENTS=1000000 CKPT_MS=10000 REPEAT=1 \
#       bench/flink/nexmark.sh
#
# A line (bench/flink/run_one.py runs the JVM and says how each figure is counted): query,
# backend, events, events_per_sec (over the job's net runtime), cpu_s (every process that served
# the run: the JVM and, reaped through it, sfs's supervisor, compactor and checkpointer),
# events_per_cpu_s, cpu_s_by_process, peak_rss_bytes (by process), shm_bytes,
# state_bytes_on_disk, ckpt_count, ckpt_ms_median, ckpt_ms_max, ckpt_bytes_median (Flink's own
# checkpoint statistics: end-to-end duration, bytes uploaded), ckpt_state_bytes_last (what the
# last checkpoint refers to: what a restore reads), ckpts (each checkpoint), result_digest
# ("rows:sum of row hashes"), c_digest (the C runtime's, "" for q0) and digest_ok.
# Backends: sfs (sfs on the table target, the JVM's own host group), rocksdb (Flink's
# EmbeddedRocksDB, incremental), hashmap, forst — each with 2800 MiB of managed memory for the
# one slot, as the published runs (../shared/FLINK.md). Not built: sfs-rocksdb (sfs on its
# rocksdb target under Flink): a worker reads that target's files through RocksDB in its own
# process, and a TaskManager's JVM loads Flink's own RocksDB build, so the JNI library links
# none (see flink/README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
QUERIES=${QUERIES:-"q0 q3 q4 q5 q7 q8 q9 q11 q15 q17 q18 q19 q20"}
BACKENDS=${BACKENDS:-"sfs rocksdb hashmap forst"}
EVENTS=${EVENTS:-1000000}
CKPT_MS=${CKPT_MS:-10000}
REPEAT=${REPEAT:-1}
WORK=${WORK:-$(mktemp -d /tmp/sfs-nexmark-flink.XXXXXX)}
mkdir -p "$WORK"

# RUN_TIMEOUT_S bounds each run, the C runtime's and each JVM's (run_one.py).
# Progress on stderr ("nexmark.sh: <time> <step>"): what a caller reports when it must stop us.
say() { echo "nexmark.sh: $(date +%T) $*" >&2; }
say "building"
make -C "$root" -s all jni >&2
(cd "$root/flink" && mvn -B -q -DskipTests install) >&2
say "sfs-flink installed; the harness's dependencies (Flink's table planner, RocksDB, ForSt)"
baselines=false
case " $BACKENDS " in *" rocksdb "* | *" forst "*) baselines=true ;; esac
(cd "$here/nexmark" && mvn -B -q -DskipTests package dependency:build-classpath \
	-Dmdep.outputFile=target/cp.txt -Dnexmark.baselines=$baselines) >&2
say "harness built"
cp="$here/nexmark/target/classes:$(cat "$here/nexmark/target/cp.txt")"

# The C runtime's digest of a query at EVENTS (cached per query and EVENTS in WORK).
c_digest() {
	local q=$1 out="$WORK/c-$1-$EVENTS.csv"
	[ "$q" = q0 ] && { echo ""; return; }
	if [ ! -f "$out" ]; then
		rm -rf "$WORK/c-data"
		${RUN_TIMEOUT_S:+timeout -k 10 "$RUN_TIMEOUT_S"} "$root/bin/sfs" run --query "$q" --events "$EVENTS" --workers 1 --backend table \
			--data "$WORK/c-data" --output "$out" >"$WORK/c-$q-$EVENTS.log" 2>&1 || { echo "error"; return; }
	fi
	java -cp "$cp" io.sfs.nexmark.flink.Digest "$out"
}

for q in $QUERIES; do
	say "$q: the C runtime's digest"
	cd=$(c_digest "$q")
	for ((r = 0; r < REPEAT; r++)); do
		for b in $BACKENDS; do
			run="$WORK/$q-$b-$r"
			rm -rf "$run"
			mkdir -p "$run"
			say "$q on $b"
			python3 "$here/run_one.py" "$run" "$q" "$b" "$cd" "$cp" "$root" "$EVENTS" "$CKPT_MS"
		done
	done
done
