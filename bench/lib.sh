# bench/lib.sh — what the benchmark scripts that run `sfs run` groups share
# (sourced by bench/ttl.sh and bench/recovery.sh): a raw-output directory
# per invocation and a trap that stops the group in flight and removes its
# data directory, so an interrupted benchmark leaves nothing running or on disk.
# Needs SFS, JOB and OUT set; the caller keeps the group's pid in $pid and
# its data directory in $data while a run is going.

# bench_raw NAME: $RAW = $OUT/<stamp>, $THESE = $RAW/NAME (empty): this
# invocation's raw files and its JSON lines.
bench_raw() {
	mkdir -p "$OUT" "$(dirname "$RESULTS")"
	STAMP=$(date +%Y%m%d-%H%M%S)
	RAW=$OUT/$STAMP
	mkdir -p "$RAW"
	THESE=$RAW/$1
	: >"$THESE"
}

pid=""
data=""
bench_cleanup() {
	# the run in flight: timeout passes the TERM on to sfs, which stops its group
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		"$SFS" clean --job "$JOB" >/dev/null 2>&1
	fi
	[ -n "$data" ] && rm -rf "$data"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
