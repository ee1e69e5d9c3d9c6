/* SPDX-License-Identifier: MIT */
#include "cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the one Redis Cluster uses.
 * Bit by bit: lock names are short, and this is easy to check against the spec. */
static unsigned crc16(const char *buf, size_t len)
{
	unsigned crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)buf[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return crc;
}

unsigned cluster_keyslot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open) {
		size_t from = (size_t)(open - key) + 1;
		const char *close = memchr(key + from, '}', len - from);
		if (close && close > key + from)
			return crc16(key + from, (size_t)(close - (key + from))) % CLUSTER_SLOTS;
	}
	return crc16(key, len) % CLUSTER_SLOTS;
}

int cluster_error_is(const char *errtext, const char *code)
{
	size_t n = strlen(code);

	return errtext && strncmp(errtext, code, n) == 0 && (errtext[n] == ' ' || !errtext[n]);
}

/* "host:port" (host may be empty or an IPv6 literal: the port follows the last ':'). */
static int parse_addr(const char *s, struct cluster_addr *a)
{
	const char *colon = strrchr(s, ':');
	char *end;

	if (!colon || (size_t)(colon - s) >= sizeof a->host)
		return -1;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port < 1 || port > 65535)
		return -1;
	memcpy(a->host, s, (size_t)(colon - s));
	a->host[colon - s] = '\0';
	a->port = (int)port;
	return 0;
}

int cluster_parse_redirect(const char *errtext, int *ask, unsigned *slot, struct cluster_addr *to)
{
	char *end;

	if (cluster_error_is(errtext, "MOVED"))
		*ask = 0;
	else if (cluster_error_is(errtext, "ASK"))
		*ask = 1;
	else
		return 0;
	const char *p = strchr(errtext, ' ');
	if (!p || p[1] < '0' || p[1] > '9')
		return -1;
	errno = 0;
	unsigned long s = strtoul(p + 1, &end, 10);
	if (errno || *end != ' ' || s >= CLUSTER_SLOTS || parse_addr(end + 1, to) < 0)
		return -1;
	*slot = (unsigned)s;
	return 1;
}

void cluster_map_init(struct cluster_map *m)
{
	memset(m, 0, sizeof *m);
	for (int i = 0; i < CLUSTER_SLOTS; i++)
		m->owner[i] = -1;
}

int cluster_map_node(struct cluster_map *m, const struct cluster_addr *a)
{
	for (int i = 0; i < m->n; i++)
		if (m->node[i].port == a->port && strcmp(m->node[i].host, a->host) == 0)
			return i;
	if (m->n == CLUSTER_NODES_MAX)
		return -1;
	m->node[m->n] = *a;
	return m->n++;
}

static int slot_number(const struct resp_reply *r, long long *v)
{
	if (r->type != RESP_INTEGER || r->integer < 0 || r->integer >= CLUSTER_SLOTS)
		return -1;
	*v = r->integer;
	return 0;
}

/* A node entry [host, port, id, meta?] into *a. */
static int node_addr(const struct resp_reply *e, const struct cluster_addr *asked,
                     struct cluster_addr *a)
{
	if (e->type != RESP_ARRAY || e->elements < 2 || e->element[0]->type != RESP_STRING ||
	    e->element[1]->type != RESP_INTEGER || e->element[1]->integer < 1 ||
	    e->element[1]->integer > 65535 || e->element[0]->len >= sizeof a->host)
		return -1;
	/* "" and "?" (an unknown endpoint): the node that was asked is the best guess. */
	if (e->element[0]->len == 0 || strcmp(e->element[0]->str, "?") == 0)
		snprintf(a->host, sizeof a->host, "%s", asked->host);
	else
		snprintf(a->host, sizeof a->host, "%s", e->element[0]->str);
	a->port = (int)e->element[1]->integer;
	return 0;
}

