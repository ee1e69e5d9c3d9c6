/* SPDX-License-Identifier: MIT */
#include "client.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h" /* log_reason */
#include "secret.h"

struct client {
	struct conn *conn;
	struct resp_reader *rd;
	const struct server *srv;
	int unanswered;  /* requests sent whose reply an abort left unread */
	int broken;      /* a request was cut short: nothing more can be sent */
	int lost;        /* a request went in full, its reply was lost with the connection */
	int replied;     /* a reply has been read: the server speaks RESP */
	int refused;     /* the server refused the connection (maxclients): it ran nothing */
	int heard;       /* bytes came (part of a reply, perhaps): no TLS port */
	int asking;      /* client_set_asking */
	int opening;     /* client_start: 1 connecting, 2 awaiting AUTH/SELECT replies */
	int owed;        /* set-up replies still owed while opening */
	char run_id[41]; /* srv->identify: who the server said it is */
	char mode[16];   /* srv->identify: its redis_mode (standalone, cluster, sentinel) */
};

int client_resolve(struct server *srv, int64_t deadline_ms, char *err, size_t errlen)
{
	return conn_resolve(&srv->ep, deadline_ms, err, errlen) == CONN_OK ? CLIENT_OK : CLIENT_ERR;
}

/* A plain connection to a TLS port: the server answers our first command with a TLS
 * alert record (0x15 0x03 ...) or resets the connection. The message ends with the
 * endpoint's advice. */
static const char *tls_hint(const struct client *c)
{
	return c->srv->ep.hint_wants_tls ? c->srv->ep.hint_wants_tls : CONN_HINT_WANTS_TLS;
}

static int tls_alert(const struct client *c, const char *buf, ssize_t n)
{
	return !c->replied && !c->srv->tls.enabled && n >= 2 && buf[0] == 0x15 && buf[1] == 0x03;
}

/* The servers (by name) that answered in RESP in this process, on any connection of
 * any thread: a later connection to one of them that ends before its first reply (the
 * server killed or restarting, a proxy whose backend is gone) is no TLS port. A full
 * table forgets nothing it holds; a server it cannot hold keeps the hint. */
#define HEARD_MAX 16
static pthread_mutex_t heard_lock = PTHREAD_MUTEX_INITIALIZER;
static char heard[HEARD_MAX][sizeof((struct server *)0)->name];
static int nheard;

static int heard_at(const struct server *srv)
{
	for (int i = 0; i < nheard; i++)
		if (strcmp(heard[i], srv->name) == 0)
			return 1;
	return 0;
}

static void server_heard(const struct server *srv)
{
	pthread_mutex_lock(&heard_lock);
	if (!heard_at(srv) && nheard < HEARD_MAX)
		snprintf(heard[nheard++], sizeof heard[0], "%s", srv->name);
	pthread_mutex_unlock(&heard_lock);
}

static int server_was_heard(const struct server *srv)
{
	pthread_mutex_lock(&heard_lock);
	int yes = heard_at(srv);
	pthread_mutex_unlock(&heard_lock);
	return yes;
}

/* The longest the TLS question below may take; its answer is awaited for three times
 * the connect's round trip, CONN_PROBE_MS at least: a TLS server answers a ClientHello
 * at once, a plaintext Redis never (a run that meets one waits no longer than that). */
#define TLS_ASK_MS 1000

/* Does the port answer TLS? Asked on a fresh connection with a ClientHello (a record
 * header and a truncated hello: any TLS server answers it with a handshake record or
 * an alert, 0x16/0x15 0x03); a plaintext Redis keeps it as the start of an inline
 * command (no newline in it) and says nothing. Nobody listening, silence, anything
 * else: no (a proxy whose backend is gone, a server killed mid-reply, restarting).
 * The question's own faults are not the request's. */
