/* SPDX-License-Identifier: MIT */
#include "wait.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "renew.h"

#define BACKOFF_FIRST_MS 200
#define BACKOFF_MAX_MS   5000

static uint32_t jitter_seed(void)
{
	uint32_t s = 0;

	if (getrandom(&s, sizeof s, GRND_NONBLOCK) != sizeof s)
		s = (uint32_t)getpid() ^ (uint32_t)clock_ms();
	return s ? s : 1;
}

/* Uniform in [ms/2, ms]: waiters woken together spread out. */
static int64_t jittered(int64_t ms, uint32_t *seed)
{
	*seed ^= *seed << 13;
	*seed ^= *seed >> 17;
	*seed ^= *seed << 5;
	return ms / 2 + (int64_t)(*seed % (uint32_t)(ms / 2 + 1));
}

/* The live line is drawn only where it cannot get in the way: on a terminal that can
 * move the cursor (not TERM=dumb) while rlock is in its foreground job (a background
 * waiter would draw over the user's prompt). */
static int status_visible(void)
{
	const char *term = getenv("TERM");
	pid_t fg = tcgetpgrp(STDERR_FILENO);

	return !(term && strcmp(term, "dumb") == 0) && fg >= 0 && fg == getpgrp();
}

/* Columns of the terminal now (asked at every redraw, so a resize is followed), or 0
 * when it does not say (a pty nobody sized). */
static size_t status_width(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0)
		return ws.ws_col;
	return 0;
}

/* Milliseconds since start_ms (unix ms, -1 unknown), or -1 when unknown. */
static long long held_ms(long long start)
{
	struct timespec now;

	if (start <= 0 || clock_gettime(CLOCK_REALTIME, &now) != 0)
		return -1;
	long long now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	return start <= now_ms ? now_ms - start : -1;
}

static void status_draw(const struct wait_args *a, const struct holder *h, int64_t waited_ms,
                        const char *note)
{
	char line[1000], host[128], cmd[160], pid[32] = "?", label[200] = "";
	const char *clear = "\r\033[K";
	size_t pre = strlen(clear);
	int n;

	if (!status_visible())
		return;
	/* Everything the holder wrote is escaped: it could hold terminal escapes. */
	log_escape(host, sizeof host, h->host, strlen(h->host));
	log_escape(cmd, sizeof cmd, h->cmd, strlen(h->cmd));
	if (h->label[0]) {
		char e[160];
		log_escape(e, sizeof e, h->label, strlen(h->label));
		snprintf(label, sizeof label, " [%s]", e);
	}
	long long held = held_ms(h->start_ms);
	if (h->pid >= 0)
		snprintf(pid, sizeof pid, "%lld", h->pid);
	if (note)
		n = snprintf(line, sizeof line, "%srlock: waiting %llds for '%s': %s", clear,
		             (long long)(waited_ms / 1000), a->name, note);
	else if (h->host[0])
		n = snprintf(line, sizeof line,
		             "%srlock: waiting %llds for '%s': held by %s pid %s (%s)%s for %llds",
		             clear, (long long)(waited_ms / 1000), a->name, host, pid, cmd, label,
		             held < 0 ? 0 : held / 1000);
	else
		n = snprintf(line, sizeof line, "%srlock: waiting %llds for '%s'", clear,
		             (long long)(waited_ms / 1000), a->name);
	if (n <= 0)
		return;
	size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
	/* One row: text reaching the last column would wrap (or leave the cursor there) and
	 * the next \r would redraw below it. The text is ASCII after escaping. */
	size_t width = status_width();
	if (width > 0 && len - pre > width - 1)
		len = pre + width - 1;
	(void)!write(STDERR_FILENO, line, len);
}

static void status_clear(void)
{
	if (status_visible())
		(void)!write(STDERR_FILENO, "\r\033[K", 4);
}

/* A terminating signal waiting in the signalfd: read it into *signo, return 1. */
static int take_signal(int sigfd, int *signo)
{
	struct signalfd_siginfo si;

	if (sigfd >= 0 && read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
		*signo = (int)si.ssi_signo;
		return 1;
	}
	return 0;
}

/* Sleep until `until` or a wake-up: 1 woken by a release, 0 timeout, -1 the
 * subscription broke, -4 a signal (*signo). */