int cluster_map_parse(struct cluster_map *m, const struct resp_reply *r,
                      const struct cluster_addr *asked, char *err, size_t errlen)
{
	struct cluster_map *next = malloc(sizeof *next);
	int sharded = 1;

	if (!next) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*next = *m;
	for (int i = 0; i < CLUSTER_SLOTS; i++)
		next->owner[i] = -1;
	if (r->type != RESP_ARRAY || r->elements == 0) {
		snprintf(err, errlen, "CLUSTER SLOTS: %s",
		         r->type == RESP_ARRAY ? "no slot is served (cluster not set up?)"
		                               : "unexpected reply");
		goto fail;
	}
	for (size_t i = 0; i < r->elements; i++) {
		const struct resp_reply *e = r->element[i];
		struct cluster_addr a;
		long long from, to;
		if (e->type != RESP_ARRAY || e->elements < 3 || slot_number(e->element[0], &from) ||
		    slot_number(e->element[1], &to) || from > to ||
		    node_addr(e->element[2], asked, &a) < 0) {
			snprintf(err, errlen, "CLUSTER SLOTS: unexpected reply");
			goto fail;
		}
		int idx = cluster_map_node(next, &a);
		if (idx < 0) {
			snprintf(err, errlen, "CLUSTER SLOTS: more than %d masters",
			         CLUSTER_NODES_MAX);
			goto fail;
		}
		for (long long s = from; s <= to; s++)
			next->owner[s] = (int16_t)idx;
		sharded &= e->element[2]->elements >= 4;
	}
	next->sharded = sharded;
	*m = *next;
	free(next);
	return 0;
fail:
	free(next);
	return -1;
}

int cluster_map_master(const struct cluster_map *m, int i)
{
	for (int n = 0; n < m->n; n++) {
		int serves = 0;
		for (int s = 0; s < CLUSTER_SLOTS && !serves; s++)
			serves = m->owner[s] == n;
		if (serves && i-- == 0)
			return n;
	}
	return -1;
}

/* ------------------------------------------------------------------ the route */

/* What one store handle knows about the cluster; allocated at the first sign of one
 * (a MOVED or ASK, or a probe), so that a single server costs nothing. */
struct cluster_state {
	struct cluster_map map;
	int loaded;         /* map read from CLUSTER SLOTS at least once */
	int refresh;        /* read it again before the next locate */
	int hint;           /* the node to ask first (the last redirect's), or -1 */
	int aside;          /* learnt (route_learn), kept aside: the URL's node is asked first */
	int down;           /* the node that last failed to answer, asked last for the map; or -1 */
	char down_why[300]; /* why, when the map's reading found it ("": a request's) */
	struct server srv[CLUSTER_NODES_MAX]; /* node i's server: stable addresses */
};

struct cluster_ctx {
	const struct server *seed; /* the URL given */
	int plain;                 /* a probe found a server without cluster support */
	int refused;   /* a Cluster node refused CLUSTER SLOTS (its ACL): not asked again */
	int seed_down; /* in a cluster, the URL's node stopped answering */
	struct cluster_state *st;
	const struct server *last; /* the node the last locate chose: named in messages */
};

static void *route_open(const void *arg)
{
	struct cluster_ctx *x = calloc(1, sizeof *x);

	if (x)
		x->seed = arg;
	return x;
}

static void route_close(void *ctx)
{
	struct cluster_ctx *x = ctx;

	if (x)
		free(x->st);
	free(x);
}

static struct cluster_state *state(struct cluster_ctx *x)
{
	if (!x->st && (x->st = malloc(sizeof *x->st))) {
		cluster_map_init(&x->st->map);
		x->st->loaded = 0;
		x->st->refresh = 1;
		x->st->hint = -1;
		x->st->aside = 0;
		x->st->down = -1;
		x->st->down_why[0] = '\0';
	}
	return x->st;
}

/* Node i's server: the seed's settings (TLS, user, password, timeouts) at i's address.
 * Node addresses are IP literals (what nodes announce), so this looks nothing up. */
static void make_server(struct cluster_ctx *x, int i)
{
	struct server *s = &x->st->srv[i];
	const struct cluster_addr *a = &x->st->map.node[i];

	*s = *x->seed;
	memset(&s->ep, 0, sizeof s->ep);
	s->ep.host = a->host;
	s->ep.port = a->port;
	s->ep.tls = &s->tls;
	/* the certificate is verified for the address the cluster gave (conn.h) */
	s->ep.hint_announced = "; the cluster announces that address: give --sni with a name "
	                       "every node's certificate holds, or cluster-preferred-endpoint-type "
	                       "hostname";
	snprintf(s->name, sizeof s->name, strchr(a->host, ':') ? "[%s]:%d" : "%s:%d", a->host,
	         a->port);
}

