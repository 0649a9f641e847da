#!/usr/bin/env bash
# oracle.sh QUERY DATA_DIR OUT_CSV — the correctness oracle for the Nexmark
# queries: runs tests/nexmark/QUERY.sql as a SQLite batch over the events
# `sfs gen` wrote to DATA_DIR (person.csv, auction.csv, bid.csv) and writes
# the result the streaming engine must hold at end of input to OUT_CSV.
#
# QUERY is q3 q4 q5 q7 q8 q9 q11 q15 q17 q18 q19 q20 (a bare number works too).
#
# The CSVs are loaded once into DATA_DIR/nexmark.db (rebuilt when missing, older
# than a CSV, or of another schema version), with typed INTEGER columns, the
# indexes the queries use, and one derived column per event:
#
#   wm = the watermark in force when the event arrives
#      = max(dateTime of every event, of any kind, with a lower seq) - 4000,
#        or -9223372036854775808 (no watermark yet) for the first event.
#
# That is Flink's `WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND`
# on the one Nexmark source all three views read, emitted after every event
# (the idealization: Flink emits it periodically, so its watermark can only
# lag this one).  Window operators drop an event's contribution to a window
# [start, end) when end - 1 <= wm (Flink: window.maxTimestamp() <= watermark);
# see the windowed queries' comments.
#
# Each QUERY.sql defines a view (or table) named `result` whose columns are the
# sink columns; this script formats it: a header of the column names in lower
# case, then one line per row, sorted bytewise (memcmp of the whole record),
# fields quoted only when they hold a comma, a double quote, CR or LF (quotes
# doubled), integers in decimal, NULL as an empty field, "\n" line ends.
#
# Exit: 0 done; 2 usage, unknown query, missing or malformed input; 1 any
# other failure.  SFS_ORACLE_SIMULATE_ALL=1 sets the SQL parameter
# @simulate_all (q11: every bidder through the event-by-event session
# simulation instead of the proven-equivalent fast path; a self-check).
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCHEMA_VERSION=3
QUERIES="q3 q4 q5 q7 q8 q9 q11 q15 q17 q18 q19 q20"

usage() { echo "oracle.sh: $*" >&2; exit 2; }
fail() { echo "oracle.sh: $*" >&2; exit 1; }

[ $# -eq 3 ] || usage "usage: oracle.sh QUERY DATA_DIR OUT_CSV (QUERY one of: $QUERIES)"
q=$1 dir=$2 out=$3
case $q in [0-9]*) q=q$q ;; esac
case " $QUERIES " in
*" $q "*) ;;
*) usage "unknown query '$1' (one of: $QUERIES)" ;;
esac
sql=$HERE/$q.sql
[ -f "$sql" ] || usage "missing query file $sql"
command -v sqlite3 >/dev/null 2>&1 || usage "sqlite3 not found (apt-get install sqlite3)"
[ -d "$dir" ] || usage "no such data directory: $dir"
for f in person auction bid; do
	[ -f "$dir/$f.csv" ] || usage "missing input file $dir/$f.csv"
done

# The header each CSV must start with (the `sfs gen` contract).
expect_header() {
	local file=$1 want=$2 got
	IFS= read -r got <"$file" || got=
	got=${got%$'\r'}
	[ "$got" = "$want" ] || usage "$file: header is '$got', expected '$want'"
}
expect_header "$dir/person.csv" "seq,id,name,emailAddress,creditCard,city,state,dateTime,extra"
expect_header "$dir/auction.csv" "seq,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra"
expect_header "$dir/bid.csv" "seq,auction,bidder,price,channel,url,dateTime,extra"

db=$dir/nexmark.db

stale() {
	[ -f "$db" ] || return 0
	local f
	for f in person auction bid; do
		[ "$dir/$f.csv" -nt "$db" ] && return 0
	done
	[ "$(sqlite3 -readonly "$db" 'PRAGMA user_version' 2>/dev/null)" = "$SCHEMA_VERSION" ] || return 0
	return 1
}

