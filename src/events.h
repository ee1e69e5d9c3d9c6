/* SPDX-License-Identifier: MIT */
/* What a run did, for the operator: --events FILE (one JSON object per line, each
 * appended with one write(2): waiting, acquired, busy, unavailable, renew-failed,
 * warned, lost, released, keeper-*) and --metrics-file (metrics.h, fed from here).
 * The rooms where these things happen call events_emit() with what they know; the
 * rest (the time, the host, the pid, the token's prefix, the label, the hold time)
 * is added here. A file that cannot be written never stops the job: one warning on
 * stderr, once. The line format is a stable interface (README, "Events and metrics"). */
#ifndef RLOCK_EVENTS_H
#define RLOCK_EVENTS_H

#include <stddef.h>
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
	EV_KEEPER_RELEASED, /* the keeper released (status: its exit status) */
};

/* What the caller knows; the fields a kind does not use are ignored. */
struct ev_facts {
	const struct lock *lock; /* the lock (NULL: the run's first, else its first name) */
	int64_t wait_ms;         /* acquired, busy: since the lock was asked for */
	int status;              /* unavailable, released, keeper-released: exit status */
	const char *reason;      /* renew-failed, lost, keeper-lost, unavailable */
	int repeat;              /* renew-failed: a retry of the same outage */
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

/* Set up (relative paths are made absolute here: a keeper changes to "/"); opens
 * nothing until the first event. Not thread-safe: call before any thread starts.
 * Returns 0, or -1 with the reason in err (a usage error). */
int events_setup(const struct events_config *c, char *err, size_t errlen);

/* The absolute form of path into dst (size n), "-" kept: a keeper changes to "/"
 * before it writes. 0, or -1 (no working directory, too long). */
int events_absolute(char *dst, size_t n, const char *path);

/* Record one event: a line in the events file, and what the metrics file keeps.
 * Thread-safe (the renewal threads emit EV_RENEWED and EV_RENEW_FAILED; every other
 * kind comes from the main thread). Never fails, never blocks on a lock of its own. */
void events_emit(enum ev_kind kind, const struct ev_facts *f);

#endif