/* The node index for an address some node gave (an empty host: that node's). */
static int node_index(struct cluster_ctx *x, struct cluster_addr *a, const struct server *from)
{
	int n = x->st->map.n;

	/* "" and "?" (an unknown endpoint), as in the slot map: the node that answered */
	if ((!a->host[0] || strcmp(a->host, "?") == 0) && from && from->ep.host)
		snprintf(a->host, sizeof a->host, "%s", from->ep.host);
	int i = cluster_map_node(&x->st->map, a);
	for (int j = n; j < x->st->map.n; j++)
		make_server(x, j);
	return i;
}

/* The nodes any handle of this process learnt from a slot map: a handle whose URL's node
 * fails before it learnt anything itself (the release, after the renewal thread's handle
 * learnt the map) asks them, as the handle that learnt them would. */
static pthread_mutex_t known_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cluster_addr known[CLUSTER_NODES_MAX];
static int nknown;
static int learnt; /* route_learn asked once in this process (under known_mu) */

static void known_keep(const struct cluster_map *m)
{
	pthread_mutex_lock(&known_mu);
	for (int i = 0; i < m->n; i++) {
		int have = 0;
		for (int j = 0; j < nknown && !have; j++)
			have = known[j].port == m->node[i].port &&
			       strcmp(known[j].host, m->node[i].host) == 0;
		if (!have && nknown < CLUSTER_NODES_MAX)
			known[nknown++] = m->node[i];
	}
	pthread_mutex_unlock(&known_mu);
}

/* x's URL node failed before x knew the cluster: the nodes known in the process, if
 * any, become x's map's nodes (their slots unknown until one is asked). 1 if any. */
static int known_take(struct cluster_ctx *x)
{
	int any = 0;

	pthread_mutex_lock(&known_mu);
	if (nknown > 0 && state(x)) {
		int n = x->st->map.n;
		for (int i = 0; i < nknown; i++)
			cluster_map_node(&x->st->map, &known[i]);
		for (int j = n; j < x->st->map.n; j++)
			make_server(x, j);
		any = x->st->map.n > 0;
	}
	pthread_mutex_unlock(&known_mu);
	return any;
}

/* INFO cluster on c (a connection to srv): 1 cluster_enabled:1, 0 :0, -1 cannot tell
 * (refused by an ACL without +info, an old server: then CLUSTER SLOTS says; or c
 * failed: *failed set). Asked before a server not known to be a Cluster node is sent
 * CLUSTER SLOTS, which a standalone server refuses with an error reply: operators watch
 * INFO errorstats, and a lock should not add to it. */
static int cluster_enabled(struct client *c, const struct server *srv, int64_t cap_ms, int *failed,
                           char *err, size_t errlen)
{
	struct resp_reply *r = NULL;
	const char *argv[] = {"INFO", "cluster"};
	size_t lens[] = {4, 7};
	int rc = -1;
	int64_t d = clock_ms() + srv->io_timeout_ms;

	if (client_call(c, 2, argv, lens, d < cap_ms ? d : cap_ms, &r, err, errlen) < 0) {
		*failed = 1;
		return -1;
	}
	if (r->type == RESP_STRING || r->type == RESP_STATUS) {
		const char *on = strstr(r->str, "cluster_enabled:");
		if (on)
			rc = on[16] == '1';
	}
	resp_free(r);
	return rc;
}

/* read_slots_on: a Cluster node whose ACL refuses CLUSTER SLOTS (NOPERM). */
#define SLOTS_REFUSED (-2)

/* CLUSTER SLOTS on c (a connection to srv) into the map, after INFO cluster when
 * nothing has shown srv to be a Cluster node yet. 1 read, 0 srv is no cluster node, -1
 * failed (*failed set when c itself failed: a timeout leaves a reply on its way),
 * SLOTS_REFUSED (err says so) when a node known to be a Cluster's refuses it: its
 * masters cannot be found, which is no single server (--list would scan one master
 * of several and call that the listing). */
