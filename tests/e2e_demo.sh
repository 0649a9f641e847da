#!/usr/bin/env bash
# e2e_demo.sh — what a newcomer meets first: `make run`'s script
# (scripts/run-demo.sh) and the README with its docs/ pages.
#
# The demo must complete at least one checkpoint and print its summary
# (events and events/s, state size, checkpoints with duration and size, the
# maintenance CPU against the workers', the compactor's work, and the
# `sfs top` command for a longer run), within a bound on wall time.  Every
# relative link of README.md and docs/*.md must resolve: the file or folder
# exists, and a #anchor into a Markdown file names one of its headings (as
# GitHub makes anchors of them).  Both checkers are shown to fail on doctored
# input (a demo output with no checkpoint or a summary line missing; a README
# with a link to a missing file and one to a missing heading), so they cannot
# pass by checking nothing.  TAP-style.
set -u
BIN=${SFS_BIN:-$PWD/bin}
OUT=$(mktemp -d)
JOB=e2e-demo-$$
fails=0

ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }
trap 'rm -rf "$OUT"' EXIT

# check_links FILE...: one line per broken relative link, exit 1 if any.
check_links() {
	python3 - "$@" <<'EOF'
import os, re, sys

def anchors(path):
    """GitHub's anchors of a Markdown file's headings (fenced code skipped)."""
    seen, out, fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"#{1,6} +(.*?) *#* *$", line)
        if not m:
            continue
        a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else "%s-%d" % (a, n))
    return out

bad = 0
for f in sys.argv[1:]:
    fence = False
    for no, line in enumerate(open(f, encoding="utf-8"), 1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)      # inline code holds no links
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):     # http:, https:, mailto:
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(dest):
                print("%s:%d: %s: no such file" % (f, no, target)); bad += 1
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                print("%s:%d: %s: no heading #%s in %s" % (f, no, target, frag, dest)); bad += 1
sys.exit(1 if bad else 0)
EOF
}

# check_summary FILE: the demo's output has its summary and >= 1 checkpoint.
check_summary() {
	local f=$1 n
	for l in '^events: .* events/s' '^state: .* MiB in shared memory, .* on disk' \
		'^checkpoints: +[0-9]+ completed, duration median [0-9]+ ms, max [0-9]+ ms' \
		'^ +kept: [0-9]+: [0-9.]+ MiB \([0-9.]+ MiB new\)' \
		'^maintenance: +compactor .* s CPU, checkpointer .* s, against the workers' \
		'^compactor: ' "sfs top --job "; do
		grep -Eq "$l" "$f" || { echo "no line matching '$l'"; return 1; }
	done
	n=$(sed -n 's/^checkpoints: *\([0-9]*\) completed.*/\1/p' "$f")
	[ "${n:-0}" -ge 1 ] || { echo "checkpoints completed: ${n:-none}"; return 1; }
}

# --- the links
docs=(README.md docs/*.md)
if check_links "${docs[@]}" >"$OUT/links" 2>&1; then
	ok "every relative link of ${docs[*]} resolves ($(grep -o '](' "${docs[@]}" | wc -l) links)"
else
	nok "broken links"; sed 's/^/# /' "$OUT/links"
fi
cp README.md "$OUT/README.md" && mkdir -p "$OUT/docs" && cp docs/*.md "$OUT/docs/"
printf '\nsee [a page](docs/no-such-page.md)\n' >>"$OUT/README.md"
check_links "$OUT/README.md" >/dev/null 2>&1 && nok "a link to a missing file passes" ||
	ok "a link to a missing file is caught"
cp README.md "$OUT/README.md"
printf '\nsee [a heading](docs/cli.md#no-such-heading)\n' >>"$OUT/README.md"
check_links "$OUT/README.md" >/dev/null 2>&1 && nok "a link to a missing heading passes" ||
	ok "a link to a missing heading is caught"

# --- the demo, as make run runs it (its defaults: ~12 s of throttled stream)
start=$(date +%s)
SFS_BIN=$BIN SFS_JOB=$JOB timeout -k 10 120 bash scripts/run-demo.sh >"$OUT/demo" 2>&1
rc=$?
secs=$(($(date +%s) - start))
sed 's/^/# /' "$OUT/demo"
[ $rc -eq 0 ] && ok "scripts/run-demo.sh exits 0 in ${secs} s" || nok "scripts/run-demo.sh exit $rc"
if check_summary "$OUT/demo" >"$OUT/why" 2>&1; then
	ok "it completes >= 1 checkpoint and prints the summary lines"
else
	nok "summary: $(cat "$OUT/why")"
fi
[ "$secs" -le 60 ] && ok "it takes ${secs} s (at most 60 here)" || nok "it took ${secs} s"
sed 's/^checkpoints: *[0-9]* completed/checkpoints:  0 completed/' "$OUT/demo" >"$OUT/demo0"
check_summary "$OUT/demo0" >/dev/null 2>&1 && nok "a demo with no checkpoint passes" ||
	ok "a demo with no checkpoint is caught"
grep -v '^maintenance:' "$OUT/demo" >"$OUT/demo1"
check_summary "$OUT/demo1" >/dev/null 2>&1 && nok "a summary without its maintenance line passes" ||
	ok "a summary without its maintenance line is caught"
[ -e "/dev/shm/sfs.$JOB.0" ] && nok "the demo left its segment" || ok "no segment left behind"

[ $fails -eq 0 ]
