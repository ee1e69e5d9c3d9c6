/* SPDX-License-Identifier: MIT */
/* The lease rule (docs/DESIGN.md), once, for the hold (hold.h), its renewal threads
 * (renew.h) and the waiter (wait.h): a lease granted by a request sent at s cannot end
 * on the server before s + ttl; rlock counts it lost at s + ttl * 4/5 when nothing sent
 * since was confirmed, has the command's group SIGKILLed by s + ttl * 9/10, and never
 * sends a release after s + ttl (at worst the lock then expires by its TTL). */
#ifndef RLOCK_LEASE_H
#define RLOCK_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "store.h"

/* When a lease sent at s counts as lost, and when the command's group must be dead. */
int64_t lease_loss_after(int64_t ttl_ms); /* ttl * 4/5 */
int64_t lease_kill_by(int64_t ttl_ms);    /* ttl * 9/10 */
/* The time a renewal has, from when it is due (s + ttl/3) until the lease counts as
 * lost (s + ttl * 4/5): a round of requests (Redlock: --node-timeout) must fit in it. */
int64_t lease_renew_window(int64_t ttl_ms);
/* --warn: a renewal sent at s + ttl/3 not confirmed within another third. */
int64_t lease_warn_after(int64_t ttl_ms); /* ttl * 2/3 */

#define LEASE_OVER "the lease is over" /* lease_release's reason when it was too late */

/* Release l on s, else (s NULL) on a fresh handle of cfg (cfg NULL: none), never at or
 * after lease_end nor past cap_ms; that fresh handle into *opened (NULL: none opened),
 * for the caller to close, else (opened NULL) closed here. LOCK_OK, LOCK_NOTOURS (no
 * longer ours) or LOCK_ERR with the reason in err (LEASE_OVER when it was too late:
 * nothing was sent), or LOCK_HANDED_OVER (released to the --preempt request that
 * stopped the command: lock.h), LOCK_HANDED_ON (keep_ms > 0: not kept, released to a
 * --preempt request: lock.h), or LOCK_KEEP_OVER (keep_ms > 0, sent again: kept, the
 * keep over now: lock.h). */
int lease_release(struct store *s, const struct store_config *cfg, const struct lock *l,
                  int64_t keep_ms, int64_t lease_end, int64_t cap_ms, struct store **opened,
                  char *err, size_t errlen);

#endif
