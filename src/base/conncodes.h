/* SPDX-License-Identifier: MIT */
/* The socket layer's vocabulary, types only: its return codes (CONN_*) and the TLS
 * settings (struct tls_opts). conn.c and the TLS module (tls.c, a shared object that
 * conn.c loads and that can call nothing of conn.c's) both read it, so the module
 * never reads the socket layer's header back. RLOCK_TLS_ABI (tls.h) changes whenever
 * this file does. */
#ifndef RLOCK_CONNCODES_H
#define RLOCK_CONNCODES_H

struct tls_opts {
	int enabled;
	int insecure;          /* skip chain and host-name verification (warned about) */
	const char *cacert;    /* CA bundle file, or NULL */
	const char *cacertdir; /* CA directory, or NULL */
	const char *cert;      /* client certificate (PEM), or NULL */
	const char *key;       /* client private key (PEM), or NULL */
	const char *sni;       /* server name to send and verify instead of the host */
};

enum {
	CONN_OK = 0,
	CONN_ERR = -1,     /* error; reason in err */
	CONN_AGAIN = -2,   /* would block; see conn_events() */
	CONN_TIMEOUT = -3, /* deadline passed; reason in err */
	CONN_EOF = -4,     /* peer closed */
	CONN_ABORT = -5,   /* the thread's abort fd became readable; reason in err */
};

#endif
