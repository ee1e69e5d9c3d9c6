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

/* Milliseconds since start_unix_ms (holder text: untrusted), or -1 when unknown. */
static long long held_ms(const char *start_text)
{
	struct timespec now;
	char *end;

	errno = 0;
	long long start = strtoll(start_text, &end, 10);
	if (!start_text[0] || *end || errno || start <= 0 ||
	    clock_gettime(CLOCK_REALTIME, &now) != 0)
		return -1;
	long long now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	return start <= now_ms ? now_ms - start : -1;
}

static void status_draw(const struct wait_args *a, const struct holder *h, int64_t waited_ms,
                        const char *note)
{
	char line[800], host[128], pid[40], cmd[160];
	const char *clear = "\r\033[K";
	size_t pre = strlen(clear);
	int n;

	if (!status_visible())
		return;
	/* Everything the holder wrote is escaped: it could hold terminal escapes. */
	log_escape(host, sizeof host, h->host, strlen(h->host));
	log_escape(pid, sizeof pid, h->pid, strlen(h->pid));
	log_escape(cmd, sizeof cmd, h->cmd, strlen(h->cmd));
	long long held = held_ms(h->start);
	if (note)
		n = snprintf(line, sizeof line, "%srlock: waiting %llds for '%s': %s", clear,
		             (long long)(waited_ms / 1000), a->name, note);
	else if (h->host[0])
		n = snprintf(line, sizeof line,
		             "%srlock: waiting %llds for '%s': held by %s pid %s (%s) for %llds",
		             clear, (long long)(waited_ms / 1000), a->name, host, pid, cmd,
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

static struct client *subscribe(const struct wait_args *a, char *err, size_t errlen)
{
	struct client *sub = NULL;
	struct resp_reply *r = NULL;
	const char *argv[] = {"SUBSCRIBE", a->lock->channel};
	size_t lens[] = {9, strlen(a->lock->channel)};

	if (client_open(&sub, a->srv, CLIENT_NO_CAP, err, errlen) != CLIENT_OK)
		return NULL;
	int64_t deadline = clock_ms() + a->srv->io_timeout_ms;
	if (client_send(sub, 2, argv, lens, deadline, err, errlen) < 0 ||
	    client_recv(sub, deadline, &r, err, errlen) != 1 || r->type != RESP_ARRAY) {
		if (r && r->type == RESP_ERROR)
			snprintf(err, errlen, "SUBSCRIBE failed: %.200s", r->str);
		resp_free(r);
		client_close(sub);
		return NULL;
	}
	resp_free(r);
	return sub;
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
static int sleep_until(struct client *sub, int sigfd, int64_t until, int *signo)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = sigfd, .events = POLLIN}, {.fd = -1}};
		int n = 1;
		if (sub) {
			if (client_buffered(sub))
				goto read_sub;
			p[1].fd = client_fd(sub);
			p[1].events = POLLIN;
			n = 2;
		}
		int64_t left = until - clock_ms();
		if (left <= 0)
			return 0;
		int rc = poll(p, (nfds_t)n, left > 60000 ? 60000 : (int)left);
		if (rc < 0 && errno != EINTR)
			return -1;
		if (rc <= 0)
			continue;
		if ((p[0].revents & POLLIN) && take_signal(sigfd, signo))
			return -4;
		if (n < 2 || !p[1].revents)
			continue;
	read_sub:;
		struct resp_reply *r = NULL;
		char err[256];
		int got = client_recv(sub, clock_ms() + 1000, &r, err, sizeof err);
		if (got != 1) {
			log_debug("release notifications interrupted: %s", err);
			return -1;
		}
		int msg = r->type == RESP_ARRAY && r->elements == 3 &&
		          r->element[0]->type == RESP_STRING &&
		          strcmp(r->element[0]->str, "message") == 0;
		resp_free(r);
		if (msg)
			return 1;
	}
}

/* How long after the request was sent a granted lease is still worth using: the point
 * at which the renewal thread would give it up (renew.h). */
static int64_t lease_floor(const struct lock *l)
{
	return l->ttl_ms * RENEW_LOSS_NUM / RENEW_LOSS_DEN;
}

/* After a terminating signal, the give-back waits this long at most: rlock is asked
 * to stop now. The release still runs after an acquire left unanswered on the same
 * connection (the server keeps a connection's order), reply or not. */
#define SIGNAL_GIVE_BACK_MS 500

/* Give back a lock that may be ours (taken, or an acquire whose reply never came),
 * within budget_ms (and one io-timeout). On *c the release runs after anything still
 * unanswered (see client_call); a broken or missing connection gets one fresh one. At
 * worst the lease expires by its TTL. */
