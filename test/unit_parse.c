/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/parse.c: every accepted form, every rejection, and the promise
 * that no reason ever contains the password. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

#include "unit.h"

static char err[256];

/* ---------------------------------------------------------------- URL helpers */

static struct url u;

static int url_ok(const char *s)
{
	int rc;

	err[0] = '\0';
	rc = parse_url(s, &u, err, sizeof err);
	if (rc != 0)
		fprintf(stderr, "  parse_url(\"%s\") failed: %s\n", s, err);
	return rc == 0;
}

/* A rejection must give a reason that mentions want and not secret. The reason quotes
 * the input as it is: the sink escapes it (test/messages.bats checks the printed line). */
static int url_bad(const char *s, const char *want, const char *secret)
{
	int rc;

	strcpy(err, "(unset)");
	rc = parse_url(s, &u, err, sizeof err);
	if (rc != -1) {
		fprintf(stderr, "  parse_url(\"%s\") accepted\n", s);
		return 0;
	}
	if (!err[0] || strcmp(err, "(unset)") == 0) {
		fprintf(stderr, "  parse_url(\"%s\"): bad reason '%s'\n", s, err);
		return 0;
	}
	if (want && !strstr(err, want)) {
		fprintf(stderr, "  parse_url(\"%s\"): reason '%s' lacks '%s'\n", s, err, want);
		return 0;
	}
	if (secret && strstr(err, secret)) {
		fprintf(stderr, "  parse_url(\"%s\"): reason '%s' leaks the password\n", s, err);
		return 0;
	}
	/* A failed parse must not leave a half-decoded password behind. */
	if (u.password[0] || u.has_password) {
		fprintf(stderr, "  parse_url(\"%s\"): password left in struct\n", s);
		return 0;
	}
	return 1;
}

