/* SPDX-License-Identifier: MIT */
#include "quorum.h"

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holder.h"
#include "log.h"
#include "store.h"

#define SKIP_MAX       4 /* owed replies after which a node's connection is replaced */
#define LIST_NAMES_MAX 100000

struct node {
	const struct server *srv;
	struct client *c;
	int skip;                 /* replies owed to requests a deadline left unanswered */
	int owes_grant;           /* among them an acquire that no give-back follows yet */
	int owes_leave;           /* a waiter's acquire went on it, and no leave since */
	int own;                  /* of skip: the last round's request's own, still owed */
	int full;                 /* this round's script went again as EVAL (NOSCRIPT) */
	unsigned bodies;          /* scripts sent whole on this connection (1 << script) */
	size_t queued;            /* bytes sent on it since it last owed nothing (-vv) */
	int waiting;              /* this round: a reply is awaited */
	int replaced;             /* this round: its connection dropped for owing (SKIP_MAX) */
	int opening;              /* this round: connecting (client_start) */
	int probing;              /* this round: probing a silent TLS handshake (conn_probe) */
	int denied;               /* the last connect was refused (AUTH) */
	int fault;                /* this round: its conn_fault() bits (conn.h) */
	int64_t retry_at;         /* no new connect before (the last one timed out) */
	const char *timed_out;    /* where that one timed out: "connect to", "TLS handshake with" */
	struct resp_reply *reply; /* this round's reply, or NULL (none) */
	char err[200];            /* why not */
	char id[41];              /* its server's run_id, as its last handshake said */
};

/* What the probes of silent TLS handshakes found (round_probe), for the whole process:
 * a waiter opens the store again for each attempt, and a renewal thread has a handle of
 * its own, yet each server is probed once until it has answered TLS. Per server: 0 not
 * probed, 1 probed and silent (paused?), 2 a plaintext Redis (with what was found). */
static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static struct probe_memo {
	const struct server *srv;
	int probed;
	char plain[sizeof((struct node *)0)->err];
} probe_memo[4 * STORE_NODES_MAX];

/* srv's memo (probed, and *plain when probed is 2: err's size). */
static int probe_get(const struct server *srv, char *plain)
{
	int probed = 0;

	pthread_mutex_lock(&probe_mu);
	for (size_t i = 0; i < sizeof probe_memo / sizeof probe_memo[0]; i++)
		if (probe_memo[i].srv == srv) {
			probed = probe_memo[i].probed;
			if (probed == 2 && plain)
				memcpy(plain, probe_memo[i].plain, sizeof probe_memo[i].plain);
			break;
		}
	pthread_mutex_unlock(&probe_mu);
	return probed;
}

/* Remember srv's probe (0: it answered TLS; forget). A full table forgets: a server is
 * then probed again, which costs time, never a wrong verdict. */
static void probe_set(const struct server *srv, int probed, const char *plain)
{
	struct probe_memo *free_one = NULL;

	pthread_mutex_lock(&probe_mu);
	for (size_t i = 0; i < sizeof probe_memo / sizeof probe_memo[0]; i++) {
		struct probe_memo *m = &probe_memo[i];
		if (m->srv == srv) {
			free_one = m;
			break;
		}
		if (!m->srv && !free_one)
			free_one = m;
	}
	if (free_one && (probed || free_one->srv == srv)) {
		free_one->srv = probed ? srv : NULL;
		free_one->probed = probed;
		snprintf(free_one->plain, sizeof free_one->plain, "%s", probed == 2 ? plain : "");
	}
	pthread_mutex_unlock(&probe_mu);
}

/* The servers that a handshake of this process reached once (any handle: a run's
 * release goes on its renewal's, which may never have reached a node that the acquire
 * did): such a node may hold what this process took. A full table forgets (a node not
 * named in a warning, never a wrong verdict). */
static const struct server *seen_memo[4 * STORE_NODES_MAX];

static void seen_set(const struct server *srv)
{
	pthread_mutex_lock(&probe_mu);
	for (size_t i = 0; i < sizeof seen_memo / sizeof seen_memo[0]; i++)
		if (seen_memo[i] == srv || !seen_memo[i]) {
			seen_memo[i] = srv;
			break;
		}
	pthread_mutex_unlock(&probe_mu);
}

static int seen_get(const struct server *srv)
{
	int seen = 0;

	pthread_mutex_lock(&probe_mu);
	for (size_t i = 0; i < sizeof seen_memo / sizeof seen_memo[0] && !seen; i++)
		seen = seen_memo[i] == srv;
	pthread_mutex_unlock(&probe_mu);
	return seen;
}

struct quorum {
	const struct store_config *cfg;
	int n, need;
	int any;          /* a node that answered lately */
	int busy;         /* a node the last acquire found held by another, or -1 */
	int dup_a, dup_b; /* the first two nodes found to be one server, or -1 */
	char dup_id[41];
	int alien;           /* the first node that is a Cluster node or a sentinel, or -1 */
	char alien_mode[16]; /* its redis_mode or server_mode */
	struct node node[STORE_NODES_MAX];
	/* The requests being built: large, so neither on the stack nor thread-local (every
	 * thread's TLS block, Redlock or not, would be ~100 KiB to zero at its start); a
	 * handle is used by one thread at a time (store.h). */
	struct lock_request acq, fence, renew, reacq, rel, hold;
	/* The leave of the waiter whose acquire went last (built with it; leave_ok when
	 * built): sent on a connection that owes its acquires before it is replaced
	 * (round_trip), as the waiter's give-up would have sent it. */
	struct lock_request leave;
	int leave_ok;
	char name[32]; /* "N Redlock nodes" */
};

/* One node's request in a round: a script, or a plain command. An acquire may take the
 * lock (grants), a release gives it back (gives): what a connection owes must not be
 * left behind on it (round_trip). */
struct req {
	const struct lock_request *script;
	int grants, gives;
	int marks;  /* a waiter's acquire: it may leave marks there (the writer mark, a
	             * --preempt request) that only its leave removes */
	int leaves; /* that leave (quorum_leave) */
	int argc;
	const char *argv[8];
	size_t lens[8];
};

int64_t store_drift_ms(int64_t ttl_ms)
{
	return ttl_ms / 100 + 2;
}

static int64_t drift_ms(const struct lock *l)
{
	return store_drift_ms(l->ask.ttl_ms);
}

static void node_drop(struct node *nd)
{
	client_close(nd->c);
	nd->c = NULL;
	nd->skip = nd->owes_grant = nd->owes_leave = nd->own = 0;
	nd->bodies = 0;
	nd->queued = 0;
}

static int node_send(struct node *nd, const struct req *rq, int64_t deadline)
{
	const char *argv[LOCK_ARGV_MAX];
	size_t lens[LOCK_ARGV_MAX];
	int argc = rq->argc;

	if (rq->script) {
		/* The script's text goes once per connection: an EVAL of it queued ahead
		 * (unanswered: a paused node) loads it before what follows runs. A NOSCRIPT
		 * read on the connection forgets them (node_read, node_late). */
		unsigned bit = 1u << rq->script->script;
		int full = nd->full && !(nd->bodies & bit);
		argc = lock_request_argv(rq->script, full, argv, lens);
		if (full)
			nd->bodies |= bit;
	} else {
		memcpy(argv, rq->argv, sizeof rq->argv);
		memcpy(lens, rq->lens, sizeof rq->lens);
	}
	size_t size = 0;
	for (int k = 0; k < argc; k++)
		size += lens[k] + 32; /* RESP's framing, at most */
	if (client_send(nd->c, argc, argv, lens, deadline, nd->err, sizeof nd->err) < 0) {
		node_drop(nd);
		return -1;
	}
	nd->queued += size;
	nd->waiting = 1;
	nd->owes_leave = (nd->owes_leave || rq->marks) && !rq->leaves;
	return 0;
}

/* Read what nd has without waiting: its reply, an owed one, or a NOSCRIPT to answer
 * with EVAL. */
static void node_read(struct quorum *q, int i, const struct req *rq, int64_t deadline)
{
	struct node *nd = &q->node[i];

	while (nd->waiting) {
		struct resp_reply *r = NULL;
		int got = client_recv(nd->c, 0, &r, nd->err, sizeof nd->err);
		if (got == 0) { /* nothing yet: not a reason ("timed out after 0 ms") */
			nd->err[0] = '\0';
			return;
		}
		if (got != 1) {
			nd->waiting = 0;
			node_drop(nd);
			return;
		}
		if (resp_is_error(r, "NOSCRIPT"))
			nd->bodies = 0; /* its scripts flushed (or never loaded) */
		if (nd->skip > 0) {
			nd->skip--;
			resp_free(r);
			continue;
		}
		nd->waiting = 0;
		if (rq->script && !nd->full && resp_is_error(r, "NOSCRIPT")) {
			resp_free(r);
			nd->full = 1;
			node_send(nd, rq, deadline);
			continue;
		}
		nd->reply = r;
		q->any = i;
	}
	if (nd->c && !nd->waiting && nd->skip == 0)
		nd->queued = 0;
}

/* Node i's handshake is done: its server said who it is. The same server as another
 * node's (however their URLs name it: an alias, an address, its Unix socket) would
 * vote twice: its connection is dropped, so it never counts (quorum_open then exits
 * 64). 0, or -1 dropped. */
static int node_ready(struct quorum *q, int i)
{
	struct node *nd = &q->node[i];

	snprintf(nd->id, sizeof nd->id, "%s", client_run_id(nd->c));
	/* A Cluster's nodes (or sentinels) given as several URLs are no independent
	 * masters: Redlock over a Cluster's masters is not what was asked for (issue 41).
	 * Dropped (it never votes); quorum_open then exits 64. */
	const char *mode = client_redis_mode(nd->c);
	if (strcmp(mode, "cluster") == 0 || strcmp(mode, "sentinel") == 0) {
		if (q->alien < 0) {
			q->alien = i;
			snprintf(q->alien_mode, sizeof q->alien_mode, "%s", mode);
		}
		snprintf(nd->err, sizeof nd->err, "%.80s is a %s", nd->srv->name,
		         mode[0] == 'c' ? "Redis Cluster node" : "sentinel");
		nd->id[0] = '\0';
		node_drop(nd);
		return -1;
	}
	for (int j = 0; j < q->n; j++) {
		if (j == i || strcmp(q->node[j].id, nd->id) != 0)
			continue;
		if (q->dup_a < 0) {
			q->dup_a = j < i ? j : i;
			q->dup_b = j < i ? i : j;
			snprintf(q->dup_id, sizeof q->dup_id, "%s", nd->id);
		}
		snprintf(nd->err, sizeof nd->err, "%.80s is the same server as %.80s",
		         nd->srv->name, q->node[j].srv->name);
		nd->id[0] = '\0';
		node_drop(nd);
		return -1;
	}
	seen_set(nd->srv);
	return 0;
}

/* Start connecting nd, unless its last connect timed out less than a node timeout ago
 * (so that k unreachable nodes cost one node timeout, not one per round: the rounds of
 * one acquisition follow each other closely). */
static void node_start(struct quorum *q, struct node *nd, int64_t now, int64_t deadline)
{
	if (now < nd->retry_at) {
		if (probe_get(nd->srv, nd->err) == 2) {
			conn_fault_note(CONN_FAULT_FINAL);
		} else {
			snprintf(nd->err, sizeof nd->err,
			         "%s %.120s: no answer within %lld ms (not tried again yet)",
			         nd->timed_out ? nd->timed_out : "connect to", nd->srv->name,
			         (long long)q->cfg->node_timeout_ms);
		}
		return;
	}
	int rc = client_start(&nd->c, nd->srv, deadline, nd->err, sizeof nd->err);
	nd->denied = rc == CLIENT_AUTH;
	nd->opening = rc == CLIENT_AGAIN;
	if (rc != CLIENT_OK && rc != CLIENT_AGAIN)
		nd->c = NULL;
	if (rc == CLIENT_OK) {
		probe_set(nd->srv, 0, NULL);
		node_ready(q, (int)(nd - q->node));
	}
}

static int has_request(const struct req *rq)
{
	return rq->script || rq->argc > 0;
}

