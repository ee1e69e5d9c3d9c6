/* SPDX-License-Identifier: MIT */
/* The two escapers every sink uses: log_escape (a terminal, a log, syslog) and
 * json_escape (JSON): what they take, and how log_escape shows a cut; and how
 * log_clip and log_reason cut a raw text (a server's error) to a fixed buffer. */
#include <string.h>

#include "json.h"
#include "log.h"
#include "unit.h"

/* f(dst, n, src, len) gave want: log_escape and log_clip, both (dst, n, src, len). */
static int gives(void (*f)(char *, size_t, const char *, size_t), const char *fname,
                 const char *src, size_t n, const char *want)
{
	char dst[256];

	f(dst, n, src, strlen(src));
	if (strcmp(dst, want) != 0)
		fprintf(stderr, "%s(\"%s\", %zu) gave \"%s\", not \"%s\"\n", fname, src, n, dst,
		        want);
	return strcmp(dst, want) == 0;
}

static int esc_is(const char *src, size_t n, const char *want)
{
	return gives(log_escape, "log_escape", src, n, want);
}

static void put_buf(void *arg, const char *p, size_t len)
{
	strncat(arg, p, len);
}

static int json_is(const char *src, const char *want)
{
	char dst[512] = "";

	json_escape(src, put_buf, dst);
	if (strcmp(dst, want) != 0)
		fprintf(stderr, "json_escape(\"%s\") gave %s, not %s\n", src, dst, want);
	return strcmp(dst, want) == 0;
}

static void test_ci_marks(void)
{
	CHECK(esc_is("##[add-mask]x", 256, "#\\x23[add-mask]x"));
	CHECK(esc_is("a ###vso[", 256, "a #\\x23\\x23vso["));
	CHECK(esc_is("#a#b", 256, "#a#b"));
	CHECK(esc_is("::warning::x", 256, "\\x3a:warning::x"));
	CHECK(esc_is("  ::error::x", 256, "  \\x3a:error::x"));
	CHECK(esc_is("[::1]:6379 a::b", 256, "[::1]:6379 a::b")); /* only where a line starts */
	CHECK(esc_is(":x", 256, ":x"));
}

static void test_cut(void)
{
	CHECK(esc_is("abcdef", 7, "abcdef"));
	CHECK(esc_is("abcdefghij", 8, "ab...ij"));                  /* start, "...", end */
	CHECK(esc_is("\x01\x02\x03\x04\x05", 12, "\\x01...\\x05")); /* never mid-escape */
	CHECK(esc_is("\x01\x02\x03\x04\x05", 16, "\\x01...\\x04\\x05"));
	CHECK(esc_is("abcdef", 3, ""));
	CHECK(esc_is("abcdef", 1, ""));
}

static void test_json(void)
{
	CHECK(json_is("a\"b\\", "\"a\\\"b\\\\\""));
	CHECK(json_is("\x1b[31m", "\"\\u001b[31m\""));
	CHECK(json_is("\xc2\x9b"
	              "2J",
	              "\"\\u009b2J\"")); /* C1 CSI */
	CHECK(json_is("\xe2\x80\xae"
	              "x",
	              "\"\\u202ex\""));                                     /* bidi override */
	CHECK(json_is("\xe2\x80\xa8\xef\xbb\xbf", "\"\\u2028\\ufeff\""));   /* LS, BOM */
	CHECK(json_is("\xc3\xa9\xe2\x82\xac", "\"\xc3\xa9\xe2\x82\xac\"")); /* é € as they are */
	CHECK(json_is("\xff", "\"\\ufffd\""));
	CHECK(json_is("##[x", "\"#\\u0023[x\""));
	CHECK(json_is("::w", "\"\\u003a:w\""));
}

static int clip_is(const char *src, size_t n, const char *want)
{
	return gives(log_clip, "log_clip", src, n, want);
}

/* Whether s is valid UTF-8 throughout. */
static int utf8_ok(const char *s)
{
	for (size_t i = 0, k; s[i]; i += k)
		if ((k = log_utf8_len((const unsigned char *)s + i)) == 0)
			return 0;
	return 1;
}

static void test_clip(void)
{
	CHECK(clip_is("short", 16, "short"));
	CHECK(clip_is("0123456789", 11, "0123456789"));
	/* cut in the middle, shown, the end (the reason) kept */
	CHECK(clip_is("0123456789abcdef", 12, "0123...cdef"));
	CHECK(clip_is("0123456789abcdef", 13, "0123...bcdef"));
	/* "\xc3\xa9" (e acute) on both sides of the cut, at either parity: never split */
	CHECK(clip_is("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 12,
	              "\xc3\xa9\xc3\xa9...\xc3\xa9\xc3\xa9"));
	CHECK(clip_is("x\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 12,
	              "x\xc3\xa9...\xc3\xa9\xc3\xa9"));
	CHECK(clip_is("abcdef", 4, "..."));
	CHECK(clip_is("abcdef", 1, ""));
	/* every size and offset: valid UTF-8 out, "..." in it, never longer than the room */
	char src[200], err[64];
	for (size_t off = 0; off < 4; off++) {
		memset(src, 'x', off);
		for (size_t i = off; i + 3 < sizeof src; i += 3)
			memcpy(src + i, "\xe2\x82\xac", 3); /* the euro sign, 3 bytes */
		src[off + (sizeof src - 1 - off) / 3 * 3] = '\0';
		for (size_t n = 12; n < sizeof err; n++) {
			log_reason(err, n, "ERR %s END", src);
			CHECK(strlen(err) < n && utf8_ok(err) && strstr(err, "...") &&
			      strcmp(err + strlen(err) - 4, " END") == 0 &&
			      strncmp(err, "ERR ", 4) == 0);
		}
	}
	log_reason(err, sizeof err, "fits: %s", "yes");
	CHECK(strcmp(err, "fits: yes") == 0);
}

int main(void)
{
	test_ci_marks();
	test_cut();
	test_json();
	test_clip();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
