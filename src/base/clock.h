/* SPDX-License-Identifier: MIT */
/* The one clock of deadlines: monotonic milliseconds. Wall-clock jumps must never move
 * a deadline; every room that keeps time (sockets, the renewal thread, the supervisor)
 * reads this, and nothing else of the socket layer. */
#ifndef RLOCK_CLOCK_H
#define RLOCK_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