/* Go on connecting node i; once ready, send its request. */
static void node_continue(struct quorum *q, int i, const struct req *rq, int64_t deadline)
{
	struct node *nd = &q->node[i];
	int rc = client_continue(nd->c, nd->err, sizeof nd->err);

	if (rc == CLIENT_AGAIN)
		return;
	nd->opening = 0;
	nd->denied = rc == CLIENT_AUTH;
	if (nd->probing) { /* the probe's verdict: the error is final, or may pass */
		nd->probing = 0;
		probe_set(nd->srv, client_plaintext(nd->c) ? 2 : 1, nd->err);
		nd->retry_at = clock_ms() + q->cfg->node_timeout_ms;
	} else if (rc == CLIENT_OK) {
		probe_set(nd->srv, 0, NULL); /* it answered TLS (or speaks no TLS) */
	}
	if (rc != CLIENT_OK)
		node_drop(nd);
	else if (node_ready(q, i) == 0 && has_request(rq))
		node_send(nd, rq, deadline);
}

/* What a node's calls note (conn_fault_note) is its own too, so that a round can tell
 * whose failures time cannot fix (final_nodes): conn_fault_push() before, fault_end
 * after. */
static void fault_end(struct node *nd, int saved)
{
	nd->fault |= conn_fault_pop(saved, 1);
}

/* Poll the round's nodes until deadline: those waiting for a reply and those opening
 * (probes: only those probing a silent handshake). */
static void round_poll(struct quorum *q, const struct req *const *rq, int64_t deadline, int probes)
{
	for (;;) {
		struct pollfd p[STORE_NODES_MAX];
		int idx[STORE_NODES_MAX], np = 0, ready = 0;
		int64_t wake = deadline; /* or earlier: a connect's next address is due */
		for (int i = 0; i < q->n; i++) {
			struct node *nd = &q->node[i];
			if (probes ? !nd->probing : !nd->waiting && !nd->opening)
				continue;
			if (nd->waiting && client_buffered(nd->c))
				ready = 1;
			if (nd->opening && client_wake_ms(nd->c) < wake)
				wake = client_wake_ms(nd->c);
			p[np].fd = client_fd(nd->c);
			p[np].events = nd->opening ? client_events(nd->c) : POLLIN;
			p[np].revents = 0;
			idx[np++] = i;
		}
		int64_t left = deadline - clock_ms(), nap = wake - clock_ms();
		if (np == 0 || left <= 0 || conn_abort_pending())
			break;
		int rc = poll(p, (nfds_t)np, ready ? 0 : nap < 0 ? 0 : (int)nap);
		if (rc < 0)
			continue; /* EINTR; the deadline still holds */
		for (int k = 0; k < np; k++) {
			struct node *nd = &q->node[idx[k]];
			if (!ready && !p[k].revents &&
			    !(nd->opening && clock_ms() >= client_wake_ms(nd->c)))
				continue;
			int saved = conn_fault_push();
			if (q->node[idx[k]].opening)
				node_continue(q, idx[k], rq[idx[k]], deadline);
			else
				node_read(q, idx[k], rq[idx[k]], deadline);
			fault_end(nd, saved);
		}
	}
}

/* The round's deadline passed with nodes still in a TLS handshake that heard nothing,
 * and too few answers for a quorum: a plaintext Redis behind a rediss:// URL is a fault
 * that time cannot fix, which silence cannot tell from a paused TLS server (conn.h).
 * Each such node is probed, all at once, for at most CONN_PROBE_MS (and the node
 * timeout), and only once until it has answered TLS again: a paused TLS node costs a
 * round that fails anyway one probe, never every round; a round with a quorum none. */
static void round_probe(struct quorum *q, const struct req *const *rq, int64_t cap_ms)
{
	int answered = 0, started = 0;
	int64_t span =
	    q->cfg->node_timeout_ms < CONN_PROBE_MS ? q->cfg->node_timeout_ms : CONN_PROBE_MS;
	int64_t end = clock_ms() + span;

	for (int i = 0; i < q->n; i++) {
		const struct node *nd = &q->node[i];
		answered +=
		    rq[i] && (has_request(rq[i]) ? nd->reply != NULL : nd->c && !nd->opening);
	}
	if (answered >= q->need || end > cap_ms)
		return;
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		if (nd->opening && !probe_get(nd->srv, NULL) && client_probe(nd->c)) {
			nd->probing = started = 1;
			log_debug("%s: its TLS handshake heard nothing: probing for a plaintext "
			          "Redis (once, until it answers TLS)",
			          nd->srv->name);
		}
	}
	if (started)
		round_poll(q, rq, end, 1);
}

/* nd's connection owes too many replies (a paused node) and is about to be dropped, so
 * that the next round connects afresh. The waiter's acquires it carried may leave marks
 * there when the node wakes (the writer mark, a --preempt request), which the waiter's
 * leave removes; the give-up's leave would find no connection to go on (a paused node
 * answers no handshake), and the node, resumed, would keep them for their lease, the
 * waiter long gone. So the leave is written on it first, whole (EVAL: its NOSCRIPT
 * could not be answered), behind them: the node runs what was written before the close.
 * Before the release sent again whole (round_trip, 32 KiB): a resumed Redis runs what a
 * closed connection left only until its replies meet the closed socket (128 KiB ran,
 * 256 KiB did not, on Redis 7.0; less under load), so the fewer bytes ahead of the
 * leave the better. The waiter's next acquire there, on a fresh connection, marks
 * again. */
static void leave_first(struct quorum *q, struct node *nd)
{
	if (nd->owes_leave && q->leave_ok) {
		struct req lv = {.script = &q->leave, .leaves = 1};
		int full = nd->full;
		nd->full = 1;
		int rc = node_send(nd, &lv, clock_ms() + q->cfg->node_timeout_ms);
		nd->waiting = 0;
		nd->full = full;
		log_debug("%s owes %d replies: its connection is replaced, the waiter's leave "
		          "written on it first%s, %zu bytes queued",
		          nd->srv->name, nd->skip, rc == 0 ? "" : " (not written)", nd->queued);
	}
}

/* Send rq[i] to every node i that has one, connecting those without a connection, and
 * collect the replies in one poll loop until the round's deadline: node_timeout after
 * it started (and cap_ms). Connects, TLS handshakes and AUTH run in the same loop, so
 * the round never lasts longer than its deadline, however many nodes are unreachable
 * (but for round_probe's probes of silent handshakes). A request without a command
 * (argc 0) only connects. Afterwards node[i].reply is the reply or NULL, and node[i].c
 * is set when i is connected. */
static void round_trip(struct quorum *q, const struct req *const *rq, int64_t cap_ms)
{
	int64_t now = clock_ms(), deadline = now + q->cfg->node_timeout_ms;

	if (deadline > cap_ms)
		deadline = cap_ms;
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		resp_free(nd->reply);
		nd->reply = NULL;
		nd->full = nd->waiting = nd->opening = nd->probing = nd->own = nd->replaced = 0;
		nd->err[0] = '\0';
		nd->fault = 0;
		if (!rq[i])
			continue;
		int saved = conn_fault_push();
		if (!nd->c)
			node_start(q, nd, now, deadline);
		if (nd->c && !nd->opening && has_request(rq[i]))
			node_send(nd, rq[i], deadline);
		fault_end(nd, saved);
	}
	round_poll(q, rq, deadline, 0);
	round_probe(q, rq, cap_ms);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		if (nd->opening) {
			if (probe_get(nd->srv, nd->err) == 2) { /* found earlier: plaintext */
				conn_fault_note(CONN_FAULT_FINAL);
			} else {
				/* past TCP, a TLS handshake: say so, as one server's line does */
				nd->timed_out = client_in_tls_handshake(nd->c)
				                    ? "TLS handshake with"
				                    : "connect to";
				snprintf(nd->err, sizeof nd->err,
				         "%s %.120s: no answer within %lld ms", nd->timed_out,
				         nd->srv->name, (long long)q->cfg->node_timeout_ms);
				conn_fault_note(CONN_FAULT_PASSING); /* paused, overloaded */
				nd->fault |= CONN_FAULT_PASSING;
			}
			if (nd->probing) /* the probe heard nothing either: a paused server */
				probe_set(nd->srv, 1, NULL);
			nd->opening = nd->probing = 0;
			node_drop(nd);
			nd->retry_at = clock_ms() + q->cfg->node_timeout_ms;
			continue;
		}
		/* A give-back sent on this connection runs after what it owes. */
		if (rq[i] && rq[i]->gives && nd->c)
			nd->owes_grant = 0;
		if (!nd->waiting)
			continue;
		/* Sent but not answered: its reply is owed; a later request on this
		 * connection runs after it on the server (a release after an acquire). */
		nd->waiting = 0;
		nd->own = 1;
		snprintf(nd->err, sizeof nd->err, "%.150s did not answer within %lld ms",
		         nd->srv->name, (long long)q->cfg->node_timeout_ms);
		conn_fault_note(CONN_FAULT_PASSING);
		nd->fault |= CONN_FAULT_PASSING;
		/* An acquire unanswered (a paused node: it runs when the node wakes) is
		 * given back on this same connection, never on a fresh one (a paused node
		 * does not answer its handshake: never sent; or it runs first), or the
		 * node, resumed, runs the acquire and keeps its grant for the ttl. So the
		 * connection is replaced only once no acquire it owes lacks a give-back
		 * behind it (one follows every acquire: a failed attempt's, the hold's). */
		nd->owes_grant = nd->owes_grant || rq[i]->grants;
		/* A give-back sent by its SHA and not answered (a slow or paused node):
		 * its reply, when it comes, is owed, and a NOSCRIPT then (the node's
		 * scripts flushed meanwhile: SCRIPT FLUSH, a restart of its cache) could
		 * not be answered with EVAL, and the node would keep the lock for its ttl.
		 * So it goes again, whole (EVAL), right behind: if the first ran, the
		 * second answers as it did (release.lua: a release sent again). Once per
		 * connection: behind a give-back whole already queued on it, the SHA finds
		 * the script that one loads (node_send), and repeated give-backs must not
		 * pile up 35 KiB each ahead of what follows: a node stopped and resumed runs
		 * only the first 128-160 KiB a closed connection had queued (Redis 7.0). */
		int again = rq[i]->gives && rq[i]->script && !nd->full &&
		            !(nd->bodies & (1u << rq[i]->script->script));
		if (nd->skip + 1 + again > SKIP_MAX && !nd->owes_grant)
			leave_first(q, nd); /* the connection is replaced below */
		if (again && nd->c) {
			nd->full = 1;
			if (node_send(nd, rq[i], clock_ms() + q->cfg->node_timeout_ms) == 0) {
				nd->waiting = 0;
				nd->skip++;
				nd->own++;
			}
		}
		if (nd->c && ++nd->skip > SKIP_MAX && !nd->owes_grant) {
			log_debug("%s owes %d replies to %zu bytes queued: its connection is "
			          "replaced",
			          nd->srv->name, nd->skip, nd->queued);
			node_drop(nd);
			nd->replaced = 1;
		}
	}
}

/* Read what nd has of the replies its last round (rq) left owed, without waiting: the
 * older ones are skipped; the first of its own that is no NOSCRIPT (its EVAL, sent again
 * right behind, follows) becomes its reply. A NOSCRIPT to the last of them (the script
 * not loaded there yet) is answered with the script whole, as node_read does. */
static void node_late(struct node *nd, const struct req *rq, int64_t deadline)
{
	char why[sizeof nd->err];

	while (nd->own > 0 && !nd->reply) {
		struct resp_reply *r = NULL;
		int got = client_recv(nd->c, 0, &r, why, sizeof why);
		if (got == 0)
			return;
		if (got != 1) {
			log_reason(nd->err, sizeof nd->err, "%s", why);
			node_drop(nd);
			return;
		}
		if (resp_is_error(r, "NOSCRIPT"))
			nd->bodies = 0; /* its scripts flushed (or never loaded) */
		int older = nd->skip-- > nd->own;
		if (older || (--nd->own > 0 && resp_is_error(r, "NOSCRIPT"))) {
			resp_free(r);
			continue;
		}
		if (rq->script && !nd->full && resp_is_error(r, "NOSCRIPT")) {
			resp_free(r);
			nd->full = 1;
			if (node_send(nd, rq, deadline) == 0) {
				nd->waiting = 0;
				nd->skip++;
				nd->own++;
			}
			continue;
		}
		nd->reply = r;
		nd->err[0] = '\0';
	}
	if (nd->c && nd->skip == 0)
		nd->queued = 0;
}

/* The nodes that did not answer the last round in time and still owe its reply: their
 * replies waited for until deadline. A node paused for writes (CLIENT PAUSE WRITE) holds
 * a script back and drops it with the connection, and a SIGSTOPped one runs it only when
 * resumed: a release must not be given up on them after one node timeout. */
