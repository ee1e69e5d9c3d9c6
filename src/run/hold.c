/* SPDX-License-Identifier: MIT */
#include "hold.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "events.h"
#include "holder.h"
#include "log.h"
#include "parse.h"
#include "renew.h"

/* The lease of lock i is over by rlock's clock: nothing is released (lease.h), but the
 * history, when on, records the run lost (once: the script skips a run that ended
 * already). Best effort, on s or a fresh handle, within one io-timeout. */
static void record_lost(const struct hold *h, const struct lock *l, struct store *s)
{
	struct store *fresh = NULL;
	char err[300];

	if (l->ask.history_len <= 0)
		return;
	if (!s && h->cfg &&
	    store_open(&fresh, h->cfg, 0, clock_ms() + store_io_timeout(h->cfg), err, sizeof err) ==
	        STORE_OK)
		s = fresh;
	if (s && store_release(s, l, LOCK_KEEP_LOST, STORE_NO_CAP, err, sizeof err) == LOCK_ERR)
		log_debug("cannot record the loss of %s in its history (%s)", l->key, err);
	store_close(fresh);
}

/* --preempt's hand-over: the release kept the free lock for the request that stopped
 * the command while its mark lived, but a requester killed hard lives on in its mark
 * for up to 5 s. Exit 81 says that request took the lock (README): watch the name on s
 * until the reservation ends (the request takes it within a round trip when it lives).
 * 1: taken (its grant says so for a few seconds: status.lua's reserved "taken"), 0: the
 * reservation ended untaken, -1: cannot tell (the status unread, or past the
 * reservation's lease and a margin). */
