/* SPDX-License-Identifier: MIT */
/* Redis Sentinel discovery: which server is the master of MASTER now.
 *
 * Ask the sentinels of a redis-sentinel:// URL in turn (each with the connect and io
 * deadlines) `SENTINEL get-master-addr-by-name MASTER`, connect to the address it
 * gives, log in as a data client (password, db) and confirm with ROLE that the server
 * says "master"; a sentinel whose answer fails any of that is passed over for the
 * next. Rounds over all sentinels repeat (with a short pause) until the caller's
 * deadline, unless every sentinel that answered said it does not know MASTER, or the
 * caller asked for one pass (one look: -n, the operator's commands).
 * Errors are matched by their code, never by their text.
 *
 * The sentinels' own login (user, password in secret.h's SECRET_SENTINEL slot) is
 * separate from the data servers' (struct server's user and SECRET_DATA).
 *
 * Thread-safety: sentinel_init() once, before threads start; then sentinel_discover()
 * may run in any thread at the same time (the struct is read-only after init). */
#ifndef RLOCK_SENTINEL_H
#define RLOCK_SENTINEL_H

#include <stdint.h>

#include "client.h"
#include "parse.h"

struct sentinel {
	char master[URL_MASTER_MAX];
	int n;
	struct server sent[URL_SENTINELS_MAX]; /* each sentinel, looked up once */
	char host[URL_SENTINELS_MAX][URL_HOST_MAX];
	const char *user; /* the sentinels' ACL user, or NULL */
	int has_password; /* AUTH to the sentinels with SECRET_SENTINEL */
};

/* The settings of the sentinels of u (a URL_SENTINEL/URL_SENTINELS url; names are
 * copied), with tls (NULL or !enabled: plain; copied) and the per-server deadlines.
 * No I/O: a sentinel's name is looked up at each connect unless its endpoint has
 * been resolved (client_resolve() on s->sent[i]) before the threads start. The struct
 * must not be moved afterwards (each endpoint points at its own TLS settings). */
void sentinel_init(struct sentinel *s, const struct url *u, const struct tls_opts *tls,
                   const char *user, int has_password, int64_t connect_timeout_ms,
                   int64_t io_timeout_ms);

/* How long a discovery may take when nothing else bounds it: one pass over every
 * sentinel and the master, each with its connect and io deadlines. */
int64_t sentinel_budget_ms(const struct sentinel *s);

/* Find the master, before cap_ms, asking the sentinels in turn from *first (in/out:
 * set to the one whose master was confirmed, so that later questions go to a sentinel
 * that answers, not again first to one that stalls), in rounds until cap_ms, or in one
 * pass when once is set (store_look_once: -n and the operator's commands). srv comes in
 * with the data servers' settings (user, password, db, tls, timeouts: as for
 * client_open); on success it points at the confirmed master: srv->ep.host is host (the
 * caller's buffer of URL_HOST_MAX bytes), srv->ep.port, srv->ep.addrs looked up,
 * srv->name "HOST:PORT". Returns 0, or -1 with one line in err: "no sentinel knows
 * master 'X'", the master's refusal of our login, or "no master found for 'X'" followed
 * by each sentinel's last reason (a connect error, a timeout, NOAUTH, the master it
 * named that failed). A discovery cut short by the thread's abort fd (conn.h) also
 * returns -1. */
int sentinel_discover(const struct sentinel *s, struct server *srv, char *host, int64_t cap_ms,
                      int once, int *first, char *err, size_t errlen);

/* The store's route (store.h) for a redis-sentinel:// URL. Each store handle finds
 * the master on first use (within sentinel_budget_ms() when its caller gives no closer
 * deadline; in one pass under store_look_once), asks the sentinels again, at most every recheck_ms,
 * whether it is still the master (a master that lost a failover keeps taking writes until a
 * sentinel reconfigures it; that re-check takes at most one sentinel's deadlines and half the time
 * its caller has, and keeps the master when no sentinel answers), and finds it anew after READONLY,
 * MASTERDOWN or a failed connection.
 *
 * The route's context: what every handle shares, read-only once the threads start. */
struct sentinel_route {
	struct sentinel s;  /* the sentinels (sentinel_init) */
	struct server data; /* the master's settings: user, password, db, TLS, deadlines */
	int64_t recheck_ms;
	char label[URL_MASTER_MAX + 16];
	/* The one field written after the threads start (__atomic, relaxed): the
	 * sentinel that answered last on any handle, asked first by the others too. */
	int first;
};

/* --check: what sentinel i of s says of its master: known (its address in addr, as
 * get-master-addr-by-name gives it) or not, and, when known, SENTINEL CKQUORUM's
 * verdict (quorum 1: the quorum and a failover's authorization can be reached, 0: they
 * cannot, -1: no answer; its words in words). Returns 0, -1 when the sentinel does
 * not answer, or -2 when it refuses us (NOAUTH, WRONGPASS, NOPERM) (why in err).
 * Read-only; before cap_ms. */
struct sentinel_view {
	int knows, quorum;
	char addr[URL_HOST_MAX + 8];
	char words[300];
};
int sentinel_view(const struct sentinel *s, int i, int64_t cap_ms, struct sentinel_view *v,
                  char *err, size_t errlen);

/* The sentinels behind cfg's route, or NULL when it is no Sentinel route. */
struct store_config;
const struct sentinel *sentinel_of(const struct store_config *cfg);

/* --check: the sentinel asked first by the next discovery of cfg's Sentinel route is
 * i (one --check found answering); nothing when cfg has no Sentinel route. Before the
 * threads start. */
void sentinel_ask_first(struct store_config *cfg, int i);

/* Fill cfg's route (cfg->srv[0] holds the data servers' settings) with r, whose
 * sentinels are initialised: r is the route's context and must outlive cfg. No I/O. */
void sentinel_route_config(struct store_config *cfg, struct sentinel_route *r, int64_t recheck_ms);

#endif
