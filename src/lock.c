#include "lock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* The protocol is the five scripts in src/lua/ (one screen): each checks and changes
 * in one atomic step, so there is no check-then-set race, no SET without a TTL, and no
 * delete or extension of a lease whose token is not ours. The build embeds them with
 * their SHA-1 (scripts.h), so the fast path needs no hashing at run time. */
#include "scripts.h"

enum { S_ACQUIRE, S_RENEW, S_RELEASE, S_STATUS, S_BREAK, S_FENCE, S_COUNT };

static const struct {
	const char *text;
	size_t len;
	const char *sha;
} scripts[S_COUNT] = {
    {lua_acquire, sizeof lua_acquire - 1, LUA_ACQUIRE_SHA},
    {lua_renew, sizeof lua_renew - 1, LUA_RENEW_SHA},
    {lua_release, sizeof lua_release - 1, LUA_RELEASE_SHA},
    {lua_status, sizeof lua_status - 1, LUA_STATUS_SHA},
    {lua_break, sizeof lua_break - 1, LUA_BREAK_SHA},
    {lua_fence, sizeof lua_fence - 1, LUA_FENCE_SHA},
};

int lock_request_argv(const struct lock_request *q, int full, const char **argv, size_t *lens)
{
	int argc = 0;

	argv[argc++] = full ? "EVAL" : "EVALSHA";
	argv[argc++] = full ? scripts[q->script].text : scripts[q->script].sha;
	argv[argc++] = q->nk;
	for (int i = 0; i < q->nkeys; i++)
		argv[argc++] = q->keys[i];
	for (int i = 0; i < q->nargs; i++)
		argv[argc++] = q->args[i];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	if (full)
		lens[1] = scripts[q->script].len;
	return argc;
}

static void request(struct lock_request *q, int script, int nkeys, int nargs)
{
	q->script = script;
	q->nkeys = nkeys;
	q->nargs = nargs;
	snprintf(q->nk, sizeof q->nk, "%d", nkeys);
}

void lock_request_acquire(struct lock_request *q, const struct lock *l, const struct lock_meta *m)
{
	snprintf(q->num[0], sizeof q->num[0], "%lld", (long long)l->ttl_ms);
	snprintf(q->num[1], sizeof q->num[1], "%ld", m->pid);
	snprintf(q->num[2], sizeof q->num[2], "%lld", m->start_unix_ms);
	const char *keys[] = {l->key, l->fence_key, l->owner_key};
	const char *args[] = {l->token,  q->num[0], "host",  m->host,  "pid",
	                      q->num[1], "user",    m->user, "cmd",    m->cmd,
	                      "start",   q->num[2], "ttl",   q->num[0]};
	request(q, S_ACQUIRE, 3, 14);
	memcpy(q->keys, keys, sizeof keys);
	memcpy(q->args, args, sizeof args);
}

void lock_request_renew(struct lock_request *q, const struct lock *l)
{
	snprintf(q->num[0], sizeof q->num[0], "%lld", (long long)l->ttl_ms);
	request(q, S_RENEW, 2, 2);
	q->keys[0] = l->key;
	q->keys[1] = l->owner_key;
	q->args[0] = l->token;
	q->args[1] = q->num[0];
}

void lock_request_release(struct lock_request *q, const struct lock *l, int64_t keep_ms)
{
	snprintf(q->num[0], sizeof q->num[0], "%lld", (long long)(keep_ms > 0 ? keep_ms : 0));
	request(q, S_RELEASE, 2, 3);
	q->keys[0] = l->key;
	q->keys[1] = l->owner_key;
	q->args[0] = l->token;
	q->args[1] = q->num[0];
	q->args[2] = l->channel;
}

void lock_request_holder(struct lock_request *q, const struct lock *l, int brk)
{
	request(q, brk ? S_BREAK : S_STATUS, 3, brk ? 1 : 0);
	q->keys[0] = l->key;
	q->keys[1] = l->owner_key;
	q->keys[2] = l->fence_key;
	q->args[0] = l->channel;
}

void lock_request_fence(struct lock_request *q, const struct lock *l, long long fence)
{
	snprintf(q->num[0], sizeof q->num[0], "%lld", fence);
	request(q, S_FENCE, 1, 1);
	q->keys[0] = l->fence_key;
	q->args[0] = q->num[0];
}

