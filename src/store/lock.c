/* SPDX-License-Identifier: MIT */
#include "lock.h"
#include "client.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "log.h" /* log_reason */
#include "parse.h"

/* The protocol is the scripts in src/store/lua/ (one screen each): each checks and changes
 * in one atomic step, so there is no check-then-set race, no SET without a TTL, and no
 * delete or extension of a lease whose token is not ours. The build embeds them with
 * their SHA-1 (scripts.h), so the fast path needs no hashing at run time.
 * The plain exclusive lock has its own small set (acquire, renew, release); shared
 * holders, permits and the fair queue share the *_sem set (a fair exclusive lock is
 * taken by acquire_sem, then held, renewed and released as a plain one). */
#include "scripts.h"

enum {
	S_ACQUIRE,
	S_RENEW,
	S_RELEASE,
	S_STATUS,
	S_BREAK,
	S_ACQUIRE_SEM,
	S_RENEW_SEM,
	S_RELEASE_SEM,
	S_LEAVE,
	S_FENCE,
	S_HISTORY_READ,
	S_COUNT
};

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
    {lua_acquire_sem, sizeof lua_acquire_sem - 1, LUA_ACQUIRE_SEM_SHA},
    {lua_renew_sem, sizeof lua_renew_sem - 1, LUA_RENEW_SEM_SHA},
    {lua_release_sem, sizeof lua_release_sem - 1, LUA_RELEASE_SEM_SHA},
    {lua_leave, sizeof lua_leave - 1, LUA_LEAVE_SHA},
    {lua_fence, sizeof lua_fence - 1, LUA_FENCE_SHA},
    {lua_history_read, sizeof lua_history_read - 1, LUA_HISTORY_READ_SHA},
};

/* Build the call of script s: copies of its arguments, so the request outlives them.
 * 0, or -1 when they do not fit (reason in err). */
/* The keys of one lock, all PREFIX{NAME}SUFFIX (one hash tag, one Cluster slot): made
 * when a request is built, not kept in struct lock. */
enum {
	K_LOCK,
	K_OWNER,
	K_FENCE,
	K_HOLDERS,
	K_META,
	K_LIMIT,
	K_QUEUE,
	K_QLEASE,
	K_WRITER,
	K_WAITERS,
	K_DONE,
	K_HERE, /* never created: routes the status of a migrating slot (status.lua) */
	K_N
};

static const char *const key_suffix[K_N] = {"",        ":owner",   ":fence", ":holders",
                                            ":meta",   ":limit",   ":queue", ":qlease",
                                            ":writer", ":waiters", ":done",  ":here"};

/* A script's KEYS are keys of l, PREFIX{NAME}SUFFIX, given by their K_... in the order of
 * the K_ enum, leaving out those it does not use: a script declares no key it does not
 * need (while a Cluster slot migrates, a script whose declared keys are not all on one
 * node is refused with TRYAGAIN). request() makes them in the request itself. */
static int request(struct lock_request *q, int s, const struct lock *l, int nkeys, const int *keys,
                   int nargs, const char **args, char *err, size_t errlen)
{
	size_t used = 0;

	q->script = s;
	q->argc = 0;
	if (3 + nkeys + nargs > LOCK_ARGV_MAX || nkeys > K_N) {
		snprintf(err, errlen, "internal error: too many script arguments");
		return -1;
	}
	q->argv[q->argc++] = "EVALSHA";
	q->argv[q->argc++] = scripts[s].sha;
	for (int i = -1; i < nkeys + nargs; i++) {
		char *at = q->buf + used;
		size_t room = sizeof q->buf - used;
		int n = i < 0       ? snprintf(at, room, "%d", nkeys)
		        : i < nkeys ? snprintf(at, room, "%.700s%s", l->key, key_suffix[keys[i]])
		                    : snprintf(at, room, "%s", args[i - nkeys]);
		if (n < 0 || (size_t)n >= room) {
			snprintf(err, errlen, "internal error: script arguments too long");
			return -1;
		}
		q->lens[q->argc] = (size_t)n;
		q->argv[q->argc++] = at;
		used += (size_t)n + 1;
	}
	q->lens[0] = strlen(q->argv[0]);
	q->lens[1] = strlen(q->argv[1]);
	return 0;
}

int lock_request_argv(const struct lock_request *q, int full, const char **argv, size_t *lens)
{
	memcpy(argv, q->argv, sizeof q->argv);
	memcpy(lens, q->lens, sizeof q->lens);
	if (full) {
		argv[0] = "EVAL";
		lens[0] = 4;
		argv[1] = scripts[q->script].text;
		lens[1] = scripts[q->script].len;
	}
	return q->argc;
}

int lock_script(int i, const char **text, size_t *len, const char **sha)
{
	if (i < 0 || i >= S_COUNT)
		return -1;
	*text = scripts[i].text;
	*len = scripts[i].len;
	*sha = scripts[i].sha;
	return 0;
}

/* Run a built script call: EVALSHA first (one small request), EVAL when the server
 * lost its script cache (restart, failover, SCRIPT FLUSH). Returns 0 with *reply
 * (possibly a server ERROR reply other than NOSCRIPT), or -1. */
static int send_request(struct client *c, const struct lock_request *q, int64_t deadline_ms,
                        struct resp_reply **reply, char *err, size_t errlen)
{
	const char *argv[LOCK_ARGV_MAX];
	size_t lens[LOCK_ARGV_MAX];

	int argc = lock_request_argv(q, 0, argv, lens);
	if (client_call(c, argc, argv, lens, deadline_ms, reply, err, errlen) < 0) {
		/* A clean-up (a release, a waiter's leave: safe to run twice, by its token)
		 * sent by its SHA and not answered (a paused server): if its reply, when it
		 * comes, is NOSCRIPT (the script never loaded there, or flushed), nobody
		 * reads it to send the EVAL, and what it should remove stays for its TTL. So
		 * it goes again, whole, right behind (quorum.c does the same per node). */
		if (!client_broken(c) && (q->script == S_RELEASE || q->script == S_RELEASE_SEM ||
		                          q->script == S_LEAVE)) {
			char ignored[200];
			argc = lock_request_argv(q, 1, argv, lens);
			(void)client_send_owed(c, argc, argv, lens, deadline_ms, ignored,
			                       sizeof ignored);
		}
		return -1;
	}
	if (!resp_is_error(*reply, "NOSCRIPT"))
		return 0;
	resp_free(*reply);
	argc = lock_request_argv(q, 1, argv, lens);
	return client_call(c, argc, argv, lens, deadline_ms, reply, err, errlen);
}

/* Build and run script s in one step. */
static int eval(struct client *c, int s, const struct lock *l, int nkeys, const int *keys,
                int nargs, const char **args, int64_t deadline_ms, struct resp_reply **reply,
                char *err, size_t errlen)
{
	struct lock_request q;

	if (request(&q, s, l, nkeys, keys, nargs, args, err, errlen) < 0)
		return -1;
	return send_request(c, &q, deadline_ms, reply, err, errlen);
}

