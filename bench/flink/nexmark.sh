#!/usr/bin/env bash
# Nexmark on Flink: each query on each state backend in a fresh local cluster (one JVM), one
# JSON line per run, and the result's digest checked against the C runtime's output for the same
# events (sfs run --output; not q0, which it does not run).
#
#   QUERIES="q0 q4 q7" BACKENDS="sfs rocksdb hashmap forst" EVENTS=1000000 CKPT_MS=10000 REPEAT=1 \
#       bench/flink/nexmark.sh
#
# A line: query, backend, events, events_per_sec (over the job's net runtime), cpu_s (every
# process that served the run: the JVM and, reaped through it, sfs's supervisor, compactor and
# checkpointer — getrusage(RUSAGE_CHILDREN) of a wrapper), events_per_cpu_s, cpu_s_by_process
# (jvm: the JVM's own CPU as it reports it just before it exits; other: the rest — sfs's
# processes, and the JVM's exit, ~0.2 s on a backend without sfs), peak_rss_bytes (the
# largest process of the run: the JVM),
# result_digest ("rows:sum of row hashes"), c_digest (the C runtime's, "" for q0) and
# digest_ok. Backends: sfs (sfs on the table target, the JVM's own host group), rocksdb
# (Flink's EmbeddedRocksDB, incremental), hashmap, forst — each with 2800 MiB of managed memory
# for the one slot, as the published runs (../shared/FLINK.md). Not yet: sfs-rocksdb (the JNI
# library links no RocksDB), checkpoint durations and sizes, state on disk, shm bytes.
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

make -C "$root" -s all jni >&2
(cd "$root/flink" && mvn -B -q -DskipTests install) >&2
(cd "$here/nexmark" && mvn -B -q -DskipTests package dependency:build-classpath \
	-Dmdep.outputFile=target/cp.txt) >&2
cp="$here/nexmark/target/classes:$(cat "$here/nexmark/target/cp.txt")"

# The C runtime's digest of a query at EVENTS (cached per query).
c_digest() {
	local q=$1 out="$WORK/c-$1.csv"
	[ "$q" = q0 ] && { echo ""; return; }
	if [ ! -f "$out" ]; then
		rm -rf "$WORK/c-data"
		"$root/bin/sfs" run --query "$q" --events "$EVENTS" --workers 1 --backend memory \
			--data "$WORK/c-data" --output "$out" >"$WORK/c-$q.log" 2>&1 || { echo "error"; return; }
	fi
	java -cp "$cp" io.sfs.nexmark.flink.Digest "$out"
}

for q in $QUERIES; do
	cd=$(c_digest "$q")
	for ((r = 0; r < REPEAT; r++)); do
		for b in $BACKENDS; do
			run="$WORK/$q-$b-$r"
			rm -rf "$run"
			mkdir -p "$run"
			python3 - "$run" "$q" "$b" "$cd" "$cp" "$root" "$EVENTS" "$CKPT_MS" <<'PY'
import json, resource, subprocess, sys
run, q, b, cdig, cp, root, events, ckpt = sys.argv[1:]
cmd = ["java", "-Xmx4g", "-Djava.library.path=%s/build/jni" % root, "-cp", cp,
       "io.sfs.nexmark.flink.NexmarkJob", "--query", q, "--backend", b, "--events", events,
       "--ckpt-ms", ckpt, "--work", run, "--sfs-bin", root + "/bin"]
with open(run + "/job.log", "w") as log:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
line = [l for l in p.stdout.splitlines() if l.startswith("NEXMARK ")]
if p.returncode != 0 or not line:
    print(json.dumps({"query": q, "backend": b, "events": int(events), "ok": False,
                      "exit": p.returncode, "log": run + "/job.log"}))
    sys.exit(0)
j = json.loads(line[-1][len("NEXMARK "):])
j["cpu_s"] = round(cpu, 3)
j["events_per_cpu_s"] = round(j["events"] / cpu) if cpu > 0 else None
jvm = j.pop("jvm_cpu_s")
j["cpu_s_by_process"] = {"jvm": jvm, "other": round(cpu - jvm, 3)}
j["peak_rss_bytes"] = {"jvm": ru.ru_maxrss * 1024}
j["c_digest"] = cdig
j["digest_ok"] = (cdig == "" or cdig == j["result_digest"])
j["ok"] = True
print(json.dumps(j))
PY
		done
	done
done
