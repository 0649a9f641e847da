#!/usr/bin/env bash
# e2e_metrics.sh — Prometheus metrics of a running group: `sfs run --query
# q18 --metrics-addr 127.0.0.1:PORT` (throttled, checkpoints every 100 ms)
# is scraped twice with curl; both scrapes pass `promtool check metrics`
# (Debian's prometheus package, installed by scripts/deps.sh; without it a
# strict check of our own below stands in, and says so), every family
# has HELP and TYPE lines before its samples, counters end in _total,
# every counter of the first scrape is in the second and none went back,
# events and checkpoints grew, and the families docs/metrics.md names are
# there.  `sfs stat --prometheus` of the same group passes promtool too and
# has the same families.  The checkers are shown to fail on a doctored
# scrape (a counter going back, a HELP line dropped), so they cannot pass
# by testing nothing.  Bad --metrics-addr values and a port in use: one
# line, exit 2, no segment made.  A client stalled mid-request blocks
# neither another scrape nor the supervisor; a worker killed makes the job
# recover, which /metrics follows (sfs_recoveries_total 1) — the run uses
# --recovery restart, whose new segments the server must follow (a rollback
# in place keeps them).  Then the run stops cleanly.  TAP-style.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
OUT=$(mktemp -d)
JOB=e2e-metrics-$$
fails=0
runpid=

ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }

cleanup() {
	[ -n "$runpid" ] && kill -9 "$runpid" 2>/dev/null
	pkill -9 -f -- "--job $JOB" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs."$JOB"*
	rm -rf "$OUT"
}
trap cleanup EXIT

# A port nobody listens on (bash's /dev/tcp connects when someone does).
free_port() {
	local p
	for p in $(shuf -i 20000-60000 -n 50); do
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
	done
	return 1
}

# The exposition's families: HELP then TYPE before any sample, counters
# named _total and only counters, no sample without its family.
check_families() {
	awk '
	/^# HELP / { help[$3] = 1; next }
	/^# TYPE / {
		if (!($3 in help)) { print "TYPE without HELP before it: " $3; bad = 1 }
		if ($4 != "counter" && $4 != "gauge") { print "unexpected type: " $0; bad = 1 }
		type[$3] = $4; next
	}
	/^#/ || /^$/ { next }
	{
		n = $1; sub(/\{.*/, "", n)
		if (!(n in help) || !(n in type)) { print "sample without HELP/TYPE: " n; bad = 1 }
		if (type[n] == "counter" && n !~ /_total$/) { print "counter not _total: " n; bad = 1 }
		if (type[n] != "counter" && n ~ /_total$/) { print "_total not a counter: " n; bad = 1 }
		if ($NF !~ /^-?[0-9.eE+-]+$/) { print "bad value: " $0; bad = 1 }
		samples++
	}
	END { if (!samples) { print "no samples"; bad = 1 }; exit bad }' "$1"
}

# Every counter series of scrape $1 is in scrape $2 with a value not smaller.
check_counters_grow() {
	awk '
	FNR == NR {
		if ($1 == "#" && $2 == "TYPE" && $4 == "counter") c[$3] = 1
		if ($0 !~ /^#/ && NF) { k = $0; sub(/ [^ ]*$/, "", k); v[k] = $NF }
		next
	}
	$0 !~ /^#/ && NF {
		k = $0; sub(/ [^ ]*$/, "", k); n = k; sub(/\{.*/, "", n)
		if (!(n in c) || !(k in v)) next
		seen[k] = 1
		if ($NF + 0 < v[k] + 0) { print "counter went back: " k " " v[k] " -> " $NF; bad = 1 }
	}
	END {
		for (k in v) { n = k; sub(/\{.*/, "", n); if (n in c) { total++; if (!(k in seen)) { print "counter gone: " k; bad = 1 } } }
		if (!total) { print "no counters"; bad = 1 }
		exit bad
	}' "$1" "$2"
}

# Strict stand-in for promtool when it is missing: the line grammar of the
# text format 0.0.4 (names, labels, quoted values, a float), no family
# declared twice, no series twice.
check_syntax() {
	awk '
	/^# (HELP|TYPE) / {
		if ($3 !~ /^[a-zA-Z_:][a-zA-Z0-9_:]*$/) { print "bad name: " $0; bad = 1 }
		if (($2 SUBSEP $3) in decl) { print "declared twice: " $0; bad = 1 }
		decl[$2, $3] = 1; next
	}
	/^#/ || /^$/ { next }
	!/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*\})? -?([0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|NaN|[+-]Inf)$/ {
		print "bad sample line: " $0; bad = 1
	}
	{ k = $0; sub(/ [^ ]*$/, "", k); if (k in series) { print "series twice: " k; bad = 1 }; series[k] = 1 }
	END { exit bad }' "$1"
}

