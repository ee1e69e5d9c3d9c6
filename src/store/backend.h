/* SPDX-License-Identifier: MIT */
/* The seam's inside: what a backend implements and what the front end configures.
 * store.h is its face for main, wait, renew and report; the backends (the routed
 * single server in store.c, with its routes in sentinel.c and cluster.c; the Redlock
 * quorum in quorum.c) include only this, so none of them needs another's names.
 * The contract of each call is store.h's for the function of the same name. */
#ifndef RLOCK_BACKEND_H
#define RLOCK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "lock.h"
#include "storecodes.h"

#define STORE_HOPS_MAX   5 /* redirects followed by one call */
#define STORE_PAUSES_MAX 5 /* STORE_ROUTE_LATER: 50+100+200+400+800 ms at most */

/* store_look_once's setting in the calling thread: 1 while every source is asked once. */
int store_looking_once(void);

enum { STORE_ROUTE_FAIL = 0, STORE_ROUTE_RETRY = 1, STORE_ROUTE_ASK = 2, STORE_ROUTE_LATER = 3 };

struct store_route {
	void *(*open)(const void *arg); /* per-handle state, NULL: out of memory */
	void (*close)(void *ctx);
	/* key NULL: any master (WAIT, INFO). STORE_OK with *srv, or STORE_ERR (reason in
	 * err), STORE_DENIED; nothing past cap_ms. */
	int (*locate)(void *ctx, const char *key, int64_t cap_ms, const struct server **srv,
	              char *err, size_t errlen);
	int (*redirect)(void *ctx, const char *key, const struct server *srv, const char *errtext,
	                const struct server **ask);
	const struct server *(*master)(void *ctx, int i, int64_t cap_ms, char *err,
	                               size_t errlen);            /* optional */
	const char *(*subscribe_cmd)(void *ctx, const char *key); /* optional */
	void (*probe)(void *ctx, int64_t cap_ms);                 /* optional */
	/* optional: store_learn; c (NULL: none), the handle's connection to at, free for a
	 * call. -1 when c failed meanwhile (the caller drops it), else 0. */
	int (*learn)(void *ctx, const struct server *at, struct client *c, int64_t cap_ms);
	const char *(*name)(void *ctx); /* optional: the server for messages, --status */
	void (*resolve)(void *arg, int64_t deadline_ms); /* optional: look names up */
	/* optional: the next locate asks whoever names the server again, however lately it
	 * did (a release: the verdict on the whole run must come from the current master) */
	void (*recheck)(void *ctx);
	/* optional: *c, a connection subscribed to the announcements that the server
	 * changed (Sentinel: +switch-master), for a waiter that listens on the server
	 * named before; STORE_OK or STORE_ERR. watch_says: 1 when reply r announces a
	 * change of this route's server (its next locate then asks again), else 0.
	 * Never past cap_ms (the waiter's deadline; STORE_NO_CAP: none). */
	int (*watch)(void *ctx, int64_t cap_ms, struct client **c, char *err, size_t errlen);
	int (*watch_says)(void *ctx, const struct resp_reply *r);
};

/* What every handle of one run shares. Built once by the front end
 * (store_config_from_opts(), frontend.h). */
#define STORE_NODES_MAX 16
struct store_backend;
struct store_config {
	int n;
	int64_t node_timeout_ms;             /* Redlock: one node's deadline per request */
	const struct store_backend *backend; /* NULL: the routed single server (store.c) */
	const struct store_route *route;     /* NULL: srv[0] as given */
	void *route_arg;                     /* the route's context: written by resolve() only */
	/* last: a run writes the fields above and the first server, each page a page fault */
	struct server srv[STORE_NODES_MAX]; /* the URLs given: one, or a Redlock quorum */
};

/* A backend: one implementation of the store's calls. ctx is a handle's state, from
 * open(). Optional entries may be NULL. */
