#!/usr/bin/env bash
# checkpoint.sh — checkpoint cost versus state size (the checkpointer issue).
#
# q18 (dedup: one state row per bidder and auction) over a stream that
# doubles each step, so the state doubles too; checkpoints every CKPT ms.
# Per step, from `sfs run --json` and the checkpointer's log:
#   - the worker's time inside a barrier (seal, sink epoch, snapshot): mean
#     and max per barrier — must stay flat as the state grows;
#   - checkpoint duration (barrier request to durable _metadata), median;
#   - files linked (or copied) and referenced per checkpoint — linked must
#     track the new files, not the live ones;
#   - the size of the last checkpoint.
# Then restore time of the largest state: adopt (same --workers) against
# rescale (another --workers), from the supervisor's "restored ... in" line.
#
# Usage: [SFS_BIN=dir] [BACKEND=rocksdb-direct] [CKPT=200] [STEPS="250000 ..."]
#        [MAINT=all|spare] bash bench/checkpoint.sh
# MAINT: sfs run --maintenance-cpus (spare: compactor and checkpointer off the
# worker's core).
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
BACKEND=${BACKEND:-rocksdb-direct}
CKPT=${CKPT:-200}
STEPS=${STEPS:-250000 500000 1000000 2000000 4000000}
MAINT=${MAINT:-all}
OUT=$(mktemp -d)
trap 'pkill -9 -f -- "--job bench-ck-$$" 2>/dev/null; rm -rf "$OUT" /dev/shm/sfs.bench-ck-$$*' EXIT

field() { grep -o "\"$1\": [0-9.]*" "$2" | head -n 1 | awk '{print $2}'; }
median() { sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : 0}'; }

echo "# $(date -u +%FT%TZ) backend $BACKEND, q18, 1 worker, checkpoint every $CKPT ms, maintenance cpus $MAINT; uptime:$(uptime | sed 's/.*load/ load/')"
printf '%-9s %9s %9s %10s %10s %10s %10s %9s %9s %8s %8s %10s\n' events ckpts "ev/s" "bar_mean" "bar_cpu" "bar_max" \
	"stall" "ck_med" "ck_max" "linked" "refs" "last_MB"
last=""
for ev in $STEPS; do
	data=$OUT/d-$ev
	"$SFS" run --job bench-ck-$$ --query q18 --events "$ev" --workers 1 --backend "$BACKEND" \
		--checkpoint-interval "$CKPT" --data "$data" --maintenance-cpus "$MAINT" --json >"$OUT/run.json" 2>"$OUT/run.err" ||
		{ echo "run of $ev events failed"; tail -n 5 "$OUT/run.err"; exit 1; }
	n=$(field checkpoints_completed "$OUT/run.json")
	bars=$(field checkpoints "$OUT/run.json")
	bms=$(field barrier_ms "$OUT/run.json")
	bcpu=$(field barrier_cpu_ms "$OUT/run.json")
	bmax=$(field barrier_max_ms "$OUT/run.json")
	stall=$(field stall_ms "$OUT/run.json")
	eps=$(field events_per_sec "$OUT/run.json")
	links=$(field checkpoint_files_linked "$OUT/run.json")
	refs=$(field checkpoint_files_referenced "$OUT/run.json")
	ckmed=$(sed -n 's/.*complete in \([0-9.]*\) ms.*/\1/p' "$OUT/run.err" | median)
	ckmax=$(sed -n 's/.*complete in \([0-9.]*\) ms.*/\1/p' "$OUT/run.err" | sort -n | tail -n 1)
	lastdir=$(ls -d "$data"/checkpoints/chk-* | awk -F"chk-" "{print \$NF, \$0}" | sort -n | tail -n 1 | cut -d" " -f2-)
	mb=$(awk '/^total_bytes /{printf "%.1f", $2 / 1048576}' "$lastdir/_metadata" 2>/dev/null)
	printf '%-9s %9s %9s %10.3f %10.3f %10.3f %10.3f %9s %9s %8.1f %8.1f %10s' "$ev" "$n" "$eps" \
		"$(awk -v a="$bms" -v b="$bars" 'BEGIN {print b ? a / b : 0}')" \
		"$(awk -v a="$bcpu" -v b="$bars" 'BEGIN {print b ? a / b : 0}')" "$bmax" \
		"$(awk -v a="$stall" -v b="$bars" 'BEGIN {print b ? a / b : 0}')" "${ckmed:-0}" \
		"${ckmax:-0}" "$(awk -v a="$links" -v b="$n" 'BEGIN {print b ? a / b : 0}')" \
		"$(awk -v a="$refs" -v b="$n" 'BEGIN {print b ? a / b : 0}')" "${mb:-?}"
	# the table target's synchronous work per committed buffer (mean, max) and live files
	[ "$BACKEND" = table ] && printf '  commit %s/%s ms, one table max %s ms, %s files' \
		"$(field table_commit_ms "$OUT/run.json")" "$(field table_commit_max_ms "$OUT/run.json")" \
		"$(field table_sync_max_ms "$OUT/run.json")" "$(field table_files "$OUT/run.json")"
	echo
	last=$data
done
echo "# bar_*: ms a worker spends inside one barrier, wall time (bar_cpu: its CPU time; stall: of which waiting for a free buffer,"
echo "# i.e. back-pressure from the flush target); ck_*: ms from barrier request to"
echo "# durable _metadata; linked/refs: files per checkpoint; last_MB: bytes the last checkpoint references"

# Restore the largest state: adopt (1 worker) vs rescale (2 workers).
for w in 1 2 1 2 1 2; do
	"$SFS" run --job bench-ck-$$ --query q18 --events "${STEPS##* }" --workers "$w" \
		--backend "$BACKEND" --checkpoint-interval 0 --data "$last" --restore latest \
		--maintenance-cpus "$MAINT" \
		--duration-ms 1 >/dev/null 2>"$OUT/r.err"
	sed -n "s/.*restored .* \([a-z]*\) in \([0-9.]*\) ms/$w \1 \2/p" "$OUT/r.err"
done | awk '{t[$2] = t[$2] " " $3} END {for (k in t) print "restore, " k ":" t[k] " ms"}'
