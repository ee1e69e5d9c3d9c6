/* SPDX-License-Identifier: MIT */
/* The lock protocol: every state change is one Lua script, sent with EVALSHA and
 * retried with EVAL on NOSCRIPT. Keys of one lock share the {NAME} hash tag, so every
 * script runs on one node of a cluster.
 *
 *   PREFIX{NAME}           token, PX ttl (plain SET NX PX compatible)
 *   PREFIX{NAME}:fence     INCR per acquisition, never expires -> RLOCK_FENCE
 *   PREFIX{NAME}:owner     hash host pid user cmd start ttl fence [kept], same expiry as the
 *                          lock (kept: the command exited, --min-hold keeps the lock)
 *   PREFIX{NAME}:released  pub/sub channel: the token is published on release
 */
#ifndef RLOCK_LOCK_H
#define RLOCK_LOCK_H

#include <stdint.h>

#include "client.h"

#define LOCK_KEY_MAX   1100
#define LOCK_TOKEN_LEN 32 /* 128 bits, hex */

struct lock {
	char key[LOCK_KEY_MAX];
	char fence_key[LOCK_KEY_MAX];
	char owner_key[LOCK_KEY_MAX];
	char channel[LOCK_KEY_MAX];
	char token[LOCK_TOKEN_LEN + 1];
	int64_t ttl_ms;
	long long fence; /* set by a successful acquire */
};

/* Who holds it: what a failed acquire or a status query reports. Fields are "" when
 * the holder left no metadata; text is untrusted (escape before printing). */
struct holder {
	int held;
	int kept;          /* released by its command, kept by --min-hold until the lease ends */
	long long pttl_ms; /* -1: no expiry (set by hand), -2: gone */
	long long fence;
	char token[80];
	char host[256], pid[32], user[64], cmd[512], start[32], ttl[32];
};

enum lock_rc {
	LOCK_OK = 0,      /* acquired / renewed / released */
	LOCK_BUSY = 1,    /* acquire: someone else holds it (holder filled) */
	LOCK_NOTOURS = 2, /* renew/release: the token is no longer the holder */
	LOCK_ERR = -1,    /* connection or server error; reason in err */
	LOCK_DENIED = -3, /* NOAUTH / NOPERM / WRONGPASS */
	/* A routing error (MOVED, ASK, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
	 * LOADING): another node, or later, may take it; err holds the reply verbatim
	 * for the store's route (store.h). */
	LOCK_REDIRECT = -4,
};

/* Build the key names and a fresh random token (getrandom). -1 if no randomness. */
int lock_init(struct lock *l, const char *prefix, const char *name, int64_t ttl_ms);

/* Owner metadata recorded with the lock. */
struct lock_meta {
	const char *host, *user, *cmd;
	long pid;
	long long start_unix_ms;
};

/* Decoders of the scripts' replies, pure (no I/O; r stays the caller's), so they are
 * fuzzed on their own (fuzz/fuzz_lock_reply.c). Any reply shape is handled: an
 * unexpected one is LOCK_ERR with the reason in err, a server error LOCK_ERR or
 * LOCK_DENIED.
 * acquire: LOCK_OK (l->fence set from {1, fence}), LOCK_BUSY (*h filled from the
 *          holder's 9 fields); int (renew, release): LOCK_OK with *v; holder (status,
 *          break; what names it in err): LOCK_OK with *h filled. */
int lock_decode_acquire(const struct resp_reply *r, struct lock *l, struct holder *h, char *err,
                        size_t errlen);
int lock_decode_int(const struct resp_reply *r, const char *what, long long *v, char *err,
                    size_t errlen);
int lock_decode_holder(const struct resp_reply *r, const char *what, struct holder *h, char *err,
                       size_t errlen);

/* Try once. LOCK_OK (l->fence set), LOCK_BUSY (*h filled), LOCK_ERR, LOCK_DENIED. */
int lock_acquire(struct client *c, struct lock *l, const struct lock_meta *m, int64_t deadline_ms,
                 struct holder *h, char *err, size_t errlen);

/* Extend the lease to ttl if the token still holds it: LOCK_OK, LOCK_NOTOURS, LOCK_ERR. */
int lock_renew(struct client *c, const struct lock *l, int64_t deadline_ms, char *err,
               size_t errlen);

/* Release if the token still holds it: delete and publish, or, when keep_ms > 0, let
 * the lease run for keep_ms more and then expire (--min-hold). LOCK_OK, LOCK_NOTOURS,
 * LOCK_ERR. */
int lock_release(struct client *c, const struct lock *l, int64_t keep_ms, int64_t deadline_ms,
                 char *err, size_t errlen);

/* Read the holder of l->key without changing anything. */
int lock_status(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *h,
                char *err, size_t errlen);

/* Force release whoever holds it (operator use); *h says what was removed. */
int lock_break(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *h,
               char *err, size_t errlen);

#endif
