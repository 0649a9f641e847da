#!/usr/bin/env bash
# bench/ttl.sh — the on-disk state of q20 with a state TTL stays flat while
# the stream runs on; without a TTL it grows linearly.
#
# For each event count and mode, one `sfs run --query q20 --backend BACKEND
# --events N --workers WORKERS --checkpoint-interval CKPT --json`, with
# `--state-ttl TTL_MS` (mode ttl: an entry expires TTL_MS ms of processing
# time after its last write, dropped by maintenance — the compactor's flush,
# the table's merges) or without (mode none), in sequence (never two at
# once), each in a fresh data directory removed once measured.  While a run
# goes, every SAMPLE s:
#   - the live state's bytes: the flush target's directories of the data
#     directory (table: sfs-table.*, rocksdb: sfs-rocksdb.*, rocksdb-direct:
#     rocksdb-direct/), every file counted once (du -sb: a file hard-linked
#     twice inside them counts once; the links checkpoints/ holds to the same
#     files do not matter here), and their file count;
#   - the whole data directory's bytes (checkpoints included, each inode once);
#   - events done so far (the sum of sfs_worker_events_total of `sfs stat
#     --prometheus`: source events the workers generated) and the entries
#     the flush dropped as expired (sfs_compactor_ttl_dropped_entries_total).
# At the end of a run the live state is measured once more (after the end
# of input's flush: "final").  Per run: seconds, events/s, peak and final
# live bytes, the live bytes at 20 % and 50 % of the run (the sample
# nearest that share of the events; by elapsed time when no events were
# read or a recovery restarted the counters), the recoveries, the
# summary's ttl_dropped_at_flush and every other *ttl* counter it has
# (table_ttl_dropped...).  Then the ratios: per mode, final live bytes at
# each size over those at the smallest (flat: ~1; linear: ~ the size ratio,
# 5 for 100M/20M), and per size ttl/none.
#
# Output: a table on stdout; one JSON line per run (the summary, the
# script's figures and every sample) appended to RESULTS; in OUT/STAMP (one
# directory per invocation) per run its samples (CSV: t_s,events,
# live_bytes,live_files,data_bytes,ttl_dropped), its stdout (the summary)
# and stderr, and the invocation's table (report.txt) and JSON lines
# (runs.jsonl).  A run that fails or exceeds TIMEOUT prints its error and
# the script goes on; a run stopped by the timeout is
# stopped with TERM (sfs stops its group), and `sfs clean --job JOB` runs
# after every run, so nothing is left behind.
#
#   nice bench/ttl.sh
#   env: EVENTS ("20000000 100000000"; K, M, G suffixes), MODES ("ttl none"),
#   TTL_MS (5000), BACKEND (table; rocksdb and rocksdb-direct work too),
#   WORKERS (2), CKPT (checkpoint interval ms, 1000), SAMPLE (2 s), TIMEOUT
#   (3600 s per run), OUT (/tmp/sfs-ttl-bench: raw logs and the data
#   directories), RESULTS (bench/ttl-results.jsonl), JOB (ttl-bench-PID),
#   MIN_FREE_GB (10: a run starts only with that much free under OUT), SFS_BIN
#   (the binaries, default ./bin: copy them aside when others rebuild the tree
#   meanwhile), BUILD (a label recorded with each run; default the tree's
#   HEAD and the md5 of SFS_BIN/sfs)
#
#   e.g. EVENTS=2000000 RESULTS=/tmp/smoke.jsonl bench/ttl.sh   (a smoke test)
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
EVENTS=${EVENTS:-20000000 100000000}
MODES=${MODES:-ttl none}
TTL_MS=${TTL_MS:-5000}
BACKEND=${BACKEND:-table}
WORKERS=${WORKERS:-2}
CKPT=${CKPT:-1000}
SAMPLE=${SAMPLE:-2}
TIMEOUT=${TIMEOUT:-3600}
OUT=${OUT:-/tmp/sfs-ttl-bench}
RESULTS=${RESULTS:-bench/ttl-results.jsonl}
JOB=${JOB:-ttl-bench-$$}
MIN_FREE_GB=${MIN_FREE_GB:-10}
BUILD=${BUILD:-$(git rev-parse --short HEAD 2>/dev/null || echo '?') sfs md5 $(md5sum "$SFS" 2>/dev/null | cut -c1-12)}