static void test_url_accept(void)
{
	CHECK(url_ok("redis://localhost"));
	CHECK(u.scheme == URL_REDIS && strcmp(u.host, "localhost") == 0);
	CHECK(u.port == 6379 && u.db == 0 && !u.has_user && !u.has_password);
	CHECK(u.path[0] == '\0');

	CHECK(url_ok("redis://127.0.0.1:6380/3"));
	CHECK(strcmp(u.host, "127.0.0.1") == 0 && u.port == 6380 && u.db == 3);

	CHECK(url_ok("redis://h/"));
	CHECK(u.db == 0 && u.port == 6379);
	CHECK(url_ok("redis://h:1"));
	CHECK(u.port == 1);
	CHECK(url_ok("redis://h:65535/15"));
	CHECK(u.port == 65535 && u.db == 15);
	CHECK(url_ok("REDIS://Example.COM"));
	CHECK(u.scheme == URL_REDIS && strcmp(u.host, "Example.COM") == 0);
	CHECK(url_ok("redis://my_host-1.example.com:7000/0"));
	CHECK(strcmp(u.host, "my_host-1.example.com") == 0 && u.port == 7000);

	CHECK(url_ok("rediss://cache.example.com:6380/2"));
	CHECK(u.scheme == URL_REDISS && strcmp(u.host, "cache.example.com") == 0);
	CHECK(u.port == 6380 && u.db == 2);
	CHECK(url_ok("rediss://cache"));
	CHECK(u.scheme == URL_REDISS && u.port == 6379);

	/* user:password@, :password@, user@ */
	CHECK(url_ok("redis://alice:s3cret@h:1234/5"));
	CHECK(u.has_user && strcmp(u.user, "alice") == 0);
	CHECK(u.has_password && strcmp(u.password, "s3cret") == 0);
	CHECK(strcmp(u.host, "h") == 0 && u.port == 1234 && u.db == 5);
	CHECK(url_ok("redis://:s3cret@h"));
	CHECK(!u.has_user && u.user[0] == '\0');
	CHECK(u.has_password && strcmp(u.password, "s3cret") == 0);
	CHECK(url_ok("redis://alice@h"));
	CHECK(u.has_user && strcmp(u.user, "alice") == 0 && !u.has_password);
	CHECK(url_ok("redis://alice:@h"));
	CHECK(u.has_user && !u.has_password);
	CHECK(url_ok("redis://@h"));
	CHECK(!u.has_user && !u.has_password && strcmp(u.host, "h") == 0);

	/* percent-decoding, incl. '@' and ':' in the password */
	CHECK(url_ok("redis://us%65r:p%40ss%3Aword%25@h"));
	CHECK(strcmp(u.user, "user") == 0);
	CHECK(strcmp(u.password, "p@ss:word%") == 0);
	CHECK(url_ok("redis://a%3ab:x@h"));
	CHECK(strcmp(u.user, "a:b") == 0 && strcmp(u.password, "x") == 0);
	/* raw ':' '@' '/' in a password: the first ':' splits, the last '@' ends it */
	CHECK(url_ok("redis://u:pa:ss@w/rd@h:7/1"));
	CHECK(strcmp(u.user, "u") == 0 && strcmp(u.password, "pa:ss@w/rd") == 0);
	CHECK(strcmp(u.host, "h") == 0 && u.port == 7 && u.db == 1);

	/* IPv6 */
	CHECK(url_ok("redis://[::1]:6380"));
	CHECK(strcmp(u.host, "::1") == 0 && u.port == 6380);
	CHECK(url_ok("redis://[::1]"));
	CHECK(strcmp(u.host, "::1") == 0 && u.port == 6379);
	CHECK(url_ok("rediss://u:p@[2001:db8::10]:7000/4"));
	CHECK(strcmp(u.host, "2001:db8::10") == 0 && u.port == 7000 && u.db == 4);
	CHECK(strcmp(u.user, "u") == 0 && strcmp(u.password, "p") == 0);
	CHECK(url_ok("redis://[::ffff:127.0.0.1]/1"));
	CHECK(strcmp(u.host, "::ffff:127.0.0.1") == 0 && u.db == 1);
	CHECK(url_ok("redis://[fe80::1%25eth0]:6379"));
	CHECK(strcmp(u.host, "fe80::1%eth0") == 0);

	/* unix sockets */
	CHECK(url_ok("unix:///run/redis/redis.sock"));
	CHECK(u.scheme == URL_UNIX && strcmp(u.path, "/run/redis/redis.sock") == 0);
	CHECK(u.host[0] == '\0' && u.port == 0 && u.db == 0);
	CHECK(url_ok("unix:///tmp/r.sock?db=7"));
	CHECK(strcmp(u.path, "/tmp/r.sock") == 0 && u.db == 7);
	CHECK(url_ok("unix:/tmp/r.sock"));
	CHECK(strcmp(u.path, "/tmp/r.sock") == 0);
	CHECK(url_ok("unix:///tmp/with%20space%3F.sock"));
	CHECK(strcmp(u.path, "/tmp/with space?.sock") == 0);
	CHECK(url_ok("unix:///tmp/a@b.sock"));
	CHECK(strcmp(u.path, "/tmp/a@b.sock") == 0 && !u.has_user);
	CHECK(url_ok("unix://:pw@/tmp/r.sock?db=2"));
	CHECK(u.has_password && strcmp(u.password, "pw") == 0 && !u.has_user);
	CHECK(strcmp(u.path, "/tmp/r.sock") == 0 && u.db == 2);
	CHECK(url_ok("unix://bob:pw@/tmp/r.sock"));
	CHECK(strcmp(u.user, "bob") == 0 && strcmp(u.password, "pw") == 0);

	/* limits: the longest fields that fit */
	{
		char s[1200], p[URL_PASS_MAX];
		memset(p, 'x', sizeof p - 1);
		p[sizeof p - 1] = '\0';
		snprintf(s, sizeof s, "redis://:%s@h", p);
		CHECK(url_ok(s));
		CHECK(strlen(u.password) == URL_PASS_MAX - 1);

		char path[URL_PATH_MAX];
		memset(path, 'p', sizeof path - 1);
		path[0] = '/';
		path[sizeof path - 1] = '\0';
		snprintf(s, sizeof s, "unix://%s", path);
		CHECK(url_ok(s));
		CHECK(strlen(u.path) == URL_PATH_MAX - 1);

		char host[URL_HOST_MAX];
		memset(host, 'a', sizeof host - 1);
		host[sizeof host - 1] = '\0';
		snprintf(s, sizeof s, "redis://%s:1", host);
		CHECK(url_ok(s));
		CHECK(strlen(u.host) == URL_HOST_MAX - 1);
	}

	/* *u is zeroed first: nothing survives from an earlier parse */
	CHECK(url_ok("redis://a:b@h:1/2"));
	CHECK(url_ok("unix:///s"));
	CHECK(!u.has_user && !u.has_password && u.user[0] == '\0' && u.password[0] == '\0');
	CHECK(u.db == 0 && u.port == 0 && u.host[0] == '\0');
}

