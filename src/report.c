/* SPDX-License-Identifier: MIT */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exitcodes.h"
#include "lock.h"
#include "log.h"
#include "parse.h"

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static long long now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void human_ms(char *buf, size_t n, long long ms)
{
	if (ms < 0)
		snprintf(buf, n, "-");
	else if (ms < 10000)
		snprintf(buf, n, "%.1fs", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, n, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, n, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
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

/* A holder's numeric field as it was stored (anyone who can write the hash can put
 * anything there): 1 with *v for a plain decimal number, else 0. */
static int field_number(const char *s, long long *v)
{
	size_t n = strlen(s);

	if (n == 0 || n > 18 || strspn(s, "0123456789") != n)
		return 0;
	*v = strtoll(s, NULL, 10);
	return 1;
}

static void holder_json(FILE *f, const char *name, const char *key, const struct holder *h)
{
	fputs("{\"name\":", f);
	json_str(f, name);
	fputs(",\"key\":", f);
	json_str(f, key);
	fprintf(f, ",\"held\":%s", h->held ? "true" : "false");
	if (h->held) {
		long long start = 0, pid = 0, ttl = 0;
		int has_start = field_number(h->start, &start) && start > 0;
		int has_pid = field_number(h->pid, &pid);
		int has_ttl = field_number(h->ttl, &ttl);
		long long now = now_unix_ms();
		fputs(",\"host\":", f);
		json_str_or_null(f, h->host);
		fputs(",\"pid\":", f);
		json_int_or_null(f, has_pid, pid);
		fputs(",\"user\":", f);
		json_str_or_null(f, h->user);
		fputs(",\"command\":", f);
		json_str_or_null(f, h->cmd);
		fputs(",\"start_ms\":", f);
		json_int_or_null(f, has_start, start);
		fputs(",\"held_ms\":", f);
		json_int_or_null(f, has_start, now - start);
		fputs(",\"ttl_ms\":", f);
		json_int_or_null(f, has_ttl, ttl);
		fputs(",\"ttl_left_ms\":", f);
		json_int_or_null(f, h->pttl_ms >= 0, h->pttl_ms);
		fprintf(f, ",\"min_hold\":%s,\"kept_until_ms\":", h->kept ? "true" : "false");
		json_int_or_null(f, h->kept && h->pttl_ms >= 0, now + h->pttl_ms);
	}
	fprintf(f, ",\"fence\":%lld}", h->fence);
}

/* A failed request: say why, unless a terminating signal cut it short (main then
 * dies of the signal, as an interrupted program does, without a word). */
static void request_failed(const char *err)
{
	if (!conn_abort_pending())
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

/* Local wall-clock time of unix_ms, "YYYY-MM-DD HH:MM:SS", or "?". */
static void local_time(char *buf, size_t n, long long unix_ms)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	snprintf(buf, n, "?");
	if (unix_ms > 0 && localtime_r(&t, &tm))
		strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

int report_status(struct store *s, const struct opts *o)
{
	struct lock l;
	struct holder h;
	char err[400];

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	if (store_status(s, &l, clock_ms() + o->io_timeout_ms, &h, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		store_close(s);
		return RL_EX_UNAVAILABLE;
	}
	store_close(s);
	if (o->json) {
		holder_json(stdout, o->name, l.key, &h);
		fputc('\n', stdout);
	} else if (!h.held) {
		printf("%s is free (last fence %lld)\n", l.key, h.fence);
	} else {
		char host[300], cmd[600], user[100], pid[100], held[32], left[32], when[64];
		char until[64], state[200] = "";
		long long start = 0, now = now_unix_ms();
		int has_start = field_number(h.start, &start) && start > 0;
		local_time(when, sizeof when, has_start ? start : 0);
		esc(host, sizeof host, h.host);
		esc(cmd, sizeof cmd, h.cmd);
		esc(user, sizeof user, h.user);
		esc(pid, sizeof pid, h.pid);
		human_ms(held, sizeof held, has_start ? now - start : -1);
		human_ms(left, sizeof left, h.pttl_ms);
		if (h.kept && h.pttl_ms >= 0) {
			/* The command has exited; --min-hold keeps the lock so that the same job
			 * fired elsewhere does not run again: not a stuck lock to break. */
			local_time(until, sizeof until, now + h.pttl_ms);
			snprintf(state, sizeof state,
			         "  kept     by --min-hold until %s: its command has exited\n",
			         until);
		}
		printf("%s is held%s\n"
		       "  host     %s\n  pid      %s%s\n  user     %s\n  command  %s\n"
		       "  since    %s (%s)\n%s  ttl left %s%s\n  fence    %lld\n",
		       l.key, h.kept ? " (kept by --min-hold)" : "", host, pid,
		       h.kept ? " (exited)" : "", user, cmd, when, held, state, left,
		       h.pttl_ms == -1 ? " (no expiry: set by hand?)" : "", h.fence);
	}
	int rc = cli_close_stdout();
	/* --status has its own rule: held is 75, or the -E status unless that is 0 (a
	 * skip code would make a held lock look free). */
	return rc ? rc : !h.held ? 0 : o->conflict_exit ? o->conflict_exit : RL_EX_CONFLICT;
}

int report_break(struct store *s, const struct opts *o)
{
	struct lock l;
	struct holder h;
	char err[400];

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	if (store_break(s, &l, clock_ms() + o->io_timeout_ms, &h, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		store_close(s);
		return RL_EX_UNAVAILABLE;
	}
	store_close(s);
	if (!h.held) {
		log_warn("%s was not held: nothing removed", l.key);
		return 0;
	}
	/* Operator action: always say what was removed, even with -q (log_msg escapes). */
	log_error("broke %s: token %s, held by %s pid %s (%s), fence %lld", l.key,
	          h.token[0] ? h.token : "?", h.host[0] ? h.host : "?", h.pid[0] ? h.pid : "?",
	          h.cmd[0] ? h.cmd : "?", h.fence);
	return 0;
}

/* SCAN MATCH needs the prefix's glob characters escaped. */
static void glob_escape(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < n; s++) {
		if (strchr("*?[]\\", *s))
			dst[o++] = '\\';
		dst[o++] = *s;
	}
	dst[o] = '\0';
}

struct list_walk {
	struct store *s;
	const struct opts *o;
	int started, count;
	char err[400];
};

/* One page of SCAN's names: print the locks still held. */
static int list_page(void *arg, const struct resp_reply *names)
{
	struct list_walk *w = arg;
	const struct opts *o = w->o;
	size_t plen = strlen(o->prefix);

	if (!w->started) {
		/* Only once the server answered: an error leaves stdout empty. */
		w->started = 1;
		if (o->json) {
			fputs("{\"prefix\":", stdout);
			json_str(stdout, o->prefix);
			fputs(",\"locks\":[", stdout);
		} else {
			printf("%-24s %-20s %-8s %-9s %-9s %s\n", "NAME", "HOST", "PID", "HELD",
			       "TTL", "COMMAND");
		}
	}
	for (size_t i = 0; i < names->elements; i++) {
		const struct resp_reply *k = names->element[i];
		if (k->type != RESP_STRING || k->len < plen + 2 ||
		    k->len - plen - 2 > LOCK_NAME_MAX)
			continue;
		char name[LOCK_NAME_MAX + 1];
		memcpy(name, k->str + plen + 1, k->len - plen - 2);
		name[k->len - plen - 2] = '\0';
		if (strpbrk(name, "{}"))
			continue;
		struct lock l;
		struct holder h;
		lock_init(&l, o->prefix, name, o->ttl_ms);
		if (store_status(w->s, &l, clock_ms() + o->io_timeout_ms, &h, w->err,
		                 sizeof w->err) != LOCK_OK)
			return -1;
		if (!h.held)
			continue; /* released between SCAN and now */
		if (o->json) {
			if (w->count)
				fputc(',', stdout);
			holder_json(stdout, name, l.key, &h);
		} else {
			char ename[200], host[100], pid[100], cmd[300], held[32], left[32];
			long long start = 0;
			int has_start = field_number(h.start, &start) && start > 0;
			esc(ename, sizeof ename, name);
			esc(host, sizeof host, h.host);
			esc(pid, sizeof pid, h.pid);
			esc(cmd, sizeof cmd, h.cmd);
			human_ms(held, sizeof held, has_start ? now_unix_ms() - start : -1);
			human_ms(left, sizeof left, h.pttl_ms);
			printf("%-24s %-20s %-8s %-9s %-9s %s%s\n", ename, host, pid, held, left,
			       h.kept ? "[kept by --min-hold] " : "", cmd);
		}
		w->count++;
	}
	return 0;
}

int report_list(struct store *s, const struct opts *o)
{
	struct list_walk w = {.s = s, .o = o};
	char match[300];
	int rc = 0;

	glob_escape(match, sizeof match - 4, o->prefix);
	memcpy(match + strlen(match), "{*}", 4); /* room kept by the - 4 above */
	if (store_list(s, match, list_page, &w, w.err, sizeof w.err) != 0) {
		request_failed(w.err);
		rc = RL_EX_UNAVAILABLE;
	}
	store_close(s);
	if (o->json && w.started)
		fputs("]}\n", stdout);
	int wr = cli_close_stdout();
	return rc ? rc : wr;
}
