/* SPDX-License-Identifier: MIT */
#include "reenter.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "exitcodes.h"
#include "holder.h"
#include "keeper.h"
#include "log.h"
#include "parse.h"
#include "procstat.h"

static const char *describe(char *buf, size_t n, char mode, int limit)
{
	if (mode == 's')
		snprintf(buf, n, "shared (-s)");
	else if (mode == 'l')
		snprintf(buf, n, "as a permit of --limit %d", limit);
	else
		snprintf(buf, n, "exclusive");
	return buf;
}

/* Does a hold in mode/limit grant what q asks for? Exclusive grants everything. */
static int grants(char mode, int limit, const struct reenter_ask *q)
{
	return mode == 'x' || (mode == 's' && q->mode == LOCK_SHARED) ||
	       (mode == 'l' && q->mode == LOCK_LIMIT && limit == q->limit);
}

/* Is holder h (not a keeper) gone for certain: recorded on this host, in this boot and
 * pid namespace, and its pid names no process, or a zombie? A pid that another process
 * took since is not told: its start time, read against the wall clock, would misjudge a
 * live parent after a clock step, and the nested run would then wait for it. */
static int pid_gone(const struct holder *h)
{
	char host[256] = "";
	const char *self = holder_proc_self();
	struct proc_stat st;

	if (h->pid <= 1 || h->pid > INT_MAX || !h->proc[0] || !self[0] ||
	    strcmp(h->proc, self) != 0 || gethostname(host, sizeof host - 1) < 0 ||
	    strcmp(host, h->host) != 0)
		return 0;
	if (kill((pid_t)h->pid, 0) < 0 && errno == ESRCH)
		return 1;
	/* a zombie (whose other threads do not run) is gone; unreadable: not known gone */
	return proc_stat_read(h->pid, &st) == 0 && !proc_stat_live(&st);
}

/* reenter_holder_gone; and into *in (unless NULL) what the holder's record says: its
 * lease length and whether it is a keeper. A keeper is judged by the mark it left
 * (keeper_judge), any other holder by its pid on this host (pid_gone). */
static int holder_gone(struct store *s, const struct lock *l, const char *token,
                       int64_t io_timeout_ms, int64_t deadline_ms, long long *pid,
                       struct inherited *in)
{
	struct holders *hs = malloc(sizeof *hs); /* large */
	char err[300];
	int gone = 0;
	int64_t cap = clock_ms() + io_timeout_ms;

	cap = cap < deadline_ms ? cap : deadline_ms;
	if (hs && store_status(s, l, cap, hs, err, sizeof err) == LOCK_OK)
		for (int k = 0; k < hs->n; k++) {
			const struct holder *h = &hs->h[k];
			if (strcmp(h->token, token) != 0)
				continue;
			int is_keeper = strcmp(h->cmd, KEEPER_CMD) == 0;
			int keeper = is_keeper ? keeper_judge(l->key, h->token, h->pid) : -2;
			gone = keeper == 0 || (keeper == -2 && pid_gone(h));
			*pid = h->pid;
			if (in) {
				in->ttl_ms = h->ttl_ms > 0 ? h->ttl_ms : 0;
				in->keeper = is_keeper;
			}
			break;
		}
	free(hs);
	return gone;
}

/* reenter.h */
int reenter_holder_gone(struct store *s, const struct lock *l, const char *token,
                        int64_t io_timeout_ms, int64_t deadline_ms, long long *pid)
{
	return holder_gone(s, l, token, io_timeout_ms, deadline_ms, pid, NULL);
}

/* Does token hold l now (store_is_holder)? Waiting, a server that cannot say now (a
 * blip, a failover, a pause) is asked again until the wait's deadline, with one line
 * when that starts and one when it ends: a nested run that went on without the answer
 * would wait for its own ancestor (for ever, without -w). */
#define ASK_FIRST_MS 200
#define ASK_MAX_MS   2000
static int ask_holder(struct store *s, const struct lock *l, const char *name, const char *token,
                      const struct reenter_ask *o, struct holding *hd, char *err, size_t errlen)
{
	int64_t since = -1, step = ASK_FIRST_MS;

	for (;;) {
		int64_t cap = clock_ms() + o->io_timeout_ms;
		cap = cap < o->deadline_ms ? cap : o->deadline_ms;
		int rc = store_is_holder(s, l, token, cap, hd, err, errlen);
		if (rc >= 0 || !o->waits || !store_fault_passing() ||
		    clock_ms() >= o->deadline_ms || store_abort_pending()) {
			if (since >= 0 && rc >= 0)
				log_warn("lock '%s': %s answers again after %.1f s", name,
				         store_name(s), (double)(clock_ms() - since) / 1000);
			return rc;
		}
		if (since < 0) {
			since = clock_ms();
			log_warn(
			    "lock '%s': cannot tell whether the inherited token holds it (%s); "
			    "retrying%s",
			    name, err,
			    o->deadline_ms == INT64_MAX ? " (no --wait deadline)"
			                                : " until the --wait deadline");
		}
		int64_t until = clock_ms() + step;
		until = until < o->deadline_ms ? until : o->deadline_ms;
		step = step * 2 > ASK_MAX_MS ? ASK_MAX_MS : step * 2;
		struct pollfd p = {.fd = o->sigfd, .events = POLLIN};
		for (int64_t left; (left = until - clock_ms()) > 0;)
			if (poll(&p, 1, left > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS : (int)left) > 0)
				return rc; /* a terminating signal: the caller dies of it */
	}
}

