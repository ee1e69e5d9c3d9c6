/* SPDX-License-Identifier: MIT */
/* Pure parsers (see parse.h): no I/O, no allocation, never exit, never print.
 *
 * Digits are parsed by hand rather than with strtol/strtod: those accept leading
 * blanks, signs, hex, "inf", "nan", exponents and locale decimal points, all of which
 * we would then have to reject again. */
#include "parse.h"

#include "log.h" /* log_reason */

#include <arpa/inet.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

/* 100 Julian years: far beyond any sane lease or wait, far below int64 overflow. */
#define DURATION_MAX_MS (36525LL * 86400000LL)

#define PREFIX_MAX 128

/* Longest user input echoed into a message; longer input is cut and marked "...". */
#define ECHO_MAX 40

/* Say why in err[errlen]; -1 for the caller to return. */
#define fail(err, errlen, ...) (log_reason((err), (errlen), __VA_ARGS__), -1)

/* Copy at most ECHO_MAX bytes of untrusted p into dst for a message, marking a cut with
 * "...". The bytes are copied as they are: every sink escapes what it prints (log_msg's
 * log_escape for stderr and syslog, the JSON and Prometheus writers for theirs), so
 * escaping here as well printed a backslash as "\x5cx5c". */
static void echo(char *dst, size_t dstsz, const char *p, size_t n)
{
	size_t o = 0, i;

	for (i = 0; i < n && i < ECHO_MAX && p[i] != '\0'; i++) {
		if (o + 1 >= dstsz)
			break;
		dst[o++] = p[i];
	}
	if (i < n && o + 3 < dstsz) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

#define ECHO_BUF (ECHO_MAX + 4)

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int all_digits(const char *p, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!is_digit(p[i]))
			return 0;
	return 1;
}

