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

#include "clock.h"
#include "events.h"
#include "holder.h"
#include "lease.h"
#include "log.h"

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
	char line[1000], who[800], text[800];
	const char *clear = "\r\033[K";
	size_t pre = strlen(clear);
	int n;

	if (!status_visible())
		return;
	long long held = held_ms(h->start_ms);
	if (!note && holder_nobody(h)) /* "closed by lock-delay for ...", "reserved for ..." */
		note = holder_format(h, HOLDER_RAW, who, sizeof who);
	if (note) /* a server's error text or the holder's fields: escaped here, once */
		log_escape(text, sizeof text, note, strlen(note));
	if (note)
		n = snprintf(line, sizeof line, "%srlock: waiting %llds for '%s': %s", clear,
		             (long long)(waited_ms / 1000), a->name, text);
	else if (h->host[0])
		/* Everything the holder wrote is escaped: it could hold terminal escapes. */
		n = snprintf(line, sizeof line,
		             "%srlock: waiting %llds for '%s': held by %s for %llds", clear,
		             (long long)(waited_ms / 1000), a->name,
		             holder_format(h, HOLDER_CMD | HOLDER_LABEL, who, sizeof who),
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

/* When the read of a message whose first bytes came ends: a second at most for the
 * rest, and never past `until` (the -w deadline, the next redraw); one look when that
 * has passed. A message cut off in the middle (a stalled server or network) leaves its
 * first bytes buffered: the next sleep reads on from them, and they are no wake-up. */
static int64_t read_end(int64_t until)
{
	int64_t now = clock_ms();

	return now + 1000 < until ? now + 1000 : until;
}

/* Sleep until `until` or a wake-up: 1 woken by a release, 2 by a Redlock attempt's
 * give-back (no release: the caller says what it does), 0 timeout, -1 the subscription
 * broke, -4 a signal (*signo). */
static int sleep_until(struct store *s, int sigfd, int64_t until, int *signo)
{
	for (;;) {
		struct pollfd p[3] = {{.fd = sigfd, .events = POLLIN}, {.fd = -1}, {.fd = -1}};
		char err[256];
		int watch = store_watch_buffered(s);
		if (!watch && store_notify_fd(s) >= 0) {
			if (store_notify_buffered(s))
				goto read_sub;
			p[1].fd = store_notify_fd(s);
			p[1].events = POLLIN;
		}
		/* The route's watch: a Sentinel failover names a new master, and the
		 * listener is on the former one, which may hear no release. */
		p[2].fd = store_watch_fd(s);
		p[2].events = POLLIN;
		/* Past `until`: one look all the same, so that a release that came while
		 * this process was not running wakes it as the release, not as the timer. */
		int64_t left = until - clock_ms();
		int rc = watch ? 0
		               : poll(p, 3,
		                      left <= 0                 ? 0
		                      : left > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS
		                                                : (int)left);
		if (rc < 0 && errno != EINTR)
			return -1;
		if (!watch && rc <= 0 && left <= 0)
			return 0;
		if (!watch && rc <= 0)
			continue;
		if ((p[0].revents & POLLIN) && take_signal(sigfd, signo))
			return -4;
		if (watch || p[2].revents) {
			int changed = store_watch_read(s, read_end(until), err, sizeof err);
			if (changed > 0) {
				log_debug("release notifications: %s; listening there", err);
				return -1;
			}
			if (changed < 0)
				log_debug("no watch on the sentinels any more: %s", err);
			if (clock_ms() >= until) /* bytes still buffered skip the poll above */
				return 0;
			continue;
		}
		if (!p[1].revents)
			continue;
	read_sub:;
		int got = store_notify_read(s, read_end(until), err, sizeof err);
		if (got < 0) {
			log_debug("release notifications interrupted: %s", err);
			return -1;
		}
		if (got == 1) {
			log_debug("woken by the release notification");
			return 1;
		}
		if (got == 2)
			return 2;
		if (clock_ms() >= until) /* the rest of a message that never comes */
			return 0;
	}
}

/* A wait's last try begins LAST_TRY_MS before its deadline: a pause (a backoff step of
 * up to BACKOFF_MAX_MS, a nap) that would run to the deadline or past it ends there
 * instead, unless the try before it began there already. A server that answers again
 * (a lock that became free without a release notification) before then is found, and
 * that try ends by the deadline (it is capped there) rather than being cut off before
 * it began. A pause that ends before the deadline is kept (a holder's lease that ends
 * then: that is when to try). The end of a pause after the try at `tried` (monotonic
 * ms). */
#define LAST_TRY_MS 250
static int64_t pause_end(int64_t until, int64_t deadline, int64_t tried)
{
	int64_t last = deadline - LAST_TRY_MS;

	if (deadline == INT64_MAX || until < deadline)
		return until;
	return tried < last ? last : deadline;
}

/* How long after the request was sent a granted lease is still worth using: the point
 * at which the hold counts it lost (lease.h). */
static int64_t lease_floor(const struct lock *l)
{
	return lease_loss_after(l->ask.ttl_ms);
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
 * TTL. The command never ran: an attempt's give-back (release.lua), as a Redlock
 * attempt without a quorum, so that --history shows no acquired/released pair. */
static void give_back(struct store *s, const struct wait_args *a, int64_t budget_ms)
{
	char err[300] = "";
	struct lock l = *a->lock;

	l.attempt_declared = 1;
	/* When the lease would end is not known here (a reply may not have come): the
	 * budget bounds it. */
	if (lease_release(s, NULL, &l, 0, STORE_NO_CAP, cleanup_deadline(a, budget_ms), NULL, err,
	                  sizeof err) == LOCK_ERR)
		log_debug("cannot give the lock back (%s); it expires within %lld ms", err,
		          (long long)a->lock->ask.ttl_ms);
}

/* A waiter that gives up leaves the fair queue and drops its writer mark at once (not
 * by the end of its lease), within budget_ms (and one io-timeout); at worst they expire
 * by the ttl. */
static int leave(struct store *s, const struct wait_args *a, int64_t budget_ms,
                 struct holder *newer)
{
	char err[300];
	struct holder spare;
	int rc = store_leave(s, a->lock, cleanup_deadline(a, budget_ms), newer ? newer : &spare,
	                     err, sizeof err);

	if (rc == LOCK_ERR)
		log_debug("cannot leave the queue (%s); the place expires within %lld ms", err,
		          (long long)a->lock->ask.ttl_ms);
	return rc;
}

/* Without a terminal (a CI log, cron's mail), a waiting run says now and then what it
 * waits for: first after PROGRESS_FIRST_MS, then every PROGRESS_EVERY_MS; not under -q
 * (log_warn). The next time it is due, 0 before the first wait (one wait per process at
 * a time: the main thread's). */
#define PROGRESS_FIRST_MS 10000
#define PROGRESS_EVERY_MS 30000
static int64_t progress_due;

/* Print the progress line if it is due (note: what the wait is doing instead of waiting
 * for h, e.g. reconnecting); the time the next one is due. */
static int64_t progress(const struct wait_args *a, const struct holder *h, int64_t start,
                        const char *note)
{
	char who[1200], holder[800];
	int64_t now = clock_ms();

	if (a->status_line || log_verbosity < 0 || isatty(STDERR_FILENO))
		return INT64_MAX;
	if (progress_due == 0)
		progress_due = start + PROGRESS_FIRST_MS;
	if (now < progress_due)
		return progress_due;
	progress_due = now + PROGRESS_EVERY_MS;
	long long held = held_ms(h->start_ms);
	char since[32], label[LOCK_LABEL_MAX + 16] = "";
	holder_human_ms(since, sizeof since, held);
	if (a->meta && a->meta->label && a->meta->label[0])
		snprintf(label, sizeof label, " [%s]", a->meta->label);
	if (note)
		snprintf(who, sizeof who, "%s", note);
	else if (holder_nobody(h))
		holder_format(h, HOLDER_LABEL | HOLDER_RAW, who, sizeof who);
	else if (h->host[0])
		snprintf(
		    who, sizeof who, "held by %s for %s",
		    holder_format(h, HOLDER_CMD | HOLDER_LABEL | HOLDER_RAW, holder, sizeof holder),
		    since);
	else
		snprintf(who, sizeof who, "busy");
	log_warn("still waiting for '%s'%s after %llds: %s", a->name, label,
	         (long long)((now - start) / 1000), who);
	return progress_due;
}

/* h as it stands now, seen (clock_ms) when its reply came: the time it had left (a
 * lock-delay, a --min-hold keep, a reservation) counts down while the waiter sleeps on
 * it, in the live line and the progress lines (was: the reply's figure, redrawn every
 * second unchanged). h itself, when it says no time left. */
static const struct holder *aged(const struct holder *h, int64_t seen, struct holder *buf)
{
	int64_t gone = clock_ms() - seen;

	if (h->pttl_ms <= 0 || seen <= 0 || gone <= 0)
		return h;
	*buf = *h;
	buf->pttl_ms = h->pttl_ms > gone ? h->pttl_ms - gone : 0;
	return buf;
}

/* Sleep until `until`, redrawing the live line every second: what sleep_until says.
 * Work left for a round trip (the command's watchdog, store_while_waiting) runs first,
 * if no round trip has run it: while this waiter sleeps, not in the round trip of the
 * attempt that takes the lock (a hand-off would wait for its fork). h came at seen. */
static int nap_until(const struct wait_args *a, struct store *sub, const struct holder *h,
                     int64_t seen, int64_t start, int64_t until, const char *note, int *drawn,
                     int *signo)
{
	struct holder now;
	int s;

	store_idle_now();
	do {
		int64_t tick = until, due = progress(a, aged(h, seen, &now), start, note);
		if (due < tick)
			tick = due;
		if (a->status_line) {
			status_draw(a, aged(h, seen, &now), clock_ms() - start, note);
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
	/* The first try of -n is not waiting: it may connect (a cluster's redirect to the
	 * slot's node); its hops are bounded by their own timeouts, each server tried once.
	 * Every other try, the first of -w too, ends by the wait's deadline: connect, reply
	 * and all. */
	int once = first && a->lock->ask.nowait;
	int64_t cap = once ? STORE_NO_CAP : deadline;
	/* -n looks once (README: fails at once): no server tried twice, one pass over
	 * the sentinels should the route look again; its release follows the route. */
	store_look_once(once);
	int rc = store_acquire(s, a->lock, a->meta, cap, sent_ms, h, err, errlen);
	store_look_once(0);
	if (rc == LOCK_OK && clock_ms() - *sent_ms >= lease_floor(a->lock)) {
		/* Granted, but the reply came so late that the lease, which runs from when
		 * the request was sent, is (nearly) over: someone else may hold it by now.
		 * Give it back and treat the attempt as failed. */
		int64_t late = clock_ms() - *sent_ms;
		give_back(s, a, a->io_timeout_ms);
		snprintf(err, errlen,
		         "%s answered after %lld ms, too late for a %lld ms lease: increase --ttl",
		         store_name(s), (long long)late, (long long)a->lock->ask.ttl_ms);
		log_debug("%s", err);
		if (clock_ms() >= deadline)
			return LOCK_ERR;
		h->pttl_ms = -1;
		return LOCK_BUSY;
	}
	return rc;
}

/* An outage is said once when it starts and once when it ends (not per try), on
 * stderr: a blip the wait rides out is worth a line, not a failure. */
static void outage_started(const char *name, const char *why, int64_t deadline)
{
	int64_t left = deadline - clock_ms();

	if (deadline == INT64_MAX)
		log_warn("lock '%s': %s; retrying (no --wait deadline)", name, why);
	else if (left <= 0) /* said by the give-up line that follows */
		return;
	else
		log_warn("lock '%s': %s; retrying for up to %.1f s (--wait)", name, why,
		         (double)left / 1000);
}

static void outage_ended(const char *name, const char *server, int64_t since)
{
	log_warn("lock '%s': %s answers again after %.1f s", name, server,
	         (double)(clock_ms() - since) / 1000);
}

/* wait_acquire's state machine: attempt; when busy, listen for the release, then nap
 * until woken, the holder's TTL or the backoff; when the server is lost while waiting,
 * back off and reconnect. Each state is one function returning the next. */
enum wait_state { ST_ATTEMPT, ST_OUTAGE, ST_LISTEN, ST_NAP, ST_DONE };

struct wait_run {
	struct store *s;
	const struct wait_args *a;
	int64_t *sent_ms;
	struct holder *h;
	int *signo;
	char *err;
	size_t errlen;
	uint32_t seed;
	int64_t start, deadline, backoff_ms;
	int64_t busy_at;   /* when the last attempt said busy */
	int64_t tried_at;  /* when the last attempt began */
	int lock_rc;       /* the last attempt's LOCK_* */
	enum wait_rc rc;   /* the result, at ST_DONE */
	int64_t outage_at; /* when the outage began */
	int drawn, announced, waiting, outage, pttl_woke, again, sub;
	int split;   /* the last attempt was a Redlock split vote */
	int heard;   /* the listener last announced at -vv: 1 the channel, 2 a place */
	int polling; /* said (-v) that SUBSCRIBE is refused: this waiter polls */
};

static void backoff_grow(struct wait_run *w)
{
	w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->backoff_ms * 2;
}

/* The backoff: a jittered nap of the current step, which then doubles (capped). */
static int64_t backoff(struct wait_run *w, int grow)
{
	int64_t nap = jittered(w->backoff_ms, &w->seed);

	if (grow)
		backoff_grow(w);
	return nap;
}

/* The end of a pause before the next attempt: never past the deadline, and the last
 * attempt LAST_TRY_MS before it. */
static int64_t before_deadline(const struct wait_run *w, int64_t until)
{
	return pause_end(until, w->deadline, w->tried_at);
}

static enum wait_state done(struct wait_run *w, enum wait_rc rc)
{
	w->rc = rc;
	return ST_DONE;
}

static enum wait_rc from_lock(int lock_rc)
{
	switch (lock_rc) {
	case LOCK_OK:
		return WAIT_ACQUIRED;
	case LOCK_BUSY:
		return WAIT_BUSY;
	case LOCK_DONE:
		return WAIT_DONE;
	case LOCK_SUPERSEDED:
		return WAIT_SUPERSEDED;
	case LOCK_MISMATCH:
		return WAIT_MISMATCH;
	case LOCK_DENIED:
		return WAIT_DENIED;
	default:
		return WAIT_ERR;
	}
}

static void forget_listener(struct wait_run *w)
{
	store_unsubscribe(w->s);
	w->sub = 0;
	w->heard = 0;
}

static void announce_busy(struct wait_run *w)
{
	/* log_msg escapes holder text itself */
	char who[800];

	if (w->announced)
		return;
	log_info("lock '%s' is busy (%s%s); waiting%s", w->a->name,
	         holder_nobody(w->h) ? "" : "held by ",
	         holder_format(w->h, HOLDER_LABEL | HOLDER_RAW, who, sizeof who),
	         w->a->lock->ask.preempt && !holder_nobody(w->h) && w->h->host[0] &&
	                 !w->h->preemptible
	             ? " for its release: it is not --preemptible, so --preempt cannot stop it"
	             : "");
	w->announced = 1;
	events_emit(EV_WAITING, &(struct ev_facts){.lock = w->a->lock});
}

/* A request of a run that the server answered already (a lock of several before this
 * one was taken) that got no reply (the connection dropped, the server may have run
 * it): an outage within the wait, as a waiting request's; the retry recognises the
 * grant it may have made. An error reply is an answer: not this. (The first contact's
 * closed connection is passing unless its port answers TLS: client.c add_tls_hint.) */
static int lost_reply(const struct wait_run *w)
{
	return w->a->served && store_unanswered(w->s) && !store_fault_final();
}

static enum wait_state st_attempt(struct wait_run *w)
{
	/* A retry at once (below) counts as fresh: one per failure. */
	int fresh = w->again || !store_connected(w->s);
	int rc;

	w->again = 0;
	/* Past the -w deadline already (rlock was stopped or starved while it napped): no
	 * attempt, whose grant could only be given back unused (a --preempt request's
	 * would take its hand-over and tell the stopped holder it went to it: 81). */
	if (w->waiting && clock_ms() >= w->deadline)
		return done(w, WAIT_BUSY);
	w->tried_at = clock_ms();
	rc = w->lock_rc =
	    attempt(w->s, w->a, !w->waiting, w->deadline, w->sent_ms, w->h, w->err, w->errlen);
	if (rc != LOCK_OK && rc != LOCK_BUSY && take_signal(w->a->sigfd, w->signo)) {
		/* Interrupted (the conn layer's waits watch the signalfd): the request may
		 * have been taken all the same: the lock, or (a waiting request) a place
		 * among the waiters or in the queue, left at the end. */
		give_back(w->s, w->a, GIVE_BACK_MS);
		if (!w->a->lock->ask.nowait)
			w->waiting = 1;
		return done(w, WAIT_SIGNAL);
	}
	if (rc == LOCK_ERR && w->waiting && !w->outage && clock_ms() >= w->deadline) {
		/* An attempt of a waiting request cut short by the -w deadline: the server
		 * answered until now, the lock was busy the last it said; the attempt, if it
		 * took the lock, is given back behind it (finish). */
		log_debug("%s: at the --wait deadline", w->err);
		return done(w, WAIT_BUSY);
	}
	if (rc == LOCK_ERR && w->waiting && !fresh) {
		/* The connection that sat idle may simply have been closed (the server's
		 * `timeout`, a restart): retry at once on a fresh one (the store never
		 * reuses a connection that failed). */
		w->again = 1;
		return ST_ATTEMPT;
	}
	if (rc == LOCK_ERR &&
	    (w->waiting || (!w->a->lock->ask.nowait && (store_fault_passing() || lost_reply(w)))))
		return ST_OUTAGE;
	if (w->outage && (rc == LOCK_OK || rc == LOCK_BUSY)) {
		outage_ended(w->a->name, store_name(w->s), w->outage_at);
		w->outage = 0;
	}
	if (rc != LOCK_BUSY)
		return done(w, from_lock(rc));
	w->waiting = 1;
	w->split = w->h->split_vote;
	/* A split vote: listen where the holder is now (the node listened on may have
	 * granted this vote: the holder's release is not published there). */
	if (w->split && store_listener_moved(w->s))
		forget_listener(w);
	w->busy_at = clock_ms();
	if (w->busy_at >= w->deadline)
		return done(w, WAIT_BUSY);
	announce_busy(w);
	return ST_LISTEN;
}

/* The server cannot serve (gone, paused, loading, failing over): keep trying with
 * backoff until the wait's deadline (-n: never here). */
static enum wait_state st_outage(struct wait_run *w)
{
	forget_listener(w);
	if (!w->outage) {
		outage_started(w->a->name, w->err, w->deadline);
		w->outage_at = clock_ms();
	}
	w->outage = 1;
	if (clock_ms() >= w->deadline) {
		char why[300];
		log_reason(why, sizeof why, "%s", w->err);
		log_reason(w->err, w->errlen,
		           "lock '%s': Redis unavailable while waiting (gave up at the --wait "
		           "deadline): %s",
		           w->a->name, why);
		return done(w, WAIT_ERR);
	}
	int64_t until = before_deadline(w, clock_ms() + backoff(w, 1));
	char note[400]; /* what the progress line says it waits for: the server, the error */
	log_reason(note, sizeof note, "Redis unavailable for %llds, reconnecting; last error: %s",
	           (long long)((clock_ms() - w->outage_at) / 1000), w->err);
	if (nap_until(w->a, w->s, w->h, w->busy_at, w->start, until, note, &w->drawn, w->signo) ==
	    -4)
		return done(w, WAIT_SIGNAL);
	/* Woken at the deadline (the last try, LAST_TRY_MS before it, is behind): no try
	 * without time, whose "not tried: no time left" would hide the server's last
	 * error; the give-up says that one. */
	return clock_ms() >= w->deadline ? ST_OUTAGE : ST_ATTEMPT;
}

/* Listen for the release (again, after a wake-up was used). A new subscription: try
 * again at once, a release before it was not heard. A place among the waiters keeps a
 * wake-up made before it listened. */
static int64_t by_deadline(const struct wait_run *w, int64_t budget_ms);

static enum wait_state st_listen(struct wait_run *w)
{
	char err[256];
	int listen = store_subscribe(w->s, w->a->lock, w->deadline, err, sizeof err);

	if (listen == STORE_NEW) {
		w->sub = 1;
		return w->split ? ST_NAP : ST_ATTEMPT; /* a split vote: after its pause */
	}
	w->sub = listen != STORE_ERR;
	if (!w->sub) {
		w->heard = 0;
		if (take_signal(w->a->sigfd, w->signo))
			return done(w, WAIT_SIGNAL);
		if (!store_listen_refused(w->s))
			log_debug("cannot subscribe to release notifications: %s", err);
		else if (!w->polling) { /* asked no more (store.c): said once */
			w->polling = 1;
			log_info("release notifications refused (%s): polling instead", err);
		}
	} else if (w->heard != 1 + w->a->lock->placed) {
		/* Said once the listener is in place and the last attempt after it was
		 * busy: a release from now on wakes this waiter. */
		w->heard = 1 + w->a->lock->placed;
		log_debug("listening for the release (%s)",
		          w->a->lock->placed ? "a place among the waiters" : "the release channel");
		/* Waiting anyway: what the server is (a Cluster's slot map), should the
		 * URL's node fail while this waits (store.h). Once per process. */
		store_learn(w->s, clock_ms() + by_deadline(w, w->a->io_timeout_ms));
	}
	return ST_NAP;
}

/* A place in a queue is a short lease of its own (LOCK_QUEUE_LEASE_MS, or the ttl when
 * shorter): a waiter that may hold one refreshes it (its next attempt) at least three times
 * per lease, so that only a dead waiter loses its place. So is a --preempt request's mark
 * (acquire.lua): a requester that is gone stops no holder; and so is the writer mark of
 * an exclusive request that waits for shared holders or permits (acquire.lua: its busy
 * reply names their mode, its pttl the end of the last lease) or a fair queue (pttl -1):
 * a writer that died keeps readers out seconds. */
static int64_t queue_nap(const struct lock *l, const struct holder *h, int64_t nap)
{
	const char *ch[2];
	int writer =
	    l->ask.mode == LOCK_EXCLUSIVE && !h->delayed && (h->pttl_ms == -1 || h->mode != 'x');

	if (!l->ask.nowait && (lock_channels(l, ch) == 2 || l->ask.preempt || writer) &&
	    nap > LOCK_QUEUE_LEASE_MS / 3)
		return LOCK_QUEUE_LEASE_MS / 3;
	return nap;
}

/* How long to nap while busy. Where a release wakes this waiter on its own (a queue's
 * head, a place among the waiters), the timer is only the safety net (a woken waiter
 * that died before it could try): no short backoff. The place in the queue and the
 * writer mark are short leases (queue_nap). Wake when the holder's lease can have run out, but
 * not twice in a row: a PTTL that keeps saying "now" (or a hostile one) cannot defeat
 * the backoff. Compared, not added to: a PTTL near INT64_MAX must not wrap. */
static int64_t busy_nap(struct wait_run *w)
{
	const struct lock *l = w->a->lock;
	const char *ch[2];
	int64_t nap = backoff(w, 0);

	/* Closed by a lock-delay, or kept for a --preempt request (a reservation that ends
	 * untaken, its request dead, stopped or gone, wakes nobody): nobody will release it,
	 * and its end is exact (the server's): wake then, not a backoff later; 10 ms at
	 * least, so a reply of "now" cannot make it spin. A request that lives takes it
	 * within a round trip: this waiter then waits for that one's release. */
	if ((w->h->delayed || w->h->reserved) && w->h->pttl_ms >= 0) {
		w->pttl_woke = 0;
		nap = w->h->pttl_ms < 10 ? 10 : w->h->pttl_ms + 1;
		/* a place in the queue and a --preempt mark are kept through it too */
		return queue_nap(l, w->h, nap < l->ask.ttl_ms / 3 ? nap : l->ask.ttl_ms / 3);
	}
	if (w->sub && (l->placed || lock_channels(l, ch) == 2))
		nap = jittered(BACKOFF_MAX_MS, &w->seed);
	if (nap > l->ask.ttl_ms / 3)
		nap = l->ask.ttl_ms / 3;
	nap = queue_nap(l, w->h, nap);
	w->pttl_woke = !w->pttl_woke && w->h->pttl_ms >= 0 && w->h->pttl_ms < nap;
	if (w->pttl_woke)
		nap = w->h->pttl_ms + 1;
	return nap;
}

/* A Redlock split vote (some nodes granted and were given back, no quorum): the next
 * attempt after a short random delay, as the Redlock algorithm says (to desynchronise
 * the clients that split it) and as redsync does (50-250 ms, the same for every try):
 * not the waiter's backoff, which grows while it waits (up to 5 s) though a split vote
 * says the name may be free now. It ends by the -w deadline, or at once at a holder's
 * release. Not at an attempt's give-back (release.lua publishes "attempt", this
 * waiter's own too, on a node it listens on): two waiters that split the vote would
 * wake each other, or one itself, and split again at once, on and on. Those heard
 * meanwhile are ignored. */
#define SPLIT_PAUSE_MIN_MS 50
#define SPLIT_PAUSE_MAX_MS 250
static enum wait_state split_pause(struct wait_run *w)
{
	int64_t pause = SPLIT_PAUSE_MIN_MS +
	                jittered(2 * (SPLIT_PAUSE_MAX_MS - SPLIT_PAUSE_MIN_MS), &w->seed) -
	                (SPLIT_PAUSE_MAX_MS - SPLIT_PAUSE_MIN_MS);
	/* The nodes that did not grant are closed by a lock-delay (or kept for a --preempt
	 * request) and said until when: nobody releases it, a try before its end splits
	 * again. Pause until then, as a waiter on one server does (busy_nap: the
	 * marks' leases kept meanwhile); a release still ends the pause at once. */
	if ((w->h->delayed || w->h->reserved) && w->h->pttl_ms >= 0) {
		int64_t end = busy_nap(w);
		if (end > pause)
			pause = end;
	}
	int64_t until = before_deadline(w, clock_ms() + pause);
	int slept, rounds = 0;

	do {
		slept = nap_until(w->a, w->s, w->h, w->busy_at, w->start, until, NULL, &w->drawn,
		                  w->signo);
		if (slept == 2)
			log_debug("a Redlock attempt's give-back notified (no release): still "
			          "pausing after the split vote");
	} while (slept == 2 && clock_ms() < until && ++rounds < 1000);
	if (slept == -4)
		return done(w, WAIT_SIGNAL);
	if (slept == -1)
		forget_listener(w);
	return ST_ATTEMPT;
}

static enum wait_state st_nap(struct wait_run *w)
{
	if (w->split)
		return split_pause(w);
	int64_t until = before_deadline(w, w->busy_at + busy_nap(w));
	int slept =
	    nap_until(w->a, w->s, w->h, w->busy_at, w->start, until, NULL, &w->drawn, w->signo);

	if (slept == 2)
		log_debug("woken by a Redlock attempt's give-back (a node freed, no release)");
	if (slept == -4)
		return done(w, WAIT_SIGNAL);
	if (slept == 0)
		backoff_grow(w);
	if (slept != -1)
		return ST_ATTEMPT;
	forget_listener(w);
	/* BLPOP refused: the place would take a release's wake-up from a waiter that can
	 * block (the next attempts take none). */
	if (w->a->lock->placed && store_wake_refused(w->s)) {
		leave(w->s, w->a, w->a->io_timeout_ms, NULL);
		w->a->lock->placed = 0;
	}
	/* A listener that breaks as soon as it listens (a slot that moved, an error
	 * reply, a server at maxclients that closes it): no attempt at once, or the loop
	 * would spin on it. The nap of a waiter without a listener (busy_nap: its caps), or
	 * to the holder's lease end when that was this nap's end, and the backoff grows: a
	 * listener that breaks every time must not keep the first step (an attempt and a
	 * connection 7 times a second). */
	if (clock_ms() - w->busy_at < BACKOFF_FIRST_MS) {
		int64_t pause = w->pttl_woke ? until : before_deadline(w, clock_ms() + busy_nap(w));
		if (nap_until(w->a, w->s, w->h, w->busy_at, w->start, pause, NULL, &w->drawn,
		              w->signo) == -4)
			return done(w, WAIT_SIGNAL);
		backoff_grow(w);
	}
	return ST_ATTEMPT;
}

/* What a clean-up may take when the wait ends: budget_ms, but no more than
 * LATE_MS past the -w deadline (a deadline is a deadline: a frozen server gets the
 * request written, and runs it after the unanswered one when it wakes). */
#define LATE_MS 50
static int64_t by_deadline(const struct wait_run *w, int64_t budget_ms)
{
	int64_t left = w->deadline == INT64_MAX ? budget_ms : w->deadline - clock_ms();

	left = left < 0 ? LATE_MS : left + LATE_MS;
	return budget_ms < left ? budget_ms : left;
}

/* Leaving: the live line, the listener, the place among the waiters, and a lock an
 * unanswered attempt may have taken. */
static enum wait_rc finish(struct wait_run *w)
{
	if (w->drawn)
		status_clear();
	store_unsubscribe(w->s);
	store_unwatch(w->s);
	/* Every give-up of a request that waited, or rode out an outage (its attempts may
	 * have reached the server, or some Redlock nodes), leaves what they left: the
	 * writer mark, the queue places, the --preempt request (69 too: an outage that
	 * outlasted the -w deadline, the server back late or only some nodes back). A
	 * --supersede request that gives up at its -w deadline may have been replaced
	 * before it (a wake-up it did not see in time): superseded (80), not busy (75). */
	if ((w->waiting || w->outage) && w->rc != WAIT_ACQUIRED &&
	    leave(w->s, w->a,
	          w->rc == WAIT_SIGNAL ? GIVE_BACK_MS : by_deadline(w, w->a->io_timeout_ms),
	          w->rc == WAIT_BUSY ? w->h : NULL) == LOCK_SUPERSEDED &&
	    w->rc == WAIT_BUSY)
		w->rc = WAIT_SUPERSEDED;
	/* An attempt whose reply never came may have taken the lock: give it back behind
	 * that request, or it is held by nobody until its ttl ends. So too one whose script
	 * was refused a command after it may have written the grant (lock.h). */
	if (((w->rc == WAIT_ERR || w->rc == WAIT_BUSY) && w->lock_rc == LOCK_ERR &&
	     store_unanswered(w->s)) ||
	    (w->rc != WAIT_ACQUIRED && w->a->lock->script_failed))
		give_back(w->s, w->a, by_deadline(w, GIVE_BACK_MS));
	return w->rc;
}

int wait_acquire(struct store *s, const struct wait_args *a, int64_t *sent_ms, struct holder *h,
                 int *signo, char *err, size_t errlen)
{
	struct wait_run w = {.s = s,
	                     .a = a,
	                     .sent_ms = sent_ms,
	                     .h = h,
	                     .signo = signo,
	                     .err = err,
	                     .errlen = errlen,
	                     .seed = jitter_seed(),
	                     .start = clock_ms(),
	                     .backoff_ms = BACKOFF_FIRST_MS};
	enum wait_state st = ST_ATTEMPT;

	w.deadline = a->wait_ms < 0 ? INT64_MAX : w.start + a->wait_ms;
	progress_due = 0;
	memset(h, 0, sizeof *h);
	while (st != ST_DONE) {
		switch (st) {
		case ST_ATTEMPT:
			st = st_attempt(&w);
			break;
		case ST_OUTAGE:
			st = st_outage(&w);
			break;
		case ST_LISTEN:
			st = st_listen(&w);
			break;
		case ST_NAP:
			st = st_nap(&w);
			break;
		case ST_DONE:
			break;
		}
	}
	return finish(&w);
}

/* The pause between two connects (the last began at `tried`): a jittered step that
 * doubles up to OPEN_MAX_MS, never past the deadline, the last connect LAST_TRY_MS
 * before it; 0 when a terminating signal cut it short (left unread: the caller dies of
 * it). */
#define OPEN_MAX_MS 2000
static int open_pause(int sigfd, int64_t *step, uint32_t *seed, int64_t deadline, int64_t tried)
{
	int64_t until = pause_end(clock_ms() + jittered(*step, seed), deadline, tried);
	struct pollfd p = {.fd = sigfd, .events = POLLIN};

	*step = *step * 2 > OPEN_MAX_MS ? OPEN_MAX_MS : *step * 2;
	for (int64_t left; (left = until - clock_ms()) > 0;)
		if (poll(&p, 1, left > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS : (int)left) > 0)
			return 0;
	return 1;
}

int wait_open(struct store **out, const struct store_config *cfg, const char *name, int64_t wait_ms,
              int sigfd, char *err, size_t errlen)
{
	int64_t start = clock_ms(), step = BACKOFF_FIRST_MS;
	int64_t deadline = wait_ms < 0 ? INT64_MAX : start + wait_ms;
	uint32_t seed = jitter_seed();
	int rc, outage = 0;
	int64_t due = start + PROGRESS_FIRST_MS; /* the next "still waiting" line */
	int64_t tried = start;                   /* when the last connect began */

	/* -w: connecting (and the handshake) ends by the deadline too */
	while ((rc = store_open(out, cfg, 1, wait_ms > 0 ? deadline : STORE_NO_CAP, err, errlen)) ==
	       STORE_ERR) {
		if (wait_ms == 0 || !store_fault_passing() || clock_ms() >= deadline)
			break;
		if (!outage++)
			outage_started(name, err, deadline);
		if (clock_ms() >= due) { /* as a busy wait's progress line (not under -q) */
			log_warn("still waiting for '%s' after %llds: Redis unreachable, %d tries; "
			         "last: %s%s",
			         name, (long long)((clock_ms() - start) / 1000), outage, err,
			         deadline == INT64_MAX ? " (retrying; no --wait deadline)" : "");
			due = clock_ms() + PROGRESS_EVERY_MS;
		}
		if (!open_pause(sigfd, &step, &seed, deadline, tried))
			return STORE_ERR;
		if (clock_ms() >= deadline) /* no try without time: err keeps the last one's */
			break;
		tried = clock_ms();
	}
	if (rc == STORE_OK && outage)
		outage_ended(name, store_name(*out), start);
	if (rc == STORE_ERR && outage) {
		char why[400];
		log_reason(why, sizeof why, "%s", err);
		log_reason(err, errlen,
		           "lock '%s': Redis unavailable for the whole wait (gave up at the --wait "
		           "deadline after %.1f s): %s",
		           name, (double)(clock_ms() - start) / 1000, why);
	}
	return rc;
}

/* --wait-replicas: WAIT narrows the window in which a failover to a replica that never
 * saw the lock hands it to someone else. --wait-aof: WAITAOF makes sure a restart from
 * the AOF (of the master, of N replicas) still has the grant and its fence. */
int wait_ready(struct store *s, const struct wait_args *a, int64_t sent_ms, int replicas,
               int aof_local, int aof_replicas, int *signo, char *err, size_t errlen)
{
	int failed = (replicas > 0 && store_wait_replicas(s, replicas, err, errlen) < 0) ||
	             ((aof_local > 0 || aof_replicas > 0) &&
	              store_wait_aof(s, aof_local, aof_replicas, err, errlen) < 0);
	if (failed) {
		size_t used = strlen(err);
		snprintf(err + used, errlen - used, ": not running the command");
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
		         (long long)used, (long long)a->lock->ask.ttl_ms);
		return WAIT_ERR;
	}
	if (take_signal(a->sigfd, signo)) {
		give_back(s, a, GIVE_BACK_MS);
		return WAIT_SIGNAL;
	}
	return WAIT_ACQUIRED;
}
