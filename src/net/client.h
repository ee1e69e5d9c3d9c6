/* SPDX-License-Identifier: MIT */
/* A connection to one Redis server, ready for commands: conn + resp, AUTH, SELECT.
 * Every call takes an absolute monotonic deadline. Used by one thread at a time. */
#ifndef RLOCK_CLIENT_H
#define RLOCK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "resp.h"

/* Where and how to connect; shared read-only by all threads. */
struct server {
	struct endpoint ep;
	struct tls_opts tls;
	const char *user; /* ACL user, or NULL */
	int has_password; /* AUTH with the password held by secret.h */
	int db;
	/* Redlock: the handshake of client_start also asks who the server is (INFO server,
	 * its run_id: client_run_id); a server that cannot say fails it. */
	int identify;
	int64_t connect_timeout_ms;
	int64_t io_timeout_ms;
	char name[300]; /* for messages: "127.0.0.1:6379", "/tmp/r.sock" */
	/* where the user and the password came from, for messages; or NULL */
	const char *creds_from;
};

struct client;

enum {
	CLIENT_OK = 0,
	CLIENT_ERR = -1,
	CLIENT_AUTH = -2, /* NOAUTH/WRONGPASS/NOPERM on AUTH */
	CLIENT_AGAIN = -3 /* client_start/client_continue: not ready yet, poll again */
};

/* Look srv's host name up once, before deadline_ms, and keep its addresses for every
 * later client_open() of srv in any thread (conn_resolve()): after this, no connect
 * waits on a resolver. Call before threads that share srv start. CLIENT_OK or
 * CLIENT_ERR. */
int client_resolve(struct server *srv, int64_t deadline_ms, char *err, size_t errlen);

/* Connect, AUTH (when a password is set), SELECT (when db != 0): the connection
 * within connect_timeout, the rest within io_timeout, and everything before cap_ms
 * (CLIENT_NO_CAP for none; the renewal thread caps by its loss deadline). Returns
 * CLIENT_OK, CLIENT_AUTH or CLIENT_ERR. */
#define CLIENT_NO_CAP INT64_MAX
int client_open(struct client **out, const struct server *srv, int64_t cap_ms, char *err,
                size_t errlen);

/* client_open without waiting, for one poll loop over several servers (Redlock):
 * client_start begins (conn_start: it waits only for a host not looked up yet, until
 * deadline_ms); client_continue goes on whenever client_fd() is ready for
 * client_events() (calling it early is harmless): the connect, the TLS handshake, then
 * AUTH, SELECT (and INFO, identify) sent together and their replies checked. CLIENT_AGAIN until
 * ready
 * (*out is set), then CLIENT_OK; CLIENT_AUTH or CLIENT_ERR with the reason (after
 * client_start *out is NULL; after client_continue close c). No other call on c before
 * CLIENT_OK. The caller owns the deadline: closing c gives up. */
int client_start(struct client **out, const struct server *srv, int64_t deadline_ms, char *err,
                 size_t errlen);
int client_continue(struct client *c, char *err, size_t errlen);
/* A client_start() connection whose TLS handshake has heard nothing: probe whether a
 * plaintext Redis listens there instead (conn_probe: 1 started, then client_continue
 * as before); client_plaintext(c): 1 once the probe found one (its CLIENT_ERR is then a
 * fault that time cannot fix). */
int client_probe(struct client *c);
int client_plaintext(const struct client *c);
/* 1 while a client_start() connection is in its TLS handshake (or the probe that
 * replaced it): what a deadline that ends it cut short, for the message. */
int client_in_tls_handshake(const struct client *c);

/* The server's run_id (40 hex digits, new at each start) as the handshake of an
 * identify server read it; "" otherwise. */
const char *client_run_id(const struct client *c);
/* Its redis_mode (Valkey 8: server_mode) as the same INFO server said ("standalone",
 * "cluster", "sentinel"), "" when it did not say. */
const char *client_redis_mode(const struct client *c);
short client_events(const struct client *c);
/* While connecting: when client_continue() must be called even if client_fd() is not
 * ready (conn_wake_ms: a host's next address); INT64_MAX when nothing is due. */
int64_t client_wake_ms(const struct client *c);

/* Send one command and read its reply before the deadline. An ERROR reply is a
 * successful call (*reply has type RESP_ERROR). Returns 0, or -1 with the reason.
 * Leftover bytes after the reply are a protocol error.
 * After a failure the connection is done with (close it), with one exception: when
 * the request went out in full and only its reply is missing (deadline, or the
 * thread's abort fd), one more call may follow: the server runs it after the
 * unanswered request, and the stale reply is skipped (how a release follows an
 * acquire whose outcome is unknown). Any other failure makes later calls fail at once. */
int client_call(struct client *c, int argc, const char **argv, const size_t *lens,
                int64_t deadline_ms, struct resp_reply **reply, char *err, size_t errlen);

/* Cluster ASK redirect: while on, every client_call first sends ASKING (a one-shot
 * permission for the next command, so an EVAL after NOSCRIPT gets its own) and fails
 * when it is refused. */
void client_set_asking(struct client *c, int on);

/* Pub/sub: send without waiting for the reply, and read one pushed reply. recv
 * returns 1 with *reply, 0 at the deadline, CONN_ABORT when the thread's abort fd
 * became readable, -1 on error. */
int client_send(struct client *c, int argc, const char **argv, const size_t *lens,
                int64_t deadline_ms, char *err, size_t errlen);
int client_recv(struct client *c, int64_t deadline_ms, struct resp_reply **reply, char *err,
                size_t errlen);

/* Send a request whose reply is not awaited: owed, and skipped by the next call (as
 * one a timeout left unanswered). */
int client_send_owed(struct client *c, int argc, const char **argv, const size_t *lens,
                     int64_t deadline_ms, char *err, size_t errlen);

/* True once a call failed in a way that leaves nothing more to send on c (see
 * client_call): close it. */
int client_broken(const struct client *c);

/* True once a request went out in full and the connection died before its reply: the
 * server may have run it (a lost reply, TRAPS.md). */
int client_lost(const struct client *c);

int client_fd(const struct client *c);
/* True when a reply may already be buffered (check before polling the fd). */
int client_buffered(const struct client *c);

void client_close(struct client *c);

/* Does r, AUTH's error reply to a password without a user name, say the server has no
 * password set? Such a login can never succeed; the callers (one server, a Redlock
 * node, a sentinel) report it as a configuration that does not fit the server:
 * conn_fault_note(CONN_FAULT_FINAL | CONN_FAULT_CONFIG | CONN_FAULT_NOPASS), exit 64. */
int client_auth_unset(const struct resp_reply *r);

#endif
