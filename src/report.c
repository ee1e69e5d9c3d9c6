#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exitcodes.h"
#include "lock.h"
#include "log.h"

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

static void holder_json(FILE *f, const char *name, const char *key, const struct holder *h)
{
	fputs("{\"name\":", f);
	json_str(f, name);
	fputs(",\"key\":", f);
	json_str(f, key);
	fprintf(f, ",\"held\":%s", h->held ? "true" : "false");
	if (h->held) {
		long long start = strtoll(h->start, NULL, 10);
		fputs(",\"host\":", f);
		json_str(f, h->host);
		fprintf(f, ",\"pid\":%lld,\"user\":", strtoll(h->pid, NULL, 10));
		json_str(f, h->user);
		fputs(",\"command\":", f);
		json_str(f, h->cmd);
		fprintf(f,
		        ",\"start_ms\":%lld,\"held_ms\":%lld,\"ttl_ms\":%lld,\"ttl_left_ms\":%lld",
		        start, start > 0 ? now_unix_ms() - start : -1, strtoll(h->ttl, NULL, 10),
		        h->pttl_ms);
	}
	fprintf(f, ",\"fence\":%lld}", h->fence);
}

static int finish_output(void)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write the report to standard output");
		return RL_EX_SOFTWARE;
	}
	return 0;
}

/* A failed request: say why, unless a terminating signal cut it short (main then
 * dies of the signal, as an interrupted program does, without a word). */
static void request_failed(const char *err)
{
	if (!conn_abort_pending())
		log_error("%s", err);
}

static void esc(char *dst, size_t n, const char *s)
{
	log_escape(dst, n, s, strlen(s));
}

