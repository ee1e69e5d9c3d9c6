/* SPDX-License-Identifier: MIT */
/* The seam (store.h): a handle on one backend (backend.h: the routed single server of
 * routed.c, or the Redlock quorum of quorum.c), the calls handed to it, and the release
 * notifications a waiter listens for. */
#include "store.h"
#include "backend.h"
#include "cluster.h"
#include "tls.h"
#include "tlsload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* A handle: one backend's state, and the release notifications it listens for. */
struct store {
	const struct store_config *cfg;
	const struct store_backend *be;
	void *ctx;                    /* be's per-handle state, from its open() */
	struct client *sub;           /* release notifications: a subscription, or a wake list */
	const struct server *sub_at;  /* a wake list: where sub waits (NULL: a subscription) */
	const struct server *sub_srv; /* a subscription's server, when listen_at chose it */
	int sub_armed;                /* a wake list: sub has a BLPOP outstanding */
	int no_wake_list;             /* BLPOP refused (NOPERM): listen on the channel */
	int no_channel;       /* SUBSCRIBE refused (NOPERM) by every server tried: poll (store.h) */
	struct client *watch; /* the route's announcements (store_watch_fd) */
	int64_t watch_retry_at; /* a watch that failed is not tried again before */
	int watch_denied;       /* refused by the ACL (NOPERM): said once, never asked again */
};

int store_resolve(struct store_config *cfg, int64_t deadline_ms, char *err, size_t errlen)
{
	int ok = 0;

	conn_fault_clear(); /* store_fault_passing() then says whether a lookup may pass */

	if (cfg->route && cfg->route->resolve) {
		cfg->route->resolve(cfg->route_arg, deadline_ms);
		return STORE_OK;
	}
	/* A quorum goes on without the nodes it cannot look up (they count as down). */
	for (int i = 0; i < cfg->n; i++) {
		if (client_resolve(&cfg->srv[i], deadline_ms, err, errlen) == CLIENT_OK)
			ok++;
		else if (cfg->n > 1)
			log_debug("%s", err);
	}
	return ok > 0 && (cfg->n == 1 || ok > cfg->n / 2) ? STORE_OK : STORE_ERR;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* (S)SUBSCRIBE to l's release channel and read the confirmation: 0 or -1. */
static int subscribe(struct client *c, const char *cmd, const struct lock *l, int64_t d, char *err,
                     size_t errlen)
{
	struct resp_reply *r = NULL;
	const char *argv[3] = {cmd};
	size_t lens[3] = {strlen(cmd)};
	/* The release channel, and this waiter's own where a release wakes only the head
	 * of a queue (lock.h): one reply per channel. */
	int n = lock_channels(l, argv + 1);

	for (int i = 1; i <= n; i++)
		lens[i] = strlen(argv[i]);
	if (client_send(c, n + 1, argv, lens, d, err, errlen) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (client_recv(c, d, &r, err, errlen) != 1 || r->type != RESP_ARRAY) {
			int refused =
			    r && r->type == RESP_ERROR && strncmp(r->str, "NOPERM", 6) == 0;
			if (r && r->type == RESP_ERROR)
				log_reason(err, errlen, "%s failed: %s", cmd, r->str);
			resp_free(r);
			return refused ? -2 : -1;
		}
		resp_free(r);
		r = NULL;
	}
	return 0;
}

int store_open(struct store **out, const struct store_config *cfg, int connect, int64_t cap_ms,
               char *err, size_t errlen)
{
	struct store *s = calloc(1, sizeof *s);

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return STORE_ERR;
	}
	s->cfg = cfg;
	s->be = cfg->backend ? cfg->backend : &routed_backend;
	conn_fault_clear();
	int rc = s->be->open(&s->ctx, cfg, connect, cap_ms, err, errlen);
	if (rc != STORE_OK) {
		s->ctx = NULL;
		store_close(s);
		return rc;
	}
	*out = s;
	return STORE_OK;
}

void store_while_waiting(void (*fn)(void))
{
	conn_set_idle(fn);
}

void store_idle_now(void)
{
	conn_idle_now();
}

int store_fault_passing(void)
{
	return conn_fault() == CONN_FAULT_PASSING;
}

int store_fault_final(void)
{
	return (conn_fault() & CONN_FAULT_FINAL) != 0;
}

