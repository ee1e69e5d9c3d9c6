/* SPDX-License-Identifier: MIT */
/* Loading the TLS module (rlock-tls.so, see tls.h) on first use.
 *
 * Where it is looked for, first match wins:
 *   1. $RLOCK_TLS_MODULE, a full path (ignored in set-id processes);
 *   2. rlock-tls.so next to the running executable (a build tree);
 *   3. RLOCK_TLS_MODULE_DIR/rlock-tls.so, the install directory compiled in
 *      (LIBDIR/rlock).
 * The module found is loaded only if it and every directory above it are root's or
 * the user's and writable by nobody else (userfile.h): it checks every certificate. */
#ifndef RLOCK_TLSLOAD_H
#define RLOCK_TLSLOAD_H

#include <stddef.h>

struct tls_ops;

/* The module's table, loaded and initialised on the first call; it stays loaded until
 * exit. NULL when it cannot be: err then gets the reason as one line, e.g.
 * "cannot load /usr/lib/rlock/rlock-tls.so: No such file or directory". Every call
 * gives the first call's answer. Thread-safe. */
const struct tls_ops *tlsload(char *err, size_t errlen);

/* Why the module was refused before any attempt to load it, or 0 (loaded, or it did
 * not load: tlsload()'s reason says why). TLSLOAD_UNTRUSTED: another user could have
 * written it, or a directory above it (userfile.h's rule), or it is no regular file: a
 * file the user named that rlock will not read (66). TLSLOAD_NOT_ABSOLUTE:
 * $RLOCK_TLS_MODULE is not an absolute path: bad input, refused as a relative
 * RLOCK_CONFIG is (64). Loads it first, as tlsload() does. */
enum { TLSLOAD_UNTRUSTED = 1, TLSLOAD_NOT_ABSOLUTE = 2 };
int tlsload_refused(void);

#endif
