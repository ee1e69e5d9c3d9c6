/* SPDX-License-Identifier: MIT */
#include "renew.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "events.h"
#include "holder.h"
#include "lease.h"
#include "log.h"
#include "thread.h"

#define RETRY_MS 100 /* between failed renewal attempts, bounded by lost_at */

struct renew {
	pthread_t thread;
	int launched;      /* the thread runs (main thread's own state) */
	int launch_failed; /* it could not start (said once): tried again at launch_retry */
	int64_t launch_retry;
	const struct store_config *cfg;
	const struct lock *lock;
	const char *warn_key;           /* warn_buf, or NULL */
	char warn_buf[320];             /* the caller's key, copied: it may not outlive us */
	int check_now;                  /* connect and check the eviction policy at start */
	_Atomic int64_t confirmed_sent; /* send time of the last confirmed acquire/renewal */
	int lost_fd;                    /* eventfd: written once when the token is not ours */
	int stop_fd;                    /* eventfd: written by renew_stop */
	int done_fd;                    /* eventfd: written by the thread as it ends */
	struct store *store;            /* handed to renew_stop */
	pthread_mutex_t mu;             /* guards reason, last_err, began and quiet */
	int began;                      /* the thread has begun to use the network */
	int quiet;                      /* renew_quiet(): it never will */
	char reason[300];
	char last_err[300];
	_Atomic int preempted; /* a --preempt request asked: reason says who */
};

static void set_text(struct renew *r, char *dst, const char *s)
{
	pthread_mutex_lock(&r->mu);
	snprintf(dst, 300, "%s", s);
	pthread_mutex_unlock(&r->mu);
}

/* Sleep until `until` (monotonic ms) unless asked to stop: returns 1 on stop. */
static int nap(struct renew *r, int64_t until)
{
	for (;;) {
		int64_t left = until - clock_ms();
		/* The stop is looked at even when the time is up: renewals slower than ttl/3
		 * (a slow server) follow each other with no nap between them, and a stop seen
		 * only in a nap waited renew_stop's whole bound (4 s) while the thread renewed
		 * on after the command had ended. */
		struct pollfd p = {.fd = r->stop_fd, .events = POLLIN};
		int rc = poll(&p, 1,
		              left <= 0                 ? 0
		              : left > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS
		                                        : (int)left);
		if (rc > 0)
			return 1;
		if (left <= 0 || (rc < 0 && errno != EINTR))
			return 0;
	}
}

/* Before the thread's first use of the network: 1 to go on, 0 when renew_quiet() came
 * first (then it never will). */
static int begin(struct renew *r)
{
	pthread_mutex_lock(&r->mu);
	int go = !r->quiet;
	r->began = go;
	pthread_mutex_unlock(&r->mu);
	return go;
}

/* Open the thread's own handle; with check, connect now and look at the eviction
 * policy once, never past the first renewal (a slow INFO would hold it up: lost where a
 * run without -v keeps the lock). 0, or -1 (out of memory: the main thread sees the
 * lease run out). */
static int open_store(struct renew *r, struct store **s, int check, int64_t cap)
{
	char err[300];

	if (check && store_open(s, r->cfg, 1, cap, err, sizeof err) == STORE_OK) {
		int64_t due = r->confirmed_sent + r->lock->ask.ttl_ms / 3;
		store_check_eviction(*s, r->warn_key, r->lock->key, due < cap ? due : cap);
		return 0;
	}
	if (check) {
		log_debug("renewal: %s", err);
		set_text(r, r->last_err, err);
	}
	/* Not connected yet: the first renewal connects, within its own deadline. */
	if (store_open(s, r->cfg, 0, cap, err, sizeof err) != STORE_OK) {
		set_text(r, r->last_err, err);
		return -1;
	}
	return 0;
}

/* A --preempt request asked this --preemptible holder (the renewal that said so was
 * confirmed): the hold stops its command as on a loss, then releases (hold.h). */
static void preempted(struct renew *r, int64_t sent, const char *who)
{
	char why[300];

	r->confirmed_sent = sent;
	log_reason(why, sizeof why, "preempted by %s", who);
	set_text(r, r->reason, why);
	r->preempted = 1;
	uint64_t one = 1;
	(void)!write(r->lost_fd, &one, sizeof one);
}

/* The token no longer holds the lock (found by the renewal sent at sent): say why in
 * r->reason (renew_broken_why). A renewal is sent before the lease can end by rlock's
 * clock, and the server's expiry is no sooner: gone then, the lock was taken away, not
 * expired; the history's end record says lost (hold.c's taken_seen). */
static void lost_reason(struct renew *r, struct store *s, int64_t sent, int64_t cap)
{
	char why[340], by[300];
	int64_t left = r->confirmed_sent + r->lock->ask.ttl_ms - sent;

	if (renew_broken_why(s, NULL, r->lock, cap, by, sizeof by))
		log_reason(why, sizeof why, "the lock is no longer ours: %s", by);
	else
		snprintf(why, sizeof why,
		         "the lock is no longer ours: taken away %.1f s before its lease could end "
		         "(deleted, evicted or flushed on the server, or its clock jumped)",
		         (double)(left > 0 ? left : 0) / 1000);
	set_text(r, r->reason, why);
}

