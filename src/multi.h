/* SPDX-License-Identifier: MIT */
/* Several locks at once (`-k A -k B ...`): all or nothing. main holds the first name
 * (o->names[0]) as it holds a single lock; this module holds the others. Names are
 * acquired in their sorted order (cli.c sorts them), so `-k A -k B` and `-k B -k A`
 * cannot deadlock: nobody holds a later name while waiting for an earlier one. Each
 * lock is renewed by its own thread from the moment it is taken (the wait for the
 * next one may be long); the lease the supervisor watches is the oldest of them all,
 * and the loss of any one is the loss of the set (79).
 *
 * The command's environment (RLOCK_KEYS, RLOCK_TOKENS, RLOCK_FENCES) is reenter.h's. */
#ifndef RLOCK_MULTI_H
#define RLOCK_MULTI_H

#include <stdint.h>

#include "cli.h"
#include "lock.h"
#include "renew.h"
#include "store.h"
#include "wait.h"

struct multi {
	int n; /* locks held beyond the first */
	struct lock l[OPTS_NAMES_MAX - 1];
	struct renew *rn[OPTS_NAMES_MAX - 1];
	int64_t sent[OPTS_NAMES_MAX - 1];
	int epfd; /* readable when any renewal thread (and first_fd) reports a loss */
};

/* Acquire o->names[1..] in order, each as wait_acquire() + wait_ready() do (within
 * what is left of --wait, counted from started_ms), starting its renewal at once.
 * m->n = 0 and nothing to do for a single name. On anything but WAIT_ACQUIRED, what
 * was taken here is released (the caller releases the first lock) and *h / err /
 * *signo say why, as from wait_acquire(). */
int multi_acquire(struct multi *m, struct store *s, const struct store_config *cfg,
                  const struct opts *o, const struct lock_meta *meta, int termfd,
                  int64_t started_ms, struct holder *h, int *signo, char *err, size_t errlen);

/* The oldest confirmed send time: min(first, every lock's). Thread-safe. */
int64_t multi_confirmed_sent(const struct multi *m, int64_t first);

/* A pollable fd, readable once first_fd or any renewal thread of m reports a loss;
 * first_fd when m holds nothing. -1 on error. */
int multi_lost_fd(struct multi *m, int first_fd);

/* Why a lock of m is lost (into buf; 0 if none is known lost): the server's verdict. */
int multi_lost_reason(const struct multi *m, int timed_out, int64_t loss_after_ms, char *buf,
                      size_t n);

/* Stop the renewals and release every lock of m (keep_ms: --min-hold), each on its
 * renewal thread's connection, else on spare (the caller's, left open; may be NULL),
 * else a fresh one. Returns 1 when a lock was found no longer ours (lost), else 0. */
int multi_release(struct multi *m, const struct store_config *cfg, int64_t keep_ms,
                  struct store *spare);

#endif