static void round_late(struct quorum *q, const struct req *rq, int64_t since, int64_t deadline)
{
	for (;;) {
		struct pollfd p[STORE_NODES_MAX];
		int idx[STORE_NODES_MAX], np = 0, ready = 0;
		for (int i = 0; i < q->n; i++) {
			struct node *nd = &q->node[i];
			if (!nd->c || nd->own == 0 || nd->reply)
				continue;
			ready |= client_buffered(nd->c);
			p[np].fd = client_fd(nd->c);
			p[np].events = POLLIN;
			p[np].revents = 0;
			idx[np++] = i;
		}
		int64_t left = deadline - clock_ms();
		if (np == 0 || left <= 0 || conn_abort_pending())
			break;
		if (poll(p, (nfds_t)np, ready ? 0 : (int)left) < 0)
			continue; /* EINTR; the deadline still holds */
		for (int k = 0; k < np; k++)
			if (ready || p[k].revents)
				node_late(&q->node[idx[k]], rq, deadline);
	}
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		if (nd->c && nd->own > 0 && !nd->reply)
			snprintf(nd->err, sizeof nd->err, "%.150s did not answer within %lld ms",
			         nd->srv->name, (long long)(clock_ms() - since));
	}
}

/* The same request to every node. */
static void round_all(struct quorum *q, const struct req *one, int64_t cap_ms)
{
	const struct req *rq[STORE_NODES_MAX];

	for (int i = 0; i < q->n; i++)
		rq[i] = one;
	round_trip(q, rq, cap_ms);
}

/* round_all for a request safe to repeat (its token makes it so: a renewal, a
 * release): a node whose connection, open before the round, was found closed (it sat
 * idle: the server's `timeout`, a NAT, a restart) gets it once more on a fresh one, as
 * on one server (routed.c: RUN_RETRY). The other nodes keep their replies and reasons.
 * A connection the round itself replaced (it owed SKIP_MAX replies: a node paused or
 * stopped) was not found closed: with `replaced` 0 (a renewal, which needs only a
 * quorum's answers) such a node is not retried, as the retry would wait on it for a
 * second node timeout, past the lease's renewal window (-t 600ms, --node-timeout 200ms,
 * one node paused: lost); a release's (1) is, as it may have been dropped with the
 * connection (CLIENT PAUSE WRITE). */
static void round_all_again(struct quorum *q, const struct req *one, int64_t cap_ms, int replaced)
{
	const struct req *again[STORE_NODES_MAX] = {0};
	struct resp_reply *kept[STORE_NODES_MAX] = {0};
	char why[STORE_NODES_MAX][sizeof q->node[0].err];
	int had[STORE_NODES_MAX], fault[STORE_NODES_MAX], retry = 0;

	for (int i = 0; i < q->n; i++)
		had[i] = q->node[i].c != NULL && !q->node[i].opening;
	round_all(q, one, cap_ms);
	for (int i = 0; i < q->n; i++) {
		const struct node *nd = &q->node[i];
		if (!nd->reply && had[i] && !nd->c && (replaced || !nd->replaced)) {
			again[i] = one;
			retry = 1;
		}
	}
	if (!retry || conn_abort_pending() || clock_ms() >= cap_ms)
		return;
	log_debug("retrying on fresh connections where one was closed");
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		kept[i] = nd->reply; /* round_trip clears every node's */
		nd->reply = NULL;
		memcpy(why[i], nd->err, sizeof why[i]);
		fault[i] = nd->fault;
	}
	round_trip(q, again, cap_ms);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		if (again[i])
			continue;
		nd->reply = kept[i];
		memcpy(nd->err, why[i], sizeof nd->err);
		nd->fault = fault[i];
	}
}

/* Did node i answer this round with an error (NOPERM, OOM, READONLY, ...), or refuse its
 * last login (AUTH)? It answered, and said no: not a node that "did not answer". */
static int node_refused(const struct quorum *q, int i)
{
	const struct node *nd = &q->node[i];

	return nd->denied || (nd->reply && nd->reply->type == RESP_ERROR);
}

static int refused_count(const struct quorum *q)
{
	int n = 0;

	for (int i = 0; i < q->n; i++)
		n += node_refused(q, i);
	return n;
}

/* Node i's reason, naming it (a server's error reply, decoded, says what it refused,
 * not which node did; a connection's reason names it already) into buf. */
static const char *node_why(const struct quorum *q, int i, char *buf, size_t n)
{
	const struct node *nd = &q->node[i];

	if (!nd->err[0] || strstr(nd->err, nd->srv->name))
		return nd->err;
	snprintf(buf, n, "%s: %s", nd->srv->name, nd->err);
	return buf;
}

/* err: "no quorum: k of N nodes ... (, r refused)" plus the first node's reason,
 * naming it. */
static void no_quorum(const struct quorum *q, int ok, const char *what, char *err, size_t errlen)
{
	const char *why = "";
	char buf[sizeof q->node[0].err + 160], refused[40] = "";

	for (int i = 0; i < q->n && !*why; i++)
		why = node_why(q, i, buf, sizeof buf);
	int r = refused_count(q);
	if (r > 0)
		snprintf(refused, sizeof refused, ", %d refused", r);
	log_reason(err, errlen, "no Redlock quorum: %d of %d nodes %s%s (%d needed)%s%s", ok, q->n,
	           what, refused, q->need, *why ? "; " : "", why);
}

/* A round without a quorum: can time fix it? Not when the nodes whose failure time
 * cannot fix (refused AUTH, a certificate that does not verify, not Redis: the
 * final faults; this host short of descriptors or memory to reach them: the local
 * ones, as with one server) leave fewer than a quorum; else the quorum can do without them and
 * the others may come (down, paused, restarting): the round's fault is passing, so
 * that -w waits (conn.h). 1 when final. */
static int no_quorum_final(const struct quorum *q)
{
	int final = 0;

	for (int i = 0; i < q->n; i++)
		final +=
		    q->node[i].denied || (q->node[i].fault & (CONN_FAULT_FINAL | CONN_FAULT_LOCAL));
	if (q->n - final < q->need)
		return 1;
	conn_fault_clear();
	conn_fault_note(CONN_FAULT_PASSING);
	return 0;
}

static void quorum_close(void *ctx)
{
	struct quorum *q = ctx;

	if (!q)
		return;
	for (int i = 0; i < q->n; i++) {
		const struct node *nd = &q->node[i];
		if (nd->c && nd->skip > 0)
			log_debug("%s owes %d replies to %zu bytes queued: its connection is "
			          "closed",
			          nd->srv->name, nd->skip, nd->queued);
		resp_free(nd->reply);
		client_close(nd->c);
	}
	free(q);
}

static int quorum_open(void **out, const struct store_config *cfg, int connect, int64_t cap_ms,
                       char *err, size_t errlen)
{
	struct quorum *q = calloc(1, sizeof *q);

	*out = NULL;
	if (!q) {
		snprintf(err, errlen, "out of memory");
		return STORE_ERR;
	}
	q->cfg = cfg;
	q->n = cfg->n;
	snprintf(q->name, sizeof q->name, "%d Redlock nodes", q->n);
	q->need = cfg->n / 2 + 1;
	q->dup_a = q->dup_b = q->alien = q->busy = -1;
	for (int i = 0; i < q->n; i++)
		q->node[i].srv = &cfg->srv[i];
	if (connect) {
		/* Every node at once, within one node timeout (each says who it is). */
		struct req none = {0};
		int ok = 0, denied = 0;
		round_all(q, &none, cap_ms);
		for (int i = 0; i < q->n; i++) {
			ok += q->node[i].c != NULL;
			denied += q->node[i].denied;
		}
		if (q->alien >= 0) {
			if (q->alien_mode[0] == 'c')
				snprintf(
				    err, errlen,
				    "%.150s is a Redis Cluster node (its INFO says cluster mode): "
				    "several "
				    "URLs are Redlock nodes, independent masters; for a Cluster "
				    "give one node's URL (rlock finds the others)",
				    q->node[q->alien].srv->name);
			else
				snprintf(err, errlen,
				         "%.150s is a sentinel (its INFO says sentinel mode): "
				         "several URLs are "
				         "Redlock nodes, independent masters; for Sentinel give "
				         "redis-sentinel://HOST:PORT,HOST:PORT/MASTER",
				         q->node[q->alien].srv->name);
			quorum_close(q);
			return STORE_USAGE;
		}
		for (int i = 0; i < q->n; i++)
			if (q->node[i].fault & CONN_FAULT_CONFIG) {
				/* its URL cannot be for it (/2 on a Cluster node): 64, as one
				 * server's, not a node that is down */
				log_reason(err, errlen, "%s", q->node[i].err);
				quorum_close(q);
				return STORE_USAGE;
			}
		if (q->dup_a >= 0) {
			snprintf(
			    err, errlen,
			    "Redlock nodes must be distinct servers: %.150s and %.150s are the "
			    "same server (run_id %.12s...)",
			    q->node[q->dup_a].srv->name, q->node[q->dup_b].srv->name, q->dup_id);
			quorum_close(q);
			return STORE_USAGE;
		}
		if (ok < q->need) {
			int final = no_quorum_final(q);
			/* a refused login reached its node: not "unreachable" */
			no_quorum(q, ok, denied ? "let us in" : "reachable", err, errlen);
			quorum_close(q);
			return denied && final ? STORE_DENIED : STORE_ERR;
		}
	}
	*out = q;
	return STORE_OK;
}

static const char *quorum_name(void *ctx)
{
	struct quorum *q = ctx;

	return q->name;
}

/* store_connected: a quorum of nodes have a connection that served a call. A round that
 * fails on them may have met connections that sat idle and that the servers (their
 * `timeout`) or a NAT closed: that round dropped them, and the waiter's one retry at
 * once (wait.c) connects afresh, rather than an outage whose backoff outlasts the
 * servers' timeout every time. */
static int quorum_connected(const void *ctx)
{
	const struct quorum *q = ctx;
	int n = 0;

	for (int i = 0; i < q->n; i++)
		n += q->node[i].c != NULL && !q->node[i].opening;
	return n >= q->need;
}

/* A node publishes the release of a lock it has: the first one that answers will do,
 * starting with one that the last acquire found held (the holder's release is heard
 * there), else one that answered lately. Not a node that granted this waiter's split
 * vote: the holder's release is not published there, and this waiter's own give-back
 * is (a wake-up for nothing, at once, for as long as the holder holds). */
static const struct server *quorum_listen_at(void *ctx, int k, int64_t *wait_ms)
{
	struct quorum *q = ctx;

	*wait_ms = q->cfg->node_timeout_ms;
	return k < q->n ? q->node[((q->busy >= 0 ? q->busy : q->any) + k) % q->n].srv : NULL;
}

/* Give back on every node (after a failed attempt): best effort within one round. The
 * grants were no run: each node takes its acquired record back (--history). */
static void release_all(struct quorum *q, const struct lock *l)
{
	struct lock_request rl;
	struct req rq = {.script = &rl, .gives = 1};
	struct lock a = *l;
	char err[200];

	a.attempt_declared = 1;
	if (lock_request_release(&rl, &a, 0, err, sizeof err) == 0)
		round_all(q, &rq, STORE_NO_CAP);
}

/* The nodes' answers to one acquire round. */
struct tally {
	int ok, busy, denied, mismatch;
	int superseded;                /* --supersede: nodes where a newer request took the place */
	struct holder newer;           /* the newer request, as the first of them says */
	long long fence;               /* the largest fence of the nodes that granted */
	long long nf[STORE_NODES_MAX]; /* each granting node's own count */
	const struct req *fq[STORE_NODES_MAX]; /* the nodes that granted: the fence round */
	/* the first busy node closed by a lock-delay (or kept for a --preempt request): the
	 * longest such a busy node said it stays so, -1 when none said */
	long long nobody_ms;
};

/* Which --preempt request a busy reply says the name is kept for (its host, pid and
 * label: the reply has no token), as a number to count the nodes that agree. */
static unsigned long long request_of(const struct holder *h)
{
	unsigned long long x = 14695981039346656037ULL ^ (unsigned long long)h->pid;

	for (const char *s = h->host; *s; s++)
		x = (x ^ (unsigned char)*s) * 1099511628211ULL;
	x = (x ^ 0xff) * 1099511628211ULL;
	for (const char *s = h->label; *s; s++)
		x = (x ^ (unsigned char)*s) * 1099511628211ULL;
	return x;
}

