/* SPDX-License-Identifier: MIT */
/* Redlock: the store's calls on N independent masters at once (store.h routes them
 * here when several URLs are given). One poll loop drives the N connections, their
 * connects, TLS handshakes and AUTH included; each round has one deadline
 * (--node-timeout) from its start, so paused or unreachable nodes cost at most that
 * per round, however many they are. A node whose connect timed out is not tried again
 * within one node timeout, so the rounds of one acquisition do not each wait for it.
 *
 * A lease counts only when a quorum (N/2 + 1 of the N configured, never of those that
 * answered) confirmed it, and from the first send minus the clock-drift allowance
 * (ttl/100 + 2 ms): what store_acquire/store_renew report as *sent_ms, so the
 * supervisor's rule (lost at sent + ttl*4/5 without a newer confirmation) is the
 * Redlock validity rule. The fence is made safe by a max-merge (see quorum_acquire).
 * Same contracts as the store_* calls of the same name; one thread per quorum. */
#ifndef RLOCK_QUORUM_H
#define RLOCK_QUORUM_H

#include "store.h"

struct quorum;

int quorum_open(struct quorum **out, const struct store_config *cfg, int connect, int64_t cap_ms,
                char *err, size_t errlen);
void quorum_close(struct quorum *q);

int quorum_acquire(struct quorum *q, struct lock *l, const struct lock_meta *m, int64_t cap_ms,
                   int64_t *sent_ms, struct holder *h, char *err, size_t errlen);
int quorum_renew(struct quorum *q, const struct lock *l, int64_t cap_ms, int64_t *sent_ms,
                 char *err, size_t errlen);
int quorum_release(struct quorum *q, const struct lock *l, int64_t keep_ms, int64_t cap_ms,
                   char *err, size_t errlen);
int quorum_status(struct quorum *q, const struct lock *l, int64_t cap_ms, struct holders *h,
                  char *err, size_t errlen);
int quorum_break(struct quorum *q, const struct lock *l, int64_t cap_ms, struct holders *h,
                 char *err, size_t errlen);
int quorum_is_holder(struct quorum *q, const struct lock *l, const char *token, int64_t cap_ms,
                     char *err, size_t errlen);
int quorum_list(struct quorum *q, const char *match,
                int (*page)(void *arg, const struct resp_reply *names), void *arg, char *err,
                size_t errlen);

/* True when node i (0 <= i < N) is connected now: a node the last round could not
 * connect to is not worth a connect of one's own (store_check_eviction). */
int quorum_connected(const struct quorum *q, int i);

/* A node that answered lately (for the release notifications: every node publishes). */
const struct server *quorum_any_server(const struct quorum *q);

#endif
