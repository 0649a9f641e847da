#!/usr/bin/env bash
# check-layers.sh — the include graph of sfs against its layers (issue 19).
#
# Layers, bottom up; a file may include its own layer and the ones below:
#   include/ common/       libc only (include/sfs.h is the public header)
#   shm/ nexmark/          segments, process table, QSBR, rings, allocators;
#                          the Nexmark generator (libc only)
#   worker/                keyed state
#   store/target.h         the flush-target contract, below its engines, with
#                          the helpers it declares (store/target.c, map_run.c)
#   store/memory store/rocksdb store/table (store/table/layout with it)
#   store/                 the rest of store/: the registry over the engines
#   compactor/ checkpointer/
#   runtime/ query/
#   baseline/              the rocksdb-direct baseline: a backend of the
#                          runtime's contract (runtime/backend.h, its error
#                          message runtime/util.h) on sfs's internals
#                          (common/), registered by the binaries
#                          (rt_backend_register), so the runtime never names it
#   supervisor/            the CLI's commands
#   bin                    the mains (worker/main.c, compactor/main.c,
#                          checkpointer/main.c, supervisor/main.c): binaries
#   tests/ bench/ bench/state/  (bench/state/: the keyed-state benchmark, a program
#                          of its own, $(BUILD)/bench/bench_state)
# Folders of one layer may include each other, but not in a cycle.
#
# Prints each node's includes, every arrow that runs up (with the file and
# line) and every cycle (tsort's), then `ok - include layers` or
# `not ok - include layers: ...`; exits non-zero on a finding.  Run from the
# top of the tree (make test runs it as tests/e2e_layers.sh).  The same
# rules for calls, read from the build's objects: "The call graph" below
# (`ok - call layers` or `not ok - call layers: ...`).
#
# KNOWN lists the upward arrows the tree still has, each one include of one
# file; a new one fails the check, and a listed one that is gone is reported
# so the list only shrinks.
#
# A second rule (issue 20): the operator runtime and the queries are a
# program on sfs's public API, like any user's.  Files in runtime/ and
# query/ include only the public headers (include/*.h), their own folders
# (runtime/, query/), the Nexmark generator (nexmark/, a module of its own)
# and system or library headers; any other header of the tree — "..." or
# <...>, however it is spelled — fails with the file and line.
set -u
cd "${1:-.}" || exit 2

# Upward arrows still in the tree: "file -> header" (none: the list only
# shrinks, and it is empty).
KNOWN=()

# node FILE: the layer node a source file (or an included path) belongs to.
node() {
	case $1 in
	store/target.h | store/target.c | store/map_run.c) echo store/target ;;
	worker/main.c | compactor/main.c | checkpointer/main.c | supervisor/main.c) echo bin ;;
	bench/state/*) echo bench/state ;;
	store/table/*) echo store/table ;;
	store/*/*) echo "${1%/*}" ;;
	*/*) echo "${1%%/*}" ;;
	*) echo "?" ;;
	esac
}

rank() {
	case $1 in
	include | common) echo 0 ;;
	shm | nexmark) echo 1 ;;
	worker) echo 2 ;;
	store/target) echo 3 ;;
	store/memory | store/rocksdb | store/table) echo 4 ;;
	store) echo 5 ;;
	compactor | checkpointer) echo 6 ;;
	runtime | query) echo 7 ;;
	baseline) echo 8 ;;
	supervisor) echo 9 ;;
	bin) echo 10 ;;
	tests | bench | bench/state) echo 11 ;;
	*) echo -1 ;;
	esac
}

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
fail=()
seen_known=()

while IFS= read -r f; do
	f=${f#./}
	from=$(node "$f")
	while IFS=: read -r line inc; do
		inc=${inc#*\"}
		inc=${inc%%\"*}
		# Resolve as the compiler does with -I include -I .: beside
		# the file first, then the top of the tree, then include/.
		if [ -e "$(dirname "$f")/$inc" ] && [[ $inc != */* ]]; then
			path=$(dirname "$f")/$inc
		elif [ -e "$inc" ]; then
			path=$inc
		elif [ -e "include/$inc" ]; then
			path=include/$inc
		else
			fail+=("$f:$line: \"$inc\" not found")
			continue
		fi
		to=$(node "$path")
		[ "$to" = "$from" ] && continue
		echo "$from $to" >>"$edges"
		rf=$(rank "$from") rt=$(rank "$to")
		if [ "$rf" -lt 0 ] || [ "$rt" -lt 0 ]; then
			fail+=("$f:$line: $from -> $to: a folder with no layer (add it to check-layers.sh)")
		elif [ "$rt" -gt "$rf" ]; then
			arrow="$f -> $path"
			known=0
			for k in "${KNOWN[@]}"; do
				[ "$k" = "$arrow" ] && known=1 && seen_known+=("$k")
			done
			if [ $known = 1 ]; then
				echo "# known upward arrow: $f:$line: $from -> $to ($path)"
			else
				fail+=("$f:$line: $from -> $to ($path) runs up")
			fi
		fi
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(find include common shm nexmark worker store compactor checkpointer runtime query \
	baseline supervisor tests bench -name '*.[ch]' 2>/dev/null | sort)