/* The words of foreign.lua's refusal that lock_err_foreign knows it by (the code itself
 * is not kept in the message). */
#define FOREIGN_TEXT "--prefix '' shares the keyspace"
#define WRONGTYPE_HINT                                                                             \
	" (a key of this lock's name holds another type than rlock writes there: rlock -k NAME "   \
	"--reset deletes it)"

/* A server error reply → LOCK_ERR, LOCK_DENIED with a readable reason, or
 * LOCK_REDIRECT with the reply itself (matched by code, never by text). */
static int server_error(const struct resp_reply *r, const char *what, char *err, size_t errlen)
{
	static const char *const routing[] = {"MOVED",    "ASK",         "READONLY", "MASTERDOWN",
	                                      "TRYAGAIN", "CLUSTERDOWN", "LOADING"};

	for (size_t i = 0; i < sizeof routing / sizeof routing[0]; i++) {
		if (resp_is_error(r, routing[i])) {
			if (i >= 2) /* a state that passes (not a redirect) */
				conn_fault_note(CONN_FAULT_PASSING);
			log_reason(err, errlen, "%s", r->str);
			return LOCK_REDIRECT;
		}
	}
	/* A Cluster node whose slot migrates refuses a script's command on a key it does
	 * not have. It has no code of its own (ERR, the same text in Redis and Valkey);
	 * the scripts touch every key they write before their first write (here.lua), so
	 * the refusal did nothing: a state that passes, tried again as TRYAGAIN is. */
	if (r->type == RESP_ERROR && r->str &&
	    strncmp(r->str, CLUSTER_NONLOCAL, strlen(CLUSTER_NONLOCAL)) == 0) {
		conn_fault_note(CONN_FAULT_PASSING);
		log_reason(err, errlen, "%s", r->str);
		return LOCK_REDIRECT;
	}
	if (resp_is_noauth(r)) {
		snprintf(err, errlen,
		         "%s: the server requires a password (NOAUTH); see --password-file", what);
		return LOCK_DENIED;
	}
	if (resp_is_error(r, "RLOCKFENCE")) {
		/* A fence counter that cannot count (not an integer, at the maximum):
		 * waiting cannot fix it, so it is refused at once, as a denial is. */
		const char *why = r->str + strlen("RLOCKFENCE");
		log_reason(err, errlen, "%s: %s%s", what, why + (*why == ' '),
		           strstr(why, "WRONGTYPE") ? WRONGTYPE_HINT : "");
		return LOCK_DENIED;
	}
	if (resp_is_error(r, "RLOCKFOREIGN") && strstr(r->str, FOREIGN_TEXT)) {
		/* --prefix '': a key of the name's layout that rlock did not write (foreign.lua):
		 * left as it is, and no wait changes that */
		const char *why = r->str + strlen("RLOCKFOREIGN");
		log_reason(err, errlen, "%s: %s", what, why + (*why == ' '));
		return LOCK_DENIED;
	}
	if (resp_is_error(r, "RLOCKMODE")) {
		/* the code alone ("-RLOCKMODE") has no text after it to skip */
		const char *why = r->str + strlen("RLOCKMODE");
		log_reason(err, errlen, "%s: %s", what, why + (*why == ' '));
		return LOCK_MISMATCH;
	}
	if (resp_is_error(r, "ERR") && (strstr(r->str, "user executing the script can't run") ||
	                                strstr(r->str, "ACL failure in script"))) {
		/* a command the script calls is refused (Redis 7.2 names it, 7.0 does not) */
		log_reason(
		    err, errlen,
		    "%s: the ACL user may not run a command rlock's script calls (rlock --check "
		    "names it; docs/production.md: Credentials): %s",
		    what, r->str);
		return LOCK_DENIED;
	}
	if (resp_is_error(r, "WRONGTYPE")) {
		/* a key of the name's layout holds another type (set by hand): no wait fixes
		 * it; the operator's --reset (or --break) deletes it (break.lua's strays) */
		const char *at = strstr(r->str, " script: "); /* Redis's script and line */
		int n = at ? (int)(at - r->str) : 300;
		log_reason(err, errlen, "%s: %.*s%s", what, n, r->str, WRONGTYPE_HINT);
		return LOCK_ERR;
	}
	if (resp_is_error(r, "NOPERM") || resp_is_error(r, "WRONGPASS")) {
		log_reason(err, errlen, "%s: permission denied: %s", what, r->str);
		return LOCK_DENIED;
	}
	if (resp_is_error(r, "ERR") && strstr(r->str, "Unknown ") &&
	    strstr(r->str, "command called from script")) {
		/* a command the script calls renamed or disabled (rename-command): "ERR
		 * Unknown Redis command called from script" (newer servers: "Unknown
		 * command"), naming the script's line, not the command */
		const char *at = strstr(r->str, " script: ");
		log_reason(err, errlen,
		           "%s: the server does not know a command rlock's script calls (renamed "
		           "or disabled with rename-command?): %.*s",
		           what, at ? (int)(at - r->str) : 200, r->str);
		return LOCK_ERR;
	}
	if (resp_is_error(r, "ERR") && strncmp(r->str, "ERR unknown command '", 21) == 0) {
		/* EVALSHA, EVAL or a command a script calls renamed or disabled
		 * (rename-command): no wait fixes it.
		 * The server's text goes on to quote the arguments (the keys): only the
		 * command is named. */
		const char *cmd = r->str + 21, *end = strchr(cmd, '\'');
		int n = end && end - cmd < 40 ? (int)(end - cmd) : 0;
		log_reason(err, errlen,
		           "%s: the server does not know %.*s, which rlock needs (renamed or "
		           "disabled with rename-command?)",
		           what, n ? n : 7, n ? cmd : "EVALSHA");
		return LOCK_ERR;
	}
	/* States that pass, refused before the script wrote anything: a script runs (it
	 * ends, or is killed); used memory over maxmemory under noeviction (keys expire,
	 * memory is freed); writes stopped after a failed BGSAVE (the server retries it). */
	if (resp_is_error(r, "BUSY") || resp_is_error(r, "OOM") || resp_is_error(r, "MISCONF"))
		conn_fault_note(CONN_FAULT_PASSING);
	log_reason(err, errlen, "%s: server error: %s", what, r->str);
	return LOCK_ERR;
}