static int read_slots_on(struct cluster_ctx *x, const struct server *srv, struct client *c,
                         int64_t cap_ms, int *failed, char *err, size_t errlen)
{
	struct resp_reply *r = NULL;
	const char *argv[] = {"CLUSTER", "SLOTS"};
	size_t lens[] = {7, 5};
	int rc = -1, on = 1;

	*failed = 0;
	if (!x->st) {
		on = cluster_enabled(c, srv, cap_ms, failed, err, errlen);
		if (on == 0)
			log_debug("%s: cluster_enabled:0", srv->name);
		if (on == 0 || *failed)
			return on == 0 ? 0 : -1;
	}
	int64_t d = clock_ms() + srv->io_timeout_ms;
	if (client_call(c, 2, argv, lens, d < cap_ms ? d : cap_ms, &r, err, errlen) < 0) {
		*failed = 1;
	} else if (r->type == RESP_ERROR && on == 1 && resp_is_error(r, "NOPERM")) {
		log_reason(err, errlen,
		           "%s: CLUSTER SLOTS refused (%s): the Cluster's masters cannot be found; "
		           "give the ACL user +cluster|slots",
		           srv->name, r->str);
		rc = SLOTS_REFUSED;
	} else if (r->type == RESP_ERROR) {
		/* "ERR This instance has cluster support disabled"; or a server that may not
		 * say whether it is one (no +info, no +cluster|slots): the URL's node is all
		 * we can use. */
		log_debug("%s: CLUSTER SLOTS: %s", srv->name, r->str);
		rc = 0;
	} else if (state(x)) {
		struct cluster_map *m = &x->st->map;
		struct cluster_addr asked = {"", srv->ep.port};
		int n = m->n;
		snprintf(asked.host, sizeof asked.host, "%s", srv->ep.host ? srv->ep.host : "");
		if (cluster_map_parse(m, r, &asked, err, errlen) == 0) {
			for (int j = n; j < m->n; j++)
				make_server(x, j);
			x->st->loaded = 1;
			known_keep(m);
			rc = 1;
		}
	}
	resp_free(r);
	return rc;
}

/* Ask srv for CLUSTER SLOTS into the map. 1 read, 0 srv is no cluster node, -1 failed. */
static int read_slots(struct cluster_ctx *x, const struct server *srv, int64_t cap_ms, char *err,
                      size_t errlen)
{
	struct client *c = NULL;
	int failed;

	if (client_open(&c, srv, cap_ms, err, errlen) != CLIENT_OK)
		return -1;
	int rc = read_slots_on(x, srv, c, cap_ms, &failed, err, errlen);
	client_close(c);
	return rc;
}

/* Read the slot map again, from the node of the last redirect, then any other known
 * node, the one that last failed to answer last, then the seed: best effort within
 * cap_ms. 1 read, 0 not a cluster, -1 no node answered (err), SLOTS_REFUSED the last one
 * asked refused it (err). A node that does not answer is the one that failed (down). */
static int refresh(struct cluster_ctx *x, int64_t cap_ms, char *err, size_t errlen)
{
	struct cluster_state *st = x->st;
	int rc = -1;

	if (st) {
		st->refresh = 0;
		int down = st->down, first = st->hint != down ? st->hint : -1;
		for (int k = -1; rc == -1 && k <= st->map.n && clock_ms() < cap_ms; k++) {
			/* the hint first, then every other node, the one down last */
			int i = k < 0 ? first : k < st->map.n ? k : down;
			if (i < 0 || (k >= 0 && k < st->map.n && (i == first || i == down)))
				continue;
			rc = read_slots(x, &st->srv[i], cap_ms, err, errlen);
			if (rc == -1) {
				st->down = i;
				snprintf(st->down_why, sizeof st->down_why, "%s", err);
			} else if (i == st->down)
				st->down = -1;
		}
		st->hint = -1;
	}
	if (rc == -1 && clock_ms() < cap_ms)
		rc = read_slots(x, x->seed, cap_ms, err, errlen);
	if (rc == 0)
		x->plain = 1;
	if (rc == SLOTS_REFUSED)
		x->refused = 1;
	return rc;
}