#define HANDOVER_WATCH_MS 8000 /* the reservation's 5 s, and a margin */
#define HANDOVER_POLL_MS  50
static int handover_taken(struct store *s, const struct lock *l, char *to, size_t n)
{
	struct holders *hs = malloc(sizeof *hs);
	int64_t end = clock_ms() + HANDOVER_WATCH_MS;
	char err[300];
	int taken = -1;

	while (s && hs && clock_ms() < end) {
		if (store_status(s, l, end, hs, err, sizeof err) != LOCK_OK) {
			log_debug("cannot tell whether the --preempt request took %s (%s)", l->key,
			          err);
			break;
		}
		if (hs->reserved.known || hs->reserved.taken) { /* who it is kept for, took it */
			struct holder who = {
			    .pid = hs->reserved.pid, .start_ms = -1, .ttl_ms = -1, .pttl_ms = -1};
			snprintf(who.host, sizeof who.host, "%s", hs->reserved.host);
			snprintf(who.label, sizeof who.label, "%s", hs->reserved.label);
			char text[300];
			snprintf(to, n, "preempted by %s",
			         holder_format(&who, HOLDER_LABEL | HOLDER_RAW, text, sizeof text));
		}
		if (hs->reserved.taken) { /* said by its grant for a few seconds (acquire.lua) */
			taken = 1;
			break;
		}
		if (!hs->reserved.known) { /* withdrawn or ended: taken by none, or another */
			taken = 0;
			break;
		}
		struct timespec ts = {0, HANDOVER_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	free(hs);
	return taken;
}

/* --wait-replicas, --wait-aof: what the release wrote (the lock gone, the --once-per
 * mark, the lock-delay's entry, the history's end record) is waited for as the grant
 * was, on the connection that wrote it (used): a failover to a replica that never saw
 * it, or a restart from an AOF that never had it, brings the lock back and loses the
 * mark (issue 41). hold.h. */
void release_unconfirmed_why(int aof, int replicas, const char *err, char *why, size_t len)
{
	if (!aof)
		snprintf(why, len,
		         "not confirmed by %d replica(s) (--wait-replicas): %s; a failover now can "
		         "bring the lock back until its TTL",
		         replicas, err);
	else
		snprintf(why, len,
		         "not confirmed in the AOF (%s); a crash or a failover now can bring the "
		         "lock back until its TTL",
		         err);
}

int release_unconfirmed(int replicas, int aof_local, int aof_replicas, struct store *used,
                        char *why, size_t len)
{
	char err[300] = "";
	int aof = aof_local > 0 || aof_replicas > 0;

	why[0] = '\0';
	if (replicas > 0 && (!used || store_wait_replicas(used, replicas, err, sizeof err) < 0)) {
		release_unconfirmed_why(0, replicas,
		                        used ? err : "the connection that wrote is gone", why, len);
		return 1;
	}
	if (aof && (!used || store_wait_aof(used, aof_local, aof_replicas, err, sizeof err) < 0)) {
		release_unconfirmed_why(
		    1, 0, used ? err : "--wait-aof: the connection that wrote is gone", why, len);
		return 2;
	}
	return 0;
}

/* The release's waits (its --wait-replicas WAIT, --wait-aof WAITAOF, a --preempt
 * hand-over's watch) come after the command: a terminating signal on h->abort_fd
 * (hold_release_interruptible) ends them at once, as an operator's Ctrl-C expects; the
 * release itself is never cut short (it is sent, the lock never left held). The signal
 * is read off the fd into h->interrupted, so that every later wait is skipped and the
 * caller dies of it. 1: interrupted (now or before). */
static int release_interrupted(struct hold *h)
{
	struct signalfd_siginfo si;

	if (!h->interrupted && h->abort_fd >= 0 &&
	    read(h->abort_fd, &si, sizeof si) == (ssize_t)sizeof si)
		h->interrupted = (int)si.ssi_signo;
	return h->interrupted != 0;
}

/* The store's waits in this thread end on h->abort_fd's signal (on) or not (off); not
 * touched for a hold that has none (a keeper's; a give-back before the command, whose
 * waits end on the acquire's own abort fd). */
static void release_waits_abortable(const struct hold *h, int on)
{
	if (h->abort_fd >= 0)
		store_set_abort_fd(on ? h->abort_fd : -1);
}

/* release_unconfirmed, its waits ended by a terminating signal (release_interrupted). */
static int release_unconfirmed_or_signal(struct hold *h, int aof_local, int aof_replicas,
                                         struct store *used, char *why, size_t len)
{
	int replicas = h->wait_replicas, aof = aof_local > 0 || aof_replicas > 0;
	int rc = 0;
	char sig[64];

	why[0] = '\0';
	if (!h->interrupted) {
		release_waits_abortable(h, 1);
		rc = release_unconfirmed(replicas, aof_local, aof_replicas, used, why, len);
		release_waits_abortable(h, 0);
	}
	if ((rc != 0 || h->interrupted) && (replicas > 0 || aof) && release_interrupted(h)) {
		snprintf(sig, sizeof sig, "interrupted by SIG%s", signal_name(h->interrupted));
		release_unconfirmed_why(rc == 2 || replicas <= 0, replicas, sig, why, len);
		rc = 1;
	}
	return rc;
}

/* Give back lock i: on its renewal thread's handle when it renewed, else on the main
 * one, else a fresh one. A thread that never touched the network (a hold shorter than
 * ttl/3) is not waited for: its wake-up stays off the release path, it ends with
 * rlock. The main handle then sat idle for longer than ttl/3, and a NAT or firewall
 * may have dropped it silently. */
static int release_one(struct hold *h, int i, int64_t keep_ms)
{
	const struct lock *l = &h->l[i];
	int64_t confirmed = h->sent[i];
	struct store *live = NULL;
	char err[300];

	if (h->rn[i] && !renew_quiet(h->rn[i]))
		live = renew_stop(h->rn[i], &confirmed);
	else
		renew_drop(h->rn[i]);
	h->rn[i] = NULL;
	/* the lease's end after the acquire was sent: a lock found gone at the release
	 * sooner than that after its acquired record, by the server's clock, was taken away,
	 * not expired (history.lua); its reply before the lease's end (exit 79) is that */
	h->l[i].lease_ms = confirmed + l->ask.ttl_ms - h->sent[i];
	/* no handle left (a keeper's: its main one closed, its renewal not yet run): the
	 * fresh one that writes the release is kept for its WAIT, as live would be */
	int rc = lease_release(live ? live : h->s, h->cfg, l, keep_ms, confirmed + l->ask.ttl_ms,
	                       STORE_NO_CAP, live || h->s ? NULL : &live, err, sizeof err);
	if (i == 0 && h->sent_fn) { /* the last one sent (released in reverse order) */
		void (*fn)(void *) = h->sent_fn;
		h->sent_fn = NULL;
		fn(h->sent_ctx);
	}
	int handed = rc == LOCK_HANDED_OVER; /* released, to the --preempt request */
	if (handed) {
		h->handed_over = 1;
		rc = LOCK_OK;
		keep_ms = 0; /* not kept for --min-hold: the request took it (release.lua) */
	}
	/* the command ended before a --preempt request stopped it: not kept either, the
	 * request took it; -v says so, not "--min-hold keeps it" */
	int handed_on = rc == LOCK_HANDED_ON;
	if (handed_on) {
		rc = LOCK_OK;
		keep_ms = 0;
	}
	/* sent again (its first reply lost): kept, and the keep is over already */
	int keep_over = rc == LOCK_KEEP_OVER;
	if (keep_over)
		rc = LOCK_OK;
	/* --wait-replicas covers what the release wrote (the lock gone, the --once-per
	 * mark, the lock-delay's entry, the history's end record) as it covers the
	 * acquire: a master demoted by a failover a moment ago still answers as one, and
	 * what only it has is lost (issue 41). Not confirmed is said, never "done". */
	char unconfirmed[300] = "";
	struct store *used = live ? live : h->s;
	int taken = -1;
	if (handed && !h->interrupted) { /* its watch ends too on a signal (-1: cannot tell) */
		release_waits_abortable(h, 1);
		taken = handover_taken(used, l, h->handed_to, sizeof h->handed_to);
		release_waits_abortable(h, 0);
	}
	if (handed && taken == 0) {
		h->handed_over = 0;
		h->handover_untaken = 1;
		/* the release left the run open for the request's grant to end it preempted:
		 * it ends released (best effort: else the next acquire finds it expired) */
		h->l[i].handover_untaken = 1;
		if (store_release(used, &h->l[i], 0, STORE_NO_CAP, err, sizeof err) == LOCK_ERR)
			log_debug("cannot record the release of %s in its history (%s)", l->key,
			          err);
	}
	/* --wait-aof: only a release that writes what a restart must keep (the --once-per
	 * mark, the --min-hold keep); else a lost release only keeps the lock until its
	 * TTL, as a crashed holder does, not worth the fsync's second (everysec) */
	int keeps = (l->mark_done && l->ask.once_per_ms > 0) || keep_ms > 0;
	if (rc == LOCK_OK)
		release_unconfirmed_or_signal(h, keeps ? h->wait_aof_local : 0,
		                              keeps ? h->wait_aof_replicas : 0, used, unconfirmed,
		                              sizeof unconfirmed);
	/* not sent, the lease over by rlock's clock: no failure (hold_release's HOLD_OVER) */
	h->over = rc == LOCK_ERR && !strcmp(err, LEASE_OVER);
	if (h->over)
		record_lost(h, l, live ? live : h->s);
	h->gone_why[0] = '\0';
	if (rc == LOCK_NOTOURS) /* who broke it, on the handle that found it gone */
		renew_broken_why(live ? live : h->s, h->cfg, l, STORE_NO_CAP, h->gone_why,
		                 sizeof h->gone_why);
	store_close(live);
	if (rc == LOCK_ERR && !strcmp(err, LEASE_OVER))
		log_debug("the lease of %s is over (lost): nothing to release", l->key);
	else if (rc == LOCK_ERR) /* a lost reply hides a release the server ran */
		log_warn("cannot release %s (%s); " HOLD_RELEASE_FAILED "%s", l->key, err,
		         l->mark_done && l->ask.once_per_ms > 0
		             ? " and is not marked done (--once-per): a later run runs again"
		             : "");
	else if (rc == LOCK_OK && unconfirmed[0])
		log_warn("released %s%s on the master, %s%s", l->key,
		         keep_ms > 0 ? " (--min-hold)" : "", unconfirmed,
		         l->mark_done && l->ask.once_per_ms > 0
		             ? ", and lose the mark: not confirmed done (--once-per), a later run "
		               "may run again"
		             : "");
	else if (rc == LOCK_OK && keep_over)
		log_info("released %s; its --min-hold keep is over already", l->key);
	else if (rc == LOCK_OK && keep_ms > 0)
		log_info("released %s; --min-hold keeps it %.1f s more", l->key,
		         (double)keep_ms / 1000);
	else if (rc == LOCK_OK)
		log_info("released %s%s", l->key,
		         handed      ? " to the --preempt request"
		         : handed_on ? " to a waiting --preempt request (not kept for --min-hold)"
		                     : "");
	if (rc == LOCK_OK && !unconfirmed[0] && l->mark_done && l->ask.once_per_ms > 0)
		log_info("marked %s done for %.1f s (--once-per)", l->key,
		         (double)l->ask.once_per_ms / 1000);
	return rc;
}

/* A lock taken that no command ran under is given back as wait.c's give_back does one
 * name's: with no --wait-replicas or --wait-aof of its own (the lock back after a
 * failover or a restart only delays the next holder until its TTL, and no mark was
 * written), so no second line beside the failure's, and no more --io-timeout. */
static void unconfirmed_give_back(struct hold *h)
{
	h->wait_replicas = h->wait_aof_local = h->wait_aof_replicas = 0;
}

/* Give back every lock taken so far (the main handle stays open): none is held. */
static void give_back_taken(struct hold *h)
{
	int replicas = h->wait_replicas, local = h->wait_aof_local, aof = h->wait_aof_replicas;

	unconfirmed_give_back(h);
	for (int i = h->n - 1; i >= 0; i--)
		release_one(h, i, 0);
	h->wait_replicas = replicas, h->wait_aof_local = local, h->wait_aof_replicas = aof;
	if (h->epfd >= 0)
		close(h->epfd);
	h->epfd = -1;
	h->n = 0;
}

static void close_all(struct hold *h)
{
	store_close(h->s);
	h->s = NULL;
	if (h->epfd >= 0)
		close(h->epfd);
	h->epfd = -1;
	h->n = 0;
}

void hold_mark_done(struct hold *h)
{
	for (int i = 0; i < h->n; i++)
		h->l[i].mark_done = 1;
}

void hold_set_status(struct hold *h, int status)
{
	for (int i = 0; i < h->n; i++)
		h->l[i].run_status = status;
}

static void set_lost(struct hold *h, int i, int declared, int heard)
{
	h->l[i].lost_seen = 1;
	h->l[i].lost_declared = declared;
	h->l[i].taken_seen |= heard;
}

int hold_set_lost(struct hold *h, int declared)
{
	int64_t now = clock_ms();
	int n = 0;

	for (int i = 0; i < h->n; i++) {
		struct pollfd p = {.fd = renew_fd(h->rn[i]), .events = POLLIN};
		/* heard: the renewal found the token no longer holding (renew.h), before
		 * the lease's end by rlock's clock (it renews no later): taken away */
		int heard = poll(&p, 1, 0) == 1;
		if (heard || now >= renew_confirmed_sent(h->rn[i]) + h->loss_after_ms) {
			set_lost(h, i, declared, heard);
			n++;
		}
	}
	return n;
}

void hold_set_all_lost(struct hold *h, int declared)
{
	for (int i = 0; i < h->n; i++)
		set_lost(h, i, declared, 0);
}

void hold_set_preempted(struct hold *h)
{
	for (int i = 0; i < h->n; i++)
		h->l[i].preempted_declared = 1;
}

int hold_preempted(const struct hold *h, char *who, size_t n)
{
	for (int i = 0; i < h->n; i++) {
		if (h->rn[i] && renew_preempted(h->rn[i])) {
			renew_reason(h->rn[i], 0, who, n);
			return 1;
		}
	}
	return 0;
}

void hold_release_interruptible(struct hold *h, int fd)
{
	h->abort_fd = fd;
}

int hold_interrupted(const struct hold *h)
{
	return h->interrupted;
}

void hold_on_sent(struct hold *h, void (*fn)(void *ctx), void *ctx)
{
	h->sent_fn = fn;
	h->sent_ctx = ctx;
}

int hold_release(struct hold *h, int64_t keep_ms)
{
	int rc = HOLD_OK;

	h->handed_over = 0;
	h->handover_untaken = 0;
	h->handed_to[0] = '\0';
	h->gone = NULL;
	char gone_why[sizeof h->gone_why] = "";
	for (int i = h->n - 1; i >= 0; i--) {
		int r = release_one(h, i, keep_ms);
		if (r == LOCK_NOTOURS && !h->gone) { /* kept: the next lock's release clears it */
			h->gone = &h->l[i];
			memcpy(gone_why, h->gone_why, sizeof gone_why);
		}
		/* A single lock's loss is the caller's to say; one of several is named. */
		if (r == LOCK_NOTOURS && h->n > 1)
			log_error("lock lost: %s was no longer held at the release: %s",
			          h->l[i].key, h->gone_why[0] ? h->gone_why : HOLD_TAKEN_AWAY);
		if (r == LOCK_NOTOURS)
			rc = HOLD_LOST;
		else if (r != LOCK_OK && rc != HOLD_LOST && rc != HOLD_ERR)
			rc = h->over ? HOLD_OVER : HOLD_ERR;
	}
	memcpy(h->gone_why, gone_why, sizeof gone_why);
	close_all(h);
	return rc;
}

void hold_abandon(struct hold *h)
{
	for (int i = h->n - 1; i >= 0; i--) {
		int64_t confirmed;
		store_close(renew_stop(h->rn[i], &confirmed));
		h->rn[i] = NULL;
	}
	close_all(h);
}

void hold_abandon_lost(struct hold *h)
{
	hold_set_all_lost(h, 1);
	for (int i = h->n - 1; i >= 0; i--) {
		int64_t confirmed;
		struct store *s = renew_stop(h->rn[i], &confirmed);
		h->rn[i] = NULL;
		record_lost(h, &h->l[i], s);
		store_close(s);
	}
	close_all(h);
}

void hold_drop_main(struct hold *h)
{
	store_close(h->s);
	h->s = NULL;
}

/* The earliest of of(r) over the hold's renewals (INT64_MAX: none). */
static int64_t earliest(const struct hold *h, int64_t (*of)(const struct renew *))
{
	int64_t first = INT64_MAX;

	for (int i = 0; i < h->n; i++) {
		int64_t t = of(h->rn[i]);
		if (t < first)
			first = t;
	}
	return first;
}

int64_t hold_confirmed_sent(const struct hold *h)
{
	return earliest(h, renew_confirmed_sent);
}

int64_t hold_lost_at(const struct hold *h)
{
	return hold_confirmed_sent(h) + h->loss_after_ms;
}

int64_t hold_warn_at(const struct hold *h)
{
	return hold_confirmed_sent(h) + h->warn_after_ms;
}

const char *hold_late_key(const struct hold *h)
{
	int first = 0;

	if (h->n < 2)
		return NULL;
	for (int i = 1; i < h->n; i++)
		if (renew_confirmed_sent(h->rn[i]) < renew_confirmed_sent(h->rn[first]))
			first = i;
	return h->l[first].key;
}

int64_t hold_kill_at(const struct hold *h)
{
	return hold_confirmed_sent(h) + h->kill_by_ms;
}

int hold_lost_fd(const struct hold *h)
{
	return h->n == 1 ? renew_fd(h->rn[0]) : h->epfd;
}

const struct lock *hold_lost_reason(const struct hold *h, int timed_out, char *buf, size_t n)
{
	int64_t now = clock_ms();

	/* The others first: the first lock's reason is the one left. */
	for (int i = 1; i < h->n; i++) {
		struct pollfd p = {.fd = renew_fd(h->rn[i]), .events = POLLIN};
		if ((timed_out && now >= renew_confirmed_sent(h->rn[i]) + h->loss_after_ms) ||
		    (!timed_out && poll(&p, 1, 0) == 1)) {
			char why[300];
			renew_reason(h->rn[i], timed_out, why, sizeof why);
			log_reason(buf, n, "%s: %s", h->l[i].key, why);
			return &h->l[i];
		}
	}
	if (h->n == 1) {
		renew_reason(h->rn[0], timed_out, buf, n);
		return &h->l[0];
	}
	/* Several locks: say which, the first as the others. */
	char why[300];
	renew_reason(h->rn[0], timed_out, why, sizeof why);
	log_reason(buf, n, "%s: %s", h->l[0].key, why);
	return &h->l[0];
}

int64_t hold_renew_due(const struct hold *h)
{
	return earliest(h, renew_due);
}

int hold_renew_launch(struct hold *h)
{
	char err[300];
	int rc = 0;

	for (int i = 0; i < h->n; i++) {
		if (renew_launch(h->rn[i], err, sizeof err) == 0)
			continue;
		log_error("%s: %s: trying again (the lease runs out if it never starts)",
		          h->l[i].key, err);
		rc = -1;
	}
	return rc;
}

int hold_watch(struct hold *h, int sigfd, int64_t stop_at, int *signo, char *err, size_t errlen)
{
	*signo = 0;
	for (;;) {
		hold_renew_launch(h); /* a failure shows as the loss, in time */
		int64_t now = clock_ms(), lost_at = hold_lost_at(h);
		if (now >= lost_at) {
			hold_lost_reason(h, 1, err, errlen);
			return 0;
		}
		if (stop_at >= 0 && now >= stop_at)
			return 1;
		int64_t until = stop_at >= 0 && stop_at < lost_at ? stop_at : lost_at;
		int64_t due = hold_renew_due(h); /* a launch to try again */
		int64_t t = (due < until ? (due > now ? due : now) : until) - now;
		struct pollfd p[2] = {{.fd = sigfd, .events = POLLIN},
		                      {.fd = hold_lost_fd(h), .events = POLLIN}};
		if (poll(p, 2, t > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS : (int)t) <= 0)
			continue;
		if (p[1].revents & POLLIN) {
			hold_lost_reason(h, 0, err, errlen);
			return 0;
		}
		struct signalfd_siginfo si;
		if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si && si.ssi_signo != SIGCHLD) {
			*signo = (int)si.ssi_signo;
			return 0;
		}
	}
}

/* A lock of several that could not be taken (Redis unavailable, a WAIT or WAITAOF
 * short): its line names it, as a busy one's does, since with several -k the reason
 * alone does not say which; an outage's give-up names it already (wait.c). One lock:
 * the reason as it is. */
static int name_failure(int rc, int several, const char *name, char *err, size_t errlen)
{
	char named[300];

	snprintf(named, sizeof named, "lock '%s': ", name);
	if (rc == WAIT_ERR && several && strncmp(err, named, strlen(named)) != 0) {
		char why[512];
		log_reason(why, sizeof why, "%s", err);
		log_reason(err, errlen, "%s%s", named, why);
	}
	return rc;
}

/* Take lock i (name, within what is left of the wait counted from asked_ms), check it
 * and start its renewal. */
static int take_one(struct hold *h, const struct hold_spec *sp, const struct lock_meta *meta,
                    int termfd, int64_t asked_ms, struct holder *who, int *signo, char *err,
                    size_t errlen)
{
	struct lock *l = &h->l[h->n];
	const char *name = sp->names[h->n];
	int64_t left = sp->wait_ms, sent;

	h->failed = name;
	if (lock_init_ask(l, sp->ask, name) < 0) {
		snprintf(err, errlen, "no randomness for the lock token: %s", strerror(errno));
		return WAIT_OSERR;
	}
	/* the wait counts from asked_ms: for the first name too when taken again */
	if (sp->wait_ms >= 0) {
		left = asked_ms + sp->wait_ms - clock_ms();
		left = left < 0 ? 0 : left;
	}
	/* The locks taken so far are renewed while this one is waited for. */
	if (h->n > 0 && hold_renew_launch(h) < 0) {
		snprintf(err, errlen, "cannot start the renewal thread of %s", h->l[0].key);
		return WAIT_OSERR;
	}
	struct wait_args wa = {
	    l, meta, name, left, sp->io_timeout_ms, termfd, sp->status_line, .served = h->n > 0};
	int rc = wait_acquire(h->s, &wa, &sent, who, signo, err, errlen);
	if (rc == WAIT_BUSY || rc == WAIT_DONE)
		events_emit(EV_BUSY,
		            &(struct ev_facts){.lock = l, .wait_ms = clock_ms() - asked_ms});
	if (rc != WAIT_ACQUIRED)
		return name_failure(rc, sp->nnames > 1, name, err, errlen);
	/* A lock is held from here: a full stderr (a pipe nobody reads; --events -) must
	 * hold up neither the lease's renewals nor the start of the command, nor keep a
	 * signal from being seen; lines wait (log_defer), as while the command runs. */
	log_defer(1);
	/* As flock -v: how long getting the lock took. */
	if (h->n == 0)
		log_info("got the lock %s after %.1f s (fence %lld, ttl %lld ms)", l->key,
		         (double)(clock_ms() - asked_ms) / 1000, l->fence,
		         (long long)l->ask.ttl_ms);
	else
		log_info("got the lock %s too (fence %lld)", l->key, l->fence);
	rc = wait_ready(h->s, &wa, sent, sp->wait_replicas, sp->wait_aof_local,
	                sp->wait_aof_replicas, signo, err, errlen);
	if (rc != WAIT_ACQUIRED)
		return name_failure(rc, sp->nnames > 1, name, err, errlen);
	/* -v looks at the eviction policy at once; otherwise at the first renewal, so a
	 * short command costs no second connection and no INFO. The first lock's server,
	 * or each lock's where they may differ (a Cluster's masters). */
	h->sent[h->n] = sent;
	events_emit(EV_ACQUIRED, &(struct ev_facts){.lock = l, .wait_ms = clock_ms() - asked_ms});
	int check = h->n == 0 || store_locks_spread(h->cfg);
	if (renew_start(&h->rn[h->n], h->cfg, l, sent, check ? sp->warn_key : NULL,
	                check && sp->check_now, err, errlen) < 0) {
		h->rn[h->n] = NULL;
		h->n++; /* given back with the others */
		return WAIT_OSERR;
	}
	h->n++;
	return WAIT_ACQUIRED;
}

/* Several locks: one fd readable when any renewal reports a loss. */
static int watch_all(struct hold *h)
{
	if (h->n == 1)
		return 0;
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (h->epfd < 0)
		return -1;
	for (int i = 0; i < h->n; i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, renew_fd(h->rn[i]), &ev) < 0)
			return -1;
	}
	return 0;
}

