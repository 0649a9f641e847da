#!/usr/bin/env bash
# e2e_powerloss.sh — power loss at each durability point of a checkpoint
# commit and of a table commit (SQLite's crash test: what no fsync made
# durable is gone).
#
# Each case runs a query job with the power-loss shim preloaded into every
# process (tests/powerloss/shim.c: fsync/fdatasync of a file records its
# content, of a directory its entries) and one fault rule armed,
# SFS_FAULT=POINT:N:powerloss: at the N-th hit of POINT the process that
# hits it SIGKILLs the whole group (common/fault.c), supervisor included.
# Then the data directory is replaced by its durable image
# (tests/powerloss/restore.c: unsynced files and directory entries gone,
# files with the content of their last fsync) and /dev/shm's segments are
# dropped (RAM).  Then:
#  - every checkpoint `sfs checkpoints` lists as valid must export;
#  - `sfs run --restore latest`, same job, no fault, must exit 0 with an
#    --output equal to an uninterrupted run's (when no checkpoint survived,
#    it must say so with exit 2, and a fresh run in the same directory must
#    give that result).
# TAP-style lines.  A case is BACKEND:POINT:N[:QUERY] (QUERY default
# $SFS_POWERLOSS_QUERY, q18: its result is written epoch by epoch, so the
# sink's pre-commits are tested with the checkpoints).  A point not reached
# at hit N (the run ended first: timing on a loaded machine) is tried again
# at N/2, down to 1, then once at half the rate.  The short form (make
# test) covers the checkpoint commit on the table and rocksdb backends, the
# table commit's main points and a power loss before the first checkpoint;
# SFS_SOAK=1 (make soak) adds the other points, later hits, q4, q17 and
# the memory and rocksdb-direct backends.  SFS_POWERLOSS_CASES="..." picks
# cases by hand; SFS_POWERLOSS_KEEP=DIR keeps a failed case's image there.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
BUILD=${BUILD:-build}
SHIM=$(realpath "$BUILD/tests/libsfs_powerloss.so" 2>/dev/null)
RESTORE=$(realpath "$BUILD/tests/powerloss_restore" 2>/dev/null)
EVENTS=${SFS_POWERLOSS_EVENTS:-200000}
RATE=${SFS_POWERLOSS_RATE:-80000}   # --max-rate of the powered runs: ~2.5 s each
QUERY=${SFS_POWERLOSS_QUERY:-q18}
WORKERS=${SFS_POWERLOSS_WORKERS:-2}
# ck.*: the checkpointer's commit (the 3rd checkpoint: others exist);
# ck.retention: the first removal (the 2nd commit: these powered runs keep 1);
# table.*: the table target's commit steps in the compactor; layout.*: its
# metadata and data file writes (not fsynced there: durability comes from
# the checkpoints).
SHORT="table:ck.commit.linked:3 table:ck.commit.meta-tmp:3 table:ck.commit.renamed:3
table:ck.retention:1 rocksdb:ck.commit.meta-tmp:3 rocksdb:ck.commit.renamed:3
rocksdb:ck.retention:1 table:table.datafile:15 table:table.datacommit:15
table:table.round:8 table:ck.commit.linked:1"
# (table.roundfile needs a round that rewrites, rocksdb.flush a buffer flushed
# between barriers: neither happens in these runs.)
SOAK="$SHORT rocksdb:ck.commit.linked:3 table:layout.file.rename:50
table:table.mergefile:1 table:table.merge:1
table:layout.file.link:15 table:layout.df.rename:8 table:ck.commit.meta-tmp:1
rocksdb:ck.commit.meta-tmp:1 rocksdb:rocksdb.ingest:2
table:ck.commit.linked:5 table:ck.commit.meta-tmp:5 table:ck.commit.renamed:5
table:ck.retention:3 rocksdb:ck.commit.renamed:4 table:table.datacommit:12
table:table.round:12 memory:ck.commit.meta-tmp:3 memory:ck.commit.renamed:3
rocksdb-direct:ck.commit.meta-tmp:3 rocksdb-direct:ck.commit.renamed:3
table:ck.commit.meta-tmp:3:q4 rocksdb:ck.commit.renamed:3:q4 table:table.round:8:q4
table:ck.commit.renamed:3:q17 rocksdb:ck.commit.meta-tmp:3:q17"
CASES=${SFS_POWERLOSS_CASES:-$SHORT}
[ -n "${SFS_SOAK:-}" ] && CASES=${SFS_POWERLOSS_CASES:-$SOAK}
# A sanitized build: the shim is not the first library (it carries no ASan).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
OUT=$(mktemp -d)
JOB=e2e-pl-$$
fails=0
differences=0

