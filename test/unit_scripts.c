/* SPDX-License-Identifier: MIT */
/* The SHA-1 names the build computed for the embedded Lua scripts must be the real
 * SHA-1 of the text sent with EVAL: a wrong one would never fail loudly, it would just
 * turn every EVALSHA into NOSCRIPT + EVAL. */
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "scripts.h"

static int passed, failed;

static void check(const char *name, const char *text, size_t len, const char *sha)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[41];

	EVP_Digest(text, len, md, &n, EVP_sha1(), NULL);
	for (unsigned i = 0; i < 20; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (strcmp(hex, sha) == 0 && len > 0 && strstr(text, "redis.call")) {
		passed++;
	} else {
		failed++;
		fprintf(stderr, "FAIL %s: built %s, real %s\n", name, sha, hex);
	}
}

int main(void)
{
#define CHECK(x, X) check(#x, lua_##x, sizeof lua_##x - 1, LUA_##X##_SHA)
	CHECK(acquire, ACQUIRE);
	CHECK(renew, RENEW);
	CHECK(release, RELEASE);
	CHECK(status, STATUS);
	CHECK(break, BREAK);
	CHECK(acquire_sem, ACQUIRE_SEM);
	CHECK(renew_sem, RENEW_SEM);
	CHECK(release_sem, RELEASE_SEM);
	CHECK(leave, LEAVE);
	CHECK(fence, FENCE);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
