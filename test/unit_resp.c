/* SPDX-License-Identifier: MIT */
/* Unit tests for resp_format (src/net/resp.c): the bytes of RESP2's request form, as
 * hiredis' redisFormatCommandArgv writes them (rlock formats its requests itself). */
#include <stdlib.h>
#include <string.h>

#include "resp.h"

#include "unit.h"

/* argv formatted is exactly want (wantlen bytes, then a terminating NUL). */
static int formats(int argc, const char **argv, const size_t *lens, const char *want,
                   size_t wantlen)
{
	char *cmd = NULL;
	size_t len = 0;

	if (resp_format(&cmd, &len, argc, argv, lens) < 0)
		return 0;
	int ok = len == wantlen && memcmp(cmd, want, len) == 0 && cmd[len] == '\0';
	free(cmd);
	return ok;
}

#define FORMATS(argc, argv, lens, want) formats(argc, argv, lens, want, sizeof want - 1)

int main(void)
{
	const char *set[] = {"SET", "k", "v"};
	size_t set_lens[] = {3, 1, 1};
	CHECK(FORMATS(3, set, set_lens, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"));

	/* an empty argument, and bytes a text form would cut or misread */
	const char *odd[] = {"", "a\0b\r\n"};
	size_t odd_lens[] = {0, 5};
	CHECK(FORMATS(2, odd, odd_lens, "*2\r\n$0\r\n\r\n$5\r\na\0b\r\n\r\n"));

	CHECK(FORMATS(0, NULL, NULL, "*0\r\n"));

	/* lengths across a digit: 9, 10, 100 bytes; 10 and 12 arguments */
	static char x[100];
	memset(x, 'x', sizeof x);
	const char *many[12];
	size_t many_lens[12];
	for (int i = 0; i < 12; i++) {
		many[i] = x;
		many_lens[i] = i == 0 ? 9 : i == 1 ? 10 : 100;
	}
	char *cmd = NULL;
	size_t len = 0;
	CHECK(resp_format(&cmd, &len, 12, many, many_lens) == 0);
	CHECK(cmd &&
	      strncmp(cmd, "*12\r\n$9\r\nxxxxxxxxx\r\n$10\r\nxxxxxxxxxx\r\n$100\r\n", 40) == 0);
	CHECK(len == 5 + (4 + 9 + 2) + (5 + 10 + 2) + 10 * (6 + 100 + 2));
	free(cmd);
	CHECK(resp_format(&cmd, &len, 10, many, many_lens) == 0);
	CHECK(cmd && strncmp(cmd, "*10\r\n$9\r\n", 9) == 0);
	free(cmd);

	printf("unit_resp: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