int store_fault_local(void)
{
	return (conn_fault() & CONN_FAULT_LOCAL) != 0;
}

int store_fault_file(void)
{
	return (conn_fault() & CONN_FAULT_FILE) != 0;
}

int store_fault_config(void)
{
	return (conn_fault() & CONN_FAULT_CONFIG) != 0;
}

int store_refused_url(int rc)
{
	return rc == STORE_USAGE || (rc != STORE_OK && store_fault_config());
}

static _Thread_local int look_once;

void store_look_once(int on)
{
	look_once = on;
}

int store_looking_once(void)
{
	return look_once;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	store_unsubscribe(s);
	store_unwatch(s);
	if (s->ctx)
		s->be->close(s->ctx);
	free(s);
}

int store_connected(const struct store *s)
{
	return s->be->connected && s->be->connected(s->ctx);
}

int store_unanswered(const struct store *s)
{
	return s->be->unanswered && s->be->unanswered(s->ctx);
}

/* ---- the seam: every call goes to the handle's backend --------------------------- */

const char *store_name(const struct store *s)
{
	return s->be->name(s->ctx);
}

int store_acquire(struct store *s, struct lock *l, const struct lock_meta *m, int64_t cap_ms,
                  int64_t *sent_ms, struct holder *h, char *err, size_t errlen)
{
	/* A place among the waiters lives on one server: a quorum's nodes would each wake
	 * a different waiter, so Redlock waiters listen on the release channel (as do
	 * those whose ACL refuses BLPOP: a place would only take wake-ups from others). */
	l->may_place = s->be->places && !s->no_wake_list;
	conn_fault_clear();
	return s->be->acquire(s->ctx, l, m, cap_ms, sent_ms, h, err, errlen);
}

int store_renew(struct store *s, const struct lock *l, int64_t cap_ms, int64_t *sent_ms, char *err,
                size_t errlen)
{
	return s->be->renew(s->ctx, l, cap_ms, sent_ms, err, errlen);
}

int store_release(struct store *s, const struct lock *l, int64_t keep_ms, int64_t cap_ms, char *err,
                  size_t errlen)
{
	return s->be->release(s->ctx, l, keep_ms, cap_ms, err, errlen);
}

int store_status(struct store *s, const struct lock *l, int64_t cap_ms, struct holders *h,
                 char *err, size_t errlen)
{
	return s->be->status(s->ctx, l, cap_ms, h, err, errlen);
}

int store_break(struct store *s, const struct lock *l, int64_t cap_ms, struct holders *h, char *err,
                size_t errlen)
{
	return s->be->brk(s->ctx, l, cap_ms, h, err, errlen);
}

int store_history(struct store *s, const struct lock *l, int64_t cap_ms, struct history_entry *e,
                  int *n, char *err, size_t errlen)
{
	return s->be->history(s->ctx, l, cap_ms, e, n, err, errlen);
}

int store_knew_token(struct store *s, const struct lock *l, const char *token, int64_t cap_ms)
{
	int count = 100, found = 0;
	struct history_entry *e = calloc((size_t)count, sizeof *e); /* large */
	char err[300];

	if (e && store_history(s, l, cap_ms, e, &count, err, sizeof err) == LOCK_OK)
		for (int i = 0; i < count && !found; i++)
			found = strcmp(e[i].token, token) == 0;
	free(e);
	return found;
}

int store_leave(struct store *s, const struct lock *l, int64_t cap_ms, struct holder *newer,
                char *err, size_t errlen)
{
	return s->be->leave(s->ctx, l, cap_ms, newer, err, errlen);
}

int store_is_holder(struct store *s, const struct lock *l, const char *token, int64_t cap_ms,
                    struct holding *hd, char *err, size_t errlen)
{
	memset(hd, 0, sizeof *hd);
	hd->mode = 'x';
	hd->ttl_left_ms = -1;
	conn_fault_clear(); /* store_fault_passing(): of this question */
	return s->be->is_holder(s->ctx, l, token, cap_ms, hd, err, errlen);
}

int store_wait_replicas(struct store *s, int n, char *err, size_t errlen)
{
	return s->be->wait_replicas(s->ctx, n, err, errlen);
}

