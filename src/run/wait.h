/* SPDX-License-Identifier: MIT */
/* Waiting for a busy lock without polling blindly: subscribe to the lock's release
 * channel (and, in the queued modes, this waiter's own wake-up channel: a release wakes
 * only the queue's head), retry at once after subscribing (so a release between the failed attempt
 * and the subscription is not missed), then retry when woken, when the holder's TTL can
 * have run out, or after a jittered backoff (the safety net). Every attempt refreshes
 * the waiter's place in the queue (or its writer mark), a lease of its ttl: the naps
 * never exceed ttl/3. A waiter that gives up leaves the queue. */
#ifndef RLOCK_WAIT_H
#define RLOCK_WAIT_H

#include <stdint.h>

#include "lock.h"
#include "store.h"

/* Not the LOCK_* codes (some share values: WAIT_SIGNAL and LOCK_REDIRECT are both -4):
 * wait_acquire maps a store reply to these explicitly. */
enum wait_rc {
	WAIT_ACQUIRED = 0,
	WAIT_BUSY = 1,       /* -n, or the wait expired; *h says who holds it */
	WAIT_DONE = 2,       /* --once-per: done inside the window; h->pttl_ms its time left */
	WAIT_SUPERSEDED = 3, /* --supersede: a newer request took the place; *h names it */
	WAIT_ERR = -1,       /* Redis unavailable; reason in err */
	WAIT_DENIED = -3,    /* NOAUTH/NOPERM */
	WAIT_SIGNAL = -4,    /* a terminating signal arrived; *signo set */
	WAIT_MISMATCH = -5,  /* holders of another mode or limit (LOCK_MISMATCH); reason in err */
	WAIT_OSERR = -6,     /* a local resource (a thread, a descriptor) is lacking: 71 */
};

struct wait_args {
	struct lock *lock;
	const struct lock_meta *meta;
	const char *name; /* lock name, for the status line */
	int64_t wait_ms;  /* -1 forever, 0 no wait */
	int64_t io_timeout_ms;
	int sigfd;       /* signalfd of the terminating signals only (child_term_fd) */
	int status_line; /* draw a live status line on stderr (a terminal) */
	/* The server answered this run already (a lock of several before this one was
	 * taken): a first attempt whose reply was lost is an outage, as a waiting one's is. */
	int served;
};

/* Acquire l in the store s (its connection and subscription are its own business).
 * On WAIT_ACQUIRED, *sent_ms is the monotonic time the winning
 * request was sent: the server-side lease cannot end before sent_ms + ttl.
 * A server that cannot serve (unreachable, an error reply such as LOADING, READONLY,
 * MASTERDOWN) is retried with backoff until the wait's deadline (forever without
 * one), from the first attempt on (-n: WAIT_ERR at once), the outage said once when
 * it starts and once when it ends; any other failure of the first attempt
 * (store_fault_passing) is WAIT_ERR at once, but for a lost reply when a->served.
 * A terminating signal (sigfd; the conn layer's waits must watch it too, see
 * conn_set_abort_fd) ends it at once with WAIT_SIGNAL, after giving back a lock an
 * interrupted request may have taken. */
int wait_acquire(struct store *s, const struct wait_args *a, int64_t *sent_ms, struct holder *h,
                 int *signo, char *err, size_t errlen);

/* Open the main handle on cfg: the first connection is part of the wait. A server
 * that cannot be reached (refused, timed out, a Redlock quorum short of nodes) is
 * tried again with capped, jittered backoff until wait_ms (-1 forever; 0, -n: fail
 * at once), with one line on stderr when the outage starts and one when it ends. A
 * failure time cannot fix (authentication, TLS verification, not a Redis server:
 * all but store_fault_passing) fails at once. A terminating signal on sigfd ends it (left
 * unread). store_open's codes. */
int wait_open(struct store **out, const struct store_config *cfg, const char *name, int64_t wait_ms,
              int sigfd, char *err, size_t errlen);

/* After WAIT_ACQUIRED, the last checks before the command starts: WAIT for `replicas`
 * replicas (0: none), WAITAOF aof_local aof_replicas (--wait-aof; both 0: none), then make sure the
 * lease sent at sent_ms still has time left (the rule of a late acquire reply) and no terminating
 * signal arrived. On failure the lock is given back (bounded by the io-timeout). WAIT_ACQUIRED
 * (start the command), WAIT_ERR (reason in err) or WAIT_SIGNAL (*signo). */
int wait_ready(struct store *s, const struct wait_args *a, int64_t sent_ms, int replicas,
               int aof_local, int aof_replicas, int *signo, char *err, size_t errlen);

#endif