static void test_url_reject(void)
{
	const char *pw = "Hunter2pw";

	CHECK(url_bad("", "empty", NULL));
	CHECK(url_bad(NULL, "empty", NULL));
	CHECK(url_bad("localhost:6379", "scheme", NULL));
	CHECK(url_bad("localhost", "scheme", NULL));
	CHECK(url_bad("http://h", "unknown URL scheme 'http'", NULL));
	CHECK(url_bad("tcp://h:6379", "unknown URL scheme", NULL));
	CHECK(url_bad("redis:h", "//", NULL));
	CHECK(url_bad("redis:/h", "//", NULL));
	CHECK(url_bad(" redis://h", "scheme", NULL));
	CHECK(url_bad("redis://h\n", "control", NULL));

	/* ports */
	CHECK(url_bad("redis://h:0", "bad port '0' in URL (1..65535)", NULL));
	CHECK(url_bad("redis://h:65536", "bad port '65536'", NULL));
	CHECK(url_bad("redis://h:99999", "bad port '99999' in URL (1..65535)", NULL));
	CHECK(url_bad("redis://h:abc", "bad port", NULL));
	CHECK(url_bad("redis://h:", "empty port", NULL));
	CHECK(url_bad("redis://h:-1", "bad port", NULL));
	CHECK(url_bad("redis://h:+1", "bad port", NULL));
	CHECK(url_bad("redis://h:6379:1", "IPv6", NULL));
	CHECK(url_bad("redis://u:Hunter2pw:1@h:2:3", "IPv6", pw));
	CHECK(url_bad("redis://h:99999999999999999999999", "bad port", NULL));
	CHECK(url_bad("redis://[::1]:0", "bad port", NULL));
	CHECK(url_bad("redis://[::1]:", "empty port", NULL));

	/* db */
	CHECK(url_bad("redis://h/abc", "bad db", NULL));
	CHECK(url_bad("redis://h/-1", "bad db", NULL));
	CHECK(url_bad("redis://h/1/2", "bad db", NULL));
	CHECK(url_bad("redis://h/99999999999", "bad db", NULL));
	CHECK(url_bad("redis://h?db=1", "query", NULL));
	CHECK(url_bad("redis://h#x", "fragment", NULL));
	CHECK(url_bad("unix:///s?db=x", "bad db", NULL));
	CHECK(url_bad("unix:///s?db=", "empty db", NULL));
	CHECK(url_bad("unix:///s?foo=1", "unknown URL parameter 'foo'", NULL));
	CHECK(url_bad("unix:///s?db=1&x=2", "bad db", NULL));
	CHECK(url_bad("unix:///s#frag", "fragment", NULL));

	/* hosts */
	CHECK(url_bad("redis://", "empty host", NULL));
	CHECK(url_bad("redis://:6379", "empty host", NULL));
	CHECK(url_bad("redis://u:Hunter2pw@", "empty host", pw));
	CHECK(url_bad("redis://u:Hunter2pw@:6379", "empty host", pw));
	CHECK(url_bad("redis://u:Hunter2pw@/1", "empty host", pw));
	CHECK(url_bad("redis://[::1", "unterminated '['", NULL));
	CHECK(url_bad("redis://u:Hunter2pw@[::1:6379", "unterminated '['", pw));
	CHECK(url_bad("redis://[]:1", "IPv6", NULL));
	CHECK(url_bad("redis://[nothex]:1", "IPv6", NULL));
	CHECK(url_bad("redis://[1.2.3.4]", "IPv6", NULL));
	CHECK(url_bad("redis://[::1]x", "after ']'", NULL));
	CHECK(url_bad("redis://[fe80::1%eth0]", "zone", NULL));
	CHECK(url_bad("redis://[fe80::1%25]", "zone", NULL));
	CHECK(url_bad("redis://::1", "IPv6 addresses go in []", NULL));
	CHECK(url_bad("redis://h st", "bad character", NULL));
	CHECK(url_bad("redis://h%41", "bad character", NULL));

	/* percent-escapes and NUL */
	CHECK(url_bad("redis://u:pw%4@h", "%-escape", "pw"));
	CHECK(url_bad("redis://u:pw%zz@h", "%-escape", "pw"));
	CHECK(url_bad("redis://u:pw%@h", "%-escape", "pw"));
	CHECK(url_bad("redis://u:Hunter2pw%00@h", "NUL", pw));
	CHECK(url_bad("redis://u%00:x@h", "NUL", NULL));
	CHECK(url_bad("redis://u%g0@h", "%-escape", NULL));
	CHECK(url_bad("unix:///tmp/a%00b", "NUL", NULL));
	CHECK(url_bad("unix:///tmp/a%2", "%-escape", NULL));

	/* overlong fields */
	{
		char s[2000], f[600];
		memset(f, 'x', 512);
		f[512] = '\0';
		snprintf(s, sizeof s, "redis://:%s@h", f);
		CHECK(url_bad(s, "password too long", "xxxxxxxx"));
		f[256] = '\0';
		snprintf(s, sizeof s, "redis://%s@h", f);
		CHECK(url_bad(s, "user too long", NULL));
		snprintf(s, sizeof s, "redis://%s", f);
		CHECK(url_bad(s, "host too long", NULL));
		memset(f, 'p', 108);
		f[0] = '/';
		f[108] = '\0';
		snprintf(s, sizeof s, "unix://%s", f);
		CHECK(url_bad(s, "path too long", NULL));
		/* %-escapes count by their decoded length */
		s[0] = '\0';
		strcat(s, "redis://:");
		for (int i = 0; i < 171; i++)
			strcat(s, "%41");
		strcat(s, "@h");
		CHECK(url_ok(s));
		CHECK(strlen(u.password) == 171);
	}

	/* unix paths */
	CHECK(url_bad("unix://relative.sock", "absolute", NULL));
	CHECK(url_bad("unix:relative.sock", "absolute", NULL));
	CHECK(url_bad("unix:", "absolute", NULL));
	CHECK(url_bad("unix://", "absolute", NULL));
	CHECK(url_bad("unix://:Hunter2pw@relative", "absolute", pw));
	CHECK(url_bad("unix://host/tmp/s.sock", "absolute", NULL));

	/* a missing '@' turns the password into a "port" or "db": never echo it */
	CHECK(url_bad("redis://:Hunter2pw", "empty host", pw));
	CHECK(url_bad("redis://u:Hunter2pw", "bad port", pw));
	CHECK(url_bad("redis://u:123456789012", "bad port", "123456789012"));
	CHECK(url_bad("redis://h:1/Hunter2pw", "bad db", pw));
	CHECK(url_bad("redis://u:Hunter2pw@h:bad", "bad port", pw));
	CHECK(url_bad("redis://u:Hunter2pw@h st", "bad character", pw));
	CHECK(url_bad("rediss://u:Hunter2pw@h/x", "bad db", pw));
	CHECK(url_bad("redis://u:Hunter2pw@h?x", "query", pw));

	/* a tiny or absent error buffer is fine */
	{
		char small[8];
		CHECK(parse_url("redis://h:0", &u, small, sizeof small) == -1);
		CHECK(strlen(small) == sizeof small - 1);
		CHECK(parse_url("redis://h:0", &u, NULL, 0) == -1);
		CHECK(parse_url("redis://h:0", &u, small, 0) == -1);
	}
}

