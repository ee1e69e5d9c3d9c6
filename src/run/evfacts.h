/* SPDX-License-Identifier: MIT */
/* The vocabulary of what a run did, shared by the events file (events.h, which the
 * rooms call) and the metrics file (metrics.h, which events.c feeds): the kinds, the
 * facts a caller knows, and the front end's configuration. Types only. */
#ifndef RLOCK_EVFACTS_H
#define RLOCK_EVFACTS_H

#include <stdint.h>

#include "lock.h"

enum ev_kind {
	EV_WAITING,         /* the lock is busy: waiting for it */
	EV_ACQUIRED,        /* wait_ms, fence */
	EV_BUSY,            /* not acquired: busy with -n, --wait expired, --once-per done */
	EV_UNAVAILABLE,     /* not acquired: Redis unavailable (status: the exit status) */
	EV_RENEWED,         /* a renewal confirmed: counted for the metrics, no line */
	EV_RENEW_FAILED,    /* a renewal failed (reason); repeat: a retry, counted, no line */
	EV_WARNED,          /* --warn's signal went to the command's group */
	EV_LOST,            /* the lease can no longer be guaranteed (reason) */
	EV_RELEASED,        /* the run ended: status (the exit status); the hold time added */
	EV_KEEPER_STARTED,  /* --acquire: the keeper holds the lock, the caller has its token */
	EV_KEEPER_LOST,     /* the keeper's lock was lost (reason); it exits 79 */
	EV_KEEPER_STOPPED,  /* told by --release to stop (that run releases) */
	EV_KEEPER_RELEASED, /* the keeper, or --release, released (status: its exit status) */
	EV_SUPERSEDED,      /* not acquired: a newer --supersede request took its place (status,
	                     * reason: who) */
	EV_PREEMPTED,       /* --preemptible: a --preempt request stopped the command and the
	                     * release handed the lock to it (reason: who); released follows */
	EV_FAILED,          /* not acquired, or --release did not release, for another reason:
	                     * a usage error found at the server, rlock killed by a signal
	                     * before it held the lock (status: the exit status, reason) */
};

/* What the caller knows; the fields a kind does not use are ignored. */
struct ev_facts {
	const struct lock *lock; /* the lock (NULL: the run's first, else its first name) */
	int64_t wait_ms;         /* acquired, busy: since the lock was asked for */
	int status;              /* unavailable, released, keeper-released, superseded, failed:
	                          * the exit status */
	const char *reason; /* renew-failed, lost, keeper-lost, unavailable, superseded, failed */
	int repeat;         /* renew-failed: a retry of the same outage */
	int given_back;     /* keeper-released: before the keeper started (nobody learnt the
	                     * token, no step ran under it): the metrics count it as failed */
	int elsewhere;      /* --release's lines: the run is a keeper's, held by another
	                     * process (the metrics keep its wait and hold; a --release
	                     * killed before its release leaves them all: the keeper holds on) */
};

/* What the front end gives, once, before any thread or the keeper's fork. Strings are
 * kept (not copied): they must live as long as the process. */
struct events_config {
	const char *events_path;  /* --events: NULL none, "-" stderr */
	const char *metrics_path; /* --metrics-file: NULL none */
	const char *prefix;
	const char *const *names; /* the run's lock names (metrics: one series each) */
	int nnames;
	const char *label; /* --label, or NULL */
	int conflict_exit; /* -E: the exit status of a busy run */
};

#endif