ok()   { echo "ok - $*"; }
nok()  { echo "not ok - $*"; fails=$((fails + 1)); }
note() { echo "# $*"; }

cleanup() {
	pkill -9 -f -- "--job $JOB" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs.$JOB*
	rm -rf "$OUT"
}
trap cleanup EXIT

if [ ! -f "$SHIM" ] || [ ! -x "$RESTORE" ]; then
	nok "the power-loss tools are not built ($BUILD/tests/libsfs_powerloss.so, powerloss_restore: make test builds them)"
	exit 1
fi

run() { # data output [options]: one `sfs run` of the job (query $Q)
	local data=$1 out=$2
	shift 2
	timeout 300 "$SFS" run --job "$JOB" --query "$Q" --events "$EVENTS" --workers "$WORKERS" \
		--checkpoint-interval 50 --data "$data" --output "$out" --json "$@"
}

gone() { # wait up to 5 s for every process of the job to be gone
	for ((t = 0; t < 100; t++)); do
		pgrep -f -- "--job $JOB " >/dev/null || return 0
		sleep 0.05
	done
	return 1
}

powered() { # root backend point hit: the group with the shim, until the power
	# loss; prints its exit status.  --retain 2 (retention from the 3rd
	# commit), 1 for ck.retention (from the 2nd: a slow first checkpoint
	# leaves few in 2.5 s).
	local root=$1 b=$2 point=$3 hit=$4 retain=2
	[ "$point" = ck.retention ] && retain=1
	rm -rf "$root"
	mkdir -p "$root/data"
	# the disk as formatted: the root and the empty data directory durable
	SFS_POWERLOSS_DIR=$root LD_PRELOAD=$SHIM sync "$root" "$root/data"
	# the group in its own session: the power loss kills it all, not us
	SFS_POWERLOSS_DIR=$root LD_PRELOAD=$SHIM SFS_FAULT="$point:$hit:powerloss" \
		timeout -s KILL 120 setsid -w "$SFS" run --job "$JOB" --query "$Q" --events "$EVENTS" \
		--workers "$WORKERS" --checkpoint-interval 50 --data "$root/data" --retain $retain \
		--output "$OUT/pl.csv" --json --backend "$b" --max-rate "$rate" \
		>/dev/null 2>"$OUT/pl.err"
	echo $?
}

keep() { # the failed case's image, logs and results, for a look
	[ -n "${SFS_POWERLOSS_KEEP:-}" ] || return 0
	mkdir -p "$SFS_POWERLOSS_KEEP/pl-$n" && cp -a "$OUT/img" "$OUT/pl.err" "$OUT/r.err" \
		"$OUT/r.csv" "${base[$b-$Q]}" "$SFS_POWERLOSS_KEEP/pl-$n/" &&
		note "kept in $SFS_POWERLOSS_KEEP/pl-$n"
}