int lock_name_of_key(const char *prefix, const char *key, size_t len, char *name)
{
	static const char hsuf[] = ":holders", dsuf[] = ":delay", psuf[] = ":preempt",
	                  qsuf[] = ":queue";
	size_t plen = strlen(prefix);

	if (len > sizeof hsuf - 1 &&
	    memcmp(key + len - (sizeof hsuf - 1), hsuf, sizeof hsuf - 1) == 0)
		len -= sizeof hsuf - 1;
	else if (len > sizeof dsuf - 1 &&
	         memcmp(key + len - (sizeof dsuf - 1), dsuf, sizeof dsuf - 1) == 0)
		len -= sizeof dsuf - 1;
	else if (len > sizeof psuf - 1 &&
	         memcmp(key + len - (sizeof psuf - 1), psuf, sizeof psuf - 1) == 0)
		len -= sizeof psuf - 1;
	else if (len > sizeof qsuf - 1 &&
	         memcmp(key + len - (sizeof qsuf - 1), qsuf, sizeof qsuf - 1) == 0)
		len -= sizeof qsuf - 1;
	if (len < plen + 2 || memcmp(key, prefix, plen) != 0 || key[plen] != '{' ||
	    key[len - 1] != '}' || len - plen - 2 > LOCK_NAME_MAX)
		return -1;
	memcpy(name, key + plen + 1, len - plen - 2);
	name[len - plen - 2] = '\0';
	/* a name -k could not give (a space, a control or non-ASCII byte, a NUL, none at
	 * all) is no lock of rlock's: the key's rule is parse_lock_name's, the one rule */
	char why[8];
	if (strlen(name) != len - plen - 2 || parse_lock_name(name, why, sizeof why) < 0)
		return -1;
	return 0;
}

int lock_err_foreign(const char *err)
{
	return strstr(err, FOREIGN_TEXT) != NULL;
}

int lock_init(struct lock *l, const char *prefix, const char *name, int64_t ttl_ms)
{
	unsigned char rnd[LOCK_TOKEN_LEN / 2];
	static const char hex[] = "0123456789abcdef";
	size_t got = 0;

	memset(l, 0, sizeof *l);
	snprintf(l->key, sizeof l->key, "%.128s{%.512s}", prefix, name);
	snprintf(l->channel, sizeof l->channel, "%.700s:released", l->key);
	snprintf(l->wake_prefix, sizeof l->wake_prefix, "%.700s:wake:", l->key);
	l->ask.prefix = prefix;
	l->ask.ttl_ms = ttl_ms;
	l->publish_cmd = "PUBLISH";
	l->run_status = -1;
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
	snprintf(l->wake_channel, sizeof l->wake_channel, "%.700s%s", l->wake_prefix, l->token);
	return 0;
}

int lock_init_ask(struct lock *l, const struct lock_ask *a, const char *name)
{
	int rc = lock_init(l, a->prefix, name, a->ttl_ms);

	l->ask = *a;
	l->ask.limit = a->mode == LOCK_LIMIT ? a->limit : 0;
	return rc;
}

void lock_set_mode(struct lock *l, enum lock_mode mode, int limit, int fair, int nowait)
{
	l->ask.mode = mode;
	l->ask.limit = mode == LOCK_LIMIT ? limit : 0;
	l->ask.fair = fair;
	l->ask.nowait = nowait;
}

int lock_channels(const struct lock *l, const char **ch)
{
	ch[0] = l->channel;
	ch[1] = l->wake_channel;
	/* --supersede: a newer request wakes this one on its own channel too; --preempt: the
	 * preempted holder's release hands it the lock there (Redlock: no wake list) */
	return l->ask.mode != LOCK_EXCLUSIVE || l->ask.fair || l->ask.supersede || l->ask.preempt
	           ? 2
	           : 1;
}

/* Held in the zset of shared holders / permits (else: the plain exclusive key). */
static int sem_held(const struct lock *l)
{
	return l->ask.mode != LOCK_EXCLUSIVE;
}

/* A field as stored, for display (escaped by each sink). A NUL byte (anyone can HSET
 * one) would end the C string and hide the rest: it becomes the pair C0 80, which is not
 * UTF-8, so that a terminal line shows \xc0\x80 and JSON two U+FFFD in its place. One
 * longer than dst (only another client writes one: rlock caps what it writes) ends in
 * "..." where it is cut, in every sink, never passed off as the whole. */
static void copy_field(char *dst, size_t n, const struct resp_reply *r)
{
	dst[0] = '\0';
	if (r && (r->type == RESP_STRING || r->type == RESP_STATUS)) {
		size_t o = 0, i = 0;
		for (; i < r->len && o + 1 < n; i++) {
			if (r->str[i]) {
				dst[o++] = r->str[i];
			} else if (o + 2 < n) {
				dst[o++] = (char)0xc0;
				dst[o++] = (char)0x80;
			} else {
				break;
			}
		}
		if (i < r->len && n >= 8) {
			o = o > n - 4 ? n - 4 : o;
			/* never inside a UTF-8 sequence: its start goes with it */
			for (int k = 0; k < 3 && o > 0 && ((unsigned char)dst[o] & 0xc0) == 0x80;
			     k++)
				o--;
			memcpy(dst + o, "...", 3);
			o += 3;
		}
		dst[o] = '\0';
	} else if (r && r->type == RESP_INTEGER)
		snprintf(dst, n, "%lld", r->integer);
}

/* A number as stored (anyone who can write the keys can put anything there): the
 * value for a plain decimal number, else -1. */
static long long field_number(const struct resp_reply *r)
{
	char buf[32];

	copy_field(buf, sizeof buf, r);
	size_t n = strlen(buf);
	if (n == 0 || n > 18 || strspn(buf, "0123456789") != n)
		return -1;
	return strtoll(buf, NULL, 10);
}

int lock_fence_value(const struct resp_reply *r, long long *v)
{
	if (r && r->type == RESP_INTEGER) {
		*v = r->integer;
		return 0;
	}
	if (!r || r->type != RESP_STRING || strlen(r->str) != r->len)
		return -1;
	return parse_int(r->str, LLONG_MIN, LLONG_MAX, v, NULL, 0);
}

/* Fill *h from the n (7 to 11) fields {host, pid, user, cmd, start, ttl, fence, kept,
 * label, renewed_ago, proc} at e. */
static void fill_meta(struct holder *h, struct resp_reply **e, size_t n)
{
	copy_field(h->host, sizeof h->host, e[0]);
	h->pid = field_number(e[1]);
	copy_field(h->user, sizeof h->user, e[2]);
	copy_field(h->cmd, sizeof h->cmd, e[3]);
	h->start_ms = field_number(e[4]);
	if (h->start_ms == 0)
		h->start_ms = -1;
	h->ttl_ms = field_number(e[5]);
	h->has_fence = lock_fence_value(e[6], &h->fence) == 0;
	if (!h->has_fence)
		h->fence = 0;
	h->kept = n > 7 && (e[7]->type == RESP_STRING || e[7]->type == RESP_INTEGER);
	if (n > 8)
		copy_field(h->label, sizeof h->label, e[8]);
	h->renewed_ago_ms = n > 9 ? field_number(e[9]) : -1;
	if (n > 10)
		copy_field(h->proc, sizeof h->proc, e[10]);
}

/* Fill *h from the busy reply {0, pttl, host, pid, user, cmd, start, ttl, fence[, label[,
 * kept, preemptible[, "reserved"]]]}: "reserved" when nobody holds the name and it is kept
 * for the --preempt request named; "shared" or "limit" there when shared holders or
 * permits hold it (an exclusive request's reply; pttl: until the last lease ends); or
 * {0, -1, false x 10, "queued", N}: nobody holds it, N --fair waiters go first; or
 * {0, -1, false x 10, "writer", 1}: nobody holds it, a waiting exclusive request goes
 * first (a shared or permit request). */