/* One more node names nh's request (or holder): counted among the n seen so far; 1
 * when it now has more nodes than any before it had (*most), so that it is named. */
static int vote(const struct holder *nh, unsigned long long *seen, int *n, int *most)
{
	unsigned long long k = request_of(nh);
	int votes = 1;

	for (int j = 0; j < *n; j++)
		votes += seen[j] == k;
	seen[(*n)++] = k;
	int leads = votes > *most && *most > 0;
	if (votes > *most)
		*most = votes;
	return leads;
}

/* A node that the renewal locked again (restarted empty, its key lost: quorum_renew)
 * holds the token with no owner fields (no host, no pid: they are the majority's) and a
 * fence of its own count, which the holder never got: its record names nobody. Where
 * nodes agree on a token, what they show comes from a node whose record has them. */
static int relocked(const struct holder *h)
{
	return h->held && h->has_fence && !h->host[0] && h->pid <= 0;
}

/* A busy reply that names its holder (host, pid: a relock's record names nobody). */
static int owner_named(const struct holder *h)
{
	return h->held && !holder_nobody(h) && !relocked(h) && h->host[0];
}

/* The busy nodes named holders (who[i], by key[i]; named[i] set) and none of them holds
 * a majority, several some: h->split names them all, each with its nodes' count, so that
 * no line names one of them as the holder (--status says the same, by tokens). */
static void split_holders(const struct quorum *q, const int *named, const unsigned long long *key,
                          char (*who)[300], struct holder *h)
{
	int first[STORE_NODES_MAX], count[STORE_NODES_MAX], m = 0, nodes = 0, most = 0;

	for (int i = 0; i < q->n; i++) {
		if (!named[i])
			continue;
		int k = 0;
		while (k < m && key[first[k]] != key[i])
			k++;
		if (k == m) {
			first[m] = i;
			count[m++] = 0;
		}
		most = ++count[k] > most ? count[k] : most;
		nodes++;
	}
	if (m < 2 || most >= q->need)
		return;
	int used = snprintf(
	    h->split, sizeof h->split,
	    "held on %d of %d Redlock nodes by %d holders, none on a majority: ", nodes, q->n, m);
	for (int k = 0; k < m && used > 0 && (size_t)used < sizeof h->split; k++) {
		int w = snprintf(h->split + used, sizeof h->split - (size_t)used, "%s%s on %d",
		                 k ? ", " : "", who[first[k]], count[k]);
		used = w < 0 ? used : used + w;
	}
}

static void tally_acquire(struct quorum *q, struct lock *l, const struct req *fr, struct holder *h,
                          struct tally *t)
{
	unsigned long long kept_for[STORE_NODES_MAX], held_by[STORE_NODES_MAX];
	int kept = 0, most = 0, named = 0, most_named = 0;
	int named_at[STORE_NODES_MAX] = {0};
	unsigned long long key_at[STORE_NODES_MAX];
	char who_at[STORE_NODES_MAX][300];

	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		struct holder nh;
		if (!nd->reply) {
			t->denied += nd->denied;
			continue;
		}
		int rc = lock_decode_acquire(nd->reply, l, &nh, nd->err, sizeof nd->err);
		if (rc == LOCK_OK) {
			t->ok++;
			t->fence = t->ok == 1 || l->fence > t->fence ? l->fence : t->fence;
			t->nf[i] = l->fence;
			t->fq[i] = fr;
		} else if (rc == LOCK_BUSY) {
			if (!t->busy++) {
				*h = nh;
				q->busy = i;
				t->nobody_ms = -1;
			} else if (relocked(h) && nh.has_fence && nh.host[0]) {
				*h = nh; /* a holder named (a busy reply names no token) */
				q->busy = i;
			}
			if (((h->delayed && nh.delayed) || (h->reserved && nh.reserved)) &&
			    nh.pttl_ms > t->nobody_ms)
				t->nobody_ms = nh.pttl_ms;
			/* reservations of requests that crossed: the one that most of the busy
			 * nodes keep is named (as --status names the majority's), not the first
			 * node's */
			if (h->reserved && nh.reserved && vote(&nh, kept_for, &kept, &most)) {
				*h = nh;
				q->busy = i;
			}
			/* holders that differ (a stale one left on a node by a split, a
			 * relock elsewhere): the one that most of the busy nodes name, as
			 * --status names the majority's token, not the first node's */
			if (owner_named(h) && owner_named(&nh) &&
			    vote(&nh, held_by, &named, &most_named)) {
				*h = nh;
				q->busy = i;
			}
			if (owner_named(&nh)) {
				named_at[i] = 1;
				key_at[i] = request_of(&nh);
				holder_format(&nh, HOLDER_LABEL | HOLDER_RAW, who_at[i],
				              sizeof who_at[i]);
			}
		} else if (rc == LOCK_SUPERSEDED) {
			if (!t->superseded++)
				t->newer = nh;
		} else {
			t->denied += rc == LOCK_DENIED;
			t->mismatch += rc == LOCK_MISMATCH;
			if (rc == LOCK_DENIED) /* NOPERM: its own, for good (no_quorum_final) */
				nd->fault |= CONN_FAULT_FINAL;
		}
	}
	if (t->busy && owner_named(h))
		split_holders(q, named_at, key_at, who_at, h);
}

/* A majority granted. Fencing: every node counted its own INCR; the largest of this
 * majority, merged back (SET if larger) into a majority, is seen by any later majority,
 * whose INCR then counts past it: strictly increasing across shifting majorities.
 * The invariant the merge relies on, a majority holds the largest fence handed out,
 * must hold after every acquisition, not only when this one needed the merge: a node
 * left behind (restarted empty, or slow for one round) that a majority outvoted
 * would otherwise stay behind, and once a node of that majority is restarted empty
 * too, a later majority of the two counts from far below (issue 41: fence 6, then
 * 2). So every granting node below the largest count gets the fence round, whether
 * or not the others are a majority already; the grant counts when a majority holds a
 * counter >= the fence. A node whose own count is the largest holds it already
 * (counters only rise): when every granting node counted it, no round is sent (the
 * common case: nodes that every acquisition reaches count in step). LOCK_OK
 * (l->fence, *sent_ms set), or LOCK_ERR with the reason in why. */
static int merge_fence(struct quorum *q, struct lock *l, struct tally *t, int64_t t0,
                       int64_t *sent_ms, char *why, size_t whylen)
{
	struct lock_request *rf = &q->fence;
	int merged = 0, behind = 0;

	for (int i = 0; i < q->n; i++) {
		if (t->fq[i] && t->nf[i] == t->fence) {
			t->fq[i] = NULL;
			merged++;
		}
		behind += t->fq[i] != NULL;
	}
	if (behind > 0 && lock_request_fence(rf, l, t->fence, why, whylen) == 0) {
		round_trip(q, t->fq, STORE_NO_CAP);
		for (int i = 0; i < q->n; i++) {
			long long v = 0;
			if (t->fq[i] && q->node[i].reply &&
			    lock_decode_fence(q->node[i].reply, &v, q->node[i].err,
			                      sizeof q->node[i].err) == LOCK_OK &&
			    v >= t->fence)
				merged++;
		}
	}
	int64_t elapsed = clock_ms() - t0;
	if (merged >= q->need && elapsed < l->ask.ttl_ms - drift_ms(l)) {
		l->fence = t->fence;
		*sent_ms = t0 - drift_ms(l);
		log_debug("Redlock: %d of %d nodes, fence %lld, %lld ms", t->ok, q->n, t->fence,
		          (long long)elapsed);
		return LOCK_OK;
	}
	if (why[0])
		;
	else if (merged < q->need)
		no_quorum(q, merged, "took the fence", why, whylen);
	else
		snprintf(why, whylen,
		         "Redlock: the quorum took %lld ms, too long for a %lld ms lease",
		         (long long)elapsed, (long long)l->ask.ttl_ms);
	return LOCK_ERR;
}

/* No lock (what was taken is given back already): why not, from the tally. */
static int refusal(struct quorum *q, const struct tally *t, struct holder *h, char *err,
                   size_t errlen)
{
	/* A newer --supersede request took this one's place (on one node is enough: it is
	 * newer wherever it got to). */
	if (t->superseded) {
		*h = t->newer;
		return LOCK_SUPERSEDED;
	}
	if (t->mismatch && t->ok + t->busy < q->need) {
		for (int i = 0; i < q->n; i++)
			if (q->node[i].err[0])
				log_reason(err, errlen, "%s", q->node[i].err);
		return LOCK_MISMATCH;
	}
	if (t->denied && t->ok + t->busy < q->need && no_quorum_final(q)) {
		no_quorum(q, t->ok + t->busy, "let us in", err, errlen);
		return LOCK_DENIED;
	}
	/* Enough nodes answered for a majority, but others hold (some of) them: busy, as
	 * on one server (waiters retry after a jittered delay). Else no quorum: 69. */
	if (t->busy > 0 && t->ok + t->busy >= q->need) {
		h->split_vote = t->ok > 0;
		if (t->ok > 0) {
			/* a split vote: no expiry to wait for; a node closed by a lock-delay
			 * (kept for a --preempt request): the longest a busy node said so */
			h->pttl_ms = h->delayed || h->reserved ? t->nobody_ms : -1;
			log_debug("Redlock: split vote: %d of %d nodes granted, %d %s; given back",
			          t->ok, q->n, t->busy,
			          h->delayed    ? "held or closed by a lock-delay"
			          : h->reserved ? "held or kept for a --preempt request"
			                        : "held by another token");
		}
		return LOCK_BUSY;
	}
	no_quorum(q, t->ok + t->busy, "answered", err, errlen);
	return LOCK_ERR;
}

/* The nodes that did not grant, and why (read before the fence round clears their
 * reasons): "" when every node granted. A quorum with nodes missing holds with less
 * redundancy than asked for, which the caller says in one line (not under -q). */
static void missing_nodes(const struct quorum *q, const struct tally *t, char *buf, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; i < q->n && used + 1 < n; i++) {
		if (t->fq[i])
			continue;
		int w =
		    snprintf(buf + used, n - used, "%s%s (%s)", used ? ", " : "",
		             q->cfg->srv[i].name, q->node[i].err[0] ? q->node[i].err : "no grant");
		used = w < 0 ? used : used + (size_t)w;
	}
}

static int quorum_acquire(void *ctx, struct lock *l, const struct lock_meta *m, int64_t cap_ms,
                          int64_t *sent_ms, struct holder *h, char *err, size_t errlen)
{
	struct quorum *q = ctx;

	struct req rq = {.script = &q->acq, .grants = 1, .marks = 1}, fr = {.script = &q->fence};
	struct tally t = {0};
	char why[300] = "", missing[600];

	(void)cap_ms; /* one round is bounded by the node timeout */
	if (lock_request_acquire(&q->acq, l, m, err, errlen) < 0)
		return LOCK_ERR;
	q->leave_ok = lock_request_leave(&q->leave, l, why, sizeof why) == 0;
	why[0] = '\0';
	int64_t t0 = clock_ms();
	round_all(q, &rq, STORE_NO_CAP);
	q->busy = -1;
	tally_acquire(q, l, &fr, h, &t);
	missing_nodes(q, &t, missing, sizeof missing);
	if (t.ok >= q->need && merge_fence(q, l, &t, t0, sent_ms, why, sizeof why) == LOCK_OK) {
		if (missing[0])
			log_warn("Redlock degraded: %s held by %d of %d nodes; missing: %s", l->key,
			         t.ok, q->n, missing);
		return LOCK_OK;
	}
	/* Why, from this round's answers (a READONLY replica's error, a node's silence),
	 * before the release round replaces them with its own. */
	int rc = LOCK_ERR;
	if (why[0])
		log_reason(err, errlen, "%s", why);
	else
		rc = refusal(q, &t, h, err, errlen);
	release_all(q, l);
	if (rc == LOCK_ERR) /* after the release round, whose faults are noted too */
		no_quorum_final(q);
	return rc;
}

/* --preempt's request, as the renewal reads it: a --preemptible holder acts on it only
 * when one request (its host, pid and label) marks a majority of the nodes, as an
 * acquire counts; a mark on fewer (a node's stale copy, written by hand, or a request
 * that reached only those nodes) stops nothing. That request, or NULL. */
