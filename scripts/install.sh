#!/usr/bin/env bash
# install.sh — install (or remove) an sfs build under a prefix: copies what
# make has built, builds nothing, so it is safe to run beside a build or the
# test suite (tests/e2e_install.sh installs into a temporary prefix with it).
#
#   scripts/install.sh [--uninstall] PREFIX [ENV]
#
# ENV is the build's $(BUILD)/install.env (default: build/install.env of this
# tree, or $BUILD/install.env), written by make: the version, the public
# headers, libsfs.so.MAJOR.MINOR.0, libsfs.a, the binaries and the sfs.pc
# template, all as absolute paths.  Files land under $DESTDIR$PREFIX:
#   include/            the public headers (their path below include/)
#   lib/                libsfs.so.MAJOR.MINOR.0, the soname link libsfs.so.MAJOR,
#                       the link libsfs.so, libsfs.a
#   lib/pkgconfig/      sfs.pc (prefix = PREFIX, without DESTDIR)
#   bin/                sfs, sfs-worker, sfs-compactor, sfs-checkpointer
# --uninstall removes exactly those files (directories stay).  PREFIX must be
# absolute.  Prints each file it installs or removes; exits non-zero, naming
# the file, when something is missing or a copy fails.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
mode=install
if [ "${1:-}" = --uninstall ]; then
	mode=uninstall
	shift
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 [--uninstall] PREFIX [ENV]" >&2
	exit 2
fi
prefix=$1
case $prefix in
/*) ;;
*) echo "$0: PREFIX must be an absolute path, not '$prefix'" >&2; exit 2 ;;
esac
prefix=${prefix%/}
env=${2:-}
if [ -z "$env" ]; then
	build=${BUILD:-build}
	case $build in /*) ;; *) build=$here/$build ;; esac
	env=$build/install.env
fi
[ -f "$env" ] || { echo "$0: no $env: run make first" >&2; exit 1; }
# shellcheck source=/dev/null
. "$env"

dest=${DESTDIR:-}$prefix
major=${SFS_VERSION%%.*}
real=libsfs.so.$SFS_VERSION
soname=libsfs.so.$major

# header_dest H: where header H goes, its path below include/ kept.
header_dest() {
	case $1 in
	"$INCLUDE_ROOT"/*) echo "$dest/include/${1#"$INCLUDE_ROOT"/}" ;;
	*) echo "$dest/include/${1##*/}" ;;
	esac
}

if [ $mode = uninstall ]; then
	files=("$dest/lib/libsfs.so" "$dest/lib/$soname" "$dest/lib/$real" "$dest/lib/libsfs.a"
	       "$dest/lib/pkgconfig/sfs.pc")
	for h in $PUBLIC_HEADERS; do files+=("$(header_dest "$h")"); done
	for b in $BINS; do files+=("$dest/bin/${b##*/}"); done
	for f in "${files[@]}"; do
		if [ -e "$f" ] || [ -L "$f" ]; then
			rm -f "$f"
			echo "removed $f"
		fi
	done
	exit 0
fi

for f in $PUBLIC_HEADERS "$SHLIB" "$STLIB" $BINS "$PC_IN"; do
	[ -f "$f" ] || { echo "$0: $f is missing: run make first" >&2; exit 1; }
done

put() {  # put MODE SRC DST
	install -D -m "$1" "$2" "$3"
	echo "installed $3"
}
for h in $PUBLIC_HEADERS; do put 0644 "$h" "$(header_dest "$h")"; done
put 0755 "$SHLIB" "$dest/lib/$real"
ln -sfn "$real" "$dest/lib/$soname"
echo "installed $dest/lib/$soname -> $real"
ln -sfn "$soname" "$dest/lib/libsfs.so"
echo "installed $dest/lib/libsfs.so -> $soname"
put 0644 "$STLIB" "$dest/lib/libsfs.a"
for b in $BINS; do put 0755 "$b" "$dest/bin/${b##*/}"; done

pc=$(mktemp)
trap 'rm -f "$pc"' EXIT
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$SFS_VERSION|g" -e "s|@REQUIRES@|$PC_REQUIRES|g" \
	"$PC_IN" >"$pc"
put 0644 "$pc" "$dest/lib/pkgconfig/sfs.pc"

# The loader finds a new soname in a system directory only through its cache.
if [ -z "${DESTDIR:-}" ] && [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null &&
   grep -qsx "$prefix/lib" /etc/ld.so.conf /etc/ld.so.conf.d/*.conf; then
	ldconfig
	echo "ran ldconfig ($prefix/lib is on the loader's path)"
fi