int store_wait_aof(struct store *s, int local, int replicas, char *err, size_t errlen)
{
	if (!s->be->wait_aof) {
		snprintf(err, errlen, "--wait-aof does not apply to Redlock");
		return -1;
	}
	return s->be->wait_aof(s->ctx, local, replicas, err, errlen);
}

/* SCAN MATCH needs the prefix's glob characters escaped. */
static void glob_escape(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < n; s++) {
		if (strchr("*?[]\\", *s))
			dst[o++] = '\\';
		dst[o++] = *s;
	}
	dst[o] = '\0';
}

struct list_walk {
	struct store *s;
	const char *prefix;
	int (*each)(void *arg, const char *name, const struct lock *l, const struct holders *hs);
	void *arg;
	char *err;
	size_t errlen;
	int started;
	int64_t cap_ms;                    /* the whole walk's deadline */
	char undecided[LOCK_NAME_MAX + 1]; /* the last name whose row says "cannot tell" */
	char split[LOCK_NAME_MAX + 1];     /* the last name listed as a Redlock split */
};

/* One page of SCAN's names: the locks among them, each with its holders. */
static int list_page(void *arg, const struct resp_reply *names)
{
	struct list_walk *w = arg;
	int rc = w->started++ ? 0 : w->each(w->arg, NULL, NULL, NULL); /* the server answered */

	for (size_t i = 0; rc == 0 && i < names->elements; i++) {
		const struct resp_reply *k = names->element[i];
		char name[LOCK_NAME_MAX + 1];
		struct lock l;
		struct holders hs;
		if (k->type != RESP_STRING || lock_name_of_key(w->prefix, k->str, k->len, name) < 0)
			continue;
		lock_init(&l, w->prefix, name, 0);
		int64_t now = clock_ms(), cap = now + w->s->cfg->srv[0].io_timeout_ms;
		if (now >= w->cap_ms) {
			snprintf(w->err, w->errlen, "--list: out of time before %s", l.key);
			return -1;
		}
		memset(&hs, 0, sizeof hs);
		int st = store_status(w->s, &l, cap < w->cap_ms ? cap : w->cap_ms, &hs, w->err,
		                      w->errlen);
		if (st != LOCK_OK && hs.undecided[0]) {
			/* Redlock: the silent nodes could make it held, closed or reserved: the
			 * name's own row says so, once (its keys come together: Redlock's one
			 * page is sorted); the listing goes on, exit 69 at its end */
			if (strcmp(w->undecided, name) != 0)
				rc = w->each(w->arg, name, &l, &hs);
			snprintf(w->undecided, sizeof w->undecided, "%s", name);
			continue;
		}
		if (st != LOCK_OK && lock_err_foreign(w->err)) {
			/* --prefix '': the user's own key of the {NAME} shape (a Cluster hash
			 * tag), not rlock's (foreign.lua; over Redlock, on the nodes that refuse
			 * short of a quorum): not listed */
			w->err[0] = '\0';
			continue;
		}
		if (st != LOCK_OK) {
			/* which of the names (a key of another type under it: anyone can SET one)
			 */
			char why[512];
			log_reason(why, sizeof why, "%s", w->err);
			log_reason(w->err, w->errlen, "--list: %s: %s", l.key, why);
			return -1;
		}
		/* A lock-delay's key names a lock only while nobody holds it (else the
		 * holder's key lists it): closed by the delay; so does --preempt's, while
		 * the free lock is kept for that request (once: not when the delay's does),
		 * and the fair queue's, while its live waiters keep the free lock (once: not
		 * when a split vote, the delay's or --preempt's does). */
		int delay_key = k->len > 6 && memcmp(k->str + k->len - 6, ":delay", 6) == 0;
		int preempt_key = k->len > 8 && memcmp(k->str + k->len - 8, ":preempt", 8) == 0;
		int queue_key = k->len > 6 && memcmp(k->str + k->len - 6, ":queue", 6) == 0;
		/* A Redlock split (no majority of anything) is listed once, under the first
		 * of its keys (the keys of one name come together): its nodes may have the
		 * holder's key, the delay's, --preempt's or the queue's, in any mix. */
		if (!hs.n && hs.split_nodes) {
			if (strcmp(w->split, name) != 0)
				rc = w->each(w->arg, name, &l, &hs);
			snprintf(w->split, sizeof w->split, "%s", name);
			continue;
		}
		int listed = delay_key     ? !hs.n && !hs.split_nodes && hs.closed_ms > 0
		             : preempt_key ? !hs.n && !hs.split_nodes && hs.reserved.known &&
		                                 hs.closed_ms <= 0
		             : queue_key ? !hs.n && !hs.split_nodes && hs.queued > 0 &&
		                               hs.closed_ms <= 0 && !hs.reserved.known
		                         : hs.n > 0 || hs.split_nodes; /* else gone meanwhile */
		if (listed)
			rc = w->each(w->arg, name, &l, &hs);
	}
	return rc;
}

