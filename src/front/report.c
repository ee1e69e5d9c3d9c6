/* SPDX-License-Identifier: MIT */
#include "report.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h" /* cli_close_stdout */
#include "clock.h"
#include "exitcodes.h"
#include "holder.h"
#include "json.h"
#include "keeper.h"
#include "lock.h"
#include "log.h"
#include "parse.h"
#include "reenter.h"

static long long now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Unknown holder fields are null in JSON, never "" or a made-up number. */
static void json_str_or_null(FILE *f, const char *s)
{
	if (*s)
		json_str(f, s);
	else
		fputs("null", f);
}

static void json_int_or_null(FILE *f, int known, long long v)
{
	if (known)
		fprintf(f, "%lld", v);
	else
		fputs("null", f);
}

static void json_num_or_null(FILE *f, const char *s);

/* "host":…,"pid":…,"user":… (pid < 0: unknown). */
static void json_who(FILE *f, const char *host, long long pid, const char *user)
{
	fputs("\"host\":", f);
	json_str_or_null(f, host);
	fputs(",\"pid\":", f);
	json_int_or_null(f, pid >= 0, pid);
	fputs(",\"user\":", f);
	json_str_or_null(f, user);
}

/* Whether holder h of key still runs: a keeper by the mark it left here, which
 * proves its identity beyond the pid (keeper_judge); else by its pid on this host. */
static enum holder_proc judged(const struct holder *h, const char *key)
{
	if (strcmp(h->cmd, KEEPER_CMD) == 0) {
		int k = keeper_judge(key, h->token, h->pid);
		if (k != -2)
			return k == 1 ? HOLDER_ALIVE : k == 0 ? HOLDER_GONE : HOLDER_ELSEWHERE;
	}
	return holder_process(h);
}

/* Whether the holder can be judged alive: its last renewal's age (server's clock), and
 * on this host whether its process runs (null: another host, or unknown). */
static void judgement_json(FILE *f, const struct holder *h, const char *key)
{
	enum holder_proc p = judged(h, key);

	fputs(",\"renewed_ago_ms\":", f);
	json_int_or_null(f, h->renewed_ago_ms >= 0, h->renewed_ago_ms);
	fprintf(f, ",\"pid_alive\":%s",
	        p == HOLDER_ALIVE  ? "true"
	        : p == HOLDER_GONE ? "false"
	                           : "null");
}