int report_status(struct client *c, const struct opts *o)
{
	struct lock l;
	struct holder h;
	char err[400];

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	if (lock_status(c, &l, clock_ms() + o->io_timeout_ms, &h, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		client_close(c);
		return RL_EX_UNAVAILABLE;
	}
	client_close(c);
	if (o->json) {
		holder_json(stdout, o->name, l.key, &h);
		fputc('\n', stdout);
	} else if (!h.held) {
		printf("%s is free (last fence %lld)\n", l.key, h.fence);
	} else {
		char host[300], cmd[600], user[100], held[32], left[32], when[64] = "?";
		long long start = strtoll(h.start, NULL, 10);
		time_t t = (time_t)(start / 1000);
		struct tm tm;
		if (start > 0 && localtime_r(&t, &tm))
			strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		esc(host, sizeof host, h.host[0] ? h.host : "?");
		esc(cmd, sizeof cmd, h.cmd[0] ? h.cmd : "?");
		esc(user, sizeof user, h.user[0] ? h.user : "?");
		human_ms(held, sizeof held, start > 0 ? now_unix_ms() - start : -1);
		human_ms(left, sizeof left, h.pttl_ms);
		printf("%s is held\n"
		       "  host     %s\n  pid      %s\n  user     %s\n  command  %s\n"
		       "  since    %s (%s)\n  ttl left %s%s\n  fence    %lld\n",
		       l.key, host, h.pid[0] ? h.pid : "?", user, cmd, when, held, left,
		       h.pttl_ms == -1 ? " (no expiry: set by hand?)" : "", h.fence);
	}
	int rc = finish_output();
	return rc ? rc : h.held ? o->conflict_exit : 0;
}

int report_break(struct client *c, const struct opts *o)
{
	struct lock l;
	struct holder h;
	char err[400];

	lock_init(&l, o->prefix, o->name, o->ttl_ms);
	if (lock_break(c, &l, clock_ms() + o->io_timeout_ms, &h, err, sizeof err) != LOCK_OK) {
		request_failed(err);
		client_close(c);
		return RL_EX_UNAVAILABLE;
	}
	client_close(c);
	if (!h.held) {
		log_warn("%s was not held: nothing removed", l.key);
		return 0;
	}
	char host[300], cmd[600], token[100];
	esc(host, sizeof host, h.host[0] ? h.host : "?");
	esc(cmd, sizeof cmd, h.cmd[0] ? h.cmd : "?");
	esc(token, sizeof token, h.token);
	/* Operator action: always say what was removed, even with -q. */
	log_error("broke %s: token %s, held by %s pid %s (%s), fence %lld", l.key, token, host,
	          h.pid[0] ? h.pid : "?", cmd, h.fence);
	return 0;
}

#define SCAN_ROUNDS_MAX 1000000L

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

int report_list(struct client *c, const struct opts *o)
{
	char cursor[32] = "0", match[300], err[400];
	int count = 0, rc = 0;
	size_t plen = strlen(o->prefix);

	glob_escape(match, sizeof match - 4, o->prefix);
	memcpy(match + strlen(match), "{*}", 4); /* room kept by the - 4 above */
	int started = 0;
	/* A server whose cursor never comes back to 0 must not keep --list going forever:
	 * SCAN ... COUNT 200 walks 200 million keys in this many rounds. */
	long rounds = 0;
	do {
		if (++rounds > SCAN_ROUNDS_MAX) {
			log_error("SCAN did not finish after %ld rounds: giving up",
			          SCAN_ROUNDS_MAX);
			rc = RL_EX_UNAVAILABLE;
			goto out;
		}
		struct resp_reply *r;
		const char *argv[] = {"SCAN", cursor, "MATCH", match, "COUNT", "200"};
		size_t lens[6];
		for (int i = 0; i < 6; i++)
			lens[i] = strlen(argv[i]);
		if (client_call(c, 6, argv, lens, clock_ms() + o->io_timeout_ms, &r, err,
		                sizeof err) < 0 ||
		    r->type != RESP_ARRAY || r->elements != 2 ||
		    r->element[0]->type != RESP_STRING || r->element[1]->type != RESP_ARRAY) {
			if (r && resp_is_noauth(r))
				snprintf(err, sizeof err,
				         "SCAN: the server requires a password (NOAUTH); see "
				         "--password-file");
			else if (r && r->type == RESP_ERROR)
				snprintf(err, sizeof err, "SCAN: %.300s", r->str);
			resp_free(r);
			request_failed(err);
			rc = RL_EX_UNAVAILABLE;
			goto out;
		}
		if (!started) {
			/* Only once the server answered: an error leaves stdout empty. */
			started = 1;
			if (o->json) {
				fputs("{\"prefix\":", stdout);
				json_str(stdout, o->prefix);
				fputs(",\"locks\":[", stdout);
			} else {
				printf("%-24s %-20s %-8s %-9s %-9s %s\n", "NAME", "HOST", "PID",
				       "HELD", "TTL", "COMMAND");
			}
		}
		snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
		for (size_t i = 0; i < r->element[1]->elements; i++) {
			const struct resp_reply *k = r->element[1]->element[i];
			if (k->type != RESP_STRING || k->len < plen + 2 || k->len - plen - 2 >= 512)
				continue;
			char name[512];
			memcpy(name, k->str + plen + 1, k->len - plen - 2);
			name[k->len - plen - 2] = '\0';
			if (strpbrk(name, "{}"))
				continue;
			struct lock l;
			struct holder h;
			lock_init(&l, o->prefix, name, o->ttl_ms);
			if (lock_status(c, &l, clock_ms() + o->io_timeout_ms, &h, err,
			                sizeof err) != LOCK_OK) {
				resp_free(r);
				request_failed(err);
				rc = RL_EX_UNAVAILABLE;
				goto out;
			}
			if (!h.held)
				continue; /* released between SCAN and now */
			if (o->json) {
				if (count)
					fputc(',', stdout);
				holder_json(stdout, name, l.key, &h);
			} else {
				char ename[200], host[100], cmd[300], held[32], left[32];
				long long start = strtoll(h.start, NULL, 10);
				esc(ename, sizeof ename, name);
				esc(host, sizeof host, h.host[0] ? h.host : "?");
				esc(cmd, sizeof cmd, h.cmd);
				human_ms(held, sizeof held, start > 0 ? now_unix_ms() - start : -1);
				human_ms(left, sizeof left, h.pttl_ms);
				printf("%-24s %-20s %-8s %-9s %-9s %s\n", ename, host,
				       h.pid[0] ? h.pid : "?", held, left, cmd);
			}
			count++;
		}
		resp_free(r);
	} while (strcmp(cursor, "0") != 0);
out:
	client_close(c);
	if (o->json && started)
		fputs("]}\n", stdout);
	int w = finish_output();
	return rc ? rc : w;
}