static int sleep_until(struct store *s, int sigfd, int64_t until, int *signo)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = sigfd, .events = POLLIN}, {.fd = -1}};
		int n = 1;
		if (store_notify_fd(s) >= 0) {
			if (store_notify_buffered(s))
				goto read_sub;
			p[1].fd = store_notify_fd(s);
			p[1].events = POLLIN;
			n = 2;
		}
		/* Past `until`: one look all the same, so that a release that came while
		 * this process was not running wakes it as the release, not as the timer. */
		int64_t left = until - clock_ms();
		int rc = poll(p, (nfds_t)n, left <= 0 ? 0 : left > 60000 ? 60000 : (int)left);
		if (rc < 0 && errno != EINTR)
			return -1;
		if (rc <= 0 && left <= 0)
			return 0;
		if (rc <= 0)
			continue;
		if ((p[0].revents & POLLIN) && take_signal(sigfd, signo))
			return -4;
		if (n < 2 || !p[1].revents)
			continue;
	read_sub:;
		char err[256];
		int got = store_notify_read(s, clock_ms() + 1000, err, sizeof err);
		if (got < 0) {
			log_debug("release notifications interrupted: %s", err);
			return -1;
		}
		if (got == 1) {
			log_debug("woken by the release notification");
			return 1;
		}
	}
}

/* How long after the request was sent a granted lease is still worth using: the point
 * at which the renewal thread would give it up (renew.h). */
static int64_t lease_floor(const struct lock *l)
{
	return l->ttl_ms * RENEW_LOSS_NUM / RENEW_LOSS_DEN;
}

/* After a terminating signal (rlock is asked to stop now) or an attempt that failed
 * (69 is due), the give-back waits this long at most. The release still runs after an
 * acquire left unanswered on the same connection (the server keeps a connection's
 * order), reply or not. */
#define GIVE_BACK_MS 500

/* The deadline of a clean-up request: budget_ms from now, one io-timeout at most. */
static int64_t cleanup_deadline(const struct wait_args *a, int64_t budget_ms)
{
	return clock_ms() + (budget_ms < a->io_timeout_ms ? budget_ms : a->io_timeout_ms);
}

/* Give back a lock that may be ours (taken, or an acquire whose reply never came),
 * within budget_ms (and one io-timeout). The store runs the release after anything
 * still unanswered on its connection (store.h). At worst the lease expires by its
 * TTL. */
static void give_back(struct store *s, const struct wait_args *a, int64_t budget_ms)
{
	char err[300] = "";

	if (store_release(s, a->lock, 0, cleanup_deadline(a, budget_ms), err, sizeof err) ==
	    LOCK_ERR)
		log_debug("cannot give the lock back (%s); it expires within %lld ms", err,
		          (long long)a->lock->ttl_ms);
}

/* A waiter that gives up leaves the fair queue and drops its writer mark at once (not
 * by the end of its lease), within budget_ms (and one io-timeout); at worst they expire
 * by the ttl. */
static void leave(struct store *s, const struct wait_args *a, int64_t budget_ms)
{
	char err[300];

	if (store_leave(s, a->lock, cleanup_deadline(a, budget_ms), err, sizeof err) != LOCK_OK)
		log_debug("cannot leave the queue (%s); the place expires within %lld ms", err,
		          (long long)a->lock->ttl_ms);
}

/* Sleep until `until`, redrawing the live line every second: what sleep_until says. */
static int nap_until(const struct wait_args *a, struct store *sub, const struct holder *h,
                     int64_t start, int64_t until, const char *note, int *drawn, int *signo)
{
	int s;

	do {
		int64_t tick = until;
		if (a->status_line) {
			status_draw(a, h, clock_ms() - start, note);
			*drawn = 1;
			if (clock_ms() + 1000 < tick)
				tick = clock_ms() + 1000;
		}
		s = sleep_until(sub, a->sigfd, tick, signo);
	} while (s == 0 && clock_ms() < until);
	return s;
}

/* One attempt (connecting never past the wait's deadline). A grant whose reply came
 * too late to use is given back and counts as busy. */
static int attempt(struct store *s, const struct wait_args *a, int first, int64_t deadline,
                   int64_t *sent_ms, struct holder *h, char *err, size_t errlen)
{
	/* The first try is not waiting: it may connect (a cluster's redirect to the slot's
	 * node) even with -n; its hops are bounded by their own timeouts. */
	int64_t cap = first ? STORE_NO_CAP : deadline;
	int rc = store_acquire(s, a->lock, a->meta, cap, sent_ms, h, err, errlen);
	if (rc == LOCK_OK && clock_ms() - *sent_ms >= lease_floor(a->lock)) {
		/* Granted, but the reply came so late that the lease, which runs from when
		 * the request was sent, is (nearly) over: someone else may hold it by now.
		 * Give it back and treat the attempt as failed. */
		int64_t late = clock_ms() - *sent_ms;
		give_back(s, a, a->io_timeout_ms);
		snprintf(err, errlen,
		         "%s answered after %lld ms, too late for a %lld ms lease: increase --ttl",
		         store_name(s), (long long)late, (long long)a->lock->ttl_ms);
		log_debug("%s", err);
		if (clock_ms() >= deadline)
			return LOCK_ERR;
		h->pttl_ms = -1;
		return LOCK_BUSY;
	}
	return rc;
}

