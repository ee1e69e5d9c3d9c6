/* SPDX-License-Identifier: MIT */
/* Redis Cluster: which node owns a key, learnt from the nodes' own answers (CLUSTER
 * SLOTS, MOVED, ASK), never configured: any node's URL works.
 *
 * The pure part (key slot, redirect parsing, the slot map) does no I/O and never
 * exits, so it is unit-tested on its own (test/unit_cluster.c). The route that plugs
 * it into the store (store.h) is below it. */
#ifndef RLOCK_CLUSTER_H
#define RLOCK_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "resp.h"

#define CLUSTER_SLOTS     16384
#define CLUSTER_NODES_MAX 64 /* nodes one map remembers; a bigger cluster is refused */
#define CLUSTER_HOST_MAX  256

/* The slot of key (CRC16-CCITT mod 16384 of the hash tag: the part between the first
 * '{' and the next '}', when that part is not empty; else of the whole key). */
unsigned cluster_keyslot(const char *key, size_t len);

struct cluster_addr {
	char host[CLUSTER_HOST_MAX]; /* "" when the node said "the one you asked" */
	int port;
};

/* An error reply's text (its code first). MOVED and ASK: 1 with *ask (0 MOVED, 1 ASK),
 * *slot and *to ("MOVED 3999 127.0.0.1:6381"; IPv6 hosts end at the last ':'; an
 * empty host means the node that answered). 0 for any other error, -1 for a MOVED or
 * ASK this parser cannot read. */
int cluster_parse_redirect(const char *errtext, int *ask, unsigned *slot, struct cluster_addr *to);

/* Does the error text's code (its first word) equal code? */
int cluster_error_is(const char *errtext, const char *code);

/* The slot map: the masters and which slots each serves. */
struct cluster_map {
	int n; /* nodes known */
	struct cluster_addr node[CLUSTER_NODES_MAX];
	int16_t owner[CLUSTER_SLOTS]; /* index in node[]; -1 unknown */
	int sharded;                  /* the nodes are Redis >= 7 (sharded pub/sub) */
};

void cluster_map_init(struct cluster_map *m);

/* The index of node a in m, added when new: -1 when m is full. */
int cluster_map_node(struct cluster_map *m, const struct cluster_addr *a);

/* Replace m's slots with a CLUSTER SLOTS reply ([[start, end, [host, port, id, meta?],
 * replicas...]...]), read from the node at `asked` (what an empty host means). Nodes
 * are kept (indexes stay valid); only masters are added. m->sharded is set when the
 * master entries carry the metadata Redis 7 added. 0, or -1 with the reason (m is
 * then unchanged). */
int cluster_map_parse(struct cluster_map *m, const struct resp_reply *r,
                      const struct cluster_addr *asked, char *err, size_t errlen);

/* The i-th node that owns at least one slot (i from 0): its index, or -1 after the last. */
int cluster_map_master(const struct cluster_map *m, int i);

/* The store's route (store.h) for one URL: the URL's server until a node answers
 * MOVED or ASK, then the slot map (read with CLUSTER SLOTS after the first MOVED, when
 * a connection to a node failed, and for --list: every master). Redirects are
 * followed (ASK with ASKING), READONLY/LOADING retried after forgetting the slot's
 * owner (a failover); CLUSTERDOWN and TRYAGAIN (a slot in migration) stand. SSUBSCRIBE when the
 * nodes are Redis
 * >= 7 (their CLUSTER SLOTS says so), SUBSCRIBE otherwise. The route's arg is the
 * URL's `const struct server *`. */
extern const struct store_route cluster_route;

#endif