/* ---------------------------------------------------------------- Sentinel URLs */

static void test_url_sentinel(void)
{
	const char *pw = "Hunter2pw";

	CHECK(url_ok("redis-sentinel://127.0.0.1:26379/mymaster"));
	CHECK(u.scheme == URL_SENTINEL && u.nsentinels == 1 && u.sentinel[0].port == 26379 &&
	      strcmp(u.sentinel[0].host, "127.0.0.1") == 0 && strcmp(u.master, "mymaster") == 0 &&
	      u.db == 0 && !u.has_password);
	CHECK(strcmp(u.host, "127.0.0.1") == 0 && u.port == 26379); /* the first sentinel */
	CHECK(url_ok("redis-sentinel://a:1,b,[::1]:3/m/5"));
	CHECK(u.nsentinels == 3 && strcmp(u.sentinel[0].host, "a") == 0 &&
	      u.sentinel[0].port == 1 && strcmp(u.sentinel[1].host, "b") == 0 &&
	      u.sentinel[1].port == 26379 && strcmp(u.sentinel[2].host, "::1") == 0 &&
	      u.sentinel[2].port == 3 && strcmp(u.master, "m") == 0 && u.db == 5);
	CHECK(url_ok("rediss-sentinel://u:p%40ss@s1:5000,s2:5001/my%2Dmaster/"));
	CHECK(u.scheme == URL_SENTINELS && u.nsentinels == 2 && strcmp(u.user, "u") == 0 &&
	      strcmp(u.password, "p@ss") == 0 && strcmp(u.master, "my-master") == 0 && u.db == 0);
	CHECK(url_ok("REDIS-SENTINEL://:pw/with@at@h/m"));
	CHECK(u.scheme == URL_SENTINEL && strcmp(u.password, "pw/with@at") == 0 &&
	      strcmp(u.host, "h") == 0);
	CHECK(url_ok("redis-sentinel://h/m%2Fx"));
	CHECK(strcmp(u.master, "m/x") == 0);
	{
		char s[1200] = "redis-sentinel://";
		for (int i = 0; i < URL_SENTINELS_MAX; i++)
			strcat(s, i ? ",h:1" : "h:1");
		strcat(s, "/m");
		CHECK(url_ok(s));
		CHECK(u.nsentinels == URL_SENTINELS_MAX);
		s[strlen(s) - 2] = '\0';
		strcat(s, ",h:1/m");
		CHECK(url_bad(s, "too many sentinels", NULL));
	}

	CHECK(url_bad("redis-sentinel://h:26379", "missing master name", NULL));
	CHECK(url_bad("redis-sentinel://h:26379/", "missing master name", NULL));
	CHECK(url_bad("redis-sentinel://h//1", "missing master name", NULL));
	CHECK(url_bad("redis-sentinel://h/m/x", "bad db", NULL));
	CHECK(url_bad("redis-sentinel://h/m/1/2", "bad db", NULL));
	CHECK(url_bad("redis-sentinel://h/m?x=1", "query", NULL));
	CHECK(url_bad("redis-sentinel://h,/m", "empty sentinel address", NULL));
	CHECK(url_bad("redis-sentinel://,h/m", "empty sentinel address", NULL));
	CHECK(url_bad("redis-sentinel:///m", "empty sentinel address", NULL));
	CHECK(url_bad("redis-sentinel://h:0/m", "bad port", NULL));
	CHECK(url_bad("redis-sentinel://h/m%20x", "bad character in URL master name", NULL));
	CHECK(url_bad("redis-sentinel://h/m%00", "NUL", NULL));
	CHECK(url_bad("redis-sentinel:h/m", "//", NULL));
	CHECK(url_bad("rediss-sentinel:/h/m", "//", NULL));
	CHECK(url_bad("redis-sentinel://u:Hunter2pw@h:x/m", "bad port", pw));
	CHECK(url_bad("redis-sentinel://u:Hunter2pw@h", "missing master", pw));
	CHECK(url_bad("redis-sentinel://u:Hunter2pw", "bad port", pw));
	CHECK(url_bad("redis-sentinel://u:Hunter2pw%zz@h/m", "%-escape", pw));
}

