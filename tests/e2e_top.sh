#!/usr/bin/env bash
# e2e_top.sh — `sfs top` on a running group, driven through tmux (a server
# of its own, -L): a q18 run (throttled, checkpoints every 100 ms); `sfs
# top --job J` in an 80x24 pane shows the header, both workers with a
# non-zero events/s, the compactor and the checkpoints, within 80x24 and
# with no escape sequence left as text; `q` ends it and the pane closes.
# Again under a shell that reports after it: SIGINT (C-c) ends it too, and
# each time the terminal is back in canonical mode with echo and the
# alternate screen is left.  `sfs top --once` prints one frame without
# escape codes.  Bad arguments exit 2, a job that does not run exit 1.
# Everything is bounded by timeout; the run, tmux and segments are cleaned
# up.  TAP-style lines.
set -u
BIN=${SFS_BIN:-$PWD/bin}
SFS=$BIN/sfs
OUT=$(mktemp -d)
JOB=e2e-top-$$
SOCK=e2e-top-$$
fails=0
runpid=

ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }
tm()  { timeout 10 tmux -L "$SOCK" "$@"; }

cleanup() {
	tm kill-server 2>/dev/null
	[ -n "$runpid" ] && kill -9 "$runpid" 2>/dev/null
	pkill -9 -f -- "--job $JOB" 2>/dev/null
	wait 2>/dev/null
	rm -f /dev/shm/sfs."$JOB"*
	rm -rf "$OUT"
}
trap cleanup EXIT

