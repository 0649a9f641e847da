#!/usr/bin/env bash
# bench/recovery.sh — how long a recovery takes against the size of the
# state, in place (a worker dies: the group rolls back to its last completed
# checkpoint in shared memory and the live stores, only the workers
# restart) and by a restart (the supervisor stops the whole group and
# starts it again from the checkpoint's files), measured in the same
# invocation, one after the other, for the same points.
#
# For each point of SIZES (GB of state), each backend of BACKENDS and each
# mode of MODES, one `sfs run --query q20 --backend B --recovery MODE
# --events N --workers WORKERS
# --checkpoint-interval CKPT --max-recoveries 10 --json` in a fresh data
# directory (q20's state grows steadily with the events), in sequence
# (never two at once).  While it runs, KILLS times, one worker (chosen at
# random) is killed with SIGKILL, at spread moments once a checkpoint
# exists: kill k of K when the newest completed checkpoint holds at least
# SIZE x (0.8 + 0.4 (k - 1) / (K - 1)) GB (0.8 to 1.2 x SIZE: the median
# kill at SIZE), and only once a checkpoint newer than the previous kill's
# is complete (the previous recovery is over — the supervisor has logged
# it and chosen its checkpoint — and the new group checkpoints again).  After the last kill and a checkpoint after it, the run is
# stopped (TERM: sfs stops its group and prints its summary); it is not
# run to the end of its input.
#
# The state size of a kill: the bytes of the newest valid checkpoint at the
# kill (its "size" in `sfs checkpoints --json`: every file it references,
# shared ones included; table: its live files; rocksdb: RocksDB's
# checkpoint; memory: the dump of the store) — what a restart restores.  The live state directory
# of the flush target (table, rocksdb) is recorded beside it.
#
# The times are the summary's (docs/json.md: sfs run --json): recovery_ms (the
# supervisor seeing the death to the first record processed again by every
# worker of the new incarnation) and its parts recovery_stop_ms,
# recovery_restore_ms and recovery_first_record_ms, one entry per recovery.
# Per point: the median, min and max of recovery_ms over the kills, the
# median state bytes at the kills and the median of each part.
#
# A recovery in place that could not be done falls back to a restart (the
# summary's recovery_kind says which each was; the table counts them).
#
# Output: a table on stdout; one JSON line per point (the script's figures,
# the summary's recovery lists, the kills' moments and state sizes, the
# summary) appended to RESULTS; bench/recovery.png (PNG: recovery ms
# against state GB (log scale), one line per backend and mode, min-max bars;
# the newest point of each backend, mode and size in RESULTS) with gnuplot (scripts/deps.sh installs
# it); in OUT/STAMP (one directory per invocation) each run's summary,
# stderr and kill log, and the invocation's table (report.txt) and lines.
# A run that fails or exceeds TIMEOUT says so and the script goes on;
# `sfs clean --job JOB` runs after every run and its data directory is
# removed once measured.  A point starts only with MIN_FREE_GB + 4 x SIZE GB
# free under OUT.
#
#   nice bench/recovery.sh
#   env: BACKENDS ("table rocksdb memory"), MODES ("in-place restart": the
#   --recovery of the runs; memory has no rollback in place and always
#   restarts), SIZES (GB of state at the kills, "0.1 1 3"), EVENTS (events of every run; default per point: SIZE x
#   EVENTS_PER_GB x 1.6 + 20M, enough to pass 1.2 x SIZE with slow
#   recoveries: the run is stopped after its kills anyway), EVENTS_PER_GB
#   (10M: q20 holds ~140 B of state per event on the table target), KILLS
#   (5), WORKERS (2), CKPT (1000 ms), STORE_MB (memory backend's --store-mb,
#   8192), TIMEOUT (1800 s per run), OUT (/tmp/sfs-recov-bench), RESULTS
#   (bench/recovery-results.jsonl), PNG (bench/recovery.png), JOB
#   (recov-bench-PID), MIN_FREE_GB (10), SFS_BIN (./bin), BUILD (a label
#   recorded with each point; default HEAD and the md5 of SFS_BIN/sfs),
#   PLOT_ONLY (1: no runs, only the figure from RESULTS; an empty BACKENDS
#   or SIZES means the default)
#
#   e.g. SIZES=0.05 BACKENDS=table KILLS=2 RESULTS=/tmp/r.jsonl PNG=/tmp/r.png bench/recovery.sh
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
BACKENDS=${BACKENDS:-table rocksdb memory}
MODES=${MODES:-in-place restart}
SIZES=${SIZES:-0.1 1 3}
EVENTS=${EVENTS:-}
EVENTS_PER_GB=${EVENTS_PER_GB:-10000000}
KILLS=${KILLS:-5}
WORKERS=${WORKERS:-2}
CKPT=${CKPT:-1000}
STORE_MB=${STORE_MB:-8192}
TIMEOUT=${TIMEOUT:-1800}
OUT=${OUT:-/tmp/sfs-recov-bench}
RESULTS=${RESULTS:-bench/recovery-results.jsonl}
PNG=${PNG:-bench/recovery.png}
JOB=${JOB:-recov-bench-$$}
MIN_FREE_GB=${MIN_FREE_GB:-10}
BUILD=${BUILD:-$(git rev-parse --short HEAD 2>/dev/null || echo '?') sfs md5 $(md5sum "$SFS" 2>/dev/null | cut -c1-12)}

