/* SPDX-License-Identifier: MIT */
/* The routed single server (backend.h: routed_backend), a peer of the Redlock quorum
 * behind the seam: every request goes to the one server that owns the key, found by the
 * configuration's route (plain, Sentinel or Cluster), on one connection that a failure
 * replaces, with one retry on a fresh connection where that is safe (store.h). */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "holder.h"
#include "log.h"

#define WARN_EVERY_SEC "86400" /* the eviction warning: once a day per server */

/* One handle's state. */
struct routed {
	const struct store_config *cfg;
	void *route;             /* the route's per-handle state */
	struct client *c;        /* the connection of the calls */
	const struct server *at; /* where c goes */
	int suspect;             /* c has an unanswered request: only a release may follow */
	int lost;                /* the acquire's reply was lost with its connection */
	char name[64];
};

/* Commands that are not the lock protocol's scripts: re-entry, --wait-replicas, the
 * eviction check, release notifications. */

/* 1 when token holds l->key, 0 when not, -1 on error. */
/* WAIT n io_ms: 0, or -1 with the reason. */
static int wait_for_replicas(struct client *c, int n, int64_t io_ms, char *err, size_t errlen)
{
	char cnt[16], ms[24];
	struct resp_reply *r = NULL;
	int rc = -1;

	snprintf(cnt, sizeof cnt, "%d", n);
	snprintf(ms, sizeof ms, "%lld", (long long)io_ms);
	const char *argv[] = {"WAIT", cnt, ms};
	size_t lens[] = {4, strlen(cnt), strlen(ms)};
	if (client_call(c, 3, argv, lens, clock_ms() + 2 * io_ms, &r, err, errlen) < 0) {
		char why[300];
		log_reason(why, sizeof why, "%s", err);
		log_reason(err, errlen, "WAIT for replicas: %s", why);
	} else if (r->type != RESP_INTEGER) {
		log_reason(err, errlen, "WAIT for replicas: %s",
		           r->type == RESP_ERROR ? r->str : "unexpected reply");
	} else if (r->integer < n) {
		snprintf(err, errlen,
		         "only %lld of %d replicas acknowledged the writes within %s ms",
		         r->integer, n, ms);
	} else {
		rc = 0;
	}
	resp_free(r);
	return rc;
}

/* WAITAOF local replicas io_ms: 0, or -1 with the reason. */
static int wait_for_aof(struct client *c, int local, int replicas, int64_t io_ms, char *err,
                        size_t errlen)
{
	char nl[16], nr[16], ms[24], asked[40];
	struct resp_reply *r = NULL;
	int rc = -1;

	snprintf(nl, sizeof nl, "%d", local);
	snprintf(nr, sizeof nr, "%d", replicas);
	snprintf(ms, sizeof ms, "%lld", (long long)io_ms);
	snprintf(asked, sizeof asked, "--wait-aof %d,%d", local, replicas);
	const char *argv[] = {"WAITAOF", nl, nr, ms};
	size_t lens[] = {7, strlen(nl), strlen(nr), strlen(ms)};
	if (client_call(c, 4, argv, lens, clock_ms() + 2 * io_ms, &r, err, errlen) < 0) {
		char why[300];
		log_reason(why, sizeof why, "%s", err);
		log_reason(err, errlen, "%s: WAITAOF: %s", asked, why);
	} else if (r->type == RESP_ERROR) {
		/* Redis < 7.2 has no WAITAOF; with appendonly no, numlocal 1 is refused; a
		 * replica refuses it. The server's own words, and what would make it work. */
		int unknown = strncasecmp(r->str, "ERR unknown command", 19) == 0;
		int len = (int)strlen(r->str);
		while (len > 0 && (r->str[len - 1] == ' ' || r->str[len - 1] == '.'))
			len--;
		int noaof = !unknown && strstr(r->str, "appendonly") != NULL;
		log_reason(err, errlen, "%s: the server refused WAITAOF (%.*s)%s", asked, len,
		           r->str,
		           unknown ? ": it needs Redis 7.2 or later, or Valkey"
		           : noaof ? ": the master needs appendonly yes"
		                   : "");
	} else if (r->type != RESP_ARRAY || r->elements != 2 ||
	           r->element[0]->type != RESP_INTEGER || r->element[1]->type != RESP_INTEGER) {
		snprintf(err, errlen, "%s: WAITAOF: unexpected reply", asked);
	} else if (r->element[0]->integer < local || r->element[1]->integer < replicas) {
		char got[120] = "";
		if (local)
			snprintf(got, sizeof got, "the master's AOF: %s",
			         r->element[0]->integer >= local ? "yes" : "no");
		if (replicas)
			snprintf(got + strlen(got), sizeof got - strlen(got),
			         "%sthe AOF of %lld of %d replica(s)", local ? ", " : "",
			         r->element[1]->integer, replicas);
		snprintf(err, errlen, "%s: within %s ms the writes reached %s", asked, ms, got);
	} else {
		rc = 0;
	}
	resp_free(r);
	return rc;
}

/* With any maxmemory-policy but noeviction, Redis may evict the lock key under memory
 * pressure: another client then acquires it while we still run. *policy gets the
 * policy to warn about, or "" (none, or another run warned within the day: the first
 * run to SET the marker says it; tagged, when not NULL: the marker a Cluster's node
 * takes that does not own warn_key's slot). A server that refuses INFO (ACL) is not
 * second-guessed. LOCK_OK or LOCK_ERR. */