# The public-API rule: every include of runtime/ and query/, both spellings,
# resolved as the compiler does (-I include -I .); a path that is not in
# the tree is a system or library header.
while IFS= read -r f; do
	f=${f#./}
	while IFS=: read -r line inc; do
		if [[ $inc == *\"* ]]; then
			inc=${inc#*\"}
			inc=${inc%%\"*}
			quoted=1
		else
			inc=${inc#*<}
			inc=${inc%%>*}
			quoted=0
		fi
		path=
		if [ $quoted = 1 ] && [[ $inc != */* ]] && [ -e "$(dirname "$f")/$inc" ]; then
			path=$(dirname "$f")/$inc
		elif [ -e "include/$inc" ]; then
			path=include/$inc
		elif [ -e "$inc" ]; then
			path=$inc
		fi
		[ -z "$path" ] && continue	# not in the tree: system or library
		case $path in
		include/* | runtime/* | query/* | nexmark/*) ;;
		*) fail+=("$f:$line: $path: runtime/ and query/ use sfs's public API only (include/*.h), not its internal headers") ;;
		esac
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f")
done < <(find runtime query -name '*.[ch]' 2>/dev/null | sort)

echo "# the include graph (node: the nodes its files include)"
sort -u "$edges" | awk '{ to[$1] = to[$1] " " $2 } END { for (n in to) print "#   " n ":" to[n] }' | sort

for k in "${KNOWN[@]}"; do
	gone=1
	for s in "${seen_known[@]+"${seen_known[@]}"}"; do [ "$s" = "$k" ] && gone=0; done
	[ $gone = 1 ] && echo "# a known upward arrow is gone, drop it from KNOWN: $k"
done

if ! cyc=$(sort -u "$edges" | tsort 2>&1 >/dev/null); then
	# tsort names each loop it breaks: "input contains a loop:", then its nodes.
	fail+=("cycles (tsort's loops, |-separated):$(echo "$cyc" | sed 's/^tsort: //' |
		sed 's/^-: input contains a loop:$/ |/' | tr '\n' ' ')")
fi

# ---- The call graph (issue 33) -------------------------------------------
# Includes are not the whole story: a declaration can be written anywhere,
# and then a lower layer calls up with no include arrow.  So the same rules
# over the objects of the build: every symbol an object of $BUILD (default
# build, the objects of `make`) leaves undefined is resolved to the object
# that defines it, both objects to their sources and their layer nodes
# (node() above), and every reference that runs up a layer, or closes a
# cycle between folders of one layer, fails with caller file, callee file
# and symbol.  A reference to data counts as a call: it is a dependency all
# the same.  Objects whose source is no longer in the tree (stale) and the
# -fPIC and JNI copies ($BUILD/pic/, $BUILD/jni/: no source at their path)
# are skipped.  tests/e2e_layers.sh builds the objects first when run
# alone; make test has built them.
#
# Of a cycle between two folders, the direction with fewer references is
# the one reported (it is the one to remove); in a longer cycle, every
# edge.  KNOWN_CALLS is the list of references still in the tree, each
# "caller -> callee symbol"; it only shrinks.
#
# The one left: shm/ hashes the layout fingerprint over sfs_layout_parts,
# the list of the modules above it with structs in the segment, which
# store/layout.c defines.  By design (shm/layout.h): a link reference, not
# a constructor, so that every binary that maps a segment links the whole
# list and computes the same fingerprint.  Removing it means handing the
# list to every segment create and attach from above.
KNOWN_CALLS=(
	"shm/layout.c -> store/layout.c sfs_layout_parts"
)

check_calls() {
	local build=${BUILD:-build} objs=() o rel src table calls out
	while IFS= read -r o; do
		rel=${o#"$build"/}
		rel=${rel%.o}
		if [ -e "$rel.c" ]; then
			src=$rel.c
		elif [ -e "$rel.cc" ]; then
			src=$rel.cc
		else
			continue
		fi
		objs+=("$o")
		printf '%s %s %s %s\n' "$o" "$src" "$(node "$src")" "$(rank "$(node "$src")")"
	done < <(find "$build" -name '*.o' 2>/dev/null | sort) >"$calls_tab"
	if [ ${#objs[@]} -eq 0 ]; then
		call_fail+=("no objects of the tree under $build/: run make first (or set BUILD)")
		return
	fi
	nm -A "${objs[@]}" >"$calls_nm" 2>/dev/null ||
		{ call_fail+=("nm failed on the objects under $build/"); return; }
	# Out: "edge FROM TO N" per node edge, and per finding
	# "up|cycle|nolayer CALLER CALLEE SYMBOL FROM TO N_BACK".
	awk -v known="$(printf '%s\n' "${KNOWN_CALLS[@]+"${KNOWN_CALLS[@]}"}")" '
	FNR == NR { src[$1] = $2; nd[$1] = $3; rk[$1] = $4; next }
	{
		f = $1; sub(/:.*/, "", f)
		if (!(f in src)) next
		if (NF == 2 && ($1 ~ /:$/) && ($2 ~ /^[^ ]+$/)) next
		if (NF == 3 && $2 ~ /^[A-TV-Z]$/) {       # defined, global
			if (!($3 in def)) def[$3] = f
			else if (nd[f] != nd[def[$3]]) alt[$3] = alt[$3] " " f
			next
		}
		if ($2 == "U" || $2 == "w" || $2 == "v") use[++nu] = f " " $NF
	}
	END {
		for (i = 1; i <= nu; i++) {
			split(use[i], u, " "); a = u[1]; s = u[2]
			if (!(s in def)) continue         # libc, RocksDB, ...
			b = def[s]
			if (nd[b] != nd[a] && (s in alt)) {   # defined twice: prefer the caller node
				n = split(alt[s], al, " ")
				for (j = 1; j <= n; j++) if (nd[al[j]] == nd[a]) b = al[j]
			}
			if (nd[a] == nd[b]) continue
			k = src[a] " -> " src[b] " " s
			if (k in seen) continue
			seen[k] = 1
			ref[++nr] = k; rf[nr] = a; rt[nr] = b
			cnt[nd[a] SUBSEP nd[b]]++
			if (rk[a] == rk[b] && rk[a] >= 0) lat[nd[a], nd[b]] = 1
		}
		for (e in cnt) { split(e, p, SUBSEP); print "edge", p[1], p[2], cnt[e] }
		# Reachability over the lateral edges (same layer, other folder):
		# a handful of nodes, so a fixpoint is cheap.
		for (e in lat) reach[e] = 1
		do {
			more = 0
			for (e in reach) {
				split(e, p, SUBSEP)
				for (g in lat) {
					split(g, q, SUBSEP)
					if (q[1] == p[2] && !((p[1], q[2]) in reach)) { reach[p[1], q[2]] = 1; more = 1 }
				}
			}
		} while (more)
		for (i = 1; i <= nr; i++) {
			a = rf[i]; b = rt[i]; x = nd[a]; y = nd[b]
			split(ref[i], w, " ")
			if (rk[a] < 0 || rk[b] < 0) kind = "nolayer"
			else if (rk[b] > rk[a]) kind = "up"
			else if (rk[a] == rk[b] && ((y, x) in reach)) {
				# The heavier direction of a two-folder cycle stays.
				back = ((y, x) in cnt) ? cnt[y, x] : 0
				if (((y, x) in cnt) && (back < cnt[x, y] || (back == cnt[x, y] && x < y))) continue
				kind = "cycle"
			} else continue
			print kind, w[1], w[3], w[4], x, y, ((y, x) in cnt) ? cnt[y, x] : 0
		}
	}' "$calls_tab" "$calls_nm" >"$calls_out"

	echo "# the call graph (node: the nodes its objects call, with the number of symbols)"
	awk '$1 == "edge" { to[$2] = to[$2] " " $3 "(" $4 ")" } END { for (n in to) print "#   " n ":" to[n] }' \
		"$calls_out" | sort
	local kind a b sym x y back call known k why gone s
	local -a seen_calls=()
	while read -r kind a b sym x y back; do
		call="$a -> $b $sym"
		known=0
		for k in "${KNOWN_CALLS[@]+"${KNOWN_CALLS[@]}"}"; do
			[ "$k" = "$call" ] && known=1 && seen_calls+=("$k")
		done
		case $kind in
		up) why="$x -> $y runs up" ;;
		cycle) why="$x -> $y closes a cycle ($y -> $x: $back reference(s))" ;;
		*) why="$x -> $y: a folder with no layer (add it to check-layers.sh)" ;;
		esac
		if [ $known = 1 ]; then
			echo "# known call: $a -> $b: $sym: $why"
		else
			call_fail+=("$a -> $b: $sym: $why")
		fi
	done < <(grep -v '^edge ' "$calls_out" | sort)
	for k in "${KNOWN_CALLS[@]+"${KNOWN_CALLS[@]}"}"; do
		gone=1
		for s in "${seen_calls[@]+"${seen_calls[@]}"}"; do [ "$s" = "$k" ] && gone=0; done
		[ $gone = 1 ] && echo "# a known call is gone, drop it from KNOWN_CALLS: $k"
	done
}

calls_tab=$(mktemp) calls_nm=$(mktemp) calls_out=$(mktemp)
trap 'rm -f "$edges" "$calls_tab" "$calls_nm" "$calls_out"' EXIT
call_fail=()
check_calls
for m in "${call_fail[@]+"${call_fail[@]}"}"; do echo "# $m"; done
if [ ${#call_fail[@]} -eq 0 ]; then
	echo "ok - call layers (objects of ${BUILD:-build}/)"
	calls_rc=0
else
	echo "not ok - call layers: ${#call_fail[@]} finding(s)"
	calls_rc=1
fi

for m in "${fail[@]+"${fail[@]}"}"; do echo "# $m"; done
if [ ${#fail[@]} -eq 0 ]; then
	echo "ok - include layers (runtime/ and query/ on the public API only)"
else
	echo "not ok - include layers: ${#fail[@]} finding(s)"
	exit 1
fi
exit "$calls_rc"
