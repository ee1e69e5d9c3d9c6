/* Waiting for a busy lock without polling blindly: subscribe to the lock's release
 * channel, retry at once after subscribing (so a release between the failed attempt
 * and the subscription is not missed), then retry when woken, when the holder's TTL can
 * have run out, or after a jittered backoff (the safety net). */
#ifndef RLOCK_WAIT_H
#define RLOCK_WAIT_H

#include <stdint.h>

#include "client.h"
#include "lock.h"

enum wait_rc {
	WAIT_ACQUIRED = 0,
	WAIT_BUSY = 1,    /* -n, or the wait expired; *h says who holds it */
	WAIT_ERR = -1,    /* Redis unavailable; reason in err */
	WAIT_DENIED = -3, /* NOAUTH/NOPERM */
	WAIT_SIGNAL = -4, /* a terminating signal arrived; *signo set */
};

struct wait_args {
	const struct server *srv;
	struct lock *lock;
	const struct lock_meta *meta;
	const char *name; /* lock name, for the status line */
	int64_t wait_ms;  /* -1 forever, 0 no wait */
	int sigfd;        /* signalfd of the blocked terminating signals */
	int status_line;  /* draw a live status line on stderr (a terminal) */
};

/* Acquire l with *c (which may be replaced by a fresh connection after an error).
 * On WAIT_ACQUIRED, *sent_ms is the monotonic time the winning request was sent:
 * the server-side lease cannot end before sent_ms + ttl. */
int wait_acquire(struct client **c, const struct wait_args *a, int64_t *sent_ms, struct holder *h,
                 int *signo, char *err, size_t errlen);

#endif
