/* SPDX-License-Identifier: MIT */
#include "sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "log.h"
#include "secret.h"

/* Pause between two rounds over the sentinels: a failover is under way (no sentinel
 * named a master that answers as one), so give them time to agree on a new one. */
#define ROUND_PAUSE_MIN_MS 100
#define ROUND_PAUSE_MAX_MS 1000
/* One sentinel's reason in a message that names them all. */
#define SENTINEL_WHY_MAX 400

static void hostport_name(char *buf, size_t n, const char *host, int port)
{
	snprintf(buf, n, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* How a message about a TLS/plaintext mismatch ends (conn.h): here one setting covers
 * the sentinels and the master. For a sentinel, the Sentinel scheme; for the master,
 * that it and its sentinels differ (rlock has no setting for TLS to one and not the
 * other). */
#define SENTINEL_WANTS_TLS   " then use rediss-sentinel:// or --tls)"
#define SENTINEL_WANTS_PLAIN " then use redis-sentinel://, or its TLS port)"
#define MASTER_WANTS_TLS                                                                           \
	" then it wants TLS and its sentinels do not: rlock speaks TLS to both or neither)"
#define MASTER_WANTS_PLAIN                                                                         \
	" then its sentinels speak TLS and it does not: rlock speaks TLS to both or "              \
	"neither)"
/* The master's certificate does not name the address its sentinels announce (an IP,
 * unless they announce host names): conn.h's hint_announced. */
#define MASTER_ANNOUNCED                                                                           \
	"; the sentinels announce that address: give --sni with a name the certificate holds, "    \
	"or have them announce one (sentinel announce-hostnames yes)"

void sentinel_init(struct sentinel *s, const struct url *u, const struct tls_opts *tls,
                   const char *user, int has_password, int64_t connect_timeout_ms,
                   int64_t io_timeout_ms)
{
	memset(s, 0, sizeof *s);
	snprintf(s->master, sizeof s->master, "%s", u->master);
	s->user = user;
	s->has_password = has_password;
	s->n = u->nsentinels;
	for (int i = 0; i < s->n; i++) {
		struct server *srv = &s->sent[i];
		memcpy(s->host[i], u->sentinel[i].host, sizeof s->host[i]);
		if (tls)
			srv->tls = *tls;
		srv->ep.host = s->host[i];
		srv->ep.port = u->sentinel[i].port;
		srv->ep.tls = &srv->tls;
		srv->ep.hint_wants_tls = SENTINEL_WANTS_TLS;
		srv->ep.hint_wants_plain = SENTINEL_WANTS_PLAIN;
		srv->connect_timeout_ms = connect_timeout_ms;
		srv->io_timeout_ms = io_timeout_ms;
		hostport_name(srv->name, sizeof srv->name, s->host[i], srv->ep.port);
	}
}

int64_t sentinel_budget_ms(const struct sentinel *s)
{
	int64_t one = s->sent[0].connect_timeout_ms + s->sent[0].io_timeout_ms;

	return s->n * one + one + s->sent[0].io_timeout_ms;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Open a connection to sentinel srv and log in with the sentinels' credentials:
 * CLIENT_OK, CLIENT_AUTH (refused) or CLIENT_ERR, with the reason in err. */
static int sentinel_open(const struct sentinel *s, const struct server *srv, struct client **c,
                         int64_t cap_ms, char *err, size_t errlen)
{
	struct resp_reply *r = NULL;
	char e[300];

	int rc = client_open(c, srv, cap_ms, e, sizeof e);
	if (rc != CLIENT_OK) {
		log_reason(err, errlen, "sentinel %.100s: %s", srv->name, e);
		return rc;
	}
	if (!s->has_password)
		return CLIENT_OK;
	char pw[SECRET_MAX + 1];
	size_t pwlen = secret_reveal_slot(SECRET_SENTINEL, pw, sizeof pw);
	const char *argv[3] = {"AUTH", s->user ? s->user : pw, pw};
	size_t lens[3] = {4, s->user ? strlen(s->user) : pwlen, pwlen};
	rc = client_call(*c, s->user ? 3 : 2, argv, lens,
	                 min64(clock_ms() + srv->io_timeout_ms, cap_ms), &r, e, sizeof e);
	explicit_bzero(pw, sizeof pw);
	if (rc < 0) {
		log_reason(err, errlen, "sentinel %.100s: %s", srv->name, e);
		rc = CLIENT_ERR;
	} else if (!s->user && client_auth_unset(r)) {
		/* as client.c's AUTH: a configuration that does not fit the sentinel, 64 */
		snprintf(err, errlen,
		         "sentinel %.100s has no password set, yet rlock was given one for the "
		         "sentinels: the sentinel meant is another, or this one is unprotected "
		         "(then give no sentinel password)",
		         srv->name);
		conn_fault_note(CONN_FAULT_FINAL | CONN_FAULT_CONFIG | CONN_FAULT_NOPASS);
		rc = CLIENT_ERR;
	} else if (r->type == RESP_ERROR) {
		/* The server's text is about our secret: never echoed. */
		snprintf(err, errlen, "authentication to sentinel %.100s failed: %.300s", srv->name,
		         resp_is_error(r, "WRONGPASS") ? "wrong user name or password"
		         : resp_is_error(r, "NOPERM")  ? "permission denied (NOPERM)"
		                                       : "server refused AUTH");
		rc = CLIENT_AUTH;
	}
	resp_free(r);
	if (rc != CLIENT_OK) {
		client_close(*c);
		*c = NULL;
	}
	return rc;
}

enum ask {
	ASK_FOUND,
	ASK_UNKNOWN, /* the sentinel does not know MASTER */
	ASK_DENIED,  /* it refused us (NOAUTH, WRONGPASS, NOPERM): asking again will not help */
	ASK_FAILED,
};

/* Ask one sentinel where the master is: host[URL_HOST_MAX] and *port. */
static enum ask ask_sentinel(const struct sentinel *s, const struct server *srv, char *host,
                             int *port, int64_t cap_ms, char *err, size_t errlen)
{
	struct client *c = NULL;
	struct resp_reply *r = NULL;
	const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", s->master};
	size_t lens[3] = {8, 23, strlen(s->master)};
	enum ask rc = ASK_FAILED;
	char e[300];

	int opened = sentinel_open(s, srv, &c, cap_ms, err, errlen);
	if (opened != CLIENT_OK)
		return opened == CLIENT_AUTH ? ASK_DENIED : ASK_FAILED;
	if (client_call(c, 3, argv, lens, min64(clock_ms() + srv->io_timeout_ms, cap_ms), &r, e,
	                sizeof e) < 0) {
		log_reason(err, errlen, "sentinel %.100s: %s", srv->name, e);
		goto out;
	}
	if (r->type == RESP_NIL || (r->type == RESP_ARRAY && r->elements == 0)) {
		snprintf(err, errlen, "sentinel %.100s does not know master '%.100s'", srv->name,
		         s->master);
		rc = ASK_UNKNOWN;
		goto out;
	}
	if (r->type == RESP_ERROR) {
		char q[200];
		log_clip(q, sizeof q, r->str, r->len);
		if (resp_is_noauth(r))
			snprintf(err, errlen,
			         "sentinel %.100s requires a password (NOAUTH); see "
			         "--sentinel-password-file",
			         srv->name);
		else
			log_reason(err, errlen, "sentinel %.100s: %s", srv->name, q);
		if (resp_is_noauth(r) || resp_is_error(r, "NOPERM"))
			rc = ASK_DENIED;
		goto out;
	}
	long long p = 0;
	if (r->type != RESP_ARRAY || r->elements != 2 || r->element[0]->type != RESP_STRING ||
	    r->element[1]->type != RESP_STRING || r->element[0]->len == 0 ||
	    r->element[0]->len >= URL_HOST_MAX ||
	    parse_int(r->element[1]->str, 1, 65535, &p, e, sizeof e) < 0) {
		snprintf(err, errlen,
		         "sentinel %.100s: unexpected reply to get-master-addr-by-name", srv->name);
		goto out;
	}
	memcpy(host, r->element[0]->str, r->element[0]->len + 1);
	*port = (int)p;
	rc = ASK_FOUND;
out:
	resp_free(r);
	client_close(c);
	return rc;
}

/* SENTINEL CKQUORUM of s's master on sentinel srv, into v (the reply's words are the
 * sentinel's: escaped). */
static void ask_quorum(const struct sentinel *s, const struct server *srv, int64_t cap_ms,
                       struct sentinel_view *v)
{
	struct client *c = NULL;
	struct resp_reply *r = NULL;
	const char *argv[3] = {"SENTINEL", "CKQUORUM", s->master};
	size_t lens[3] = {8, 8, strlen(s->master)};
	char e[300];

	v->quorum = -1;
	if (sentinel_open(s, srv, &c, cap_ms, v->words, sizeof v->words) != CLIENT_OK)
		return;
	if (client_call(c, 3, argv, lens, min64(clock_ms() + srv->io_timeout_ms, cap_ms), &r, e,
	                sizeof e) < 0) {
		log_reason(v->words, sizeof v->words, "%s", e);
	} else if (r->type == RESP_STATUS || r->type == RESP_ERROR)
		log_clip(v->words, sizeof v->words, r->str, r->len);
	else
		snprintf(v->words, sizeof v->words, "unexpected reply to CKQUORUM");
	if (r && (r->type == RESP_STATUS || r->type == RESP_ERROR))
		v->quorum = r->type == RESP_STATUS;
	resp_free(r);
	client_close(c);
}

int sentinel_view(const struct sentinel *s, int i, int64_t cap_ms, struct sentinel_view *v,
                  char *err, size_t errlen)
{
	char host[URL_HOST_MAX];
	int port = 0;

	memset(v, 0, sizeof *v);
	enum ask a = ask_sentinel(s, &s->sent[i], host, &port, cap_ms, err, errlen);
	if (a == ASK_DENIED)
		return -2;
	if (a == ASK_FAILED)
		return -1;
	v->knows = a == ASK_FOUND;
	v->quorum = -1;
	if (v->knows) {
		hostport_name(v->addr, sizeof v->addr, host, port);
		ask_quorum(s, &s->sent[i], cap_ms, v);
	}
	return 0;
}

/* Connect to the candidate in srv as a data client and confirm ROLE says master:
 * 0; CLIENT_AUTH when it refused our login (final: the sentinels named it); -1. */
static int confirm_master(const struct server *srv, int64_t cap_ms, char *err, size_t errlen)
{
	struct client *c = NULL;
	struct resp_reply *r = NULL;
	const char *argv[1] = {"ROLE"};
	size_t lens[1] = {4};
	char e[300];
	int rc = -1;

	int opened = client_open(&c, srv, cap_ms, e, sizeof e);
	if (opened != CLIENT_OK) {
		log_reason(err, errlen, "master %.100s: %s", srv->name, e);
		return opened == CLIENT_AUTH ? CLIENT_AUTH : -1;
	}
	if (client_call(c, 1, argv, lens, min64(clock_ms() + srv->io_timeout_ms, cap_ms), &r, e,
	                sizeof e) < 0) {
		log_reason(err, errlen, "master %.100s: %s", srv->name, e);
	} else if (r->type == RESP_ARRAY && r->elements > 0 && r->element[0]->type == RESP_STRING &&
	           strcmp(r->element[0]->str, "master") == 0) {
		rc = 0;
	} else if (r->type == RESP_ERROR) {
		char q[200];
		log_clip(q, sizeof q, r->str, r->len);
		log_reason(err, errlen, "master %.100s: ROLE: %s", srv->name, q);
	} else {
		char q[64] = "?";
		if (r->type == RESP_ARRAY && r->elements > 0 && r->element[0]->type == RESP_STRING)
			log_clip(q, sizeof q, r->element[0]->str, r->element[0]->len);
		log_reason(err, errlen, "%.100s, named master by the sentinels, says it is a %s",
		           srv->name, q);
	}
	resp_free(r);
	client_close(c);
	return rc;
}

/* The reason to report for one sentinel when no master is found: its last failure,
 * unless that only ran into cap_ms (a timeout that says nothing) after a complete
 * attempt said more (a certificate refused, a master that is not one). */
static void keep_reason(char *last, size_t n, const char *e, int64_t cap_ms, int *complete)
{
	int cut = clock_ms() >= cap_ms;

	if (!cut || !*complete)
		log_reason(last, n, "%s", e);
	*complete |= !cut;
}

/* "HEAD: why1; why2; ..." in err: every sentinel's reason, in the order asked from
 * start, each said once (one that was never asked, cut short by cap_ms, has none). */
static void say_reasons(char *err, size_t errlen, const char *head, const struct sentinel *s,
                        int start, char why[][SENTINEL_WHY_MAX])
{
	/* all of it first, then cut as every reason is: in the middle, shown (log_clip) */
	char all[URL_MASTER_MAX + 64 + URL_SENTINELS_MAX * (SENTINEL_WHY_MAX + 2)];
	size_t used = (size_t)snprintf(all, sizeof all, "%s", head);

	for (int k = 0, sep = ':'; k < s->n && used < sizeof all; k++) {
		const char *w = why[(start + k) % s->n];
		int said = 0; /* the master that several named, said once */
		for (int j = 0; j < k && !said; j++)
			said = strcmp(why[(start + j) % s->n], w) == 0;
		if (!w[0] || said)
			continue;
		used += (size_t)snprintf(all + used, sizeof all - used, "%c %s", sep, w);
		sep = ';';
	}
	log_clip(err, errlen, all, used < sizeof all ? used : sizeof all - 1);
}

int sentinel_discover(const struct sentinel *s, struct server *srv, char *host, int64_t cap_ms,
                      int once, int *first, char *err, size_t errlen)
{
	int64_t pause = ROUND_PAUSE_MIN_MS;
	char cand[URL_HOST_MAX], e[512], head[URL_MASTER_MAX + 64];
	char why[URL_SENTINELS_MAX][SENTINEL_WHY_MAX] = {{0}};
	int complete[URL_SENTINELS_MAX] = {0};
	int port;

	int start = *first;

	for (;;) {
		int unknown = 0, denied = 0, final = 0;
		/* the masters named in this pass that failed: not asked again in it (several
		 * sentinels name one master: a silent one costs its deadline once a pass) */
		struct {
			char name[sizeof srv->name];
			int final;
			char why[SENTINEL_WHY_MAX];
		} failed[URL_SENTINELS_MAX];
		int nfailed = 0;
		for (int k = 0; k < s->n; k++) {
			int i = (start + k) % s->n;
			if (clock_ms() >= cap_ms || conn_abort_pending()) {
				snprintf(head, sizeof head, "no master found for '%s' in time",
				         s->master);
				say_reasons(err, errlen, head, s, start, why);
				return -1;
			}
			/* One sentinel's final fault is not the round's while others may answer. */
			int before = conn_fault_push();
			enum ask a = ask_sentinel(s, &s->sent[i], cand, &port, cap_ms, e, sizeof e);
			int fault = conn_fault_pop(before, 0);
			/* this host's, a TLS file's are the round's */
			conn_fault_note(fault & (CONN_FAULT_LOCAL | CONN_FAULT_FILE |
			                         CONN_FAULT_CONFIG | CONN_FAULT_NOPASS));
			unknown += a == ASK_UNKNOWN;
			denied += a == ASK_DENIED;
			final += a == ASK_FAILED && (fault & CONN_FAULT_FINAL);
			if (a != ASK_FOUND) {
				log_debug("%s", e);
				keep_reason(why[i], sizeof why[i], e, cap_ms, &complete[i]);
				continue;
			}
			char named[sizeof srv->name];
			hostport_name(named, sizeof named, cand, port);
			int seen = -1;
			for (int j = 0; j < nfailed && seen < 0; j++)
				seen = strcmp(failed[j].name, named) == 0 ? j : -1;
			if (seen >= 0) {
				final += failed[seen].final;
				keep_reason(why[i], sizeof why[i], failed[seen].why, cap_ms,
				            &complete[i]);
				continue;
			}
			memcpy(host, cand, URL_HOST_MAX);
			srv->ep.host = host;
			srv->ep.port = port;
			srv->ep.path = NULL;
			srv->ep.tls = &srv->tls;
			srv->ep.hint_wants_tls = MASTER_WANTS_TLS;
			srv->ep.hint_wants_plain = MASTER_WANTS_PLAIN;
			srv->ep.hint_announced = MASTER_ANNOUNCED;
			memset(&srv->ep.addrs, 0, sizeof srv->ep.addrs);
			hostport_name(srv->name, sizeof srv->name, host, port);
			before = conn_fault_push();
			int ok =
			    client_resolve(srv, min64(clock_ms() + srv->connect_timeout_ms, cap_ms),
			                   e, sizeof e) == CLIENT_OK
			        ? confirm_master(srv, cap_ms, e, sizeof e)
			        : -1;
			fault = conn_fault_pop(before, 0);
			conn_fault_note(fault & (CONN_FAULT_LOCAL | CONN_FAULT_FILE |
			                         CONN_FAULT_CONFIG | CONN_FAULT_NOPASS));
			final += ok == -1 && (fault & CONN_FAULT_FINAL);
			if (ok == 0) {
				log_debug("sentinel %s: master '%s' is %s (confirmed by ROLE)",
				          s->sent[i].name, s->master, srv->name);
				*first = i;
				return 0;
			}
			if (ok == CLIENT_AUTH) { /* the master refused our login: final */
				log_reason(err, errlen, "%s", e);
				conn_fault_note(CONN_FAULT_FINAL);
				return -1;
			}
			log_debug("%s", e);
			/* the master it named failed: that sentinel's reason ("master ...") */
			keep_reason(why[i], sizeof why[i], e, cap_ms, &complete[i]);
			snprintf(failed[nfailed].name, sizeof failed[nfailed].name, "%s",
			         srv->name);
			snprintf(failed[nfailed].why, sizeof failed[nfailed].why, "%.390s", e);
			failed[nfailed++].final = ok == -1 && (fault & CONN_FAULT_FINAL);
		}
		/* Every sentinel gave an answer that asking again will not change. */
		if (unknown == s->n) {
			snprintf(err, errlen, "no sentinel knows master '%.300s'", s->master);
			conn_fault_note(CONN_FAULT_FINAL);
			return -1;
		}
		/* Or one asking again will not change: it cannot be spoken to (a certificate
		 * that does not verify, TLS on one side only), or the master it names cannot
		 * (README: what time cannot fix fails at once). */
		if (unknown + denied + final == s->n) {
			snprintf(head, sizeof head, "no master found for '%s'", s->master);
			say_reasons(err, errlen, head, s, start, why);
			conn_fault_note(CONN_FAULT_FINAL);
			return -1;
		}
		/* One look (-n, an operator's command): one pass, each sentinel once. */
		if (once) {
			snprintf(head, sizeof head,
			         "no master found for '%s' (each sentinel asked once)", s->master);
			say_reasons(err, errlen, head, s, start, why);
			return -1;
		}
		conn_pause_until(min64(clock_ms() + pause, cap_ms));
		pause = min64(pause * 2, ROUND_PAUSE_MAX_MS);
	}
}

/* ---- the store's route --------------------------------------------------------- */

/* One handle's view of the master. A new master goes into the other slot: the store
 * reconnects when the server's address (the pointer) changes. */
struct route {
	const struct sentinel_route *sh; /* shared by every handle */
	struct server srv[2];
	char host[2][URL_HOST_MAX];
	int cur;   /* srv[cur] is the master; -1: to be found */
	int last;  /* the slot found last */
	int first; /* the sentinel asked first (the shared hint's copy, below) */
	int *hint; /* sh->first: where every handle says which sentinel answered */
	int64_t checked_ms;
	int recheck; /* the next locate asks the sentinels again (route_recheck) */
};

static void *route_open(const void *arg)
{
	struct route *x = calloc(1, sizeof *x);

	if (x) {
		x->sh = arg;
		x->hint = (int *)&x->sh->first; /* not a const object: sentinel_route_config */
		x->cur = -1;
		x->last = 1;
	}
	return x;
}

static void route_close(void *ctx)
{
	free(ctx);
}

/* The sentinel to ask first, as any handle found it last: a new handle (the release's,
 * a renewal's) does not ask first again the one that stalled another. */
static void first_load(struct route *x)
{
	x->first = __atomic_load_n(x->hint, __ATOMIC_RELAXED);
}

static void first_store(const struct route *x)
{
	__atomic_store_n(x->hint, x->first, __ATOMIC_RELAXED);
}

/* Ask the sentinels in turn, once each, where the master is, starting with the one
 * that answered last time (*first): 1 with host and *port from the first that knows,
 * 0 when none could say before cap_ms. One that did not say is not asked first next
 * time: a sentinel that stalls would spend every re-check's time, and the others,
 * which may know of a failover, would never be asked. */
static int ask_once(const struct sentinel *s, int *first, char *host, int *port, int64_t cap_ms)
{
	char err[512];
	int start = *first;

	for (int k = 0; k < s->n && clock_ms() < cap_ms; k++) {
		int i = (start + k) % s->n;
		if (ask_sentinel(s, &s->sent[i], host, port, cap_ms, err, sizeof err) ==
		    ASK_FOUND) {
			*first = i;
			return 1;
		}
		log_debug("%s", err);
		*first = (i + 1) % s->n;
	}
	return 0;
}

static int route_locate(void *ctx, const char *key, int64_t cap_ms, const struct server **srv,
                        char *err, size_t errlen)
{
	struct route *x = ctx;
	const struct sentinel_route *sh = x->sh;
	char host[URL_HOST_MAX];
	int port;

	(void)key;
	if (x->cur >= 0 && (x->recheck || clock_ms() - x->checked_ms >= sh->recheck_ms)) {
		/* A master that lost a failover goes on taking writes until a sentinel
		 * reconfigures it (~10 s): only the sentinels know it is no longer the
		 * master. When none answers, the master known stays. */
		int64_t now = clock_ms();
		/* Bounded, so that sentinels that do not answer cannot delay a renewal
		 * much: one sentinel's deadlines, at most half the time the caller has. */
		int64_t cap = min64(cap_ms, now + sh->s.sent[0].connect_timeout_ms +
		                                sh->s.sent[0].io_timeout_ms);
		if (cap_ms != STORE_NO_CAP && cap_ms > now)
			cap = min64(cap, now + (cap_ms - now) / 2);
		x->checked_ms = now;
		x->recheck = 0;
		first_load(x);
		int said = ask_once(&sh->s, &x->first, host, &port, cap);
		first_store(x);
		if (said &&
		    (port != x->srv[x->cur].ep.port || strcmp(host, x->host[x->cur]) != 0)) {
			log_info("the sentinels name a new master for '%s' (was %s)", sh->s.master,
			         x->srv[x->cur].name);
			x->cur = -1;
		}
	}
	if (x->cur < 0) {
		int slot = 1 - x->last;
		int64_t cap = min64(cap_ms, clock_ms() + sentinel_budget_ms(&sh->s));
		x->srv[slot] = sh->data;
		first_load(x);
		int found = sentinel_discover(&sh->s, &x->srv[slot], x->host[slot], cap,
		                              store_looking_once(), &x->first, err, errlen);
		first_store(x);
		if (found < 0)
			return STORE_ERR;
		x->cur = x->last = slot;
		x->checked_ms = clock_ms();
		log_info("master '%s' is %s", sh->s.master, x->srv[slot].name);
	}
	*srv = &x->srv[x->cur];
	return STORE_OK;
}

/* A release: the master known may have lost a failover since the last check, a moment
 * ago (it still answers as one, and has the token the new master may not): ask. */
static void route_recheck(void *ctx)
{
	struct route *x = ctx;

	x->recheck = 1;
}

/* A waiter's watch: the sentinel asked first subscribed to +switch-master, which it
 * publishes when it names a new master (its re-check then names it too). A waiter
 * listening on the former master, which may answer as one for seconds yet, hears no
 * release of the new one. */
static int watch_one(const struct sentinel *s, const struct server *srv, struct client **c,
                     int64_t cap, char *err, size_t errlen)
{
	int denied = 0;

	const char *argv[] = {"SUBSCRIBE", "+switch-master"};
	size_t lens[] = {9, 14};
	struct resp_reply *r = NULL;
	char e[300];

	if (sentinel_open(s, srv, c, cap, err, errlen) != CLIENT_OK)
		return STORE_ERR;
	int64_t d = min64(clock_ms() + srv->io_timeout_ms, cap);
	if (client_send(*c, 2, argv, lens, d, e, sizeof e) < 0 ||
	    client_recv(*c, d, &r, e, sizeof e) != 1 || r->type != RESP_ARRAY) {
		if (r) {
			log_reason(e, sizeof e, "SUBSCRIBE +switch-master: %s",
			           r->type == RESP_ERROR ? r->str : "unexpected reply");
			/* the sentinel's ACL: asked again, it refuses again */
			denied = r->type == RESP_ERROR && strncmp(r->str, "NOPERM", 6) == 0;
		}
		log_reason(err, errlen, "sentinel %.100s: %s", srv->name, e);
		resp_free(r);
		client_close(*c);
		*c = NULL;
		return denied ? STORE_DENIED : STORE_ERR;
	}
	resp_free(r);
	return STORE_OK;
}

/* The sentinels in turn from the one asked first, within one sentinel's deadlines in
 * all (a waiter is not held up long); the one that subscribed is asked first from then
 * on, so that its re-check names the master it announced. STORE_DENIED when every
 * sentinel that answered refused the SUBSCRIBE (NOPERM) and all answered. */
static int route_watch(void *ctx, int64_t cap_ms, struct client **c, char *err, size_t errlen)
{
	struct route *x = ctx;
	const struct sentinel *s = &x->sh->s;
	int64_t cap =
	    min64(cap_ms, clock_ms() + s->sent[0].connect_timeout_ms + s->sent[0].io_timeout_ms);

	*c = NULL;
	snprintf(err, errlen, "no sentinel answered in time");
	first_load(x);
	int denied = 0, start = x->first;
	for (int k = 0; k < s->n && clock_ms() < cap; k++) {
		int i = (start + k) % s->n;
		int rc = watch_one(s, &s->sent[i], c, cap, err, errlen);
		if (rc == STORE_OK) {
			x->first = i;
			first_store(x);
			return STORE_OK;
		}
		denied += rc == STORE_DENIED;
		x->first = (i + 1) % s->n; /* as ask_once: not the first asked next time */
	}
	first_store(x);
	return denied == s->n ? STORE_DENIED : STORE_ERR;
}

/* +switch-master's message: "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT". */
static int route_watch_says(void *ctx, const struct resp_reply *r)
{
	struct route *x = ctx;
	const char *name = x->sh->s.master;
	size_t n = strlen(name);

	if (r->type != RESP_ARRAY || r->elements != 3 || r->element[0]->type != RESP_STRING ||
	    strcmp(r->element[0]->str, "message") != 0 || r->element[2]->type != RESP_STRING ||
	    strncmp(r->element[2]->str, name, n) != 0 || r->element[2]->str[n] != ' ')
		return 0;
	x->recheck = 1;
	return 1;
}

static int code_is(const char *text, const char *code)
{
	size_t n = strlen(code);

	return strncmp(text, code, n) == 0 && (text[n] == ' ' || text[n] == '\0');
}

static int route_redirect(void *ctx, const char *key, const struct server *srv, const char *errtext,
                          const struct server **ask)
{
	struct route *x = ctx;

	(void)key;
	(void)srv;
	(void)ask;
	/* A demoted master (READONLY), a replica that lost its master (MASTERDOWN) or
	 * one we cannot reach: ask the sentinels again. */
	if (!errtext || code_is(errtext, "READONLY") || code_is(errtext, "MASTERDOWN")) {
		x->cur = -1;
		return STORE_ROUTE_RETRY;
	}
	return STORE_ROUTE_FAIL;
}

/* --list: the one master. */
static const struct server *route_master(void *ctx, int i, int64_t cap_ms, char *err, size_t errlen)
{
	const struct server *srv = NULL;

	err[0] = '\0';
	if (i == 0 && route_locate(ctx, NULL, cap_ms, &srv, err, errlen) != STORE_OK)
		srv = NULL;
	return srv;
}

static const char *route_name(void *ctx)
{
	struct route *x = ctx;

	return x->cur < 0 ? x->sh->label : x->srv[x->cur].name;
}

static void route_resolve(void *arg, int64_t deadline_ms)
{
	struct sentinel *s = &((struct sentinel_route *)arg)->s;
	char err[300];

	for (int i = 0; i < s->n; i++)
		if (client_resolve(&s->sent[i], deadline_ms, err, sizeof err) != CLIENT_OK)
			log_debug("sentinel %s: %s", s->sent[i].name, err);
}

static const struct store_route sentinel_route = {
    .open = route_open,
    .close = route_close,
    .locate = route_locate,
    .redirect = route_redirect,
    .master = route_master,
    .name = route_name,
    .resolve = route_resolve,
    .recheck = route_recheck,
    .watch = route_watch,
    .watch_says = route_watch_says,
};

const struct sentinel *sentinel_of(const struct store_config *cfg)
{
	return cfg->route == &sentinel_route ? &((const struct sentinel_route *)cfg->route_arg)->s
	                                     : NULL;
}

void sentinel_ask_first(struct store_config *cfg, int i)
{
	if (sentinel_of(cfg))
		((struct sentinel_route *)cfg->route_arg)->first = i;
}

void sentinel_route_config(struct store_config *cfg, struct sentinel_route *r, int64_t recheck_ms)
{
	r->data = cfg->srv[0];
	r->recheck_ms = recheck_ms;
	r->first = 0;
	snprintf(r->label, sizeof r->label, "master '%s'", r->s.master);
	snprintf(cfg->srv[0].name, sizeof cfg->srv[0].name, "%s", r->label);
	cfg->route = &sentinel_route;
	cfg->route_arg = r;
}
