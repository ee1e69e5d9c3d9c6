/* SPDX-License-Identifier: MIT */
#include "multi.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"

/* Give back lock l (renewed by rn, or not yet: rn NULL with its acquire sent at sent):
 * on the renewal thread's connection, else on `spare` (the caller's, left open; NULL
 * for none), else a fresh one (which may be the very thing that is lacking: a
 * descriptor), never after the lease ended. LOCK_OK, LOCK_NOTOURS or LOCK_ERR. */
static int give_back(struct renew *rn, int64_t sent, const struct store_config *cfg,
                     const struct lock *l, int64_t keep_ms, struct store *spare)
{
	char err[300] = "";
	int64_t confirmed = sent;
	struct store *s = renew_stop(rn, &confirmed);
	int64_t lease_end = confirmed + l->ttl_ms;
	int rc = LOCK_ERR;

	if (clock_ms() < lease_end &&
	    (s || spare || store_open(&s, cfg, 0, lease_end, err, sizeof err) == STORE_OK))
		rc = store_release(s ? s : spare, l, keep_ms, lease_end, err, sizeof err);
	store_close(s);
	if (rc == LOCK_ERR)
		log_warn("cannot release %s (%s); it expires by its TTL", l->key,
		         err[0] ? err : "the lease is over");
	else if (rc == LOCK_OK)
		log_info("released %s", l->key);
	return rc;
}

int multi_acquire(struct multi *m, struct store *s, const struct store_config *cfg,
                  const struct opts *o, const struct lock_meta *meta, int termfd,
                  int64_t started_ms, struct holder *h, int *signo, char *err, size_t errlen)
{
	int rc = WAIT_ACQUIRED;

	/* Not a memset: m is large (OPTS_NAMES_MAX locks) and only m->n entries are used. */
	m->n = 0;
	m->epfd = -1;
	for (int i = 1; i < o->nnames; i++) {
		struct lock *l = &m->l[m->n];
		if (lock_init(l, o->prefix, o->names[i], o->ttl_ms) < 0) {
			snprintf(err, errlen, "no randomness for the lock token: %s",
			         strerror(errno));
			rc = WAIT_ERR;
			break;
		}
		lock_set_mode(l,
		              o->kind == KIND_SHARED  ? LOCK_SHARED
		              : o->kind == KIND_LIMIT ? LOCK_LIMIT
		                                      : LOCK_EXCLUSIVE,
		              o->limit, o->fair, o->wait_ms == 0);
		int64_t left = -1;
		if (o->wait_ms >= 0) {
			left = started_ms + o->wait_ms - clock_ms();
			left = left < 0 ? 0 : left;
		}
		struct wait_args wa = {l,
		                       meta,
		                       o->names[i],
		                       left,
		                       o->io_timeout_ms,
		                       termfd,
		                       isatty(2) && o->verbose >= 0};
		int64_t sent;
		rc = wait_acquire(s, &wa, &sent, h, signo, err, errlen);
		if (rc == WAIT_ACQUIRED)
			rc = wait_ready(s, &wa, sent, o->wait_replicas, signo, err, errlen);
		if (rc != WAIT_ACQUIRED)
			break;
		log_info("got the lock %s too (fence %lld)", l->key, l->fence);
		m->sent[m->n] = sent;
		if (renew_start(&m->rn[m->n], cfg, l, sent, NULL, 0, err, errlen) < 0) {
			give_back(NULL, sent, cfg, l, 0, s);
			rc = WAIT_OSERR;
			break;
		}
		m->n++;
	}
	if (rc != WAIT_ACQUIRED)
		multi_release(m, cfg, 0, s);
	return rc;
}

int64_t multi_confirmed_sent(const struct multi *m, int64_t first)
{
	for (int i = 0; i < m->n; i++) {
		int64_t s = renew_confirmed_sent(m->rn[i]);
		if (s < first)
			first = s;
	}
	return first;
}

int multi_lost_fd(struct multi *m, int first_fd)
{
	if (m->n == 0)
		return first_fd;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->epfd < 0)
		return -1;
	for (int i = -1; i < m->n; i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd = i < 0 ? first_fd : renew_fd(m->rn[i]);
		if (fd >= 0 && epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			return -1;
	}
	return m->epfd;
}

int multi_lost_reason(const struct multi *m, int timed_out, int64_t loss_after_ms, char *buf,
                      size_t n)
{
	int64_t now = clock_ms();

	for (int i = 0; i < m->n; i++) {
		struct pollfd p = {.fd = renew_fd(m->rn[i]), .events = POLLIN};
		if ((timed_out && now >= renew_confirmed_sent(m->rn[i]) + loss_after_ms) ||
		    (!timed_out && poll(&p, 1, 0) == 1)) {
			char why[300];
			renew_reason(m->rn[i], timed_out, why, sizeof why);
			snprintf(buf, n, "%s: %s", m->l[i].key, why);
			return 1;
		}
	}
	return 0;
}

int multi_release(struct multi *m, const struct store_config *cfg, int64_t keep_ms,
                  struct store *spare)
{
	int lost = 0;

	/* In the reverse order of acquisition. */
	for (int i = m->n - 1; i >= 0; i--) {
		if (give_back(m->rn[i], m->sent[i], cfg, &m->l[i], keep_ms, spare) ==
		    LOCK_NOTOURS) {
			log_error("lock lost: %s was no longer held at the release", m->l[i].key);
			lost = 1;
		}
		m->rn[i] = NULL;
	}
	m->n = 0;
	if (m->epfd >= 0)
		close(m->epfd);
	m->epfd = -1;
	return lost;
}