lint() { # lint FILE: promtool, or our own grammar check
	if command -v promtool >/dev/null; then
		promtool check metrics <"$1"
	else
		check_syntax "$1"
	fi
}
command -v promtool >/dev/null && ok "promtool is installed" ||
	ok "# SKIP promtool missing: the exposition is checked by this script's own grammar"

PORT=$(free_port) || { nok "no free port"; exit 1; }
timeout 120 "$SFS" run --job "$JOB" --query q18 --events 20000000 --max-rate 200000 \
	--workers 2 --checkpoint-interval 100 --data "$OUT/data" --recovery restart \
	--metrics-addr "127.0.0.1:$PORT" >"$OUT/run.out" 2>"$OUT/run.err" &
runpid=$!
for ((t = 0; t < 200; t++)); do
	ls -d "$OUT/data"/checkpoints/chk-* >/dev/null 2>&1 && break
	sleep 0.05
done
URL=http://127.0.0.1:$PORT/metrics
timeout 10 curl -sS -f -m 5 -D "$OUT/headers1" -o "$OUT/scrape1" "$URL"
rc1=$?
sleep 1.5
timeout 10 curl -sS -f -m 5 -o "$OUT/scrape2" "$URL"
rc2=$?
timeout 10 "$SFS" stat --job "$JOB" --prometheus >"$OUT/stat" 2>"$OUT/stat.err"
rcs=$?
code404=$(timeout 10 curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/nope")
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -s "$OUT/scrape1" ] && [ -s "$OUT/scrape2" ] &&
	ok "two scrapes of $URL" || nok "scrapes: curl exit $rc1, $rc2"
grep -qi '^content-type: text/plain; version=0.0.4' "$OUT/headers1" &&
	ok "Content-Type text/plain; version=0.0.4" ||
	nok "Content-Type: $(grep -i content-type "$OUT/headers1")"
[ "$code404" = 404 ] && ok "another path: 404" || nok "another path: $code404"

for f in scrape1 scrape2 stat; do
	if lint "$OUT/$f" >"$OUT/$f.lint" 2>&1; then
		ok "$f passes the format check"
	else
		nok "$f: format check"; head -n 10 "$OUT/$f.lint" | sed 's/^/# /'
	fi
	if check_families "$OUT/$f" >"$OUT/$f.fam" 2>&1; then
		ok "$f: HELP and TYPE for every family, counters are _total"
	else
		nok "$f: families"; head -n 10 "$OUT/$f.fam" | sed 's/^/# /'
	fi
done
[ $rcs -eq 0 ] && ok "sfs stat --prometheus: exit 0" || nok "sfs stat --prometheus: exit $rcs $(cat "$OUT/stat.err")"
families() { grep '^# TYPE ' "$1" | awk '{print $3, $4}' | sort; }
if [ -n "$(families "$OUT/stat")" ] && [ "$(families "$OUT/stat")" = "$(families "$OUT/scrape2")" ]; then
	ok "sfs stat --prometheus has the families /metrics has ($(families "$OUT/stat" | wc -l))"
else
	nok "families differ"; diff <(families "$OUT/stat") <(families "$OUT/scrape2") | head | sed 's/^/# /'
fi
if check_counters_grow "$OUT/scrape1" "$OUT/scrape2" >"$OUT/grow" 2>&1; then
	ok "every counter of the first scrape is in the second, none went back ($(grep -c '^# TYPE .* counter' "$OUT/scrape1") families)"
