/* SPDX-License-Identifier: MIT */
/* A nested run granted names by re-entrance runs under its ancestor's leases, which
 * end when that holder releases (its command and the groups it covers are done: this
 * run may have left them, in a session of its own; a keeper's --release) or loses them.
 * Nothing would tell this run: it watches the inherited tokens itself, one read each
 * per interval, in a thread with a connection of its own, and a token that no longer
 * holds its name (or a lease it could not see renewed before it would end) is a loss,
 * acted on as one: its command's group stopped, exit 79. */
#ifndef RLOCK_REWATCH_H
#define RLOCK_REWATCH_H

#include "child.h"
#include "hold.h"
#include "lock.h"
#include "reenter.h"
#include "store.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct rewatch {
	struct store *s; /* the thread's: opened there on cfg when NULL */
	const struct store_config *cfg;
	int n;
	struct lock l[HOLD_LOCKS_MAX];
	const char *name[HOLD_LOCKS_MAX], *token[HOLD_LOCKS_MAX];
	int64_t io_timeout_ms, every_ms;
	int stop[2];             /* written by the main thread: stop watching */
	int lost_fd;             /* an eventfd, written on a loss the server told of */
	_Atomic int64_t lost_by; /* when the leases seen last end unless seen renewed */
	_Atomic int fired;       /* the thread found a token gone (why says which) */
	char why[LOCK_NAME_MAX + 200];
	pthread_t t;
	/* run(): the run's own hold beside it (the supervisor watches both) */
	const struct hold *h;
	int epfd;
};

/* Watch the names of r granted by re-entrance (0: none; nothing started), on s (the
 * thread's from now on) or, s NULL, on a connection of the thread's own to cfg. Exits
 * 71 when it cannot. */
int rewatch_start(struct rewatch *w, const struct reenter *r, const char *prefix, int64_t ttl_ms,
                  int64_t io_timeout_ms, struct store *s, const struct store_config *cfg);

/* The command is done: stop the watch (its thread joined), and with look, when it did
 * not fire, one last look. 0: every inherited token still holds its name (or the server
 * cannot say, or no look); -1: one does not (said: exit 79). */
int rewatch_end(struct rewatch *w, int look);

/* The supervisor's view (child.h), ctx w: the inherited leases alone (a run re-entered
 * whole), or beside h's own lease (a run that took the other names), whichever is lost
 * first. */
void rewatch_supervise(struct rewatch *w, struct supervise_args *sa);
void rewatch_supervise_beside(struct rewatch *w, const struct hold *h, struct supervise_args *sa);

#endif