static const struct holder *asked_on_majority(const struct quorum *q, const struct holder *by,
                                              const int *asks)
{
	for (int c = 0; c < q->n; c++) {
		if (!asks[c])
			continue;
		int m = 0;
		for (int i = 0; i < q->n; i++)
			m += asks[i] && by[i].pid == by[c].pid &&
			     strcmp(by[i].host, by[c].host) == 0 &&
			     strcmp(by[i].label, by[c].label) == 0;
		if (m >= q->need)
			return &by[c];
	}
	return NULL;
}

static int quorum_renew(void *ctx, const struct lock *l, int64_t cap_ms, int64_t *sent_ms,
                        char *err, size_t errlen)
{
	struct quorum *q = ctx;

	struct lock_request *rr = &q->renew, *ra = &q->reacq;
	struct req rq = {.script = rr}, aq = {.script = ra, .grants = 1},
	           fr = {.script = &q->fence};
	const struct req *again[STORE_NODES_MAX] = {0}, *behind[STORE_NODES_MAX] = {0};
	int nbehind = 0;
	struct lock_meta none = {"", "", "", 0, 0, NULL, NULL};
	struct lock relock = *l;
	struct holder h, by[STORE_NODES_MAX];
	int ok = 0, taken = 0, lost = 0, asks[STORE_NODES_MAX] = {0};

	if (lock_request_renew(rr, l, err, errlen) < 0)
		return LOCK_ERR;
	int64_t t0 = clock_ms();
	/* idle connections closed (a renewal every ttl/3): once more on fresh ones */
	round_all_again(q, &rq, cap_ms, 0);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		long long v = 0;
		if (!nd->reply ||
		    lock_decode_renew(nd->reply, &v, &by[i], nd->err, sizeof nd->err) != LOCK_OK)
			continue;
		asks[i] = v == 3; /* renewed, and a --preempt request asks (lock.h) */
		if (v == 1 || v == 3) {
			ok++;
		} else {
			again[i] = &aq;
			lost++;
		}
	}
	if (lost > q->n - q->need) {
		/* Gone from more nodes than a quorum can spare: broken (--break runs on every
		 * node), expired or taken, not restarted. The lock is lost, as on one server:
		 * locking those nodes again would take it back from whoever it went to. */
		snprintf(err, errlen, "the token is gone from %d of %d nodes", lost, q->n);
		return LOCK_NOTOURS;
	}
	if (lost > 0) {
		/* A node that restarted without the key (no persistence) is locked again with
		 * the same token (a minority: a majority still has it); one that another
		 * holder took stays lost. The owner fields are the majority's to show. */
		if (lock_request_acquire(ra, &relock, &none, err, errlen) == 0)
			round_trip(q, again, cap_ms);
		for (int i = 0; i < q->n; i++) {
			if (!again[i] || !q->node[i].reply)
				continue;
			int rc = lock_decode_acquire(q->node[i].reply, &relock, &h, q->node[i].err,
			                             sizeof q->node[i].err);
			if (rc == LOCK_OK) {
				ok++;
				/* documented unsafe (docs/scaling.md): said, once per relock */
				log_warn("Redlock node %s had lost %s (restarted without "
				         "persistence, or its key deleted): locked it again; while "
				         "it had not, it was another holder's to take",
				         q->node[i].srv->name, l->key);
				/* it counted from what it kept (nothing, restarted empty):
				 * brought up to this holder's fence, so that the next
				 * restart of another node cannot leave a majority below
				 * it (merge_fence). Best effort: the renewal does not
				 * wait on it to count. */
				if (relock.fence < l->fence) {
					behind[i] = &fr;
					nbehind++;
				}
			}
			taken += rc == LOCK_BUSY;
		}
	}
	if (ok >= q->need && clock_ms() - t0 < l->ask.ttl_ms - drift_ms(l)) {
		*sent_ms = t0 - drift_ms(l);
		/* after the verdict: it neither delays nor clears the reasons of a failure */
		char ferr[200];
		if (nbehind > 0 &&
		    lock_request_fence(&q->fence, l, l->fence, ferr, sizeof ferr) == 0)
			round_trip(q, behind, cap_ms);
		const struct holder *who = asked_on_majority(q, by, asks);
		if (!who)
			return LOCK_OK;
		holder_format(who, HOLDER_LABEL | HOLDER_RAW, err, errlen);
		return LOCK_PREEMPTED;
	}
	if (taken > q->n - q->need) {
		snprintf(err, errlen, "%d of %d nodes are held by another token", taken, q->n);
		return LOCK_NOTOURS;
	}
	no_quorum(q, ok, "confirmed the renewal", err, errlen);
	return LOCK_ERR;
}

/* A release or a break (verb) that fewer than a majority of the nodes left unanswered:
 * one line naming them (seen: only those this process reached once, not those down all
 * along, which the acquire reached no more than this: the degraded line named them)
 * and until when they may keep the lock (cap_ms: the lease's end, or STORE_NO_CAP). */
static void silent_nodes(const struct quorum *q, const struct lock *l, const char *verb,
                         const int *said, int seen, int64_t cap_ms, int answered)
{
	char buf[600], until[80] = "", did_not[60];
	size_t used = 0;
	int silent = 0, refused = 0;

	buf[0] = '\0';
	for (int i = 0; i < q->n && used + 1 < sizeof buf; i++) {
		const struct node *nd = &q->node[i];
		if (said[i] || (seen && !seen_get(nd->srv)))
			continue;
		silent++;
		refused += node_refused(q, i);
		int w = snprintf(buf + used, sizeof buf - used, "%s%s (%s)", used ? ", " : "",
		                 q->cfg->srv[i].name, nd->err[0] ? nd->err : "no answer");
		used = w < 0 ? used : used + (size_t)w;
	}
	if (!silent)
		return;
	int64_t left = cap_ms == STORE_NO_CAP ? -1 : cap_ms - clock_ms();
	if (left > 0)
		snprintf(until, sizeof until, " ends (in at most %lld.%lld s)",
		         (long long)(left / 1000), (long long)(left % 1000 / 100));
	/* a node that refused (NOPERM: its ACL) answered: it is not said to be silent */
	if (refused == silent)
		snprintf(did_not, sizeof did_not, "%d refused", refused);
	else if (refused)
		snprintf(did_not, sizeof did_not, "%d did not (%d refused)", silent, refused);
	else
		snprintf(did_not, sizeof did_not, "%d did not", silent);
	log_warn("%s %s on the %d of %d Redlock nodes that answered; %s and may keep it until "
	         "its TTL%s, fewer than a majority: %s",
	         verb, l->key, answered, q->n, did_not, until, buf);
}

static int quorum_release(void *ctx, const struct lock *l, int64_t keep_ms, int64_t cap_ms,
                          char *err, size_t errlen)
{
	struct quorum *q = ctx;

	struct lock_request *rl = &q->rel;
	struct req rq = {.script = rl, .gives = 1};
	int ok = 0, notours = 0, handed = 0, handed_on = 0, keep_over = 0,
	    said[STORE_NODES_MAX] = {0};

	if (lock_request_release(rl, l, keep_ms, err, errlen) < 0)
		return LOCK_ERR;
	int64_t t0 = clock_ms(), late = t0 + q->cfg->srv[0].io_timeout_ms;
	/* A connection that sat idle (a run's command between renewals) and that the
	 * server (its `timeout`) or a NAT closed: the release once more on a fresh one
	 * (its token makes it safe to repeat: a release sent again answers as the first). */
	round_all_again(q, &rq, cap_ms, 1);
	/* A node that has the release but did not answer within the node timeout (paused,
	 * slow): its answer is waited for up to one --io-timeout, as on one server. */
	round_late(q, &rq, t0, late < cap_ms ? late : cap_ms);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		long long v = 0;
		if (!nd->reply ||
		    lock_decode_int(nd->reply, "release", &v, nd->err, sizeof nd->err) != LOCK_OK)
			continue;
		said[i] = 1;
		if (v == 0)
			notours++;
		else
			ok++;
		handed += v == 3;                   /* handed to the --preempt request (lock.h) */
		handed_on += v == 1 && keep_ms > 0; /* not kept: handed to a --preempt request */
		keep_over += v == 4;                /* sent again: kept, the keep over (lock.h) */
	}
	/* The request takes the lock with a quorum: kept for it on a quorum of nodes. A
	 * node that had the release and never answered it may keep the lock (said). */
	if (ok >= q->need) {
		silent_nodes(q, l, "released", said, 1, cap_ms, ok + notours);
		return handed >= q->need      ? LOCK_HANDED_OVER
		       : handed_on >= q->need ? LOCK_HANDED_ON
		       : keep_over >= q->need ? LOCK_KEEP_OVER
		                              : LOCK_OK;
	}
	if (notours > q->n - q->need)
		return LOCK_NOTOURS;
	/* Fewer than a quorum released it, yet the token may still hold a majority with
	 * the nodes that did not answer: given back on every node that answered (the
	 * token names only this holder), it stays on the silent ones alone. Fewer than a
	 * majority: nobody is kept from the lock by it, only those nodes' votes until
	 * their TTL; released, and said. Else it may hold on: not released. */
	if (q->n - ok - notours < q->need) {
		silent_nodes(q, l, "released", said, 0, cap_ms, ok + notours);
		return LOCK_OK;
	}
	no_quorum(q, ok, "released it", err, errlen);
	return LOCK_ERR;
}

/* Status or break on every node: the exclusive holder whose token a quorum has (else,
 * for break, the first one seen), the largest fence, nodes_ok/nodes_total. */
/* The status (brk: break) script on every node: nh[i] and ok[i] = 1 for each node that
 * answered. The number that answered, or -1 with the reason. */
static int round_holders(struct quorum *q, const struct lock *l, int brk, int64_t cap_ms,
                         struct holders *nh, int *ok, char *err, size_t errlen)
{
	struct lock_request *rs = &q->hold;
	struct req rq = {.script = rs};
	int answered = 0;

	if (lock_request_holders(rs, l, brk, err, errlen) < 0)
		return -1;
	int64_t t0 = clock_ms(), late = t0 + q->cfg->srv[0].io_timeout_ms;
	round_all(q, &rq, cap_ms);
	/* a break (a write) that a node paused for writes holds back is dropped with the
	 * connection: waited for up to one --io-timeout, as a release is */
	if (brk)
		round_late(q, &rq, t0, late < cap_ms ? late : cap_ms);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		if (!nd->reply || lock_decode_holders(nd->reply,
		                                      !brk       ? "status"
		                                      : l->reset ? "reset"
		                                                 : "break",
		                                      &nh[i], nd->err, sizeof nd->err) != LOCK_OK)
			continue;
		ok[i] = 1;
		answered++;
	}
	return answered;
}

/* err: a holder (what) on `votes` nodes, fewer than a quorum, that the nodes that did
 * not answer could make one: neither held nor free can be said. hs (if not NULL): only
 * that, in hs->undecided (--list's row). */
static void cannot_tell(const struct quorum *q, const struct lock *l, const char *what, int votes,
                        int answered, const int *ok, struct holders *hs, char *err, size_t errlen)
{
	const char *why = "";
	char says[sizeof hs->undecided], buf[sizeof q->node[0].err + 160], others[60];
	int r = 0;

	for (int i = 0; i < q->n; i++) {
		if (!ok[i] && !*why)
			why = node_why(q, i, buf, sizeof buf);
		r += !ok[i] && node_refused(q, i);
	}
	/* a node that refused (NOPERM: its ACL) answered: it is not said to be silent */
	int silent = q->n - answered - r;
	if (r > 0 && silent > 0)
		snprintf(others, sizeof others, "%d did not answer, %d refused", silent, r);
	else if (r > 0)
		snprintf(others, sizeof others, "%d refused", r);
	else
		snprintf(others, sizeof others, "%d did not answer", silent);
	snprintf(says, sizeof says, "%d of %d Redlock nodes have %s, %s (%d needed)", votes, q->n,
	         what, others, q->need);
	log_reason(err, errlen, "cannot tell whether %s is held: %s%s%s", l->key, says,
	           *why ? "; " : "", why);
	if (hs) {
		memset(hs, 0, sizeof *hs);
		snprintf(hs->undecided, sizeof hs->undecided, "%s", says);
		hs->nodes_ok = answered;
		hs->nodes_total = q->n;
	}
}

static int by_pttl_desc(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x < y) - (x > y);
}

/* --lock-delay: how long a majority of the nodes stays closed (each node keeps its own
 * PREFIX{NAME}:delay), 0 if it is not. */