/* ---------------------------------------------------------------- durations */

static int dur_is(const char *s, int64_t want)
{
	int64_t ms = -42;

	if (parse_duration(s, &ms, err, sizeof err) != 0) {
		fprintf(stderr, "  parse_duration(\"%s\") failed: %s\n", s, err);
		return 0;
	}
	if (ms != want) {
		fprintf(stderr, "  parse_duration(\"%s\") = %lld, want %lld\n", s, (long long)ms,
		        (long long)want);
		return 0;
	}
	return 1;
}

static int dur_bad(const char *s, const char *want)
{
	int64_t ms = -42;

	strcpy(err, "(unset)");
	if (parse_duration(s, &ms, err, sizeof err) != -1) {
		fprintf(stderr, "  parse_duration(\"%s\") accepted: %lld\n", s, (long long)ms);
		return 0;
	}
	if (ms != -42 || (want && !strstr(err, want))) {
		fprintf(stderr, "  parse_duration(\"%s\"): reason '%s' (want '%s')\n", s, err,
		        want ? want : "");
		return 0;
	}
	return 1;
}

#define DAY    86400000LL
#define MAX_MS (36525LL * DAY)

static void test_duration(void)
{
	CHECK(dur_is("500ms", 500));
	CHECK(dur_is("30s", 30000));
	CHECK(dur_is("5m", 300000));
	CHECK(dur_is("2h", 7200000));
	CHECK(dur_is("1d", DAY));
	CHECK(dur_is("10", 10000));
	CHECK(dur_is("1.5", 1500));
	CHECK(dur_is("0.25s", 250));
	CHECK(dur_is("0", 0));
	CHECK(dur_is("0ms", 0));
	CHECK(dur_is("0.0", 0));
	CHECK(dur_is("007s", 7000));
	CHECK(dur_is(".5", 500));
	CHECK(dur_is("1.", 1000));
	CHECK(dur_is("1.5m", 90000));
	CHECK(dur_is("0.5d", DAY / 2));
	CHECK(dur_is("1.25h", 4500000));
	/* sub-millisecond rests round up */
	CHECK(dur_is("0.0001", 1));
	CHECK(dur_is("0.0011", 2));
	CHECK(dur_is("1.5ms", 2));
	CHECK(dur_is("0.1ms", 1));
	CHECK(dur_is("0.001", 1));
	CHECK(dur_is("0.0010000", 1));
	CHECK(dur_is("0.00100000000000000000000000000001", 2));
	CHECK(dur_is("0.000000000000000000000000000000000000000000000000001s", 1));
	/* 1/86400000 d is exactly 1 ms; a hair more rounds up to 2 */
	CHECK(dur_is("0.0000000115740740740740740740740740740740740740740740740740741d", 2));
	CHECK(dur_is("0.00000001157407407407407407407407407407407407407407407407407d", 1));
	CHECK(dur_is("0.99999999999999999999999999", 1000));
	/* the 100-year ceiling, in every unit */
	CHECK(dur_is("36525d", MAX_MS));
	CHECK(dur_is("876600h", MAX_MS));
	CHECK(dur_is("3155760000", MAX_MS));
	CHECK(dur_is("3155760000000ms", MAX_MS));
	CHECK(dur_is("0000000000000000000000000000001s", 1000));
	/* compound forms, largest unit first, each with its unit (issue 27) */
	CHECK(dur_is("1h30m", 5400000));
	CHECK(dur_is("1m30s", 90000));
	CHECK(dur_is("2h15m10s", 8110000));
	CHECK(dur_is("1s500ms", 1500));
	CHECK(dur_is("1d12h", DAY + DAY / 2));
	CHECK(dur_is("1.5h30m", 7200000));
	CHECK(dur_is("36524d24h", MAX_MS));
	CHECK(dur_bad("36524d24h1ms", "too large"));
	CHECK(dur_bad("30m1h", "bad duration"));
	CHECK(dur_bad("1m1m", "bad duration"));
	CHECK(dur_bad("1h30", "bad duration"));
	CHECK(dur_bad("30 1h", "bad duration"));
	CHECK(dur_bad("1h-30m", "bad duration"));
	CHECK(dur_bad("1hm", "bad duration"));

	CHECK(dur_bad("", "empty"));
	CHECK(dur_bad(NULL, "empty"));
	CHECK(dur_bad("-1", "negative"));
	CHECK(dur_bad("-0", "negative"));
	CHECK(dur_bad("+1", "bad duration"));
	CHECK(dur_bad("5x", "bad duration '5x'"));
	CHECK(dur_bad("1e3", "bad duration"));
	CHECK(dur_bad("nan", "bad duration"));
	CHECK(dur_bad("inf", "bad duration"));
	CHECK(dur_bad("infinity", "bad duration"));
	CHECK(dur_bad(" 5", "bad duration"));
	CHECK(dur_bad("5 ", "bad duration"));
	CHECK(dur_bad("5 s", "bad duration"));
	CHECK(dur_bad(".", "bad duration"));
	CHECK(dur_bad("s", "bad duration"));
	CHECK(dur_bad("ms", "bad duration"));
	CHECK(dur_bad("1,5", "bad duration"));
	CHECK(dur_bad("1.2.3", "bad duration"));
	CHECK(dur_bad("0x10", "bad duration"));
	CHECK(dur_bad("5S", "bad duration"));
	CHECK(dur_bad("5sec", "bad duration"));
	CHECK(dur_bad("5y", "bad duration"));
	/* the reason quotes the input as it is: the sink (log_msg) escapes it, once */
	CHECK(dur_bad("5\n", "bad duration '5\n'"));
	CHECK(dur_bad("36525.00001d", "too large"));
	CHECK(dur_bad("36526d", "too large"));
	CHECK(dur_bad("3155760000001ms", "too large"));
	CHECK(dur_bad("3155760000.0001", "too large"));
	CHECK(dur_bad("9223372036854775807", "too large"));
	CHECK(dur_bad("9223372036854775808", "too large"));
	CHECK(dur_bad("99999999999999999999999999999999999999d", "too large"));
	CHECK(dur_bad("106751991167300d", "too large"));
}

