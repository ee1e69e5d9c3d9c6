/* SPDX-License-Identifier: MIT */
/* --metrics-file PATH: the Prometheus text format, for node_exporter's textfile
 * collector, written when the lock is acquired and when the run ends: per lock name,
 * the last run's wait and hold seconds, exit status and outcome (ran, busy, lost,
 * unavailable), when the last run ended and when the last success did, and the
 * renewals and failed renewals counted over all runs.
 *
 * One file serves many jobs and names: each write takes an flock on PATH.lock (a
 * sidecar in the same directory), reads PATH back, replaces only its own series (a
 * counter adds to what it finds, the last success stays until a newer one), writes a
 * temporary file in the same directory and renames it over PATH: a reader sees the
 * old file or the new one, never a part. Fed by events.h. */
#ifndef RLOCK_METRICS_H
#define RLOCK_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "evfacts.h"

/* Keep what events_setup was given; abs_path: c->metrics_path made absolute (NULL: it
 * could not be). 0, or -1 with err. */
int metrics_setup(const struct events_config *c, const char *abs_path, char *err, size_t errlen);

/* A renewal confirmed (ok) or failed. Lock-free: for the renewal threads. */
void metrics_count_renewal(int ok);

/* The main thread's events (hold_ms: since the first lock was acquired; lost: the
 * run saw a loss): the file is written at the first lock's EV_ACQUIRED and at the
 * event that ends the run (busy, unavailable, released, keeper-*), once. A file that
 * cannot be written: one warning, the job goes on. */
void metrics_note(enum ev_kind kind, const struct ev_facts *f, int64_t hold_ms, int lost);

#endif