/* The last --break's record: who broke which holder, when (server's clock). */
static void broken_json(FILE *f, const struct broken *b)
{
	char tokens[sizeof b->tokens];
	long long fence = 0;

	if (!b->known)
		return;
	fputs(",\"broken\":{", f);
	json_who(f, b->host, b->pid, b->user);
	fputs(",\"label\":", f);
	json_str_or_null(f, b->label);
	fputs(",\"ago_ms\":", f);
	json_int_or_null(f, b->ago_ms >= 0, b->ago_ms);
	fputs(",\"at_ms\":", f);
	json_int_or_null(f, b->ago_ms >= 0, now_unix_ms() - b->ago_ms);
	int known = parse_int(b->fence, LLONG_MIN, LLONG_MAX, &fence, NULL, 0) == 0;
	fputs(",\"fence\":", f);
	json_int_or_null(f, known, fence);
	fputs(",\"tokens\":[", f);
	snprintf(tokens, sizeof tokens, "%s", b->tokens);
	char *save = NULL;
	int i = 0;
	for (char *t = strtok_r(tokens, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		fputs(i++ ? "," : "", f);
		json_str(f, t);
	}
	fputs("]}", f);
}

/* --preempt's hand-over: the free lock kept for the request that stopped its holder. */
static void reserved_json(FILE *f, const struct reserved *r)
{
	if (!r->known)
		return;
	fputs(",\"reserved\":{\"by\":\"preempt\",\"token\":", f);
	json_str_or_null(f, r->token);
	fputs(",\"host\":", f);
	json_str_or_null(f, r->host);
	fputs(",\"pid\":", f);
	json_int_or_null(f, r->pid >= 0, r->pid);
	fputs(",\"label\":", f);
	json_str_or_null(f, r->label);
	fputs(",\"left_ms\":", f);
	json_int_or_null(f, r->left_ms >= 0, r->left_ms);
	fputs(",\"until_ms\":", f);
	json_int_or_null(f, r->left_ms >= 0, now_unix_ms() + r->left_ms);
	fputc('}', f);
}

/* One holder's fields (after "name", "key", "held"). */
static void holder_fields(FILE *f, const struct holder *h, const char *key)
{
	long long now = now_unix_ms();

	json_who(f, h->host, h->pid, h->user);
	fputs(",\"token\":", f); /* what --break --token compares */
	json_str_or_null(f, h->token);
	fputs(",\"command\":", f);
	json_str_or_null(f, h->cmd);
	fputs(",\"label\":", f);
	json_str_or_null(f, h->label);
	fputs(",\"start_ms\":", f);
	json_int_or_null(f, h->start_ms > 0, h->start_ms);
	fputs(",\"held_ms\":", f);
	/* start_ms is the holder's wall clock: one ahead of ours makes it unknown (as the
	 * text's '-'), never negative. */
	json_int_or_null(f, h->start_ms > 0 && now >= h->start_ms, now - h->start_ms);
	fputs(",\"ttl_ms\":", f);
	json_int_or_null(f, h->ttl_ms >= 0, h->ttl_ms);
	fputs(",\"ttl_left_ms\":", f);
	json_int_or_null(f, h->pttl_ms >= 0, h->pttl_ms);
	fprintf(f, ",\"min_hold\":%s,\"kept_until_ms\":", h->kept ? "true" : "false");
	json_int_or_null(f, h->kept && h->pttl_ms >= 0, now + h->pttl_ms);
	judgement_json(f, h, key);
}

/* The lock as one object: the first holder's fields at the top (all there is for a
 * plain exclusive lock), then, in the other modes or with a queue, every holder and
 * the queue. */
static void holders_json(FILE *f, int top, const char *name, const char *key, const char *master,
                         const struct holders *hs)
{
	fputs(top ? "{\"schema\":1,\"name\":" : "{\"name\":", f); /* --status's object */
	json_str(f, name);
	fputs(",\"key\":", f);
	json_str(f, key);
	if (master) { /* Sentinel: the server the sentinels named */
		fputs(",\"master\":", f);
		json_str(f, master);
	}
	fprintf(f, ",\"held\":%s", hs->n ? "true" : "false");
	if (hs->n) {
		fputc(',', f);
		holder_fields(f, &hs->h[0], key);
	}
	/* exact 64-bit integers, never through a double; null: the counter holds no integer */
	fputs(",\"fence\":", f);
	if (hs->n)
		json_int_or_null(f, hs->h[0].has_fence, hs->h[0].fence);
	else
		json_int_or_null(f, hs->has_last_fence, hs->last_fence);
	if (hs->waiting)
		fprintf(f, ",\"waiting\":%d", hs->waiting);
	if (hs->done) { /* --once-per's mark: later runs skip until it ends */
		long long v = 0;
		int known = parse_int(hs->done_fence, LLONG_MIN, LLONG_MAX, &v, NULL, 0) == 0;
		fputs(",\"done\":{\"fence\":", f);
		json_int_or_null(f, known, v);
		fputs(",\"left_ms\":", f);
		json_int_or_null(f, hs->done_pttl_ms >= 0, hs->done_pttl_ms);
		fputs(",\"until_ms\":", f);
		json_int_or_null(f, hs->done_pttl_ms >= 0, now_unix_ms() + hs->done_pttl_ms);
		fputc('}', f);
	}
	if (hs->closed_ms > 0) /* --lock-delay: a lease ended unreleased */
		fprintf(f, ",\"closed\":{\"by\":\"lock-delay\",\"left_ms\":%lld,\"until_ms\":%lld}",
		        hs->closed_ms, now_unix_ms() + hs->closed_ms);
	reserved_json(f, &hs->reserved);
	if (!hs->n && hs->queued > 0) /* free, but the fair queue goes first */
		fprintf(f, ",\"blocked\":{\"by\":\"fair-queue\",\"waiters\":%d}", hs->queued);
	if (hs->nodes_total > 0) /* Redlock */
		fprintf(f, ",\"nodes_ok\":%d,\"nodes_total\":%d", hs->nodes_ok, hs->nodes_total);
	if (hs->split_nodes) { /* Redlock: held, but by no token on a majority */
		fprintf(f,
		        ",\"split\":{\"nodes\":%d,\"nodes_held\":%d,\"tokens\":%d,"
		        "\"nodes_closed\":%d,\"nodes_reserved\":%d,\"nodes_queued\":%d,"
		        "\"left_ms\":",
		        hs->split_nodes, hs->split_held, hs->split_tokens, hs->split_closed,
		        hs->split_reserved, hs->split_queued);
		json_int_or_null(f, hs->split_ms >= 0, hs->split_ms);
		fputs(",\"until_ms\":", f);
		json_int_or_null(f, hs->split_ms >= 0, now_unix_ms() + hs->split_ms);
		fputc('}', f);
	}
	broken_json(f, &hs->broken);
	if ((!hs->n || hs->h[0].mode == 'x') && !hs->queued && !hs->writer[0]) {
		fputc('}', f);
		return;
	}
	fprintf(f, ",\"mode\":\"%s\",\"limit\":",
	        !hs->n || hs->h[0].mode == 'x' ? "exclusive"
	        : hs->h[0].mode == 's'         ? "shared"
	                                       : "limit");
	json_num_or_null(f, hs->limit); /* "shared", or text anyone could SET: null */
	fprintf(f, ",\"holder_count\":%d,\"holders\":[", hs->total);
	for (int i = 0; i < hs->n; i++) {
		fputs(i ? ",{" : "{", f);
		holder_fields(f, &hs->h[i], key);
		fputs(",\"fence\":", f);
		json_int_or_null(f, hs->h[i].has_fence, hs->h[i].fence);
		fputc('}', f);
	}
	fprintf(f, "],\"queue_length\":%d,\"queue\":[", hs->queued);
	for (int i = 0; i < hs->nq; i++) {
		const struct waiter *w = &hs->q[i];
		fprintf(f, "%s{\"position\":%d,\"lease_left_ms\":", i ? "," : "", i + 1);
		json_int_or_null(f, w->lease_left_ms >= 0, w->lease_left_ms); /* -1: not a number */
		fputs(",\"host\":", f);
		json_str_or_null(f, w->host);
		fputs(",\"pid\":", f);
		json_int_or_null(f, w->pid >= 0, w->pid);
		fputs(",\"waited_ms\":", f);
		json_int_or_null(f, w->waited_ms >= 0, w->waited_ms);
		fputc('}', f);
	}
	fprintf(f, "],\"writer_waiting\":%s}", hs->writer[0] ? "true" : "false");
}

/* A failed request: say why, unless a terminating signal cut it short (main then
 * dies of the signal, as an interrupted program does, without a word). */
static void request_failed(const char *err)
{
	if (!store_abort_pending())
		log_error("%s", err);
}

/* Holder text for a terminal: every field is untrusted (escape sequences), and an
 * empty one is shown as "?". */
static void esc(char *dst, size_t n, const char *s)
{
	if (!*s)
		s = "?";
	log_escape(dst, n, s, strlen(s));
}

/* The first k bytes of s escaped (a token's head): cut before escaping, so that the cut
 * never splits an escape; "..." after it when s is longer. */
static void esc_head(char *dst, size_t n, const char *s, size_t k)
{
	if (!*s)
		s = "?";
	size_t len = strlen(s);

	log_escape(dst, n, s, len < k ? len : k);
	if (len > k && strlen(dst) + 4 <= n)
		strcat(dst, "...");
}

/* Local wall-clock time of unix_ms, "YYYY-MM-DD HH:MM:SS", or "?". */
static void local_time(char *buf, size_t n, long long unix_ms)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	snprintf(buf, n, "?");
	if (unix_ms > 0 && localtime_r(&t, &tm))
		strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

/* Whether the holder can be judged alive: when it last renewed, and on this host
 * whether its process still runs (a dead holder's lease still runs out on its own). */
static void print_judgement(const struct holder *h, const struct holder_text *t, const char *key)
{
	char ago[32];

	holder_human_ms(ago, sizeof ago, h->renewed_ago_ms);
	if (h->renewed_ago_ms >= 0)
		printf("  renewed  %s ago\n", ago);
	enum holder_proc p = h->kept ? HOLDER_ELSEWHERE : judged(h, key);
	if (p == HOLDER_GONE)
		printf(
		    "  process  holder process %s is gone from this host; the lease ends in %s\n",
		    t->pid, t->left);
	else if (p == HOLDER_ALIVE)
		printf("  process  %s runs on this host\n", t->pid);
}

/* The last --break's record, while it is kept (LOCK_BROKEN_KEEP_MS). */
static void print_broken(const struct broken *b)
{
	char host[1024], user[256], ago[32], when[64], tok[1200], label[4 * sizeof b->label],
	    fence[4 * sizeof b->fence];

	if (!b->known)
		return;
	esc(host, sizeof host, b->host);
	esc(user, sizeof user, b->user);
	esc_head(tok, sizeof tok, b->tokens, 16);
	holder_human_ms(ago, sizeof ago, b->ago_ms);
	local_time(when, sizeof when, b->ago_ms >= 0 ? now_unix_ms() - b->ago_ms : -1);
	log_escape(label, sizeof label, b->label, strlen(b->label));
	esc(fence, sizeof fence, b->fence);
	char pid[24] = "?"; /* as recorded: "?" when it is no number */
	if (b->pid >= 0)
		snprintf(pid, sizeof pid, "%lld", b->pid);
	printf("broken   %s ago (%s) by %s pid %s (user %s)%s%s%s: token %s, fence %s\n", ago, when,
	       host, pid, user, label[0] ? " [" : "", label, label[0] ? "]" : "", tok, fence);
}

/* One holder's block of --status. */
static void print_holder(const struct holder *h, const char *key)
{
	char state[200] = "", label[sizeof((struct holder_text *)0)->label + 16] = "", when[64],
	     until[64];
	long long now = now_unix_ms();
	struct holder_text t;
	char token[4 * sizeof h->token];

	holder_text(h, now, &t);
	esc(token, sizeof token, h->token[0] ? h->token : "?");
	local_time(when, sizeof when, h->start_ms);
	if (t.label[0])
		snprintf(label, sizeof label, "  label    %s\n", t.label);
	if (h->kept && h->pttl_ms >= 0) {
		/* The command has exited; --min-hold keeps the lock so that the same job
		 * fired elsewhere does not run again: not a stuck lock to break. */
		local_time(until, sizeof until, now + h->pttl_ms);
		snprintf(state, sizeof state,
		         "  kept     by --min-hold until %s: its command has exited\n", until);
	}
	printf("  host     %s\n  pid      %s%s\n  user     %s\n  command  %s\n%s"
	       "  since    %s (%s)\n%s  ttl left %s%s\n  fence    %s\n  token    %s\n",
	       t.host, t.pid, h->kept ? " (exited)" : "", t.user, t.cmd, label, when, t.held, state,
	       t.left, h->pttl_ms == -1 ? " (no expiry: set by hand?)" : "", t.fence, token);
	print_judgement(h, &t, key);
}

/* --lock-delay: "closed by lock-delay until TIME (LEFT left)" into buf. */
static const char *closed_text(char *buf, size_t n, const struct holders *hs)
{
	char until[64], left[32];

	local_time(until, sizeof until, now_unix_ms() + hs->closed_ms);
	holder_human_ms(left, sizeof left, hs->closed_ms);
	snprintf(buf, n, "closed by lock-delay until %s (%s left)", until, left);
	return buf;
}

/* --preempt's hand-over: "reserved for the --preempt request of HOST pid N [LABEL] until
 * TIME (LEFT left)" into buf; HOST and LABEL escaped, or raw for a log line (the log
 * escapes it: once, never twice). */
static const char *reserved_text(char *buf, size_t n, const struct reserved *r, int raw)
{
	char host[1024], label[4 * sizeof r->label], until[64], left[32];

	if (raw) {
		snprintf(host, sizeof host, "%s", r->host[0] ? r->host : "?");
		snprintf(label, sizeof label, "%s", r->label);
	} else {
		esc(host, sizeof host, r->host[0] ? r->host : "?");
		log_escape(label, sizeof label, r->label, strlen(r->label));
	}
	char when[128] = ""; /* no expiry (set by hand): no time, never "until ? (- left)" */
	if (r->left_ms >= 0) {
		local_time(until, sizeof until, now_unix_ms() + r->left_ms);
		holder_human_ms(left, sizeof left, r->left_ms);
		snprintf(when, sizeof when, " until %s (%s left)", until, left);
	}
	char pid[24] = "?";
	if (r->pid >= 0)
		snprintf(pid, sizeof pid, "%lld", r->pid);
	snprintf(buf, n, "reserved for the --preempt request of %s pid %s%s%s%s%s", host, pid,
	         label[0] ? " [" : "", label, label[0] ? "]" : "", when);
	return buf;
}

/* Free, but the fair queue goes first: "free, but N --fair waiters go first: a new
 * request waits its turn" into buf. */
static const char *queued_text(char *buf, size_t n, const struct holders *hs)
{
	snprintf(buf, n, "free, but %d --fair waiter%s first: a new request waits its turn",
	         hs->queued, hs->queued == 1 ? " goes" : "s go");
	return buf;
}

/* Redlock: "held on N of M Redlock nodes by T tokens, none on a majority" into buf; with
 * other nodes refusing too, "busy on N of M Redlock nodes (held on 1 by 1 token,
 * closed by a lock-delay on 1), none on a majority". */
static const char *split_text(char *buf, size_t n, const struct holders *hs)
{
	if (hs->split_held == hs->split_nodes) {
		snprintf(buf, n, "held on %d of %d Redlock nodes by %d token%s, none on a majority",
		         hs->split_nodes, hs->nodes_total, hs->split_tokens,
		         hs->split_tokens == 1 ? "" : "s");
		return buf;
	}
	char held[64] = "", closed[48] = "", reserved[64] = "", queued[48] = "";
	if (hs->split_held)
		snprintf(held, sizeof held, ", held on %d by %d token%s", hs->split_held,
		         hs->split_tokens, hs->split_tokens == 1 ? "" : "s");
	if (hs->split_closed)
		snprintf(closed, sizeof closed, ", closed by a lock-delay on %d", hs->split_closed);
	if (hs->split_reserved)
		snprintf(reserved, sizeof reserved, ", kept for a --preempt request on %d",
		         hs->split_reserved);
	if (hs->split_queued)
		snprintf(queued, sizeof queued, ", live --fair places on %d", hs->split_queued);
	/* each part says ", ...": the list is their concatenation less the first ", " */
	snprintf(buf, n, "busy on %d of %d Redlock nodes (%s%s%s%s), none on a majority",
	         hs->split_nodes, hs->nodes_total, held, closed, reserved, queued);
	char *list = strstr(buf, "(, ");
	if (list)
		memmove(list + 1, list + 3, strlen(list + 3) + 1);
	return buf;
}

/* "last fence N", or what the counter holds when it is no fence (a key of another type, a
 * string of no 64-bit integer): never a 0 the counter does not hold. */
static const char *last_fence_text(char *buf, size_t n, const struct holders *hs)
{
	if (hs->has_last_fence)
		snprintf(buf, n, "last fence %lld", hs->last_fence);
	else
		snprintf(buf, n, "the fence counter holds no 64-bit integer");
	return buf;
}

static void print_holders(const char *key, const struct holders *hs)
{
	char closed[160], reserved[2400], split[320], queued[160], lf[64];

	if (!hs->n && hs->split_nodes) {
		char until[64], left[32], when[128] = " while they hold (no expiry: set by hand?)";
		if (hs->split_queued) /* live --fair places end when their waiters do */
			snprintf(when, sizeof when, " while they last");
		if (hs->split_ms >= 0) {
			local_time(until, sizeof until, now_unix_ms() + hs->split_ms);
			holder_human_ms(left, sizeof left, hs->split_ms);
			snprintf(when, sizeof when, " until %s (%s left)", until, left);
		}
		printf("%s is not free: %s; an acquire is refused%s (%s)\n", key,
		       split_text(split, sizeof split, hs), when,
		       last_fence_text(lf, sizeof lf, hs));
	} else if (!hs->n && hs->reserved.known) {
		printf("%s is %s: its preempted holder released it to that request, which takes "
		       "it next (%s)\n",
		       key, reserved_text(reserved, sizeof reserved, &hs->reserved, 0),
		       last_fence_text(lf, sizeof lf, hs));
		if (hs->closed_ms > 0)
			printf("and %s\n", closed_text(closed, sizeof closed, hs));
	} else if (!hs->n && hs->closed_ms > 0) {
		printf("%s is %s: a lease ended without a release (%s); --reset opens it\n", key,
		       closed_text(closed, sizeof closed, hs), last_fence_text(lf, sizeof lf, hs));
	} else if (!hs->n && hs->queued > 0) { /* an acquire now would wait its turn */
		printf("%s is %s (%s)\n", key, queued_text(queued, sizeof queued, hs),
		       last_fence_text(lf, sizeof lf, hs));
	} else if (!hs->n) {
		printf("%s is free (%s)\n", key, last_fence_text(lf, sizeof lf, hs));
	} else if (hs->h[0].mode == 'x') {
		printf("%s is held%s\n", key, hs->h[0].kept ? " (kept by --min-hold)" : "");
		print_holder(&hs->h[0], key);
	} else {
		if (hs->h[0].mode == 's')
			printf("%s is held by %d shared holder%s\n", key, hs->total,
			       hs->total == 1 ? "" : "s");
		else {
			char limit[4 * sizeof hs->limit];
			esc(limit, sizeof limit, hs->limit);
			printf("%s is held by %d of %s permits (--limit)\n", key, hs->total, limit);
		}
		for (int i = 0; i < hs->n; i++) {
			printf("holder %d%s\n", i + 1,
			       hs->h[i].kept ? " (kept by --min-hold)" : "");
			print_holder(&hs->h[i], key);
		}
		if (hs->total > hs->n)
			printf("... and %d more\n", hs->total - hs->n);
	}
	if (hs->done) {
		char until[64], fence[80];
		esc(fence, sizeof fence, hs->done_fence);
		local_time(until, sizeof until, now_unix_ms() + hs->done_pttl_ms);
		if (hs->done_pttl_ms >= 0)
			printf("done     by the run of fence %s: --once-per skips runs until %s\n",
			       fence, until);
		else
			printf("done     by the run of fence %s: --once-per skips runs (no expiry: "
			       "set by hand?)\n",
			       fence);
	}
	if (hs->n && hs->closed_ms > 0) /* a shared holder or permit ended unreleased */
		printf("new holders: %s\n", closed_text(closed, sizeof closed, hs));
	if (hs->writer[0])
		printf("an exclusive request is waiting: new shared holders queue behind it\n");
	if (hs->waiting)
		printf("waiting  %d (woken one at a time)\n", hs->waiting);
	if (hs->queued)
		printf("queue    %d waiting (--fair)\n", hs->queued);
	for (int i = 0; i < hs->nq; i++) {
		const struct waiter *w = &hs->q[i];
		char lease[32], waited[32], host[1024], tok[320], pid[24] = "?";
		holder_human_ms(lease, sizeof lease, w->lease_left_ms);
		holder_human_ms(waited, sizeof waited, w->waited_ms);
		esc(host, sizeof host, w->host);
		log_escape(tok, sizeof tok, w->token, strnlen(w->token, 8)); /* its head */
		if (w->pid >= 0)
			snprintf(pid, sizeof pid, "%lld", w->pid);
		printf("  #%-3d    %s pid %s, waiting %s (token %s..., place lease left %s)\n",
		       i + 1, host, pid, waited, tok, lease);
	}
	if (hs->nodes_total > 0)
		printf("  nodes    %d of %d Redlock nodes answered\n", hs->nodes_ok,
		       hs->nodes_total);
	print_broken(&hs->broken);
}

int report_status(struct store *s, const struct report_ask *o)
{
	struct lock l;
	struct holders hs;
	char err[400];

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	if (store_status(s, &l, clock_ms() + o->io_timeout_ms, &hs, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		store_close(s);
		return RL_EX_UNAVAILABLE;
	}
	/* Sentinel: which server the sentinels named (and answered). */
	char master[320];
	snprintf(master, sizeof master, "%s", store_name(s));
	const char *via = o->sentinels ? master : NULL;
	store_close(s);
	if (o->json) {
		holders_json(stdout, 1, o->name, l.key, via, &hs);
		fputc('\n', stdout);
	} else {
		print_holders(l.key, &hs);
		if (via) {
			/* The address is what the sentinels said: text another client wrote. */
			char via_e[1024], name_e[1024];
			esc(via_e, sizeof via_e, via);
			esc(name_e, sizeof name_e, o->master);
			printf("  master   %s (Sentinel '%s')\n", via_e, name_e);
		}
	}
	int rc = cli_close_stdout();
	/* --status has its own rule: held (or closed by a lock-delay, or kept for a --preempt
	 * request, or free behind live --fair waiters: an acquire now would be busy) is 75, or
	 * the -E status unless that is 0 (a skip code would make a held lock look free). */
	return rc                                                                              ? rc
	       : !hs.n && !hs.closed_ms && !hs.reserved.known && !hs.split_nodes && !hs.queued ? 0
	       : o->conflict_exit ? o->conflict_exit
	                          : RL_EX_CONFLICT;
}

/* The breaker's user name, for the record of the break (informational, as its host and
 * pid are). */
static const char *breaker_user(void)
{
	const struct passwd *pw = getpwuid(geteuid());
	const char *u = getenv("USER");

	return pw && pw->pw_name ? pw->pw_name : u ? u : "";
}

/* --break --token/--if-fence found no such holder: nothing was broken. */
static int break_refused(const struct lock *l, const struct report_ask *o, const struct holders *hs)
{
	char who[2500] = "it is free", h[2400], fence[32] = "?";

	/* not free when something else keeps a new holder out: said as --status says it; a
	 * holder whose record is gone (or has no fence) has no fence to name: "?", not 0 */
	if (hs->n && hs->h[0].has_fence)
		snprintf(fence, sizeof fence, "%lld", hs->h[0].fence);
	if (hs->n)
		snprintf(who, sizeof who, "it is held by %s, token %s, fence %s",
		         holder_format(&hs->h[0], HOLDER_RAW, h, sizeof h),
		         hs->h[0].token[0] ? hs->h[0].token : "?", fence);
	else if (hs->closed_ms > 0)
		snprintf(who, sizeof who, "it is %s", closed_text(h, sizeof h, hs));
	else if (hs->reserved.known)
		snprintf(who, sizeof who, "it is %s", reserved_text(h, sizeof h, &hs->reserved, 1));
	else if (hs->queued > 0)
		snprintf(who, sizeof who, "it is %s", queued_text(h, sizeof h, hs));
	log_error("not broken: %s is not held by %s%s%s%s%s; %s (nothing removed)", l->key,
	          o->token ? "token " : "", o->token ? o->token : "",
	          o->token && o->if_fence ? " with " : "", o->if_fence ? "fence " : "",
	          o->if_fence ? o->if_fence : "", who);
	return RL_EX_LOST;
}

/* --break: a lock-delay keeps the name closed after it; say until when and how to open
 * it (--reset), even with -q. */
static void break_closed(const struct lock *l, const struct report_ask *o, long long closed_ms)
{
	char left[64];

	if (closed_ms <= 0)
		return;
	holder_human_ms(left, sizeof left, closed_ms);
	/* the name is escaped by the log, once */
	log_error("%s stays closed by --lock-delay for %s more (a lease that ended without a "
	          "release); rlock -k %s --reset opens it now",
	          l->key, left, o->name);
}

/* --break, --reset: the keys of the name's layout that held another type (set by hand:
 * every acquire failed on them), which the script deleted first. Operator action: said
 * even with -q. */
static void say_strays(const struct lock *l, const struct holders *hs, const char *verb)
{
	for (int i = 0; i < hs->nstrays; i++) {
		const char *sfx = hs->strays[i].suffix, *t = hs->strays[i].type;
		if (strcmp(sfx, ":fence") == 0)
			log_error(
			    "%s %s: deleted %s%s: it held a %s, not the fencing counter; fences "
			    "restart at 1 (seed it above the last one used: rlock-protocol(7))",
			    verb, l->key, l->key, sfx, t);
		else
			log_error("%s %s: deleted %s%s: it held a %s, not what rlock keeps there",
			          verb, l->key, l->key, sfx, t);
	}
}

int report_break(struct store *s, const struct report_ask *o)
{
	struct lock l;
	struct holders hs;
	char err[400];

	char host[256] = "";
	struct lock_meta me = {
	    .host = host, .user = breaker_user(), .pid = (long)getpid(), .label = o->label};

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	gethostname(host, sizeof host - 1);
	l.breaker = &me;
	l.break_token = o->token;
	l.break_fence = o->if_fence;
	if (store_break(s, &l, clock_ms() + o->io_timeout_ms, &hs, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		store_close(s);
		return RL_EX_UNAVAILABLE;
	}
	store_close(s);
	say_strays(&l, &hs, "break");
	if (hs.pruned > 0)
		log_error("%s: dropped %d queue place%s of waiters that are gone", l.key, hs.pruned,
		          hs.pruned == 1 ? "" : "s");
	if (hs.refused)
		return break_refused(&l, o, &hs);
	if (hs.reserved.known) { /* the name kept for a --preempt request, maybe dead */
		const char *rh = hs.reserved.host, *rl = hs.reserved.label; /* the log escapes */
		char pid[24] = "?";
		if (hs.reserved.pid >= 0)
			snprintf(pid, sizeof pid, "%lld", hs.reserved.pid);
		log_error("broke %s: the reservation for the --preempt request of %s pid %s%s%s%s "
		          "(token %s)",
		          l.key, rh[0] ? rh : "?", pid, rl[0] ? " [" : "", rl, rl[0] ? "]" : "",
		          hs.reserved.token[0] ? hs.reserved.token : "?");
	}
	if (!hs.n && hs.reserved.known) {
		break_closed(&l, o, hs.closed_ms);
		return 0;
	}
	if (!hs.n) {
		log_warn("%s was not held: nothing removed", l.key);
		break_closed(&l, o, hs.closed_ms);
		return 0;
	}
	/* Operator action: always say what was removed, even with -q (log_msg escapes). */
	for (int i = 0; i < hs.n; i++) {
		const struct holder *h = &hs.h[i];
		char who[1024], fence[32] = "?";
		if (h->has_fence)
			snprintf(fence, sizeof fence, "%lld", h->fence);
		log_error("broke %s: token %s, held by %s, fence %s", l.key,
		          h->token[0] ? h->token : "?",
		          holder_format(h, HOLDER_CMD | HOLDER_RAW, who, sizeof who), fence);
	}
	if (hs.total > hs.n)
		log_error("broke %s: and %d more holders", l.key, hs.total - hs.n);
	break_closed(&l, o, hs.closed_ms);
	return 0;
}

int report_reset(struct store *s, const struct report_ask *o)
{
	struct lock l;
	struct holders hs;
	char err[400], host[256] = "", left[64], who[1024];
	struct lock_meta me = {
	    .host = host, .user = breaker_user(), .pid = (long)getpid(), .label = o->label};

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	gethostname(host, sizeof host - 1);
	l.breaker = &me;
	l.reset = 1;
	l.ask.history_len = o->history_len;
	l.ask.history_ms = o->history_ms;
	if (store_break(s, &l, clock_ms() + o->io_timeout_ms, &hs, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		store_close(s);
		return RL_EX_UNAVAILABLE;
	}
	store_close(s);
	say_strays(&l, &hs, "reset");
	/* Operator action: always say what was cleared, even with -q. */
	if (hs.closed_ms > 0) {
		holder_human_ms(left, sizeof left, hs.closed_ms);
		log_error("reset %s: lifted the lock-delay (%s were left)", l.key, left);
	}
	if (hs.done) {
		char was[96] = "it had no expiry: set by hand?";
		if (hs.done_pttl_ms >= 0) {
			holder_human_ms(left, sizeof left, hs.done_pttl_ms);
			snprintf(was, sizeof was, "%s were left", left);
		}
		log_error("reset %s: cleared the --once-per mark of fence %s (%s)", l.key,
		          hs.done_fence[0] ? hs.done_fence : "?", was);
	}
	if (hs.closed_ms <= 0 && !hs.done && !hs.nstrays)
		log_warn("%s had no lock-delay and no --once-per mark: nothing cleared", l.key);
	if (hs.n > 0)
		log_error("%s is still held by %s (a live holder: --break removes it)", l.key,
		          holder_format(&hs.h[0], HOLDER_CMD | HOLDER_RAW, who, sizeof who));
	else if (hs.reserved.known) { /* no mark: kept for a --preempt request, maybe dead */
		char reserved[2400];
		log_error("%s is still %s: --break removes it", l.key,
		          reserved_text(reserved, sizeof reserved, &hs.reserved, 1));
	}
	return 0;
}

/* --list's table: the rows are written with their cells apart (US, which escaped text
 * never holds: log_escape shows it as \x1f), then laid out at once, each column as wide
 * as the widest text it will print (escaped), at least its usual width, so that a
 * wide host or name never shifts the columns after it; a row's last cell is not padded.
 */
#define US "\x1f"
enum { LIST_COLS = 7 };
static const int list_min_width[LIST_COLS - 1] = {24, 20, 8, 9, 9, 9};

static void table_write(FILE *out, const char *buf, size_t len)
{
	size_t width[LIST_COLS - 1];

	for (int i = 0; i < LIST_COLS - 1; i++)
		width[i] = (size_t)list_min_width[i];
	for (int pass = 0; pass < 2; pass++) {
		for (const char *p = buf, *end = buf + len; p < end;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			nl = nl ? nl : end;
			for (int c = 0; p < nl; c++) {
				const char *us =
				    c < LIST_COLS - 1 ? memchr(p, US[0], (size_t)(nl - p)) : NULL;
				const char *cell_end = us ? us : nl;
				size_t w = (size_t)(cell_end - p);
				if (pass == 0 && us && w > width[c])
					width[c] = w;
				if (pass == 1) {
					fwrite(p, 1, w, out);
					for (size_t k = w; us && k < width[c] + 1; k++)
						putc(' ', out);
				}
				p = us ? us + 1 : nl;
			}
			if (pass == 1 && nl < end)
				putc('\n', out);
			p = nl + 1;
		}
	}
}

struct list_out {
	const struct report_ask *o;
	FILE *f; /* the answer, in memory until it is complete */
	int started, count;
	int undecided; /* Redlock: names the listing cannot judge (their rows say so) */
};

/* The listing's head: JSON's opening, or the table's header line. */
static void list_head(struct list_out *w)
{
	w->started = 1;
	if (w->o->json) {
		fputs("{\"schema\":1,\"prefix\":", w->f);
		json_str(w->f, w->o->prefix);
		fputs(",\"locks\":[", w->f);
	} else {
		fputs("NAME" US "HOST" US "PID" US "HELD" US "TTL" US "RENEWED" US "COMMAND\n",
		      w->f);
	}
}

/* One lock held (name NULL: the server answered, the listing begins). */
static int list_lock(void *arg, const char *name, const struct lock *l, const struct holders *hs)
{
	struct list_out *w = arg;
	const struct report_ask *o = w->o;
	FILE *f = w->f;

	if (!name) {
		list_head(w);
		return 0;
	}
	if (hs->undecided[0]) { /* Redlock: --status's "cannot tell", in the name's row */
		char ename[4 * LOCK_NAME_MAX + 1];
		log_error("--list: cannot tell whether %s is held: %s", l->key, hs->undecided);
		w->undecided++;
		if (o->json) {
			fputs(w->count ? ",{\"name\":" : "{\"name\":", f);
			json_str(f, name);
			fputs(",\"key\":", f);
			json_str(f, l->key);
			fputs(",\"held\":null,\"cannot_tell\":", f);
			json_str(f, hs->undecided);
			fprintf(f, ",\"nodes_ok\":%d,\"nodes_total\":%d}", hs->nodes_ok,
			        hs->nodes_total);
		} else {
			esc(ename, sizeof ename, name);
			fprintf(f, "%s" US "-" US "%s" US "%s" US "%s" US "[cannot tell: %s]\n",
			        ename, "-", "-", "-", hs->undecided);
		}
		w->count++;
		return ferror(f) ? -1 : 0;
	}
	if (o->json) {
		if (w->count)
			fputc(',', f);
		holders_json(f, 0, name, l->key, NULL, hs);
	}
	/* One row per holder (shared holders and permits too). */
	for (int j = 0; !o->json && j < hs->n; j++) {
		const struct holder *h = &hs->h[j];
		struct holder_text t;
		char ename[4 * LOCK_NAME_MAX + 1];
		char renewed[32];
		holder_text(h, now_unix_ms(), &t);
		esc(ename, sizeof ename, name);
		holder_human_ms(renewed, sizeof renewed, h->renewed_ago_ms);
		fprintf(f, "%s" US "%s" US "%s" US "%s" US "%s" US "%s" US "%s%s%s%s%s%s%s\n",
		        ename, t.host, t.pid, t.held, t.left, renewed,
		        !h->kept && judged(h, l->key) == HOLDER_GONE ? "[gone] " : "",
		        h->kept ? "[kept by --min-hold] " : "",
		        h->mode == 's'   ? "[shared] "
		        : h->mode == 'l' ? "[permit] "
		                         : "",
		        t.cmd, t.label[0] ? " [" : "", t.label, t.label[0] ? "]" : "");
	}
	if (!o->json && !hs->n && hs->reserved.known) { /* nobody holds it: the hand-over's row */
		char ename[4 * LOCK_NAME_MAX + 1], left[32], reserved[2400];
		esc(ename, sizeof ename, name);
		holder_human_ms(left, sizeof left, hs->reserved.left_ms);
		fprintf(f, "%s" US "-" US "-" US "-" US "%s" US "[%s]\n", ename, left,
		        reserved_text(reserved, sizeof reserved, &hs->reserved, 0));
	} else if (!o->json && !hs->n && hs->split_nodes) { /* Redlock: no majority holder */
		char ename[4 * LOCK_NAME_MAX + 1], left[32], split[320];
		esc(ename, sizeof ename, name);
		holder_human_ms(left, sizeof left, hs->split_ms);
		fprintf(f, "%s" US "-" US "-" US "-" US "%s" US "[%s]\n", ename, left,
		        split_text(split, sizeof split, hs));
	} else if (!o->json && !hs->n && hs->closed_ms > 0) { /* the delay's row */
		char ename[4 * LOCK_NAME_MAX + 1], left[32], closed[160];
		esc(ename, sizeof ename, name);
		holder_human_ms(left, sizeof left, hs->closed_ms);
		fprintf(f, "%s" US "-" US "-" US "-" US "%s" US "[%s]\n", ename, left,
		        closed_text(closed, sizeof closed, hs));
	} else if (!o->json && !hs->n && hs->queued > 0) { /* the fair queue goes first */
		char ename[4 * LOCK_NAME_MAX + 1], queued[160];
		esc(ename, sizeof ename, name);
		fprintf(f, "%s" US "-" US "-" US "-" US "-" US "[%s]\n", ename,
		        queued_text(queued, sizeof queued, hs));
	}
	w->count++;
	return ferror(f) ? -1 : 0; /* out of memory: stop the walk */
}

/* The whole listing's time when no -w gives one: this many --io-timeouts (60 s by
 * default), however many locks; each request still has its own --io-timeout. */
#define LIST_IO_TIMEOUTS 30

/* The whole answer or nothing: the listing is kept in memory until every master (every
 * SCAN page, every lock's status) has answered, then written at once; a failure on the
 * way (a Cluster master that does not answer, a server lost after its first page, the
 * listing's time, -w or LIST_IO_TIMEOUTS, spent) leaves stdout empty. */
int report_list(struct store *s, const struct report_ask *o)
{
	struct list_out w = {.o = o};
	char err[400] = "", *buf = NULL;
	size_t len = 0;
	int rc = 0;
	int64_t total = o->wait_ms > 0 ? o->wait_ms : LIST_IO_TIMEOUTS * o->io_timeout_ms;
	int64_t cap = clock_ms() + total;

	w.f = open_memstream(&buf, &len);
	if (!w.f) {
		log_error("--list: out of memory");
		store_close(s);
		return RL_EX_OSERR;
	}
	if (store_list(s, o->prefix, cap, list_lock, &w, err, sizeof err) != 0) {
		if (!ferror(w.f) && clock_ms() >= cap) {
			log_debug("%s", err);
			if (o->wait_ms > 0)
				snprintf(err, sizeof err,
				         "--list: no complete answer within %.1f s (-w); nothing "
				         "printed",
				         (double)o->wait_given_ms / 1000);
			else
				snprintf(
				    err, sizeof err,
				    "--list: no complete answer within %.1f s (%d x --io-timeout; "
				    "-w sets the time); nothing printed",
				    (double)total / 1000, LIST_IO_TIMEOUTS);
		}
		if (ferror(w.f))
			snprintf(err, sizeof err,
			         "--list: out of memory for the answer; nothing printed");
		request_failed(err);
		rc = ferror(w.f) ? RL_EX_OSERR : RL_EX_UNAVAILABLE;
	}
	store_close(s);
	if (!rc && !w.started) /* no master at all: an empty listing, complete */
		list_head(&w);
	if (!rc && o->json)
		fputs("]}\n", w.f);
	if (fclose(w.f) != 0 && !rc) {
		log_error("--list: out of memory for the answer; nothing printed");
		rc = RL_EX_OSERR;
	}
	if (!rc && o->json)
		fwrite(buf, 1, len, stdout);
	else if (!rc)
		table_write(stdout, buf, len);
	free(buf);
	int wr = cli_close_stdout();
	/* the whole listing, but a name in it could not be judged (its row says so): 69, as
	 * --status of that name */
	return rc ? rc : wr ? wr : w.undecided ? RL_EX_UNAVAILABLE : 0;
}

/* ---- --held ---------------------------------------------------------------------- */

static struct {
	int n;
	int by_key;     /* -k NAME, its token the environment's for the key: another may be meant */
	struct lock *l; /* n of them: every lock the environment names (no cap) */
	char (*token)[LOCK_TOKEN_LEN + 1];
} plan;

static void held_usage(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void held_usage(const char *fmt, ...)
{
	char buf[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	log_error("%s (try 'rlock --help')", buf); /* cli.c's usage shape */
	exit(RL_EX_USAGE);
}

static void plan_add(const char *prefix, const char *name, const char *token, const char *src)
{
	size_t n = strspn(token, "0123456789abcdef");

	if (n != LOCK_TOKEN_LEN || token[n])
		held_usage("--held: %s is not an rlock token (32 hex digits)", src);
	if (lock_init(&plan.l[plan.n], prefix, name, 0) < 0)
		held_usage("no randomness for a lock: %s", strerror(errno));
	memcpy(plan.token[plan.n++], token, LOCK_TOKEN_LEN + 1);
}

void held_plan(const struct report_ask *o)
{
	static struct inherited_holds r;

	inherited_read(&r);
	int most = r.n > 0 ? r.n : 1;
	plan.l = malloc((size_t)most * sizeof *plan.l);
	plan.token = malloc((size_t)most * sizeof *plan.token);
	if (!plan.l || !plan.token) {
		log_error("--held: out of memory for the %d locks to check", most);
		exit(RL_EX_OSERR);
	}
	if (o->name) {
		struct lock k;
		const char *tok = o->token;
		if (lock_init(&k, o->prefix, o->name, 0) < 0)
			held_usage("no randomness for a lock: %s", strerror(errno));
		for (int i = 0; !tok && i < r.n; i++)
			if (!strcmp(r.in[i].key, k.key))
				tok = r.in[i].token;
		if (!tok)
			held_usage("--held -k %s needs the holder's token: --token TOKEN, or "
			           "RLOCK_KEY/RLOCK_KEYS naming that lock (inside the job)",
			           o->name);
		plan_add(o->prefix, o->name, tok, o->token ? "--token" : "the inherited token");
		plan.by_key = !o->token;
		return;
	}
	if (r.n == 0)
		held_usage("--held needs a lock: run it inside the job (%s), or give -k NAME "
		           "--token TOKEN",
		           "RLOCK_KEY and RLOCK_TOKEN");
	for (int i = 0; i < r.n; i++) {
		/* A key is PREFIX{NAME}: the name is inside the last braces. */
		char prefix[LOCK_KEY_MAX], err[200];
		const char *key = r.in[i].key, *open = strrchr(key, '{');
		size_t kn = strlen(key);
		if (!open || key[kn - 1] != '}' || kn - (size_t)(open - key) < 3)
			held_usage(
			    "--held: '%s' (from RLOCK_KEY or RLOCK_KEYS) is not an rlock key", key);
		char name[LOCK_KEY_MAX];
		snprintf(prefix, sizeof prefix, "%.*s", (int)(open - key), key);
		snprintf(name, sizeof name, "%.*s", (int)(kn - (size_t)(open - key) - 2), open + 1);
		if (parse_prefix(prefix, err, sizeof err) < 0 ||
		    parse_lock_name(name, err, sizeof err) < 0)
			held_usage(
			    "--held: '%s' (from RLOCK_KEY or RLOCK_KEYS) is not an rlock key", key);
		plan_add(prefix, name, r.in[i].token, "RLOCK_TOKEN (or a word of RLOCK_TOKENS)");
	}
}

/* One lock's object; head: fields before "key" ("" or "\"schema\":1,"). */
static void held_json(FILE *f, const char *head, const char *key, int held,
                      const struct holding *hd)
{
	fprintf(f, "{%s\"key\":", head);
	json_str(f, key);
	fprintf(f, ",\"held\":%s,\"ttl_left_ms\":",
	        held == 1   ? "true"
	        : held == 0 ? "false"
	                    : "null");
	json_int_or_null(f, held == 1 && hd->ttl_left_ms >= 0, hd->ttl_left_ms);
	fputs(",\"fence\":", f);
	json_int_or_null(f, held == 1 && hd->has_fence, hd->fence);
	fputc('}', f);
}

int report_held(struct store *s, const struct report_ask *o)
{
	int *held = malloc((size_t)plan.n * sizeof *held), all = 1, unknown = 0;
	struct holding *hd = malloc((size_t)plan.n * sizeof *hd);
	long long least = -1, pid = -1;
	char err[400];

	if (!held || !hd) {
		log_error("--held: out of memory for the %d locks to check", plan.n);
		store_close(s);
		return RL_EX_OSERR;
	}
	/* Redis unreachable (no store): only a keeper's record on this host can answer (it
	 * gave the lock up: 79 whatever Redis could say); without one, nothing is printed
	 * and the caller's 69 stands. */
	int recorded = 0;
	for (int i = 0; !s && !recorded && i < plan.n; i++) {
		char ended[600];
		recorded = keeper_ended(plan.l[i].key, plan.token[i], ended, sizeof ended) ||
		           keeper_gone(plan.l[i].key, plan.token[i], ended, sizeof ended);
	}
	if (!s && !recorded) {
		free(held);
		free(hd);
		return RL_EX_UNAVAILABLE;
	}

	/* -k NAME without --token: the environment may name its key more than once, a hold
	 * on another database or server besides (RLOCK_KEY is only the first): the one this
	 * server says holds it is asked about, the first when none does. */
	if (plan.by_key && s) {
		static struct inherited_holds r;
		inherited_read(&r);
		for (int j = 0; j < r.n; j++)
			if (!strcmp(r.in[j].key, plan.l[0].key) &&
			    strcmp(r.in[j].token, plan.token[0]) != 0 &&
			    store_is_holder(s, &plan.l[0], plan.token[0],
			                    clock_ms() + o->io_timeout_ms, &hd[0], err,
			                    sizeof err) == 0 &&
			    store_is_holder(s, &plan.l[0], r.in[j].token,
			                    clock_ms() + o->io_timeout_ms, &hd[0], err,
			                    sizeof err) == 1)
				memcpy(plan.token[0], r.in[j].token, LOCK_TOKEN_LEN + 1);
	}
	for (int i = 0; i < plan.n; i++) {
		char ended[600];
		/* A keeper on this host that lost the lock or gave it up said so (keeper.h):
		 * not held, with why and when, whatever Redis can say now. */
		if (keeper_ended(plan.l[i].key, plan.token[i], ended, sizeof ended)) {
			held[i] = 0;
			all = 0;
			log_warn("%s is not held by token %s: %s", plan.l[i].key, plan.token[i],
			         ended);
			continue;
		}
		held[i] =
		    s ? store_is_holder(s, &plan.l[i], plan.token[i], clock_ms() + o->io_timeout_ms,
		                        &hd[i], err, sizeof err)
		      : -1;
		if (held[i] < 0 && keeper_gone(plan.l[i].key, plan.token[i], ended, sizeof ended)) {
			/* Redis cannot say, but its keeper on this host was killed unheard:
			 * nothing renews the lease, as with Redis up (reenter_holder_gone) */
			held[i] = 0;
			all = 0;
			log_warn("%s is not held by token %s: %s", plan.l[i].key, plan.token[i],
			         ended);
		} else if (!s) { /* unreachable: its error said so */
			unknown = 1;
		} else if (held[i] < 0) {
			request_failed(err);
			unknown = 1;
		} else if (held[i] == 0) {
			all = 0;
			log_warn("%s is not held by token %s", plan.l[i].key, plan.token[i]);
		} else if (reenter_holder_gone(s, &plan.l[i], plan.token[i], o->io_timeout_ms,
		                               INT64_MAX, &pid)) {
			/* Its keeper (or rlock) on this host was killed unheard: the lease runs
			 * out by its TTL and nothing renews it (a nested run refuses it too). */
			held[i] = 0;
			all = 0;
			char left[64] = "";
			if (hd[i].ttl_left_ms >= 0)
				snprintf(left, sizeof left, " (it ends in %lld ms)",
				         (long long)hd[i].ttl_left_ms);
			log_warn("%s is not held by token %s: its holder (pid %lld) is gone and "
			         "nobody renews its lease%s",
			         plan.l[i].key, plan.token[i], pid, left);
		} else if (hd[i].ttl_left_ms >= 0 && (least < 0 || hd[i].ttl_left_ms < least)) {
			least = hd[i].ttl_left_ms;
		}
	}
	store_close(s);
	/* Not held anywhere wins over "cannot say" elsewhere: the job lost a lock. */
	int rc = !all ? RL_EX_LOST : unknown ? RL_EX_UNAVAILABLE : 0;
	if (o->json && plan.n == 1) {
		held_json(stdout, "\"schema\":1,", plan.l[0].key, held[0], &hd[0]);
		fputc('\n', stdout);
	} else if (o->json) {
		fprintf(stdout, "{\"schema\":1,\"held\":%s,\"ttl_left_ms\":",
		        rc == 0            ? "true"
		        : rc == RL_EX_LOST ? "false"
		                           : "null");
		json_int_or_null(stdout, rc == 0 && least >= 0, least);
		fputs(",\"fence\":null,\"locks\":[", stdout);
		for (int i = 0; i < plan.n; i++) {
			if (i)
				fputc(',', stdout);
			held_json(stdout, "", plan.l[i].key, held[i], &hd[i]);
		}
		fputs("]}\n", stdout);
	}
	free(held);
	free(hd);
	int wrc = cli_close_stdout();
	return wrc ? wrc : rc;
}

/* A number stored as text (untrusted): printed as a JSON number when it is one. */
static void json_num_or_null(FILE *f, const char *s)
{
	long long v = 0;
	int known = *s && parse_int(s, LLONG_MIN, LLONG_MAX, &v, NULL, 0) == 0;

	json_int_or_null(f, known, v);
}

/* The fields of a history entry in JSON ('n': a number when it is one, else null). */
#define HFIELD(name, field, kind)                                                                  \
	{                                                                                          \
		name, offsetof(struct history_entry, field), kind                                  \
	}
static const struct {
	const char *name;
	size_t off;
	char kind;
} history_fields[] =
    {
        HFIELD("event", ev, 's'),    HFIELD("fence", fence, 'n'),   HFIELD("token", token, 's'),
        HFIELD("host", host, 's'),   HFIELD("pid", pid, 'n'),       HFIELD("user", user, 's'),
        HFIELD("label", label, 's'), HFIELD("status", status, 'n'),
},
  history_by[] = {
      HFIELD("host", by_host, 's'),
      HFIELD("pid", by_pid, 'n'),
      HFIELD("user", by_user, 's'),
      HFIELD("label", by_label, 's'),
};
#undef HFIELD

static void history_json_entry(FILE *f, const struct history_entry *e)
{
	fprintf(f, "{\"at_ms\":%lld", e->at_ms);
	for (size_t i = 0; i < sizeof history_fields / sizeof history_fields[0]; i++) {
		const char *v = (const char *)e + history_fields[i].off;
		fprintf(f, ",\"%s\":", history_fields[i].name);
		history_fields[i].kind == 'n' ? json_num_or_null(f, v) : json_str_or_null(f, v);
	}
	fprintf(f, ",\"recorded\":%s", e->seen[0] ? "false" : "true");
	if (e->cleared[0]) {
		fputs(",\"cleared\":", f);
		json_str(f, e->cleared);
	}
	if (!e->by_host[0] && !e->by_pid[0] && !e->by_user[0]) {
		fputs(",\"by\":null}", f);
		return;
	}
	for (size_t i = 0; i < sizeof history_by / sizeof history_by[0]; i++) {
		const char *v = (const char *)e + history_by[i].off;
		fprintf(f, "%s\"%s\":", i ? "," : ",\"by\":{", history_by[i].name);
		history_by[i].kind == 'n' ? json_num_or_null(f, v) : json_str_or_null(f, v);
	}
	fputs("}}", f);
}

/* One line of --history (its event padded to ev_width): when, what, the fence, whose run, and who
 * acted. Every field is the stream's text, which any client can write (XADD): each one escaped. A
 * field the record does not have is left out, never shown as "?": a --break of a --preempt
 * reservation has no fence (no run held it), a --reset of a lock-delay alone, or a
 * supersession of a request while the name was free, none either (JSON: null). */
static void history_line(const struct history_entry *e, int ev_width)
{
	char when[32], ev[4 * sizeof e->ev], fence[4 * sizeof e->fence], host[1024],
	    pid[4 * sizeof e->pid], label[4 * (LOCK_LABEL_MAX + 1)], status[4 * sizeof e->status],
	    cleared[4 * sizeof e->cleared], by[1024], by_pid[4 * sizeof e->by_pid],
	    by_user[4 * sizeof e->by_user], blabel[sizeof label];

	local_time(when, sizeof when, e->at_ms);
	log_escape(ev, sizeof ev, e->ev, strlen(e->ev));
	log_escape(fence, sizeof fence, e->fence, strlen(e->fence));
	log_escape(host, sizeof host, e->host, strlen(e->host));
	log_escape(pid, sizeof pid, e->pid, strlen(e->pid));
	log_escape(label, sizeof label, e->label, strlen(e->label));
	printf("%s  %-*s", when, ev_width, ev);
	if (fence[0])
		printf("  fence %s", fence);
	if (host[0] || pid[0])
		printf("  %s%s%s", host, host[0] && pid[0] ? " " : "", pid[0] ? "pid " : "");
	printf("%s%s%s%s", pid, label[0] ? " [" : "", label, label[0] ? "]" : "");
	if (e->status[0]) {
		esc(status, sizeof status, e->status);
		printf("  status %s", status);
	}
	if (e->cleared[0]) {
		esc(cleared, sizeof cleared, e->cleared);
		printf("  cleared %s", cleared);
	}
	if (e->by_host[0] || e->by_pid[0]) {
		log_escape(by, sizeof by, e->by_host, strlen(e->by_host));
		log_escape(by_pid, sizeof by_pid, e->by_pid, strlen(e->by_pid));
		log_escape(blabel, sizeof blabel, e->by_label, strlen(e->by_label));
		printf("  by %s%s%s%s", by, by[0] && by_pid[0] ? " " : "", by_pid[0] ? "pid " : "",
		       by_pid);
		if (e->cleared[0] &&
		    e->by_user[0]) { /* a reset names its user, as a break's record */
			esc(by_user, sizeof by_user, e->by_user);
			printf(" (user %s)", by_user);
		}
		printf("%s%s%s", blabel[0] ? " [" : "", blabel, blabel[0] ? "]" : "");
	}
	if (e->seen[0]) /* history_read.lua: the lease is over, nobody wrote the run's end */
		fputs("  (lease over, no end recorded yet)", stdout);
	putchar('\n');
}

int report_history(struct store *s, const struct report_ask *o)
{
	struct lock l;
	char err[400];
	int n = o->history_count;
	struct history_entry *e = calloc((size_t)n, sizeof *e);

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	if (!e || store_history(s, &l, clock_ms() + o->io_timeout_ms, e, &n, err, sizeof err) !=
	              LOCK_OK) {
		request_failed(e ? err : "out of memory");
		store_close(s);
		free(e);
		return e ? RL_EX_UNAVAILABLE : RL_EX_OSERR;
	}
	store_close(s);
	if (o->json) {
		fputs("{\"schema\":1,\"name\":", stdout);
		json_str(stdout, o->name);
		fputs(",\"key\":", stdout);
		json_str(stdout, l.key);
		fputs(",\"entries\":[", stdout);
		for (int i = 0; i < n; i++) {
			if (i)
				fputc(',', stdout);
			history_json_entry(stdout, &e[i]);
		}
		fputs("]}\n", stdout);
	} else {
		if (n == 0 && o->history_len > 0)
			printf("%s: no history yet (no run recorded under this name, or none "
			       "within the retention)\n",
			       l.key);
		else if (n == 0)
			printf("%s: no history (config: history = 0 here turns recording off; "
			       "history = N turns it on)\n",
			       l.key);
		/* the event's column as wide as its widest text (escaped: the stream is any
		 * client's), so that the fences after it line up */
		int ev_width = 10;
		for (int i = 0; i < n; i++) {
			char ev[4 * sizeof e[i].ev];
			log_escape(ev, sizeof ev, e[i].ev, strlen(e[i].ev));
			ev_width = (int)strlen(ev) > ev_width ? (int)strlen(ev) : ev_width;
		}
		for (int i = 0; i < n; i++)
			history_line(&e[i], ev_width);
	}
	free(e);
	return cli_close_stdout();
}
