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
	int64_t connect_timeout_ms;
	int64_t io_timeout_ms;
	char name[300]; /* for messages: "127.0.0.1:6379", "/tmp/r.sock" */
};

struct client;

enum { CLIENT_OK = 0, CLIENT_ERR = -1, CLIENT_AUTH = -2 /* NOAUTH/WRONGPASS/NOPERM on AUTH */ };

/* Connect, AUTH (when a password is set), SELECT (when db != 0): the connection
 * within connect_timeout, the rest within io_timeout, and everything before cap_ms
 * (CLIENT_NO_CAP for none; the renewal thread caps by its loss deadline). Returns
 * CLIENT_OK, CLIENT_AUTH or CLIENT_ERR. */
#define CLIENT_NO_CAP INT64_MAX
int client_open(struct client **out, const struct server *srv, int64_t cap_ms, char *err,
                size_t errlen);

/* Send one command and read its reply before the deadline. An ERROR reply is a
 * successful call (*reply has type RESP_ERROR). Returns 0, or -1 with the reason
 * (the connection is then unusable: close it). Leftover bytes after the reply are a
 * protocol error. */
int client_call(struct client *c, int argc, const char **argv, const size_t *lens,
                int64_t deadline_ms, struct resp_reply **reply, char *err, size_t errlen);

/* Pub/sub: send without waiting for the reply, and read one pushed reply. recv
 * returns 1 with *reply, 0 at the deadline, -1 on error. */
int client_send(struct client *c, int argc, const char **argv, const size_t *lens,
                int64_t deadline_ms, char *err, size_t errlen);
int client_recv(struct client *c, int64_t deadline_ms, struct resp_reply **reply, char *err,
                size_t errlen);

int client_fd(const struct client *c);
/* True when a reply may already be buffered (check before polling the fd). */
int client_buffered(const struct client *c);

void client_close(struct client *c);

#endif