declare -A base
start=$(date +%s)
n=0
for c in $CASES; do
	IFS=: read -r b point hit Q <<<"$c"
	Q=${Q:-$QUERY}
	n=$((n + 1))
	if [ -z "${base[$b-$Q]:-}" ]; then
		if ! run "$OUT/base-$b" "$OUT/base-$b-$Q.csv" --backend "$b" >/dev/null 2>"$OUT/base.err"; then
			nok "$Q on $b: uninterrupted run failed"; tail -n 5 "$OUT/base.err" | sed 's/^/# /'
			continue
		fi
		base[$b-$Q]=$OUT/base-$b-$Q.csv
		rm -rf "$OUT/base-$b"
	fi
	root=$OUT/pl-$n
	data=$root/data
	rate=$RATE
	rc=$(powered "$root" "$b" "$point" "$hit")	# in $(): its "Killed" is not ours to print
	for ((try = 0; try < 4; try++)); do
		[ ! -f "$root/.powerloss" ] || break
		# the run ended first: the point sooner, or a slower run once at hit 1
		if [ "$hit" -gt 1 ]; then
			hit=$((hit / 2))
		elif [ "$rate" -eq "$RATE" ]; then
			rate=$((RATE / 2))
		else
			break
		fi
		note "$point on $b: not reached (exit $rc); again at hit $hit, --max-rate $rate"
		rc=$(powered "$root" "$b" "$point" "$hit")
	done
	name="power loss at $point (hit $hit) on $b, $Q"
	if [ ! -f "$root/.powerloss" ]; then
		nok "$name: the point was not reached (exit $rc)"
		grep -v '^  ' "$OUT/pl.err" | tail -n 3 | sed 's/^/# /'
		rm -rf "$root"; continue
	fi
	where=$(head -n 1 "$root/.powerloss")
	if ! gone; then
		nok "$name: processes of the group survived the power loss"
		pkill -9 -f -- "--job $JOB " 2>/dev/null; gone
		rm -rf "$root"; continue
	fi
	rm -f /dev/shm/sfs.$JOB*	# RAM is gone too
	if ! img=$("$RESTORE" "$root" 2>&1); then
		nok "$name: restore of the durable image: $img"; rm -rf "$root"; continue
	fi
	# SFS_POWERLOSS_KEEP=DIR: the image of a failed case is kept there
	[ -n "${SFS_POWERLOSS_KEEP:-}" ] && rm -rf "$OUT/img" && cp -a "$root" "$OUT/img"
	# every checkpoint listed as valid must be readable
	ids=$("$SFS" checkpoints --data "$data" --json 2>"$OUT/ck.err" |
		grep -o '"id": [0-9]*, "valid": true' | grep -o '[0-9]*' | tr '\n' ' ')
	nall=$("$SFS" checkpoints --data "$data" --json 2>/dev/null | grep -o '"id": ' | wc -l)
	bad=
	for id in $ids; do
		# inspect: every file against its checksum; export: the state read
		# (a rocksdb-direct checkpoint has no state registry to read it by)
		"$SFS" inspect "$data/checkpoints/chk-$id" >/dev/null 2>"$OUT/exp.err" ||
			bad="$bad chk-$id($(tail -n 1 "$OUT/exp.err"))"
		[ "$b" = rocksdb-direct ] ||
			"$SFS" export --checkpoint "$data/checkpoints/chk-$id" --out "$OUT/exp.csv" \
				>/dev/null 2>"$OUT/exp.err" || bad="$bad chk-$id($(tail -n 1 "$OUT/exp.err"))"
	done
	if [ -n "$bad" ]; then
		nok "$name: listed as valid but not readable:$bad"
	fi
	nvalid=$(echo $ids | wc -w)
	run "$data" "$OUT/r.csv" --backend "$b" --restore latest >/dev/null 2>"$OUT/r.err"
	rc=$?
	how="--restore latest from chk-$(echo $ids | awk '{print $1}')"
	if [ "$nvalid" -eq 0 ]; then
		# nothing to restore: it must say so, and a fresh start must work
		if [ $rc -ne 2 ] || ! grep -q "no valid checkpoint" "$OUT/r.err"; then
			nok "$name: no valid checkpoint, but --restore latest exit $rc"
			grep -v '^  ' "$OUT/r.err" | tail -n 3 | sed 's/^/# /'
			rm -rf "$root"; continue
		fi
		pkill -9 -f -- "--job $JOB " 2>/dev/null; gone
		rm -f /dev/shm/sfs.$JOB*
		run "$data" "$OUT/r.csv" --backend "$b" >/dev/null 2>"$OUT/r.err"
		rc=$?
		how="no valid checkpoint (said so), a fresh run"
	fi
	if [ $rc -ne 0 ]; then
		nok "$name: $how: exit $rc"
		grep -v '^  ' "$OUT/r.err" | tail -n 5 | sed 's/^/# /'
		keep
	elif ! cmp -s "${base[$b-$Q]}" "$OUT/r.csv"; then
		differences=$((differences + 1))
		nok "$name: $how: result differs ($(wc -l <"${base[$b-$Q]}") vs $(wc -l <"$OUT/r.csv") lines)"
		diff "${base[$b-$Q]}" "$OUT/r.csv" | head -n 6 | sed 's/^/# /'
		keep
	elif [ -z "$bad" ]; then
		ok "$name (in pid ${where%% *}): image of ${img#restored $root: }; $nvalid of $nall checkpoints valid and readable; $how equals the uninterrupted run"
	fi
	pkill -9 -f -- "--job $JOB " 2>/dev/null
	rm -f /dev/shm/sfs.$JOB*
	rm -rf "$root"
