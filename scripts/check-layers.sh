#!/usr/bin/env bash
# check-layers.sh — the include graph of sfs against its layers (issue 19).
#
# Layers, bottom up; a file may include its own layer and the ones below:
#   include/ common/       libc only (include/sfs.h is the public header)
#   shm/ nexmark/          segments, process table, QSBR, rings, allocators;
#                          the Nexmark generator (libc only)
#   worker/                keyed state
#   store/target.h         the flush-target contract, below its engines
#   store/memory store/rocksdb store/table (store/table/layout with it)
#   store/                 the rest of store/: the registry over the engines
#   compactor/ checkpointer/
#   runtime/ query/
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
# top of the tree (make test runs it as tests/e2e_layers.sh).
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
	store/target.h) echo store/target ;;
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
	supervisor) echo 8 ;;
	bin) echo 9 ;;
	tests | bench | bench/state) echo 10 ;;
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
	supervisor tests bench -name '*.[ch]' 2>/dev/null | sort)

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

for m in "${fail[@]+"${fail[@]}"}"; do echo "# $m"; done
if [ ${#fail[@]} -eq 0 ]; then
	echo "ok - include layers (runtime/ and query/ on the public API only)"
else
	echo "not ok - include layers: ${#fail[@]} finding(s)"
	exit 1
fi
