/* SPDX-License-Identifier: MIT */
/* The inherited leases of a nested run, watched (rewatch.h). */
#include "rewatch.h"
#include "clock.h"
#include "exitcodes.h"
#include "log.h"
#include "thread.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define REWATCH_MAX_MS 1000
#define REWATCH_MIN_MS 100

/* 1: every token holds its name; 0: one does not (w->why says which); -1: not every
 * one could be asked. Updates w->lost_by from what the server says is left. */
static int rewatch_check(struct rewatch *w)
{
	int64_t by = INT64_MAX;
	int all = 1;
	char err[300];

	if (!w->s && store_open(&w->s, w->cfg, 0, clock_ms() + w->io_timeout_ms, err, sizeof err) !=
	                 STORE_OK)
		return -1;
	for (int i = 0; i < w->n; i++) {
		struct holding hd;
		int64_t asked = clock_ms();
		int rc = store_is_holder(w->s, &w->l[i], w->token[i], asked + w->io_timeout_ms, &hd,
		                         err, sizeof err);
		if (rc == 0) {
			snprintf(w->why, sizeof w->why,
			         "lock '%s' is no longer held by the inherited token (its holder "
			         "released or lost it while this run's command ran)",
			         w->name[i]);
			return 0;
		}
		if (rc < 0) {
			all = 0;
			continue;
		}
		if (hd.ttl_left_ms >= 0 && asked + hd.ttl_left_ms < by)
			by = asked + hd.ttl_left_ms;
		if (hd.ttl_left_ms >= 0 && hd.ttl_left_ms / 3 < w->every_ms)
			w->every_ms = hd.ttl_left_ms / 3 < REWATCH_MIN_MS ? REWATCH_MIN_MS
			                                                  : hd.ttl_left_ms / 3;
	}
	if (all)
		atomic_store(&w->lost_by, by);
	return all ? 1 : -1;
}

static void *rewatch_run(void *arg)
{
	struct rewatch *w = arg;
	struct pollfd p = {.fd = w->stop[0], .events = POLLIN};

	for (;;) {
		if (rewatch_check(w) == 0) {
			uint64_t one = 1;
			/* why is written: the reader that sees fired reads it */
			atomic_store_explicit(&w->fired, 1, memory_order_release);
			(void)!write(w->lost_fd, &one, sizeof one);
			return NULL;
		}
		if (poll(&p, 1, (int)w->every_ms) != 0)
			return NULL; /* told to stop */
	}
}

int rewatch_start(struct rewatch *w, const struct reenter *r, const char *prefix, int64_t ttl_ms,
                  int64_t io_timeout_ms, struct store *s, const struct store_config *cfg)
{
	w->s = s;
	w->cfg = cfg;
	w->io_timeout_ms = io_timeout_ms;
	w->every_ms = REWATCH_MAX_MS;
	w->epfd = -1;
	w->lost_fd = -1; /* nothing to watch: the supervisor polls no fd */
	w->n = 0;
	atomic_store(&w->fired, 0);
	atomic_store(&w->lost_by, INT64_MAX);
	for (int i = 0; i < r->nnames && w->n < HOLD_LOCKS_MAX; i++)
		if (r->held[i] >= 0 && lock_init(&w->l[w->n], prefix, r->names[i], ttl_ms) == 0) {
			w->name[w->n] = r->names[i];
			w->token[w->n++] = r->ih.in[r->held[i]].token;
		}
	if (w->n == 0)
		return 0;
	w->lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* The thread takes no signals (a Ctrl-Z too): the main thread's signalfds see them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = w->lost_fd < 0 || pipe2(w->stop, O_CLOEXEC) < 0
	             ? errno
	             : rl_thread_create(&w->t, 0, rewatch_run, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_error("cannot watch the inherited lease: %s", strerror(rc));
		exit(RL_EX_OSERR);
	}
	return w->n;
}

int rewatch_end(struct rewatch *w, int look)
{
	if (w->n == 0)
		return 0;
	(void)!write(w->stop[1], "", 1);
	pthread_join(w->t, NULL);
	if (!look || rewatch_check(w) != 0)
		return 0;
	log_error("%s: mutual exclusion may not have held", w->why);
	return -1;
}

static int rewatch_fired(const struct rewatch *w)
{
	return w->n > 0 && atomic_load_explicit(&w->fired, memory_order_acquire);
}

static int64_t rewatch_lost_at(const void *ctx)
{
	return atomic_load(&((const struct rewatch *)ctx)->lost_by);
}

static const struct lock *rewatch_reason(const void *ctx, int timed_out, char *buf, size_t n)
{
	const struct rewatch *w = ctx;

	if (timed_out || !rewatch_fired(w))
		snprintf(buf, n,
		         "the inherited lease could not be seen renewed before it would end "
		         "(the server did not answer)");
	else
		log_reason(buf, n, "%s", w->why);
	return NULL; /* not one of the run's own: the events line names its first */
}

/* A run that took some names and was granted the others: its own lease and the
 * inherited ones, whichever is lost first. ctx: the rewatch, its h the hold. */
static int64_t both_lost_at(const void *ctx)
{
	const struct rewatch *w = ctx;
	int64_t own = hold_lost_at(w->h), inherited = rewatch_lost_at(w);

	return own < inherited ? own : inherited;
}

static int64_t both_kill_at(const void *ctx)
{
	return hold_kill_at(((const struct rewatch *)ctx)->h);
}

static int64_t both_warn_at(const void *ctx)
{
	return hold_warn_at(((const struct rewatch *)ctx)->h);
}

static const char *both_late(const void *ctx)
{
	return hold_late_key(((const struct rewatch *)ctx)->h);
}

static int64_t both_renew_due(const void *ctx)
{
	return hold_renew_due(((const struct rewatch *)ctx)->h);
}

static const struct lock *both_lost(const void *ctx, int timed_out, char *buf, size_t n)
{
	const struct rewatch *w = ctx;

	if (timed_out ? clock_ms() >= rewatch_lost_at(w) : rewatch_fired(w))
		return rewatch_reason(w, timed_out, buf, n);
	return hold_lost_reason(w->h, timed_out, buf, n);
}

void rewatch_supervise(struct rewatch *w, struct supervise_args *sa)
{
	sa->lost_fd = w->lost_fd;
	sa->lost_at = rewatch_lost_at;
	sa->lost_reason = rewatch_reason;
	sa->ctx = w;
}

void rewatch_supervise_beside(struct rewatch *w, const struct hold *h, struct supervise_args *sa)
{
	struct epoll_event ev = {.events = EPOLLIN};

	w->h = h;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, hold_lost_fd(h), &ev) < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lost_fd, &ev) < 0) {
		log_error("cannot watch the inherited lease: %s", strerror(errno));
		w->epfd = w->lost_fd; /* the inherited lease alone: the own one by time */
	}
	sa->lost_fd = w->epfd;
	sa->lost_at = both_lost_at;
	sa->kill_at = both_kill_at;
	sa->lost_reason = both_lost;
	sa->warn_at = both_warn_at;
	sa->late = both_late;
	sa->renew_due = both_renew_due; /* renew_launch has renew_ctx: h */
	sa->ctx = w;
}
