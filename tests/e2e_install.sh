#!/usr/bin/env bash
# e2e_install.sh — `make install` gives a library others can link.  Installs
# the build into a temporary prefix with scripts/install.sh (what make install
# runs: it copies the built files and builds nothing, so it can run inside
# make test), then checks libsfs.so's soname and links, its exports (the
# public headers' functions and nothing else: no sfs_seg_*, sfs__*, rt_*), that
# it forces no jemalloc on a program, and that the installed binaries keep the
# --merge-lib hook; builds tests/install_smoke.c with nothing but pkg-config's
# flags against libsfs.so and (--static) libsfs.a and runs both; stages an
# install under DESTDIR; uninstalls both.  TAP-style lines.
# Needs a build (make all): $BUILD/install.env says what to install.
# SFS_INSTALL_KEEP=1 keeps the installed prefix and prints its path.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
env=$build/install.env
fails=0

ok()  { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }
# show FILE: its first lines as TAP comments.
show() { head -n "${2:-15}" "$1" | sed 's/^/# /'; }

if [ ! -f "$env" ]; then
	nok "no $env: build first (make all)"
	exit 1
fi
# shellcheck source=/dev/null
. "$env"
CC=$SFS_CC
# A sanitized build's library needs the sanitizer's runtime in the program.
read -r -a san <<<"$SFS_SAN"
major=${SFS_VERSION%%.*}