static int eviction_policy(struct client *c, const char *warn_key, const char *tagged, int64_t d,
                           char *policy, size_t n, char *err, size_t errlen)
{
	struct resp_reply *rep = NULL;
	const char *info[] = {"INFO", "memory"};
	size_t info_lens[] = {4, 6};

	policy[0] = '\0';
	if (client_call(c, 2, info, info_lens, d, &rep, err, errlen) < 0)
		return LOCK_ERR;
	const char *p = rep->type == RESP_STRING ? strstr(rep->str, "maxmemory_policy:") : NULL;
	if (p) {
		p += strlen("maxmemory_policy:");
		size_t len = strcspn(p, "\r\n");
		log_clip(policy, n < 64 ? n : 64, p, len); /* a long one: cut, shown */
	}
	resp_free(rep);
	if (!policy[0] || strcmp(policy, "noeviction") == 0) {
		policy[0] = '\0';
		return LOCK_OK;
	}
	const char *set[] = {"SET", warn_key, "1", "NX", "EX", WARN_EVERY_SEC};
	size_t set_lens[] = {3, strlen(warn_key), 1, 2, 2, strlen(WARN_EVERY_SEC)};
	rep = NULL;
	if (client_call(c, 6, set, set_lens, d, &rep, err, errlen) < 0)
		return LOCK_OK; /* warn anyway */
	if (tagged && (resp_is_error(rep, "MOVED") || resp_is_error(rep, "ASK"))) {
		/* a Cluster's node that does not own warn_key's slot (tagged: the lock's) */
		set[1] = tagged;
		set_lens[1] = strlen(tagged);
		resp_free(rep);
		rep = NULL;
		if (client_call(c, 6, set, set_lens, d, &rep, err, errlen) < 0)
			return LOCK_OK;
	}
	if (rep->type == RESP_NIL)
		policy[0] = '\0';
	resp_free(rep);
	return LOCK_OK;
}

static void drop(struct routed *s)
{
	client_close(s->c);
	s->c = NULL;
	s->at = NULL;
	s->suspect = 0;
}

/* A call on s->c failed: never reuse it, except for an ordered release (store.h). */
static void failed(struct routed *s)
{
	if (s->c && client_lost(s->c))
		s->lost = 1; /* the server may have run it: store_unanswered() */
	if (s->c && !client_broken(s->c))
		s->suspect = 1;
	else
		drop(s);
}

static int connect_to(struct routed *s, const struct server *srv, int64_t cap_ms, char *err,
                      size_t errlen)
{
	drop(s);
	int rc = client_open(&s->c, srv, cap_ms, err, errlen);
	if (rc != CLIENT_OK) {
		s->c = NULL;
		return rc == CLIENT_AUTH ? LOCK_DENIED : LOCK_ERR;
	}
	s->at = srv;
	return LOCK_OK;
}

static int64_t capped(int64_t t, int64_t cap)
{
	return t < cap ? t : cap;
}

#define PAUSE_FIRST_MS 50

typedef int (*op_fn)(struct client *c, void *arg, int64_t deadline_ms, char *err, size_t errlen);

#define RUN_RETRY   1 /* safe to repeat on a fresh connection */
#define RUN_ORDERED 2 /* may follow an unanswered request (a release) */
/* never sent twice, elsewhere neither: its script cannot tell its own earlier effect
 * from another's (a --break) */
#define RUN_ONCE 4

/* One call of run(): what it does, and what it learnt on the way. */
struct run_call {
	struct routed *s;
	const char *key;
	const struct server *fixed;
	int flags;
	op_fn op;
	void *arg;
	int64_t cap_ms;
	char *err;
	size_t errlen;
	int retried;              /* the one retry on a fresh connection is spent */
	const struct server *srv; /* the server of the last try */
	int nfailed;              /* the servers that failed in this call: their names' */
	uint64_t failed[STORE_HOPS_MAX + 1]; /* hashes (a route may rebuild its servers) */
};

