/* SPDX-License-Identifier: MIT */
/* The front end's side of the seam: the options (cli.h) become what the store is asked
 * (store.h), once, before anything connects. Nothing below the front end reads struct
 * opts. */
#ifndef RLOCK_FRONTEND_H
#define RLOCK_FRONTEND_H

#include "check.h"
#include "cli.h"
#include "report.h"
#include "store.h"

/* Fill *a from the options (no I/O); store_configure(a) then builds the store's
 * configuration. a points into o, which must outlive the run. */
void store_ask_from_opts(struct store_ask *a, const struct opts *o);

/* What --check needs of the options (check.h). */
void check_ask_from_opts(struct check_ask *a, const struct opts *o);

/* The lock request of every lock of the run (lock.h), once: mode, N, ttl, fair,
 * once-per, deploy queues, history, lock-delay. a points into o (its prefix). */
void lock_ask_from_opts(struct lock_ask *a, const struct opts *o);
/* -s / -l N / neither, as the lock's mode. */
enum lock_mode lock_mode_of(int kind);

/* What --status, --break, --reset, --list, --held and --history need (report.h). */
void report_ask_from_opts(struct report_ask *a, const struct opts *o);

#endif
