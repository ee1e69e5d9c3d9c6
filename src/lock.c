/* SPDX-License-Identifier: MIT */
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

enum { S_ACQUIRE, S_RENEW, S_RELEASE, S_STATUS, S_BREAK, S_COUNT };

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
};

/* Run script s: EVALSHA first (one small request), EVAL when the server lost its
 * script cache (restart, failover, SCRIPT FLUSH). Returns 0 with *reply (possibly a
 * server ERROR reply other than NOSCRIPT), or -1. */
static int eval(struct client *c, int s, int nkeys, const char **keys, int nargs, const char **args,
                int64_t deadline_ms, struct resp_reply **reply, char *err, size_t errlen)
{
	const char *argv[24];
	size_t lens[24];
	char nk[16];
	int argc = 0;

	if (3 + nkeys + nargs > 24) {
		snprintf(err, errlen, "internal error: too many script arguments");
		return -1;
	}
	argv[argc++] = "EVALSHA";
	argv[argc++] = scripts[s].sha;
	snprintf(nk, sizeof nk, "%d", nkeys);
	argv[argc++] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[argc++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[argc++] = args[i];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	if (client_call(c, argc, argv, lens, deadline_ms, reply, err, errlen) < 0)
		return -1;
	if (!resp_is_error(*reply, "NOSCRIPT"))
		return 0;
	resp_free(*reply);
	argv[0] = "EVAL";
	lens[0] = 4;
	argv[1] = scripts[s].text;
	lens[1] = scripts[s].len;
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
	char ttl[24], pid[24], start[24];
	struct resp_reply *r = NULL;
	int rc;

	snprintf(ttl, sizeof ttl, "%lld", (long long)l->ttl_ms);
	snprintf(pid, sizeof pid, "%ld", m->pid);
	snprintf(start, sizeof start, "%lld", m->start_unix_ms);
	const char *keys[] = {l->key, l->fence_key, l->owner_key};
	const char *args[] = {l->token, ttl,   "host", m->host, "pid", pid,   "user",
	                      m->user,  "cmd", m->cmd, "start", start, "ttl", ttl};
	if (eval(c, S_ACQUIRE, 3, keys, 14, args, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	rc = lock_decode_acquire(r, l, h, err, errlen);
	resp_free(r);
	return rc;
}

static int check_int(struct resp_reply *r, const char *what, char *err, size_t errlen, long long *v)
{
	int rc = lock_decode_int(r, what, v, err, errlen);

	resp_free(r);
	return rc;
}

int lock_renew(struct client *c, const struct lock *l, int64_t deadline_ms, char *err,
               size_t errlen)
{
	char ttl[24];
	struct resp_reply *r;
	long long v = 0;

	snprintf(ttl, sizeof ttl, "%lld", (long long)l->ttl_ms);
	const char *keys[] = {l->key, l->owner_key};
	const char *args[] = {l->token, ttl};
	if (eval(c, S_RENEW, 2, keys, 2, args, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = check_int(r, "renew", err, errlen, &v);
	if (rc != LOCK_OK)
		return rc;
	return v == 1 ? LOCK_OK : LOCK_NOTOURS;
}

int lock_release(struct client *c, const struct lock *l, int64_t keep_ms, int64_t deadline_ms,
                 char *err, size_t errlen)
{
	char keep[24];
	struct resp_reply *r;
	long long v = 0;

	snprintf(keep, sizeof keep, "%lld", (long long)(keep_ms > 0 ? keep_ms : 0));
	const char *keys[] = {l->key, l->owner_key};
	const char *args[] = {l->token, keep, l->channel};
	if (eval(c, S_RELEASE, 2, keys, 3, args, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = check_int(r, "release", err, errlen, &v);
	if (rc != LOCK_OK)
		return rc;
	return v == 0 ? LOCK_NOTOURS : LOCK_OK;
}

static int holder_script(struct client *c, int s, const struct lock *l, int64_t deadline_ms,
                         struct holder *h, char *err, size_t errlen)
{
	struct resp_reply *r;
	int rc;
	const char *keys[] = {l->key, l->owner_key, l->fence_key};
	const char *args[] = {l->channel};

	if (eval(c, s, 3, keys, s == S_BREAK ? 1 : 0, args, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	rc = lock_decode_holder(r, s == S_BREAK ? "break" : "status", h, err, errlen);
	resp_free(r);
	return rc;
}

int lock_status(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *h,
                char *err, size_t errlen)
{
	return holder_script(c, S_STATUS, l, deadline_ms, h, err, errlen);
}

int lock_break(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *h,
               char *err, size_t errlen)
{
	return holder_script(c, S_BREAK, l, deadline_ms, h, err, errlen);
}
