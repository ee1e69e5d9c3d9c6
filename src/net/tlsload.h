/* SPDX-License-Identifier: MIT */
/* Loading the TLS module (rlock-tls.so, see tls.h) on first use.
 *
 * Where it is looked for, first match wins:
 *   1. $RLOCK_TLS_MODULE, a full path (ignored in set-id processes);
 *   2. rlock-tls.so next to the running executable (a build tree);
 *   3. RLOCK_TLS_MODULE_DIR/rlock-tls.so, the install directory compiled in
 *      (LIBDIR/rlock). */
#ifndef RLOCK_TLSLOAD_H
#define RLOCK_TLSLOAD_H

#include <stddef.h>

struct tls_ops;

/* The module's table, loaded and initialised on the first call; it stays loaded until
 * exit. NULL when it cannot be: err then gets the reason as one line, e.g.
 * "cannot load /usr/lib/rlock/rlock-tls.so: No such file or directory". Every call
 * gives the first call's answer. Thread-safe. */
const struct tls_ops *tlsload(char *err, size_t errlen);

#endif
