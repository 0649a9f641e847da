#!/usr/bin/env bash
# bench/scale.sh — how sfs scales with the stream (issue 18): for every
# query, backend and event count, one `sfs run --query Q --backend B
# --events N --workers 1 --json`, in sequence (never two at once), and per
# run what it cost and what it needs:
#   - events/s, and the share of the run the worker stalled (stall_ms over
#     the run's seconds);
#   - CPU seconds per million events by role (worker, compactor,
#     checkpointer, supervisor: counted by sfs itself from wait4(), the
#     summary's cpu_ms_by_role);
#   - bytes written to disk per event by role (disk_write_bytes_by_role:
#     the kernel's write_bytes) and write amplification (compactor +
#     checkpointer bytes written / bytes the workers sealed into buffers);
#   - peak RSS by role, shared memory touched (shm_bytes);
#   - live state on disk at the end (du of the store directories — the
#     table's, RocksDB's, rocksdb-direct's — without checkpoints), the
#     checkpoints' own bytes (du of checkpoints/ less what they share with
#     the live store), and the data directory's peak during the run (du
#     sampled every SAMPLE s): what a run of that size needs;
#   - checkpoint duration median and max.
# Each run's data directory is measured, then removed (a 100M-event q20
# writes tens of GB).  A run that fails or exceeds TIMEOUT prints its error
# and the script goes on.  Output: a table on stdout, one JSON line per run
# (the summary plus the script's figures) appended to RESULTS, and a chart
# CHART drawn from every line of RESULTS (the newest run of each query,
# backend and size): events/s against events, one panel per query and a
# line per backend, and CPU seconds per million events by role.
#
#   bench/scale.sh [--queries "Q..."] [--backends "B..."] [--events "N..."]
#                  [--timeout S] [--results FILE] [--chart FILE]
#   bench/scale.sh --chart-only     redraw CHART from RESULTS, run nothing
#   env (the same, and more): QUERIES (q4 q9 q18 q20), BACKENDS (table rocksdb
#   memory rocksdb-direct), EVENTS (2M 20M 100M; K, M and G suffixes),
#   DIRECT_MAX (20M: rocksdb-direct runs ~50K events/s, so larger runs of it
#   are skipped), TIMEOUT (3600 s per run), WORKERS (1), CKPT (checkpoint
#   interval ms; sfs's default 1000), SAMPLE (5 s), DATA_ROOT (/tmp: where the
#   data directories go), MIN_FREE_GB (10: a run starts only with that much
#   free there), RESULTS (bench/scale-results.jsonl), CHART (bench/scale.png)
#
#   e.g. QUERIES="q20" BACKENDS=table EVENTS="2000000 20000000" bench/scale.sh
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
QUERIES=${QUERIES:-q4 q9 q18 q20}
BACKENDS=${BACKENDS:-table rocksdb memory rocksdb-direct}
EVENTS=${EVENTS:-2M 20M 100M}
DIRECT_MAX=${DIRECT_MAX:-20M}
TIMEOUT=${TIMEOUT:-3600}
WORKERS=${WORKERS:-1}
CKPT=${CKPT:-}
SAMPLE=${SAMPLE:-5}
DATA_ROOT=${DATA_ROOT:-/tmp}
MIN_FREE_GB=${MIN_FREE_GB:-10}
RESULTS=${RESULTS:-bench/scale-results.jsonl}
CHART=${CHART:-bench/scale.png}
CHART_ONLY=0

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--queries) QUERIES=$2; shift 2 ;;
	--backends) BACKENDS=$2; shift 2 ;;
	--events) EVENTS=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--results) RESULTS=$2; shift 2 ;;
	--chart) CHART=$2; shift 2 ;;
	--chart-only) CHART_ONLY=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "scale.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