static void fill_holder(struct holder *h, const struct resp_reply *r)
{
	memset(h, 0, sizeof *h);
	h->mode = 'x';
	h->pttl_ms = r->element[1]->type == RESP_INTEGER ? r->element[1]->integer : -2;
	h->held = 1;
	fill_meta(h, r->element + 2, 7);
	h->renewed_ago_ms = -1;
	if (r->elements > 9)
		copy_field(h->label, sizeof h->label, r->element[9]);
	if (r->elements > 11) { /* since the busy reply says kept and preemptible */
		h->kept = r->element[10]->type == RESP_STRING;
		h->preemptible =
		    r->element[11]->type == RESP_STRING && !strcmp(r->element[11]->str, "1");
	}
	h->reserved = r->elements > 12 && r->element[12]->type == RESP_STRING &&
	              !strcmp(r->element[12]->str, "reserved");
	if (r->elements > 12 && r->element[12]->type == RESP_STRING &&
	    (!strcmp(r->element[12]->str, "shared") || !strcmp(r->element[12]->str, "limit")))
		h->mode = r->element[12]->str[0] == 's' ? 's' : 'l';
	if (r->elements > 13 && r->element[12]->type == RESP_STRING &&
	    !strcmp(r->element[12]->str, "queued")) { /* nobody holds it: the fair queue binds */
		long long q = field_number(r->element[13]);
		h->queued = q < 1 ? 1 : q > INT32_MAX ? INT32_MAX : (int)q;
	}
	h->writer = r->elements > 13 && r->element[12]->type == RESP_STRING &&
	            !strcmp(r->element[12]->str, "writer");
}

static int is_array(const struct resp_reply *r, size_t n)
{
	return r->type == RESP_ARRAY && r->elements == n;
}

/* Fill *h from {host, pid, label}: who superseded or preempted this request. */
static void fill_newer(struct holder *h, struct resp_reply **e)
{
	memset(h, 0, sizeof *h);
	h->start_ms = h->ttl_ms = h->pttl_ms = -1;
	copy_field(h->host, sizeof h->host, e[0]);
	h->pid = field_number(e[1]);
	copy_field(h->label, sizeof h->label, e[2]);
}

int lock_decode_renew(const struct resp_reply *r, long long *v, struct holder *by, char *err,
                      size_t errlen)
{
	if (is_array(r, 4) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 3) {
		fill_newer(by, r->element + 1);
		*v = 3;
		return LOCK_OK;
	}
	return lock_decode_int(r, "renew", v, err, errlen);
}