int store_list(struct store *s, const char *prefix, int64_t cap_ms,
               int (*each)(void *arg, const char *name, const struct lock *l,
                           const struct holders *hs),
               void *arg, char *err, size_t errlen)
{
	struct list_walk w = {s, prefix, each, arg, err, errlen, 0, cap_ms, "", ""};
	char match[300];

	/* PREFIX{NAME} (exclusive) and PREFIX{NAME}:holders (shared, permits). */
	glob_escape(match, sizeof match - 5, prefix);
	memcpy(match + strlen(match), "{*}*", 5); /* room kept by the - 5 above */
	return s->be->list(s->ctx, match, cap_ms, list_page, &w, err, errlen);
}

void store_check_eviction(struct store *s, const char *warn_key, const char *key, int64_t cap_ms)
{
	s->be->check_eviction(s->ctx, warn_key, key, cap_ms);
}

int store_locks_spread(const struct store_config *cfg)
{
	return cfg->route == &cluster_route;
}

void store_learn(struct store *s, int64_t cap_ms)
{
	if (s->be->learn)
		s->be->learn(s->ctx, cap_ms);
}

const struct server *store_node(struct store *s, int k, int64_t cap_ms, char *err, size_t errlen)
{
	return s->be->node(s->ctx, k, cap_ms, err, errlen);
}

int store_node_call(struct store *s, const struct server *srv, int argc, const char **argv,
                    const size_t *lens, int64_t cap_ms, struct resp_reply **reply, char *err,
                    size_t errlen)
{
	*reply = NULL;
	return s->be->node_call(s->ctx, srv, argc, argv, lens, cap_ms, reply, err, errlen);
}

/* A waiter with a place (l->placed) blocks on its own wake list, on the server that
 * gave it the place (where the last attempt went): BLPOP, sent once and read when a
 * release pushes; a push before it was sent waits in the list. */
static int wake_arm(struct store *s, const struct lock *l, int64_t cap, char *err, size_t errlen)
{
	const struct server *at = s->be->placed_at(s->ctx);

	if (s->sub && s->sub_at != at)
		store_unsubscribe(s);
	if (s->sub && s->sub_armed)
		return STORE_OK;
	if (!s->sub) {
		if (client_open(&s->sub, at, cap, err, errlen) != CLIENT_OK) {
			s->sub = NULL;
			return STORE_ERR;
		}
		s->sub_at = at;
	}
	/* Timeout 0: it blocks until a push; the waiter's own timers decide when to try
	 * again meanwhile (a blocked client is exempt from the server's idle timeout). */
	const char *argv[] = {"BLPOP", l->wake_channel, "0"};
	size_t lens[] = {5, strlen(l->wake_channel), 1};
	if (client_send(s->sub, 3, argv, lens, min64(clock_ms() + at->io_timeout_ms, cap), err,
	                errlen) < 0) {
		store_unsubscribe(s);
		return STORE_ERR;
	}
	s->sub_armed = 1;
	return STORE_OK;
}

/* The release notifications of a backend with one server (the routed one): where
 * its route says, with the route's (S)SUBSCRIBE. */
