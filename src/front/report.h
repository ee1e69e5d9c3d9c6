/* SPDX-License-Identifier: MIT */
/* Operator commands: --status, --break, --list, in text for humans or one JSON object.
 * Each returns rlock's exit status, and closes s. */
#ifndef RLOCK_REPORT_H
#define RLOCK_REPORT_H

#include <stdio.h>

#include "store.h"

/* What the operator commands need of the options, built once by the front end
 * (frontend.c: report_ask_from_opts). */
struct report_ask {
	const char *prefix, *name; /* -k NAME under the key prefix */
	int64_t ttl_ms;
	int history_len, history_count; /* --history-len (0: off), --history N */
	int64_t history_ms;             /* --history-keep */
	const char *token;              /* --token (--release, --break, --held) */
	const char *if_fence;           /* --break --if-fence N, or NULL */
	const char *label;              /* --label: the breaker's */
	int json;
	int conflict_exit; /* -E: --status's exit when held */
	int64_t io_timeout_ms;
	int64_t wait_ms;       /* -w: what is left of it (-1: forever; 0: -n) */
	int64_t wait_given_ms; /* -w as given: the lines name it */
	int sentinels;         /* a Sentinel URL: how many sentinels; else 0 */
	const char *master;    /* a Sentinel URL: the master's name */
};

int report_status(struct store *s, const struct report_ask *o);
int report_break(struct store *s, const struct report_ask *o);
/* --reset: clear NAME's lock-delay and --once-per mark (never a holder); 0, or 69. */
int report_reset(struct store *s, const struct report_ask *o);
int report_list(struct store *s, const struct report_ask *o);
/* --history [--json]: the newest o->history_count entries of NAME's history, newest
 * first; {"schema":1,"name","key","entries":[{"at_ms","event","fence","token","host",
 * "pid","user","label","status","by":{"host","pid","user","label"}|null}]}. */
int report_history(struct store *s, const struct report_ask *o);

/* --held, before any connection: the locks to ask about and their tokens, into a
 * static plan. -k NAME: PREFIX{NAME} with --token, else the token the environment pairs
 * with that key (RLOCK_KEY/RLOCK_TOKEN, RLOCK_KEYS/RLOCK_TOKENS); no -k: every lock the
 * environment names. Exits 64 with one line when there is none or a token is not one
 * of rlock's. */
void held_plan(const struct report_ask *o);

/* --held: one read per lock (store_is_holder), no change. 0 when the token holds every
 * lock of the plan, 79 when one is not held (its key on stderr unless -q), else 69 (the
 * store cannot say). --json: {"schema":1,"key":…,"held":…,"ttl_left_ms":…,"fence":…} for
 * one lock; for several, "held" true only when every one is, "ttl_left_ms" the least,
 * "fence" null and "locks" the per-lock objects. Closes s. s NULL (Redis unreachable,
 * said already): the locks whose keeper on this host recorded its end are answered (79);
 * with none, 69 and nothing printed. */
int report_held(struct store *s, const struct report_ask *o);

#endif