# until SECONDS CMD...: run CMD every 0.1 s until it succeeds; 1 on timeout.
until_ok() {
	local n=$(($1 * 10)) i
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# A frame's worker rows: "0  12.3K ..." with a events/s column.
check_frame() { # FILE WHAT
	local f=$1 what=$2 ev
	if grep -q "^sfs top - job $JOB (q18, table)" "$f" && grep -q '^WORKER  *EVENTS/S' "$f" &&
		grep -q '^0  ' "$f" && grep -q '^1  ' "$f" && grep -q '^compactor ' "$f" &&
		grep -q '^CHECKPOINTS ' "$f"; then
		ok "$what: header, both workers, the compactor, the checkpoints"
	else
		nok "$what: frame"; sed 's/^/# /' "$f"
	fi
	ev=$(awk '/^[0-9]/ && NF == 8 && $2 ~ /^[0-9.]+[KMG]?$/ && $2 !~ /^0(\.0)?$/ { n++ } END { print n + 0 }' "$f")
	[ "$ev" -eq 2 ] && ok "$what: both workers show a non-zero events/s" ||
		nok "$what: workers with events/s > 0: $ev"
}

timeout 120 "$SFS" run --job "$JOB" --query q18 --events 20000000 --max-rate 200000 \
	--workers 2 --checkpoint-interval 100 --data "$OUT/data" >"$OUT/run.out" 2>"$OUT/run.err" &
runpid=$!
until_ok 20 ls -d "$OUT/data"/checkpoints/chk-2 >/dev/null 2>&1 ||
	nok "no checkpoint within 20 s"

# --once: one frame, no escape codes.
timeout 20 "$SFS" top --job "$JOB" --once >"$OUT/once" 2>"$OUT/once.err"
rc=$?
[ $rc -eq 0 ] && ok "--once: exit 0" || nok "--once: exit $rc $(cat "$OUT/once.err")"
grep -q $'\033' "$OUT/once" && nok "--once: escape codes in the output" || ok "--once: no escape codes"
check_frame "$OUT/once" "--once"

# Live, in an 80x24 pane; q quits and the pane closes.
tm new-session -d -s top -x 80 -y 24 "$SFS top --job $JOB" || nok "tmux new-session"
sleep 3
tm capture-pane -p -t top >"$OUT/pane"
check_frame "$OUT/pane" "tmux 80x24"
lines=$(wc -l <"$OUT/pane")
width=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' "$OUT/pane")
[ "$lines" -le 24 ] && [ "$width" -le 80 ] && grep -q '^q: quit' "$OUT/pane" &&
	ok "the frame fits 80x24 ($lines lines, $width columns), 'q: quit' shown" ||
	nok "layout: $lines lines, $width columns"
grep -q -E '\[[0-9;?]*[HJKhl]' "$OUT/pane" && nok "escape sequences shown as text" ||
	ok "no escape sequence shown as text"
a1=$(tm display -p -t top '#{alternate_on}')
[ "$a1" = 1 ] && ok "on the alternate screen" || nok "alternate screen: '$a1'"
sleep 1.2
tm capture-pane -p -t top >"$OUT/pane2"
cmp -s "$OUT/pane" "$OUT/pane2" && nok "the frame did not refresh in 1.2 s" ||
	ok "the frame refreshes"
tm send-keys -t top q
if until_ok 5 eval "! tm has-session -t top 2>/dev/null"; then
	ok "q: sfs top exits and the pane closes"
else
	nok "q: the pane is still open"; tm capture-pane -p -t top | sed 's/^/# /'
fi
until_ok 3 eval "! pgrep -f -- 'top --job $JOB\$' >/dev/null" && ok "no sfs top left" ||
	nok "sfs top still runs"

# The terminal is put back: after q and after SIGINT, a shell in the same
# pane finds canonical mode and echo, and the main screen.
for how in q C-c; do
	tm new-session -d -s "t$how" -x 80 -y 24 \
		"trap : INT; $SFS top --job $JOB; echo rc=\$? >$OUT/rc-$how; stty -a >$OUT/stty-$how; sleep 30" ||
		nok "tmux new-session"
	sleep 2
	tm send-keys -t "t$how" "$how"
	if until_ok 5 test -s "$OUT/stty-$how"; then
		if grep -q '^rc=0$' "$OUT/rc-$how" &&
			grep -q -w -- icanon "$OUT/stty-$how" && grep -q -w -- echo "$OUT/stty-$how" &&
			! grep -q -w -- -icanon "$OUT/stty-$how" && ! grep -q -w -- -echo "$OUT/stty-$how"; then
			ok "$how: sfs top exits 0, the terminal is back in canonical mode with echo"
		else
			nok "$how: $(cat "$OUT/rc-$how"), terminal modes: $(grep -o -w -E -- '-?(icanon|echo)' "$OUT/stty-$how" | tr '\n' ' ')"
		fi
		a=$(tm display -p -t "t$how" '#{alternate_on}')
		[ "$a" = 0 ] && ok "$how: the alternate screen is left" || nok "$how: alternate_on '$a'"
	else
		nok "$how: sfs top did not end"
	fi
	tm kill-session -t "t$how" 2>/dev/null
done

# Refusals.
timeout 10 "$SFS" top >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "no --job: exit 2" || nok "no --job: exit $rc"
timeout 10 "$SFS" top --job "$JOB" --once extra >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "an extra argument: exit 2" || nok "extra argument: exit $rc"
timeout 10 "$SFS" top --job "$JOB-none" --once >/dev/null 2>"$OUT/none.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$OUT/none.err")" -eq 1 ] && ok "a job that does not run: exit 1, one line" ||
	nok "no such job: exit $rc $(cat "$OUT/none.err")"

kill -0 "$runpid" 2>/dev/null && ok "the run was live throughout" ||
	nok "the run ended early (raise --events)"
kill -INT "$runpid" 2>/dev/null
wait "$runpid"
rc=$?
runpid=
if [ $rc -eq 0 ] && ! grep -q "a child failed" "$OUT/run.err" &&
	! ls /dev/shm/sfs."$JOB".* >/dev/null 2>&1; then
	ok "the run stops cleanly on SIGINT, exit 0"
else
	nok "sfs run exit $rc"; tail -n 5 "$OUT/run.err" | sed 's/^/# /'
fi

echo "# e2e_top: $fails failed"
[ $fails -eq 0 ]