static long long closed_on_majority(const struct quorum *q, const struct holders *nh, const int *ok)
{
	long long closed[STORE_NODES_MAX];
	int m = 0;

	for (int i = 0; i < q->n; i++)
		if (ok[i])
			closed[m++] = nh[i].closed_ms;
	if (m < q->need)
		return 0;
	qsort(closed, (size_t)m, sizeof closed[0], by_pttl_desc);
	return closed[q->need - 1];
}

/* No holder: live --fair places that a majority of the nodes keeps (each node its own
 * PREFIX{NAME}:queue, left by single-server --fair runs: Redlock refuses --fair), which
 * refuse an acquire there: as many as a majority has, 0 if a majority has none. The
 * places shown are those of a node that has that many. */
static void queued_on_majority(const struct quorum *q, const struct holders *nh, const int *ok,
                               struct holders *hs)
{
	long long queued[STORE_NODES_MAX];
	int m = 0;

	for (int i = 0; i < q->n; i++)
		if (ok[i])
			queued[m++] = nh[i].queued;
	if (m < q->need)
		return;
	qsort(queued, (size_t)m, sizeof queued[0], by_pttl_desc);
	hs->queued = (int)queued[q->need - 1];
	for (int i = 0; hs->queued > 0 && i < q->n; i++)
		if (ok[i] && nh[i].queued >= hs->queued) {
			hs->nq = nh[i].nq < hs->queued ? nh[i].nq : hs->queued;
			memcpy(hs->q, nh[i].q, (size_t)hs->nq * sizeof hs->q[0]);
			break;
		}
}

/* --preempt's hand-over: kept for one request on a majority of the nodes (each keeps
 * its own PREFIX{NAME}:preempt; another request cannot get a quorum then), for as long
 * as a majority keeps it; else none. Any request's: two that crossed leave each its own
 * reservation somewhere, the first node's maybe the minority's. Taken (that request's
 * grant said so) only when a majority says it took it: a node's word alone (a grant of
 * a split vote, given back; a stale or hostile node) is no grant, and a preempted
 * holder's 81 says the request got the lock. Between the two (some nodes granted it,
 * the others not yet), still kept for it. */
static struct reserved reserved_on_majority(const struct quorum *q, const struct holders *nh,
                                            const int *ok)
{
	struct reserved none = {0};

	for (int c = 0; c < q->n; c++) { /* taken by that request a moment ago */
		if (!ok[c] || !nh[c].reserved.taken)
			continue;
		int t = 0;
		for (int i = 0; i < q->n; i++)
			t += ok[i] && nh[i].reserved.taken &&
			     strcmp(nh[i].reserved.token, nh[c].reserved.token) == 0;
		if (t >= q->need)
			return nh[c].reserved;
	}
	for (int c = 0; c < q->n; c++) {
		if (!ok[c] || !nh[c].reserved.known)
			continue;
		struct reserved first = nh[c].reserved;
		long long left[STORE_NODES_MAX];
		int m = 0, t = 0;
		/* a copy with no expiry (set by hand) outlasts every other: the majority
		 * ends with the copies that do expire, never sorted before them */
		for (int i = 0; i < q->n; i++) {
			if (!ok[i] || strcmp(nh[i].reserved.token, first.token) != 0)
				continue;
			if (nh[i].reserved.known)
				left[m++] = nh[i].reserved.left_ms >= 0 ? nh[i].reserved.left_ms
				                                        : LLONG_MAX;
			t += nh[i].reserved.taken;
		}
		if (m + t < q->need)
			continue;
		qsort(left, (size_t)m, sizeof left[0], by_pttl_desc);
		/* granted on some nodes: kept while the longest copy lasts */
		long long end = left[m >= q->need ? q->need - 1 : 0];
		first.left_ms = end == LLONG_MAX ? -1 : end;
		return first;
	}
	return none;
}

/* No token holds a majority: when the nodes held by some token leave fewer free than a
 * majority (even counting the nodes that did not answer as free), no acquire can get a
 * quorum until enough of those leases end: how many nodes, tokens, and how long. */
/* Does node nh refuse an acquire? A holder; without `any`, nothing else counts. */
static int refuses(const struct holders *nh, int any)
{
	return nh->n > 0 || (any && (nh->closed_ms > 0 || nh->reserved.known || nh->queued > 0));
}

/* No token on a majority: the nodes that refuse an acquire (held by other tokens; with
 * `any`, also closed by a lock-delay, kept for a --preempt request or with live --fair
 * places), when so many that no majority is free, into hs->split_*. */
static void split_vote(const struct quorum *q, const struct holders *nh, const int *ok, int any,
                       struct holders *hs)
{
	long long left[STORE_NODES_MAX];
	int m = 0, tokens = 0, held = 0, closed = 0, reserved = 0, queued = 0;

	for (int i = 0; i < q->n; i++) {
		if (!ok[i] || !refuses(&nh[i], any))
			continue;
		long long ms;
		if (nh[i].n > 0) {
			int seen = 0;
			for (int j = 0; j < i; j++)
				seen = seen || (ok[j] && nh[j].n > 0 &&
				                strcmp(nh[j].h[0].token, nh[i].h[0].token) == 0);
			tokens += !seen;
			held++;
			ms = nh[i].h[0].pttl_ms;
		} else if (nh[i].closed_ms > 0) {
			closed++;
			ms = nh[i].closed_ms;
		} else if (nh[i].reserved.known) {
			reserved++;
			ms = nh[i].reserved.left_ms;
		} else {
			queued++;
			ms = -1; /* live places: as long as their waiters wait */
		}
		/* no expiry (set by hand), or none to wait for: never ends by itself */
		left[m++] = ms >= 0 ? ms : LLONG_MAX;
	}
	int must_end = q->need - (q->n - m); /* such nodes that must end for a free majority */
	if (must_end <= 0)
		return;
	qsort(left, (size_t)m, sizeof left[0], by_pttl_desc);
	hs->split_nodes = m;
	hs->split_tokens = tokens;
	hs->split_held = held;
	hs->split_closed = closed;
	hs->split_reserved = reserved;
	hs->split_queued = queued;
	hs->split_ms = left[m - must_end] == LLONG_MAX ? -1 : left[m - must_end];
}

/* One --break run's record on two nodes: the same breaker (host, pid, user, label). */
static int same_break(const struct broken *a, const struct broken *b)
{
	return a->pid == b->pid && !strcmp(a->host, b->host) && !strcmp(a->user, b->user) &&
	       !strcmp(a->label, b->label);
}

/* How long ago a record's break was (unknown: the oldest). */
static long long break_age(const struct broken *b)
{
	return b->ago_ms < 0 ? LLONG_MAX : b->ago_ms;
}

/* The last --break's record as the nodes that answered tell it: the newest any of them
 * keeps (one that missed the last break, paused or cut off then, keeps an older one, and
 * the first node need not be one that saw it), with every token that break's record
 * names on any node (it removes on each node what it finds there: nodes that disagree
 * name different holders), each once, and a fence from a node that knows it. */
static void merge_broken(const struct quorum *q, const struct holders *nh, const int *ok,
                         struct broken *out)
{
	int newest = -1;

	memset(out, 0, sizeof *out);
	for (int i = 0; i < q->n; i++)
		if (ok[i] && nh[i].broken.known &&
		    (newest < 0 || break_age(&nh[i].broken) < break_age(&nh[newest].broken)))
			newest = i;
	if (newest < 0)
		return;
	*out = nh[newest].broken;
	for (int i = 0; i < q->n; i++) {
		const struct broken *b = &nh[i].broken;
		if (i == newest || !ok[i] || !b->known || !same_break(b, out))
			continue;
		if (!out->fence[0])
			snprintf(out->fence, sizeof out->fence, "%s", b->fence);
		char tokens[sizeof b->tokens], *save = NULL;
		snprintf(tokens, sizeof tokens, "%s", b->tokens);
		for (char *t = strtok_r(tokens, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
			size_t len = strlen(t), used = strlen(out->tokens);
			int seen = 0;
			for (const char *p = out->tokens; !seen && (p = strstr(p, t)); p += len)
				seen = (p == out->tokens || p[-1] == ' ') &&
				       (p[len] == ' ' || !p[len]);
			if (!seen && used + 1 + len < sizeof out->tokens)
				snprintf(out->tokens + used, sizeof out->tokens - used, "%s%s",
				         used ? " " : "", t);
		}
	}
}

static int holders(struct quorum *q, const struct lock *l, int brk, int64_t cap_ms,
                   struct holders *hs, char *err, size_t errlen)
{
	struct holders *nh = calloc((size_t)q->n, sizeof *nh);
	int ok[STORE_NODES_MAX] = {0};
	int answered, best = -1, best_votes = 0, fenced = 0;
	long long fence = 0;