tmp=$(mktemp -d)
cleanup() {
	if [ -n "${SFS_INSTALL_KEEP:-}" ]; then
		echo "# prefix kept: $tmp/prefix"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
prefix=$tmp/prefix
lib=$prefix/lib

# 1. The install: every file where the layout says.
if DESTDIR='' "$root/scripts/install.sh" "$prefix" "$env" >"$tmp/install.log" 2>&1; then
	missing=()
	for f in include/sfs.h "lib/libsfs.so.$SFS_VERSION" lib/libsfs.a lib/pkgconfig/sfs.pc \
		 bin/sfs bin/sfs-worker bin/sfs-compactor bin/sfs-checkpointer; do
		[ -f "$prefix/$f" ] || missing+=("$f")
	done
	for h in $PUBLIC_HEADERS; do
		[ -f "$prefix/include/${h#"$INCLUDE_ROOT"/}" ] || missing+=("header $h")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		ok "installs under a prefix: $(grep -c '^installed ' "$tmp/install.log") files and links"
	else
		nok "install left out: ${missing[*]}"
	fi
else
	nok "scripts/install.sh $prefix failed"
	show "$tmp/install.log"
	exit 1
fi

# 2. The shared library: soname, links, no jemalloc.
soname=$(readelf -d "$lib/libsfs.so.$SFS_VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = "libsfs.so.$major" ] &&
   [ "$(readlink "$lib/libsfs.so.$major")" = "libsfs.so.$SFS_VERSION" ] &&
   [ "$(readlink "$lib/libsfs.so")" = "libsfs.so.$major" ]; then
	ok "soname $soname; libsfs.so -> libsfs.so.$major -> libsfs.so.$SFS_VERSION"
else
	links=$(for f in "$lib"/libsfs.so*; do echo "${f##*/} -> $(readlink "$f")"; done)
	nok "soname '$soname' (want libsfs.so.$major), links: $(tr '\n' ';' <<<"$links")"
fi
needed=$(readelf -d "$lib/libsfs.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
if grep -q jemalloc <<<"$needed"; then
	nok "libsfs.so forces jemalloc on its user: NEEDED $needed"
else
	ok "libsfs.so leaves malloc to the program (NEEDED: $needed)"
fi

# 3. Exports: exactly the installed headers' functions; internal ones hidden.
hdrs=()
for h in $PUBLIC_HEADERS; do hdrs+=("$prefix/include/${h#"$INCLUDE_ROOT"/}"); done
api=$(CC=$CC "$root/scripts/libsfs-exports.sh" "${hdrs[@]}" 2>"$tmp/exports.err")
if [ -n "$api" ] && CC=$CC "$root/scripts/libsfs-exports.sh" --check "$lib/libsfs.so" "${hdrs[@]}" \
	>>"$tmp/exports.err" 2>&1; then
	ok "libsfs.so exports exactly the $(wc -l <<<"$api") functions the public headers declare"
else
	nok "libsfs.so's exports differ from the public headers'"
	show "$tmp/exports.err"
fi
exported=$(nm -D --defined-only "$lib/libsfs.so" | awk '{ print $NF }')
static_syms=$(nm --defined-only "$lib/libsfs.a" 2>/dev/null | awk '$2 == "T" { print $3 }')
leaks=() absent=()
for s in sfs_seg_attach sfs__err sfs__ck_store_open; do
	grep -qx "$s" <<<"$static_syms" || absent+=("$s")
	grep -qx "$s" <<<"$exported" && leaks+=("$s")
done
internal=$(grep -cvxF -f <(echo "$api") <<<"$exported")
# STYLE rule 1: every global of the installed archive is sfs_ (public) or sfs__
# (internal); the Nexmark runtime (rt_, q_, nx_) is a program, not in it.
unprefixed=$(nm -g --defined-only "$lib/libsfs.a" 2>/dev/null | awk 'NF == 3 && $3 !~ /^sfs_/ { print $3 }' | sort -u)
if [ -z "$unprefixed" ]; then
	ok "every global symbol of libsfs.a is sfs_-prefixed"
else
	nok "libsfs.a has globals without the sfs_ prefix: $(echo $unprefixed | head -c 300)"
fi
if [ ${#absent[@]} -ne 0 ]; then
	nok "the internal symbols checked are gone from libsfs.a (${absent[*]}): pick others"
elif [ ${#leaks[@]} -eq 0 ] && [ "$internal" -eq 0 ]; then
	ok "internal functions (sfs_seg_attach, sfs__err, sfs__ck_store_open) are in libsfs.a, not exported by libsfs.so"
else
	nok "libsfs.so exports internal functions: ${leaks[*]} ($internal not in the headers)"
fi

# The installed binaries still export the --merge-lib plugins' one hook.
nohook=()
for b in $BINS; do
	nm -D --defined-only "$prefix/bin/${b##*/}" | grep -qw sfs_merge_define || nohook+=("${b##*/}")
done
if [ ${#nohook[@]} -eq 0 ]; then
	ok "the installed binaries export sfs_merge_define for --merge-lib plugins"
else
	nok "no sfs_merge_define for plugins in: ${nohook[*]}"
fi

# 4. A program built with pkg-config's flags alone, against libsfs.so.
export PKG_CONFIG_PATH=$lib/pkgconfig
unset PKG_CONFIG_LIBDIR
expect() {  # expect OUTPUT_FILE: the smoke program's lines, as the library defines them
	grep -qx "version: ${SFS_VERSION%.*}" "$1" &&
	grep -qx 'sfs_strerror(SFS_EUSAGE): bad argument' "$1" &&
	grep -qx 'sfs_worker_region_bytes(NULL): [1-9][0-9]*' "$1" &&
	grep -qx 'sfs_merge_define(SFS_MERGE_USER, maxabs): 0' "$1" &&
	grep -qx 'sfs_merge_define(SFS_MERGE_ADD, maxabs): bad argument' "$1"
}
pcver=$(pkg-config --modversion sfs 2>&1)
if [ "$pcver" = "$SFS_VERSION" ] && [ "$(pkg-config --variable=prefix sfs)" = "$prefix" ]; then
	ok "pkg-config finds sfs $pcver under the prefix"
else
	nok "pkg-config --modversion sfs: $pcver (want $SFS_VERSION), prefix $(pkg-config --variable=prefix sfs 2>&1)"
fi
flags=$(pkg-config --cflags --libs sfs 2>"$tmp/pc.err")
read -r -a flagv <<<"$flags"
if "$CC" -std=gnu11 -Wall -Wextra -Werror "${san[@]}" -o "$tmp/smoke" "$root/tests/install_smoke.c" \
	"${flagv[@]}" >"$tmp/cc.log" 2>&1 &&
   LD_LIBRARY_PATH=$lib "$tmp/smoke" >"$tmp/smoke.out" 2>&1 && expect "$tmp/smoke.out"; then
	ok "install_smoke.c against libsfs.so ($flags): $(tr '\n' ';' <"$tmp/smoke.out")"
else
	nok "install_smoke.c against libsfs.so ($flags)"
	show "$tmp/pc.err"; show "$tmp/cc.log"; [ -f "$tmp/smoke.out" ] && show "$tmp/smoke.out"
fi
loaded=$(LD_LIBRARY_PATH=$lib ldd "$tmp/smoke" 2>&1)
if [ ! -x "$tmp/smoke" ]; then
	nok "what it loads: it was not built"
elif grep -q "libsfs.so.$major => $lib/libsfs.so.$major" <<<"$loaded" && ! grep -q jemalloc <<<"$loaded"; then
	ok "it loads the installed libsfs.so.$major, and no jemalloc"
else
	nok "what it loads: $(tr '\n' ' ' <<<"$loaded")"
fi

# 5. The same against libsfs.a: the private lines give the rest.  -lsfs alone
#    would take the .so beside it, so that one library is asked for static.
slibs=$(pkg-config --static --libs sfs 2>"$tmp/pcs.err")
read -r -a slink <<<"${slibs/-lsfs/-Wl,-Bstatic -lsfs -Wl,-Bdynamic}"
read -r -a cflagv <<<"$(pkg-config --cflags sfs)"
if "$CC" -std=gnu11 -Wall -Wextra -Werror "${san[@]}" -o "$tmp/smoke-static" \
	"$root/tests/install_smoke.c" "${cflagv[@]}" "${slink[@]}" >"$tmp/cc-static.log" 2>&1 &&
   "$tmp/smoke-static" >"$tmp/smoke-static.out" 2>&1 && expect "$tmp/smoke-static.out" &&
   ! readelf -d "$tmp/smoke-static" | grep -q 'NEEDED.*libsfs'; then
	if cmp -s "$tmp/smoke.out" "$tmp/smoke-static.out"; then
		ok "install_smoke.c against libsfs.a (pkg-config --static: $slibs): same output"
	else
		nok "libsfs.a and libsfs.so programs print differently"
		diff "$tmp/smoke.out" "$tmp/smoke-static.out" | sed 's/^/# /'
	fi
else
	nok "install_smoke.c against libsfs.a ($slibs)"
	show "$tmp/pcs.err"; show "$tmp/cc-static.log"
	[ -f "$tmp/smoke-static.out" ] && show "$tmp/smoke-static.out"
fi

# 6. A staged install (DESTDIR): files under the stage, the prefix without it.
stage=$tmp/stage
if DESTDIR=$stage "$root/scripts/install.sh" /opt/sfs-e2e "$env" >"$tmp/stage.log" 2>&1 &&
   [ -f "$stage/opt/sfs-e2e/lib/libsfs.so.$SFS_VERSION" ] &&
   grep -qx 'prefix=/opt/sfs-e2e' "$stage/opt/sfs-e2e/lib/pkgconfig/sfs.pc" &&
   [ ! -e /opt/sfs-e2e ]; then
	ok "DESTDIR stages the files; sfs.pc keeps prefix=/opt/sfs-e2e"
else
	nok "DESTDIR=$stage install to /opt/sfs-e2e"
	show "$tmp/stage.log"
fi

# 7. Uninstall removes every file it installed, in both (but a kept prefix).
dirs=("$stage:/opt/sfs-e2e")
[ -z "${SFS_INSTALL_KEEP:-}" ] && dirs+=(":$prefix")
un_fail=0 removed=0
for d in "${dirs[@]}"; do
	DESTDIR=${d%%:*} "$root/scripts/install.sh" --uninstall "${d#*:}" "$env" >"$tmp/un.log" 2>&1 ||
		{ un_fail=1; show "$tmp/un.log"; }
	removed=$((removed + $(grep -c '^removed ' "$tmp/un.log")))
done
left=$(for d in "${dirs[@]}"; do find "${d%%:*}${d#*:}" \( -type f -o -type l \); done)
if [ $un_fail -eq 0 ] && [ -z "$left" ]; then
	ok "uninstall removes what install put ($removed files and links)"
else
	nok "uninstall failed or left: $(tr '\n' ' ' <<<"$left")"
fi
[ $fails -eq 0 ]
