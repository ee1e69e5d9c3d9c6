/* SPDX-License-Identifier: MIT */
/* The unit tests' one assertion: CHECK(cond) counts a pass or prints the failed
 * condition with its place and counts a failure; main reports passed/failed. */
#ifndef RLOCK_TEST_UNIT_H
#define RLOCK_TEST_UNIT_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (cond) {                                                                        \
			passed++;                                                                  \
		} else {                                                                           \
			failed++;                                                                  \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);         \
		}                                                                                  \
	} while (0)

#endif