TMPFILES=()
cleanup() { [ ${#TMPFILES[@]} -eq 0 ] || rm -f "${TMPFILES[@]}"; }
trap cleanup EXIT

# load: build DATA_DIR/nexmark.db.tmp.PID from the CSVs, then rename it into
# place (atomic: concurrent runs on one directory each see a whole database).
load() {
	local tmp=nexmark.db.tmp.$$ msg errf rc
	errf=$(mktemp "${TMPDIR:-/tmp}/oracle-err.XXXXXX") || fail "mktemp failed"
	TMPFILES+=("$dir/$tmp" "$dir/$tmp-journal" "$errf")
	rm -f "$dir/$tmp"
	msg=$(cd "$dir" && sqlite3 -bail "$tmp" 2>"$errf" <<EOF
.output /dev/null
PRAGMA journal_mode = off;
.output stdout
PRAGMA synchronous = off;
PRAGMA cache_size = -524288;
PRAGMA temp_store = file;
PRAGMA user_version = 0;

CREATE TEMP TABLE person_csv(seq INTEGER, id INTEGER, name TEXT, emailAddress TEXT,
  creditCard TEXT, city TEXT, state TEXT, dateTime INTEGER, extra TEXT);
CREATE TEMP TABLE auction_csv(seq INTEGER, id INTEGER, itemName TEXT, description TEXT,
  initialBid INTEGER, reserve INTEGER, dateTime INTEGER, expires INTEGER, seller INTEGER,
  category INTEGER, extra TEXT);
CREATE TEMP TABLE bid_csv(seq INTEGER, auction INTEGER, bidder INTEGER, price INTEGER,
  channel TEXT, url TEXT, dateTime INTEGER, extra TEXT);
.import --csv --skip 1 --schema temp person.csv person_csv
.import --csv --skip 1 --schema temp auction.csv auction_csv
.import --csv --skip 1 --schema temp bid.csv bid_csv

-- Every integer column must hold an integer (a text here means a malformed CSV).
CREATE TEMP TABLE bad(what TEXT);
INSERT INTO bad SELECT 'person.csv seq ' || seq FROM person_csv
 WHERE typeof(seq) <> 'integer' OR typeof(id) <> 'integer' OR typeof(dateTime) <> 'integer' LIMIT 1;
INSERT INTO bad SELECT 'auction.csv seq ' || seq FROM auction_csv
 WHERE typeof(seq) <> 'integer' OR typeof(id) <> 'integer' OR typeof(initialBid) <> 'integer'
    OR typeof(reserve) <> 'integer' OR typeof(dateTime) <> 'integer'
    OR typeof(expires) <> 'integer' OR typeof(seller) <> 'integer'
    OR typeof(category) <> 'integer' LIMIT 1;
INSERT INTO bad SELECT 'bid.csv seq ' || seq FROM bid_csv
 WHERE typeof(seq) <> 'integer' OR typeof(auction) <> 'integer' OR typeof(bidder) <> 'integer'
    OR typeof(price) <> 'integer' OR typeof(dateTime) <> 'integer' LIMIT 1;
SELECT 'MALFORMED: non-integer value in ' || what FROM bad LIMIT 1;

-- The watermark each event sees on arrival (see the top of oracle.sh).
-- seq is the primary key: a seq used twice, in any of the files, fails here.
CREATE TEMP TABLE wmk(seq INTEGER PRIMARY KEY, wm INTEGER NOT NULL);
INSERT INTO wmk
SELECT seq, coalesce(max(dateTime) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING
                                                        AND 1 PRECEDING) - 4000,
                     -9223372036854775808)
  FROM (SELECT seq, dateTime FROM person_csv UNION ALL
        SELECT seq, dateTime FROM auction_csv UNION ALL
        SELECT seq, dateTime FROM bid_csv);

CREATE TABLE person(seq INTEGER PRIMARY KEY, id INTEGER NOT NULL, name TEXT,
  emailAddress TEXT, creditCard TEXT, city TEXT, state TEXT, dateTime INTEGER NOT NULL,
  extra TEXT, wm INTEGER NOT NULL);
CREATE TABLE auction(seq INTEGER PRIMARY KEY, id INTEGER NOT NULL, itemName TEXT,
  description TEXT, initialBid INTEGER, reserve INTEGER, dateTime INTEGER NOT NULL,
  expires INTEGER NOT NULL, seller INTEGER NOT NULL, category INTEGER NOT NULL, extra TEXT,
  wm INTEGER NOT NULL);
CREATE TABLE bid(seq INTEGER PRIMARY KEY, auction INTEGER NOT NULL, bidder INTEGER NOT NULL,
  price INTEGER NOT NULL, channel TEXT, url TEXT, dateTime INTEGER NOT NULL, extra TEXT,
  wm INTEGER NOT NULL);
INSERT INTO person SELECT p.*, w.wm FROM person_csv p JOIN wmk w USING (seq) ORDER BY seq;
INSERT INTO auction SELECT a.*, w.wm FROM auction_csv a JOIN wmk w USING (seq) ORDER BY seq;
INSERT INTO bid SELECT b.*, w.wm FROM bid_csv b JOIN wmk w USING (seq) ORDER BY seq;

CREATE INDEX person_id ON person(id);
CREATE INDEX auction_id ON auction(id, dateTime, expires);
CREATE INDEX auction_category ON auction(category);
CREATE INDEX bid_auction ON bid(auction, dateTime, price);
CREATE INDEX bid_bidder ON bid(bidder, auction);
CREATE INDEX bid_price ON bid(price, dateTime);
ANALYZE;
PRAGMA user_version = $SCHEMA_VERSION;
EOF
	)
	rc=$?
	# A short or long CSV row: sqlite3 pads or truncates it with a warning.
	grep -q 'columns but found' "$errf" &&
		usage "$dir/$(grep -m 1 'columns but found' "$errf" | sed 's/ - .*//')"
	case $msg in
	*MALFORMED:*) usage "$dir: ${msg#*MALFORMED: }" ;;
	esac
	grep -q 'UNIQUE constraint failed: wmk.seq' "$errf" &&
		usage "$dir: a seq appears twice in the CSVs"
	if [ $rc -ne 0 ] || [ -s "$errf" ]; then
		fail "$dir: loading the CSVs failed: $(head -n 3 "$errf" | tr '\n' ' ')"
	fi
	mv -f "$dir/$tmp" "$db" || fail "cannot rename $dir/$tmp to $db"
}

stale && load

# run: the query, then the formatter.  The formatter's SELECT is generated
# from the column list of `result` (.output to a file, then .read).
fmt=$(mktemp "${TMPDIR:-/tmp}/oracle-fmt.XXXXXX.sql") || fail "mktemp failed"
outtmp=$out.tmp.$$
TMPFILES+=("$fmt" "$outtmp")
params=
[ "${SFS_ORACLE_SIMULATE_ALL:-0}" = 1 ] && params=".parameter set @simulate_all 1"

{
	cat <<EOF
.bail on
PRAGMA cache_size = -524288;
PRAGMA temp_store = file;
$params
EOF
	cat "$sql"
	cat <<EOF

.headers off
.mode list
.nullvalue ''
SELECT * FROM result LIMIT 0;
.output $fmt
SELECT 'SELECT ' || quote((SELECT group_concat(lower(name), ',')
                             FROM (SELECT name FROM pragma_table_info('result') ORDER BY cid))) || ';';
SELECT 'SELECT line FROM (SELECT '
    || (SELECT group_concat(f, ' || '','' || ')
          FROM (SELECT replace('(CASE WHEN @c IS NULL THEN '''' '
                            || 'WHEN typeof(@c) IN (''text'', ''blob'') AND '
                            || '(instr(@c, '','') OR instr(@c, ''"'') OR '
                            || 'instr(@c, char(10)) OR instr(@c, char(13))) '
                            || 'THEN ''"'' || replace(@c, ''"'', ''""'') || ''"'' '
                            || 'ELSE CAST(@c AS TEXT) END)',
                               '@c', '"' || replace(name, '"', '""') || '"') AS f
                  FROM pragma_table_info('result') ORDER BY cid))
    || ' AS line FROM result) ORDER BY line;';
.output stdout
.read $fmt
EOF
} | sqlite3 -readonly "$db" >"$outtmp" || fail "$q failed on $dir"

mv -f "$outtmp" "$out" || fail "cannot write $out"
