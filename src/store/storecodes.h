/* SPDX-License-Identifier: MIT */
/* The seam's vocabulary, types only: the store's return codes and its "no cap". store.h
 * (the seam's face) and backend.h (its inside) both read it, so the backends never
 * read the seam's header back. */
#ifndef RLOCK_STORECODES_H
#define RLOCK_STORECODES_H

#include <stdint.h>

#define STORE_NO_CAP INT64_MAX

/* STORE_USAGE: the configuration is wrong (Redlock nodes that are one server): 64. */
enum { STORE_OK = 0, STORE_NEW = 1, STORE_ERR = -1, STORE_DENIED = -3, STORE_USAGE = -4 };

#endif