else
	nok "counters"; head -n 10 "$OUT/grow" | sed 's/^/# /'
fi
sum() { awk -v n="$1" '$1 ~ "^" n "({|$)" { s += $NF } END { printf "%.0f\n", s }' "$2"; }
e1=$(sum sfs_worker_events_total "$OUT/scrape1")
e2=$(sum sfs_worker_events_total "$OUT/scrape2")
c1=$(sum sfs_checkpoints_total "$OUT/scrape1")
c2=$(sum sfs_checkpoints_total "$OUT/scrape2")
[ "$e1" -gt 0 ] && [ "$e2" -gt "$e1" ] && [ "$c2" -gt "$c1" ] &&
	ok "events ($e1 -> $e2) and checkpoints ($c1 -> $c2) grew between the scrapes" ||
	nok "events $e1 -> $e2, checkpoints $c1 -> $c2"
missing=
for n in sfs_job_info sfs_process_state sfs_process_restarts_total sfs_process_hang_kills_total \
	sfs_segment_used_bytes sfs_worker_buffers sfs_worker_buffer_seals_total sfs_worker_spills_total \
	sfs_worker_stalls_total sfs_worker_stall_seconds_total sfs_compactor_queue_buffers \
	sfs_compactor_flushes_total sfs_compactor_flush_seconds_total sfs_value_cache_hits_total \
	sfs_value_cache_misses_total sfs_worker_events_total sfs_worker_records_total \
	sfs_checkpoints_total sfs_checkpoint_last_duration_seconds sfs_checkpoint_files_linked_total \
	sfs_checkpoint_files_referenced_total sfs_recoveries_total; do
	grep -q "^# TYPE $n " "$OUT/scrape2" || missing="$missing $n"
done
[ -z "$missing" ] && ok "the families docs/metrics.md names are there" || nok "missing:$missing"
grep -q "^sfs_worker_events_total{job=\"$JOB\",worker=\"1\"}" "$OUT/scrape2" &&
	grep -q "^sfs_process_restarts_total{job=\"$JOB\",role=\"compactor\",index=\"0\"}" "$OUT/scrape2" &&
	grep -q "^sfs_job_info{job=\"$JOB\",backend=\"table\",query=\"q18\"} 1" "$OUT/scrape2" &&
	ok "labels job, worker, role, index, backend" || nok "labels"

# The checkers catch what they are for: a doctored scrape fails them.
awk '!done && /^sfs_worker_events_total/ { $NF = 0; done = 1 } 1' "$OUT/scrape2" >"$OUT/back"
check_counters_grow "$OUT/scrape1" "$OUT/back" >/dev/null 2>&1 &&
	nok "a counter going back passes the check" || ok "a counter going back fails the check"
awk '!done && /^# HELP sfs_worker_spills_total/ { done = 1; next } 1' "$OUT/scrape2" >"$OUT/nohelp"
check_families "$OUT/nohelp" >/dev/null 2>&1 &&
	nok "a dropped HELP line passes the check" || ok "a dropped HELP line fails the check"
awk '!done && /^sfs_worker_stalls_total/ { done = 1; next } 1' "$OUT/scrape2" >"$OUT/gone"
check_counters_grow "$OUT/scrape1" "$OUT/gone" >/dev/null 2>&1 &&
	nok "a vanished counter passes the check" || ok "a vanished counter fails the check"
sed 's/^sfs_job_generation{/sfs_job generation{/' "$OUT/scrape2" >"$OUT/broken"
lint "$OUT/broken" >/dev/null 2>&1 && nok "a broken line passes the format check" ||
	ok "a broken line fails the format check"