/* FNV-1a of a server's name ("host:port"). */
static uint64_t name_hash(const struct server *srv)
{
	uint64_t h = 14695981039346656037ULL;

	for (const char *p = srv->name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h;
}

/* One look (store_look_once): srv failed in this call already, and the route names it
 * again (a Cluster's map that still names a master that does not answer). */
static int failed_before(const struct run_call *c, const struct server *srv)
{
	for (int i = 0; store_looking_once() && i < c->nfailed; i++)
		if (c->failed[i] == name_hash(srv))
			return 1;
	return 0;
}

static void note_failed(struct run_call *c, const struct server *srv)
{
	if (store_looking_once() && c->nfailed < STORE_HOPS_MAX + 1 && !failed_before(c, srv))
		c->failed[c->nfailed++] = name_hash(srv);
}

#define HOP_ELSEWHERE (-100) /* srv is unreachable and the route knows another way */
#define HOP_LATER     (-101) /* the route says: a passing state, pause and repeat */
#define HOP_AGAIN     (-102) /* once more, on a fresh connection */

/* The server of the next try: `fixed`, the ASK target, the one server, or the route's. */
static int target(struct run_call *c, const struct server *ask, const struct server **srv)
{
	const struct store_route *rt = c->s->cfg->route;

	*srv = c->fixed ? c->fixed : ask;
	if (!*srv && !rt)
		*srv = &c->s->cfg->srv[0];
	if (*srv)
		return LOCK_OK;
	int rc = rt->locate(c->s->route, c->key, c->cap_ms, srv, c->err, c->errlen);
	return rc == STORE_OK ? LOCK_OK : rc == STORE_DENIED ? LOCK_DENIED : LOCK_ERR;
}

/* srv failed to connect or to answer: may the route send us elsewhere? */
static int elsewhere(struct run_call *c, const struct server *srv)
{
	const struct store_route *rt = c->s->cfg->route;
	const struct server *ignored = NULL;

	return rt && !conn_abort_pending() && clock_ms() < c->cap_ms &&
	       rt->redirect(c->s->route, c->key, srv, NULL, &ignored) == STORE_ROUTE_RETRY;
}

/* One try of op on srv (after an ASKING when asking), connecting first if need be
 * (*opened). LOCK_*, or HOP_ELSEWHERE. */
static int try_on(struct run_call *c, const struct server *srv, int asking, int *opened)
{
	struct routed *s = c->s;

	*opened = 0;
	if (s->c && (s->at != srv || (s->suspect && !(c->flags & RUN_ORDERED))))
		drop(s);
	if (!s->c) {
		int rc = connect_to(s, srv, c->cap_ms, c->err, c->errlen);
		if (rc == LOCK_ERR && elsewhere(c, srv))
			return HOP_ELSEWHERE;
		if (rc != LOCK_OK)
			return rc;
		*opened = 1;
	}
	/* ASK: every command of op (EVAL after NOSCRIPT too) after an ASKING. */
	client_set_asking(s->c, asking);
	int64_t d = clock_ms() + srv->io_timeout_ms;
	int rc = c->op(s->c, c->arg, capped(d, c->cap_ms), c->err, c->errlen);
	if (s->c)
		client_set_asking(s->c, 0);
	return rc;
}

/* op failed on srv (LOCK_ERR): HOP_ELSEWHERE (not RUN_ONCE: the server may have run it
 * and lost only the reply), HOP_AGAIN (once, when the flags allow it and the connection
 * that failed was not new), or LOCK_ERR. */
static int after_failure(struct run_call *c, const struct server *srv, int opened)
{
	failed(c->s);
	if (conn_abort_pending() || clock_ms() >= c->cap_ms)
		return LOCK_ERR;
	if (!(c->flags & RUN_ONCE) && elsewhere(c, srv))
		return HOP_ELSEWHERE;
	if (!(c->flags & RUN_RETRY) || opened || c->retried)
		return LOCK_ERR;
	c->retried = 1;
	drop(c->s);
	log_debug("%s; retrying on a fresh connection", c->err);
	return HOP_AGAIN;
}

/* err = "SRV: server error: err". LOCK_ERR. */
static int server_error(struct run_call *c)
{
	char why[300];

	log_reason(why, sizeof why, "%s", c->err);
	log_reason(c->err, c->errlen, "%s: server error: %s", c->srv->name, why);
	return LOCK_ERR;
}

/* rc, with err naming the server of the last try when it failed there and err does not
 * name it yet: a server's error reply, decoded by lock.c ("acquire: server error: OOM
 * ...", "status: permission denied: NOPERM ..."), says what it refused, not who did; a
 * connection's reason names it already. */
static int named(const struct run_call *c, int rc)
{
	if ((rc == LOCK_ERR || rc == LOCK_DENIED) && c->srv && c->err[0] &&
	    !strstr(c->err, c->srv->name)) {
		char why[300];
		log_reason(why, sizeof why, "%s", c->err);
		log_reason(c->err, c->errlen, "%s: %s", c->srv->name, why);
	}
	return rc;
}

/* Follow the route for at most STORE_HOPS_MAX redirects: LOCK_*, or HOP_LATER. */
static int run_hops(struct run_call *c)
{
	const struct store_route *rt = c->s->cfg->route;
	const struct server *ask = NULL;
	int unreachable = 0; /* the last hop: a redirect, or a node that failed */

	for (int hop = 0; hop <= STORE_HOPS_MAX; hop++) {
		int opened, rc = target(c, ask, &c->srv);
		if (rc != LOCK_OK)
			return rc;
		if (failed_before(c, c->srv))
			return LOCK_ERR; /* err: why it failed */
		rc = try_on(c, c->srv, ask != NULL, &opened);
		ask = NULL;
		if (rc == LOCK_REDIRECT) {
			int what = rt ? rt->redirect(c->s->route, c->key, c->srv, c->err, &ask)
			              : STORE_ROUTE_FAIL;
			if (what == STORE_ROUTE_LATER)
				return HOP_LATER;
			if (what == STORE_ROUTE_FAIL)
				return server_error(c);
			if (what != STORE_ROUTE_ASK)
				ask = NULL;
			unreachable = 0;
			continue;
		}
		if (rc == LOCK_ERR)
			rc = after_failure(c, c->srv, opened);
		if (rc == HOP_ELSEWHERE) {
			unreachable = 1;
			note_failed(c, c->srv);
		} else if (rc != HOP_AGAIN)
			return rc;
	}
	char why[300];
	log_reason(why, sizeof why, "%s", c->err);
	if (unreachable) /* A master gone before its replica is promoted: the slot map (or
	                  * the sentinels) still name it. Say which node, not "redirects";
	                  * and what for: a lock's server, or (--list) a master to scan. */
		log_reason(c->err, c->errlen, "%s (the route still names %s %s after %d lookups)",
		           why, strstr(why, c->srv->name) ? "it" : c->srv->name,
		           c->key ? "the lock's server" : "a master", STORE_HOPS_MAX + 1);
	else
		snprintf(c->err, c->errlen, "more than %d redirects for one request",
		         STORE_HOPS_MAX);
	return LOCK_ERR;
}

/* The one place that reconnects and retries: op on the server that owns key (or on
 * `fixed`), following the route's redirects, repeated once on a fresh connection when
 * flags allow and the connection that failed was not opened by this call. A state that
 * passes (STORE_ROUTE_LATER) pauses, 50 ms doubling, and starts the redirects afresh:
 * the refusal ran nothing (TRYAGAIN), so repeating is safe, also for an acquire. */
static int run(struct routed *s, const char *key, const struct server *fixed, int flags, op_fn op,
               void *arg, int64_t cap_ms, char *err, size_t errlen)
{
	struct run_call c = {s, key, fixed, flags, op, arg, cap_ms, err, errlen, 0, NULL, 0, {0}};
	int64_t pause = PAUSE_FIRST_MS;

	for (int pauses = 0;; pauses++) {
		int rc = run_hops(&c);
		if (rc != HOP_LATER)
			return named(&c, rc);
		if (pauses >= STORE_PAUSES_MAX || clock_ms() + pause >= cap_ms ||
		    conn_abort_pending()) {
			if (!lock_is_migrating(err))
				return server_error(&c);
			/* a resharding that stopped half-way does not pass: say what it is */
			char why[200];
			log_reason(why, sizeof why, "%s", err);
			log_reason(err, errlen,
			           "%s: the lock's Cluster slot is being migrated and refuses this "
			           "request until the migration ends (%s); finish or undo it "
			           "(redis-cli --cluster fix)",
			           c.srv->name, why);
			return LOCK_ERR;
		}
		log_debug("%s: %s; trying again in %lld ms", c.srv->name, err, (long long)pause);
		conn_pause_until(clock_ms() + pause);
		pause *= 2;
	}
}
static void routed_close(void *ctx)
{
	struct routed *s = ctx;

	drop(s);
	if (s->route)
		s->cfg->route->close(s->route);
	free(s);
}

static int routed_open(void **ctx, const struct store_config *cfg, int connect, int64_t cap_ms,
                       char *err, size_t errlen)
{
	struct routed *s = calloc(1, sizeof *s);

	*ctx = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return STORE_ERR;
	}
	s->cfg = cfg;
	snprintf(s->name, sizeof s->name, "%.60s", cfg->srv[0].name);
	if (cfg->route && !(s->route = cfg->route->open(cfg->route_arg))) {
		snprintf(err, errlen, "out of memory");
		free(s);
		return STORE_ERR;
	}
	if (connect) {
		const struct server *srv = &cfg->srv[0];
		int rc = cfg->route ? cfg->route->locate(s->route, NULL, cap_ms, &srv, err, errlen)
		                    : STORE_OK;
		if (rc == STORE_OK)
			rc = connect_to(s, srv, cap_ms, err, errlen);
		if (rc != STORE_OK) {
			routed_close(s);
			return rc == LOCK_DENIED ? STORE_DENIED : STORE_ERR;
		}
	}
	*ctx = s;
	return STORE_OK;
}