int lock_decode_acquire(const struct resp_reply *r, struct lock *l, struct holder *h, char *err,
                        size_t errlen)
{
	/* "... script: SHA, on @user_script:N." (Redis 7), "... @user_script:N: ..." (6):
	 * a command the script ran refused it, perhaps after its grant */
	l->script_failed = r->type == RESP_ERROR && r->str && strstr(r->str, "user_script:");
	if (r->type == RESP_ERROR)
		return server_error(r, "acquire", err, errlen);
	/* The fence comes as a string (never a Lua number: src/store/lua/counter.lua). */
	long long fence;
	if (is_array(r, 2) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 1 &&
	    lock_fence_value(r->element[1], &fence) == 0) {
		l->fence = fence;
		l->placed = 0;
		return LOCK_OK;
	}
	if (is_array(r, 2) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 3 &&
	    r->element[1]->type == RESP_INTEGER) {
		memset(h, 0, sizeof *h);
		h->pttl_ms = r->element[1]->integer;
		h->pid = h->start_ms = h->ttl_ms = h->renewed_ago_ms = -1;
		l->placed = 0;
		return LOCK_DONE;
	}
	if (is_array(r, 4) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 5) {
		fill_newer(h, r->element + 1);
		l->placed = 0;
		return LOCK_SUPERSEDED;
	}
	if (is_array(r, 2) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 4 &&
	    r->element[1]->type == RESP_INTEGER) {
		/* closed by a lock-delay: busy, with nobody holding it (delay.lua) */
		memset(h, 0, sizeof *h);
		h->delayed = 1;
		h->pttl_ms = r->element[1]->integer;
		h->pid = h->start_ms = h->ttl_ms = -1;
		l->placed = 0;
		/* a --supersede request took the waiting place here too (acquire.lua): its next
		 * attempts check that they still have it, or a request away past the place's
		 * lease takes it back from a newer one */
		l->supersede_placed = l->ask.supersede;
		return LOCK_BUSY;
	}
	if ((is_array(r, 9) || is_array(r, 10) || is_array(r, 12) || is_array(r, 13) ||
	     is_array(r, 14)) &&
	    r->element[0]->type == RESP_INTEGER) {
		fill_holder(h, r);
		l->placed = r->element[0]->integer == 2;
		l->supersede_placed = l->ask.supersede;
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

int lock_decode_fence(const struct resp_reply *r, long long *v, char *err, size_t errlen)
{
	if (r->type == RESP_ERROR)
		return server_error(r, "fence", err, errlen);
	if (lock_fence_value(r, v) < 0) {
		snprintf(err, errlen, "fence: unexpected reply from the server");
		return LOCK_ERR;
	}
	return LOCK_OK;
}

/* The status reply's 15th element: --preempt's hand-over {token, host, pid, label,
 * pttl}, or {token, host, pid, label, pttl, "taken"} (taken by that request), or nil. */
static void decode_reserved(const struct resp_reply *r, struct reserved *v)
{
	if (r->type == RESP_ARRAY && r->elements == 6 && r->element[5]->type == RESP_STRING &&
	    r->element[5]->str && strcmp(r->element[5]->str, "taken") == 0) {
		v->taken = 1;
		copy_field(v->token, sizeof v->token, r->element[0]);
		copy_field(v->host, sizeof v->host, r->element[1]);
		v->pid = field_number(r->element[2]);
		copy_field(v->label, sizeof v->label, r->element[3]);
		return;
	}
	if (r->type != RESP_ARRAY || r->elements != 5)
		return;
	v->known = 1;
	copy_field(v->token, sizeof v->token, r->element[0]);
	copy_field(v->host, sizeof v->host, r->element[1]);
	v->pid = field_number(r->element[2]);
	copy_field(v->label, sizeof v->label, r->element[3]);
	v->left_ms = r->element[4]->type == RESP_INTEGER ? r->element[4]->integer : -1;
}

/* The tail of a status or break reply (13 to 15 elements): the last break's record
 * {host, pid, user, ms_ago, tokens, fence[, label]} or nil, refused, (break) pruned, and
 * (status) the hand-over. */
static void decode_judgement(const struct resp_reply *r, struct holders *hs)
{
	const struct resp_reply *b = r->element[11];
	struct broken *k = &hs->broken;

	if (b->type == RESP_ARRAY && (b->elements == 6 || b->elements == 7)) {
		k->known = 1;
		copy_field(k->host, sizeof k->host, b->element[0]);
		k->pid = field_number(b->element[1]);
		copy_field(k->user, sizeof k->user, b->element[2]);
		k->ago_ms = field_number(b->element[3]);
		copy_field(k->tokens, sizeof k->tokens, b->element[4]);
		copy_field(k->fence, sizeof k->fence, b->element[5]);
		if (b->elements == 7) /* the breaker's --label (7 since it is recorded) */
			copy_field(k->label, sizeof k->label, b->element[6]);
	}
	hs->refused = r->element[12]->type == RESP_INTEGER && r->element[12]->integer == 1;
	if (r->elements > 15 && r->element[15]->type == RESP_ARRAY) { /* break: strays */
		const struct resp_reply *a = r->element[15];
		for (size_t i = 0; i + 2 <= a->elements && hs->nstrays < 24; i += 2) {
			copy_field(hs->strays[hs->nstrays].suffix, sizeof hs->strays[0].suffix,
			           a->element[i]);
			copy_field(hs->strays[hs->nstrays].type, sizeof hs->strays[0].type,
			           a->element[i + 1]);
			hs->nstrays++;
		}
	} else if (r->elements > 15) /* status read key by key (a migrating slot, status.lua) */
		hs->here = (int)field_number(r->element[15]);
	if (r->elements > 13) {
		long long v = field_number(r->element[13]);
		hs->pruned = v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int)v;
	}
	if (r->elements > 14)
		decode_reserved(r->element[14], &hs->reserved);
}

int lock_decode_holders(const struct resp_reply *r, const char *what, struct holders *hs, char *err,
                        size_t errlen)
{
	if (r->type == RESP_ERROR)
		return server_error(r, what, err, errlen);
	memset(hs, 0, sizeof *hs);
	hs->here = -1;
	/* 16 (status read key by key, a migrating slot), 15 (status) since it shows --preempt's
	 * hand-over; 13 (14: break) since holders show their renewal, waiters their host and pid,
	 * and the last break its record; 11 since
	 * --lock-delay, 10 since --once-per (its mark), 8 since plain waiters have places; older
	 * server-side scripts say 7 or 8. A holder's row: 14 fields since it names its process
	 * beyond the pid (proc), 13 before (told apart by the count of holders when both divide).
	 */
	size_t hstride = r->elements >= 13 ? 13 : 12, qstride = r->elements >= 13 ? 5 : 2;
	if (hstride == 13 && r->element[3]->type == RESP_ARRAY) {
		size_t ne = r->element[3]->elements;
		long long total = field_number(r->element[2]);
		if (ne % 14 == 0 && (ne % 13 != 0 || (long long)(ne / 14) == total))
			hstride = 14;
	}
	if (!(is_array(r, 7) || is_array(r, 8) || is_array(r, 10) || is_array(r, 11) ||
	      is_array(r, 13) || is_array(r, 14) || is_array(r, 15) || is_array(r, 16)) ||
	    r->element[3]->type != RESP_ARRAY || r->element[3]->elements % hstride != 0 ||
	    r->element[4]->type != RESP_ARRAY || r->element[4]->elements % qstride != 0) {
		snprintf(err, errlen, "%s: unexpected reply from the server", what);
		return LOCK_ERR;
	}
	hs->has_last_fence = lock_fence_value(r->element[0], &hs->last_fence) == 0;
	if (!hs->has_last_fence)
		hs->last_fence = 0;
	copy_field(hs->limit, sizeof hs->limit, r->element[1]);
	long long v = field_number(r->element[2]);
	const struct resp_reply *a = r->element[3];
	for (size_t i = 0; i + hstride <= a->elements && hs->n < HOLDERS_MAX; i += hstride) {
		struct holder *h = &hs->h[hs->n++];
		char mode[4];
		copy_field(mode, sizeof mode, a->element[i]);
		h->mode = mode[0] == 's' || mode[0] == 'l' ? mode[0] : 'x';
		h->held = 1;
		copy_field(h->token, sizeof h->token, a->element[i + 1]);
		h->pttl_ms =
		    a->element[i + 2]->type == RESP_INTEGER ? a->element[i + 2]->integer : -1;
		fill_meta(h, a->element + i + 3, hstride - 3);
	}
	hs->total = v > hs->n ? (v > INT32_MAX ? INT32_MAX : (int)v) : hs->n;
	a = r->element[4];
	for (size_t i = 0; i + qstride <= a->elements && hs->nq < WAITERS_MAX; i += qstride) {
		struct waiter *w = &hs->q[hs->nq++];
		copy_field(w->token, sizeof w->token, a->element[i]);
		w->lease_left_ms = field_number(a->element[i + 1]);
		w->pid = w->waited_ms = -1;
		if (qstride == 5) {
			copy_field(w->host, sizeof w->host, a->element[i + 2]);
			w->pid = field_number(a->element[i + 3]);
			w->waited_ms = field_number(a->element[i + 4]);
		}
	}
	v = field_number(r->element[5]);
	hs->queued = v > hs->nq ? (v > INT32_MAX ? INT32_MAX : (int)v) : hs->nq;
	copy_field(hs->writer, sizeof hs->writer, r->element[6]);
	if (r->elements > 7) {
		v = field_number(r->element[7]);
		hs->waiting = v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int)v;
	}
	if (r->elements > 9 && r->element[9]->type == RESP_STRING) {
		hs->done = 1;
		hs->done_pttl_ms =
		    r->element[8]->type == RESP_INTEGER ? r->element[8]->integer : -1;
		copy_field(hs->done_fence, sizeof hs->done_fence, r->element[9]);
	}
	if (r->elements > 10 && r->element[10]->type == RESP_INTEGER && r->element[10]->integer > 0)
		hs->closed_ms = r->element[10]->integer;
	if (r->elements > 12)
		decode_judgement(r, hs);
	return LOCK_OK;
}

/* The deploy queues' and the history's pairs after the owner's fields (acquire.lua):
 * '@' pairs are read by the script, the others stored with the owner. Returns the new
 * number of args. */
static int queue_args(const struct lock *l, const char **args, int n, const char *hist,
                      const char *hret, const char *sage)
{
	if (l->ask.supersede) {
		args[n++] = "@supersede";
		args[n++] = l->supersede_placed ? "2" : "1";
		/* how long the name's newest --supersede request is kept: the history's
		 * retention (acquire.lua's PREFIX{NAME}:supersede:last) */
		args[n++] = "@sret";
		args[n++] = hret;
		args[n++] = "@sage";
		args[n++] = sage;
	}
	if (l->ask.preempt) {
		args[n++] = "@preempt";
		args[n++] = "1";
	}
	if (l->ask.preemptible) {
		args[n++] = "preemptible";
		args[n++] = "1";
	}
	if (l->ask.history_len > 0) {
		args[n++] = "hist";
		args[n++] = hist;
		args[n++] = "hret";
		args[n++] = hret;
	}
	return n;
}

