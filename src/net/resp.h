/* SPDX-License-Identifier: MIT */
/* The one place that includes hiredis: format commands, parse replies into rlock's
 * own small reply type, classify errors by their code. No I/O here.
 *
 * rlock's replies are tiny, so the reader caps what it will buffer for one reply
 * (hiredis itself has no cap on bulk length) and reports leftovers. */
#ifndef RLOCK_RESP_H
#define RLOCK_RESP_H

#include <stddef.h>

#define RESP_MAX_REPLY    ((size_t)1024 * 1024) /* bytes buffered for one reply */
#define RESP_MAX_ELEMENTS ((size_t)65536)       /* elements in one array */
/* Arrays nested inside the outermost one. rlock's deepest reply is --list's SCAN
 * (cursor, [names]): depth 1; 4 leaves room and stays far from any stack limit. */
#define RESP_MAX_DEPTH ((size_t)4)

enum resp_type { RESP_STRING, RESP_STATUS, RESP_ERROR, RESP_INTEGER, RESP_NIL, RESP_ARRAY };

struct resp_reply {
	enum resp_type type;
	long long integer;
	size_t len; /* STRING, STATUS, ERROR */
	char *str;  /* NUL-terminated copy */
	size_t elements;
	struct resp_reply **element;
};

void resp_free(struct resp_reply *r);

/* Format a command into a freshly allocated buffer (*out, free with free()).
 * Returns 0 or -1 (out of memory). */
int resp_format(char **out, size_t *outlen, int argc, const char **argv, const size_t *lens);

struct resp_reader;

struct resp_reader *resp_reader_new(void);
void resp_reader_free(struct resp_reader *rd);

/* Feed bytes from the server. -1 when what came cannot be a reply of a Redis server to
 * rlock (resp_reader_why): longer than RESP_MAX_REPLY, or announcing so, or a type
 * RESP2 has not. Final: no server that sends it will send a reply. */
int resp_reader_feed(struct resp_reader *rd, const char *buf, size_t len);

/* Why resp_reader_feed refused. */
const char *resp_reader_why(const struct resp_reader *rd);

/* 1 and *out when a whole reply is available, 0 when more bytes are needed, -1 on a
 * protocol error (reason in err). */
int resp_reader_get(struct resp_reader *rd, struct resp_reply **out, char *err, size_t errlen);

/* Bytes fed but not yet consumed by a complete reply. */
size_t resp_reader_pending(const struct resp_reader *rd);

/* For an ERROR reply: does its code (first word, e.g. "NOSCRIPT") equal code? */
int resp_is_error(const struct resp_reply *r, const char *code);

/* Does this error say the connection must authenticate first? NOAUTH, or the reply
 * Redis 7 gives instead of NOAUTH to a long command from an unauthenticated client
 * ("ERR Protocol error: unauthenticated multibulk length": no code of its own). */
int resp_is_noauth(const struct resp_reply *r);

/* The hiredis version string, for --version. */
const char *resp_hiredis_version(void);

/* The start of a Cluster node's refusal of a script's command on a key it does not have
 * while the key's slot migrates (no code of its own: Redis and Valkey say it so). */
#define CLUSTER_NONLOCAL "ERR Script attempted to access a non local key"

#endif