case ${1:-} in
-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) echo "ttl.sh: no arguments (environment only; --help)" >&2; exit 2 ;;
esac

num() {
	case $1 in
	*[kK]) echo $((${1%?} * 1000)) ;;
	*[mM]) echo $((${1%?} * 1000000)) ;;
	*[gG]) echo $((${1%?} * 1000000000)) ;;
	*) echo $(($1)) ;;
	esac
}
case $BACKEND in
table) LIVE_GLOB='sfs-table.*' ;;
rocksdb) LIVE_GLOB='sfs-rocksdb.*' ;;
rocksdb-direct) LIVE_GLOB='rocksdb-direct' ;;
*) echo "ttl.sh: BACKEND $BACKEND keeps no state on disk (table, rocksdb, rocksdb-direct)" >&2
   exit 2 ;;
esac
for m in $MODES; do
	case $m in ttl|none) ;; *) echo "ttl.sh: mode '$m' (ttl or none)" >&2; exit 2 ;; esac
done
[ -x "$SFS" ] || { echo "ttl.sh: no $SFS (make first, or set SFS_BIN)" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
bench_raw runs.jsonl

# bytes (each inode once) and files of the live state's directories: "BYTES FILES"
live() {
	local d=$1 p have=()
	for p in "$d"/$LIVE_GLOB; do [ -e "$p" ] && have+=("$p"); done
	[ ${#have[@]} -eq 0 ] && { echo "0 0"; return; }
	find "${have[@]}" -type f -printf '%i %s\n' 2>/dev/null |
		awk '!seen[$1]++ { s += $2; n++ } END { printf "%.0f %d\n", s, n }'
}
data_bytes() { du -sb "$1" 2>/dev/null | cut -f1; }
# events done and entries dropped at flush so far: "EVENTS DROPPED" (empty when stat fails)
progress() {
	"$SFS" stat --job "$JOB" --prometheus 2>/dev/null | awk '
		/^sfs_worker_events_total\{/ { e += $NF; have = 1 }
		/^sfs_compactor_ttl_dropped_entries_total\{/ { d += $NF }
		END { if (have) printf "%.0f %.0f\n", e, d }'
}

PY=$(cat <<'PY'
import json, sys, time
mode = sys.argv[1]

def mib(x): return "-" if x is None else f"{x / 2**20:.0f}"
def ratio(a, b): return "-" if not a or not b else f"{a / b:.2f}"

if mode == "record":
    (out, summary, err, samples, rc, n, m, ttl, backend, wall, final, ffiles, fdata,
     load, free, cmd, build) = sys.argv[2:19]
    n, rc = int(n), int(rc)
    rec = {"bench": "ttl", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "query": "q20",
           "backend": backend, "mode": m, "state_ttl_ms": int(ttl) if m == "ttl" else None,
           "events_requested": n, "exit": rc, "wall_s": float(wall), "load_before": load,
           "disk_free_before_bytes": int(free), "command": cmd, "build": build}
    try:
        s = json.loads(open(summary).read().strip().splitlines()[-1])
    except (ValueError, IndexError, OSError):
        s = None
    ok = s is not None and s.get("ok") is True and rc == 0
    if s:
        rec.update(s)
    rec["ok"] = ok
    if not ok:
        lines = [l for l in open(err, errors="replace").read().splitlines()
                 if not l.startswith("  ")]
        rec["error"] = (f"timeout after {float(wall):.0f} s" if rc in (124, 137)
                        else f"exit {rc}: " + " | ".join(lines[-4:]))
    smp = []
    for line in open(samples):
        f = line.strip().split(",")
        if len(f) != 6 or f[0] == "t_s":
            continue
        smp.append([float(f[0]), int(f[1]) if f[1] else None, int(f[2]), int(f[3]),
                    int(f[4]) if f[4] else None, int(f[5]) if f[5] else None])
    rec["samples_columns"] = ["t_s", "events", "live_bytes", "live_files", "data_bytes",
                              "ttl_dropped"]
    rec["samples"] = smp
    rec["live_final_bytes"] = int(final)
    rec["live_final_files"] = int(ffiles)
    rec["data_final_bytes"] = int(fdata)
    rec["live_peak_bytes"] = max([int(final)] + [x[2] for x in smp])
    rec["data_peak_bytes"] = max([int(fdata)] + [x[4] or 0 for x in smp])
    # live bytes at a share of the run: the sample nearest that share of the
    # events (its events recorded beside it); by elapsed time when no sample
    # has its events
    # A recovery restarts the workers' counters (their events since the restore):
    # events going back mean one, and then the shares are taken by time.
    end_t = smp[-1][0] if smp else 0.0
    withev = [x for x in smp if x[1] is not None]
    if any(b[1] < a[1] for a, b in zip(withev, withev[1:])):
        withev = []
    for p in (20, 50):
        if withev:
            at = min(withev, key=lambda x: abs(x[1] - n * p / 100))
            rec[f"live_at_{p}pct_by"] = "events"
            rec[f"live_at_{p}pct_events"] = at[1]
        else:
            at = min(smp, key=lambda x: abs(x[0] - end_t * p / 100)) if smp else None
            rec[f"live_at_{p}pct_by"] = "time"
        rec[f"live_at_{p}pct_bytes"] = at[2] if at else None
    rec["live_at_100pct_bytes"] = int(final)
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    sys.exit(0)

def load(path):
    recs = []
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("bench") == "ttl":
            recs.append(r)
    return recs

def ttl_counters(r):
    return {k: v for k, v in r.items() if "ttl" in k and k != "state_ttl_ms"
            and isinstance(v, (int, float))}

if mode == "one":
    r = load(sys.argv[2])[-1]
    if not r["ok"]:
        print(f"   FAILED ({r.get('error', '')})")
    else:
        c = ", ".join(f"{k} {v}" for k, v in ttl_counters(r).items())
        print(f"   {r['events_per_sec']:.0f} events/s, {r['seconds']:.1f} s; live state MiB: "
              f"20% {mib(r['live_at_20pct_bytes'])}, 50% {mib(r['live_at_50pct_bytes'])}, "
              f"final {mib(r['live_final_bytes'])} ({r['live_final_files']} files), "
              f"peak {mib(r['live_peak_bytes'])}; data dir peak {mib(r['data_peak_bytes'])} MiB; "
              f"{len(r['samples'])} samples; {c}")
    sys.exit(0)

if mode == "report":
    recs = load(sys.argv[2])
    print(f"\n# q20, {recs[0]['backend'] if recs else '?'} backend: live state on disk (MiB; "
          "'at 20%/50%': the sample nearest that share of the events, or of the time after a "
          "recovery; final: after the run)")
    extra = sorted({k for r in recs for k in ttl_counters(r)} - {"ttl_dropped_at_flush"})
    hdr = (f"{'events':>10} {'mode':>9} {'seconds':>8} {'events/s':>9} {'peak':>7} "
           f"{'final':>7} {'at 20%':>7} {'at 50%':>7} {'at 100%':>7} {'files':>6} "
           f"{'recov':>5} {'ttl_dropped_at_flush':>20}")
    for k in extra:
        hdr += f" {k:>{max(len(k), 8)}}"
    print(hdr)
    final = {}
    for r in recs:
        m = r["mode"] + (f" {r['state_ttl_ms']}" if r["mode"] == "ttl" else "")
        n = r["events_requested"]
        if not r["ok"]:
            print(f"{n:>10} {m:>9} FAILED: {r.get('error', '')[:150]}")
            continue
        final[(r["mode"], n)] = r["live_final_bytes"]
        line = (f"{n:>10} {m:>9} {r['seconds']:>8.1f} {r['events_per_sec']:>9.0f} "
                f"{mib(r['live_peak_bytes']):>7} {mib(r['live_final_bytes']):>7} "
                f"{mib(r['live_at_20pct_bytes']):>7} {mib(r['live_at_50pct_bytes']):>7} "
                f"{mib(r['live_at_100pct_bytes']):>7} {r['live_final_files']:>6} "
                f"{r.get('recoveries', '-'):>5} {r.get('ttl_dropped_at_flush', '-'):>20}")
        for k in extra:
            line += f" {str(r.get(k, '-')):>{max(len(k), 8)}}"
        print(line)
    sizes = sorted({n for _, n in final})
    modes = [m for m in ("ttl", "none") if any(k[0] == m for k in final)]
    if len(sizes) > 1:
        print(f"\n# final live state at each size over that at {sizes[0]} events "
              "(flat: ~1; linear: ~ the size ratio)")
        for m in modes:
            print(f"{m:>5}: " + "  ".join(
                f"{n}/{sizes[0]} = {ratio(final.get((m, n)), final.get((m, sizes[0])))}"
                f" (events x{n / sizes[0]:.0f})" for n in sizes[1:]))
    if len(modes) == 2:
        print("\n# final live state, ttl over none, at each size")
        print("  ".join(f"{n}: {ratio(final.get(('ttl', n)), final.get(('none', n)))}"
                        for n in sizes))
    sys.exit(0)
PY
)

free=$(df -PB1 "$OUT" | awk 'NR == 2 { print $4 }')
echo "# ttl bench: q20 on $BACKEND, $WORKERS workers, checkpoint every $CKPT ms; events $EVENTS;" \
     "modes $MODES (ttl: --state-ttl $TTL_MS); sample every $SAMPLE s; timeout $TIMEOUT s per run;" \
     "$(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); $((free / 1000000000)) GB free under" \
     "$OUT; raw output in $RAW; results appended to $RESULTS; binaries $BIN ($BUILD)"
for ev in $EVENTS; do
	n=$(num "$ev")
	for m in $MODES; do
		tag=$BACKEND-$n-$m
		data=$OUT/data-$tag
		free=$(df -PB1 "$OUT" | awk 'NR == 2 { print $4 }')
		if [ "$free" -lt $((MIN_FREE_GB * 1000000000)) ]; then
			echo "== $n $m: skipped, only $((free / 1000000000)) GB free under $OUT" \
			     "(MIN_FREE_GB=$MIN_FREE_GB)"
			data=""
			continue
		fi
		"$SFS" clean --job "$JOB" >/dev/null 2>&1
		rm -rf "$data"
		mkdir -p "$data"
		load=$(cut -d' ' -f1-3 /proc/loadavg)
		set -- "$SFS" run --job "$JOB" --query q20 --events "$n" --backend "$BACKEND" \
			--workers "$WORKERS" --checkpoint-interval "$CKPT" --data "$data" --json
		[ "$m" = ttl ] && set -- "$@" --state-ttl "$TTL_MS"
		cmd="$*"
		echo "== $n events, $m (load $load, $((free / 1000000000)) GB free): $cmd"
		samples=$RAW/$tag.samples.csv
		echo "t_s,events,live_bytes,live_files,data_bytes,ttl_dropped" >"$samples"
		t0=$(date +%s.%N)
		timeout -k 60 "$TIMEOUT" "$@" >"$RAW/$tag.json" 2>"$RAW/$tag.err" &
		pid=$!
		while kill -0 "$pid" 2>/dev/null; do
			t=$(date +%s.%N)
			read -r ev_done dropped <<<"$(progress)"
			read -r lb lf <<<"$(live "$data")"
			db=$(data_bytes "$data")
			echo "$(awk "BEGIN { printf \"%.2f\", $t - $t0 }"),${ev_done:-},$lb,$lf,${db:-},${dropped:-}" \
				>>"$samples"
			for _ in $(seq $((SAMPLE * 10))); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
		done
		wait "$pid"
		rc=$?
		pid=""
		wall=$(awk "BEGIN { print $(date +%s.%N) - $t0 }")
		"$SFS" clean --job "$JOB" >/dev/null 2>&1
		read -r lb lf <<<"$(live "$data")"
		db=$(data_bytes "$data")
		python3 -c "$PY" record "$RESULTS" "$RAW/$tag.json" "$RAW/$tag.err" "$samples" "$rc" \
			"$n" "$m" "$TTL_MS" "$BACKEND" "$wall" "$lb" "$lf" "${db:-0}" "$load" "$free" "$cmd" "$BUILD"
		tail -n 1 "$RESULTS" >>"$THESE"
		python3 -c "$PY" one "$THESE"
		rm -rf "$data"
		data=""
	done
done
[ -s "$THESE" ] && python3 -c "$PY" report "$THESE" | tee "$RAW/report.txt"