	answered = !nh ? -1 : round_holders(q, l, brk, cap_ms, nh, ok, err, errlen);
	if (answered < 0) {
		if (!nh)
			snprintf(err, errlen, "out of memory");
		free(nh);
		return LOCK_ERR;
	}
	for (int i = 0; i < q->n; i++)
		if (ok[i] && nh[i].has_last_fence && (!fenced++ || nh[i].last_fence > fence))
			fence = nh[i].last_fence;
	/* --break: the holders the nodes removed (a compare-and-break: on the nodes that did
	 * not refuse; when all refused, who holds it now, for the refusal to say) */
	int all_refused = brk;
	for (int i = 0; i < q->n; i++)
		all_refused = all_refused && (!ok[i] || nh[i].refused);
	unsigned char counted[STORE_NODES_MAX] = {0};
	for (int i = 0; i < q->n; i++)
		counted[i] = ok[i] && nh[i].n > 0 && (!brk || all_refused || !nh[i].refused);
	for (int i = 0; i < q->n; i++) {
		int votes = 0;
		if (!counted[i])
			continue;
		for (int j = 0; j < q->n; j++)
			votes += counted[j] && strcmp(nh[j].h[0].token, nh[i].h[0].token) == 0;
		if (votes > best_votes) {
			best = i;
			best_votes = votes;
		}
	}
	for (int j = 0; best >= 0 && relocked(&nh[best].h[0]) && j < q->n; j++)
		if (counted[j] && !relocked(&nh[j].h[0]) &&
		    strcmp(nh[j].h[0].token, nh[best].h[0].token) == 0)
			best = j; /* the same holder, named (relocked) */
	if (answered < q->need) {
		no_quorum(q, answered, "answered", err, errlen);
		free(nh);
		return LOCK_ERR;
	}
	/* A holder on fewer than a majority of those that answered may still hold a
	 * majority with the nodes that did not (paused, unreachable): the status cannot
	 * say free then (an acquire would be busy), nor held (as quorum_is_holder). */
	if (!brk && best_votes < q->need && best_votes + (q->n - answered) >= q->need) {
		cannot_tell(q, l, "its holder", best_votes, answered, ok, hs, err, errlen);
		free(nh);
		return LOCK_ERR;
	}
	/* So too what refuses an acquire on a node without a holder (each node its own
	 * entries): a lock-delay, a --preempt reservation, live --fair places, on fewer
	 * than a majority of those that answered but a majority with the nodes that did
	 * not: the status cannot say free (an acquire would be refused) nor closed. */
	int closed = 0, reserved = 0, queued = 0;
	for (int i = 0; i < q->n; i++) {
		closed += ok[i] && nh[i].closed_ms > 0;
		reserved += ok[i] && nh[i].reserved.known;
		queued += ok[i] && nh[i].queued > 0;
	}
	const char *what[] = {"it closed by a lock-delay", "it kept for a --preempt request",
	                      "live --fair places"};
	int has[] = {closed, reserved, queued};
	/* one of them on a majority already refuses an acquire: said so (75), not unknown */
	int majority =
	    closed >= q->need || reserved_on_majority(q, nh, ok).known || queued >= q->need;
	for (int k = 0; k < 3 && !brk && !majority && best_votes < q->need; k++)
		if (has[k] > 0 && has[k] < q->need && has[k] + (q->n - answered) >= q->need) {
			cannot_tell(q, l, what[k], has[k], answered, ok, hs, err, errlen);
			free(nh);
			return LOCK_ERR;
		}
	/* And all of them together, none on a majority (a holder on one node, a lock-delay
	 * on another): an acquire needs a majority of nodes that refuse nothing. Too few
	 * such nodes answered, but enough with the silent ones: cannot tell either. */
	int refusing = 0, held = 0;
	for (int i = 0; i < q->n; i++) {
		refusing += ok[i] && refuses(&nh[i], 1);
		held += ok[i] && nh[i].n > 0;
	}
	if (!brk && !majority && best_votes < q->need && answered - refusing < q->need &&
	    q->n - refusing >= q->need) {
		const char *kind[] = {"a holder", "a lock-delay", "a --preempt reservation",
		                      "live --fair places"};
		int on[] = {held, closed, reserved, queued}, kinds = 0;
		char what_[160] = "";
		for (int k = 0; k < 4; k++)
			kinds += on[k] > 0;
		for (int k = 0, said = 0; k < 4; k++)
			if (on[k] > 0) {
				size_t used = strlen(what_);
				snprintf(what_ + used, sizeof what_ - used, "%s%s",
				         !said               ? ""
				         : said == kinds - 1 ? " or "
				                             : ", ",
				         kind[k]);
				said++;
			}
		cannot_tell(q, l, what_, refusing, answered, ok, hs, err, errlen);
		free(nh);
		return LOCK_ERR;
	}
	memset(hs, 0, sizeof *hs);
	if (best >= 0 && (brk || best_votes >= q->need))
		*hs = nh[best];
	/* --break: each token a node removed is said, once, the most nodes' first (nodes
	 * that disagree: a holder on a majority, another on a node that lagged) */
	for (int i = 0; brk && !all_refused && best >= 0 && i < q->n; i++)
		for (int k = 0; counted[i] && k < nh[i].n && hs->n < HOLDERS_MAX; k++) {
			int seen = 0;
			for (int m = 0; m < hs->n && !seen; m++)
				seen = strcmp(hs->h[m].token, nh[i].h[k].token) == 0;
			if (!seen) {
				hs->h[hs->n++] = nh[i].h[k];
				hs->total = hs->total > hs->n ? hs->total : hs->n;
			}
		}
	hs->last_fence = fence;
	hs->has_last_fence = fenced > 0;
	/* A holder's fence is the largest its token got from a node: what the merge handed
	 * it (each node that granted recorded its own count). Not the largest counter: a
	 * later split vote counts too, and a node may have been set by hand; nor a relock's
	 * count (relocked), unless no node has more. */
	for (int i = 0; i < hs->n; i++) {
		struct holder *h = &hs->h[i];
		int named = 0;
		for (int j = 0; j < q->n; j++)
			for (int k = 0; ok[j] && k < nh[j].n; k++) {
				const struct holder *x = &nh[j].h[k];
				if (!x->has_fence || strcmp(x->token, h->token) != 0 ||
				    (named && relocked(x)))
					continue;
				if (!h->has_fence || x->fence > h->fence ||
				    (!named && !relocked(x))) {
					h->fence = x->fence;
					h->has_fence = 1;
				}
				named = named || !relocked(x);
			}
	}
	/* --break --token/--if-fence: refused when no node that answered broke anything;
	 * the last break's record, merged over the nodes. */
	int refused = brk;
	for (int i = 0; i < q->n; i++)
		refused = refused && (!ok[i] || nh[i].refused);
	merge_broken(q, nh, ok, &hs->broken);
	hs->refused = refused;
	if (!hs->n && !brk)
		split_vote(q, nh, ok, !majority, hs);
	hs->nodes_ok = answered;
	hs->nodes_total = q->n;
	hs->closed_ms = closed_on_majority(q, nh, ok);
	for (int i = 0; l->reset && i < q->n; i++) /* --reset: the lock-delay any node lifted */
		if (ok[i] && nh[i].closed_ms > hs->closed_ms)
			hs->closed_ms = nh[i].closed_ms;
	hs->reserved = reserved_on_majority(q, nh, ok);
	if (!hs->n)
		queued_on_majority(q, nh, ok, hs);
	for (int i = 0; i < q->n; i++) /* --reset: the --once-per mark any node cleared */
		if (ok[i] && nh[i].done && (!hs->done || nh[i].done_pttl_ms > hs->done_pttl_ms)) {
			hs->done = 1;
			hs->done_pttl_ms = nh[i].done_pttl_ms;
			memcpy(hs->done_fence, nh[i].done_fence, sizeof hs->done_fence);
		}
	for (int i = 0; i < q->n; i++) /* --break, --reset: the strays any node deleted */
		for (int j = 0; ok[i] && j < nh[i].nstrays; j++) {
			int k = 0;
			while (k < hs->nstrays &&
			       strcmp(hs->strays[k].suffix, nh[i].strays[j].suffix))
				k++;
			if (k == hs->nstrays && k < (int)(sizeof hs->strays / sizeof hs->strays[0]))
				hs->strays[hs->nstrays++] = nh[i].strays[j];
		}
	free(nh);
	return LOCK_OK;
}

static int quorum_status(void *ctx, const struct lock *l, int64_t cap_ms, struct holders *h,
                         char *err, size_t errlen)
{
	struct quorum *q = ctx;

	return holders(q, l, 0, cap_ms, h, err, errlen);
}

static int quorum_break(void *ctx, const struct lock *l, int64_t cap_ms, struct holders *h,
                        char *err, size_t errlen)
{
	struct quorum *q = ctx;
	int said[STORE_NODES_MAX], answered = 0;
	int rc = holders(q, l, 1, cap_ms, h, err, errlen);

	/* broken on a majority: a node that had the break and never answered may keep the
	 * holder until its TTL (said, as a release does) */
	for (int i = 0; i < q->n; i++) {
		said[i] = q->node[i].reply && q->node[i].reply->type != RESP_ERROR;
		answered += said[i];
	}
	if (rc == LOCK_OK && !l->reset && answered >= q->need)
		silent_nodes(q, l, "broke", said, 0, STORE_NO_CAP, answered);
	return rc;
}

/* Redlock locks are exclusive only (cli.c): hd->mode stays 'x'. Held when a majority
 * of the nodes has token as its live holder (the status script: one read each); not
 * held when even the nodes that did not answer could not make a majority; else the
 * store cannot say. The lease left is the time until fewer than a majority hold it;
 * the fence, the largest a node recorded for token (as quorum_status). */
static int quorum_is_holder(void *ctx, const struct lock *l, const char *token, int64_t cap_ms,
                            struct holding *hd, char *err, size_t errlen)
{
	struct quorum *q = ctx;
	struct holders *nh = calloc((size_t)q->n, sizeof *nh);
	int ok[STORE_NODES_MAX] = {0};
	long long pttl[STORE_NODES_MAX];
	int answered, ours = 0, rc, named = 0;

	answered = !nh ? -1 : round_holders(q, l, 0, cap_ms, nh, ok, err, errlen);
	if (answered < 0) {
		if (!nh)
			snprintf(err, errlen, "out of memory");
		free(nh);
		return -1;
	}
	for (int i = 0; i < q->n; i++) {
		if (!ok[i] || nh[i].n == 0 || strcmp(nh[i].h[0].token, token) != 0)
			continue;
		const struct holder *h = &nh[i].h[0];
		pttl[ours++] = h->pttl_ms;
		/* the largest, as quorum_status: a relock's count only when no other */
		if (h->has_fence && (!named || !relocked(h)) &&
		    (!hd->has_fence || h->fence > hd->fence || (!named && !relocked(h)))) {
			hd->fence = h->fence;
			hd->has_fence = 1;
		}
		named = named || !relocked(h);
	}
	if (ours >= q->need) {
		qsort(pttl, (size_t)ours, sizeof pttl[0], by_pttl_desc);
		hd->ttl_left_ms = pttl[q->need - 1] >= 0 ? pttl[q->need - 1] : -1;
		rc = 1;
	} else if (ours + (q->n - answered) >= q->need) {
		cannot_tell(q, l, "the token", ours, answered, ok, NULL, err, errlen);
		rc = -1;
	} else {
		rc = 0;
	}
	free(nh);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	const struct resp_reply *x = *(struct resp_reply *const *)a;
	const struct resp_reply *y = *(struct resp_reply *const *)b;

	return strcmp(x->str, y->str);
}

/* --list: the names found on any node, once each, in one page. */
static int quorum_list(void *ctx, const char *match, int64_t cap_ms,
                       int (*page)(void *arg, const struct resp_reply *names), void *arg, char *err,
                       size_t errlen)
{
	struct quorum *q = ctx;

	struct resp_reply all = {.type = RESP_ARRAY};
	struct resp_reply *pages[STORE_NODES_MAX * 64];
	int npages = 0, scanned = 0, rc = 0, over = 0;

	all.element = calloc(LIST_NAMES_MAX, sizeof *all.element);
	if (!all.element) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* Connect the nodes without a (usable) connection all at once, then scan each. */
	struct req none = {0};
	for (int i = 0; i < q->n; i++)
		if (q->node[i].skip)
			node_drop(&q->node[i]);
	round_all(q, &none, cap_ms);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		char cursor[32] = "0";
		int done = 0;
		if (!nd->c)
			continue;
		while (!done && !over) {
			if (npages ==
			    STORE_NODES_MAX * 64) { /* a cap refuses, it never truncates */
				over = 1;
				break;
			}
			struct resp_reply *r = NULL;
			const char *argv[] = {"SCAN", cursor, "MATCH", match, "COUNT", "1000"};
			size_t lens[6];
			for (int k = 0; k < 6; k++)
				lens[k] = strlen(argv[k]);
			int64_t now = clock_ms(), d = now + nd->srv->io_timeout_ms;
			if (now >= cap_ms) {
				snprintf(nd->err, sizeof nd->err, "out of time during SCAN");
				node_drop(nd);
				break;
			}
			if (client_call(nd->c, 6, argv, lens, d < cap_ms ? d : cap_ms, &r, nd->err,
			                sizeof nd->err) < 0 ||
			    r->type != RESP_ARRAY || r->elements != 2 ||
			    r->element[0]->type != RESP_STRING ||
			    r->element[1]->type != RESP_ARRAY) {
				if (r && r->type == RESP_ERROR)
					log_reason(nd->err, sizeof nd->err, "SCAN: %s", r->str);
				resp_free(r);
				node_drop(nd);
				break;
			}
			pages[npages++] = r;
			for (size_t k = 0; k < r->element[1]->elements && !over; k++) {
				if (r->element[1]->element[k]->type != RESP_STRING)
					continue;
				if (all.elements == LIST_NAMES_MAX)
					over = 1;
				else
					all.element[all.elements++] = r->element[1]->element[k];
			}
			snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
			done = strcmp(cursor, "0") == 0;
		}
		scanned += done;
	}
	if (over) {
		snprintf(err, errlen,
		         "--list over Redlock keeps at most %d names (or %d SCAN pages) in memory, "
		         "and more match the prefix: nothing listed",
		         LIST_NAMES_MAX, STORE_NODES_MAX * 64);
		rc = -1;
	} else if (scanned < q->need) {
		no_quorum(q, scanned, "listed", err, errlen);
		rc = -1;
	} else {
		qsort(all.element, all.elements, sizeof *all.element, by_name);
		size_t kept = 0;
		for (size_t k = 0; k < all.elements; k++)
			if (kept == 0 ||
			    strcmp(all.element[kept - 1]->str, all.element[k]->str) != 0)
				all.element[kept++] = all.element[k];
		all.elements = kept;
		rc = page(arg, &all);
	}
	free(all.element);
	for (int k = 0; k < npages; k++)
		resp_free(pages[k]);
	return rc;
}

/* A waiter gives up (its -w deadline, a signal): it leaves every node, as on one server
 * (leave.lua). Redlock takes no place among the waiters (places: 0) and refuses -s,
 * --limit and --fair (cli.c), yet its attempts leave marks on a node: the writer mark,
 * where single-server shared holders or live --fair places make the exclusive request
 * wait there (it holds back their new shared requests, up to 5 s after the waiter
 * left), and a --preempt request's mark and a reservation a preempted holder's release
 * made for it (they stop a --preemptible holder, or keep the name from every other
 * waiter, as long). One round, bounded by cap_ms (wait.c: one --io-timeout at most);
 * its token makes it safe to repeat. Best effort: what a node does not hear of expires
 * by its lease. */
static int quorum_leave(void *ctx, const struct lock *l, int64_t cap_ms, struct holder *newer,
                        char *err, size_t errlen)
{
	struct quorum *q = ctx;
	struct req rq = {.script = &q->rel, .leaves = 1};

	(void)newer;
	if (lock_request_leave(&q->rel, l, err, errlen) < 0)
		return LOCK_ERR;
	int64_t t0 = clock_ms(), late = t0 + q->cfg->srv[0].io_timeout_ms;
	round_all_again(q, &rq, cap_ms, 1);
	/* a node paused for writes (CLIENT PAUSE WRITE) drops the leave it holds back with
	 * the connection: waited for within the give-up's budget, as a release is */
	round_late(q, &rq, t0, late < cap_ms ? late : cap_ms);
	return LOCK_OK;
}

