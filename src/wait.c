#include "wait.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void status_draw(const struct wait_args *a, const struct holder *h, int64_t waited_ms)
{
	char line[700], host[128], cmd[160];
	long long held_s = -1;
	struct timespec now;

	log_escape(host, sizeof host, h->host, strlen(h->host));
	log_escape(cmd, sizeof cmd, h->cmd, strlen(h->cmd));
	if (h->start[0] && clock_gettime(CLOCK_REALTIME, &now) == 0) {
		long long start = strtoll(h->start, NULL, 10);
		held_s = ((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 - start) / 1000;
	}
	int n;
	if (h->host[0])
		n = snprintf(
		    line, sizeof line,
		    "\r\033[Krlock: waiting %llds for '%s': held by %s pid %s (%s) for %llds",
		    (long long)(waited_ms / 1000), a->name, host, h->pid, cmd,
		    held_s < 0 ? 0 : held_s);
	else
		n = snprintf(line, sizeof line, "\r\033[Krlock: waiting %llds for '%s'",
		             (long long)(waited_ms / 1000), a->name);
	if (n > 0)
		(void)!write(STDERR_FILENO, line,
		             (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void status_clear(void)
{
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
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si &&
			    si.ssi_signo != SIGCHLD && si.ssi_signo != SIGWINCH) {
				*signo = (int)si.ssi_signo;
				return -4;
			}
		}
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

int wait_acquire(struct client **c, const struct wait_args *a, int64_t *sent_ms, struct holder *h,
                 int *signo, char *err, size_t errlen)
{
	struct client *sub = NULL;
	uint32_t seed = jitter_seed();
	int64_t start = clock_ms();
	int64_t deadline = a->wait_ms < 0 ? INT64_MAX : start + a->wait_ms;
	int64_t backoff = BACKOFF_FIRST_MS;
	int drawn = 0, announced = 0, slept = 0, rc;

	for (;;) {
		*sent_ms = clock_ms();
		int64_t io_deadline = *sent_ms + a->srv->io_timeout_ms;
		rc = lock_acquire(*c, a->lock, a->meta, io_deadline, h, err, errlen);
		if (rc == LOCK_ERR && slept) {
			/* After a wait, one fresh connection before giving up: the server may
			 * have closed the idle one (its `timeout` setting). */
			struct client *fresh;
			char err2[256];
			if (client_open(&fresh, a->srv, CLIENT_NO_CAP, err2, sizeof err2) ==
			    CLIENT_OK) {
				client_close(*c);
				*c = fresh;
				*sent_ms = clock_ms();
				rc = lock_acquire(*c, a->lock, a->meta,
				                  *sent_ms + a->srv->io_timeout_ms, h, err, errlen);
			}
		}
		if (rc == LOCK_OK && clock_ms() - *sent_ms >= lease_floor(a->lock)) {
			/* Granted, but the reply came so late that the lease, which runs from
			 * when the request was sent, is (nearly) over: someone else may hold it
			 * by now. Give it back and treat the attempt as failed. */
			char err2[256];
			int64_t late = clock_ms() - *sent_ms;
			lock_release(*c, a->lock, 0, clock_ms() + a->srv->io_timeout_ms, err2,
			             sizeof err2);
			snprintf(err, errlen,
			         "%s answered after %lld ms, too late for a %lld ms lease: "
			         "increase --ttl",
			         a->srv->name, (long long)late, (long long)a->lock->ttl_ms);
			log_debug("%s", err);
			if (clock_ms() >= deadline) {
				rc = LOCK_ERR;
				break;
			}
			h->pttl_ms = -1;
			rc = LOCK_BUSY;
		}
		if (rc != LOCK_BUSY)
			break;
		int64_t now = clock_ms();
		if (now >= deadline) {
			rc = WAIT_BUSY; /* == LOCK_BUSY */
			break;
		}
		if (!announced) {
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
			log_debug("cannot subscribe to release notifications: %s", err2);
		}
		int64_t nap = jittered(backoff, &seed);
		if (h->pttl_ms >= 0 && h->pttl_ms + 1 < nap)
			nap = h->pttl_ms + 1; /* the lease can have run out by then */
		int64_t until = now + nap < deadline ? now + nap : deadline;
		/* Sleep until the next attempt; the live line is redrawn every second in
		 * between, without a request to the server. */
		int s;
		do {
			int64_t tick = until;
			if (a->status_line) {
				status_draw(a, h, clock_ms() - start);
				drawn = 1;
				if (clock_ms() + 1000 < tick)
					tick = clock_ms() + 1000;
			}
			s = sleep_until(sub, a->sigfd, tick, signo);
		} while (s == 0 && clock_ms() < until);
		slept = 1;
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