static int routed_connected(const void *ctx)
{
	const struct routed *s = ctx;

	return s->c && !s->suspect;
}

static int routed_unanswered(const void *ctx)
{
	const struct routed *s = ctx;

	return (s->c && s->suspect) || s->lost;
}

/* A waiter's place lives where its last attempt went: the open connection's server. */
static const struct server *routed_placed_at(const void *ctx)
{
	const struct routed *s = ctx;

	return s->c ? s->at : NULL;
}

/* The release notifications: on the route's server of the channel, with the route's
 * (S)SUBSCRIBE. */
static int routed_listen_on(void *ctx, const struct lock *l, int64_t cap_ms,
                            const struct server **at, const char **cmd, char *err, size_t errlen)
{
	struct routed *s = ctx;
	const struct store_route *rt = s->cfg->route;
	const struct server *srv = &s->cfg->srv[0];
	int64_t cap = clock_ms() + srv->connect_timeout_ms + srv->io_timeout_ms;

	cap = cap < cap_ms ? cap : cap_ms;

	*cmd = "SUBSCRIBE";
	if (rt && rt->probe)
		rt->probe(s->route, cap);
	if (rt && rt->locate(s->route, l->channel, cap, &srv, err, errlen) != STORE_OK)
		return STORE_ERR;
	if (rt && rt->subscribe_cmd)
		*cmd = rt->subscribe_cmd(s->route, l->channel);
	*at = srv;
	return STORE_OK;
}

/* The route's watch (Sentinel: +switch-master), when it has one. */
static int routed_watch(void *ctx, int64_t cap_ms, struct client **c, char *err, size_t errlen)
{
	struct routed *s = ctx;
	const struct store_route *rt = s->cfg->route;

	*c = NULL;
	return rt && rt->watch ? rt->watch(s->route, cap_ms, c, err, errlen) : STORE_OK;
}

static int routed_watch_says(void *ctx, const struct resp_reply *r)
{
	struct routed *s = ctx;
	const struct store_route *rt = s->cfg->route;

	return rt && rt->watch_says ? rt->watch_says(s->route, r) : 0;
}

static const char *routed_name(void *ctx)
{
	struct routed *s = ctx;

	if (s->route && s->cfg->route->name)
		return s->cfg->route->name(s->route);
	return s->name;
}

struct acquire_args {
	struct lock *l;
	const struct lock_meta *m;
	struct holder *h;
	int64_t sent;
	struct routed *s;
};

static const struct lock *announcing(struct routed *s, const struct lock *l, struct lock *copy);