static int answers_tls(const struct client *c)
{
	static const unsigned char hello[] = {0x16, 0x03, 0x01, 0x00, 0x05,
	                                      0x01, 0x00, 0x00, 0x01, 0x00};
	int64_t cap = c->srv->connect_timeout_ms > 0 && c->srv->connect_timeout_ms < TLS_ASK_MS
	                  ? c->srv->connect_timeout_ms
	                  : TLS_ASK_MS;
	int64_t start = clock_ms(), deadline = start + cap;
	unsigned char b[2];
	char e[256];
	struct conn *p = NULL;
	int saved = conn_fault_push(), got = 0;

	if (conn_open(&p, &c->srv->ep, deadline, deadline, e, sizeof e) == CONN_OK &&
	    conn_write_all(p, hello, sizeof hello, deadline, e, sizeof e) == CONN_OK) {
		int64_t rtt = clock_ms() - start,
		        wait = 3 * rtt > CONN_PROBE_MS ? 3 * rtt : CONN_PROBE_MS;
		if (clock_ms() + wait < deadline)
			deadline = clock_ms() + wait;
		for (ssize_t n = 1; got < 2 && n > 0; got += n > 0 ? (int)n : 0)
			n = conn_read(p, b + got, sizeof b - (size_t)got, deadline, e, sizeof e);
	}
	conn_close(p);
	conn_fault_pop(saved, 0);
	return got == 2 && (b[0] == 0x16 || b[0] == 0x15) && b[1] == 0x03;
}

/* A plain connection that ended before a byte of reply, to a server never heard in this
 * process, whose port answers TLS when asked: a TLS port. Waiting will not make it speak
 * plaintext: a final fault, as a TLS handshake answered in plaintext is (conn.c), so
 * that a Redlock round that cannot do without the node ends as one server does
 * (no_quorum_final). A port that does not answer TLS had a connection closed (a proxy
 * that died, a server killed mid-reply): no hint, an outage -w rides out. */
static void add_tls_hint(const struct client *c, char *err, size_t errlen)
{
	size_t used = strlen(err);

	if (c->replied || c->heard || c->srv->tls.enabled || used >= errlen ||
	    server_was_heard(c->srv))
		return;
	if (answers_tls(c)) {
		snprintf(err + used, errlen - used, " (is it a TLS port?%s", tls_hint(c));
		conn_fault_note(CONN_FAULT_FINAL);
	} else {
		conn_fault_note(CONN_FAULT_PASSING); /* the first contact's doubt is gone */
	}
}