#define BROKEN_READ_MS 500
int renew_broken_why(struct store *s, const struct store_config *cfg, const struct lock *l,
                     int64_t cap, char *why, size_t n)
{
	char err[300];
	struct holders *hs = malloc(sizeof *hs);
	struct store *fresh = NULL;
	int64_t until = clock_ms() + BROKEN_READ_MS;

	if (until > cap)
		until = cap;
	if (!s && cfg && store_open(&fresh, cfg, 0, until, err, sizeof err) == STORE_OK)
		s = fresh;
	int known = s && hs && store_status(s, l, until, hs, err, sizeof err) == LOCK_OK &&
	            holder_broken(&hs->broken, l->token, why, n);
	store_close(fresh);
	free(hs);
	return known;
}

/* Every call of this thread is bounded by the time the lease can no longer be trusted;
 * the main thread does not rely on that, but a renewal that late would be useless.
 * Nothing touches the network before the first renewal (ttl/3) unless r->check_now: a
 * command shorter than that runs on the main connection alone, and the eviction
 * policy is looked at right after the first renewal. */
static void *renew_main(void *arg)
{
	struct renew *r = arg;
	struct store *s = NULL;
	const int64_t ttl = r->lock->ask.ttl_ms;
	char err[300] = "";
	int checked = !r->warn_key;
	int learnt = 0;

	int64_t lost_at = r->confirmed_sent + lease_loss_after(ttl);
	if (r->check_now) {
		checked = 1;
		if (!begin(r) || open_store(r, &s, 1, lost_at) < 0)
			goto stuck;
	}
	for (;;) {
		if (nap(r, r->confirmed_sent + ttl / 3))
			goto out;
		lost_at = r->confirmed_sent + lease_loss_after(ttl);
		if (!s && (!begin(r) || open_store(r, &s, 0, lost_at) < 0))
			goto stuck;
		/* Try until confirmed or the lease can no longer be trusted. The connect of
		 * the first renewal counts against lost_at like any other wait. */
		int failed = 0; /* attempts of this renewal: the first one is an event */
		for (;;) {
			int64_t now = clock_ms();
			if (now >= lost_at) {
				/* The main thread decides the loss; nothing more to do here. */
				store_close(s);
				s = NULL;
				goto stuck;
			}
			int64_t sent = now;
			int rc = store_renew(s, r->lock, lost_at, &sent, err, sizeof err);
			if (rc == LOCK_OK) {
				r->confirmed_sent = sent;
				set_text(r, r->last_err, "");
				events_emit(EV_RENEWED, &(struct ev_facts){.lock = r->lock});
				log_debug("renewed %s", r->lock->key);
				break;
			}
			if (rc == LOCK_PREEMPTED) {
				preempted(r, sent, err);
				goto stuck;
			}
			if (rc == LOCK_NOTOURS) {
				lost_reason(r, s, sent, lost_at);
				uint64_t one = 1;
				(void)!write(r->lost_fd, &one, sizeof one);
				goto stuck;
			}
			log_debug("renewal failed: %s", err);
			/* An attempt that the lease's end cut short (a handshake begun with 1 ms
			 * left: "timed out after 1 ms") tells only that time ran out: the reason
			 * an earlier attempt gave (a certificate expired meanwhile, a refusal)
			 * stays the loss's. */
			int cut_short = failed > 0 && clock_ms() >= lost_at;
			/* its line first: a loss whose reason names this error follows it */
			events_emit(EV_RENEW_FAILED, &(struct ev_facts){.lock = r->lock,
			                                                .reason = err,
			                                                .repeat = failed++ > 0});
			if (!cut_short)
				set_text(r, r->last_err, err);
			int64_t retry = clock_ms() + RETRY_MS;
			if (nap(r, retry < lost_at ? retry : lost_at))
				goto out;
		}
		if (!checked) {
			/* Best effort, and never past the next renewal. */
			checked = 1;
			store_check_eviction(s, r->warn_key, r->lock->key,
			                     r->confirmed_sent + ttl / 3);
		}
		if (!learnt) {
			/* The same: a Cluster's slot map, should the URL's node fail (store.h) */
			learnt = 1;
			store_learn(s, r->confirmed_sent + ttl / 3);
		}
	}
stuck:
	nap(r, INT64_MAX);
out:
	r->store = s;
	uint64_t one = 1;
	(void)!write(r->done_fd, &one, sizeof one);
	return NULL;
}

