/* SPDX-License-Identifier: MIT */
/* The interface between rlock and its TLS module, rlock-tls.so.
 *
 * Linking OpenSSL costs every process ~0.7 ms of relocations at start (Debian links
 * libssl/libcrypto with BIND_NOW), although only TLS connections need it. So all
 * OpenSSL code lives in a module that tlsload.c dlopen()s on first use; the module
 * exports one symbol, rlock_tls_ops(), which returns the table below.
 *
 * Both sides are built from the same tree, but a stale module from an older install
 * can be found at run time: RLOCK_TLS_ABI changes whenever this table, struct tls_opts
 * or the CONN_* codes change, and a mismatch is refused. The abi field stays first.
 *
 * A session wraps a connected, non-blocking socket that the caller keeps owning (the
 * session never closes it). The calls never block and return the CONN_* codes of
 * conncodes.h; after CONN_AGAIN, events() says what to poll() for. Error texts name the
 * peer and fit on one line. A session is used by one thread at a time; the module's
 * own state (the SSL_CTX cache) is locked. */
#ifndef RLOCK_TLS_H
#define RLOCK_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "conncodes.h"

#define RLOCK_TLS_ABI    2
#define RLOCK_TLS_SYMBOL "rlock_tls_ops"

struct tls_session;

/* wrap()'s *fault. */
enum { TLS_FAULT_FILE = 1 };

struct tls_ops {
	int abi; /* RLOCK_TLS_ABI the module was built with */

	/* OpenSSL's version text, e.g. "OpenSSL 3.0.15 3 Sep 2024". */
	const char *(*version)(void);

	/* One-time library setup; safe to call again. CONN_OK or CONN_ERR. */
	int (*init)(char *err, size_t errlen);

	/* Set up TLS over fd for endpoint host (may be NULL for a Unix socket; t->sni
	 * overrides it) with the chain and host-name checks t asks for. peer names the
	 * connection in messages. Returns a session ready for handshake(), or NULL with
	 * *fault TLS_FAULT_FILE when a file t names cannot be read or is not of its type
	 * (the user's to fix: exit 66), else 0. */
	struct tls_session *(*wrap)(int fd, const char *peer, const char *host,
	                            const struct tls_opts *t, int *fault, char *err, size_t errlen);

	/* Advance the handshake: CONN_OK (done and verified), CONN_AGAIN or CONN_ERR. The
	 * caller owns the deadline. */
	int (*handshake)(struct tls_session *s, char *err, size_t errlen);

	/* Whether the peer has sent any byte yet (silence suggests a plaintext port). */
	int (*heard)(const struct tls_session *s);

	/* As conn_read_some()/conn_write_some(). */
	ssize_t (*read_some)(struct tls_session *s, void *buf, size_t cap, char *err,
	                     size_t errlen);
	ssize_t (*write_some)(struct tls_session *s, const void *buf, size_t len, char *err,
	                      size_t errlen);

	/* Decrypted bytes already buffered (poll() cannot see them). */
	int (*pending)(const struct tls_session *s);

	/* poll() events the last CONN_AGAIN waits for. */
	short (*events)(const struct tls_session *s);

	/* One non-blocking close_notify if the session is healthy, then free; NULL is
	 * fine. The fd stays open. */
	void (*close)(struct tls_session *s);
};

/* The module's one export, found with dlsym() (never linked against): its table if
 * the module was built for abi_version, else NULL. */
const struct tls_ops *rlock_tls_ops(int abi_version);
typedef const struct tls_ops *(*tls_ops_fn)(int abi_version);

#endif