static int route_locate(void *ctx, const char *key, int64_t cap_ms, const struct server **srv,
                        char *err, size_t errlen)
{
	struct cluster_ctx *x = ctx;
	struct cluster_state *st = x->st;

	*srv = x->last = x->seed;
	if (!st || (st->aside && !x->seed_down))
		return STORE_OK;
	if (st->refresh) {
		char why[300];
		if (refresh(x, cap_ms, why, sizeof why) < 0)
			log_debug("cluster: slot map not refreshed: %s", why);
	}
	int i = key ? st->map.owner[cluster_keyslot(key, strlen(key))]
	            : cluster_map_master(&st->map, 0);
	if (i < 0 && x->seed_down && st->map.n > 0)
		i = cluster_map_master(&st->map, 0) >= 0 ? cluster_map_master(&st->map, 0) : 0;
	if (i >= 0)
		*srv = &st->srv[i];
	x->last = *srv;
	/* One look (store_look_once): the node the map names did not answer us in this
	 * look already (asked for the map): not asked again. */
	if (i >= 0 && i == st->down && st->down_why[0] && store_looking_once()) {
		snprintf(err, errlen, "%s", st->down_why);
		return STORE_ERR;
	}
	return STORE_OK;
}

static int route_redirect(void *ctx, const char *key, const struct server *srv, const char *errtext,
                          const struct server **ask)
{
	struct cluster_ctx *x = ctx;
	struct cluster_addr to;
	unsigned slot;
	int is_ask;

	if (x->st)
		x->st->aside = 0; /* a redirect, or a failure: the map decides from now on */
	if (!errtext) {
		/* srv is unreachable (a failed master?): forget its slots and ask another node. */
		int dead = -1;
		for (int i = 0; x->st && i < x->st->map.n; i++)
			if (&x->st->srv[i] == srv)
				dead = i;
		/* the URL's node, before this handle knew the cluster: another may have */
		if (dead < 0 && srv == x->seed && !x->st && !x->plain && known_take(x))
			x->st->refresh = 1;
		if (dead < 0 && (!x->st || srv != x->seed))
			return STORE_ROUTE_FAIL; /* a single server's failure stands */
		if (dead < 0) {
			x->seed_down = 1; /* the cluster has other nodes to ask */
			x->st->refresh = 1;
			return STORE_ROUTE_RETRY;
		}
		for (int s = 0; s < CLUSTER_SLOTS; s++)
			if (x->st->map.owner[s] == dead)
				x->st->map.owner[s] = -1;
		x->st->refresh = 1;
		x->st->down = dead; /* not asked first for the map (routed.c said why) */
		x->st->down_why[0] = '\0';
		return STORE_ROUTE_RETRY;
	}
	int rc = cluster_parse_redirect(errtext, &is_ask, &slot, &to);
	if (rc > 0 && state(x)) {
		int i = node_index(x, &to, srv);
		if (i < 0)
			return STORE_ROUTE_FAIL;
		if (is_ask) {
			*ask = &x->st->srv[i];
			return STORE_ROUTE_ASK;
		}
		x->st->map.owner[slot] = (int16_t)i;
		if (!x->st->loaded && !x->refused)
			x->st->refresh = 1, x->st->hint = i;
		return STORE_ROUTE_RETRY;
	}
	/* A slot being migrated: a script whose keys are not all on one side is refused
	 * until the migration ends, usually within milliseconds (then: MOVED). */
	if (cluster_error_is(errtext, "TRYAGAIN") ||
	    strncmp(errtext, CLUSTER_NONLOCAL, strlen(CLUSTER_NONLOCAL)) == 0)
		return STORE_ROUTE_LATER;
	/* A failover in progress: another try will find the new owner. */
	if (x->st &&
	    (cluster_error_is(errtext, "READONLY") || cluster_error_is(errtext, "LOADING"))) {
		if (key)
			x->st->map.owner[cluster_keyslot(key, strlen(key))] = -1;
		x->st->refresh = 1;
		return STORE_ROUTE_RETRY;
	}
	return STORE_ROUTE_FAIL; /* CLUSTERDOWN, anything else: the error stands */
}