static int listen_on(struct store *s, const struct lock *l, int64_t cap, char *err, size_t errlen)
{
	const struct server *srv;
	const char *cmd;

	if (s->be->listen_on(s->ctx, l, cap, &srv, &cmd, err, errlen) != STORE_OK)
		return STORE_ERR;
	if (client_open(&s->sub, srv, cap, err, errlen) != CLIENT_OK) {
		s->sub = NULL;
		return STORE_ERR;
	}
	int64_t d = min64(clock_ms() + srv->io_timeout_ms, cap);
	/* Sharded: also the classic channel, which a PUBLISH from a run that was never
	 * redirected (or an older rlock) reaches. */
	int rc = subscribe(s->sub, cmd, l, d, err, errlen);
	if (rc == 0 && strcmp(cmd, "SSUBSCRIBE") == 0)
		rc = subscribe(s->sub, "SUBSCRIBE", l, d, err, errlen);
	if (rc == 0)
		return STORE_NEW;
	s->no_channel = rc == -2;
	store_unsubscribe(s);
	return STORE_ERR;
}

static int subscribe_lock(struct store *s, const struct lock *l, int64_t cap, char *err,
                          size_t errlen);

/* The route's watch, when it has one and none is open (store.h). */
static void watch_open(struct store *s, int64_t cap)
{
	char err[300];

	if (s->watch || s->watch_denied || !s->be->watch || clock_ms() < s->watch_retry_at)
		return;
	int rc = s->be->watch(s->ctx, cap, &s->watch, err, sizeof err);
	if (rc == STORE_DENIED) {
		/* The ACL refuses it: asked again, it refuses again (as the release
		 * notifications: wait.c). Said once; the periodic re-check stays. */
		s->watch = NULL;
		s->watch_denied = 1;
		log_info("failover announcements refused (%s): not watching for a new master", err);
	} else if (rc != STORE_OK) {
		log_debug("no watch on the server's changes: %s", err);
		s->watch = NULL;
		s->watch_retry_at = clock_ms() + STORE_WATCH_RETRY_MS;
	}
}

int store_subscribe(struct store *s, const struct lock *l, int64_t cap_ms, char *err, size_t errlen)
{
	int rc = subscribe_lock(s, l, cap_ms, err, errlen);

	if (rc != STORE_ERR)
		watch_open(s, cap_ms);
	return rc;
}

int store_watch_fd(const struct store *s)
{
	return s->watch ? client_fd(s->watch) : -1;
}

int store_watch_buffered(const struct store *s)
{
	return s->watch && client_buffered(s->watch);
}

int store_watch_read(struct store *s, int64_t deadline_ms, char *err, size_t errlen)
{
	struct resp_reply *r = NULL;

	if (!s->watch)
		return -1;
	int got = client_recv(s->watch, deadline_ms, &r, err, errlen);
	if (got == 0)
		return 0;
	if (got != 1) {
		client_close(s->watch);
		s->watch = NULL;
		s->watch_retry_at = clock_ms() + STORE_WATCH_RETRY_MS;
		return -1;
	}
	int says = s->be->watch_says(s->ctx, r);
	if (says)
		log_reason(err, errlen, "the sentinels name a new master: %s", r->element[2]->str);
	resp_free(r);
	return says;
}

void store_unwatch(struct store *s)
{
	client_close(s->watch);
	s->watch = NULL;
	s->watch_retry_at = 0;
}

static int subscribe_lock(struct store *s, const struct lock *l, int64_t cap, char *err,
                          size_t errlen)
{
	const struct server *srv;
	int64_t wait;

	if (l->placed && s->be->places && s->be->placed_at(s->ctx) && !s->no_wake_list)
		return wake_arm(s, l, cap, err, errlen);
	if (s->sub && !s->sub_at)
		return STORE_OK; /* subscribed already */
	store_unsubscribe(s);
	/* Refused by the ACL (no channel rights): asked again, it is refused again, on a
	 * new connection each nap. The waiter polls instead (said once: wait.c). */
	if (s->no_channel) {
		snprintf(err, errlen,
		         "SUBSCRIBE refused (NOPERM: the ACL user has no rights on "
		         "the lock's channels)");
		return STORE_ERR;
	}
	if (!s->be->listen_at)
		return listen_on(s, l, cap, err, errlen);
	/* Several servers publish the release (a quorum's nodes): the first that answers
	 * will do, in the backend's order. Refused by every one that answered: poll. */
	int tried = 0, refused = 0;
	for (int k = 0; (srv = s->be->listen_at(s->ctx, k, &wait)); k++) {
		if (client_open(&s->sub, srv, min64(clock_ms() + wait, cap), err, errlen) !=
		    CLIENT_OK) {
			s->sub = NULL;
			continue;
		}
		int rc =
		    subscribe(s->sub, "SUBSCRIBE", l, min64(clock_ms() + wait, cap), err, errlen);
		if (rc == 0) {
			s->sub_srv = srv;
			return STORE_NEW;
		}
		tried++;
		refused += rc == -2;
		store_unsubscribe(s);
	}
	s->no_channel = tried > 0 && refused == tried;
	return STORE_ERR;
}