static int op_acquire(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct acquire_args *a = arg;

	struct lock copy;

	/* a semaphore's acquire may wake the next waiter of a fair queue */
	a->l->publish_cmd = announcing(a->s, a->l, &copy)->publish_cmd;
	a->sent = clock_ms();
	return lock_acquire(c, a->l, a->m, d, a->h, err, errlen);
}

static int routed_acquire(void *ctx, struct lock *l, const struct lock_meta *m, int64_t cap_ms,
                          int64_t *sent_ms, struct holder *h, char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct acquire_args a = {l, m, h, clock_ms(), s};
	s->lost = 0; /* store_unanswered(): of this acquire */
	/* the reply too is awaited only until the cap (the -w deadline): an acquire left
	 * unanswered is given back behind it (wait.c) */
	int rc = run(s, l->key, NULL, 0, op_acquire, &a, cap_ms, err, errlen);
	*sent_ms = a.sent;
	return rc;
}

struct renew_args {
	const struct lock *l;
	int64_t sent;
};

static int op_renew(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct renew_args *a = arg;

	struct holder by;

	a->sent = clock_ms();
	int rc = lock_renew(c, a->l, d, &by, err, errlen);
	if (rc == LOCK_PREEMPTED) /* who asked: renew.h's reason */
		holder_format(&by, HOLDER_LABEL | HOLDER_RAW, err, errlen);
	return rc;
}

static int routed_renew(void *ctx, const struct lock *l, int64_t cap_ms, int64_t *sent_ms,
                        char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct renew_args a = {l, clock_ms()};
	int rc = run(s, l->key, NULL, RUN_RETRY, op_renew, &a, cap_ms, err, errlen);
	*sent_ms = a.sent;
	return rc;
}

struct release_args {
	const struct lock *l;
	int64_t keep_ms;
	struct routed *s;
};

/* l, or a copy of it that announces its release with SPUBLISH when the route says
 * waiters listen on the shard (subscribe_cmd). */
static const struct lock *announcing(struct routed *s, const struct lock *l, struct lock *copy)
{
	const struct store_route *rt = s->cfg->route;

	if (!rt || !rt->subscribe_cmd ||
	    strcmp(rt->subscribe_cmd(s->route, l->channel), "SSUBSCRIBE") != 0)
		return l;
	*copy = *l;
	copy->publish_cmd = "SPUBLISH";
	return copy;
}

static int op_release(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct release_args *a = arg;
	struct lock copy;

	return lock_release(c, announcing(a->s, a->l, &copy), a->keep_ms, d, err, errlen);
}

static int routed_release(void *ctx, const struct lock *l, int64_t keep_ms, int64_t cap_ms,
                          char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct release_args a = {l, keep_ms, s};

	/* The release is the last word on the run (79 when the token is gone): on the
	 * master of now, not the one a check before a failover named (it still has the
	 * token the new master may have lost). */
	if (s->cfg->route && s->cfg->route->recheck)
		s->cfg->route->recheck(s->route);
	return run(s, l->key, NULL, RUN_RETRY | RUN_ORDERED, op_release, &a, cap_ms, err, errlen);
}

struct holder_args {
	const struct lock *l;
	struct holders *h;
	struct routed *s;
	int migrating; /* the status was refused: the slot migrates (read it key by key) */
	int probe;     /* op_status_here: to the node the slot migrates to */
};

static int op_status(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct holder_args *a = arg;
	int rc = lock_status(c, a->l, d, a->h, err, errlen);

	/* Refused while the slot migrates, which may not end (a resharding stopped
	 * half-way): not paused and repeated, read key by key (status_migrating). */
	if (rc == LOCK_REDIRECT && lock_is_migrating(err)) {
		a->migrating = 1;
		return LOCK_OK;
	}
	return rc;
}

static int op_status_here(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct holder_args *a = arg;

	return lock_status_here(c, a->l, a->probe, d, a->h, err, errlen);
}

/* The status of l while its slot migrates (op_status was refused): read key by key on
 * the node the slot migrates from (the owner) and on the one it migrates to (ASK), each
 * in one script; the node that has the name's keys tells it. Keys on both (a MIGRATE
 * between the two reads, or a resharding stopped between two of the name's keys):
 * read again, paused as run() pauses; still on both: LOCK_ERR, one line that says so. */
static int status_migrating(struct routed *s, const struct lock *l, int64_t cap_ms,
                            struct holders *h, char *err, size_t errlen)
{
	struct holders *to = malloc(sizeof *to);
	int64_t pause = PAUSE_FIRST_MS;
	int rc = LOCK_ERR;

	if (!to) {
		snprintf(err, errlen, "out of memory");
		return LOCK_ERR;
	}
	for (int pauses = 0;; pauses++) {
		struct holder_args a = {l, h, s, 0, 0}, b = {l, to, s, 0, 1};
		rc = run(s, l->key, NULL, RUN_RETRY, op_status_here, &a, cap_ms, err, errlen);
		const struct server *from_at = s->at;
		if (rc == LOCK_OK)
			rc = run(s, l->key, NULL, RUN_RETRY, op_status_here, &b, cap_ms, err,
			         errlen);
		if (rc != LOCK_OK)
			break;
		if (h->here <= 0 || to->here <= 0 || from_at == s->at) {
			if (h->here <= 0)
				memcpy(h, to, sizeof *h);
			break;
		}
		if (pauses >= STORE_PAUSES_MAX || clock_ms() + pause >= cap_ms ||
		    conn_abort_pending()) {
			snprintf(err, errlen,
			         "the lock's keys are split between %s and %s by a Cluster slot "
			         "migration that has not ended (TRYAGAIN): finish or undo it "
			         "(redis-cli --cluster fix), then try again",
			         from_at ? from_at->name : "?", s->at ? s->at->name : "?");
			rc = LOCK_ERR;
			break;
		}
		conn_pause_until(clock_ms() + pause);
		pause *= 2;
	}
	free(to);
	return rc;
}