# 2M -> 2000000 (K, M, G: powers of 1000, as the issue counts events)
num() {
	case $1 in
	*[kK]) echo $((${1%?} * 1000)) ;;
	*[mM]) echo $((${1%?} * 1000000)) ;;
	*[gG]) echo $((${1%?} * 1000000000)) ;;
	*) echo $(($1)) ;;
	esac
}
direct_max=$(num "$DIRECT_MAX")
[ -x "$SFS" ] || { echo "scale.sh: no $SFS (make first, or set SFS_BIN)" >&2; exit 2; }
mkdir -p "$(dirname "$RESULTS")" "$DATA_ROOT"
WORK=$(mktemp -d)
pid=""
cleanup() {
	# the run in flight: timeout passes the TERM on to sfs, which stops its group
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$WORK" "$DATA_ROOT/sfs-scale-$$"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The figures of one run, from its summary and the script's measures, as
# one JSON line (python3: record), and the tables and chart (report, chart).
PY=$(cat <<'PY'
import json, os, sys, time
mode = sys.argv[1]
ROLES = ("worker", "compactor", "checkpointer", "supervisor")
if mode == "record":
    (out, summary, err, rc, q, b, n, wall, peak, live, ckpt, total, load, free, cmd) = sys.argv[2:17]
    rec = {"bench": "scale", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "query": q,
           "backend": b, "events_requested": int(n), "exit": int(rc), "wall_s": float(wall),
           "load_before": load, "disk_free_before_bytes": int(free), "command": cmd}
    try:
        s = json.loads(open(summary).read().strip().splitlines()[-1])
    except (ValueError, IndexError, OSError):
        s = None
    ok = s is not None and s.get("ok") is True and int(rc) == 0
    if s:
        rec.update(s)
    rec["ok"] = ok
    if not ok:
        lines = [l for l in open(err, errors="replace").read().splitlines() if not l.startswith("  ")]
        if int(rc) in (124, 137):   # timeout's TERM (sfs stops its group) or KILL
            done = f", {s['events']} of {n} events done" if s else ""
            rec["error"] = f"timeout after {float(wall):.0f} s{done}"
        else:
            rec["error"] = f"exit {rc}: " + " | ".join(lines[-4:])
    rec["data_peak_bytes"] = int(peak)      # the data directory, sampled while it ran
    rec["live_state_bytes"] = int(live)     # store directories at the end, no checkpoints
    rec["checkpoint_own_bytes"] = int(ckpt) # checkpoints/ less what they share with the store
    rec["data_end_bytes"] = int(total)
    if s and s.get("events") and s.get("seconds"):
        ev = s["events"]
        rec["stall_share"] = s["stall_ms"] / (s["seconds"] * 1000)
        rec["cpu_s_per_mev_by_role"] = {r: s["cpu_ms_by_role"][r] / 1e3 / (ev / 1e6) for r in ROLES}
        rec["disk_write_bytes_per_event_by_role"] = {
            r: s["disk_write_bytes_by_role"][r] / ev for r in ROLES}
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    sys.exit(0)

def mb(x): return f"{x / 2**20:.0f}" if x is not None else "-"
def load(path):
    recs = []
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("bench") == "scale":
            recs.append(r)
    return recs

if mode == "report":
    recs = load(sys.argv[2])
    print("\n# throughput and cost (CPU s per million events; disk bytes written per event)")
    print(f"{'query':5} {'backend':14} {'events':>10} {'events/s':>9} {'stall':>6} "
          f"{'cpu w':>6} {'cpu c':>6} {'cpu k':>6} {'cpu s':>6} {'B/ev w':>7} {'B/ev c':>7} "
          f"{'B/ev k':>7} {'w-amp':>6} {'ckpt med':>9} {'ckpt max':>9}")
    for r in recs:
        if not r["ok"]:
            print(f"{r['query']:5} {r['backend']:14} {r['events_requested']:>10} FAILED: "
                  f"{r.get('error', '')[:150]}")
            continue
        c, d = r["cpu_s_per_mev_by_role"], r["disk_write_bytes_per_event_by_role"]
        wa = r.get("write_amp")
        med, mx = r.get("checkpoint_median_ms"), r.get("checkpoint_max_ms")
        print(f"{r['query']:5} {r['backend']:14} {r['events']:>10} {r['events_per_sec']:>9.0f} "
              f"{100 * r['stall_share']:>5.1f}% {c['worker']:>6.2f} {c['compactor']:>6.2f} "
              f"{c['checkpointer']:>6.2f} {c['supervisor']:>6.2f} {d['worker']:>7.1f} "
              f"{d['compactor']:>7.1f} {d['checkpointer']:>7.1f} "
              f"{'-' if wa is None else f'{wa:.2f}':>6} "
              f"{'-' if med is None else f'{med:.0f}':>9} {'-' if mx is None else f'{mx:.0f}':>9}")
    print("\n# what a run needs (MiB): peak RSS by role, shared memory touched, disk")
    print(f"{'query':5} {'backend':14} {'events':>10} {'rss w':>6} {'rss c':>6} {'rss k':>6} "
          f"{'shm':>6} {'live':>7} {'ckpts':>7} {'peak disk':>9} {'wall s':>7}")
    for r in recs:
        if not r.get("peak_rss_kb_by_role"):
            continue
        p = r["peak_rss_kb_by_role"]
        print(f"{r['query']:5} {r['backend']:14} {r['events_requested']:>10} "
              f"{p['worker'] / 1024:>6.0f} {p['compactor'] / 1024:>6.0f} "
              f"{p['checkpointer'] / 1024:>6.0f} {mb(r.get('shm_bytes')):>6} "
              f"{mb(r['live_state_bytes']):>7} {mb(r['checkpoint_own_bytes']):>7} "
              f"{mb(r['data_peak_bytes']):>9} {r['wall_s']:>7.0f}")
    sys.exit(0)

if mode == "chart":
    recs, work, png = load(sys.argv[2]), sys.argv[3], sys.argv[4]
    newest = {}
    for r in recs:
        if r["ok"]:
            newest[(r["query"], r["backend"], r["events"])] = r
    if not newest:
        print("# chart: no successful run in the results"); sys.exit(0)
    qs = sorted({k[0] for k in newest}, key=lambda q: int(q[1:]))
    bs = [b for b in ("table", "rocksdb", "memory", "rocksdb-direct")
          if any(k[1] == b for k in newest)]
    bs += sorted({k[1] for k in newest} - set(bs))
    for q in qs:
        for b in bs:
            with open(f"{work}/tp-{q}-{b}.dat", "w") as f:
                for k in sorted(k for k in newest if k[0] == q and k[1] == b):
                    f.write(f"{k[2]} {newest[k]['events_per_sec']}\n")
    with open(f"{work}/cpu.dat", "w") as f:
        for k in sorted(newest, key=lambda k: (int(k[0][1:]), bs.index(k[1]), k[2])):
            c = newest[k]["cpu_s_per_mev_by_role"]
            n = k[2]
            size = f"{n // 10**6}M" if n % 10**6 == 0 else f"{n // 1000}K"
            f.write(f"{k[0]}/{k[1]}/{size} " + " ".join(f"{c[r]:.4f}" for r in ROLES) + "\n")
    cols = len(qs)
    g = [f'set terminal pngcairo size {max(1000, 380 * cols)},900 noenhanced font ",9"',
         f'set output "{png}"',
         'set multiplot title "sfs scale (issue 18): the newest run of each query, backend and size"',
         "set lmargin 10"]
    w = 1.0 / cols
    lo, hi = min(k[2] for k in newest), max(k[2] for k in newest)
    for i, q in enumerate(qs):
        g += [f"set origin {i * w},0.5", f"set size {w},0.47",
              "set logscale x", "set logscale y", "set grid", "set key bottom left",
              f"set xrange [{lo / 2}:{hi * 2}]", "set format y '%.0s%c'",
              f'set title "{q}: events/s against events (1 worker)"',
              'set xlabel "events"', 'set ylabel "events/s"', "set format x '%.0s%c'"]
        plots = [f'"{work}/tp-{q}-{b}.dat" using 1:2 with linespoints lw 2 title "{b}"'
                 for b in bs if os.path.getsize(f"{work}/tp-{q}-{b}.dat")]
        g.append("plot " + ", ".join(plots))
    g += ["unset logscale x", "unset logscale y", "set format x '%g'", "set format y '%g'",
          "set autoscale x",
          "set origin 0,0", "set size 1,0.5", "set style data histograms",
          "set style histogram rowstacked", "set style fill solid 0.8 border -1",
          "set boxwidth 0.75", "set xtics rotate by -40 left", "unset xlabel",
          'set ylabel "CPU s per million events"', "set key top left",
          'set title "CPU seconds per million events by role (stacked)"',
          f'plot "{work}/cpu.dat" using 2:xtic(1) title "worker", '
          "'' using 3 title \"compactor\", '' using 4 title \"checkpointer\", "
          "'' using 5 title \"supervisor\"",
          "unset multiplot"]
    open(f"{work}/chart.gp", "w").write("\n".join(g) + "\n")
    sys.exit(0)
PY
)

# du in bytes of what exists among its arguments (0 for none)
du_b() {
	local have=() p
	for p in "$@"; do [ -e "$p" ] && have+=("$p"); done
	[ ${#have[@]} -eq 0 ] && { echo 0; return; }
	du -scb "${have[@]}" 2>/dev/null | tail -n 1 | cut -f1
}

chart() {
	if command -v gnuplot >/dev/null; then
		python3 -c "$PY" chart "$RESULTS" "$WORK" "$CHART" &&
			[ -s "$WORK/chart.gp" ] && gnuplot "$WORK/chart.gp" 2>"$WORK/gp.err" &&
			echo "# chart: $CHART (from every run in $RESULTS)"
		grep -v '^Warning: empty . range' "$WORK/gp.err" 2>/dev/null
	else
		echo "# chart: no gnuplot (scripts/deps.sh installs gnuplot-nox)"
	fi
	return 0
}
if [ "$CHART_ONLY" = 1 ]; then
	chart
	exit 0
fi

echo "# scale bench: queries $QUERIES; backends $BACKENDS; events $EVENTS" \
     "(rocksdb-direct up to $DIRECT_MAX); $WORKERS worker(s); timeout $TIMEOUT s per run;" \
     "$(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); data under $DATA_ROOT;" \
     "results appended to $RESULTS"
i=0
for q in $QUERIES; do
	for b in $BACKENDS; do
		for ev in $EVENTS; do
			n=$(num "$ev")
			if [ "$b" = rocksdb-direct ] && [ "$n" -gt "$direct_max" ]; then
				echo "== $q $b $n: skipped (rocksdb-direct only up to $DIRECT_MAX events)"
				continue
			fi
			i=$((i + 1))
			job=scale-$$-$i
			data=$DATA_ROOT/sfs-scale-$$/$q-$b-$n
			free=$(df -PB1 "$DATA_ROOT" | awk 'NR == 2 { print $4 }')
			if [ "$free" -lt $((MIN_FREE_GB * 1000000000)) ]; then
				echo "== $q $b $n: skipped, only $((free / 1000000000)) GB free under" \
				     "$DATA_ROOT (MIN_FREE_GB=$MIN_FREE_GB)"
				continue
			fi
			rm -rf "$data"
			mkdir -p "$data"
			load=$(cut -d' ' -f1-3 /proc/loadavg)
			set -- "$SFS" run --job "$job" --query "$q" --backend "$b" --events "$n" \
				--workers "$WORKERS" --json --data "$data"
			[ -n "$CKPT" ] && set -- "$@" --checkpoint-interval "$CKPT"
			cmd="$*"
			echo "== $q $b $n events (load $load, $((free / 1000000000)) GB free): $cmd"
			t0=$(date +%s.%N)
			timeout -k 60 "$TIMEOUT" "$@" >"$WORK/run.json" 2>"$WORK/run.err" &
			pid=$!
			peak=0
			while kill -0 "$pid" 2>/dev/null; do
				s=$(du -sb "$data" 2>/dev/null | cut -f1)
				[ -n "$s" ] && [ "$s" -gt "$peak" ] && peak=$s
				for _ in $(seq $((SAMPLE * 5))); do
					kill -0 "$pid" 2>/dev/null || break
					sleep 0.2
				done
			done
			wait "$pid"
			rc=$?
			pid=""
			wall=$(awk "BEGIN { print $(date +%s.%N) - $t0 }")
			# a run killed by the timeout may leave its segment: sfs clean removes it
			"$SFS" clean --job "$job" >/dev/null 2>&1
			live=$(du_b "$data"/sfs-table.* "$data"/sfs-rocksdb.* "$data"/rocksdb-direct)
			total=$(du_b "$data")
			[ "$total" -gt "$peak" ] && peak=$total
			# checkpoints' own bytes: what the whole directory holds beyond the
			# store and the rest (du counts a hard-linked file once)
			rest=$(du_b "$data"/sfs-table.* "$data"/sfs-rocksdb.* "$data"/rocksdb-direct \
				"$data"/stage "$data"/sink)
			ckpt=$((total - rest))
			[ "$ckpt" -lt 0 ] && ckpt=0
			python3 -c "$PY" record "$RESULTS" "$WORK/run.json" "$WORK/run.err" "$rc" "$q" "$b" \
				"$n" "$wall" "$peak" "$live" "$ckpt" "$total" "$load" "$free" "$cmd"
			tail -n 1 "$RESULTS" >>"$WORK/these.jsonl"
			python3 - "$RESULTS" <<'P2'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
if not r["ok"]:
    print(f"   FAILED ({r.get('error', '')})")
else:
    c = r["cpu_s_per_mev_by_role"]; p = r["peak_rss_kb_by_role"]
    print(f"   {r['events_per_sec']:.0f} events/s, stall {100 * r['stall_share']:.1f} %, CPU s/M events "
          + " ".join(f"{k} {c[r]:.2f}" for k, r in zip("wcks", c))
          + f", write_amp {r['write_amp']}, needs: peak disk {r['data_peak_bytes'] / 2**20:.0f} MiB"
          f" (live state {r['live_state_bytes'] / 2**20:.0f}), RSS MiB w {p['worker'] / 1024:.0f}"
          f" c {p['compactor'] / 1024:.0f} k {p['checkpointer'] / 1024:.0f},"
          f" shm {r['shm_bytes'] / 2**20:.0f} MiB, {r['wall_s']:.0f} s")
P2
			rm -rf "$data"
		done
	done
done
rmdir "$DATA_ROOT/sfs-scale-$$" 2>/dev/null

[ -s "$WORK/these.jsonl" ] && python3 -c "$PY" report "$WORK/these.jsonl"
chart
