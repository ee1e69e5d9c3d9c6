/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the short-string parsers: parse_duration() (checked against an
 * independent 128-bit reference), parse_int(), parse_signal(), parse_lock_name() and
 * parse_prefix(). The first byte picks the parser; the rest is the input. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

#define MAX_MS (36525LL * 86400000LL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reason(int rc, const char *err, size_t errsz)
{
	if (rc == 0)
		return;
	/* The reason may quote the input as it is (control bytes too): the sink that
	 * prints it escapes it (log_msg), once. It must be a reason and end in the buffer. */
	if (rc != -1 || !memchr(err, 0, errsz) || !err[0])
		abort();
}

/* Reference: terms of digits[.digits][unit], each with at most 20 + 18 digits, exactly
 * in 128 bits, each rounded up to the ms and summed; a unit on every term when there
 * are several, each smaller than the one before (1h30m). Returns -2 when the input is
 * outside what the reference handles. */
static int ref_duration(const char *s, int64_t *ms)
{
	static const struct {
		const char *u;
		unsigned mult;
	} units[] = {{"", 1000},   {"ms", 1},      {"s", 1000},
	             {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
	unsigned __int128 sum = 0;
	const char *p = s;
	unsigned last = 0;
	int terms = 0;

	do {
		unsigned __int128 num = 0, den = 1;
		int nint = 0, nfrac = 0;
		size_t i, ulen;
		while (*p >= '0' && *p <= '9') {
			if (++nint > 20)
				return -2;
			num = num * 10 + (unsigned)(*p++ - '0');
		}
		if (*p == '.') {
			p++;
			while (*p >= '0' && *p <= '9') {
				if (++nfrac > 18)
					return -2;
				num = num * 10 + (unsigned)(*p++ - '0');
				den *= 10;
			}
		}
		if (nint + nfrac == 0)
			return -1;
		for (ulen = 0; p[ulen] >= 'a' && p[ulen] <= 'z'; ulen++)
			;
		for (i = 0; i < sizeof units / sizeof units[0]; i++)
			if (strlen(units[i].u) == ulen && strncmp(p, units[i].u, ulen) == 0)
				break;
		if (i == sizeof units / sizeof units[0])
			return -1;
		p += ulen;
		if ((i == 0 && (terms > 0 || *p)) || (terms > 0 && units[i].mult >= last))
			return -1;
		last = units[i].mult;
		sum += (num * units[i].mult + den - 1) / den;
		if (sum > MAX_MS)
			return -1;
		terms++;
	} while (*p);
	*ms = (int64_t)sum;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[128], *s;
	long long v, lo, hi;
	int64_t ms = -7, want = -7;
	int rc, sig, ref;

	if (size < 1)
		return 0;
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	memset(err, 'E', sizeof err);

	switch (data[0] % 5) {
	case 0:
		rc = parse_duration(s, &ms, err, sizeof err);
		check_reason(rc, err, sizeof err);
		if (rc == 0 && (ms < 0 || ms > MAX_MS))
			abort();
		if (rc != 0 && ms != -7)
			abort();
		ref = ref_duration(s, &want);
		if (ref != -2 && (ref != rc || ms != want))
			abort();
		break;
	case 1:
		/* bounds from the input's length, so both signs and edges get exercised */
		lo = size % 3 == 0 ? LLONG_MIN : size % 3 == 1 ? -1000 : 0;
		hi = size % 2 ? LLONG_MAX : 65535;
		v = 12345;
		rc = parse_int(s, lo, hi, &v, err, sizeof err);
		check_reason(rc, err, sizeof err);
		if (rc == 0 && (v < lo || v > hi))
			abort();
		if (rc != 0 && v != 12345)
			abort();
		break;
	case 2:
		sig = -5;
		rc = parse_signal(s, &sig, err, sizeof err);
		check_reason(rc, err, sizeof err);
		if (rc == 0 && (sig < 1 || sig > 64))
			abort();
		if (rc == 0 && strcmp(signal_name(sig), "?") != 0) {
			int back = -5;
			if (parse_signal(signal_name(sig), &back, err, sizeof err) != 0 ||
			    back != sig)
				abort();
		}
		break;
	case 3:
		rc = parse_lock_name(s, err, sizeof err);
		check_reason(rc, err, sizeof err);
		if (rc == 0 && (!s[0] || strlen(s) > 512 || strpbrk(s, "{} ")))
			abort();
		break;
	default:
		rc = parse_prefix(s, err, sizeof err);
		check_reason(rc, err, sizeof err);
		if (rc == 0 && (strlen(s) > 128 || strpbrk(s, "{} ")))
			abort();
		break;
	}
	free(s);
	return 0;
}