/* Run a script: EVALSHA first (one small request), EVAL when the server lost its
 * script cache (restart, failover, SCRIPT FLUSH). Returns 0 with *reply (possibly a
 * server ERROR reply other than NOSCRIPT), or -1. */
static int eval(struct client *c, const struct lock_request *q, int64_t deadline_ms,
                struct resp_reply **reply, char *err, size_t errlen)
{
	const char *argv[LOCK_ARGV_MAX];
	size_t lens[LOCK_ARGV_MAX];

	int argc = lock_request_argv(q, 0, argv, lens);
	if (client_call(c, argc, argv, lens, deadline_ms, reply, err, errlen) < 0)
		return -1;
	if (!resp_is_error(*reply, "NOSCRIPT"))
		return 0;
	resp_free(*reply);
	argc = lock_request_argv(q, 1, argv, lens);
	return client_call(c, argc, argv, lens, deadline_ms, reply, err, errlen);
}

/* A server error reply → LOCK_ERR, LOCK_DENIED with a readable reason, or
 * LOCK_REDIRECT with the reply itself (matched by code, never by text). */
static int server_error(const struct resp_reply *r, const char *what, char *err, size_t errlen)
{
	static const char *const routing[] = {"MOVED",    "ASK",         "READONLY", "MASTERDOWN",
	                                      "TRYAGAIN", "CLUSTERDOWN", "LOADING"};

	for (size_t i = 0; i < sizeof routing / sizeof routing[0]; i++) {
		if (resp_is_error(r, routing[i])) {
			snprintf(err, errlen, "%.300s", r->str);
			return LOCK_REDIRECT;
		}
	}
	if (resp_is_noauth(r)) {
		snprintf(err, errlen,
		         "%s: the server requires a password (NOAUTH); see --password-file", what);
		return LOCK_DENIED;
	}
	if (resp_is_error(r, "NOPERM") || resp_is_error(r, "WRONGPASS")) {
		snprintf(err, errlen, "%s: permission denied: %.300s", what, r->str);
		return LOCK_DENIED;
	}
	snprintf(err, errlen, "%s: server error: %.300s", what, r->str);
	return LOCK_ERR;
}

int lock_init(struct lock *l, const char *prefix, const char *name, int64_t ttl_ms)
{
	unsigned char rnd[LOCK_TOKEN_LEN / 2];
	static const char hex[] = "0123456789abcdef";
	size_t got = 0;

	memset(l, 0, sizeof *l);
	snprintf(l->key, sizeof l->key, "%.128s{%.512s}", prefix, name);
	snprintf(l->fence_key, sizeof l->fence_key, "%.700s:fence", l->key);
	snprintf(l->owner_key, sizeof l->owner_key, "%.700s:owner", l->key);
	snprintf(l->channel, sizeof l->channel, "%.700s:released", l->key);
	l->ttl_ms = ttl_ms;
	while (got < sizeof rnd) {
		ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof rnd; i++) {
		l->token[2 * i] = hex[rnd[i] >> 4];
		l->token[2 * i + 1] = hex[rnd[i] & 15];
	}
	l->token[LOCK_TOKEN_LEN] = '\0';
	return 0;
}

static void copy_field(char *dst, size_t n, const struct resp_reply *r)
{
	dst[0] = '\0';
	if (r && (r->type == RESP_STRING || r->type == RESP_STATUS))
		snprintf(dst, n, "%s", r->str);
	else if (r && r->type == RESP_INTEGER)
		snprintf(dst, n, "%lld", r->integer);
}

