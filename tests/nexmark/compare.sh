#!/usr/bin/env bash
# compare.sh EXPECTED ACTUAL — compare two query result CSVs (oracle.sh's
# format: a header line, then the rows sorted bytewise).
# Exit 0 when the files are byte-identical.  Otherwise print both row counts
# (lines after the header), whether the headers differ, and the first 10
# differing lines with their line numbers ("-" only in EXPECTED, "+" only in
# ACTUAL), then exit 1.  Exit 2 on bad arguments or a missing file.
set -u
[ $# -eq 2 ] || { echo "usage: compare.sh EXPECTED ACTUAL" >&2; exit 2; }
exp=$1 act=$2
for f in "$exp" "$act"; do
	[ -f "$f" ] || { echo "compare.sh: missing file $f" >&2; exit 2; }
done
cmp -s -- "$exp" "$act" && exit 0

rows() { local n; n=$(wc -l <"$1"); [ "$n" -gt 0 ] && n=$((n - 1)); echo "$n"; }
echo "compare.sh: $exp and $act differ"
echo "  expected: $(rows "$exp") rows ($exp)"
echo "  actual:   $(rows "$act") rows ($act)"
eh=$(head -n 1 -- "$exp") ah=$(head -n 1 -- "$act")
if [ "$eh" != "$ah" ]; then
	echo "  header expected: $eh"
	echo "  header actual:   $ah"
fi
# A missing final newline shows up as a difference diff reports separately.
[ -s "$exp" ] && [ "$(tail -c 1 -- "$exp" | od -An -c | tr -d ' ')" != '\n' ] &&
	echo "  $exp does not end with a newline"
[ -s "$act" ] && [ "$(tail -c 1 -- "$act" | od -An -c | tr -d ' ')" != '\n' ] &&
	echo "  $act does not end with a newline"
ndiff=$(LC_ALL=C diff --unchanged-line-format= --old-line-format='-%dn: %L' \
	--new-line-format='+%dn: %L' -- "$exp" "$act" | grep -c '^[-+][0-9]*: ')
echo "  $ndiff differing lines; the first 10 (line number in its file):"
LC_ALL=C diff --unchanged-line-format= --old-line-format='  -%dn: %L' \
	--new-line-format='  +%dn: %L' -- "$exp" "$act" | head -n 10 | cut -c 1-300
exit 1
