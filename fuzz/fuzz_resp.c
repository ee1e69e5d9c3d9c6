/* SPDX-License-Identifier: MIT */
/* Fuzz the reply reader (resp.c over hiredis' parser) with what a hostile server could
 * send: arbitrary bytes, fed in arbitrary chunks. Properties: no crash, no leak, never
 * more than RESP_MAX_REPLY buffered for one reply, and every reply it returns is
 * well-formed (strings NUL-terminated at len, arrays with their elements). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

static void check(const struct resp_reply *r, int depth)
{
	if (depth > 8)
		abort();
	switch (r->type) {
	case RESP_STRING:
	case RESP_STATUS:
	case RESP_ERROR:
		if (!r->str || r->str[r->len] != '\0')
			abort();
		break;
	case RESP_ARRAY:
		for (size_t i = 0; i < r->elements; i++)
			check(r->element[i], depth + 1);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct resp_reader *rd = resp_reader_new();
	char err[256];
	size_t off = 0;

	if (!rd)
		return 0;
	/* The first byte picks the chunk size, so replies split across reads are covered. */
	size_t chunk = size ? (size_t)data[0] % 17 + 1 : 1;
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;
		if (resp_reader_feed(rd, (const char *)data + off, n) < 0)
			break;
		off += n;
		for (;;) {
			struct resp_reply *r = NULL;
			int got = resp_reader_get(rd, &r, err, sizeof err);
			if (got == 1) {
				check(r, 0);
				resp_free(r);
				continue;
			}
			if (got < 0)
				goto out;
			break;
		}
		if (resp_reader_pending(rd) > RESP_MAX_REPLY)
			abort();
	}
out:
	resp_reader_free(rd);
	return 0;
}