/* Fill *h from {token-or-flag, pttl, host, pid, user, cmd, start, ttl, fence}. */
static void fill_holder(struct holder *h, const struct resp_reply *r)
{
	char fence[32];

	memset(h, 0, sizeof *h);
	copy_field(h->token, sizeof h->token, r->element[0]);
	h->pttl_ms = r->element[1]->type == RESP_INTEGER ? r->element[1]->integer : -2;
	h->held = h->pttl_ms != -2;
	copy_field(h->host, sizeof h->host, r->element[2]);
	copy_field(h->pid, sizeof h->pid, r->element[3]);
	copy_field(h->user, sizeof h->user, r->element[4]);
	copy_field(h->cmd, sizeof h->cmd, r->element[5]);
	copy_field(h->start, sizeof h->start, r->element[6]);
	copy_field(h->ttl, sizeof h->ttl, r->element[7]);
	copy_field(fence, sizeof fence, r->element[8]);
	h->fence = strtoll(fence, NULL, 10);
	h->kept = r->elements > 9 && r->element[9]->type == RESP_STRING;
}

static int is_array(const struct resp_reply *r, size_t n)
{
	return r->type == RESP_ARRAY && r->elements == n;
}

int lock_decode_acquire(const struct resp_reply *r, struct lock *l, struct holder *h, char *err,
                        size_t errlen)
{
	if (r->type == RESP_ERROR)
		return server_error(r, "acquire", err, errlen);
	if (is_array(r, 2) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 1 &&
	    r->element[1]->type == RESP_INTEGER) {
		l->fence = r->element[1]->integer;
		return LOCK_OK;
	}
	if (is_array(r, 9) && r->element[0]->type == RESP_INTEGER) {
		fill_holder(h, r);
		h->held = 1;
		h->token[0] = '\0';
		return LOCK_BUSY;
	}
	snprintf(err, errlen, "acquire: unexpected reply from the server");
	return LOCK_ERR;
}

int lock_decode_int(const struct resp_reply *r, const char *what, long long *v, char *err,
                    size_t errlen)
{
	if (r->type == RESP_ERROR)
		return server_error(r, what, err, errlen);
	if (r->type != RESP_INTEGER) {
		snprintf(err, errlen, "%s: unexpected reply from the server", what);
		return LOCK_ERR;
	}
	*v = r->integer;
	return LOCK_OK;
}

int lock_decode_holder(const struct resp_reply *r, const char *what, struct holder *h, char *err,
                       size_t errlen)
{
	if (r->type == RESP_ERROR)
		return server_error(r, what, err, errlen);
	if (!is_array(r, 10)) {
		snprintf(err, errlen, "unexpected reply from the server");
		return LOCK_ERR;
	}
	fill_holder(h, r);
	return LOCK_OK;
}

int lock_acquire(struct client *c, struct lock *l, const struct lock_meta *m, int64_t deadline_ms,
                 struct holder *h, char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r = NULL;

	lock_request_acquire(&q, l, m);
	if (eval(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_acquire(r, l, h, err, errlen);
	resp_free(r);
	return rc;
}

/* A script that answers 0 (not ours), 1 or 2 (done). */
static int int_script(struct client *c, const struct lock_request *q, const char *what,
                      int64_t deadline_ms, char *err, size_t errlen)
{
	struct resp_reply *r = NULL;
	long long v = 0;

	if (eval(c, q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_int(r, what, &v, err, errlen);
	resp_free(r);
	if (rc != LOCK_OK)
		return rc;
	return v == 0 ? LOCK_NOTOURS : LOCK_OK;
}

int lock_renew(struct client *c, const struct lock *l, int64_t deadline_ms, char *err,
               size_t errlen)
{
	struct lock_request q;

	lock_request_renew(&q, l);
	return int_script(c, &q, "renew", deadline_ms, err, errlen);
}

int lock_release(struct client *c, const struct lock *l, int64_t keep_ms, int64_t deadline_ms,
                 char *err, size_t errlen)
{
	struct lock_request q;

	lock_request_release(&q, l, keep_ms);
	return int_script(c, &q, "release", deadline_ms, err, errlen);
}

static int holder_script(struct client *c, int brk, const struct lock *l, int64_t deadline_ms,
                         struct holder *h, char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;

	lock_request_holder(&q, l, brk);
	if (eval(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_holder(r, brk ? "break" : "status", h, err, errlen);
	resp_free(r);
	return rc;
}

int lock_status(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *h,
                char *err, size_t errlen)
{
	return holder_script(c, 0, l, deadline_ms, h, err, errlen);
}

int lock_break(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *h,
               char *err, size_t errlen)
{
	return holder_script(c, 1, l, deadline_ms, h, err, errlen);
}