static const struct server *route_master(void *ctx, int i, int64_t cap_ms, char *err, size_t errlen)
{
	struct cluster_ctx *x = ctx;

	err[0] = '\0';
	if (i == 0) {
		if (x->st)
			x->st->refresh = 1;
		int rc = refresh(x, cap_ms, err, errlen);
		if (rc < 0)
			return NULL;
		if (rc == 0) {
			err[0] = '\0';
			return x->seed;
		}
	}
	if (x->plain || !x->st)
		return NULL;
	int n = cluster_map_master(&x->st->map, i);
	return n < 0 ? NULL : &x->st->srv[n];
}

static void route_probe(void *ctx, int64_t cap_ms)
{
	struct cluster_ctx *x = ctx;
	char err[300];

	if (!x->plain && !x->refused && (!x->st || !x->st->loaded) &&
	    refresh(x, cap_ms, err, sizeof err) < 0)
		log_debug("cluster: no slot map: %s", err);
}

/* The URL's node answered and no redirect has shown a Cluster: ask it (on c, the
 * handle's connection to at, when that is the URL's node; else a connection of its own)
 * whether it is one, and for the slot map if so. A lock whose slot the URL's node serves
 * meets no redirect, yet when that node fails its replica takes the slot over: without
 * the map the renewal, the release and a waiter would only ever dial the dead URL. The
 * map is kept aside (the URL's node still serves what it serves) until that node fails
 * or redirects. Asked once per process (known_take shares the nodes with every handle),
 * off the command's path: by the renewal thread after its first renewal (store.h). -1
 * when c failed meanwhile (the caller drops it), else 0. */
static int route_learn(void *ctx, const struct server *at, struct client *c, int64_t cap_ms)
{
	struct cluster_ctx *x = ctx;
	struct client *own = NULL;
	char err[300];
	int failed = 0, rc = -1;

	pthread_mutex_lock(&known_mu);
	int ask = !learnt && !x->plain && !x->refused && !x->st;
	learnt = 1;
	pthread_mutex_unlock(&known_mu);
	if (!ask)
		return 0;
	if (!c || at != x->seed) {
		c = NULL;
		if (client_open(&own, x->seed, cap_ms, err, sizeof err) != CLIENT_OK)
			goto out;
	}
	rc = read_slots_on(x, x->seed, c ? c : own, cap_ms, &failed, err, sizeof err);
	if (rc == 0) {
		log_debug("cluster: %s is no Cluster node", x->seed->name);
		x->plain = 1;
	} else if (rc > 0) {
		x->st->refresh = 0;
		x->st->aside = 1;
	} else if (rc == SLOTS_REFUSED) {
		log_debug("cluster: %s", err);
		x->refused = 1; /* asked once: an ACL does not change between renewals */
		rc = 0;
	}
out:
	if (rc < 0) {
		log_debug("cluster: no slot map from %s: %s", x->seed->name, err);
		pthread_mutex_lock(&known_mu);
		learnt = 0; /* a later renewal asks again */
		pthread_mutex_unlock(&known_mu);
	}
	client_close(own);
	return c && failed ? -1 : 0;
}

static const char *route_subscribe_cmd(void *ctx, const char *key)
{
	struct cluster_ctx *x = ctx;

	(void)key;
	return x->st && x->st->loaded && x->st->map.sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
}

/* The node a message about the last request should name: the master its key's slot
 * led to (srv[] addresses are stable), not the URL's node, which may be fine. */
static const char *route_name(void *ctx)
{
	struct cluster_ctx *x = ctx;

	return (x->last ? x->last : x->seed)->name;
}

const struct store_route cluster_route = {
    .open = route_open,
    .close = route_close,
    .locate = route_locate,
    .redirect = route_redirect,
    .master = route_master,
    .subscribe_cmd = route_subscribe_cmd,
    .probe = route_probe,
    .learn = route_learn,
    .name = route_name,
};
