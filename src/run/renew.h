/* SPDX-License-Identifier: MIT */
/* The renewal thread of one lease (a hold runs one per lock, hold.h): keeps the lease
 * alive with its own store handle and publishes, for the supervisor, when the last
 * renewal confirmed by the server was sent.
 *
 * The lease granted by a request sent at time s cannot end on the server before
 * s + ttl. The thread renews every ttl/3 and stops trying at s + lease_loss_after(ttl)
 * when nothing sent after s was confirmed. It does not decide that the lease is lost
 * by time: the main thread does, from renew_confirmed_sent(), on its own clock, so
 * nothing this thread waits on (a lookup, a connect, a reply) can delay that. It
 * reports only what the server says: the token is no longer the holder. */
#ifndef RLOCK_RENEW_H
#define RLOCK_RENEW_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "store.h"

struct renew;

/* Set up one lease's renewal. The thread itself starts at renew_launch(), which the
 * caller makes by renew_due() (the first renewal, ttl/3 after the acquire): a command
 * shorter than that costs no thread, and nothing but the main connection is used. The
 * thread opens its own handle on cfg and connects at its first renewal; until then
 * renew_stop() returns NULL. confirmed_sent_ms: when the acquire that succeeded was
 * sent (store_acquire's *sent_ms). warn_key: where to remember, for a day, that this
 * server's eviction policy was warned about (NULL: the operator acknowledged it; don't
 * look); it is looked at right after the first renewal, or at once with check_now
 * (the thread then starts and connects at once); it is copied. cfg and l must outlive
 * renew_stop(). Returns 0, or -1 with the reason. */
int renew_start(struct renew **out, const struct store_config *cfg, const struct lock *l,
                int64_t confirmed_sent_ms, const char *warn_key, int check_now, char *err,
                size_t errlen);

/* When the thread must be running (monotonic ms): its first renewal, or the next try
 * after it could not start; INT64_MAX once it runs, or renew_quiet() said it never
 * will. Main thread only. */
int64_t renew_due(const struct renew *r);

/* Start the thread now (it renews at once if a renewal is due). 0 (also when it runs
 * already, never will, or failed before), or -1 with the reason, once: renew_due() then
 * asks for another try every RETRY_MS; until one succeeds nothing renews this lease,
 * which runs out as the lease rule says. Main thread only. */
int renew_launch(struct renew *r, char *err, size_t errlen);

/* Readable (poll POLLIN) once the server said the token is no longer the holder. */
int renew_fd(const struct renew *r);

/* Send time (monotonic ms) of the last confirmed acquire or renewal. Thread-safe. */
int64_t renew_confirmed_sent(const struct renew *r);

/* Why the lease is lost, into buf: the server's verdict, or (timed_out) that no
 * renewal was confirmed in time, with the last failure since the last confirmation.
 * Thread-safe. */
void renew_reason(const struct renew *r, int timed_out, char *buf, size_t n);

/* A lock no longer held by l->token: when the last --break's record (PREFIX{NAME}:broken)
 * names that token, who broke it and when into why (holder_broken) and 1; else 0. One
 * status read on s (NULL: on a fresh handle of cfg, NULL: none), bounded by half a
 * second and cap. Any thread, with a handle of its own. */
int renew_broken_why(struct store *s, const struct store_config *cfg, const struct lock *l,
                     int64_t cap, char *why, size_t n);

/* After the command ended: if the thread has not begun its first renewal (nor, with
 * check_now, its connect), make sure it never does and return 1: it then only sleeps
 * until renew_stop() or the process exit, its confirmed send time stays the acquire's,
 * and the caller may release on its own connection at once, without waiting for the
 * thread. Else 0 (renew_stop() it as usual). Thread-safe. */
int renew_quiet(struct renew *r);

/* 1 once a --preempt request asked this --preemptible holder to give the lock up (the
 * lost fd is then readable, renew_reason says who asked). Thread-safe. */
int renew_preempted(const struct renew *r);

/* After renew_quiet() said 1: frees r if its thread never started; a thread that
 * started (and stays quiet) keeps r until the process exit. Main thread only. */
void renew_drop(struct renew *r);

/* Stop renewing and wait for the thread, as long as a bounded call of it can take
 * (connect + io timeout), not for one stuck in something unbounded. Returns its store
 * handle for the release (the caller closes it): its connection was in use within the
 * last ttl/3. NULL when the thread made no renewal yet (the main connection is as
 * fresh) or did not stop in time. *confirmed_sent gets the final
 * renew_confirmed_sent(). Frees r unless the thread did not stop in time (then it is
 * left to the process exit). r NULL: returns NULL, *confirmed_sent untouched. */
struct store *renew_stop(struct renew *r, int64_t *confirmed_sent);

#endif
