/* SPDX-License-Identifier: MIT */
/* A hold: the set of leases rlock keeps while the command runs (or the keeper waits),
 * one lock being the N = 1 case. It acquires them in the order given (cli.c sorts the
 * names, so `-k A -k B` and `-k B -k A` cannot deadlock: nobody holds a later name while
 * waiting for an earlier one), renews each on its own thread (started when its first
 * renewal is due, or when the hold waits for its next name), and watches them as one
 * lease: the oldest confirmed send time of them all, and the loss of any one is the loss
 * of the set (79). The lease rule it applies is lease.h's. */
#ifndef RLOCK_HOLD_H
#define RLOCK_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include "lease.h"
#include "lock.h"
#include "store.h"
#include "wait.h"

#define HOLD_LOCKS_MAX 16 /* -k given several times (cli.h's OPTS_NAMES_MAX) */

/* What a hold needs of the options (the front end builds it). */
struct hold_spec {
	const struct lock_ask *ask; /* every lock's request (lock.h), the front end's */
	const char *const *names;   /* sorted */
	int nnames;
	int64_t wait_ms, io_timeout_ms; /* wait_ms: -1 forever, 0 no wait (ask->nowait) */
	int wait_replicas;
	int wait_aof_local, wait_aof_replicas; /* --wait-aof (both 0: none) */
	int status_line;                       /* draw wait.h's live line */
	const char *warn_key; /* the first lock's eviction warning (renew.h); NULL: none */
	int check_now;        /* look at the eviction policy at once (-v) */
	/* not taken (rc, a wait_rc): called with the main handle, before it is closed
	 * (--acquire: keeper_report_failure); NULL: none */
	void (*not_taken)(struct store *s, int rc, int64_t io_ms);
};

struct renew;

struct hold {
	const struct store_config *cfg;
	struct store *s; /* the main handle: acquires, and releases when no renewal ran */
	int n;           /* locks held */
	struct renew *rn[HOLD_LOCKS_MAX];
	int64_t sent[HOLD_LOCKS_MAX];
	int64_t loss_after_ms, kill_by_ms, warn_after_ms;
	int epfd;           /* several locks: readable when any renewal reports a loss */
	const char *failed; /* the name that was busy or failed (hold_acquire) */
	int wait_replicas;  /* --wait-replicas: the release and its mark are WAITed for too */
	int wait_aof_local, wait_aof_replicas; /* --wait-aof: the release WAITAOFed too */
	char gone_why[300]; /* hold_release's HOLD_LOST: who broke the first lock, "" unknown */
	int over;           /* release_one: its lease had ended before the release (HOLD_OVER) */
	const struct lock *gone; /* and that lock (the events line's), or NULL */
	/* hold_release: the release handed the lock to the --preempt request that stopped
	 * the command (hold_set_preempted; its mark still lived: the request is alive) */
	int handed_over;
	/* hold_release: handed over, but the request never took it (a requester killed
	 * hard whose mark still lived): its reservation ended, the fence unmoved */
	int handover_untaken;
	/* hold_release, handed over: "preempted by HOST pid N [LABEL]", the request it went
	 * to (another may have asked since the renewal that stopped the command), or "" */
	char handed_to[300];
	/* hold_release_interruptible: the signalfd that ends the release's waits (-1: none),
	 * and the signal that did (0: none) */
	int abort_fd, interrupted;
	/* hold_on_sent: called once the last release is sent, before its waits (NULL: none) */
	void (*sent_fn)(void *ctx);
	void *sent_ctx;
	/* last: a run writes the fields above and its locks, each page a page fault */
	struct lock l[HOLD_LOCKS_MAX];
};

/* Acquire every name of sp on s (h owns s from here on), waiting as sp says (within
 * sp->wait_ms counted from the start), each checked by wait_ready() and renewed from
 * the moment it is taken; then make sure no loss came meanwhile (one did: all given back
 * and taken again within the wait, WAIT_BUSY once it is over). WAIT_ACQUIRED, or
 * (everything taken given back, s closed) WAIT_BUSY (*who: the holder of h->failed),
 * WAIT_DONE (--once-per: h->failed was done inside its window, who->pttl_ms its rest),
 * WAIT_SIGNAL (*signo), WAIT_MISMATCH, WAIT_DENIED, WAIT_ERR or WAIT_OSERR with err,
 * as from wait_acquire(). h is large: not on a small stack. */
int hold_acquire(struct hold *h, struct store *s, const struct store_config *cfg,
                 const struct hold_spec *sp, const struct lock_meta *meta, int termfd,
                 struct holder *who, int *signo, char *err, size_t errlen);

/* The oldest confirmed send time (monotonic ms) of the hold's leases, and the moments
 * it counts as lost and by which a command must be dead. Thread-safe. */
int64_t hold_confirmed_sent(const struct hold *h);
int64_t hold_lost_at(const struct hold *h);
int64_t hold_kill_at(const struct hold *h);
/* --warn: when a renewal is overdue by a third of the ttl (lease_warn_after). */
int64_t hold_warn_at(const struct hold *h);
/* Several locks: the key of the one whose last confirmed renewal is the oldest (the one
 * hold_warn_at and hold_lost_at count from); one lock: NULL. Thread-safe. */
const char *hold_late_key(const struct hold *h);

/* Readable once a renewal heard from the server that a lock is no longer ours. */
int hold_lost_fd(const struct hold *h);

/* Why the hold is lost, into buf (timed_out: by hold_lost_at, else by the lost fd); the
 * lock it names (with several, the one lost). */
const struct lock *hold_lost_reason(const struct hold *h, int timed_out, char *buf, size_t n);

