/* SPDX-License-Identifier: MIT */
/* libFuzzer target for parse_url(). Besides crashes and sanitizer reports it checks
 * the contract: results in range and NUL-terminated, a one-line reason on failure,
 * nothing left in *u after a failure, and never a password in the reason (a marker
 * password is planted in front of the fuzzed text, with and without its '@'). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

#define MARKER "Zq9SeCrEtMaRkEr"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_url(const char *s, int planted)
{
	static const struct url zero;
	struct url u;
	char err[256];
	int rc;

	memset(err, 'E', sizeof err);
	rc = parse_url(s, &u, err, sizeof err);
	if (rc == 0) {
		if (!memchr(u.host, 0, sizeof u.host) || !memchr(u.path, 0, sizeof u.path) ||
		    !memchr(u.user, 0, sizeof u.user) || !memchr(u.password, 0, sizeof u.password))
			abort();
		if (u.db < 0)
			abort();
		if (u.has_user != (u.user[0] != '\0') || u.has_password != (u.password[0] != '\0'))
			abort();
		if (u.scheme == URL_UNIX) {
			if (u.path[0] != '/' || u.port != 0 || u.host[0])
				abort();
		} else {
			if (u.port < 1 || u.port > 65535 || !u.host[0] || u.path[0])
				abort();
		}
		if (u.scheme == URL_SENTINEL || u.scheme == URL_SENTINELS) {
			if (u.nsentinels < 1 || u.nsentinels > URL_SENTINELS_MAX || !u.master[0] ||
			    !memchr(u.master, 0, sizeof u.master))
				abort();
			for (int i = 0; i < u.nsentinels; i++)
				if (!u.sentinel[i].host[0] || u.sentinel[i].port < 1 ||
				    u.sentinel[i].port > 65535 ||
				    !memchr(u.sentinel[i].host, 0, sizeof u.sentinel[i].host))
					abort();
			for (const char *m = u.master; *m; m++)
				if ((unsigned char)*m <= 0x20 || *m == 0x7f)
					abort();
		} else if (u.nsentinels || u.master[0]) {
			abort();
		}
		if (planted && !strstr(u.user, MARKER) && !strstr(u.password, MARKER))
			abort(); /* the marker was meant to land in the userinfo */
	} else {
		if (rc != -1 || !memchr(err, 0, sizeof err) || !err[0] || strchr(err, '\n'))
			abort();
		if (memcmp(&u, &zero, sizeof u) != 0)
			abort();
		if (planted && strstr(err, "SeCrEt"))
			abort();
		for (const char *p = err; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const prefixes[] = {
	    "redis://u:" MARKER "@",
	    "rediss://:" MARKER "@",
	    "redis-sentinel://u:" MARKER "@",
	    "unix://u:" MARKER "@",
	    /* a forgotten '@' makes the password look like a port or a db */
	    "redis://u:" MARKER,
	    "redis://h/" MARKER,
	};
	char *s;
	size_t i, plen;

	/* The raw input first. */
	s = malloc(size + 64);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	check_url(s, 0);

	/* Then behind a password, unless the input carries the marker itself or a byte
	 * that ends the string early. */
	if (size > 0 && !memchr(data, 0, size) && !strstr(s, "SeCrEt")) {
		i = data[0] % (sizeof prefixes / sizeof prefixes[0]);
		plen = strlen(prefixes[i]);
		memmove(s + plen, data + 1, size - 1);
		memcpy(s, prefixes[i], plen);
		s[plen + size - 1] = '\0';
		check_url(s, 1);
	}
	free(s);
	return 0;
}
