/* SPDX-License-Identifier: MIT */
/* The one clock of deadlines: monotonic milliseconds that count a suspend
 * (CLOCK_BOOTTIME). Wall-clock jumps must never move a deadline; every room that keeps
 * time (sockets, the renewal thread, the supervisor, the watchdog) reads this, and
 * nothing else of the socket layer. CLOCK_MONOTONIC stands still while the machine
 * sleeps, and the server's clock (so the lease) does not: on it, a machine resumed
 * after a suspend longer than the lease would count a lease the server already ended
 * as still ours until the next renewal failed. */
#ifndef RLOCK_CLOCK_H
#define RLOCK_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(void)
{
	struct timespec ts;

	/* CLOCK_BOOTTIME (Linux 2.6.39) cannot fail with a valid pointer. */
	(void)clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The longest a wait on a deadline of clock_ms() sleeps before it reads the clock
 * again: poll()'s timeout runs on CLOCK_MONOTONIC, so a deadline that passed during a
 * suspend is seen at most this long after the resume. */
#define CLOCK_NAP_MAX_MS 1000

#endif