/* ---------------------------------------------------------------- integers */

static int int_is(const char *s, long long min, long long max, long long want)
{
	long long v = -42;

	if (parse_int(s, min, max, &v, err, sizeof err) != 0 || v != want) {
		fprintf(stderr, "  parse_int(\"%s\", %lld, %lld) = %lld (%s)\n", s, min, max, v,
		        err);
		return 0;
	}
	return 1;
}

static int int_bad(const char *s, long long min, long long max, const char *want)
{
	long long v = -42;

	strcpy(err, "(unset)");
	if (parse_int(s, min, max, &v, err, sizeof err) != -1 || v != -42 ||
	    (want && !strstr(err, want))) {
		fprintf(stderr, "  parse_int(\"%s\", %lld, %lld): v %lld, reason '%s'\n", s, min,
		        max, v, err);
		return 0;
	}
	return 1;
}

static void test_int(void)
{
	CHECK(int_is("0", 0, 255, 0));
	CHECK(int_is("255", 0, 255, 255));
	CHECK(int_is("075", 0, 255, 75));
	CHECK(int_is("-5", -10, 10, -5));
	CHECK(int_is("-0", -10, 10, 0));
	CHECK(int_is("9223372036854775807", 0, LLONG_MAX, LLONG_MAX));
	CHECK(int_is("-9223372036854775808", LLONG_MIN, 0, LLONG_MIN));
	CHECK(int_is("-9223372036854775807", LLONG_MIN, LLONG_MAX, -LLONG_MAX));

	CHECK(int_bad("256", 0, 255, "out of range (0..255)"));
	CHECK(int_bad("1", 2, 5, "out of range"));
	CHECK(int_bad("-11", -10, 10, "out of range"));
	CHECK(int_bad("-1", 0, 10, "not a whole number"));
	CHECK(int_bad("-0", 0, 10, "not a whole number"));
	CHECK(int_bad("+1", 0, 10, "not a whole number"));
	CHECK(int_bad("+1", -10, 10, "not a whole number"));
	CHECK(int_bad("", 0, 10, "empty"));
	CHECK(int_bad(NULL, 0, 10, "empty"));
	CHECK(int_bad("-", -10, 10, "not a whole number"));
	CHECK(int_bad(" 1", 0, 10, "not a whole number"));
	CHECK(int_bad("1 ", 0, 10, "not a whole number"));
	CHECK(int_bad("1x", 0, 10, "not a whole number"));
	CHECK(int_bad("0x1", 0, 10, "not a whole number"));
	CHECK(int_bad("1.0", 0, 10, "not a whole number"));
	CHECK(int_bad("1e2", 0, 1000, "not a whole number"));
	CHECK(int_bad("9223372036854775808", 0, LLONG_MAX, "out of range"));
	CHECK(int_bad("-9223372036854775809", LLONG_MIN, 0, "out of range"));
	CHECK(int_bad("99999999999999999999999", 0, LLONG_MAX, "out of range"));
}

/* ---------------------------------------------------------------- signals */

static int sig_is(const char *s, int want)
{
	int sig = -1;

	if (parse_signal(s, &sig, err, sizeof err) != 0 || sig != want) {
		fprintf(stderr, "  parse_signal(\"%s\") = %d, want %d (%s)\n", s, sig, want, err);
		return 0;
	}
	return 1;
}

static int sig_bad(const char *s, const char *want)
{
	int sig = -1;

	strcpy(err, "(unset)");
	if (parse_signal(s, &sig, err, sizeof err) != -1 || sig != -1 ||
	    (want && !strstr(err, want))) {
		fprintf(stderr, "  parse_signal(\"%s\"): sig %d, reason '%s'\n", s, sig, err);
		return 0;
	}
	return 1;
}