# Bad addresses and a port in use: one line, exit 2, nothing started.
for a in "abc" "127.0.0.1:" "127.0.0.1:0" "127.0.0.1:65536" "::1:80" "[::1:80" "no.such.host.invalid:80" "127.0.0.1:$PORT"; do
	timeout 20 "$SFS" run --job "$JOB-bad" --query q18 --events 1000 --data "$OUT/bad" \
		--metrics-addr "$a" >"$OUT/bad.out" 2>"$OUT/bad.err"
	rc=$?
	if [ $rc -eq 2 ] && [ "$(wc -l <"$OUT/bad.err")" -eq 1 ] && grep -q -- "--metrics-addr" "$OUT/bad.err" &&
		! ls /dev/shm/sfs."$JOB-bad".* >/dev/null 2>&1; then
		ok "--metrics-addr '$a': exit 2, one line: $(cat "$OUT/bad.err")"
	else
		nok "--metrics-addr '$a': exit $rc, $(head -c 300 "$OUT/bad.err")"
	fi
done
grep -q "in use" "$OUT/bad.err" && ok "the port in use is said so" || nok "port in use: $(cat "$OUT/bad.err")"
rm -f /dev/shm/sfs."$JOB-bad"*

# A client that sends half a request and waits holds no one up: another
# scrape is served, and the supervisor's loop keeps beating.
exec 3<>"/dev/tcp/127.0.0.1/$PORT" && printf 'GET /metrics HTTP/1.1\r\n' >&3
sleep 0.5
if timeout 10 curl -sS -f -m 5 -o "$OUT/scrape3" "$URL"; then
	age=$(awk '/^sfs_process_heartbeat_age_seconds\{.*role="supervisor"/ { print $NF }' "$OUT/scrape3")
	awk -v a="$age" 'BEGIN { exit !(a != "" && a < 0.5) }' &&
		ok "a half-sent request does not block a scrape or the supervisor (its heartbeat ${age}s old)" ||
		nok "supervisor heartbeat age '$age' with a client stalled"
else
	nok "a scrape behind a stalled client failed"
fi
exec 3>&-

# A recovery (a worker killed) makes new segments: the server follows them
# and counts it.
wpid=$(awk '/^sfs_process_pid\{.*role="worker",index="0"/ { print $NF }' "$OUT/scrape3")
[ -n "$wpid" ] && [ "$wpid" -gt 0 ] && kill -9 "$wpid"
rec=
for ((t = 0; t < 100; t++)); do
	if timeout 10 curl -s -f -m 5 -o "$OUT/scrape4" "$URL" &&
		grep -q '^sfs_recoveries_total{job="'"$JOB"'"} 1$' "$OUT/scrape4" &&
		grep -q '^sfs_job_generation{job="'"$JOB"'"} 2$' "$OUT/scrape4"; then
		rec=1
		break
	fi
	sleep 0.1
done
[ -n "$rec" ] && lint "$OUT/scrape4" >/dev/null 2>&1 &&
	ok "after a worker is killed: the job recovers, /metrics says sfs_recoveries_total 1, generation 2" ||
	nok "no recovery seen through /metrics (worker pid '$wpid')"

kill -0 "$runpid" 2>/dev/null && ok "the run was live while scraped" ||
	nok "the run ended before the scrapes (raise --events)"
kill -INT "$runpid" 2>/dev/null
wait "$runpid"
rc=$?
runpid=
# The recovery stopped one incarnation for its failed worker; the last
# stop must be the signal's, a planned stop: exit 0.
if [ $rc -eq 0 ] && grep "stopping job" "$OUT/run.err" | tail -n 1 | grep -q Interrupt &&
	! ls /dev/shm/sfs."$JOB".* >/dev/null 2>&1; then
	ok "the run stops cleanly on SIGINT, exit 0"
else
	nok "sfs run exit $rc"; tail -n 5 "$OUT/run.err" | sed 's/^/# /'
fi
timeout 5 curl -s -m 2 -o /dev/null "$URL" && nok "still served after the run" ||
	ok "the port is closed after the run"
timeout 10 "$SFS" stat --job "$JOB" --prometheus >/dev/null 2>"$OUT/stat.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$OUT/stat.err")" -eq 1 ] && ok "sfs stat --prometheus of no group: exit 1, one line" ||
	nok "stat of no group: exit $rc $(cat "$OUT/stat.err")"

echo "# e2e_metrics: $fails failed"
[ $fails -eq 0 ]