static int quorum_wait_replicas(void *ctx, int n, char *err, size_t errlen)
{
	(void)ctx, (void)n;
	snprintf(err, errlen, "--wait-replicas does not apply to Redlock");
	return -1;
}

/* Each node on its own, one after the other, each within a node timeout; not those the
 * quorum could not connect to (each would cost its timeout). */
static void quorum_check_eviction(void *ctx, const char *warn_key, const char *key, int64_t cap_ms)
{
	struct quorum *q = ctx;
	char err[300];

	for (int i = 0; i < q->n; i++) {
		if (!q->node[i].c)
			continue;
		struct store_config *one = calloc(1, sizeof *one);
		void *t = NULL;
		if (!one)
			return;
		one->n = 1;
		one->srv[0] = q->cfg->srv[i];
		one->srv[0].ep.tls = &one->srv[0].tls;
		int64_t d = clock_ms() + 2 * q->cfg->node_timeout_ms;
		/* the node as a single server: its peer behind the same interface */
		conn_fault_clear(); /* as store_open() does */
		if (routed_backend.open(&t, one, 0, d, err, sizeof err) == STORE_OK) {
			routed_backend.check_eviction(t, warn_key, key, d < cap_ms ? d : cap_ms);
			routed_backend.close(t);
		}
		free(one);
	}
}

/* --history: newest first by fence (the run it concerns; for an entry without one, the
 * fence of the entry before it on its node: order), then by the server's time. */
static int by_fence_desc(const void *a, const void *b)
{
	const struct history_entry *x = a, *y = b;
	long long fx = strtoll(x->order, NULL, 10), fy = strtoll(y->order, NULL, 10);

	if (fx != fy)
		return (fx < fy) - (fx > fy);
	return (x->at_ms < y->at_ms) - (x->at_ms > y->at_ms);
}

/* e[0..n)'s entry of the same event about the same token (another node's), or NULL.
 * A --reset names no token: its operator's host and pid tell one from another. */
static struct history_entry *history_seen(struct history_entry *e, int n,
                                          const struct history_entry *x)
{
	for (int i = 0; i < n; i++)
		if (strcmp(e[i].ev, x->ev) == 0 && strcmp(e[i].token, x->token) == 0 &&
		    (x->token[0] ||
		     (strcmp(e[i].host, x->host) == 0 && strcmp(e[i].pid, x->pid) == 0)))
			return &e[i];
	return NULL;
}

/* A run's record written by a node that the renewal locked again (relocked): its
 * token, no host, no pid. */
static int history_relocked(const struct history_entry *x)
{
	return x->token[0] && !x->host[0] && (!x->pid[0] || strcmp(x->pid, "0") == 0);
}

/* One node's entries e[0..k), newest first: each one's order (by_fence_desc), its own
 * fence or, for an entry without one, that of the nearest older entry with one. */
static void history_order(struct history_entry *e, int k)
{
	const char *last = "";

	for (int j = k - 1; j >= 0; j--) {
		if (e[j].fence[0])
			last = e[j].fence;
		snprintf(e[j].order, sizeof e[j].order, "%s", last);
	}
}

/* Fence a below fence b: decimal strings compared exactly (lengths, then digits). */
static int fence_below(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	return la != lb ? la < lb : strcmp(a, b) < 0;
}

/* One node's entries, newest first: is e[j] older than an "acquired" of its token on
 * that node? Then it is an earlier attempt of that run: a split vote that this node
 * granted and that was given back (its "acquired" and "released" are no run). */
static int history_attempt(const struct history_entry *e, int j)
{
	for (int i = 0; i < j; i++)
		if (strcmp(e[i].ev, "acquired") == 0 && strcmp(e[i].token, e[j].token) == 0)
			return 1;
	return 0;
}

/* How a run ended (released, expired, broken, preempted, lost): its end record. The
 * break of a --preempt reservation (broken, cleared "reservation") ends no run. */
static int history_end(const struct history_entry *x)
{
	static const char *const ends[] = {"released", "expired", "broken", "preempted", "lost"};

	if (x->cleared[0])
		return 0;
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
		if (strcmp(x->ev, ends[i]) == 0)
			return 1;
	return 0;
}

/* One end per run: nodes may disagree about how a run ended (a node that saw the
 * preempted holder's release after the --preempt request's last attempt there ends the
 * run at the request's release or at the next acquire; one that missed the release
 * finds it expired). The end most nodes recorded stands; on a tie, one that someone saw
 * (lost, preempted, broken, released) over expired (nobody saw it end), then the
 * earliest written. gone[k] is set for every other end of the same run. */
static void history_one_end(const struct history_entry *e, const int *votes, int n,
                            unsigned char *gone)
{
	for (int i = 0; i < n; i++) {
		if (gone[i] || !history_end(&e[i]))
			continue;
		for (int j = i + 1; j < n; j++) {
			if (gone[j] || !history_end(&e[j]) || strcmp(e[i].token, e[j].token) != 0)
				continue;
			int ei = strcmp(e[i].ev, "expired") == 0,
			    ej = strcmp(e[j].ev, "expired") == 0;
			int keep_j = votes[j] != votes[i] ? votes[j] > votes[i]
			             : ei != ej           ? ei
			                                  : e[j].at_ms < e[i].at_ms;
			gone[keep_j ? i : j] = 1;
			if (keep_j)
				break;
		}
	}
}

/* Every node that granted a run wrote its history: each node's, merged by fence (an
 * event of one run once, with the largest fence a node recorded for it; one end per
 * run: history_one_end). */
static int quorum_history(void *ctx, const struct lock *l, int64_t cap_ms, struct history_entry *e,
                          int *n, char *err, size_t errlen)
{
	struct quorum *q = ctx;
	struct req rq = {.script = &q->hold};
	struct history_entry *all = calloc((size_t)(*n * q->n), sizeof *all);
	int *votes = calloc((size_t)(*n * q->n), sizeof *votes);
	unsigned char *gone = calloc((size_t)(*n * q->n), 1);
	int got = 0, answered = 0, rc = LOCK_ERR;

	if (!all || !votes || !gone) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (lock_request_history(&q->hold, l, *n, err, errlen) < 0)
		goto out;
	round_all(q, &rq, cap_ms);
	for (int i = 0; i < q->n; i++) {
		struct node *nd = &q->node[i];
		int k = nd->reply
		            ? lock_decode_history(nd->reply, all + got, *n, nd->err, sizeof nd->err)
		            : -1;
		/* Attempts marked and orders set first (the merge below moves entries within
		 * the node's). */
		unsigned char attempt[HISTORY_MAX];
		for (int j = 0; j < k; j++)
			attempt[j] = (unsigned char)history_attempt(all + got, j);
		history_order(all + got, k);
		int w = got;
		for (int j = 0; j < k; j++) {
			struct history_entry *x = &all[got + j], *seen;
			if (attempt[j])
				continue;
			seen = history_seen(all, w, x);
			if (!seen) {
				votes[w] = 1;
				all[w++] = *x;
				continue;
			}
			votes[seen - all]++;
			if (!x->seen[0]) /* recorded on a node: not only seen by this read */
				seen->seen[0] = '\0';
			/* a node the renewal locked again recorded the run with no owner
			 * fields and its own count (relocked): the others' record stands */
			int sr = history_relocked(seen), xr = history_relocked(x);
			if (sr && !xr) {
				memcpy(seen->host, x->host, sizeof seen->host);
				memcpy(seen->pid, x->pid, sizeof seen->pid);
				memcpy(seen->user, x->user, sizeof seen->user);
				memcpy(seen->label, x->label, sizeof seen->label);
				memcpy(seen->fence, x->fence, sizeof seen->fence);
				memcpy(seen->order, x->order, sizeof seen->order);
				continue;
			}
			if (xr && !sr)
				continue;
			if (fence_below(seen->fence, x->fence))
				/* each node recorded its own count: the run's fence is the
				 * largest (what the merge handed it, as --status says) */
				memcpy(seen->fence, x->fence, sizeof seen->fence);
			if (fence_below(seen->order, x->order))
				memcpy(seen->order, x->order, sizeof seen->order);
		}
		got = w;
		answered += k >= 0;
	}
	/* Every run was granted by a majority, and any two majorities share a node: with a
	 * majority's answers no run is missed; with fewer, part of the history could be
	 * missing, and a part is not printed as if it were the whole. */
	if (answered < q->need) {
		no_quorum(q, answered, "answered", err, errlen);
		goto out;
	}
	/* One run's records (its token) with different counts: its acquired record written
	 * by a node that counted less than the fence the run got (the merge raised that
	 * node's counter and the holder's record, fence.lua, not its history), its end with
	 * the fence; the nodes that counted it gone (restarted). Each says the largest, the
	 * run's fence (RLOCK_FENCE, as --status says). */
	for (int i = 0; i < got; i++) {
		struct history_entry *x = &all[i], *top = x;
		if (!x->token[0] || !x->fence[0] || history_relocked(x))
			continue;
		for (int j = 0; j < got; j++)
			if (all[j].fence[0] && !history_relocked(&all[j]) &&
			    strcmp(all[j].token, x->token) == 0 &&
			    fence_below(top->fence, all[j].fence))
				top = &all[j];
		if (top != x) {
			memcpy(x->fence, top->fence, sizeof x->fence);
			memcpy(x->order, top->fence, sizeof x->order);
		}
	}
	/* An end only seen by this read (a run open on a node whose lease there is over,
	 * history_read.lua) stands when a majority see it: on fewer, the run may live on
	 * the others (a node that lagged behind them). */
	for (int i = 0; i < got; i++)
		gone[i] = all[i].seen[0] && votes[i] < q->need;
	history_one_end(all, votes, got, gone);
	int kept = 0;
	for (int i = 0; i < got; i++)
		if (!gone[i])
			all[kept++] = all[i];
	qsort(all, (size_t)kept, sizeof *all, by_fence_desc);
	*n = kept < *n ? kept : *n;
	memcpy(e, all, (size_t)*n * sizeof *e);
	rc = LOCK_OK;
out:
	free(all);
	free(votes);
	free(gone);
	return rc;
}

/* --check: each node, one command at a time on its own connection. */
static const struct server *quorum_node(void *ctx, int k, int64_t cap_ms, char *err, size_t errlen)
{
	struct quorum *q = ctx;

	(void)cap_ms;
	err[0] = '\0';
	return k >= 0 && k < q->n ? q->node[k].srv : NULL;
}

static int quorum_node_call(void *ctx, const struct server *srv, int argc, const char **argv,
                            const size_t *lens, int64_t cap_ms, struct resp_reply **reply,
                            char *err, size_t errlen)
{
	struct quorum *q = ctx;
	struct node *nd = NULL;

	for (int i = 0; i < q->n && !nd; i++)
		nd = q->node[i].srv == srv ? &q->node[i] : NULL;
	if (!nd) {
		snprintf(err, errlen, "internal error: not a Redlock node");
		return LOCK_ERR;
	}
	if (!nd->c) {
		int rc = client_open(&nd->c, srv, cap_ms, err, errlen);
		if (rc != CLIENT_OK) {
			nd->c = NULL;
			return rc == CLIENT_AUTH ? LOCK_DENIED : LOCK_ERR;
		}
	}
	int64_t d = clock_ms() + srv->io_timeout_ms;
	if (client_call(nd->c, argc, argv, lens, d < cap_ms ? d : cap_ms, reply, err, errlen) == 0)
		return LOCK_OK;
	node_drop(nd);
	return LOCK_ERR;
}

const struct store_backend quorum_backend = {
    .open = quorum_open,
    .close = quorum_close,
    .name = quorum_name,
    .places = 0,
    .acquire = quorum_acquire,
    .renew = quorum_renew,
    .release = quorum_release,
    .status = quorum_status,
    .brk = quorum_break,
    .leave = quorum_leave,
    .is_holder = quorum_is_holder,
    .wait_replicas = quorum_wait_replicas,
    .list = quorum_list,
    .check_eviction = quorum_check_eviction,
    .listen_at = quorum_listen_at,
    .history = quorum_history,
    .node = quorum_node,
    .node_call = quorum_node_call,
    .connected = quorum_connected,
};