static void test_signal(void)
{
	static const char *names[] = {
	    "HUP",  "INT",  "QUIT", "ILL",  "TRAP",   "ABRT", "BUS",   "FPE",  "KILL", "USR1",
	    "SEGV", "USR2", "PIPE", "ALRM", "TERM",   "CHLD", "CONT",  "STOP", "TSTP", "TTIN",
	    "TTOU", "URG",  "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO",   "PWR",  "SYS",
	};
	size_t i;
	int sig;

	CHECK(sig_is("TERM", SIGTERM));
	CHECK(sig_is("SIGTERM", SIGTERM));
	CHECK(sig_is("term", SIGTERM));
	CHECK(sig_is("sigterm", SIGTERM));
	CHECK(sig_is("SigTerm", SIGTERM));
	CHECK(sig_is("9", SIGKILL));
	CHECK(sig_is("KILL", SIGKILL));
	CHECK(sig_is("HUP", SIGHUP));
	CHECK(sig_is("USR1", SIGUSR1));
	CHECK(sig_is("SIGUSR2", SIGUSR2));
	CHECK(sig_is("INT", SIGINT));
	CHECK(sig_is("1", 1));
	CHECK(sig_is("64", 64));
	CHECK(sig_is("015", 15));

	CHECK(sig_bad("0", "1..64"));
	CHECK(sig_bad("65", "1..64"));
	CHECK(sig_bad("-1", NULL));
	CHECK(sig_bad("FOO", "unknown signal 'FOO'"));
	CHECK(sig_bad("SIG", "unknown signal"));
	CHECK(sig_bad("SIGSIGTERM", "unknown signal"));
	CHECK(sig_bad("TERM ", "unknown signal"));
	CHECK(sig_bad(" TERM", "unknown signal"));
	CHECK(sig_bad("9x", "1..64"));
	CHECK(sig_bad("", "empty"));
	CHECK(sig_bad(NULL, "empty"));
	CHECK(sig_bad("TE\033[2JRM", "'TE\033[2JRM'"));

	/* every name in the table round-trips through its number */
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		char with_sig[16];
		sig = -1;
		CHECK(parse_signal(names[i], &sig, err, sizeof err) == 0);
		CHECK(sig > 0 && strcmp(signal_name(sig), names[i]) == 0);
		snprintf(with_sig, sizeof with_sig, "SIG%s", names[i]);
		CHECK(sig_is(with_sig, sig));
	}
	/* and every number with a name round-trips through the name */
	for (sig = 1; sig <= 64; sig++) {
		const char *n = signal_name(sig);
		int back = -1;
		if (strcmp(n, "?") == 0)
			continue;
		CHECK(parse_signal(n, &back, err, sizeof err) == 0 && back == sig);
	}
	CHECK(strcmp(signal_name(SIGTERM), "TERM") == 0);
	CHECK(strcmp(signal_name(SIGKILL), "KILL") == 0);
	CHECK(strcmp(signal_name(0), "?") == 0);
	CHECK(strcmp(signal_name(-1), "?") == 0);
	CHECK(strcmp(signal_name(1000), "?") == 0);
}

/* ---------------------------------------------------------------- key parts */

static void test_key_parts(void)
{
	char s[600];

	CHECK(parse_lock_name("nightly", err, sizeof err) == 0);
	CHECK(parse_lock_name("deploy-prod", err, sizeof err) == 0);
	CHECK(parse_lock_name("a", err, sizeof err) == 0);
	CHECK(parse_lock_name("app:db/reindex.v2_#1@host~!", err, sizeof err) == 0);
	memset(s, 'n', 512);
	s[512] = '\0';
	CHECK(parse_lock_name(s, err, sizeof err) == 0);
	s[512] = 'n';
	s[513] = '\0';
	CHECK(parse_lock_name(s, err, sizeof err) == -1 && strstr(err, "too long"));

	CHECK(parse_lock_name("", err, sizeof err) == -1 && strstr(err, "empty"));
	CHECK(parse_lock_name(NULL, err, sizeof err) == -1 && strstr(err, "empty"));
	CHECK(parse_lock_name("a{b", err, sizeof err) == -1 && strstr(err, "'{'"));
	CHECK(parse_lock_name("a}b", err, sizeof err) == -1 && strstr(err, "'}'"));
	CHECK(parse_lock_name("{x}", err, sizeof err) == -1);
	CHECK(parse_lock_name("a\nb", err, sizeof err) == -1 && strstr(err, "0x0a"));
	CHECK(parse_lock_name("a\tb", err, sizeof err) == -1);
	CHECK(parse_lock_name("a\x7f", err, sizeof err) == -1);
	CHECK(parse_lock_name("a\033[2J", err, sizeof err) == -1 && !strchr(err, '\033'));
	CHECK(parse_lock_name("a b", err, sizeof err) == -1);
	CHECK(parse_lock_name("caf\xc3\xa9", err, sizeof err) == -1);

	CHECK(parse_prefix("rlock:", err, sizeof err) == 0);
	CHECK(parse_prefix("", err, sizeof err) == 0);
	CHECK(parse_prefix("team/app:", err, sizeof err) == 0);
	memset(s, 'p', 128);
	s[128] = '\0';
	CHECK(parse_prefix(s, err, sizeof err) == 0);
	s[128] = 'p';
	s[129] = '\0';
	CHECK(parse_prefix(s, err, sizeof err) == -1 && strstr(err, "too long"));
	CHECK(parse_prefix("a{", err, sizeof err) == -1 && strstr(err, "prefix"));
	CHECK(parse_prefix("}", err, sizeof err) == -1);
	CHECK(parse_prefix("a\r", err, sizeof err) == -1);
}