int wait_acquire(struct store *s, const struct wait_args *a, int64_t *sent_ms, struct holder *h,
                 int *signo, char *err, size_t errlen)
{
	int sub = 0;
	uint32_t seed = jitter_seed();
	int64_t start = clock_ms();
	int64_t deadline = a->wait_ms < 0 ? INT64_MAX : start + a->wait_ms;
	int64_t backoff = BACKOFF_FIRST_MS;
	int drawn = 0, announced = 0, waiting = 0, outage = 0, pttl_woke = 0, again = 0, rc;
	int heard = 0; /* the listener last announced at -vv: 1 the channel, 2 a place */

	memset(h, 0, sizeof *h);
	for (;;) {
		/* A retry at once (below) counts as fresh: one per failure. */
		int fresh = again || !store_connected(s);
		again = 0;
		rc = attempt(s, a, !waiting, deadline, sent_ms, h, err, errlen);
		if (rc != LOCK_OK && rc != LOCK_BUSY && take_signal(a->sigfd, signo)) {
			/* Interrupted (the conn layer's waits watch the signalfd): the
			 * request may have been taken all the same: the lock, or (a waiting
			 * request) a place among the waiters or in the queue, left below. */
			give_back(s, a, GIVE_BACK_MS);
			rc = WAIT_SIGNAL;
			if (!a->lock->nowait)
				waiting = 1;
			break;
		}
		if (rc == LOCK_ERR && waiting && !fresh) {
			/* The connection that sat idle may simply have been closed (the
			 * server's `timeout`, a restart): retry at once on a fresh one
			 * (the store never reuses a connection that failed). */
			again = 1;
			continue;
		}
		if (rc == LOCK_ERR && waiting) {
			/* The server is gone while we wait: keep trying with backoff until
			 * the wait's deadline. Only a failure before the first successful
			 * connect is 69 at once. */
			store_unsubscribe(s);
			sub = 0;
			heard = 0;
			if (!outage)
				log_info("lock '%s': %s; reconnecting", a->name, err);
			outage = 1;
			if (clock_ms() >= deadline) {
				char why[300];
				snprintf(why, sizeof why, "%s", err);
				snprintf(err, errlen,
				         "lock '%s': Redis unavailable while waiting (gave up at "
				         "the --wait deadline): %s",
				         a->name, why);
				break;
			}
			int64_t until = clock_ms() + jittered(backoff, &seed);
			int slept = nap_until(a, s, h, start, until < deadline ? until : deadline,
			                      "reconnecting", &drawn, signo);
			if (slept == -4) {
				rc = WAIT_SIGNAL;
				break;
			}
			if (backoff < BACKOFF_MAX_MS)
				backoff =
				    backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (outage && (rc == LOCK_OK || rc == LOCK_BUSY)) {
			log_info("lock '%s': reconnected to %s", a->name, store_name(s));
			outage = 0;
		}
		if (rc != LOCK_BUSY)
			break;
		waiting = 1;
		int64_t now = clock_ms();
		if (now >= deadline) {
			rc = WAIT_BUSY; /* == LOCK_BUSY */
			break;
		}
		if (!announced) {
			/* log_msg escapes holder text itself */
			char pid[32] = "?";
			if (h->pid >= 0)
				snprintf(pid, sizeof pid, "%lld", h->pid);
			log_info("lock '%s' is busy (held by %s pid %s); waiting", a->name,
			         h->host[0] ? h->host : "?", pid);
			announced = 1;
		}
		/* Listen for the release (again, after a wake-up was used). A new
		 * subscription: try again at once, a release before it was not heard. A
		 * place among the waiters keeps a wake-up made before it listened. */
		char err2[256];
		int listen = store_subscribe(s, a->lock, err2, sizeof err2);
		if (listen == STORE_NEW) {
			sub = 1;
			continue;
		}
		sub = listen != STORE_ERR;
		if (!sub) {
			heard = 0;
			if (take_signal(a->sigfd, signo)) {
				rc = WAIT_SIGNAL;
				break;
			}
			log_debug("cannot subscribe to release notifications: %s", err2);
		} else if (heard != 1 + a->lock->placed) {
			/* Said once the listener is in place and the last attempt after it
			 * was busy: a release from now on wakes this waiter. */
			heard = 1 + a->lock->placed;
			log_debug("listening for the release (%s)",
			          a->lock->placed ? "a place among the waiters"
			                          : "the release channel");
		}
		int64_t nap = jittered(backoff, &seed);
		const char *ch[2];
		/* Where a release wakes this waiter on its own (a queue's head, a place
		 * among the waiters), the timer is only the safety net (a woken waiter that
		 * died before it could try): no short backoff. */
		if (sub && (a->lock->placed || lock_channels(a->lock, ch) == 2))
			nap = jittered(BACKOFF_MAX_MS, &seed);
		/* The place in the queue and the writer mark are leases of the ttl. */
		if (nap > a->lock->ttl_ms / 3)
			nap = a->lock->ttl_ms / 3;
		/* Wake when the holder's lease can have run out, but not twice in a row:
		 * a PTTL that keeps saying "now" (or a hostile one) cannot defeat the
		 * backoff. Compared, not added to: a PTTL near INT64_MAX must not wrap. */
		pttl_woke = !pttl_woke && h->pttl_ms >= 0 && h->pttl_ms < nap;
		if (pttl_woke)
			nap = h->pttl_ms + 1;
		int64_t until = now + nap < deadline ? now + nap : deadline;
		int slept = nap_until(a, s, h, start, until, NULL, &drawn, signo);
		if (slept == -4) {
			rc = WAIT_SIGNAL;
			break;
		}
		if (slept == -1) {
			store_unsubscribe(s);
			sub = 0;
			heard = 0;
			/* BLPOP refused: the place would take a release's wake-up from a waiter
			 * that can block (the next attempts take none). */
			if (a->lock->placed && store_wake_refused(s)) {
				leave(s, a, a->io_timeout_ms);
				a->lock->placed = 0;
			}
			/* A listener that breaks as soon as it listens (a slot that moved, an
			 * error reply): no attempt at once, or the loop would spin on it. */
			if (clock_ms() - now < BACKOFF_FIRST_MS) {
				int64_t pause = clock_ms() + jittered(backoff, &seed);
				if (nap_until(a, s, h, start, pause < deadline ? pause : deadline,
				              NULL, &drawn, signo) == -4) {
					rc = WAIT_SIGNAL;
					break;
				}
			}
		}
		if (slept == 0 && backoff < BACKOFF_MAX_MS)
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	if (drawn)
		status_clear();
	store_unsubscribe(s);
	if (waiting && (rc == WAIT_BUSY || rc == WAIT_SIGNAL))
		leave(s, a, rc == WAIT_SIGNAL ? GIVE_BACK_MS : a->io_timeout_ms);
	/* An attempt whose reply never came may have taken the lock: give it back behind
	 * that request, or it is held by nobody until its ttl ends. */
	if (rc == LOCK_ERR && store_unanswered(s))
		give_back(s, a, GIVE_BACK_MS);
	if (rc == LOCK_OK)
		return WAIT_ACQUIRED;
	if (rc == LOCK_MISMATCH)
		return WAIT_MISMATCH;
	if (rc == LOCK_DENIED)
		return WAIT_DENIED;
	if (rc == WAIT_SIGNAL || rc == WAIT_BUSY)
		return rc;
	return WAIT_ERR;
}

/* --wait-replicas: WAIT narrows the window in which a failover to a replica that never
 * saw the lock hands it to someone else. */
int wait_ready(struct store *s, const struct wait_args *a, int64_t sent_ms, int replicas,
               int *signo, char *err, size_t errlen)
{
	if (replicas > 0 && store_wait_replicas(s, replicas, err, errlen) < 0) {
		/* The server may hold that connection in WAIT: the store closed it, and the
		 * release goes on a fresh one. */
		if (take_signal(a->sigfd, signo)) {
			give_back(s, a, GIVE_BACK_MS);
			return WAIT_SIGNAL;
		}
		give_back(s, a, a->io_timeout_ms);
		return WAIT_ERR;
	}
	/* The same rule as for a late acquire reply: the lease runs from the send time,
	 * and the renewal thread would give it up at this point anyway. */
	int64_t used = clock_ms() - sent_ms;
	if (used >= lease_floor(a->lock)) {
		give_back(s, a, a->io_timeout_ms);
		snprintf(err, errlen,
		         "%lld ms of the %lld ms lease were gone before the command could start: "
		         "not running it (increase --ttl)",
		         (long long)used, (long long)a->lock->ttl_ms);
		return WAIT_ERR;
	}
	if (take_signal(a->sigfd, signo)) {
		give_back(s, a, GIVE_BACK_MS);
		return WAIT_SIGNAL;
	}
	return WAIT_ACQUIRED;
}
