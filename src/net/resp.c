/* SPDX-License-Identifier: MIT */
#include "resp.h"

#include <hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct resp_reader {
	redisReader *r;
	size_t fed;          /* bytes fed since the last complete reply */
	const char *refused; /* why capped_create_array refused an array, or NULL */
	char why[128];       /* why resp_reader_feed refused what came, or "" */
	redisReplyObjectFunctions fn;
};

/* hiredis allocates an array's element table as soon as it reads the header, so a
 * hostile "*2147483647" costs 16 GiB of address space before a single element
 * arrives; no reply of rlock's comes close to RESP_MAX_ELEMENTS. The element count is
 * an int in hiredis 0.14 and a size_t from 1.0.
 *
 * hiredis 1.0-1.4 also has no nesting limit (0.14 stops at 7): its task stack grows
 * with each "*1", and the finished or abandoned reply is freed recursively, so 262 000
 * nested arrays under the 1 MiB cap overflow the stack (sooner in the renewal
 * thread). The same callback refuses an array nested deeper than RESP_MAX_DEPTH, before
 * hiredis descends into it: the tree hiredis builds, and later frees, stays that
 * shallow whatever the version. */
#if HIREDIS_MAJOR >= 1
typedef size_t array_len_t;
#else
typedef int array_len_t;
#endif
static void *(*default_create_array)(const redisReadTask *, array_len_t);
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static redisReplyObjectFunctions defaults;

/* Run, once, every path through libhiredis that rlock uses, before any password is
 * revealed. A libhiredis built without -z now (hiredis' own Makefile, Homebrew, a
 * self-built 1.x) binds its calls lazily: the first call through each of its PLT slots
 * enters the dynamic linker's trampoline, which saves *all* vector registers on the
 * stack. Right after AUTH those registers still hold the password (secret_reveal's
 * and memcpy's SIMD copies), so the trampoline left a copy far below rlock's frames,
 * and again at any later first call; wiping rlock's own buffers cannot catch that.
 * Bound here first, the trampoline never runs once a secret exists. (rlock itself is
 * linked with -z now; musl and distribution packages bind at load anyway.) */
static void bind_hiredis(redisReader *r)
{
	const char *argv[3] = {"AUTH", "user", "password"};
	const size_t lens[3] = {4, 4, 8};
	char *cmd = NULL;

	if (redisFormatCommandArgv(&cmd, 3, argv, lens) > 0)
		free(cmd);
	/* every reply type rlock reads, then a bulk string long enough (the reader keeps
	 * more than 1 KiB consumed) that it also compacts its buffer (sdsrange) */
	static const char replies[] = "+OK\r\n-ERR x\r\n:1\r\n$1\r\nx\r\n$-1\r\n*-1\r\n*0\r\n"
	                              "*2\r\n$1\r\nx\r\n*1\r\n:2\r\n$1100\r\n";
	char pad[1100 + 2 + sizeof "+OK\r\n" - 1];
	memset(pad, 'x', 1100);
	memcpy(pad + 1100, "\r\n+OK\r\n", 7);
	void *reply = NULL;
	if (redisReaderFeed(r, replies, sizeof replies - 1) != REDIS_OK ||
	    redisReaderFeed(r, pad, sizeof pad) != REDIS_OK)
		return;
	while (redisReaderGetReply(r, &reply) == REDIS_OK && reply) {
		freeReplyObject(reply);
		reply = NULL;
	}
}

static void save_defaults(void)
{
	redisReader *r = redisReaderCreate();

	if (r) {
		defaults = *r->fn;
		default_create_array = r->fn->createArray;
		bind_hiredis(r);
		redisReaderFree(r);
	}
}

