/* SPDX-License-Identifier: MIT */
/* Redlock: the store's calls on N independent masters at once, a backend (backend.h)
 * that the front end chooses when several URLs are given. One poll loop drives the N connections,
 * their connects, TLS handshakes and AUTH included; each round has one deadline
 * (--node-timeout) from its start, so paused or unreachable nodes cost at most that
 * per round, however many they are. A node whose connect timed out is not tried again
 * within one node timeout, so the rounds of one acquisition do not each wait for it.
 *
 * A lease counts only when a quorum (N/2 + 1 of the N configured, never of those that
 * answered) confirmed it, and from the first send minus the clock-drift allowance
 * (ttl/100 + 2 ms): what store_acquire/store_renew report as *sent_ms, so the
 * supervisor's rule (lost at sent + ttl*4/5 without a newer confirmation) is the
 * Redlock validity rule. The fence is made safe by a max-merge (see merge_fence).
 * Same contracts as the store_* calls of the same name; one thread per quorum. */
#ifndef RLOCK_QUORUM_H
#define RLOCK_QUORUM_H

#include "backend.h"

/* The quorum's implementation of the store's calls (store_config.backend). */
extern const struct store_backend quorum_backend;

#endif