done
note "$n power losses in $(($(date +%s) - start)) s"
# what make soak sums (scripts/run-tests.sh)
note "counts: powerloss=$n differences=$differences"

# What one power loss found (runtime/engine.c, seal): a checkpoint sealed
# after a worker's source ended recorded that worker's split at block 0.
# Directly (soak only: such a checkpoint falls in the few ms between the
# workers' ends, about one run in ten): restore from a retained checkpoint
# where one split is read to its end and another is not; the result must
# be the uninterrupted run's.
Q=q4 b=rocksdb
data=$OUT/ended
pick=
if [ -n "${SFS_SOAK:-}" ] && { [ -n "${base[$b-$Q]:-}" ] ||
	{ run "$OUT/base-$b" "$OUT/base-$b-$Q.csv" --backend $b >/dev/null 2>&1 &&
	  base[$b-$Q]=$OUT/base-$b-$Q.csv; }; }; then
	blocks=$((EVENTS / 1000))
	for ((try = 0; try < 30 && !${#pick}; try++)); do
		rm -rf "$data"
		run "$data" "$OUT/e.csv" --backend $b --max-rate "$RATE" --retain 50 >/dev/null 2>&1
		declare -A last=()
		for c in $(ls -d "$data"/checkpoints/chk-* 2>/dev/null | sort -t- -k2 -n); do
			ended=0 open=0
			for h in $(grep -a '^source ' "$c/_metadata" | awk '{print $4}'); do
				o=$(printf '%b' "$(sed 's/../\\x&/g' <<<"$h")")	# "split:block"
				sp=${o%%:*} blk=${o#*:}
				# ended, or gone back (the bug's mark: block 0 after the end)
				if [ "$blk" -ge "$blocks" ] || [ "$blk" -lt "${last[$sp]:-0}" ]; then
					ended=$((ended + 1))
				else
					open=$((open + 1))
				fi
				last[$sp]=$blk
			done
			[ $ended -gt 0 ] && [ $open -gt 0 ] && pick=$c && break
		done
		unset last
	done
	if [ -z "$pick" ]; then
		note "no checkpoint between the workers' ends in $try runs: skipped"
	elif run "$data" "$OUT/e.csv" --backend $b --restore "$pick" >/dev/null 2>"$OUT/e.err" &&
		cmp -s "${base[$b-$Q]}" "$OUT/e.csv"; then
		ok "restore from ${pick##*/}, taken after one worker's end of input ($b, $Q, found in $try runs): equals the uninterrupted run"
	else
		nok "restore from ${pick##*/}, taken after one worker's end of input ($b, $Q): result differs or failed"
		grep -v '^  ' "$OUT/e.err" | tail -n 4 | sed 's/^/# /'
	fi
fi
[ "$fails" -eq 0 ] && echo "# all power-loss checks passed" || echo "# $fails power-loss checks failed"
exit $((fails > 0))
