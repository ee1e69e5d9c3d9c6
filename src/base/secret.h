/* SPDX-License-Identifier: MIT */
/* The passwords rlock holds: the data servers' and (Sentinel) the sentinels'.
 * Reconnecting (renewal, waiting, release, re-discovery) needs them for the whole run,
 * so they are never kept in plain text: each is XOR-masked with a random pad in a page
 * excluded from core dumps, revealed only into a caller's stack buffer for AUTH, and
 * wiped at exit. Set before threads start; reveal is then thread-safe. */
#ifndef RLOCK_SECRET_H
#define RLOCK_SECRET_H

#include <stddef.h>

#define SECRET_MAX 512

enum secret_slot {
	SECRET_DATA,     /* the Redis servers' password (secret_reveal and friends) */
	SECRET_SENTINEL, /* the sentinels' own password */
	SECRET_SLOTS,
};

/* Store (replacing any previous one). 0, or -1 when too long or out of memory. */
int secret_set_slot(enum secret_slot slot, const char *pw, size_t len);

/* Copy the password into buf (cap >= SECRET_MAX + 1, NUL-terminated); returns its
 * length. The caller wipes buf with explicit_bzero when done. */
size_t secret_reveal(char *buf, size_t cap);
size_t secret_reveal_slot(enum secret_slot slot, char *buf, size_t cap);

/* Forget them all (wipe). */
void secret_wipe(void);

#endif