int reenter_plan(struct reenter *r, struct store *s, struct reenter_ask *o)
{
	static struct lock probe; /* large; only its key names are used */
	int left = 0;

	inherited_read(&r->ih);
	for (int j = 0; j < r->ih.n; j++) /* no pair of rlock's: neither granted nor passed on */
		r->ih.in[j].stale = !inherited_ours(&r->ih.in[j]);
	r->nnames = o->nnames;
	for (int i = 0; i < o->nnames; i++) {
		r->names[i] = o->names[i];
		r->held[i] = -1;
	}
	for (int i = 0; i < r->nnames; i++) {
		const char *name = r->names[i];
		/* No randomness for its token: nothing is inherited (the acquire says why). */
		int known = r->ih.n > 0 && lock_init(&probe, o->prefix, name, o->ttl_ms) == 0;
		int permits = 0; /* of name, the tree's (--acquire) */
		for (int j = 0; known && j < r->ih.n && r->held[i] < 0; j++) {
			char err[300], have[64], want[64];
			struct holding hd;
			if (r->ih.in[j].stale || strcmp(probe.key, r->ih.in[j].key) != 0)
				continue;
			r->ih.in[j].asked = 1;
			int rc =
			    ask_holder(s, &probe, name, r->ih.in[j].token, o, &hd, err, sizeof err);
			char mode = hd.mode;
			int limit = hd.limit;
			if (rc < 0)
				log_debug("lock '%s': cannot tell whether it is inherited (%s)",
				          name, err);
			/* Held here no more by a token this server knew: stale variables (one
			 * it never knew may hold the key on another database or server). */
			int64_t cap = clock_ms() + o->io_timeout_ms;
			if (rc == 0)
				r->ih.in[j].stale =
				    store_knew_token(s, &probe, r->ih.in[j].token,
				                     cap < o->deadline_ms ? cap : o->deadline_ms);
			if (rc != 1)
				continue;
			r->ih.in[j].live = 1;
			/* A token whose holder died (an escaped process, a dead keeper's
			 * variables) still names a live lease until its TTL ends, but nobody
			 * renews it: a command run under it would go on unprotected. */
			long long pid = -1;
			if (holder_gone(s, &probe, r->ih.in[j].token, o->io_timeout_ms,
			                o->deadline_ms, &pid, &r->ih.in[j])) {
				log_warn("lock '%s': the inherited token's holder (pid %lld) is "
				         "gone and nobody renews its lease: not re-entrant, taking "
				         "the lock anew",
				         name, pid);
				r->ih.in[j].stale = 1;
				r->ih.in[j].live = 0;
				continue;
			}
			if (!grants(mode, limit, o)) {
				log_error(
				    "lock '%s' is held %s by this process tree: asking for it %s "
				    "would wait for itself",
				    name, describe(have, sizeof have, mode, limit),
				    describe(want, sizeof want,
				             o->mode == LOCK_SHARED  ? 's'
				             : o->mode == LOCK_LIMIT ? 'l'
				                                     : 'x',
				             o->limit));
				exit(RL_EX_USAGE);
			}
			/* --acquire leaves a keeper holding a lock of its own (its --release must
			 * not give back the ancestor's): next to a shared hold it takes one, next
			 * to permits one more while the tree holds fewer than N (every permit the
			 * tree's: it could only wait for itself); an exclusive hold it could only
			 * wait for. */
			if (o->keeper && mode == 's')
				break;
			if (o->keeper && mode == 'l' && ++permits < limit)
				continue;
			if (o->keeper && mode == 'l') {
				if (permits == 1)
					snprintf(have, sizeof have, "as a permit of --limit 1");
				else
					snprintf(have, sizeof have, "as %d permits of --limit %d",
					         permits, limit);
				log_error("lock '%s' is held %s by this process tree: --acquire "
				          "would wait for itself",
				          name, have);
				exit(RL_EX_USAGE);
			}
			if (o->keeper) {
				log_error(
				    "lock '%s' is held exclusive by this process tree: --acquire "
				    "would wait for itself",
				    name);
				exit(RL_EX_USAGE);
			}
			r->held[i] = j;
			/* The command's fence is the one the server holds for that token, not
			 * what the variable says (a garbled or stale RLOCK_FENCE). */
			if (hd.has_fence)
				snprintf(r->ih.in[j].fence, sizeof r->ih.in[j].fence, "%lld",
				         hd.fence);
		}
		if (r->held[i] < 0)
			o->names[left++] = name;
		else
			log_info("lock '%s' is already held by this process tree (re-entrant)",
			         name);
	}
	/* The inherited holds of names not asked for are listed on to the command too:
	 * not those this server says are stale (variables a CI runner or a finished step
	 * exported, whose --held inside the command would say 79). --acquire asks the
	 * same itself (keeper.c) for the holds it lists. */
	for (int j = 0; !o->keeper && j < r->ih.n; j++) {
		struct inherited *h = &r->ih.in[j];
		long long pid = -1;
		if (h->asked || h->stale)
			continue;
		if (inherited_gone(s, h, o->io_timeout_ms, o->deadline_ms))
			h->stale = 1;
		/* A keeper's hold (or a dead holder's) sends no --warn signal: the caller's
		 * RLOCK_WARN_SIGNAL is no live ancestor's because of it (main.c). */
		else if (h->live && o->warn_inherited && inherited_lock(h, &probe) == 0 &&
		         holder_gone(s, &probe, h->token, o->io_timeout_ms, o->deadline_ms, &pid,
		                     h))
			h->live = 0;
	}
	o->nnames = left;
	return left;
}