static void *capped_create_array(const redisReadTask *task, array_len_t elements)
{
	struct resp_reader *rd = task->privdata;
	size_t depth = 0;

	for (const redisReadTask *t = task->parent; t; t = t->parent)
		depth++;
	/* NULL makes hiredis fail the reply (it calls that "out of memory"; rd->refused
	 * says what really happened). */
	if ((size_t)elements > RESP_MAX_ELEMENTS) {
		rd->refused = "array too long";
		return NULL;
	}
	if (depth > RESP_MAX_DEPTH) {
		rd->refused = "reply nested too deeply";
		return NULL;
	}
	return default_create_array(task, elements);
}

void resp_free(struct resp_reply *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->elements; i++)
		resp_free(r->element[i]);
	free(r->element);
	free(r->str);
	free(r);
}

int resp_format(char **out, size_t *outlen, int argc, const char **argv, const size_t *lens)
{
	char *cmd = NULL;
	pthread_once(&defaults_once, save_defaults); /* before the first AUTH */
	/* int in hiredis 0.14/1.0, long long from 1.1: long long holds both. */
	long long n = redisFormatCommandArgv(&cmd, argc, argv, lens);

	if (n <= 0 || !cmd)
		return -1;
	*out = cmd;
	*outlen = (size_t)n;
	return 0;
}

struct resp_reader *resp_reader_new(void)
{
	struct resp_reader *rd = calloc(1, sizeof *rd);

	if (!rd)
		return NULL;
	pthread_once(&defaults_once, save_defaults);
	if (!default_create_array) {
		free(rd);
		return NULL;
	}
	rd->fn = defaults;
	rd->fn.createArray = capped_create_array;
	rd->r = redisReaderCreateWithFunctions(&rd->fn);
	if (!rd->r) {
		free(rd);
		return NULL;
	}
	rd->r->privdata = rd; /* handed to every task: capped_create_array's rd */
	return rd;
}

void resp_reader_free(struct resp_reader *rd)
{
	if (!rd)
		return;
	redisReaderFree(rd->r);
	free(rd);
}

/* The bytes fed and not yet read as a reply: can they come from a Redis server that
 * speaks RESP2 to rlock? Walked header by header (a bulk skipped by its length), each
 * judged as soon as its line is in, before any byte it announces (bytes that may never
 * come: a wait for them would look like a slow server). 0, or -1 with rd->why: a RESP3
 * type, a bulk longer than any reply rlock reads (RESP_MAX_REPLY), a header line too
 * long to hold a length. */
static int impossible(struct resp_reader *rd)
{
	const char *p = rd->r->buf + rd->r->pos, *end = rd->r->buf + rd->r->len;

	while (p < end) {
		if (*p && strchr("_,#=(%~|>!", *p)) { /* hiredis 1.x reads them and waits */
			snprintf(
			    rd->why, sizeof rd->why,
			    "a RESP3 reply (type '%c'), which no Redis server sends rlock (RESP2)",
			    *p);
			return -1;
		}
		if (!*p || !strchr("+-:$*", *p))
			return 0; /* not RESP at all: the reader says so (resp_reader_get) */
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (*p != '+' && *p != '-' && (nl ? nl - p : end - p) > 24) {
			snprintf(rd->why, sizeof rd->why, "a '%c' header longer than any length",
			         *p);
			return -1;
		}
		if (!nl)
			return 0;
		if (*p == '$') {
			long long n = 0;
			const char *d = p + 1 + (p[1] == '-');
			for (; d < nl && *d >= '0' && *d <= '9' && n <= (long long)RESP_MAX_REPLY;
			     d++)
				n = n * 10 + (*d - '0');
			if (p[1] != '-' && n > (long long)RESP_MAX_REPLY) {
				snprintf(rd->why, sizeof rd->why,
				         "a bulk string longer than %zu bytes, which no reply of "
				         "rlock's is",
				         RESP_MAX_REPLY);
				return -1;
			}
			if (p[1] != '-') {
				if ((size_t)(end - (nl + 1)) < (size_t)n + 2)
					return 0;
				nl += (size_t)n + 2;
			}
		}
		p = nl + 1;
	}
	return 0;
}