/* The raw password of a URL, as url_password_span finds it ("" if none). */
static const char *span(const char *url)
{
	static char out[256];
	size_t off, len;

	out[0] = '\0';
	if (url_password_span(url, &off, &len))
		snprintf(out, sizeof out, "%.*s", (int)len, url + off);
	return out;
}

static void test_password_span(void)
{
	CHECK(strcmp(span("redis://:secret@h:1"), "secret") == 0);
	CHECK(strcmp(span("redis://u:secret@h"), "secret") == 0);
	/* a raw '/' and '@' in the password: the last '@' ends it, as parse_url reads it */
	CHECK(strcmp(span("redis://u:pa/ss@wo/rd@h:6379/2"), "pa/ss@wo/rd") == 0);
	CHECK(strcmp(span("rediss://u:a:b@h"), "a:b") == 0);
	CHECK(strcmp(span("unix://u:p/w@/tmp/r.sock?db=1"), "p/w") == 0);
	CHECK(strcmp(span("redis://u@h"), "") == 0);
	CHECK(strcmp(span("redis://h:6379"), "") == 0);
	CHECK(strcmp(span("unix:///tmp/a@b.sock"), "") == 0);
	CHECK(strcmp(span("127.0.0.1:6379"), "") == 0);
	CHECK(strcmp(span("redis-sentinel://:s/p@h1:1,h2:2/m/1"), "s/p") == 0);
	/* whatever parse_url takes as the password is what the span covers */
	struct url pu;
	CHECK(parse_url("redis://u:pa/ss@wo/rd@h:6379/2", &pu, err, sizeof err) == 0 &&
	      strcmp(pu.password, "pa/ss@wo/rd") == 0 && strcmp(pu.host, "h") == 0);
}

/* Split a config line; returns the parse result, key and value in k and v. */
static int cfg(const char *line, const char **k, const char **v)
{
	static char buf[256];
	char *key, *val;

	snprintf(buf, sizeof buf, "%s", line);
	int rc = parse_config_line(buf, &key, &val, err, sizeof err);
	*k = key ? key : "(null)";
	*v = val ? val : "(null)";
	return rc;
}

static void test_config_line(void)
{
	const char *k, *v;

	CHECK(cfg("", &k, &v) == 0);
	CHECK(cfg("   \t\r\n", &k, &v) == 0);
	CHECK(cfg("# comment", &k, &v) == 0);
	CHECK(cfg("  # indented", &k, &v) == 0);
	CHECK(cfg("ttl = 5s", &k, &v) == 1 && !strcmp(k, "ttl") && !strcmp(v, "5s"));
	CHECK(cfg("\tttl=5s\r\n", &k, &v) == 1 && !strcmp(k, "ttl") && !strcmp(v, "5s"));
	CHECK(cfg("ttl = 1m # one minute", &k, &v) == 1 && !strcmp(v, "1m"));
	CHECK(cfg("ttl = 1m\t# tab", &k, &v) == 1 && !strcmp(v, "1m"));
	CHECK(cfg("prefix = a#b: # c", &k, &v) == 1 && !strcmp(v, "a#b:"));
	CHECK(cfg("url = redis://h:1 # the server", &k, &v) == 1 && !strcmp(v, "redis://h:1"));
	CHECK(cfg("tls", &k, &v) == 1 && !strcmp(k, "tls") && !strcmp(v, "(null)"));
	CHECK(cfg("tls # on", &k, &v) == 1 && !strcmp(k, "tls") && !strcmp(v, "(null)"));
	CHECK(cfg("ttl =", &k, &v) == 1 && !strcmp(v, ""));
	CHECK(cfg("ttl = # nothing", &k, &v) == 1 && !strcmp(v, ""));
	/* a password is taken as it stands */
	CHECK(cfg("password =  p#w=x y # z ", &k, &v) == 1 && !strcmp(k, "password") &&
	      !strcmp(v, "p#w=x y # z"));
	CHECK(cfg("sentinel-password = s#x # y", &k, &v) == 1 && !strcmp(v, "s#x # y"));
	CHECK(cfg("= 5s", &k, &v) == -1 && strstr(err, "no setting name"));
	CHECK(cfg("ttl 5s", &k, &v) == -1 && strstr(err, "not a setting"));
	CHECK(cfg("a b = c", &k, &v) == -1);
}

int main(void)
{
	test_url_accept();
	test_url_reject();
	test_url_sentinel();
	test_duration();
	test_int();
	test_signal();
	test_key_parts();
	test_password_span();
	test_config_line();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