case ${1:-} in
-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) echo "recovery.sh: no arguments (environment only; --help)" >&2; exit 2 ;;
esac
[ -x "$SFS" ] || { echo "recovery.sh: no $SFS (make first, or set SFS_BIN)" >&2; exit 2; }
[ "$KILLS" -ge 1 ] 2>/dev/null || { echo "recovery.sh: KILLS $KILLS (>= 1)" >&2; exit 2; }
for b in $BACKENDS; do
	case $b in table|rocksdb|memory|rocksdb-direct) ;;
	*) echo "recovery.sh: backend '$b' (table, rocksdb, memory, rocksdb-direct)" >&2; exit 2 ;;
	esac
done
for m in $MODES; do
	case $m in in-place|restart) ;;
	*) echo "recovery.sh: mode '$m' (in-place, restart)" >&2; exit 2 ;;
	esac
done
# PLOT_ONLY=1: no runs, the figure from RESULTS only
[ -n "${PLOT_ONLY:-}" ] && SIZES=""
. "$(dirname "$0")/lib.sh"
bench_raw points.jsonl

# The newest valid checkpoint: "ID BYTES" (nothing when none); its size as
# `sfs checkpoints` gives it: every file it references (shared ones too).
newest_ckpt() {
	ls -d "$1"/checkpoints/chk-* >/dev/null 2>&1 || return 0
	"$SFS" checkpoints --data "$1" --json 2>/dev/null | python3 -c '
import json, sys
try:
    c = [x for x in json.load(sys.stdin)["checkpoints"] if x.get("valid")]
except ValueError:
    c = []
if c:
    print(c[0]["id"], c[0]["size"])'
}
# Bytes of the flush target's live directories (each file once).
live_bytes() {
	local p have=()
	for p in "$1"/sfs-table.* "$1"/sfs-rocksdb.* "$1"/rocksdb-direct; do
		[ -e "$p" ] && have+=("$p")
	done
	[ ${#have[@]} -eq 0 ] && { echo 0; return; }
	du -sbl "${have[@]}" 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

PY=$(cat <<'PY'
import json, statistics, sys, time
mode = sys.argv[1]

def med(v):
    v = [x for x in v if isinstance(x, (int, float))]
    return statistics.median(v) if v else None

def f(x, fmt="{:.0f}"):
    return "-" if x is None else fmt.format(x)

if mode == "record":
    (out, summary, err, kills, rc, backend, size, n, wall, load, free, cmd, build,
     rmode) = sys.argv[2:16]
    rec = {"bench": "recovery", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "query": "q20",
           "backend": backend, "recovery": rmode, "size_gb_target": float(size), "events_requested": int(n),
           "exit": int(rc), "wall_s": float(wall), "load_before": load,
           "disk_free_before_bytes": int(free), "command": cmd, "build": build}
    try:
        s = json.loads(open(summary).read().strip().splitlines()[-1])
    except (ValueError, IndexError, OSError):
        s = None
    k = []
    for line in open(kills):
        p = line.split()
        if len(p) == 5:
            k.append({"t_s": float(p[0]), "pid": int(p[1]), "checkpoint": int(p[2]),
                      "checkpoint_bytes": int(p[3]), "live_bytes": int(p[4])})
    rec["kills"] = k
    rec["summary"] = s
    ms = s.get("recovery_ms", []) if s else []
    rec["recoveries"] = s.get("recoveries") if s else None
    rec["recovery_ms"] = ms
    for key in ("recovery_kind", "recovery_stop_ms", "recovery_restore_ms",
                "recovery_first_record_ms"):
        rec[key] = s.get(key, []) if s else []
    good = [x for x in ms if isinstance(x, (int, float))]
    rec["recovery_ms_median"] = med(good)
    rec["recovery_ms_min"] = min(good) if good else None
    rec["recovery_ms_max"] = max(good) if good else None
    for key in ("recovery_stop_ms", "recovery_restore_ms", "recovery_first_record_ms"):
        rec[key + "_median"] = med(rec[key])
    rec["state_bytes_median"] = med([x["checkpoint_bytes"] for x in k])
    rec["live_bytes_median"] = med([x["live_bytes"] for x in k])
    rec["ok"] = bool(s) and len(good) == len(k) and len(k) > 0 and rec["recoveries"] == len(k)
    if not rec["ok"]:
        lines = [l for l in open(err, errors="replace").read().splitlines()
                 if not l.startswith("  ")]
        rec["error"] = (f"{len(k)} kills, {rec['recoveries']} recoveries, {len(good)} timed; "
                        f"exit {rc}: " + " | ".join(lines[-3:]))
    with open(out, "a") as fo:
        fo.write(json.dumps(rec) + "\n")
    sys.exit(0)

def load(path):
    recs = []
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("bench") == "recovery":
            recs.append(r)
    return recs

HDR = (f"{'backend':>8} {'recovery':>8} {'in pl':>5} {'GB tgt':>6} {'state GB':>8} {'live GB':>7} {'kills':>5} "
       f"{'median ms':>9} {'min':>7} {'max':>7} {'stop':>7} {'restore':>7} {'1st rec':>7}")

def line(r):
    gb = lambda x: f(None if x is None else x / 1e9, "{:.2f}")
    inpl = sum(1 for k in r.get("recovery_kind", []) if k == "in-place")
    return (f"{r['backend']:>8} {r.get('recovery', 'restart'):>8} {inpl:>5} {r['size_gb_target']:>6g} {gb(r['state_bytes_median']):>8} "
            f"{gb(r['live_bytes_median']):>7} {len(r['kills']):>5} "
            f"{f(r['recovery_ms_median']):>9} {f(r['recovery_ms_min']):>7} "
            f"{f(r['recovery_ms_max']):>7} {f(r['recovery_stop_ms_median']):>7} "
            f"{f(r['recovery_restore_ms_median']):>7} "
            f"{f(r['recovery_first_record_ms_median']):>7}"
            + ("" if r["ok"] else f"  ({r.get('error', '')[:160]})"))

if mode == "one":
    print(HDR)
    print(line(load(sys.argv[2])[-1]))
    sys.exit(0)

if mode == "report":
    print("\n# q20: recovery_ms over the kills, by --recovery (in pl: recoveries done in place) (median, min, max), state = the "
          "newest completed checkpoint's bytes at the kills (median), live = the flush target's "
          "directories; stop/restore/1st rec = medians of the parts (ms)")
    print(HDR)
    for r in load(sys.argv[2]):
        print(line(r))
    sys.exit(0)

if mode == "plotdata":
    # the newest point of each (backend + mode, size) in RESULTS: "gb median min max"
    newest = {}
    for r in load(sys.argv[2]):
        if r["recovery_ms_median"] is not None and r["state_bytes_median"]:
            newest[(r["backend"] + "_" + r.get("recovery", "restart"), r["size_gb_target"])] = r
    with open(sys.argv[3], "w") as fo:
        for b in dict.fromkeys(k[0] for k in newest):
            fo.write(f"# {b}\n")
            for k in sorted((k for k in newest if k[0] == b), key=lambda k: k[1]):
                r = newest[k]
                fo.write(f"{r['state_bytes_median'] / 1e9:.4f} {r['recovery_ms_median']:.1f} "
                         f"{r['recovery_ms_min']:.1f} {r['recovery_ms_max']:.1f}\n")
            fo.write("\n\n")
    print(" ".join(dict.fromkeys(k[0] for k in newest)))
    sys.exit(0)
PY
)

free=$(df -PB1 "$OUT" | awk 'NR == 2 { print $4 }')
echo "# recovery bench: q20, backends $BACKENDS, state sizes $SIZES GB, $KILLS kills of a worker" \
     "each, $WORKERS workers, checkpoint every $CKPT ms; timeout $TIMEOUT s per run; $(nproc) cpus," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); $((free / 1000000000)) GB free under $OUT; raw output" \
     "in $RAW; results appended to $RESULTS; binaries $BIN ($BUILD)"
for size in $SIZES; do	# the smallest points of every backend first
	for b in $BACKENDS; do
	for mode in $MODES; do
		[ "$b" = memory ] && [ "$mode" = in-place ] && [[ " $MODES " == *" restart "* ]] && continue
		if [ -n "$EVENTS" ]; then
			n=$EVENTS
		else
			n=$(awk -v s="$size" -v e="$EVENTS_PER_GB" 'BEGIN { printf "%.0f", s * e * 1.6 + 20000000 }')
		fi
		tag=$b-$mode-$size
		data=$OUT/data-$tag
		free=$(df -PB1 "$OUT" | awk 'NR == 2 { print $4 }')
		need=$(awk -v s="$size" -v m="$MIN_FREE_GB" 'BEGIN { printf "%.0f", (m + 4 * s) * 1e9 }')
		if [ "$free" -lt "$need" ]; then
			echo "== $tag: skipped, only $((free / 1000000000)) GB free under $OUT (need" \
			     "$((need / 1000000000)))"
			data=""
			continue
		fi
		"$SFS" clean --job "$JOB" >/dev/null 2>&1
		rm -rf "$data"
		mkdir -p "$data"
		load=$(cut -d' ' -f1-3 /proc/loadavg)
		set -- "$SFS" run --job "$JOB" --query q20 --events "$n" --backend "$b" \
			--workers "$WORKERS" --checkpoint-interval "$CKPT" --max-recoveries 10 \
			--recovery "$mode" --data "$data" --json
		[ "$b" = memory ] && set -- "$@" --store-mb "$STORE_MB"
		cmd="$*"
		echo "== $b, $mode, $size GB: $n events (load $load, $((free / 1000000000)) GB free): $cmd"
		kills=$RAW/$tag.kills
		: >"$kills"
		t0=$(date +%s.%N)
		timeout -k 60 "$TIMEOUT" "$@" >"$RAW/$tag.json" 2>"$RAW/$tag.err" &
		pid=$!
		k=0
		last=0      # the checkpoint id at the previous kill
		after=""    # the last kill is followed by a checkpoint: stop
		while kill -0 "$pid" 2>/dev/null; do
			read -r id bytes <<<"$(newest_ckpt "$data")"
			if [ -n "${id:-}" ] && [ "$id" -gt "$last" ]; then
				if [ "$k" -ge "$KILLS" ]; then
					after=1
					break
				fi
				want=$(awk -v s="$size" -v k="$k" -v n="$KILLS" \
					'BEGIN { printf "%.0f", s * 1e9 * (n > 1 ? 0.8 + 0.4 * k / (n - 1) : 1) }')
				if [ "$bytes" -ge "$want" ]; then
					w=$(pgrep -f -- "sfs-worker --job $JOB " | shuf -n 1)
					if [ -n "$w" ]; then
						lb=$(live_bytes "$data")
						kill -9 "$w" 2>/dev/null &&
							echo "$(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $t0 }") $w $id $bytes $lb" >>"$kills"
						k=$((k + 1))
						# the supervisor says which recovery it starts once
						# it has chosen its checkpoint: every newer one
						# is the new incarnation's
						while kill -0 "$pid" 2>/dev/null &&
						      ! grep -q "job $JOB: recovery $k of" "$RAW/$tag.err"; do
							sleep 0.1
						done
						read -r last _ <<<"$(newest_ckpt "$data")"
						last=${last:-$id}
					fi
				fi
			fi
			sleep 0.3
		done
		if [ -n "$after" ]; then
			kill -TERM "$pid" 2>/dev/null	# timeout passes it on: sfs stops its group
		fi
		wait "$pid"
		rc=$?
		pid=""
		wall=$(awk "BEGIN { print $(date +%s.%N) - $t0 }")
		"$SFS" clean --job "$JOB" >/dev/null 2>&1
		python3 -c "$PY" record "$RESULTS" "$RAW/$tag.json" "$RAW/$tag.err" "$kills" "$rc" \
			"$b" "$size" "$n" "$wall" "$load" "$free" "$cmd" "$BUILD" "$mode"
		tail -n 1 "$RESULTS" >>"$THESE"
		python3 -c "$PY" one "$THESE"
		rm -rf "$data"
		data=""
	done
	done
done
[ -s "$THESE" ] && python3 -c "$PY" report "$THESE" | tee "$RAW/report.txt"

# The figure: every backend's newest points in RESULTS.
if command -v gnuplot >/dev/null; then
	dat=$RAW/plot.dat
	names=$(python3 -c "$PY" plotdata "$RESULTS" "$dat")
	if [ -n "$names" ]; then
		plot=""
		i=0
		for b in $names; do
			plot="$plot${plot:+, }'$dat' index $i using 1:2:3:4 with yerrorlines title '${b/_/ }'"
			i=$((i + 1))
		done
		gnuplot <<EOF
set terminal png size 900,560
set output '$PNG'
set title "q20, $WORKERS workers: recovery in place against a restart from the checkpoint's files\nmedian of the kills, bars min-max; from the death's detection to the first record again"
set xlabel 'state at the kill: the newest checkpoint (GB)'
set ylabel 'recovery (ms, log scale)'
set key left top
set grid
set logscale y
set xrange [0:*]
plot $plot
EOF
		echo "# figure: $PNG"
	fi
else
	echo "# no gnuplot: no figure (scripts/deps.sh installs it)"
fi