/* Append " word" (or "word" first; its n bytes) to the growing list at *buf; 0, or -1
 * out of memory. */
static int append_n(char **buf, size_t *len, const char *w, size_t n)
{
	char *b = realloc(*buf, *len + n + 2);

	if (!b)
		return -1;
	if (*len > 0)
		b[(*len)++] = ' ';
	memcpy(b + *len, w, n);
	*len += n;
	b[*len] = '\0';
	*buf = b;
	return 0;
}

static int append(char **buf, size_t *len, const char *w)
{
	return append_n(buf, len, w, strlen(w));
}

void reenter_environment(const struct reenter *r, const struct lock *taken_locks, int ntaken)
{
	char *keys = NULL, *tokens = NULL, *fences = NULL;
	size_t kl = 0, tl = 0, fl = 0;
	int n = 0, taken = 0, fail = 0;
	/* A pair is listed once: its key and its token (one key string can name locks of
	 * other databases, servers or Redlock sets, each its own token's). */
	size_t most = (size_t)r->nnames + (size_t)r->ih.n + 1;
	const char **listed = malloc(most * sizeof *listed),
	           **listed_tok = malloc(most * sizeof *listed_tok);

	fail = !listed || !listed_tok; /* then the lists are unset, RLOCK_KEY still set */
	for (int i = 0; i < r->nnames; i++) {
		const char *k, *t, *f;
		char fence[24];
		if (r->held[i] >= 0) {
			const struct inherited *h = &r->ih.in[r->held[i]];
			k = h->key;
			t = h->token;
			f = h->fence[0] ? h->fence : "0";
		} else {
			if (taken >= ntaken)
				continue; /* not reached: every name not inherited was taken */
			const struct lock *l = &taken_locks[taken++];
			snprintf(fence, sizeof fence, "%lld", l->fence);
			k = l->key;
			t = l->token;
			f = fence;
		}
		if (i == 0) {
			setenv("RLOCK_KEY", k, 1);
			setenv("RLOCK_TOKEN", t, 1);
			setenv("RLOCK_FENCE", f, 1);
		}
		if (fail)
			continue;
		listed_tok[n] = t;
		listed[n++] = k;
		fail |= append(&keys, &kl, k) | append(&tokens, &tl, t) | append(&fences, &fl, f);
	}
	/* Then what the tree holds besides, once per pair: not the one granted, nor one this
	 * server found stale. An inherited pair of a name taken anew whose token this server
	 * never knew stays: it may hold that key on another database or server (a deeper run
	 * there must find it, not wait for its own ancestor). */
	for (int j = 0; !fail && j < r->ih.n; j++) {
		int dup = r->ih.in[j].stale;
		for (int i = 0; i < n && !dup; i++)
			dup = !strcmp(listed[i], r->ih.in[j].key) &&
			      !strcmp(listed_tok[i], r->ih.in[j].token);
		if (dup)
			continue;
		listed_tok[n] = r->ih.in[j].token;
		listed[n++] = r->ih.in[j].key;
		fail |= append(&keys, &kl, r->ih.in[j].key) |
		        append(&tokens, &tl, r->ih.in[j].token) |
		        append(&fences, &fl, r->ih.in[j].fence[0] ? r->ih.in[j].fence : "0");
	}
	if (n > 1 && !fail) {
		setenv("RLOCK_KEYS", keys, 1);
		setenv("RLOCK_TOKENS", tokens, 1);
		setenv("RLOCK_FENCES", fences, 1);
	} else {
		unsetenv("RLOCK_KEYS");
		unsetenv("RLOCK_TOKENS");
		unsetenv("RLOCK_FENCES");
	}
	free(listed);
	free(listed_tok);
	free(keys);
	free(tokens);
	free(fences);
}
