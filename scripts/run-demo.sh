#!/usr/bin/env bash
# make run: the main job.  Until the Nexmark runtime lands this is the
# supervised group on its own: start it, show what runs (sfs stat), stop it
# with SIGTERM and check it left no process and no segment behind.
set -eu
BIN=${SFS_BIN:-$PWD/bin}
JOB=${SFS_JOB:-demo}
WORKERS=${SFS_WORKERS:-$(nproc)}

"$BIN/sfs" run --job "$JOB" --workers "$WORKERS" &
sup=$!
trap 'kill -TERM $sup 2>/dev/null; wait $sup 2>/dev/null' EXIT

for _ in $(seq 100); do
	n=$("$BIN/sfs" stat --job "$JOB" 2>/dev/null | grep -c ' running ' || true)
	[ "$n" -ge $((WORKERS + 3)) ] && break
	sleep 0.1
done
sleep 1
echo "== sfs stat --job $JOB"
"$BIN/sfs" stat --job "$JOB"
echo "== stopping (SIGTERM)"
kill -TERM "$sup"
wait "$sup"
trap - EXIT
if [ -e "/dev/shm/sfs.$JOB.0" ] || pgrep -f -- "--job $JOB" >/dev/null; then
	echo "run: the group left a segment or a process behind" >&2
	exit 1
fi
echo "== group stopped cleanly: no process, no segment left"