int renew_start(struct renew **out, const struct store_config *cfg, const struct lock *l,
                int64_t confirmed_sent_ms, const char *warn_key, int check_now, char *err,
                size_t errlen)
{
	struct renew *r = calloc(1, sizeof *r);

	*out = NULL;
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->cfg = cfg;
	r->lock = l;
	if (warn_key) {
		snprintf(r->warn_buf, sizeof r->warn_buf, "%s", warn_key);
		r->warn_key = r->warn_buf;
	}
	r->check_now = check_now && warn_key;
	/* Begun already: a command that ends before the thread first runs must not make
	 * renew_quiet() skip the check asked for. */
	r->began = r->check_now;
	r->confirmed_sent = confirmed_sent_ms;
	pthread_mutex_init(&r->mu, NULL);
	r->lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->lost_fd < 0 || r->stop_fd < 0 || r->done_fd < 0) {
		snprintf(err, errlen, "cannot start the renewal thread: eventfd: %s",
		         strerror(errno));
		goto fail;
	}
	/* The check connects at once: its thread cannot wait for the first renewal. */
	if (r->check_now && renew_launch(r, err, errlen) < 0)
		goto fail;
	*out = r;
	return 0;
fail:
	if (r->lost_fd >= 0)
		close(r->lost_fd);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	if (r->done_fd >= 0)
		close(r->done_fd);
	pthread_mutex_destroy(&r->mu);
	free(r);
	return -1;
}

int64_t renew_due(const struct renew *r)
{
	if (r->launched || r->quiet)
		return INT64_MAX;
	if (r->launch_failed)
		return r->launch_retry;
	return r->confirmed_sent + r->lock->ask.ttl_ms / 3;
}

int renew_launch(struct renew *r, char *err, size_t errlen)
{
	sigset_t all, old;

	if (r->launched || r->quiet || (r->launch_failed && clock_ms() < r->launch_retry))
		return 0;
	/* The thread takes no signals: the main thread's signalfd sees them all. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = rl_thread_create(&r->thread, 0, renew_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		/* A host short of memory or of processes for a moment (EAGAIN): tried again
		 * while the lease lasts; its loss is decided as ever (the lease rule). */
		r->launch_retry = clock_ms() + RETRY_MS;
		if (r->launch_failed)
			return 0; /* said once */
		r->launch_failed = 1;
		snprintf(err, errlen, "cannot start the renewal thread: %s", strerror(rc));
		return -1;
	}
	if (r->launch_failed)
		log_info("%s: the renewal thread started after all", r->lock->key);
	r->launched = 1;
	return 0;
}

int renew_fd(const struct renew *r)
{
	return r->lost_fd;
}

int64_t renew_confirmed_sent(const struct renew *r)
{
	return r->confirmed_sent;
}

void renew_reason(const struct renew *r, int timed_out, char *buf, size_t n)
{
	struct renew *w = (struct renew *)r; /* the mutex is not part of the value */

	pthread_mutex_lock(&w->mu);
	if (timed_out)
		/* Name a failure only if one happened since the last confirmation (after a
		 * stop, e.g. Ctrl-Z, none did). */
		snprintf(buf, n, "no renewal confirmed in time%s%s", r->last_err[0] ? ": " : "",
		         r->last_err);
	else
		log_reason(buf, n, "%s", r->reason);
	pthread_mutex_unlock(&w->mu);
}

int renew_preempted(const struct renew *r)
{
	return r->preempted;
}

int renew_quiet(struct renew *r)
{
	pthread_mutex_lock(&r->mu);
	r->quiet = !r->began;
	int quiet = r->quiet;
	pthread_mutex_unlock(&r->mu);
	return quiet;
}

static void free_state(struct renew *r)
{
	close(r->lost_fd);
	close(r->stop_fd);
	close(r->done_fd);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void renew_drop(struct renew *r)
{
	if (r && !r->launched)
		free_state(r);
}

struct store *renew_stop(struct renew *r, int64_t *confirmed_sent)
{
	uint64_t one = 1;
	struct pollfd p;

	if (!r)
		return NULL;
	if (!r->launched) {
		*confirmed_sent = r->confirmed_sent;
		free_state(r);
		return NULL;
	}
	/* Long enough for any bounded call of the thread (a connect, then a command). */
	int64_t wait_ms = store_connect_timeout(r->cfg) + store_io_timeout(r->cfg);
	int64_t until = clock_ms() + wait_ms;
	(void)!write(r->stop_fd, &one, sizeof one);
	*confirmed_sent = r->confirmed_sent; /* a renewal in flight may only push it later */
	p.fd = r->done_fd;
	p.events = POLLIN;
	for (;;) {
		int64_t left = until - clock_ms();
		int rc = poll(&p, 1, left < 0 ? 0 : (int)left);
		if (rc > 0)
			break;
		if (left <= 0 || (rc < 0 && errno != EINTR)) {
			/* Stuck in something unbounded: leave it (and r) to the process exit;
			 * the release goes on a fresh connection. */
			log_debug("the renewal thread did not stop within %lld ms; not waiting",
			          (long long)wait_ms);
			pthread_detach(r->thread);
			return NULL;
		}
	}
	pthread_join(r->thread, NULL);
	*confirmed_sent = r->confirmed_sent;
	struct store *s = r->store;
	free_state(r);
	return s;
}