int store_notify_fd(const struct store *s)
{
	return s->sub ? client_fd(s->sub) : -1;
}

int store_notify_buffered(const struct store *s)
{
	return s->sub && client_buffered(s->sub);
}

int store_notify_read(struct store *s, int64_t deadline_ms, char *err, size_t errlen)
{
	struct resp_reply *r = NULL;

	if (!s->sub) {
		snprintf(err, errlen, "not subscribed");
		return -1;
	}
	int got = client_recv(s->sub, deadline_ms, &r, err, errlen);
	if (got == 0)
		return 0;
	if (got != 1) {
		store_unsubscribe(s);
		return -1;
	}
	if (s->sub_at) {
		/* BLPOP's reply: {list, value} (pushed), or an error (UNBLOCKED: the server
		 * became a replica; MOVED: the slot moved): listen again from scratch. */
		s->sub_armed = 0;
		int pushed = r->type == RESP_ARRAY;
		if (!pushed) {
			log_reason(err, errlen, "%s: %s", s->sub_at->name,
			           r->type == RESP_ERROR ? r->str : "unexpected reply to BLPOP");
			/* An ACL without BLPOP: the release channel is still published. */
			if (r->type == RESP_ERROR && strncmp(r->str, "NOPERM", 6) == 0)
				s->no_wake_list = 1;
			store_unsubscribe(s);
		}
		resp_free(r);
		return pushed ? 1 : -1;
	}
	/* "message" (SUBSCRIBE) or "smessage" (SSUBSCRIBE): {kind, channel, token}; the
	 * token "attempt": a Redlock attempt's give-back (release.lua), no release. */
	int kind = r->type == RESP_ARRAY && r->elements == 3 && r->element[0]->type == RESP_STRING;
	int msg = kind && (strcmp(r->element[0]->str, "message") == 0 ||
	                   strcmp(r->element[0]->str, "smessage") == 0);
	if (msg && r->element[2]->type == RESP_STRING && strcmp(r->element[2]->str, "attempt") == 0)
		msg = 2;
	/* We never unsubscribe: a "sunsubscribe" is the server's, whose node no longer
	 * serves the channel's slot (migrated, failed over). Releases are announced on the
	 * new owner now: subscribe again, there. */
	int moved = kind && strcmp(r->element[0]->str, "sunsubscribe") == 0;
	resp_free(r);
	if (moved) {
		snprintf(err, errlen, "the lock's slot moved to another node (sunsubscribe)");
		store_unsubscribe(s);
		return -1;
	}
	return msg;
}

int store_listener_moved(const struct store *s)
{
	int64_t wait;

	return s->sub && !s->sub_at && s->sub_srv && s->be->listen_at &&
	       s->be->listen_at(s->ctx, 0, &wait) != s->sub_srv;
}

int store_wake_refused(const struct store *s)
{
	return s->no_wake_list;
}

int store_listen_refused(const struct store *s)
{
	return s->no_channel;
}

void store_unsubscribe(struct store *s)
{
	client_close(s->sub);
	s->sub = NULL;
	s->sub_at = NULL;
	s->sub_srv = NULL;
	s->sub_armed = 0;
}

void store_set_abort_fd(int fd)
{
	conn_set_abort_fd(fd);
}

int store_abort_pending(void)
{
	return conn_abort_pending();
}

int store_tls_init(char *why, size_t n)
{
	return conn_tls_init(why, n);
}

void store_libraries(char *buf, size_t len)
{
	char why[512];
	/* OpenSSL lives in the TLS module: loading it here also shows it works. */
	const struct tls_ops *tls = tlsload(why, sizeof why);

	if (tls)
		snprintf(buf, len, "hiredis %s, %s", resp_hiredis_version(), tls->version());
	else
		snprintf(buf, len, "hiredis %s, TLS: unavailable (%s)", resp_hiredis_version(),
		         why);
}