static int op_break(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct holder_args *a = arg;
	struct lock copy;

	int rc = lock_break(c, announcing(a->s, a->l, &copy), d, a->h, err, errlen);

	/* TRYAGAIN: refused before the script ran. A break cannot be read and written key
	 * by key as a status is (its record, a new key, cannot be created on the node the
	 * slot migrates from): it says so at once (routed_break). */
	if (rc == LOCK_REDIRECT && strncmp(err, "TRYAGAIN", 8) == 0) {
		a->migrating = 1;
		return LOCK_OK;
	}
	return rc;
}

struct history_args {
	const struct lock *l;
	struct history_entry *e;
	int *n;
};

static int op_history(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct history_args *a = arg;
	int rc = lock_history(c, a->l, *a->n, d, a->e, err, errlen);

	if (rc < 0)
		return rc;
	*a->n = rc;
	return LOCK_OK;
}

static int routed_history(void *ctx, const struct lock *l, int64_t cap_ms, struct history_entry *e,
                          int *n, char *err, size_t errlen)
{
	struct history_args a = {l, e, n};

	return run(ctx, l->key, NULL, RUN_RETRY, op_history, &a, cap_ms, err, errlen);
}

static int routed_status(void *ctx, const struct lock *l, int64_t cap_ms, struct holders *h,
                         char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct holder_args a = {l, h, s, 0, 0};
	int rc = run(s, l->key, NULL, RUN_RETRY, op_status, &a, cap_ms, err, errlen);

	return rc == LOCK_OK && a.migrating ? status_migrating(s, l, cap_ms, h, err, errlen) : rc;
}

static int routed_break(void *ctx, const struct lock *l, int64_t cap_ms, struct holders *h,
                        char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct holder_args a = {l, h, s, 0, 0};

	/* A break sent again would find nothing to break (--token: "no such holder") or
	 * break the holder its first call let in (the waiter it woke). */
	int rc = run(s, l->key, NULL, RUN_ONCE, op_break, &a, cap_ms, err, errlen);
	if (rc == LOCK_OK && a.migrating) {
		snprintf(err, errlen,
		         "cannot %s while the lock's Cluster slot migrates (TRYAGAIN: a resharding "
		         "that has not ended): nothing was changed; finish or undo the migration "
		         "(redis-cli --cluster fix), then try again (--status works meanwhile)",
		         l->reset ? "reset" : "break");
		return LOCK_ERR;
	}
	return rc;
}

struct leave_args {
	struct release_args r;
	struct holder *newer;
};

static int op_leave(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct leave_args *a = arg;
	struct lock copy;

	return lock_leave(c, announcing(a->r.s, a->r.l, &copy), d, a->newer, err, errlen);
}

static int routed_leave(void *ctx, const struct lock *l, int64_t cap_ms, struct holder *newer,
                        char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct leave_args a = {{l, 0, s}, newer};

	return run(s, l->key, NULL, RUN_RETRY, op_leave, &a, cap_ms, err, errlen);
}

struct holder_check {
	const struct lock *l;
	const char *token;
	int ours;
	struct holding *hd;
	int migrating; /* the status was refused: the slot migrates */
};

static int op_is_holder(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct holder_check *a = arg;

	/* A routing error goes back to run() (store.h), which follows it: a Cluster node
	 * that does not own the key answers MOVED. */
	a->ours = lock_holds(c, a->l, a->token, d, a->hd, err, errlen);
	if (a->ours == LOCK_REDIRECT && lock_is_migrating(err)) {
		a->migrating = 1; /* read key by key (status_migrating) */
		return LOCK_OK;
	}
	return a->ours < 0 ? a->ours : LOCK_OK;
}

static int routed_is_holder(void *ctx, const struct lock *l, const char *token, int64_t cap_ms,
                            struct holding *hd, char *err, size_t errlen)
{
	struct routed *s = ctx;
	struct holder_check a = {l, token, 0, hd, 0};
	int rc = run(s, l->key, NULL, RUN_RETRY, op_is_holder, &a, cap_ms, err, errlen);
	if (rc == LOCK_OK && a.migrating) {
		struct holders *hs = malloc(sizeof *hs);
		if (!hs) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		rc = status_migrating(s, l, cap_ms, hs, err, errlen);
		a.ours = rc != LOCK_OK ? -1 : lock_holding(hs, token, hd);
		if (rc == LOCK_OK && a.ours < 0)
			snprintf(err, errlen,
			         "more shared holders than a status lists while the lock's Cluster "
			         "slot migrates: cannot tell whether this one is among them");
		free(hs);
	}
	return rc != LOCK_OK ? -1 : a.ours;
}

/* A WAIT or WAITAOF that fell short on a routed master (Cluster: the lock's slot's,
 * one of several; Sentinel: the one the sentinels named then): which master, as the
 * other lines about a node say. The URL's own server (one server, a Cluster seed not
 * yet known as one): as before, the URL says which. */