int client_send(struct client *c, int argc, const char **argv, const size_t *lens,
                int64_t deadline_ms, char *err, size_t errlen)
{
	char *cmd;
	size_t len;

	if (c->broken) {
		snprintf(err, errlen, "the connection to %s was cut short", c->srv->name);
		return -1;
	}
	if (resp_format(&cmd, &len, argc, argv, lens) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = conn_write_all(c->conn, cmd, len, deadline_ms, err, errlen);
	explicit_bzero(cmd, len); /* it may be AUTH: no copy of the password stays behind */
	free(cmd);
	if (rc != CONN_OK)
		c->broken = 1; /* part of a request may be on its way */
	return rc == CONN_OK ? 0 : -1;
}

/* A reply that is not RESP: another kind of server on that port (an HTTP server
 * answers "HTTP/1.1 400"). Name it and where; waiting will not fix it. */
static void not_resp(const struct client *c, char *err, size_t errlen)
{
	char why[256];

	log_reason(why, sizeof why, "%s", err);
	log_reason(err, errlen, "%s: %s: is this a Redis server?", c->srv->name, why);
	conn_fault_note(CONN_FAULT_FINAL);
}

/* A server at its maxclients accepts the connection, writes this error and closes it,
 * before reading anything: the first reply, whatever was sent (AUTH, SELECT, a script,
 * SUBSCRIBE, BLPOP). Not the request's answer: a refused connection, which passes (a
 * connection is freed), not a wrong password nor a server error. */
static int refused_connection(struct client *c, struct resp_reply **reply, char *err, size_t errlen)
{
	if ((*reply)->type != RESP_ERROR || !resp_is_error(*reply, "ERR") ||
	    !strstr((*reply)->str, "max number of clients reached"))
		return 0;
	resp_free(*reply);
	*reply = NULL;
	snprintf(err, errlen,
	         "%s refused the connection: max number of clients reached (its maxclients)",
	         c->srv->name);
	c->broken = c->refused = 1;
	conn_fault_note(CONN_FAULT_PASSING);
	return 1;
}

int client_recv(struct client *c, int64_t deadline_ms, struct resp_reply **reply, char *err,
                size_t errlen)
{
	char buf[4096];
	int64_t start = clock_ms();

	for (;;) {
		int got = resp_reader_get(c->rd, reply, err, errlen);
		if (got == 1 && !c->replied) {
			c->replied = 1;
			server_heard(c->srv);
			if (refused_connection(c, reply, err, errlen))
				return -1;
		}
		if (got < 0)
			not_resp(c, err, errlen);
		if (got != 0)
			return got;
		ssize_t n = conn_read(c->conn, buf, sizeof buf, deadline_ms, err, errlen);
		if (n == CONN_TIMEOUT) {
			/* The whole wait for this reply, not the last read's share of it (a reply
			 * that came in parts would say "after 0 ms"). */
			int64_t waited = clock_ms() - start;
			snprintf(err, errlen, "read from %s: timed out after %lld ms", c->srv->name,
			         (long long)(waited > 0 ? waited : 0));
			return 0;
		}
		if (n == CONN_ABORT)
			return CONN_ABORT;
		if (n == CONN_EOF) {
			snprintf(err, errlen, "%s closed the connection", c->srv->name);
			add_tls_hint(c, err, errlen);
			return -1;
		}
		if (n < 0) {
			add_tls_hint(c, err, errlen);
			return -1;
		}
		if (tls_alert(c, buf, n)) {
			snprintf(err, errlen, "%s answered with TLS (is it a TLS port?%s",
			         c->srv->name, tls_hint(c));
			conn_fault_note(CONN_FAULT_FINAL);
			return -1;
		}
		c->heard = 1;
		if (resp_reader_feed(c->rd, buf, (size_t)n) < 0) {
			snprintf(err, errlen, "protocol error: %s", resp_reader_why(c->rd));
			not_resp(c, err, errlen); /* final: waiting will not make it a reply */
			return -1;
		}
	}
}

void client_set_asking(struct client *c, int on)
{
	c->asking = on;
}

int client_call(struct client *c, int argc, const char **argv, const size_t *lens,
                int64_t deadline_ms, struct resp_reply **reply, char *err, size_t errlen)
{
	*reply = NULL;
	if (c->asking) {
		const char *ask[] = {"ASKING"};
		size_t ask_len[] = {6};
		c->asking = 0;
		int rc = client_call(c, 1, ask, ask_len, deadline_ms, reply, err, errlen);
		c->asking = 1;
		if (rc < 0)
			return -1;
		int ok = (*reply)->type == RESP_STATUS;
		resp_free(*reply);
		*reply = NULL;
		if (!ok) {
			snprintf(err, errlen, "%s refused ASKING", c->srv->name);
			return -1;
		}
	}
	if (client_send(c, argc, argv, lens, deadline_ms, err, errlen) < 0)
		return -1;
	/* Replies come in request order: first skip those an abort left unread. */
	int got;
	while ((got = client_recv(c, deadline_ms, reply, err, errlen)) == 1 && c->unanswered > 0) {
		c->unanswered--;
		resp_free(*reply);
		*reply = NULL;
	}
	if (got == 0) {
		snprintf(err, errlen, "%s did not answer %s in time", c->srv->name, argv[0]);
		conn_fault_note(CONN_FAULT_PASSING); /* busy, paused: may answer later */
	}
	if (got == 0 || got == CONN_ABORT)
		c->unanswered++; /* sent in full; only the reply is missing */
	else if (got != 1)       /* the server may have run it all the same (unless it refused the
	                          * connection) */
		c->broken = 1, c->lost = !c->refused;
	if (got != 1)
		return -1;
	/* One request, one reply: anything more is a confused or hostile server. */
	if (resp_reader_pending(c->rd) != 0) {
		c->broken = 1;
		snprintf(err, errlen, "protocol error: unexpected data after the reply from %s",
		         c->srv->name);
		resp_free(*reply);
		*reply = NULL;
		return -1;
	}
	return 0;
}

int client_send_owed(struct client *c, int argc, const char **argv, const size_t *lens,
                     int64_t deadline_ms, char *err, size_t errlen)
{
	if (client_send(c, argc, argv, lens, deadline_ms, err, errlen) < 0)
		return -1;
	c->unanswered++;
	return 0;
}

static int auth_error(const struct resp_reply *r)
{
	return resp_is_error(r, "WRONGPASS") || resp_is_error(r, "NOAUTH") ||
	       resp_is_error(r, "NOPERM") || resp_is_error(r, "ERR");
}

static int64_t capped(int64_t t, int64_t cap)
{
	return t < cap ? t : cap;
}

/* AUTH's arguments, the password revealed into pw (the caller wipes it): argc. */
static int auth_args(const struct server *srv, char pw[SECRET_MAX + 1], const char *argv[3],
                     size_t lens[3])
{
	size_t pwlen = secret_reveal(pw, SECRET_MAX + 1);

	argv[0] = "AUTH";
	lens[0] = 4;
	if (!srv->user) {
		argv[1] = pw;
		lens[1] = pwlen;
		return 2;
	}
	argv[1] = srv->user;
	lens[1] = strlen(srv->user);
	argv[2] = pw;
	lens[2] = pwlen;
	return 3;
}

/* Does text hold any piece of the password (PW_PIECE bytes in a row, or all of a shorter
 * one)? A server may quote it cut short (Redis's "unknown command ... with args
 * beginning with:" stops at 128 bytes), so the whole password is not the only leak. */
#define PW_PIECE 4
static int holds_piece(const char *text, size_t len, const char *pw, size_t pwlen)
{
	size_t piece = pwlen < PW_PIECE ? pwlen : PW_PIECE;

	for (size_t i = 0; piece > 0 && i + piece <= pwlen; i++)
		if (memmem(text, len, pw + i, piece))
			return 1;
	return 0;
}

int client_auth_unset(const struct resp_reply *r)
{
	/* Redis and Valkey: "ERR AUTH <password> called without any password configured
	 * for the default user" (no code of its own); Redis 5: "ERR Client sent AUTH, but
	 * no password is set" */
	return resp_is_error(r, "ERR") &&
	       (strstr(r->str, "without any password") || strstr(r->str, "no password is set"));
}

/* AUTH's reply: CLIENT_OK, or CLIENT_AUTH or CLIENT_ERR with the reason. */
static int auth_reply(const struct server *srv, const struct resp_reply *r, char *err,
                      size_t errlen)
{
	char pw[SECRET_MAX + 1];

	if (r->type != RESP_ERROR)
		return CLIENT_OK;
	/* Never echo the server's text blindly: it is about our secret. Redis's own words
	 * are passed on only when no piece of it is in them (e.g. "AUTH <password> called
	 * without any password configured"). */
	size_t pwlen = secret_reveal(pw, sizeof pw);
	if (!srv->user && client_auth_unset(r)) {
		/* A password for a server that has none (Redis: "ERR AUTH <password> called
		 * without any password configured for the default user"): no wait, no retry
		 * fixes it, and a careful user's password says the server meant is not this
		 * unprotected one (another server on that address?). The configuration does
		 * not fit the server, as a database it lacks: 64, not "unavailable". */
		explicit_bzero(pw, sizeof pw);
		log_reason(err, errlen,
		           "%s has no password set, yet rlock was given one%s%s%s: the server "
		           "meant is another, or this one is unprotected (then give no password)",
		           srv->name, srv->creds_from ? " (" : "",
		           srv->creds_from ? srv->creds_from : "", srv->creds_from ? ")" : "");
		conn_fault_note(CONN_FAULT_FINAL | CONN_FAULT_CONFIG | CONN_FAULT_NOPASS);
		return CLIENT_ERR;
	}
	int echo = !resp_is_error(r, "WRONGPASS") && !resp_is_error(r, "NOPERM") && pwlen > 0 &&
	           !holds_piece(r->str, strlen(r->str), pw, pwlen);
	explicit_bzero(pw, sizeof pw);
	log_reason(err, errlen, "authentication to %s failed: %s%s%s%s", srv->name,
	           resp_is_error(r, "WRONGPASS") ? "wrong user name or password"
	           : resp_is_error(r, "NOPERM")  ? "permission denied (NOPERM)"
	           : echo                        ? r->str
	                                         : "server refused AUTH",
	           srv->creds_from ? " (" : "", srv->creds_from ? srv->creds_from : "",
	           srv->creds_from ? ")" : "");
	return auth_error(r) ? CLIENT_AUTH : CLIENT_ERR;
}

/* SELECT's reply: CLIENT_OK, or CLIENT_AUTH or CLIENT_ERR with the reason. */
static int select_reply(const struct server *srv, const struct resp_reply *r, char *err,
                        size_t errlen)
{
	if (r->type != RESP_ERROR)
		return CLIENT_OK;
	if (resp_is_noauth(r))
		snprintf(err, errlen,
		         "SELECT %d on %s: the server requires a password (NOAUTH); see "
		         "--password-file",
		         srv->db, srv->name);
	else if (resp_is_error(r, "ERR") && strstr(r->str, "cluster mode")) {
		/* The URL's database is wrong for this server, not the server down: a Redis
		 * Cluster has database 0 only ("ERR SELECT is not allowed in cluster mode"). */
		snprintf(err, errlen,
		         "database %d in the URL: %s is a Redis Cluster node, and a Cluster has "
		         "only database 0 (drop /%d from the URL)",
		         srv->db, srv->name, srv->db);
		conn_fault_note(CONN_FAULT_FINAL | CONN_FAULT_CONFIG);
		return CLIENT_ERR;
	} else if (resp_is_error(r, "ERR") && strstr(r->str, "out of range")) {
		/* The same: a database past the server's `databases` ("ERR DB index is out
		 * of range"), the URL's to fix. */
		snprintf(err, errlen,
		         "database %d in the URL: %s has no such database (see its `databases` "
		         "setting, 16 by default)",
		         srv->db, srv->name);
		conn_fault_note(CONN_FAULT_FINAL | CONN_FAULT_CONFIG);
		return CLIENT_ERR;
	} else
		log_reason(err, errlen, "SELECT %d on %s failed: %s", srv->db, srv->name, r->str);
	if (resp_is_error(r, "BUSY") || resp_is_error(r, "LOADING"))
		conn_fault_note(CONN_FAULT_PASSING); /* a script runs, a dataset loads: it ends */
	return (resp_is_noauth(r) || resp_is_error(r, "NOPERM")) ? CLIENT_AUTH : CLIENT_ERR;
}

/* The set-up commands after the connect (AUTH when a password is set, SELECT when db is
 * not 0): sent with client_send before deadline_ms, or, with call, each also answered
 * and checked. Returns the number sent (replies owed), or CLIENT_AUTH/CLIENT_ERR. */
static int setup(struct client *c, int call, int64_t deadline_ms, char *err, size_t errlen)
{
	const struct server *srv = c->srv;
	struct resp_reply *r = NULL;
	int sent = 0, rc = CLIENT_OK;

	if (srv->has_password) {
		char pw[SECRET_MAX + 1];
		const char *argv[3];
		size_t lens[3];
		int argc = auth_args(srv, pw, argv, lens);
		int failed = call ? client_call(c, argc, argv, lens, deadline_ms, &r, err, errlen)
		                  : client_send(c, argc, argv, lens, deadline_ms, err, errlen);
		explicit_bzero(pw, sizeof pw);
		if (failed < 0)
			return CLIENT_ERR;
		if (r)
			rc = auth_reply(srv, r, err, errlen);
		resp_free(r);
		r = NULL;
		if (rc != CLIENT_OK)
			return rc;
		sent++;
	}
	if (srv->db != 0) {
		char dbbuf[16];
		int n = snprintf(dbbuf, sizeof dbbuf, "%d", srv->db);
		const char *argv[2] = {"SELECT", dbbuf};
		size_t lens[2] = {6, (size_t)n};
		if ((call ? client_call(c, 2, argv, lens, deadline_ms, &r, err, errlen)
		          : client_send(c, 2, argv, lens, deadline_ms, err, errlen)) < 0)
			return CLIENT_ERR;
		if (r)
			rc = select_reply(srv, r, err, errlen);
		resp_free(r);
		if (rc != CLIENT_OK)
			return rc;
		sent++;
	}
	return sent;
}

/* INFO server's reply (srv->identify): its run_id into c->run_id, CLIENT_OK; or
 * CLIENT_AUTH (NOPERM: the ACL user may not run INFO) or CLIENT_ERR with the reason. */
static int info_reply(struct client *c, const struct resp_reply *r, char *err, size_t errlen)
{
	const char *p = r->type == RESP_STRING ? strstr(r->str, "run_id:") : NULL;
	size_t n = p ? strspn(p + 7, "0123456789abcdefABCDEF") : 0;

	if (n == 40) {
		memcpy(c->run_id, p + 7, 40);
		c->run_id[40] = '\0';
		/* its mode: a Cluster node or a sentinel is no Redlock node (quorum.c). Redis
		 * says redis_mode, Valkey 8 server_mode (check.c reads both too). */
		const char *m = strstr(r->str, "redis_mode:");
		size_t at = 11;
		if (!m) {
			m = strstr(r->str, "server_mode:");
			at = 12;
		}
		size_t ml = m ? strspn(m + at, "abcdefghijklmnopqrstuvwxyz") : 0;
		snprintf(c->mode, sizeof c->mode, "%.*s", (int)(ml < sizeof c->mode ? ml : 0),
		         m ? m + at : "");
		return CLIENT_OK;
	}
	/* A node that wants a password the others do not (none given): said as one server
	 * says it, not as an ACL that refuses INFO. */
	if (resp_is_noauth(r)) {
		snprintf(err, errlen,
		         "Redlock node %s: the server requires a password (NOAUTH); see "
		         "--password-file",
		         c->srv->name);
		return CLIENT_AUTH;
	}
	if (r->type == RESP_ERROR && !resp_is_error(r, "NOPERM")) {
		log_reason(err, errlen, "INFO server on Redlock node %s failed: %s", c->srv->name,
		           r->str);
		if (resp_is_error(r, "BUSY") || resp_is_error(r, "LOADING"))
			conn_fault_note(CONN_FAULT_PASSING);
		return CLIENT_ERR;
	}
	snprintf(err, errlen,
	         "Redlock node %s cannot tell who it is (%s), so rlock cannot check that the "
	         "nodes are distinct servers; allow INFO (+info) to rlock's ACL user",
	         c->srv->name,
	         resp_is_error(r, "NOPERM") ? "INFO refused: NOPERM" : "no run_id in INFO server");
	return resp_is_error(r, "NOPERM") ? CLIENT_AUTH : CLIENT_ERR;
}

const char *client_run_id(const struct client *c)
{
	return c->run_id;
}

const char *client_redis_mode(const struct client *c)
{
	return c->mode;
}

static struct client *client_new(const struct server *srv, char *err, size_t errlen)
{
	struct client *c = calloc(1, sizeof *c);

	if (!c || !(c->rd = resp_reader_new())) {
		snprintf(err, errlen, "out of memory");
		free(c);
		return NULL;
	}
	c->srv = srv;
	return c;
}

int client_open(struct client **out, const struct server *srv, int64_t cap_ms, char *err,
                size_t errlen)
{
	struct client *c = client_new(srv, err, errlen);
	int rc = CLIENT_ERR;

	*out = NULL;
	if (!c)
		return CLIENT_ERR;
	int64_t deadline = capped(clock_ms() + srv->connect_timeout_ms, cap_ms);
	if (conn_open(&c->conn, &srv->ep, deadline, cap_ms, err, errlen) != CONN_OK)
		goto fail;
	rc = setup(c, 1, capped(clock_ms() + srv->io_timeout_ms, cap_ms), err, errlen);
	if (rc < 0)
		goto fail;
	*out = c;
	return CLIENT_OK;
fail:
	client_close(c);
	return rc;
}

int client_start(struct client **out, const struct server *srv, int64_t deadline_ms, char *err,
                 size_t errlen)
{
	struct client *c = client_new(srv, err, errlen);

	*out = NULL;
	if (!c)
		return CLIENT_ERR;
	int rc = conn_start(&c->conn, &srv->ep, deadline_ms, err, errlen);
	if (rc != CONN_OK && rc != CONN_AGAIN) {
		client_close(c);
		return CLIENT_ERR;
	}
	c->opening = 1;
	rc = client_continue(c, err, errlen);
	if (rc == CLIENT_OK || rc == CLIENT_AGAIN)
		*out = c;
	else
		client_close(c);
	return rc;
}

int client_continue(struct client *c, char *err, size_t errlen)
{
	if (c->opening == 1) {
		int rc = conn_continue(c->conn, err, errlen);
		if (rc == CONN_AGAIN)
			return CLIENT_AGAIN;
		if (rc != CONN_OK)
			return CLIENT_ERR;
		/* AUTH and SELECT go out together (a fresh socket takes them at once); their
		 * replies come in order. */
		rc = setup(c, 0, clock_ms(), err, errlen);
		if (rc < 0)
			return rc;
		if (c->srv->identify) {
			/* Who it is, in the same round trip (Redlock nodes must be distinct). */
			const char *argv[2] = {"INFO", "server"};
			size_t lens[2] = {4, 6};
			if (client_send(c, 2, argv, lens, clock_ms(), err, errlen) < 0)
				return CLIENT_ERR;
			rc++;
		}
		c->owed = rc;
		c->opening = 2;
		/* The replies are read when they come (POLLIN): one poll loop over several
		 * servers sends every handshake before it reads any. */
		if (rc > 0)
			return CLIENT_AGAIN;
	}
	while (c->opening == 2 && c->owed > 0) {
		struct resp_reply *r = NULL;
		int got = client_recv(c, 0, &r, err, errlen);
		if (got == 0)
			return CLIENT_AGAIN;
		if (got != 1)
			return CLIENT_ERR;
		int info = c->srv->identify && c->owed == 1;
		int auth = c->srv->has_password &&
		           c->owed == 1 + (c->srv->db != 0) + (c->srv->identify != 0);
		int rc = info   ? info_reply(c, r, err, errlen)
		         : auth ? auth_reply(c->srv, r, err, errlen)
		                : select_reply(c->srv, r, err, errlen);
		resp_free(r);
		if (rc != CLIENT_OK)
			return rc;
		c->owed--;
	}
	if (resp_reader_pending(c->rd) != 0) {
		snprintf(err, errlen, "protocol error: unexpected data after the reply from %s",
		         c->srv->name);
		return CLIENT_ERR;
	}
	c->opening = 0;
	return CLIENT_OK;
}

int client_probe(struct client *c)
{
	return c->opening == 1 && conn_probe(c->conn);
}

int client_plaintext(const struct client *c)
{
	return conn_plaintext(c->conn);
}

int client_in_tls_handshake(const struct client *c)
{
	return c->opening == 1 && conn_in_tls_handshake(c->conn);
}

short client_events(const struct client *c)
{
	/* Awaiting the handshake's replies (over TLS the session says what it waits for). */
	if (c->opening == 2 && !c->srv->tls.enabled)
		return POLLIN;
	return conn_events(c->conn);
}

int64_t client_wake_ms(const struct client *c)
{
	return c->opening == 1 ? conn_wake_ms(c->conn) : INT64_MAX;
}

int client_broken(const struct client *c)
{
	return c->broken;
}

int client_lost(const struct client *c)
{
	return c->lost;
}

int client_fd(const struct client *c)
{
	return conn_fd(c->conn);
}

int client_buffered(const struct client *c)
{
	return resp_reader_pending(c->rd) > 0 || conn_pending(c->conn);
}

void client_close(struct client *c)
{
	if (!c)
		return;
	conn_close(c->conn);
	resp_reader_free(c->rd);
	free(c);
}