int lock_request_acquire(struct lock_request *q, const struct lock *l, const struct lock_meta *m,
                         char *err, size_t errlen)
{
	char ttl[24], pid[24], start[24], kind[24], delay[24], hist[24], hret[24];

	snprintf(ttl, sizeof ttl, "%lld", (long long)l->ask.ttl_ms);
	snprintf(pid, sizeof pid, "%ld", m->pid);
	/* When the lock is taken, not when it was first asked for: the record's start is what
	 * --status and --list show as held since (a waiter's meta was made before its wait);
	 * 0 stays unknown. */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(start, sizeof start, "%lld",
	         m->start_unix_ms ? (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 : 0);
	snprintf(delay, sizeof delay, "%lld", (long long)l->ask.delay_ms);
	snprintf(hist, sizeof hist, "%d", l->ask.history_len);
	snprintf(hret, sizeof hret, "%lld", (long long)l->ask.history_ms);
	if (l->ask.mode == LOCK_EXCLUSIVE && !l->ask.fair) {
		/* The mark is declared only with --once-per: without it, nothing changes. */
		int nk = l->ask.once_per_ms > 0 ? 9 : 8;
		const int *keys = (const int[]){K_LOCK,  K_OWNER,  K_FENCE,   K_HOLDERS, K_META,
		                                K_QUEUE, K_WRITER, K_WAITERS, K_DONE};
		const char *args[LOCK_ARGV_MAX] = {l->token,
		                                   ttl,
		                                   !l->may_place || l->ask.nowait ? "0"
		                                   : l->asked                     ? "1"
		                                                                  : "p",
		                                   "host",
		                                   m->host,
		                                   "pid",
		                                   pid,
		                                   "user",
		                                   m->user,
		                                   "cmd",
		                                   m->cmd,
		                                   "start",
		                                   start,
		                                   "ttl",
		                                   ttl,
		                                   "label",
		                                   m->label ? m->label : "",
		                                   "proc", /* who the pid names (holder.c) */
		                                   m->proc ? m->proc : "",
		                                   "delay", /* --lock-delay: the holder's field */
		                                   delay};
		char sage[24] = "0";
		if (l->ask.supersede) /* a plain request formats nothing more (issue 40) */
			snprintf(sage, sizeof sage, "%lld", (long long)l->supersede_age_ms);
		int na = queue_args(l, args, l->ask.delay_ms > 0 ? 21 : 19, hist, hret, sage);
		return request(q, S_ACQUIRE, l, nk, keys, na, args, err, errlen);
	} else {
		if (l->ask.mode == LOCK_SHARED)
			snprintf(kind, sizeof kind, "shared");
		else if (l->ask.mode == LOCK_LIMIT)
			snprintf(kind, sizeof kind, "%d", l->ask.limit);
		else
			snprintf(kind, sizeof kind, "x");
		int nk = l->ask.once_per_ms > 0 ? 10 : 9;
		/* 2: waits, but takes no place among the waiters (it cannot block on one) */
		const char *waits = l->ask.nowait ? "1" : !l->may_place ? "2" : "0";
		const int *keys = (const int[]){K_LOCK,  K_OWNER, K_FENCE,  K_HOLDERS, K_META,
		                                K_LIMIT, K_QUEUE, K_QLEASE, K_WRITER,  K_DONE};
		const char *args[] = {l->token,
		                      ttl,
		                      kind,
		                      l->ask.fair ? "1" : "0",
		                      waits,
		                      l->publish_cmd,
		                      l->wake_prefix,
		                      m->host,
		                      pid,
		                      m->user,
		                      m->cmd,
		                      start,
		                      m->label ? m->label : "",
		                      delay,
		                      hist, /* the history (acquire_sem.lua) */
		                      hret,
		                      m->proc ? m->proc : ""};
		int na = 17;
		return request(q, S_ACQUIRE_SEM, l, nk, keys, na, args, err, errlen);
	}
}

int lock_acquire(struct client *c, struct lock *l, const struct lock_meta *m, int64_t deadline_ms,
                 struct holder *h, char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;

	if (l->ask.supersede) { /* only --supersede reads the clock here (issue 40) */
		int64_t now = clock_ms();
		if (!l->supersede_first_ms)
			l->supersede_first_ms = now;
		l->supersede_age_ms = now - l->supersede_first_ms;
	}
	if (lock_request_acquire(&q, l, m, err, errlen) < 0)
		return LOCK_ERR;
	int sent = send_request(c, &q, deadline_ms, &r, err, errlen);
	l->asked = 1; /* sent, or perhaps sent: its reply may be what was lost */
	if (sent < 0)
		return LOCK_ERR;
	int rc = lock_decode_acquire(r, l, h, err, errlen);
	resp_free(r);
	return rc;
}

static int check_int(struct resp_reply *r, const char *what, char *err, size_t errlen, long long *v)
{
	int rc = lock_decode_int(r, what, v, err, errlen);

	resp_free(r);
	return rc;
}

int lock_request_renew(struct lock_request *q, const struct lock *l, char *err, size_t errlen)
{
	char ttl[24], delay[24], hret[24], kind[24] = "";

	snprintf(ttl, sizeof ttl, "%lld", (long long)l->ask.ttl_ms);
	snprintf(delay, sizeof delay, "%lld", (long long)l->ask.delay_ms);
	/* The history's retention: a run that outlives it keeps its open run and stream. */
	snprintf(hret, sizeof hret, "%lld",
	         l->ask.history_len > 0 ? (long long)l->ask.history_ms : 0LL);
	/* delay: --lock-delay's entry moves on */
	const char *args[] = {l->token, ttl, delay, hret, kind};
	int nargs = l->ask.history_len > 0 ? 4 : l->ask.delay_ms > 0 ? 3 : 2;
	if (sem_held(l)) {
		/* the holder's mode: where renew_sem.lua finds another on the name (its
		 * :limit key lost while held, a request of another mode got in), it is lost */
		if (l->ask.mode == LOCK_SHARED)
			snprintf(kind, sizeof kind, "shared");
		else
			snprintf(kind, sizeof kind, "%d", l->ask.limit);
		return request(q, S_RENEW_SEM, l, 3, (const int[]){K_HOLDERS, K_META, K_LIMIT}, 5,
		               args, err, errlen);
	}
	return request(q, S_RENEW, l, 2, (const int[]){K_LOCK, K_OWNER}, nargs, args, err, errlen);
}

int lock_renew(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *by,
               char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;
	long long v = 0;

	if (lock_request_renew(&q, l, err, errlen) < 0 ||
	    send_request(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_renew(r, &v, by, err, errlen);
	resp_free(r);
	if (rc != LOCK_OK)
		return rc;
	return v == 3 ? LOCK_PREEMPTED : v == 1 ? LOCK_OK : LOCK_NOTOURS;
}

int lock_request_release(struct lock_request *q, const struct lock *l, int64_t keep_ms, char *err,
                         size_t errlen)
{
	char keep[24], done[24], status[24] = "", hist[24], hret[24];

	snprintf(keep, sizeof keep, "%lld",
	         keep_ms == LOCK_KEEP_LOST ? -1LL : (long long)(keep_ms > 0 ? keep_ms : 0));
	snprintf(done, sizeof done, "%lld", l->mark_done ? (long long)l->ask.once_per_ms : 0);
	if (l->run_status >= 0)
		snprintf(status, sizeof status, "%d", l->run_status);
	snprintf(hist, sizeof hist, "%d", l->ask.history_len);
	snprintf(hret, sizeof hret, "%lld", (long long)l->ask.history_ms);
	const char *ev = l->handover_untaken                          ? "untaken"
	                 : l->attempt_declared                        ? "attempt"
	                 : l->preempted_declared                      ? "preempted"
	                 : l->lost_declared                           ? "lost"
	                 : keep_ms == LOCK_KEEP_LOST && !l->lost_seen ? "expired"
	                 : l->lost_seen                               ? "seen"
	                                                              : "";
	char lease[24] = "";
	if (l->taken_seen)
		snprintf(lease, sizeof lease, "taken");
	else if (l->lease_ms > 0)
		snprintf(lease, sizeof lease, "%lld", (long long)l->lease_ms);
	const char *args[] = {l->token,       keep, l->channel, l->publish_cmd,
	                      l->wake_prefix, done, status,     hist,
	                      hret,           ev,   lease};
	/* the history's records take the command's status and the history's length and
	 * retention (ARGV[7..9]: the holder's record may be gone); ARGV[10] "lost": rlock
	 * declared the lease lost (its end record says so, as its exit status does),
	 * "preempted": rlock stopped the command for a --preempt request (the reply says
	 * whether the lock went to it: exit 81), told with the history off too; "attempt":
	 * a Redlock attempt's give-back, no run (its acquired record is taken back);
	 * "seen": the loss was found (--on-lost ignore). A loss is told with the history off
	 * too: without it, a node where the token no longer holds opens its lock-delay.
	 * ARGV[11], with the history: "taken" (taken_seen), or lease_ms, or "" */
	int hargs = l->ask.history_len > 0                                      ? 11
	            : l->preempted_declared || l->lost_seen || l->lost_declared ? 10
	                                                                        : 5;
	/* --once-per is an exclusive lock's (cli.c): only release.lua writes the mark. */
	if (sem_held(l))
		return request(q, S_RELEASE_SEM, l, 3, (const int[]){K_HOLDERS, K_META, K_LIMIT},
		               hargs, args, err, errlen);
	int nargs = hargs > 5 ? hargs : l->mark_done && l->ask.once_per_ms > 0 ? 6 : 5;
	return request(q, S_RELEASE, l, 2, (const int[]){K_LOCK, K_OWNER}, nargs, args, err,
	               errlen);
}

int lock_release(struct client *c, const struct lock *l, int64_t keep_ms, int64_t deadline_ms,
                 char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;
	long long v = 0;

	if (lock_request_release(&q, l, keep_ms, err, errlen) < 0 ||
	    send_request(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = check_int(r, "release", err, errlen, &v);
	if (rc != LOCK_OK)
		return rc;
	/* 1 to a keep: a --preempt request's mark lived and the lock went to it */
	return v == 0                  ? LOCK_NOTOURS
	       : v == 3                ? LOCK_HANDED_OVER
	       : v == 1 && keep_ms > 0 ? LOCK_HANDED_ON
	       : v == 4                ? LOCK_KEEP_OVER
	                               : LOCK_OK;
}

#define LEAVE_KEYS                                                                                 \
	(const int[])                                                                              \
	{                                                                                          \
		K_LOCK, K_QUEUE, K_QLEASE, K_WRITER                                                \
	}
#define LEAVE_ARGS(l)                                                                              \
	(const char *[])                                                                           \
	{                                                                                          \
		(l)->token, (l)->publish_cmd, (l)->wake_prefix, (l)->channel                       \
	}

int lock_request_leave(struct lock_request *q, const struct lock *l, char *err, size_t errlen)
{
	return request(q, S_LEAVE, l, 4, LEAVE_KEYS, 4, LEAVE_ARGS(l), err, errlen);
}

int lock_leave(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *newer,
               char *err, size_t errlen)
{
	struct resp_reply *r;
	long long v = 0;

	if (eval(c, S_LEAVE, l, 4, LEAVE_KEYS, 4, LEAVE_ARGS(l), deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	if (is_array(r, 4) && r->element[0]->type == RESP_INTEGER && r->element[0]->integer == 5) {
		fill_newer(newer, r->element + 1); /* {5, host, pid, label}: acquire.lua's */
		resp_free(r);
		return LOCK_SUPERSEDED;
	}
	return check_int(r, "leave the queue", err, errlen, &v);
}

int lock_request_holders(struct lock_request *q, const struct lock *l, int brk, char *err,
                         size_t errlen)
{
	/* status reads the --once-per mark too; break leaves it (it is no holder), reset
	 * clears it */
	int nkeys = brk && !l->reset ? 10 : 11;
	const int *keys = (const int[]){K_LOCK,  K_OWNER,  K_FENCE,  K_HOLDERS, K_META, K_LIMIT,
	                                K_QUEUE, K_QLEASE, K_WRITER, K_WAITERS, K_DONE};
	const struct lock_meta *b = l->breaker;
	char pid[24] = "", hist[24], hret[24];
	if (b)
		snprintf(pid, sizeof pid, "%ld", b->pid);
	snprintf(hist, sizeof hist, "%d", l->ask.history_len);
	snprintf(hret, sizeof hret, "%lld", (long long)l->ask.history_ms);
	const char *args[] = {l->channel,
	                      l->publish_cmd,
	                      l->wake_prefix,
	                      b ? b->host : "",
	                      pid,
	                      b ? b->user : "",
	                      l->break_token ? l->break_token : "",
	                      l->break_fence ? l->break_fence : "",
	                      b && b->label ? b->label : "",
	                      "reset",
	                      hist,
	                      hret};

	return request(q, brk ? S_BREAK : S_STATUS, l, nkeys, keys,
	               !brk       ? 0
	               : l->reset ? 12
	                          : 9,
	               args, err, errlen);
}

int lock_request_status_here(struct lock_request *q, const struct lock *l, int probe, char *err,
                             size_t errlen)
{
	const char *args[] = {l->key};

	return request(q, S_STATUS, l, probe ? 1 : 0, (const int[]){K_HERE}, 1, args, err, errlen);
}

int lock_request_fence(struct lock_request *q, const struct lock *l, long long fence, char *err,
                       size_t errlen)
{
	char v[24];
	const int *keys = (const int[]){K_FENCE, K_LOCK, K_OWNER};
	const char *args[] = {v, l->token};

	snprintf(v, sizeof v, "%lld", fence);
	return request(q, S_FENCE, l, 3, keys, 2, args, err, errlen);
}

static int holders_script(struct client *c, int s, const struct lock *l, int64_t deadline_ms,
                          struct holders *hs, char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;

	if (lock_request_holders(&q, l, s == S_BREAK, err, errlen) < 0 ||
	    send_request(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_holders(r,
	                             s != S_BREAK ? "status"
	                             : l->reset   ? "reset"
	                                          : "break",
	                             hs, err, errlen);
	resp_free(r);
	return rc;
}

int lock_status(struct client *c, const struct lock *l, int64_t deadline_ms, struct holders *hs,
                char *err, size_t errlen)
{
	return holders_script(c, S_STATUS, l, deadline_ms, hs, err, errlen);
}

int lock_status_here(struct client *c, const struct lock *l, int probe, int64_t deadline_ms,
                     struct holders *hs, char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;

	if (lock_request_status_here(&q, l, probe, err, errlen) < 0 ||
	    send_request(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_holders(r, "status", hs, err, errlen);
	resp_free(r);
	return rc;
}

int lock_is_migrating(const char *err)
{
	return strncmp(err, "TRYAGAIN", 8) == 0 ||
	       strncmp(err, CLUSTER_NONLOCAL, strlen(CLUSTER_NONLOCAL)) == 0;
}

int lock_holding(const struct holders *hs, const char *token, struct holding *hd)
{
	for (int i = 0; i < hs->n; i++) {
		const struct holder *h = &hs->h[i];
		if (strcmp(h->token, token) != 0)
			continue;
		hd->mode = h->mode;
		hd->limit = h->mode == 'l' ? atoi(hs->limit) : 0;
		hd->ttl_left_ms = h->pttl_ms >= 0 ? h->pttl_ms : -1;
		hd->fence = h->fence;
		hd->has_fence = h->has_fence;
		return 1;
	}
	return hs->total > hs->n && hs->limit[0] ? -1 : 0;
}

int lock_break(struct client *c, const struct lock *l, int64_t deadline_ms, struct holders *hs,
               char *err, size_t errlen)
{
	return holders_script(c, S_BREAK, l, deadline_ms, hs, err, errlen);
}

/* 1 when token has a shared hold or a permit of l whose lease has not ended by the
 * server's clock (its score in PREFIX{NAME}:holders, the lease end in server ms; *left_ms
 * what remains of it), 0 when not, -1 on error. Read only. */
static int lease_left(struct client *c, const struct lock *l, const char *token,
                      int64_t deadline_ms, long long *left_ms, char *err, size_t errlen)
{
	char holders[LOCK_KEY_MAX];
	snprintf(holders, sizeof holders, "%.700s%s", l->key, key_suffix[K_HOLDERS]);
	const char *zs[3] = {"ZSCORE", holders, token}, *tm[1] = {"TIME"};
	size_t zl[3] = {6, strlen(holders), strlen(token)}, tl[1] = {4};
	struct resp_reply *z = NULL, *t = NULL;
	int held = -1;

	if (client_call(c, 3, zs, zl, deadline_ms, &z, err, errlen) == 0 &&
	    client_call(c, 1, tm, tl, deadline_ms, &t, err, errlen) == 0) {
		if (z->type == RESP_NIL) {
			held = 0;
		} else if (z->type == RESP_STRING && t->type == RESP_ARRAY && t->elements == 2 &&
		           t->element[0]->type == RESP_STRING &&
		           t->element[1]->type == RESP_STRING) {
			double left =
			    strtod(z->str, NULL) - (strtod(t->element[0]->str, NULL) * 1000 +
			                            strtod(t->element[1]->str, NULL) / 1000);
			held = left > 0;
			*left_ms = held ? (long long)left : -1;
		} else {
			snprintf(err, errlen, "unexpected reply to ZSCORE or TIME");
		}
	}
	resp_free(z);
	resp_free(t);
	return held;
}

int lock_holds(struct client *c, const struct lock *l, const char *token, int64_t deadline_ms,
               struct holding *hd, char *err, size_t errlen)
{
	struct holders *hs = malloc(sizeof *hs);
	int held = 0;

	if (!hs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = lock_status(c, l, deadline_ms, hs, err, errlen);
	if (rc != LOCK_OK) {
		free(hs);
		return rc < 0 ? rc : LOCK_ERR; /* a LOCK_REDIRECT is the store's to follow */
	}
	held = lock_holding(hs, token, hd);
	/* More shared holders or permits than the status lists: the token's own lease. */
	if (held < 0) {
		hd->has_fence = 0;
		held = lease_left(c, l, token, deadline_ms, &hd->ttl_left_ms, err, errlen);
		hd->mode = strcmp(hs->limit, "shared") == 0 ? 's' : 'l';
		hd->limit = hd->mode == 'l' ? atoi(hs->limit) : 0;
	}
	free(hs);
	return held;
}

int lock_request_history(struct lock_request *q, const struct lock *l, int count, char *err,
                         size_t errlen)
{
	char n[24];
	const char *args[] = {n};

	snprintf(n, sizeof n, "%d", count);
	return request(q, S_HISTORY_READ, l, 1, (const int[]){K_LOCK}, 1, args, err, errlen);
}

/* One entry {id, field, value, ...} into *e. */
static void history_fill(struct history_entry *e, const struct resp_reply *r)
{
	static const struct {
		const char *name;
		size_t off, size;
	} f[] = {
#define F(x) {#x, offsetof(struct history_entry, x), sizeof(((struct history_entry *)0)->x)}
	    F(ev),     F(fence),   F(token),  F(host),    F(pid),      F(user),    F(label),
	    F(status), F(by_host), F(by_pid), F(by_user), F(by_label), F(cleared), F(seen),
#undef F
	};

	memset(e, 0, sizeof *e);
	copy_field(e->id, sizeof e->id, r->element[0]);
	e->at_ms = strtoll(e->id, NULL, 10);
	for (size_t i = 1; i + 1 < r->elements; i += 2) {
		char name[16];
		copy_field(name, sizeof name, r->element[i]);
		for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
			if (strcmp(name, f[k].name) == 0)
				copy_field((char *)e + f[k].off, f[k].size, r->element[i + 1]);
	}
}

int lock_decode_history(const struct resp_reply *r, struct history_entry *e, int max, char *err,
                        size_t errlen)
{
	int n = 0;

	if (r->type == RESP_ERROR)
		return server_error(r, "history", err, errlen);
	if (r->type != RESP_ARRAY) {
		snprintf(err, errlen, "history: unexpected reply from the server");
		return LOCK_ERR;
	}
	for (size_t i = 0; i < r->elements && n < max; i++) {
		const struct resp_reply *x = r->element[i];
		if (x->type != RESP_ARRAY || x->elements < 1)
			continue;
		history_fill(&e[n++], x);
	}
	return n;
}

int lock_history(struct client *c, const struct lock *l, int count, int64_t deadline_ms,
                 struct history_entry *e, char *err, size_t errlen)
{
	struct lock_request q;
	struct resp_reply *r;

	if (lock_request_history(&q, l, count, err, errlen) < 0 ||
	    send_request(c, &q, deadline_ms, &r, err, errlen) < 0)
		return LOCK_ERR;
	int rc = lock_decode_history(r, e, count, err, errlen);
	resp_free(r);
	return rc;
}
