#!/usr/bin/env bash
# make run: the main job, and what sfs is for, in about 15 s.  Nexmark q4 (the
# average closing price per category: a join of auctions and bids, state that
# grows with the stream) on the default backend (sfs flushing to its own tables),
# one worker per core, a checkpoint every second, as a supervised group; the
# sources are throttled (--max-rate) so the run lasts long enough to complete
# several checkpoints.  Then a summary for a human, from what the run reports
# (`sfs run --json`) and what is on disk (`sfs checkpoints --json`): events and
# events/s, the state's size, the checkpoints (how many, their duration, their
# size), and the maintenance the workers did not do (the compactor's and the
# checkpointer's CPU against the workers', its commits and merges).
#
# Knobs: SFS_QUERY (q4), SFS_EVENTS (6000000), SFS_MAX_RATE (500000 events/s in
# total: SFS_EVENTS / SFS_MAX_RATE is the run's length), SFS_WORKERS (cores),
# SFS_BACKEND (table), SFS_CHECKPOINT_MS (1000), SFS_JOB (sfs-demo).  The data
# directory is a temporary one, removed at the end.
set -eu
BIN=${SFS_BIN:-$PWD/bin}
QUERY=${SFS_QUERY:-q4}
EVENTS=${SFS_EVENTS:-6000000}
MAX_RATE=${SFS_MAX_RATE:-500000}
WORKERS=${SFS_WORKERS:-$(nproc)}
BACKEND=${SFS_BACKEND:-table}
INTERVAL=${SFS_CHECKPOINT_MS:-1000}
JOB=${SFS_JOB:-sfs-demo}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "== sfs run: Nexmark $QUERY, $EVENTS events at most $MAX_RATE/s, $WORKERS workers," \
	"backend $BACKEND, a checkpoint every $INTERVAL ms (about $((EVENTS / MAX_RATE)) s)"
if ! "$BIN/sfs" run --job "$JOB" --query "$QUERY" --events "$EVENTS" --max-rate "$MAX_RATE" \
	--workers "$WORKERS" --backend "$BACKEND" --checkpoint-interval "$INTERVAL" \
	--data "$OUT/data" --output "$OUT/$QUERY.csv" --json >"$OUT/run.json" 2>"$OUT/log"; then
	echo "sfs run failed; its log:" >&2
	tail -n 20 "$OUT/log" >&2
	exit 1
fi
# No checkpoint storage at all when none was taken (SFS_CHECKPOINT_MS=0): an empty list.
"$BIN/sfs" checkpoints --data "$OUT/data" --json >"$OUT/checkpoints.json" 2>/dev/null ||
	echo '{"checkpoints": []}' >"$OUT/checkpoints.json"

echo "== result: $(($(wc -l <"$OUT/$QUERY.csv") - 1)) rows; first lines:"
head -n 4 "$OUT/$QUERY.csv"

# The summary.  Every figure is a field of the two JSON objects (docs/json.md).
python3 - "$OUT/run.json" "$OUT/checkpoints.json" "$JOB" "$BIN" "$MAX_RATE" <<'EOF'
import json, os, sys

run = json.load(open(sys.argv[1]))
cks = [c for c in json.load(open(sys.argv[2]))["checkpoints"] if c.get("valid")]
job, bindir, max_rate = sys.argv[3], sys.argv[4], sys.argv[5]
if bindir.startswith(os.getcwd() + "/"):
    bindir = os.path.relpath(bindir)

def mib(b):
    return "%.1f MiB" % (b / 1048576.0)

def ms(v):
    return "-" if v is None else "%.0f ms" % v

cpu = run["cpu_ms_by_role"]
wamp = "-" if run["write_amp"] is None else "%.2f" % run["write_amp"]
w = cpu["worker"] or 1e-9
print("== summary")
print("events:       %d in %.1f s = %.0f events/s (the sources throttled to %s/s;"
      " %.0f per CPU-second of all processes)"
      % (run["events"], run["seconds"], run["events_per_sec"], max_rate,
         run["events_per_cpu_s"]))
print("state:        %s in shared memory, %s"
      % (mib(run["shm_bytes"]),
         "%s on disk (checkpoint %d, the newest)" % (mib(cks[0]["size"]), cks[0]["id"])
         if cks else "no checkpoint on disk"))
print("checkpoints:  %d completed, duration median %s, max %s"
      % (run["checkpoints_completed"], ms(run["checkpoint_median_ms"]),
         ms(run["checkpoint_max_ms"])))
# The ones kept on disk (the newest 3 by default), each its size and the bytes it
# added: a checkpoint links only the files the one before did not have.
print("              kept: %s" % (", ".join("%d: %s (%s new)" % (c["id"], mib(c["size"]),
                                                            mib(c["new_bytes"]))
                                            for c in cks) or "none"))
print("barriers:     the workers spent %.1f ms of CPU sealing state for them (%.1f ms wall, summed)"
      % (run["barrier_cpu_ms"], run["barrier_ms"]))
print("maintenance:  compactor %.1f s CPU, checkpointer %.1f s, against the workers' %.1f s"
      " (%.2fx and %.2fx)"
      % (cpu["compactor"] / 1e3, cpu["checkpointer"] / 1e3, cpu["worker"] / 1e3,
         cpu["compactor"] / w, cpu["checkpointer"] / w))
if "table_data_commits" in run:
    print("compactor:    %d flushes into tables (data commits), %d merges, %s written"
          " (write amplification %s); workers stalled %.0f ms"
          % (run["table_data_commits"], run["table_merges"],
             mib(run["disk_write_bytes_by_role"]["compactor"]), wamp, run["stall_ms"]))
else:
    print("compactor:    %s written (write amplification %s); workers stalled %.0f ms"
          % (mib(run["disk_write_bytes_by_role"]["compactor"]), wamp, run["stall_ms"]))
print("watch a longer run (200 s) live: %sSFS_EVENTS=100000000 make run"
      % ("" if job == "sfs-demo" else "SFS_JOB=%s " % job))
print("              and, in another terminal: %s/sfs top --job %s" % (bindir, job))
EOF