static void name_master(const struct routed *s, char *err, size_t errlen)
{
	if (!s->cfg->route || !s->at || s->at == &s->cfg->srv[0])
		return;
	char why[400];
	log_reason(why, sizeof why, "%s", err);
	log_reason(err, errlen, "%s: %s", s->at->name, why);
}

static int routed_wait_replicas(void *ctx, int n, char *err, size_t errlen)
{
	struct routed *s = ctx;

	/* WAIT counts the writes of this connection: the one that took (or released) the
	 * lock. */
	if (!s->c || s->suspect) {
		snprintf(err, errlen, "WAIT for replicas: the connection that wrote is gone");
		return -1;
	}
	int rc = wait_for_replicas(s->c, n, s->at->io_timeout_ms, err, errlen);
	if (rc < 0) {
		name_master(s, err, errlen);
		drop(s);
	}
	return rc;
}

static int routed_wait_aof(void *ctx, int local, int replicas, char *err, size_t errlen)
{
	struct routed *s = ctx;

	/* WAITAOF, as WAIT, counts the writes of this connection: the one that took (or
	 * released) the lock. */
	if (!s->c || s->suspect) {
		snprintf(err, errlen, "--wait-aof: the connection that wrote is gone");
		return -1;
	}
	int rc = wait_for_aof(s->c, local, replicas, s->at->io_timeout_ms, err, errlen);
	if (rc < 0) {
		name_master(s, err, errlen);
		drop(s);
	}
	return rc;
}

struct scan_args {
	const char *cursor, *match;
	struct resp_reply *r;
};

static int op_scan(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct scan_args *a = arg;
	const char *argv[] = {"SCAN", a->cursor, "MATCH", a->match, "COUNT", "200"};
	size_t lens[6];

	for (int i = 0; i < 6; i++)
		lens[i] = strlen(argv[i]);
	resp_free(a->r);
	a->r = NULL;
	if (client_call(c, 6, argv, lens, d, &a->r, err, errlen) < 0)
		return LOCK_ERR;
	const struct resp_reply *r = a->r;
	if (r->type == RESP_ARRAY && r->elements == 2 && r->element[0]->type == RESP_STRING &&
	    r->element[1]->type == RESP_ARRAY)
		return LOCK_OK;
	if (resp_is_noauth(r))
		snprintf(err, errlen,
		         "SCAN: the server requires a password (NOAUTH); see "
		         "--password-file");
	else if (r->type == RESP_ERROR)
		log_reason(err, errlen, "SCAN: %s", r->str);
	else
		snprintf(err, errlen, "SCAN: unexpected reply from the server");
	return LOCK_ERR;
}

#define SCAN_ROUNDS_MAX 1000000L

/* SCAN one server to the end. */
static int scan_server(struct routed *s, const struct server *srv, const char *match,
                       int64_t cap_ms, int (*page)(void *, const struct resp_reply *), void *arg,
                       char *err, size_t errlen)
{
	char cursor[32] = "0";
	struct scan_args a = {cursor, match, NULL};
	int rc = 0;

	/* A server whose cursor never comes back to 0 must not keep --list going forever:
	 * SCAN ... COUNT 200 walks 200 million keys in this many rounds. */
	for (long rounds = 0;; rounds++) {
		if (rounds >= SCAN_ROUNDS_MAX) {
			snprintf(err, errlen, "SCAN did not finish after %ld rounds: giving up",
			         SCAN_ROUNDS_MAX);
			rc = -1;
			break;
		}
		/* srv NULL: the route's server (its deadlines are the configured ones). */
		int64_t now = clock_ms(), cap = now + s->cfg->srv[0].io_timeout_ms;
		if (now >= cap_ms) {
			snprintf(err, errlen, "out of time during SCAN");
			rc = -1;
			break;
		}
		if (run(s, NULL, srv, RUN_RETRY, op_scan, &a, cap < cap_ms ? cap : cap_ms, err,
		        errlen) != LOCK_OK) {
			rc = -1;
			break;
		}
		snprintf(cursor, sizeof cursor, "%s", a.r->element[0]->str);
		rc = page(arg, a.r->element[1]);
		if (rc != 0 || strcmp(cursor, "0") == 0)
			break;
	}
	resp_free(a.r);
	return rc;
}

static int routed_list(void *ctx, const char *match, int64_t cap_ms,
                       int (*page)(void *arg, const struct resp_reply *names), void *arg, char *err,
                       size_t errlen)
{
	struct routed *s = ctx;
	const struct store_route *rt = s->cfg->route;

	if (!rt || !rt->master)
		return scan_server(s, rt ? NULL : &s->cfg->srv[0], match, cap_ms, page, arg, err,
		                   errlen);
	for (int i = 0;; i++) {
		int64_t cap = clock_ms() + s->cfg->srv[0].connect_timeout_ms;
		const struct server *m =
		    rt->master(s->route, i, cap < cap_ms ? cap : cap_ms, err, errlen);
		if (!m)
			return err[0] ? -1 : 0;
		int rc = scan_server(s, m, match, cap_ms, page, arg, err, errlen);
		if (rc != 0)
			return rc;
	}
}

struct eviction_args {
	struct routed *s;
	const char *warn_key;
	const char *key; /* the lock's, or NULL */
};

/* The servers this process looked at (each lock's renewal thread asks for its own
 * lock's: several locks on one server cost one INFO). */
static pthread_mutex_t looked_mu = PTHREAD_MUTEX_INITIALIZER;
static char looked[STORE_NODES_MAX][sizeof((struct server *)0)->name];
static int nlooked;