struct store_backend {
	/* A handle's state in *ctx: STORE_OK, or an error with nothing left open. */
	int (*open)(void **ctx, const struct store_config *cfg, int connect, int64_t cap_ms,
	            char *err, size_t errlen);
	void (*close)(void *ctx);
	const char *(*name)(void *ctx); /* the server(s) for messages */
	int places;                     /* a waiter may take a place in a fair queue */
	int (*acquire)(void *ctx, struct lock *l, const struct lock_meta *m, int64_t cap_ms,
	               int64_t *sent_ms, struct holder *h, char *err, size_t errlen);
	int (*renew)(void *ctx, const struct lock *l, int64_t cap_ms, int64_t *sent_ms, char *err,
	             size_t errlen);
	int (*release)(void *ctx, const struct lock *l, int64_t keep_ms, int64_t cap_ms, char *err,
	               size_t errlen);
	int (*status)(void *ctx, const struct lock *l, int64_t cap_ms, struct holders *h, char *err,
	              size_t errlen);
	int (*brk)(void *ctx, const struct lock *l, int64_t cap_ms, struct holders *h, char *err,
	           size_t errlen);
	int (*leave)(void *ctx, const struct lock *l, int64_t cap_ms, struct holder *newer,
	             char *err, size_t errlen);
	int (*is_holder)(void *ctx, const struct lock *l, const char *token, int64_t cap_ms,
	                 struct holding *hd, char *err, size_t errlen);
	int (*wait_replicas)(void *ctx, int n, char *err, size_t errlen);
	/* store_wait_aof; NULL: the backend cannot (Redlock) */
	int (*wait_aof)(void *ctx, int local, int replicas, char *err, size_t errlen);
	/* SCAN every master for keys matching match; each page of names (an array reply)
	 * to page(arg, names); no request past cap_ms. 0, page's non-zero return, or -1
	 * with the reason. */
	int (*list)(void *ctx, const char *match, int64_t cap_ms,
	            int (*page)(void *arg, const struct resp_reply *names), void *arg, char *err,
	            size_t errlen);
	void (*check_eviction)(void *ctx, const char *warn_key, const char *key, int64_t cap_ms);
	void (*learn)(void *ctx, int64_t cap_ms); /* store_learn; optional */
	/* Release notifications: the k-th server to listen on (from 0; NULL after the
	 * last), with *wait_ms each request's deadline there. Optional: NULL, the store's
	 * own server (the route's). */
	const struct server *(*listen_at)(void *ctx, int k, int64_t *wait_ms);
	/* --history: the newest *n entries (in: room in e; out: how many), newest first
	 * (Redlock: every node's, merged by fence). LOCK_OK or an error. */
	int (*history)(void *ctx, const struct lock *l, int64_t cap_ms, struct history_entry *e,
	               int *n, char *err, size_t errlen);
	/* --check (store_node, store_node_call): the k-th node, and one command on it. */
	const struct server *(*node)(void *ctx, int k, int64_t cap_ms, char *err, size_t errlen);
	int (*node_call)(void *ctx, const struct server *srv, int argc, const char **argv,
	                 const size_t *lens, int64_t cap_ms, struct resp_reply **reply, char *err,
	                 size_t errlen);
	/* store_connected, store_unanswered. Optional: NULL, never (a quorum's
	 * unanswered). */
	int (*connected)(const void *ctx);
	int (*unanswered)(const void *ctx);
	/* Where a waiter's place lives (places): the server of the handle's open
	 * connection, NULL when none. Required when places is set. */
	const struct server *(*placed_at)(const void *ctx);
	/* Release notifications without listen_at: the server of l's channel and the
	 * (S)SUBSCRIBE to send there. STORE_OK, or STORE_ERR with the reason. Never past
	 * cap_ms (the waiter's deadline). */
	int (*listen_on)(void *ctx, const struct lock *l, int64_t cap_ms, const struct server **srv,
	                 const char **cmd, char *err, size_t errlen);
	/* Optional: the route's watch (store_route's watch and watch_says); *c NULL and
	 * STORE_OK when the route has none. */
	int (*watch)(void *ctx, int64_t cap_ms, struct client **c, char *err, size_t errlen);
	int (*watch_says)(void *ctx, const struct resp_reply *r);
};

/* The routed single server (routed.c), a peer of quorum_backend (quorum.h); another
 * backend may drive it directly (the quorum's nodes, one at a time). */
extern const struct store_backend routed_backend;

#endif
