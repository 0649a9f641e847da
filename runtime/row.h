/*
 * row.h — building one CSV result line in a process-local buffer: integers
 * in decimal, strings with RFC 4180 minimal quoting (quoted only when they
 * hold a comma, a quote, CR or LF; quotes doubled), fields separated by
 * commas.  The output contract of `sfs run --output` (docs/nexmark.md) and of the
 * SQLite oracle (tests/nexmark/).
 */
#ifndef SFS_RUNTIME_ROW_H
#define SFS_RUNTIME_ROW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RT_ROW_MAX 8192u

struct rt_row {
	size_t len;
	int fields;
	char buf[RT_ROW_MAX];
};

static inline void rt_row_init(struct rt_row *r)
{
	r->len = 0;
	r->fields = 0;
}

static inline void rt_row_sep(struct rt_row *r)
{
	if (r->fields++ && r->len < RT_ROW_MAX)
		r->buf[r->len++] = ',';
}

static inline void rt_row_i64(struct rt_row *r, int64_t v)
{
	char tmp[24];
	int n = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	rt_row_sep(r);
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[n++] = '-';
	if (r->len + (size_t)n > RT_ROW_MAX)
		return;
	while (n)
		r->buf[r->len++] = tmp[--n];
}

static inline void rt_row_str(struct rt_row *r, const char *s, size_t len)
{
	int quote = 0;

	rt_row_sep(r);
	for (size_t i = 0; i < len; i++)
		if (s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n') {
			quote = 1;
			break;
		}
	if (r->len + 2 * len + 2 > RT_ROW_MAX)
		return;
	if (!quote) {
		memcpy(r->buf + r->len, s, len);
		r->len += len;
		return;
	}
	r->buf[r->len++] = '"';
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '"')
			r->buf[r->len++] = '"';
		r->buf[r->len++] = s[i];
	}
	r->buf[r->len++] = '"';
}

/* A NULL: an empty field. */
static inline void rt_row_null(struct rt_row *r)
{
	rt_row_sep(r);
}

/* yyyy-MM-dd (UTC) of epoch milliseconds. */
static inline void rt_row_day(struct rt_row *r, int64_t ms)
{
	/* civil_from_days (H. Hinnant), exact for the proleptic Gregorian calendar */
	int64_t z = (ms >= 0 ? ms / 86400000 : (ms - 86399999) / 86400000) + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;
	char tmp[16];

	y += m <= 2;
	tmp[0] = (char)('0' + y / 1000 % 10);
	tmp[1] = (char)('0' + y / 100 % 10);
	tmp[2] = (char)('0' + y / 10 % 10);
	tmp[3] = (char)('0' + y % 10);
	tmp[4] = '-';
	tmp[5] = (char)('0' + m / 10);
	tmp[6] = (char)('0' + m % 10);
	tmp[7] = '-';
	tmp[8] = (char)('0' + d / 10);
	tmp[9] = (char)('0' + d % 10);
	rt_row_str(r, tmp, 10);
}

#endif