int hold_acquire(struct hold *h, struct store *s, const struct store_config *cfg,
                 const struct hold_spec *sp, const struct lock_meta *meta, int termfd,
                 struct holder *who, int *signo, char *err, size_t errlen)
{
	int64_t asked = clock_ms();
	int rc = WAIT_ACQUIRED;

	/* Not a memset: h is large (HOLD_LOCKS_MAX locks) and only h->n entries are used. */
	h->cfg = cfg;
	h->s = s;
	h->n = 0;
	h->epfd = -1;
	h->abort_fd = -1;
	h->interrupted = 0;
	h->sent_fn = NULL;
	h->failed = sp->names[0];
	h->wait_replicas = sp->wait_replicas;
	h->wait_aof_local = sp->wait_aof_local;
	h->wait_aof_replicas = sp->wait_aof_replicas;
	h->loss_after_ms = lease_loss_after(sp->ask->ttl_ms);
	h->kill_by_ms = lease_kill_by(sp->ask->ttl_ms);
	h->warn_after_ms = lease_warn_after(sp->ask->ttl_ms);
	for (;;) {
		while (rc == WAIT_ACQUIRED && h->n < sp->nnames)
			rc = take_one(h, sp, meta, termfd, asked, who, signo, err, errlen);
		if (rc == WAIT_ACQUIRED && watch_all(h) < 0) {
			/* No way to hear of a loss: the command would run unwatched. */
			snprintf(err, errlen, "cannot watch the locks for a loss: %s",
			         strerror(errno));
			rc = WAIT_OSERR;
		}
		struct pollfd lp = {.fd = rc == WAIT_ACQUIRED ? hold_lost_fd(h) : -1,
		                    .events = POLLIN};
		if (rc != WAIT_ACQUIRED || (poll(&lp, 1, 0) == 0 && clock_ms() < hold_lost_at(h)))
			break;
		/* A lock taken first was lost (broken, expired, taken over) while the others
		 * were waited for: nothing ran under it. All are given back and taken again,
		 * in the same order, within what is left of the wait; once it is over (-n),
		 * not acquired (75), as a busy name is. */
		char why[300];
		hold_lost_reason(h, clock_ms() >= hold_lost_at(h), why, sizeof why);
		int again = sp->wait_ms < 0 || clock_ms() < asked + sp->wait_ms;
		log_warn("a lock was lost while waiting for the others (%s); %s", why,
		         again ? "giving them back and taking them all again" : "not acquired");
		give_back_taken(h);
		if (!again) {
			h->failed = sp->names[0];
			memset(who, 0, sizeof *who);
			rc = WAIT_BUSY;
			events_emit(EV_BUSY, &(struct ev_facts){.lock = &h->l[0],
			                                        .wait_ms = clock_ms() - asked});
			break;
		}
	}
	if (rc != WAIT_ACQUIRED) {
		unconfirmed_give_back(h);
		if (sp->not_taken)
			sp->not_taken(h->s, rc, sp->io_timeout_ms);
		hold_release(h, 0);
	}
	return rc;
}
