/* SPDX-License-Identifier: MIT */
/* The one password rlock holds. Reconnecting (renewal, waiting, release) needs it for
 * the whole run, so it is never kept in plain text: it is XOR-masked with a random pad
 * in a page excluded from core dumps, revealed only into a caller's stack buffer for
 * AUTH, and wiped at exit. Set before threads start; reveal is then thread-safe. */
#ifndef RLOCK_SECRET_H
#define RLOCK_SECRET_H

#include <stddef.h>

#define SECRET_MAX 512

/* Store (replacing any previous one). 0, or -1 when too long or out of memory. */
int secret_set(const char *pw, size_t len);

/* Is a password set? */
int secret_present(void);

/* Copy the password into buf (cap >= SECRET_MAX + 1, NUL-terminated); returns its
 * length. The caller wipes buf with explicit_bzero when done. */
size_t secret_reveal(char *buf, size_t cap);

/* Forget it (wipe). */
void secret_wipe(void);

#endif
