#include "renew.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

#define RETRY_MS 100 /* between failed renewal attempts, bounded by the loss deadline */

struct renew {
	pthread_t thread;
	const struct server *srv;
	const struct lock *lock;
	int64_t confirmed_sent; /* send time of the last confirmed acquire/renewal */
	int lost_fd;            /* eventfd: written once by the thread on loss */
	int stop_fd;            /* eventfd: written by renew_stop */
	char reason[300];
};

static void signal_loss(struct renew *r, const char *why, const char *detail)
{
	snprintf(r->reason, sizeof r->reason, "%s%s%s", why, detail[0] ? ": " : "", detail);
	uint64_t one = 1;
	(void)!write(r->lost_fd, &one, sizeof one);
}

/* Sleep until `until` (monotonic ms) unless asked to stop: returns 1 on stop. */
static int nap(struct renew *r, int64_t until)
{
	for (;;) {
		int64_t left = until - clock_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = r->stop_fd, .events = POLLIN};
		int rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return 0;
	}
}

/* With any maxmemory-policy but noeviction, Redis may evict the lock key under memory
 * pressure: another client then acquires it while we still run. Say so, once. Done
 * here, off the fast path; a server that refuses INFO (ACL) is not second-guessed. */
static void check_eviction(struct client *c, const struct server *srv, int64_t cap)
{
	struct resp_reply *rep = NULL;
	char err[300];
	const char *argv[] = {"INFO", "memory"};
	size_t lens[] = {4, 6};

	int64_t deadline = clock_ms() + srv->io_timeout_ms;
	if (client_call(c, 2, argv, lens, deadline < cap ? deadline : cap, &rep, err, sizeof err) <
	    0)
		return;
	const char *p = rep->type == RESP_STRING ? strstr(rep->str, "maxmemory_policy:") : NULL;
	if (p) {
		char policy[64];
		p += strlen("maxmemory_policy:");
		size_t n = strcspn(p, "\r\n");
		snprintf(policy, sizeof policy, "%.*s", (int)(n < 63 ? n : 63), p);
		if (strcmp(policy, "noeviction") != 0)
			log_warn(
			    "warning: %s has maxmemory-policy %s: under memory pressure the lock "
			    "can be evicted and taken by another holder; use noeviction",
			    srv->name, policy);
	}
	resp_free(rep);
}

/* Every wait of this thread, connecting included, ends by the loss deadline: that is
 * what lets it report a loss before the server-side lease can expire. */
static void *renew_main(void *arg)
{
	struct renew *r = arg;
	struct client *c = NULL;
	const int64_t ttl = r->lock->ttl_ms;
	char err[300] = "";

	/* Connect now, while there is time, and look at the eviction policy once. */
	int64_t lost_at = r->confirmed_sent + ttl * RENEW_LOSS_NUM / RENEW_LOSS_DEN;
	if (client_open(&c, r->srv, lost_at, err, sizeof err) == CLIENT_OK) {
		check_eviction(c, r->srv, lost_at);
	} else {
		log_debug("renewal: %s", err);
		c = NULL;
	}
	err[0] = '\0';
	for (;;) {
		if (nap(r, r->confirmed_sent + ttl / 3))
			break;
		lost_at = r->confirmed_sent + ttl * RENEW_LOSS_NUM / RENEW_LOSS_DEN;
		/* Try until confirmed or the lease can no longer be trusted. */
		for (;;) {
			int64_t now = clock_ms();
			if (now >= lost_at) {
				/* Name the last failure only if one happened since the last
				 * confirmation (after a stop, e.g. Ctrl-Z, none did). */
				signal_loss(r, "no renewal confirmed in time", err);
				goto out;
			}
			int64_t deadline = now + r->srv->io_timeout_ms;
			if (deadline > lost_at)
				deadline = lost_at;
			if (!c && client_open(&c, r->srv, lost_at, err, sizeof err) != CLIENT_OK) {
				c = NULL;
				log_debug("renewal: %s", err);
			} else {
				int64_t sent = clock_ms();
				int rc = lock_renew(c, r->lock, deadline, err, sizeof err);
				if (rc == LOCK_OK) {
					r->confirmed_sent = sent;
					err[0] = '\0';
					log_debug("renewed %s", r->lock->key);
					break;
				}
				if (rc == LOCK_NOTOURS) {
					signal_loss(r,
					            "the lock is no longer ours (expired, broken "
					            "or taken over)",
					            "");
					goto out;
				}
				log_debug("renewal failed: %s", err);
				client_close(c);
				c = NULL;
			}
			int64_t retry = clock_ms() + RETRY_MS;
			if (nap(r, retry < lost_at ? retry : lost_at))
				goto out;
		}
	}
out:
	client_close(c);
	return NULL;
}

int renew_start(struct renew **out, const struct server *srv, const struct lock *l,
                int64_t confirmed_sent_ms, char *err, size_t errlen)
{
	struct renew *r = calloc(1, sizeof *r);
	sigset_t all, old;

	*out = NULL;
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->srv = srv;
	r->lock = l;
	r->confirmed_sent = confirmed_sent_ms;
	r->lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->lost_fd < 0 || r->stop_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* The thread takes no signals: the main thread's signalfd sees them all. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&r->thread, NULL, renew_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the renewal thread: %s", strerror(rc));
		goto fail;
	}
	*out = r;
	return 0;
fail:
	if (r->lost_fd >= 0)
		close(r->lost_fd);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	free(r);
	return -1;
}

int renew_fd(const struct renew *r)
{
	return r->lost_fd;
}

const char *renew_reason(const struct renew *r)
{
	return r->reason;
}

void renew_stop(struct renew *r)
{
	uint64_t one = 1;

	if (!r)
		return;
	(void)!write(r->stop_fd, &one, sizeof one);
	pthread_join(r->thread, NULL);
	close(r->lost_fd);
	close(r->stop_fd);
	free(r);
}