int resp_reader_feed(struct resp_reader *rd, const char *buf, size_t len)
{
	rd->fed += len;
	if (rd->fed > RESP_MAX_REPLY) {
		snprintf(rd->why, sizeof rd->why, "a reply longer than %zu bytes", RESP_MAX_REPLY);
		return -1;
	}
	if (redisReaderFeed(rd->r, buf, len) != REDIS_OK) {
		snprintf(rd->why, sizeof rd->why, "cannot buffer the reply");
		return -1;
	}
	return impossible(rd);
}

const char *resp_reader_why(const struct resp_reader *rd)
{
	return rd->why;
}

static struct resp_reply *convert(const redisReply *in, int depth)
{
	struct resp_reply *r = calloc(1, sizeof *r);

	if (!r)
		return NULL;
	switch (in->type) {
	case REDIS_REPLY_STRING:
	case REDIS_REPLY_STATUS:
	case REDIS_REPLY_ERROR:
		r->type = in->type == REDIS_REPLY_STRING   ? RESP_STRING
		          : in->type == REDIS_REPLY_STATUS ? RESP_STATUS
		                                           : RESP_ERROR;
		r->str = malloc((size_t)in->len + 1);
		if (!r->str)
			goto fail;
		memcpy(r->str, in->str, (size_t)in->len);
		r->str[in->len] = '\0';
		r->len = (size_t)in->len;
		break;
	case REDIS_REPLY_INTEGER:
		r->type = RESP_INTEGER;
		r->integer = in->integer;
		break;
	case REDIS_REPLY_NIL:
		r->type = RESP_NIL;
		break;
	case REDIS_REPLY_ARRAY:
		r->type = RESP_ARRAY;
		if (depth > (int)RESP_MAX_DEPTH) /* capped_create_array already refused it */
			goto fail;
		if (in->elements) {
			r->element = calloc(in->elements, sizeof *r->element);
			if (!r->element)
				goto fail;
		}
		for (size_t i = 0; i < in->elements; i++) {
			r->element[i] = convert(in->element[i], depth + 1);
			r->elements = i + 1;
			if (!r->element[i])
				goto fail;
		}
		break;
	default: /* RESP3 types never appear: rlock speaks RESP2 */
		goto fail;
	}
	return r;
fail:
	resp_free(r);
	return NULL;
}

int resp_reader_get(struct resp_reader *rd, struct resp_reply **out, char *err, size_t errlen)
{
	void *raw = NULL;

	*out = NULL;
	if (redisReaderGetReply(rd->r, &raw) != REDIS_OK) {
		snprintf(err, errlen, "protocol error: %s",
		         rd->refused        ? rd->refused
		         : rd->r->errstr[0] ? rd->r->errstr
		                            : "bad reply");
		return -1;
	}
	if (!raw)
		return 0;
	struct resp_reply *r = convert(raw, 0);
	freeReplyObject(raw);
	if (!r) {
		snprintf(err, errlen, "protocol error: unexpected reply");
		return -1;
	}
	rd->fed = resp_reader_pending(rd);
	*out = r;
	return 1;
}

size_t resp_reader_pending(const struct resp_reader *rd)
{
	return rd->r->len - rd->r->pos;
}

int resp_is_error(const struct resp_reply *r, const char *code)
{
	size_t n = strlen(code);

	return r && r->type == RESP_ERROR && r->len >= n && memcmp(r->str, code, n) == 0 &&
	       (r->len == n || r->str[n] == ' ');
}

int resp_is_noauth(const struct resp_reply *r)
{
	static const char unauth[] = "ERR Protocol error: unauthenticated";

	return resp_is_error(r, "NOAUTH") ||
	       (r && r->type == RESP_ERROR && strncmp(r->str, unauth, sizeof unauth - 1) == 0);
}

const char *resp_hiredis_version(void)
{
#define RL_STR2(x) #x
#define RL_STR(x)  RL_STR2(x)
	return RL_STR(HIREDIS_MAJOR) "." RL_STR(HIREDIS_MINOR) "." RL_STR(HIREDIS_PATCH);
}
