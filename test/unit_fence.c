/* SPDX-License-Identifier: MIT */
/* Fences are exact signed 64-bit integers from the scripts' replies on (the scripts send
 * them as strings, never as Lua numbers: src/store/lua/counter.lua): the acquire, merge and
 * status decoders read every value of the range exactly, and refuse what is not one. */
#include <limits.h>
#include <string.h>

#include "lock.h"
#include "resp.h"
#include "unit.h"

/* The reply the RESP bytes wire decode to (or NULL). */
static struct resp_reply *reply(const char *wire, size_t len)
{
	struct resp_reader *rd = resp_reader_new();
	struct resp_reply *r = NULL;
	char err[200];

	if (rd && resp_reader_feed(rd, wire, len) == 0 &&
	    resp_reader_get(rd, &r, err, sizeof err) != 1)
		r = NULL;
	resp_reader_free(rd);
	return r;
}

/* {1, "s"} decoded by lock_decode_acquire: its rc, and l.fence in *fence. */
static int acquire_with(const char *s, long long *fence)
{
	char wire[200], err[300];
	struct lock l;
	struct holder h;

	int n = snprintf(wire, sizeof wire, "*2\r\n:1\r\n$%zu\r\n%s\r\n", strlen(s), s);
	struct resp_reply *r = reply(wire, (size_t)n);
	if (!r)
		return -100;
	memset(&l, 0, sizeof l);
	l.fence = 12345;
	int rc = lock_decode_acquire(r, &l, &h, err, sizeof err);
	*fence = l.fence;
	resp_free(r);
	return rc;
}

static void test_acquire(void)
{
	static const struct {
		const char *s;
		long long v;
	} exact[] = {
	    {"1", 1},
	    {"9007199254740993", 9007199254740993LL}, /* 2^53 + 1: a double rounds it */
	    {"9223372036854775000", 9223372036854775000LL},
	    {"9223372036854775807", LLONG_MAX},
	    {"-9223372036854775807", -LLONG_MAX},
	    {"-9223372036854775808", LLONG_MIN},
	    {"0", 0},
	    {"-4", -4},
	};
	long long f = 0;

	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
		CHECK(acquire_with(exact[i].s, &f) == LOCK_OK);
		CHECK(f == exact[i].v);
	}
	static const char *const bad[] = {
	    "", "abc", "1.5", "9223372036854775808", "-9223372036854775809", "12 ", " 12", "1e3"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(acquire_with(bad[i], &f) == LOCK_ERR);
		CHECK(f == 12345); /* untouched */
	}
	/* a string with a NUL inside is not the number before it */
	const char nul[] = "*2\r\n:1\r\n$4\r\n12\0"
	                   "3\r\n";
	struct resp_reply *r = reply(nul, sizeof nul - 1);
	struct lock l;
	struct holder h;
	char err[300];
	CHECK(r && lock_decode_acquire(r, &l, &h, err, sizeof err) == LOCK_ERR);
	resp_free(r);
	/* the integer form still decodes */
	const char integer[] = "*2\r\n:1\r\n:9223372036854775807\r\n";
	r = reply(integer, sizeof integer - 1);
	CHECK(r && lock_decode_acquire(r, &l, &h, err, sizeof err) == LOCK_OK &&
	      l.fence == LLONG_MAX);
	resp_free(r);
}

static void test_merge(void)
{
	const char ok[] = "$20\r\n-9223372036854775000\r\n";
	const char full[] = "-RLOCKFENCE the fence counter k does not hold a 64-bit integer\r\n";
	char err[300];
	long long v = 0;

	struct resp_reply *r = reply(ok, sizeof ok - 1);
	CHECK(r && lock_decode_fence(r, &v, err, sizeof err) == LOCK_OK &&
	      v == -9223372036854775000LL);
	resp_free(r);
	r = reply(full, sizeof full - 1);
	CHECK(r && lock_decode_fence(r, &v, err, sizeof err) == LOCK_DENIED);
	CHECK(strcmp(err, "fence: the fence counter k does not hold a 64-bit integer") == 0);
	resp_free(r);
}

/* --status: the last fence and a holder's, exact; unknown when not an integer. */
static void test_status(void)
{
	const char wire[] = "*8\r\n$19\r\n9223372036854775001\r\n$-1\r\n:1\r\n"
	                    "*12\r\n$1\r\nx\r\n$1\r\nt\r\n:1000\r\n$1\r\nh\r\n$1\r\n1\r\n"
	                    "$1\r\nu\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\n1\r\n"
	                    "$19\r\n9223372036854775001\r\n$-1\r\n$-1\r\n"
	                    "*0\r\n:0\r\n$-1\r\n:0\r\n";
	const char junk[] = "*8\r\n$3\r\nabc\r\n$-1\r\n:0\r\n*0\r\n*0\r\n:0\r\n$-1\r\n:0\r\n";
	static struct holders hs;
	char err[300];

	struct resp_reply *r = reply(wire, sizeof wire - 1);
	CHECK(r && lock_decode_holders(r, "status", &hs, err, sizeof err) == LOCK_OK);
	CHECK(hs.has_last_fence && hs.last_fence == 9223372036854775001LL);
	CHECK(hs.n == 1 && hs.h[0].has_fence && hs.h[0].fence == 9223372036854775001LL);
	resp_free(r);
	r = reply(junk, sizeof junk - 1);
	CHECK(r && lock_decode_holders(r, "status", &hs, err, sizeof err) == LOCK_OK);
	CHECK(!hs.has_last_fence);
	resp_free(r);
}

int main(void)
{
	test_acquire();
	test_merge();
	test_status();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