static int looked_at_before(const char *name)
{
	int seen = 0;

	pthread_mutex_lock(&looked_mu);
	for (int i = 0; i < nlooked && !seen; i++)
		seen = strcmp(looked[i], name) == 0;
	if (!seen && nlooked < STORE_NODES_MAX)
		snprintf(looked[nlooked++], sizeof looked[0], "%s", name);
	pthread_mutex_unlock(&looked_mu);
	return seen;
}

static int op_eviction(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct eviction_args *a = arg;
	char policy[64], tagged[512];
	const char *tag = a->key ? strchr(a->key, '{') : NULL;
	const char *end = tag ? strchr(tag, '}') : NULL;

	/* The lock's own server: a fresh handle (-v's look at start) knows no Cluster's
	 * slot map yet, and INFO names no key; a keyed read is redirected there. */
	if (a->key && a->s->cfg->route && a->s->at == &a->s->cfg->srv[0]) {
		const char *argv[] = {"EXISTS", a->key};
		size_t lens[] = {6, strlen(a->key)};
		struct resp_reply *r = NULL;
		if (client_call(c, 2, argv, lens, d, &r, err, errlen) < 0)
			return LOCK_ERR;
		int moved = resp_is_error(r, "MOVED") || resp_is_error(r, "ASK");
		if (moved)
			log_reason(err, errlen, "%s", r->str);
		resp_free(r);
		if (moved)
			return LOCK_REDIRECT;
	}
	if (looked_at_before(a->s->at->name))
		return LOCK_OK;
	/* A Cluster's node that does not own the marker's slot: the marker with the
	 * lock's hash tag, on its master (once a day per lock name's slot there). */
	if (!end || snprintf(tagged, sizeof tagged, "%s%.*s", a->warn_key, (int)(end - tag + 1),
	                     tag) >= (int)sizeof tagged)
		tagged[0] = '\0';
	int rc = eviction_policy(c, a->warn_key, tagged[0] ? tagged : NULL, d, policy,
	                         sizeof policy, err, errlen);
	if (rc == LOCK_OK && policy[0])
		log_warn("warning: %s has maxmemory-policy %s: under memory pressure the lock can "
		         "be evicted and taken by another holder; use noeviction (said once a "
		         "day; 'eviction-warning = off' in the config file acknowledges it)",
		         a->s->at->name, policy);
	return rc;
}

/* At the server of key (a lock's: on a Cluster each lock's master; NULL: the URL's). */
static void routed_check_eviction(void *ctx, const char *warn_key, const char *key, int64_t cap_ms)
{
	struct routed *s = ctx;
	struct eviction_args a = {s, warn_key, key};
	char err[300];

	if (run(s, key, s->cfg->route ? NULL : &s->cfg->srv[0], 0, op_eviction, &a, cap_ms, err,
	        sizeof err) != LOCK_OK)
		log_debug("eviction policy: %s", err);
}

/* --check: the route's masters, or the one server. */
static void routed_learn(void *ctx, int64_t cap_ms)
{
	struct routed *s = ctx;
	const struct store_route *rt = s->cfg->route;
	struct client *c = s->c && !s->suspect ? s->c : NULL;

	if (rt && rt->learn && rt->learn(s->route, c ? s->at : NULL, c, cap_ms) < 0 && c)
		drop(s);
}

static const struct server *routed_node(void *ctx, int k, int64_t cap_ms, char *err, size_t errlen)
{
	struct routed *s = ctx;
	const struct store_route *rt = s->cfg->route;

	err[0] = '\0';
	if (rt && rt->master)
		return rt->master(s->route, k, cap_ms, err, errlen);
	if (!rt)
		return k == 0 ? &s->cfg->srv[0] : NULL;
	const struct server *srv = NULL;
	if (k == 0 && rt->locate(s->route, NULL, cap_ms, &srv, err, errlen) != STORE_OK)
		srv = NULL;
	return srv;
}

struct raw_args {
	int argc;
	const char **argv;
	const size_t *lens;
	struct resp_reply **reply;
};

static int op_raw(struct client *c, void *arg, int64_t d, char *err, size_t errlen)
{
	struct raw_args *a = arg;

	return client_call(c, a->argc, a->argv, a->lens, d, a->reply, err, errlen) < 0 ? LOCK_ERR
	                                                                               : LOCK_OK;
}

static int routed_node_call(void *ctx, const struct server *srv, int argc, const char **argv,
                            const size_t *lens, int64_t cap_ms, struct resp_reply **reply,
                            char *err, size_t errlen)
{
	struct raw_args a = {argc, argv, lens, reply};

	return run(ctx, NULL, srv, 0, op_raw, &a, cap_ms, err, errlen);
}

const struct store_backend routed_backend = {
    .open = routed_open,
    .close = routed_close,
    .name = routed_name,
    .places = 1,
    .acquire = routed_acquire,
    .renew = routed_renew,
    .release = routed_release,
    .status = routed_status,
    .brk = routed_break,
    .leave = routed_leave,
    .is_holder = routed_is_holder,
    .wait_replicas = routed_wait_replicas,
    .wait_aof = routed_wait_aof,
    .list = routed_list,
    .check_eviction = routed_check_eviction,
    .learn = routed_learn,
    .history = routed_history,
    .node = routed_node,
    .node_call = routed_node_call,
    .connected = routed_connected,
    .unanswered = routed_unanswered,
    .placed_at = routed_placed_at,
    .listen_on = routed_listen_on,
    .watch = routed_watch,
    .watch_says = routed_watch_says,
};