/* Decimal digits p[0..n) into *out, at most max. Returns -1 on anything else. */
static int digits_value(const char *p, size_t n, long long max, long long *out)
{
	long long v = 0;
	size_t i;

	if (!all_digits(p, n))
		return -1;
	for (i = 0; i < n; i++) {
		int d = p[i] - '0';
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* ---------------------------------------------------------------- URLs */

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode p[0..n) into out[outsz] (NUL-terminated). what names the field for
 * the reason; the field's content is never echoed (it may be the password). */
static int pct_decode(const char *p, size_t n, char *out, size_t outsz, const char *what, char *err,
                      size_t errlen)
{
	size_t i = 0, o = 0;

	while (i < n) {
		unsigned char c = (unsigned char)p[i];
		if (c == '%') {
			int hi, lo;
			if (n - i < 3 || (hi = hex_value(p[i + 1])) < 0 ||
			    (lo = hex_value(p[i + 2])) < 0)
				return fail(err, errlen, "bad %%-escape in URL %s (use %%XX)",
				            what);
			c = (unsigned char)(hi << 4 | lo);
			if (c == 0)
				return fail(err, errlen, "%%00 (NUL byte) not allowed in URL %s",
				            what);
			i += 3;
		} else {
			i++;
		}
		if (o + 1 >= outsz)
			return fail(err, errlen, "URL %s too long (max %zu bytes)", what,
			            outsz - 1);
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

/* userinfo = [user][:password]; an empty user or password counts as absent, as in
 * redis-py and redis-cli. */
static int parse_userinfo(const char *p, size_t n, struct url *u, char *err, size_t errlen)
{
	const char *colon = memchr(p, ':', n);
	size_t ulen = colon ? (size_t)(colon - p) : n;

	if (pct_decode(p, ulen, u->user, sizeof u->user, "user", err, errlen) < 0)
		return -1;
	u->has_user = u->user[0] != '\0';
	if (colon) {
		if (pct_decode(colon + 1, n - ulen - 1, u->password, sizeof u->password, "password",
		               err, errlen) < 0)
			return -1;
		u->has_password = u->password[0] != '\0';
	}
	return 0;
}

static int host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' ||
	       c == '.' || c == '_';
}

/* Ports and db numbers are echoed only when they are short digit strings: with a
 * missing '@' ("redis://:secret"), the "port" may be the password. */
static int bad_number(const char *what, const char *range, const char *p, size_t n, char *err,
                      size_t errlen)
{
	char q[ECHO_BUF];

	if (n == 0)
		return fail(err, errlen, "empty %s in URL (%s)", what, range);
	if (all_digits(p, n) && n <= 8) {
		echo(q, sizeof q, p, n);
		return fail(err, errlen, "bad %s '%s' in URL (%s)", what, q, range);
	}
	return fail(err, errlen, "bad %s in URL (not a number; %s)", what, range);
}

/* host[:port] or [v6]:port, p[0..n), into host[URL_HOST_MAX] and *port (defport when
 * absent). */
static int parse_hostport(const char *p, size_t n, char *host, int *port_out, int defport,
                          char *err, size_t errlen)
{
	const char *end = p + n, *port = NULL;
	long long v;

	if (n == 0)
		return fail(err, errlen, "empty host in URL");
	if (*p == '[') {
		const char *close = memchr(p, ']', n);
		const char *zone;
		size_t alen, i;
		char addr[INET6_ADDRSTRLEN];
		unsigned char bin[16];

		if (!close)
			return fail(err, errlen, "unterminated '[' in URL host");
		zone = memchr(p + 1, '%', (size_t)(close - p - 1));
		alen = (size_t)((zone ? zone : close) - p - 1);
		if (alen == 0 || alen >= sizeof addr)
			return fail(err, errlen, "bad IPv6 address in URL");
		memcpy(addr, p + 1, alen);
		addr[alen] = '\0';
		if (inet_pton(AF_INET6, addr, bin) != 1)
			return fail(err, errlen, "bad IPv6 address in URL");
		memcpy(host, addr, alen + 1);
		if (zone) {
			/* RFC 6874: the zone's '%' is itself escaped as "%25". */
			const char *z = zone + 3;
			size_t zlen = (size_t)(close - z);
			if (close - zone < 4 || strncmp(zone, "%25", 3) != 0)
				return fail(err, errlen,
				            "bad IPv6 zone in URL (use [addr%%25zone])");
			for (i = 0; i < zlen; i++)
				if (!host_char(z[i]) && z[i] != '~')
					return fail(err, errlen, "bad IPv6 zone in URL");
			if (alen + 1 + zlen >= URL_HOST_MAX)
				return fail(err, errlen, "URL host too long");
			host[alen] = '%';
			memcpy(host + alen + 1, z, zlen);
			host[alen + 1 + zlen] = '\0';
		}
		if (close + 1 < end) {
			if (close[1] != ':')
				return fail(err, errlen, "unexpected text after ']' in URL host");
			port = close + 2;
		}
	} else {
		const char *colon = memchr(p, ':', n);
		size_t hlen = colon ? (size_t)(colon - p) : n, i;

		if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
			return fail(err, errlen, "bad URL host (IPv6 addresses go in [])");
		if (hlen == 0)
			return fail(err, errlen, "empty host in URL");
		if (hlen >= URL_HOST_MAX)
			return fail(err, errlen, "URL host too long (max %zu bytes)",
			            (size_t)URL_HOST_MAX - 1);
		for (i = 0; i < hlen; i++)
			if (!host_char(p[i]))
				return fail(err, errlen,
				            "bad character in URL host (IPv6 addresses go in [])");
		memcpy(host, p, hlen);
		host[hlen] = '\0';
		if (colon)
			port = colon + 1;
	}
	*port_out = defport;
	if (port) {
		size_t plen = (size_t)(end - port);
		if (digits_value(port, plen, 65535, &v) < 0 || v < 1)
			return bad_number("port", "1..65535", port, plen, err, errlen);
		*port_out = (int)v;
	}
	return 0;
}

static int parse_db(const char *p, size_t n, struct url *u, char *err, size_t errlen)
{
	long long v;

	if (digits_value(p, n, INT_MAX, &v) < 0)
		return bad_number("db", "0..2147483647", p, n, err, errlen);
	u->db = (int)v;
	return 0;
}

/* redis:// and rediss://; s points after "//". */
static int parse_tcp(const char *s, struct url *u, char *err, size_t errlen)
{
	/* Redis URLs have no '@' after the authority, so the last '@' ends the userinfo:
	 * a raw '/', '?', '#' or '@' in a password then still works. */
	const char *at = strrchr(s, '@');
	const char *host = at ? at + 1 : s;
	size_t hlen = strcspn(host, "/?#");
	const char *rest = host + hlen;

	if (at && parse_userinfo(s, (size_t)(at - s), u, err, errlen) < 0)
		return -1;
	if (parse_hostport(host, hlen, u->host, &u->port, 6379, err, errlen) < 0)
		return -1;
	if (*rest == '?' || *rest == '#')
		return fail(
		    err, errlen,
		    "query or fragment not supported in redis:// URLs (use /DB for the db)");
	if (*rest == '/') {
		rest++;
		if (*rest != '\0' && parse_db(rest, strlen(rest), u, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* unix:///path[?db=N], unix:/path, and unix://[user[:password]]@/path as redis-py
 * writes it; s points after "unix:". */
static int parse_unix(const char *s, struct url *u, char *err, size_t errlen)
{
	const char *path = s, *q;
	size_t plen;

	if (strncmp(s, "//", 2) == 0) {
		path = s + 2;
		if (*path != '/') {
			/* Only "user:password@/path" may come between "//" and the path. */
			const char *at = strstr(path, "@/");
			if (!at)
				return fail(err, errlen,
				            "unix socket path in URL must be absolute "
				            "(unix:///path/to.sock)");
			if (parse_userinfo(path, (size_t)(at - path), u, err, errlen) < 0)
				return -1;
			path = at + 1;
		}
	}
	if (*path != '/')
		return fail(err, errlen,
		            "unix socket path in URL must be absolute (unix:///path/to.sock)");
	plen = strcspn(path, "?#");
	q = path + plen;
	if (pct_decode(path, plen, u->path, sizeof u->path, "socket path", err, errlen) < 0)
		return -1;
	if (*q == '#')
		return fail(err, errlen, "fragment not supported in unix:// URLs");
	if (*q == '?') {
		char name[ECHO_BUF];
		q++;
		if (strncmp(q, "db=", 3) != 0) {
			echo(name, sizeof name, q, strcspn(q, "=&#"));
			return fail(err, errlen, "unknown URL parameter '%s' (only db=N)", name);
		}
		q += 3;
		if (parse_db(q, strlen(q), u, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* The Sentinel master name: percent-decoded, printable, no blank (it is one argument
 * of SENTINEL get-master-addr-by-name and appears in messages). */
static int parse_master(const char *p, size_t n, struct url *u, char *err, size_t errlen)
{
	if (n == 0)
		return fail(err, errlen,
		            "missing master name in URL (redis-sentinel://HOST:PORT/MASTER)");
	if (pct_decode(p, n, u->master, sizeof u->master, "master name", err, errlen) < 0)
		return -1;
	for (const char *c = u->master; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f)
			return fail(err, errlen, "bad character in URL master name");
	return 0;
}

/* redis-sentinel:// and rediss-sentinel://; s points after "//". */
static int parse_sentinel(const char *s, struct url *u, char *err, size_t errlen)
{
	/* As in redis://, the last '@' ends the userinfo. */
	const char *at = strrchr(s, '@');
	const char *list = at ? at + 1 : s;
	size_t llen = strcspn(list, "/?#");
	const char *rest = list + llen, *p = list;

	if (at && parse_userinfo(s, (size_t)(at - s), u, err, errlen) < 0)
		return -1;
	for (;;) {
		size_t n = strcspn(p, ",/?#");
		if (u->nsentinels == URL_SENTINELS_MAX)
			return fail(err, errlen, "too many sentinels in URL (max %d)",
			            URL_SENTINELS_MAX);
		struct url_hostport *hp = &u->sentinel[u->nsentinels];
		if (n == 0)
			return fail(err, errlen, "empty sentinel address in URL");
		if (parse_hostport(p, n, hp->host, &hp->port, 26379, err, errlen) < 0)
			return -1;
		u->nsentinels++;
		p += n;
		if (*p != ',')
			break;
		p++;
	}
	memcpy(u->host, u->sentinel[0].host, sizeof u->host);
	u->port = u->sentinel[0].port;
	if (*rest == '/') {
		size_t mlen = strcspn(++rest, "/?#");
		if (parse_master(rest, mlen, u, err, errlen) < 0)
			return -1;
		rest += mlen;
	}
	if (*rest == '?' || *rest == '#')
		return fail(err, errlen,
		            "query or fragment not supported in redis-sentinel:// URLs "
		            "(use /MASTER/DB)");
	if (!u->master[0])
		return fail(err, errlen,
		            "missing master name in URL (redis-sentinel://HOST:PORT/MASTER)");
	if (*rest == '/') {
		rest++;
		if (*rest != '\0' && parse_db(rest, strlen(rest), u, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int parse_url(const char *s, struct url *u, char *err, size_t errlen)
{
	const char *p;
	size_t slen;
	int rc;

	memset(u, 0, sizeof *u);
	if (!s || !*s)
		return fail(err, errlen, "empty URL");
	/* Control bytes are never legitimate raw; reject them up front so no field (and no
	 * reason) can carry one. */
	for (p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return fail(err, errlen, "control character in URL");
	if ((*s == '"' || *s == '\'') && s[1] && s[strlen(s) - 1] == *s)
		return fail(err, errlen,
		            "the URL is in quotes (%c...%c), which are not removed: in a config "
		            "file, write url = redis://HOST:PORT without them",
		            *s, *s);
	if (!strstr(s, "://") && strncasecmp(s, "unix:", 5) != 0)
		return fail(err, errlen,
		            "missing URL scheme: write redis://HOST:PORT (or rediss://HOST:PORT "
		            "for TLS, unix:///path/to.sock)");
	slen = strcspn(s, ":");
	for (p = s; p < s + slen; p++)
		if (!host_char(*p) && *p != '+')
			break;
	if (slen == 0 || s[slen] != ':' || p < s + slen || slen > 20)
		return fail(err, errlen,
		            "missing URL scheme (expected redis://, rediss:// or unix://)");

	if (slen == 5 && strncasecmp(s, "redis", 5) == 0 && strncmp(s + 5, "://", 3) == 0) {
		u->scheme = URL_REDIS;
		rc = parse_tcp(s + 8, u, err, errlen);
	} else if (slen == 6 && strncasecmp(s, "rediss", 6) == 0 && strncmp(s + 6, "://", 3) == 0) {
		u->scheme = URL_REDISS;
		rc = parse_tcp(s + 9, u, err, errlen);
	} else if (slen == 4 && strncasecmp(s, "unix", 4) == 0) {
		u->scheme = URL_UNIX;
		rc = parse_unix(s + 5, u, err, errlen);
	} else if (slen == 14 && strncasecmp(s, "redis-sentinel", 14) == 0 &&
	           strncmp(s + 14, "://", 3) == 0) {
		u->scheme = URL_SENTINEL;
		rc = parse_sentinel(s + 17, u, err, errlen);
	} else if (slen == 15 && strncasecmp(s, "rediss-sentinel", 15) == 0 &&
	           strncmp(s + 15, "://", 3) == 0) {
		u->scheme = URL_SENTINELS;
		rc = parse_sentinel(s + 18, u, err, errlen);
	} else if (((slen == 5 || slen == 6) && strncasecmp(s, "rediss", slen) == 0) ||
	           (slen == 14 && strncasecmp(s, "redis-sentinel", 14) == 0) ||
	           (slen == 15 && strncasecmp(s, "rediss-sentinel", 15) == 0)) {
		rc = fail(err, errlen, "expected '//' after '%.*s:' in URL", (int)slen, s);
	} else {
		char q[ECHO_BUF];
		echo(q, sizeof q, s, slen);
		rc = fail(err, errlen,
		          "unknown URL scheme '%s' (expected redis://, rediss://, unix:// or "
		          "redis-sentinel://)",
		          q);
	}
	if (rc < 0)
		explicit_bzero(u, sizeof *u); /* a half-parsed password must not linger */
	return rc;
}

int url_password_span(const char *s, size_t *off, size_t *len)
{
	const char *rest = strstr(s, "://"), *at, *colon;

	if (!rest || rest[3] == '/')
		return 0;
	rest += 3;
	/* As the parsers read it: the last '@' ends a redis:// userinfo (a raw '/' may be
	 * in the password); a unix:// userinfo ends at the first "@/". */
	if (rest - s == 7 && strncasecmp(s, "unix", 4) == 0) {
		at = strstr(rest, "@/");
	} else {
		at = strrchr(rest, '@');
	}
	if (!at)
		return 0;
	colon = memchr(rest, ':', (size_t)(at - rest));
	if (!colon)
		return 0;
	*off = (size_t)(colon + 1 - s);
	*len = (size_t)(at - colon - 1);
	return 1;
}

/* ---------------------------------------------------------------- config lines */

static int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static char *trim(char *s)
{
	while (*s && blank(*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && blank(e[-1]))
		*--e = '\0';
	return s;
}

int parse_config_line(char *line, char **key, char **val, char *err, size_t errlen)
{
	char *k = trim(line), *eq, *v = NULL;

	*key = *val = NULL;
	if (*k == '#' || *k == '\0')
		return 0;
	eq = strchr(k, '=');
	if (eq) {
		*eq = '\0';
		v = trim(eq + 1);
		k = trim(k);
	} else {
		/* "verbose # comment": a flag with a trailing comment. */
		char *hash = strchr(k, '#');
		if (hash && hash > k && blank(hash[-1])) {
			*hash = '\0';
			k = trim(k);
		}
	}
	if (*k == '\0')
		return fail(err, errlen, "no setting name before '=' (expected 'NAME = VALUE')");
	for (char *p = k; *p; p++) {
		if (blank(*p)) {
			/* Only the first word: the rest may be a secret ("password s3cret"). */
			char q[ECHO_BUF];
			echo(q, sizeof q, k, (size_t)(p - k));
			return fail(
			    err, errlen,
			    "'%s ...' is not a setting (expected 'NAME = VALUE', one per line)", q);
		}
	}
	/* A blank then '#' starts a comment, except in a password, which is taken as it
	 * stands ('#' and blanks included). */
	if (v && strcmp(k, "password") != 0 && strcmp(k, "sentinel-password") != 0) {
		for (char *p = v; *p; p++) {
			if (*p == '#' && (p == v || blank(p[-1]))) {
				*p = '\0';
				v = trim(v);
				break;
			}
		}
	}
	*key = k;
	*val = v;
	return 1;
}

/* ---------------------------------------------------------------- durations */

static const struct {
	const char *name;
	int64_t ms;
} duration_units[] = {
    {"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
};

/* The unit of the len letters at u: its index in duration_units, or -1. */
static int duration_unit(const char *u, size_t len)
{
	for (int i = 0; i < (int)(sizeof duration_units / sizeof duration_units[0]); i++)
		if (strlen(duration_units[i].name) == len &&
		    strncmp(u, duration_units[i].name, len) == 0)
			return i;
	return -1;
}

/* One term of a duration at *p: digits, an optional fraction, a unit (letters, maybe
 * none); *p moves past it. Its milliseconds (a sub-ms rest rounds up), -1 when it is
 * not a term, -2 when too large. *unit: the unit's index. */
static int64_t duration_term(const char **p, int *unit)
{
	const char *ip = *p, *fp = NULL, *u;
	size_t ilen = strspn(ip, "0123456789"), flen = 0, ulen;
	int64_t whole = 0, frac = 0, mult;
	int remainder = 0;

	u = ip + ilen;
	if (*u == '.') {
		fp = u + 1;
		flen = strspn(fp, "0123456789");
		u = fp + flen;
	}
	ulen = strspn(u, "abcdefghijklmnopqrstuvwxyz");
	*unit = duration_unit(u, ulen);
	if ((ilen == 0 && flen == 0) || *unit < 0)
		return -1;
	*p = u + ulen;
	mult = duration_units[*unit].ms;
	for (size_t i = 0; i < ilen; i++) {
		whole = whole * 10 + (ip[i] - '0');
		if (whole > DURATION_MAX_MS)
			return -2;
	}
	/* The fraction times the unit, exactly: long multiplication from the last digit
	 * keeps the carry below mult, and any non-zero low digit means a sub-ms rest. */
	for (size_t i = flen; i-- > 0;) {
		int64_t t = (fp[i] - '0') * mult + frac;
		if (t % 10)
			remainder = 1;
		frac = t / 10;
	}
	if (whole > DURATION_MAX_MS / mult || whole * mult + frac + remainder > DURATION_MAX_MS)
		return -2;
	return whole * mult + frac + remainder;
}

/* One term (30s, 1.5h, a bare 30: seconds) or several, largest unit first, each with
 * its unit (1h30m, 1m30s, 2h15m10s, 1s500ms), summed. */
int parse_duration(const char *s, int64_t *ms, char *err, size_t errlen)
{
	char q[ECHO_BUF];
	int64_t sum = 0;
	int unit, last = -1, terms = 0;

	if (!s || !*s)
		return fail(err, errlen, "empty duration");
	echo(q, sizeof q, s, strlen(s));
	if (*s == '-')
		return fail(err, errlen, "negative duration '%s'", q);
	for (const char *p = s; *p; terms++) {
		int64_t t = duration_term(&p, &unit);
		if (t == -2)
			return fail(err, errlen, "duration '%s' too large (max 100 years)", q);
		/* after the first term, units only, each smaller than the one before */
		if (t < 0 ||
		    (terms > 0 &&
		     (unit == 0 || duration_units[unit].ms >= duration_units[last].ms)) ||
		    (unit == 0 && *p))
			return fail(err, errlen,
			            "bad duration '%s' (e.g. 500ms, 30s, 5m, 1h30m, 2h, 1d)", q);
		last = unit;
		if (t > DURATION_MAX_MS - sum)
			return fail(err, errlen, "duration '%s' too large (max 100 years)", q);
		sum += t;
	}
	*ms = sum;
	return 0;
}

/* ---------------------------------------------------------------- integers */

int parse_int(const char *s, long long min, long long max, long long *out, char *err, size_t errlen)
{
	unsigned long long mag = 0, limit;
	const char *p = s;
	int neg = 0;
	char q[ECHO_BUF];

	if (!s || !*s)
		return fail(err, errlen, "empty number");
	echo(q, sizeof q, s, strlen(s));
	if (*p == '-' && min < 0) {
		neg = 1;
		p++;
	}
	if (!all_digits(p, strlen(p)))
		return fail(err, errlen, "'%s' is not a whole number", q);
	/* Accumulate the magnitude unsigned so LLONG_MIN is reachable without overflow. */
	limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; *p; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (mag > (limit - d) / 10)
			goto range;
		mag = mag * 10 + d;
	}
	if (neg) {
		long long v =
		    mag == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag;
		if (v < min || v > max)
			goto range;
		*out = v;
	} else {
		if ((long long)mag < min || (long long)mag > max)
			goto range;
		*out = (long long)mag;
	}
	return 0;
range:
	return fail(err, errlen, "%s is out of range (%lld..%lld)", q, min, max);
}

/* ---------------------------------------------------------------- signals */

static const struct {
	const char *name;
	int sig;
} signals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
#ifdef SIGIO
    {"IO", SIGIO},
#endif
#ifdef SIGPWR
    {"PWR", SIGPWR},
#endif
    {"SYS", SIGSYS},
};

int parse_signal(const char *s, int *sig, char *err, size_t errlen)
{
	const char *name = s;
	long long v;
	size_t i;
	char q[ECHO_BUF];

	if (!s || !*s)
		return fail(err, errlen, "empty signal name");
	echo(q, sizeof q, s, strlen(s));
	if (is_digit(*s)) {
		if (parse_int(s, 1, 64, &v, NULL, 0) < 0)
			return fail(err, errlen, "bad signal number '%s' (1..64)", q);
		*sig = (int)v;
		return 0;
	}
	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	for (i = 0; i < sizeof signals / sizeof signals[0]; i++) {
		if (strcasecmp(name, signals[i].name) == 0) {
			*sig = signals[i].sig;
			return 0;
		}
	}
	return fail(err, errlen, "unknown signal '%s' (e.g. TERM, KILL, HUP, USR1 or 1..64)", q);
}

const char *signal_name(int sig)
{
	size_t i;

	for (i = 0; i < sizeof signals / sizeof signals[0]; i++)
		if (signals[i].sig == sig)
			return signals[i].name;
	return "?";
}

/* ---------------------------------------------------------------- key parts */

/* Printable ASCII without space: the name is part of a Redis key, an environment
 * variable and --list output, and '{' '}' would move the hash tag. */
static int key_part(const char *s, size_t min, size_t max, const char *what, char *err,
                    size_t errlen)
{
	size_t n, i;

	if (!s)
		s = "";
	n = strlen(s);
	if (n < min)
		return fail(err, errlen, "empty %s", what);
	if (n > max)
		return fail(err, errlen, "%s too long (%zu bytes; max %zu)", what, n, max);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '{' || c == '}')
			return fail(err, errlen,
			            "'%c' not allowed in %s (it delimits the hash tag)", c, what);
		if (c <= 0x20 || c >= 0x7f)
			return fail(err, errlen,
			            "bad byte 0x%02x in %s (printable ASCII without spaces only)",
			            c, what);
	}
	return 0;
}

int parse_lock_name(const char *s, char *err, size_t errlen)
{
	return key_part(s, 1, LOCK_NAME_MAX, "lock name", err, errlen);
}

int parse_prefix(const char *s, char *err, size_t errlen)
{
	return key_part(s, 0, PREFIX_MAX, "key prefix", err, errlen);
}
