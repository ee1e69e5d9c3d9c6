/* SPDX-License-Identifier: MIT */
/* Fuzz the decoders of the Lua scripts' replies (lock_decode_*: what turns a script's
 * reply into a fence, a struct holder, the holders list or a renew/release verdict) with every
 * reply a hostile server could send: the bytes go through the real reply reader first (resp.c),
 * then each reply through every decoder. Properties: no crash, no read past a reply;
 * the holder's text fields stay NUL-terminated inside their buffers; LOCK_OK from the
 * acquire decoder only with {1, fence} (an integer, or a string of one), l.fence exact. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "resp.h"

static void terminated(const char *s, size_t n)
{
	if (!memchr(s, '\0', n))
		abort();
}

static void check_holder(const struct holder *h)
{
	terminated(h->token, sizeof h->token);
	terminated(h->host, sizeof h->host);
	terminated(h->user, sizeof h->user);
	terminated(h->cmd, sizeof h->cmd);
}

static void decode_all(const struct resp_reply *r)
{
	struct lock l;
	struct holder h;
	static struct holders hs;
	char err[512];
	long long v = 0;
	int rc;

	memset(&l, 0, sizeof l);
	memset(&h, 0, sizeof h);
	err[0] = '\0';
	rc = lock_decode_acquire(r, &l, &h, err, sizeof err);
	if (rc == LOCK_OK && (r->type != RESP_ARRAY || r->elements != 2 ||
	                      lock_fence_value(r->element[1], &v) != 0 || l.fence != v))
		abort();
	if (rc == LOCK_BUSY)
		check_holder(&h);
	if (rc < 0)
		terminated(err, sizeof err);
	rc = lock_decode_int(r, "renew", &v, err, sizeof err);
	if (rc == LOCK_OK && (r->type != RESP_INTEGER || v != r->integer))
		abort();
	rc = lock_decode_fence(r, &v, err, sizeof err);
	if (rc == LOCK_OK && lock_fence_value(r, &v) != 0)
		abort();
	rc = lock_decode_holders(r, "status", &hs, err, sizeof err);
	if (rc == LOCK_OK) {
		if (hs.n > HOLDERS_MAX || hs.nq > WAITERS_MAX || hs.total < hs.n)
			abort();
		for (int i = 0; i < hs.n; i++)
			check_holder(&hs.h[i]);
		terminated(hs.limit, sizeof hs.limit);
		terminated(hs.writer, sizeof hs.writer);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct resp_reader *rd = resp_reader_new();
	char err[256];

	if (!rd)
		return 0;
	if (resp_reader_feed(rd, (const char *)data, size) == 0) {
		for (int i = 0; i < 64; i++) {
			struct resp_reply *r = NULL;
			if (resp_reader_get(rd, &r, err, sizeof err) != 1)
				break;
			decode_all(r);
			resp_free(r);
		}
	}
	resp_reader_free(rd);
	return 0;
}