static void give_back(struct client **c, const struct wait_args *a, int64_t budget_ms)
{
	int64_t deadline =
	    clock_ms() + (budget_ms < a->srv->io_timeout_ms ? budget_ms : a->srv->io_timeout_ms);
	char err[300] = "";
	int rc = LOCK_ERR;

	for (int attempt = 0; attempt < 2 && rc == LOCK_ERR && clock_ms() < deadline; attempt++) {
		if (!*c && client_open(c, a->srv, deadline, err, sizeof err) != CLIENT_OK) {
			*c = NULL;
			break;
		}
		rc = lock_release(*c, a->lock, 0, deadline, err, sizeof err);
		if (rc == LOCK_ERR) {
			client_close(*c);
			*c = NULL;
		}
	}
	if (rc == LOCK_ERR)
		log_debug("cannot give the lock back (%s); it expires within %lld ms", err,
		          (long long)a->lock->ttl_ms);
}

/* Sleep until `until`, redrawing the live line every second: what sleep_until says. */
static int nap_until(const struct wait_args *a, struct client *sub, const struct holder *h,
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

/* One attempt: connect if *c is NULL (never past the wait's deadline), then acquire. A
 * grant whose reply came too late to use is given back and counts as busy. */
static int attempt(struct client **c, const struct wait_args *a, int64_t deadline, int64_t *sent_ms,
                   struct holder *h, char *err, size_t errlen)
{
	if (!*c) {
		int64_t cap = deadline == INT64_MAX ? CLIENT_NO_CAP : deadline;
		int rc = client_open(c, a->srv, cap, err, errlen);
		if (rc != CLIENT_OK) {
			*c = NULL;
			return rc == CLIENT_AUTH ? LOCK_DENIED : LOCK_ERR;
		}
	}
	*sent_ms = clock_ms();
	int rc =
	    lock_acquire(*c, a->lock, a->meta, *sent_ms + a->srv->io_timeout_ms, h, err, errlen);
	if (rc == LOCK_OK && clock_ms() - *sent_ms >= lease_floor(a->lock)) {
		/* Granted, but the reply came so late that the lease, which runs from when
		 * the request was sent, is (nearly) over: someone else may hold it by now.
		 * Give it back and treat the attempt as failed. */
		int64_t late = clock_ms() - *sent_ms;
		give_back(c, a, a->srv->io_timeout_ms);
		snprintf(err, errlen,
		         "%s answered after %lld ms, too late for a %lld ms lease: increase --ttl",
		         a->srv->name, (long long)late, (long long)a->lock->ttl_ms);
		log_debug("%s", err);
		if (clock_ms() >= deadline)
			return LOCK_ERR;
		h->pttl_ms = -1;
		return LOCK_BUSY;
	}
	return rc;
}

int wait_acquire(struct client **c, const struct wait_args *a, int64_t *sent_ms, struct holder *h,
                 int *signo, char *err, size_t errlen)
{
	struct client *sub = NULL;
	uint32_t seed = jitter_seed();
	int64_t start = clock_ms();
	int64_t deadline = a->wait_ms < 0 ? INT64_MAX : start + a->wait_ms;
	int64_t backoff = BACKOFF_FIRST_MS;
	int drawn = 0, announced = 0, waiting = 0, outage = 0, pttl_woke = 0, rc;

	memset(h, 0, sizeof *h);
	for (;;) {
		int fresh = *c == NULL;
		rc = attempt(c, a, deadline, sent_ms, h, err, errlen);
		if (rc != LOCK_OK && rc != LOCK_BUSY && take_signal(a->sigfd, signo)) {
			/* Interrupted (the conn layer's waits watch the signalfd): the
			 * request may have been taken all the same. */
			give_back(c, a, SIGNAL_GIVE_BACK_MS);
			rc = WAIT_SIGNAL;
			break;
		}
		if (rc == LOCK_ERR && waiting && !fresh) {
			/* The connection that sat idle may simply have been closed (the
			 * server's `timeout`, a restart): retry at once on a fresh one. */
			client_close(*c);
			*c = NULL;
			continue;
		}
		if (rc == LOCK_ERR && waiting) {
			/* The server is gone while we wait: keep trying with backoff until
			 * the wait's deadline. Only a failure before the first successful
			 * connect is 69 at once. */
			client_close(*c);
			*c = NULL;
			client_close(sub);
			sub = NULL;
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
			int s = nap_until(a, NULL, h, start, until < deadline ? until : deadline,
			                  "reconnecting", &drawn, signo);
			if (s == -4) {
				rc = WAIT_SIGNAL;
				break;
			}
			if (backoff < BACKOFF_MAX_MS)
				backoff =
				    backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (outage && (rc == LOCK_OK || rc == LOCK_BUSY)) {
			log_info("lock '%s': reconnected to %s", a->name, a->srv->name);
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
			log_info("lock '%s' is busy (held by %s pid %s); waiting", a->name,
			         h->host[0] ? h->host : "?", h->pid[0] ? h->pid : "?");
			announced = 1;
		}
		if (!sub) {
			/* Subscribe, then loop to try again at once: a release that happened
			 * before the subscription was active is seen by that attempt. */
			char err2[256];
			sub = subscribe(a, err2, sizeof err2);
			if (sub)
				continue;
			if (take_signal(a->sigfd, signo)) {
				rc = WAIT_SIGNAL;
				break;
			}
			log_debug("cannot subscribe to release notifications: %s", err2);
		}
		int64_t nap = jittered(backoff, &seed);
		/* Wake when the holder's lease can have run out, but not twice in a row:
		 * a PTTL that keeps saying "now" (or a hostile one) cannot defeat the
		 * backoff. Compared, not added to: a PTTL near INT64_MAX must not wrap. */
		pttl_woke = !pttl_woke && h->pttl_ms >= 0 && h->pttl_ms < nap;
		if (pttl_woke)
			nap = h->pttl_ms + 1;
		int64_t until = now + nap < deadline ? now + nap : deadline;
		int s = nap_until(a, sub, h, start, until, NULL, &drawn, signo);
		if (s == -4) {
			rc = WAIT_SIGNAL;
			break;
		}
		if (s == -1) {
			client_close(sub);
			sub = NULL;
		}
		if (s == 0 && backoff < BACKOFF_MAX_MS)
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	if (drawn)
		status_clear();
	client_close(sub);
	if (rc == LOCK_OK)
		return WAIT_ACQUIRED;
	if (rc == LOCK_DENIED)
		return WAIT_DENIED;
	if (rc == WAIT_SIGNAL || rc == WAIT_BUSY)
		return rc;
	return WAIT_ERR;
}

/* --wait-replicas: WAIT narrows the window in which a failover to a replica that never
 * saw the lock hands it to someone else. 0, or -1 with the reason. */
static int wait_replicas(struct client *c, const struct wait_args *a, int n, char *err,
                         size_t errlen)
{
	char cnt[16], ms[24];
	struct resp_reply *r = NULL;
	int rc = -1;

	snprintf(cnt, sizeof cnt, "%d", n);
	snprintf(ms, sizeof ms, "%lld", (long long)a->srv->io_timeout_ms);
	const char *argv[] = {"WAIT", cnt, ms};
	size_t lens[] = {4, strlen(cnt), strlen(ms)};
	int64_t deadline = clock_ms() + 2 * a->srv->io_timeout_ms;
	if (client_call(c, 3, argv, lens, deadline, &r, err, errlen) < 0) {
		char why[300];
		snprintf(why, sizeof why, "%s", err);
		snprintf(err, errlen, "WAIT for replicas: %s", why);
	} else if (r->type != RESP_INTEGER) {
		snprintf(err, errlen, "WAIT for replicas: %.300s",
		         r->type == RESP_ERROR ? r->str : "unexpected reply");
	} else if (r->integer < n) {
		snprintf(err, errlen,
		         "only %lld of %d replicas acknowledged the lock within %s ms: not "
		         "running the command",
		         r->integer, n, ms);
	} else {
		rc = 0;
	}
	resp_free(r);
	return rc;
}

int wait_ready(struct client **c, const struct wait_args *a, int64_t sent_ms, int replicas,
               int *signo, char *err, size_t errlen)
{
	if (replicas > 0 && wait_replicas(*c, a, replicas, err, errlen) < 0) {
		if (take_signal(a->sigfd, signo)) {
			/* The server holds this connection in WAIT: release on a fresh one. */
			client_close(*c);
			*c = NULL;
			give_back(c, a, SIGNAL_GIVE_BACK_MS);
			return WAIT_SIGNAL;
		}
		give_back(c, a, a->srv->io_timeout_ms);
		return WAIT_ERR;
	}
	/* The same rule as for a late acquire reply: the lease runs from the send time,
	 * and the renewal thread would give it up at this point anyway. */
	int64_t used = clock_ms() - sent_ms;
	if (used >= lease_floor(a->lock)) {
		give_back(c, a, a->srv->io_timeout_ms);
		snprintf(err, errlen,
		         "%lld ms of the %lld ms lease were gone before the command could start: "
		         "not running it (increase --ttl)",
		         (long long)used, (long long)a->lock->ttl_ms);
		return WAIT_ERR;
	}
	if (take_signal(a->sigfd, signo)) {
		give_back(c, a, SIGNAL_GIVE_BACK_MS);
		return WAIT_SIGNAL;
	}
	return WAIT_ACQUIRED;
}