/* The renewal threads start when their first renewal is due (renew.h), so that a short
 * command costs none: hold_renew_due() says when (INT64_MAX: none is waiting), and
 * hold_renew_launch() starts every one not yet running (a failure is logged once: -1;
 * hold_renew_due() then asks for another try, and the lease runs out, the hold lost, if
 * none succeeds in time). hold_acquire() starts the threads of the
 * locks taken before it waits for the next one. Main thread only. */
int64_t hold_renew_due(const struct hold *h);
int hold_renew_launch(struct hold *h);

/* No child: start the renewals, then wait until a signal on sigfd other than SIGCHLD
 * (*signo), a loss (0 with *signo 0, reason in err) or stop_at (monotonic ms, -1
 * none: 1). */
int hold_watch(struct hold *h, int sigfd, int64_t stop_at, int *signo, char *err, size_t errlen);

/* --once-per: the command succeeded, so hold_release marks every lock done for its
 * window (in the release script, only where the lock is still ours). */
void hold_mark_done(struct hold *h);

/* The command ended with status (the history's record of the release). */
void hold_set_status(struct hold *h, int status);

/* A lease was found lost while the command ran; declared (exit 79): the release
 * records the run lost. hold_set_lost marks the locks whose own lease is lost now (past
 * their renewal's deadline, or a renewal told of it) and returns how many: the others
 * were held to the end (the other names of several; a run stopped for an inherited
 * name's loss) and end released. hold_set_all_lost marks every lock. */
int hold_set_lost(struct hold *h, int declared);
void hold_set_all_lost(struct hold *h, int declared);

/* --preemptible: 1 when a --preempt request asked for a lock of h (its renewal said
 * so), with who asked in who; else 0. */
int hold_preempted(const struct hold *h, char *who, size_t n);

/* rlock stopped the command for that request: the release hands the lock to it and
 * records the run preempted while the request's mark lives (h->handed_over: exit 81);
 * else (it gave up or died first) the run ends released. */
void hold_set_preempted(struct hold *h);

/* The hold is lost and nothing is released (a keeper: its job may still run under
 * what is left of the lease, and its --release frees it): stop the renewals, record each
 * lock's run lost in the history (best effort, within one io-timeout each; the scripts
 * end a run once, so the run a token opened last, and only while it is open), close
 * every handle. */
void hold_abandon_lost(struct hold *h);

/* Close the main handle (a keeper: its renewal threads have their own). */
void hold_drop_main(struct hold *h);

enum { HOLD_OK = 0, HOLD_LOST = 1, HOLD_OVER = 2, HOLD_ERR = -1 };

/* From here on, a terminating signal readable on fd (a signalfd; -1: none) ends the
 * waits hold_release makes after a release was sent (--wait-replicas, --wait-aof, a
 * --preempt hand-over's watch) at once, never the release itself; the release's line
 * then says it was not confirmed, interrupted by that signal. The signal is read off fd
 * (not left pending): hold_interrupted() names it, the caller's to die of. */
void hold_release_interruptible(struct hold *h, int fd);
int hold_interrupted(const struct hold *h);

/* The next hold_release calls fn(ctx) once its last release is sent (answered, or
 * failed), before that release's waits (--wait-replicas, --wait-aof, a --preempt
 * hand-over's watch): nothing is left that a stop could keep from being sent before
 * the lease ends (a run: a Ctrl-Z stops rlock from then on, child_unlisten_stop). */
void hold_on_sent(struct hold *h, void (*fn)(void *ctx), void *ctx);

/* After a release on used (NULL: its connection is gone) with --wait-replicas N and
 * --wait-aof L,R (0: not asked): 0 and "" when what it wrote is confirmed, else 1 (the
 * replicas' WAIT) or 2 (the WAITAOF) and the rest of a warning line (whom it is not
 * confirmed by, why, what can follow: release_unconfirmed_why). */
void release_unconfirmed_why(int aof, int replicas, const char *err, char *why, size_t len);
int release_unconfirmed(int replicas, int aof_local, int aof_replicas, struct store *used,
                        char *why, size_t len);

/* What a release that failed leaves: its reply may have been lost after the server ran
 * it, so the lock may be free already; one text for every release line that says it
 * (hold.c, keeper.c). */
#define HOLD_RELEASE_FAILED                                                                        \
	"unless the server got the release (its reply lost), it expires by its TTL"
/* The reason a released line (--events) carries when hold_release said HOLD_ERR. */
/* A lock its release found gone (reply 0) before the lease's end by rlock's clock: the
 * server's expiry is no sooner, so it was taken away (the history's end: lost). */
#define HOLD_TAKEN_AWAY                                                                            \
	"taken away while it ran, before its lease could end (deleted, evicted or flushed on "     \
	"the server, or its clock jumped)"
#define HOLD_RELEASE_FAILED_REASON "the release failed: " HOLD_RELEASE_FAILED

/* Stop the renewals and give every lock back (in the reverse order, keep_ms: --min-hold)
 * on its renewal thread's handle when it renewed, else on the main one, else a fresh
 * one; never after its lease ended. Closes every handle. HOLD_OK, HOLD_LOST (a lock was
 * no longer ours; a single lock's loss is the caller's to say, with h->gone_why; each of
 * several is named here), HOLD_OVER (a lease had ended by rlock's clock before its release
 * could be sent, rlock stopped or starved: nothing sent, nothing failed) or HOLD_ERR (a
 * release failed: HOLD_RELEASE_FAILED; it outranks HOLD_OVER);
 * h->handed_over says whether a release handed its lock to a --preempt request. */
int hold_release(struct hold *h, int64_t keep_ms);

/* Stop the renewals and close every handle, releasing nothing. */
void hold_abandon(struct hold *h);

#endif
