/* SPDX-License-Identifier: MIT */
/* The one place with sockets.
 *
 * A conn is a non-blocking, close-on-exec stream to one server: TCP (IPv4/IPv6), a
 * Unix socket, optionally wrapped in TLS by the TLS module (tls.h), which is loaded
 * only when a connection asks for TLS. Every blocking call takes an absolute
 * deadline on the monotonic clock (clock_ms()); nothing here can raise SIGPIPE.
 *
 * Two layers: the *_some() primitives and conn_start/conn_continue never block and
 * report what they wait for, so one caller can drive N conns with one poll() (Redlock);
 * the deadline wrappers (conn_open, conn_write_all, conn_read) serve the common
 * one-server case.
 *
 * No wait here can outlast its deadline, host-name lookups included: a lookup runs in
 * a helper thread the caller stops waiting for at the deadline. conn_resolve() looks a
 * name up once, so that later connects (renewal, waiting, release) need no resolver.
 *
 * A thread may also name an abort fd (conn_set_abort_fd): every wait then ends as soon
 * as that fd is readable, with CONN_ABORT (rlock's main thread passes the signalfd of
 * the terminating signals before the command starts).
 *
 * Thread-safety: a conn is used by one thread at a time. conn_tls_init() is called
 * once, before any thread starts. An endpoint is changed only by conn_resolve(), before
 * other threads use it; after that it is shared read-only. */
#ifndef RLOCK_CONN_H
#define RLOCK_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "clock.h"     /* clock_ms(): the deadlines' clock */
#include "conncodes.h" /* CONN_* and struct tls_opts, shared with the TLS module */

#define CONN_ADDRS_MAX 8

/* How a message about a TLS/plaintext mismatch ends: the advice for a redis:// or
 * rediss:// URL, unless the endpoint names its own (struct endpoint). */
#define CONN_HINT_WANTS_TLS   " then use rediss:// or --tls)"
#define CONN_HINT_WANTS_PLAIN " then use redis://, or its TLS port)"

/* The addresses of a TCP host, as conn_resolve() found them. */
struct conn_addrs {
	int n;       /* 0: not looked up (conn_open then looks up each time) */
	int numeric; /* the host was an IP literal: no resolver was asked */
	struct {
		struct sockaddr_storage sa;
		socklen_t len;
	} a[CONN_ADDRS_MAX];
};

struct endpoint {
	const char *host; /* TCP host name or IP literal; NULL for a Unix socket */
	int port;
	const char *path;           /* Unix socket path; NULL for TCP */
	const struct tls_opts *tls; /* NULL or !enabled: plain */
	struct conn_addrs addrs;    /* filled by conn_resolve(); zeroed by the caller */
	/* How a message about a TLS/plaintext mismatch ends when the endpoint's scheme is
	 * not redis:// or rediss:// (a sentinel, a master the sentinels name): NULL for
	 * CONN_HINT_WANTS_TLS and CONN_HINT_WANTS_PLAIN. */
	const char *hint_wants_tls, *hint_wants_plain;
	/* The endpoint is one a server announced (a Sentinel's master, a Cluster node), not
	 * the user's: how the message ends when its certificate does not name its IP
	 * address (and no --sni named what to verify). NULL: nothing to add. */
	const char *hint_announced;
};

struct conn;

/* In the calling thread only: every later wait of conn (lookup, connect, handshake,
 * read, write) also watches fd and returns CONN_ABORT as soon as it is readable;
 * nothing is read from it. -1 (the default) watches nothing. */
void conn_set_abort_fd(int fd);

/* True when the calling thread's abort fd is readable now: a failure just seen may be
 * that interruption rather than a fault worth reporting. */
int conn_abort_pending(void);

/* In the calling thread only: run fn once, the next time conn_read has to wait for a
 * reply (the request is on its way), then forget it: work that may overlap a round
 * trip. NULL (the default) forgets it unrun. */
void conn_set_idle(void (*fn)(void));

/* In the calling thread only: run now the work conn_set_idle left, if it has not run
 * (the caller is about to sleep: a wait for a busy lock), and forget it. */
void conn_idle_now(void);

/* What the calling thread's failures since conn_fault_clear() were, OR-ed: PASSING
 * where waiting may fix it (nobody listens yet, a connect or a reply that timed out,
 * a server loading or failing over), FINAL where it cannot (a certificate that does
 * not verify, a peer that does not speak RESP, a master no sentinel knows), LOCAL
 * where this host was short (no descriptor for a socket, no memory, no thread for a
 * lookup: rl_ex_host_short): the server was never asked; FILE (with FINAL) where a
 * file the user named for the connection (--cacert, --cert, --tls-key) cannot be read
 * or is not of its type: exit 66, not the server's fault; CONFIG (with FINAL) where the
 * server says the user's URL cannot be for it (a database but 0 on a Cluster node, one
 * past its `databases`; a password for a server that has none: NOPASS too, so that
 * --check's fix names the password, not the database): 64.
 * A caller that retries until a deadline clears it before each try. */
enum {
	CONN_FAULT_PASSING = 1,
	CONN_FAULT_FINAL = 2,
	CONN_FAULT_LOCAL = 4,
	CONN_FAULT_FILE = 8,
	CONN_FAULT_CONFIG = 16,
	CONN_FAULT_NOPASS = 32,
};
void conn_fault_note(int what);
void conn_fault_clear(void);
int conn_fault(void);

/* A step whose own faults the caller must tell apart from those before it (one
 * sentinel, one Redlock node): saved = conn_fault_push() before it, then
 * conn_fault_pop(saved, keep) returns the step's faults and puts saved back, with
 * the step's too when keep. */
int conn_fault_push(void);
int conn_fault_pop(int saved, int keep);

/* Sleep until until_ms (monotonic), or less when the calling thread's abort fd becomes
 * readable (a signal): a pause between retries that a signal cuts short. */
void conn_pause_until(int64_t until_ms);

/* Look ep's host up once, before deadline_ms, and keep up to CONN_ADDRS_MAX of its
 * addresses in ep->addrs for every later conn_open() of ep, in any thread. Nothing to
 * do for a Unix socket. A lookup still running at the deadline is abandoned to its
 * helper thread. CONN_OK, CONN_TIMEOUT, CONN_ABORT or CONN_ERR (reason in err). */
int conn_resolve(struct endpoint *ep, int64_t deadline_ms, char *err, size_t errlen);

/* Connect (TCP/Unix connect, TLS handshake with chain and host-name checks; a lookup
 * first if conn_resolve() has not filled ep->addrs), all before deadline_ms. On success
 * *out owns a connected conn. Returns CONN_OK, CONN_TIMEOUT, CONN_ABORT or CONN_ERR.
 * cap_ms (>= deadline_ms) is the caller's own deadline: a silent handshake's probe
 * (conn_probe) never runs past it. */
int conn_open(struct conn **out, const struct endpoint *ep, int64_t deadline_ms, int64_t cap_ms,
              char *err, size_t errlen);

/* Connecting without waiting, for a caller that drives several connects with one
 * poll() (Redlock: a round's nodes all at once). conn_start() creates the socket and
 * starts the TCP connect (a Unix connect completes or fails at once); it waits only to
 * look the host up when conn_resolve() has not filled ep->addrs, and only until
 * deadline_ms. conn_continue() goes on whenever conn_fd() is ready for conn_events()
 * (calling it early, or again once connected, is harmless): the host's next address after a refused
 * one, then the TLS handshake. Both return CONN_OK (connected, handshake verified), CONN_AGAIN
 * (*out/c is set: poll again), or CONN_ERR, CONN_TIMEOUT or CONN_ABORT (reason in err;
 * conn_start leaves *out NULL, after conn_continue close c). The caller owns the
 * deadline: closing c abandons the attempt. ep must outlive the connect. */
int conn_start(struct conn **out, const struct endpoint *ep, int64_t deadline_ms, char *err,
               size_t errlen);
int conn_continue(struct conn *c, char *err, size_t errlen);

/* A host's addresses share conn_start's deadline (as in conn_open): when the one being
 * tried has not answered by conn_wake_ms(c), conn_continue() gives up on it and starts
 * the next. The caller's poll wakes by then; INT64_MAX when nothing is due. */
int64_t conn_wake_ms(const struct conn *c);

/* A TLS handshake that met silence (SPEC: an error time cannot fix fails at once): a
 * plaintext Redis on the port swallows a ClientHello without a word, as a paused TLS
 * server does. conn_probe(c), for a conn_start() connection still in a handshake that
 * has heard nothing: gives the handshake up and starts a probe instead (up to 68 KiB of
 * filler; a Redis answers that with a RESP error); 1 started, 0 not (no handshake under
 * way, or the server has spoken TLS). Then conn_continue() drives the probe as it drove
 * the handshake, and ends it with CONN_ERR "... answered in plaintext ..." (a final
 * fault, conn_fault()) or CONN_TIMEOUT (something else answered, a passing fault); a
 * probe still at CONN_AGAIN after CONN_PROBE_MS says nothing (a TLS server that is
 * paused). conn_open() probes the same way, blocking, when its handshake times out
 * (never past its cap_ms).
 * conn_plaintext(c): 1 once the probe found a plaintext Redis. */
#define CONN_PROBE_MS 250
int conn_probe(struct conn *c);
int conn_plaintext(const struct conn *c);
/* 1 while a conn_start() connection is past TCP and in its TLS handshake (or the
 * probe that replaced it). */
int conn_in_tls_handshake(const struct conn *c);

/* Non-blocking: write up to len bytes; returns bytes written (> 0), CONN_AGAIN or
 * CONN_ERR. */
ssize_t conn_write_some(struct conn *c, const void *buf, size_t len, char *err, size_t errlen);

/* Non-blocking: read up to cap bytes; returns bytes read (> 0), CONN_AGAIN, CONN_EOF
 * or CONN_ERR. */
ssize_t conn_read_some(struct conn *c, void *buf, size_t cap, char *err, size_t errlen);

/* poll() events (POLLIN/POLLOUT) the last CONN_AGAIN waits for (TLS may need the other
 * direction), and the fd to poll. */
short conn_events(const struct conn *c);
int conn_fd(const struct conn *c);

/* True when decrypted bytes are already buffered (poll would not see them). */
int conn_pending(const struct conn *c);

/* Write all of buf before the deadline: CONN_OK, CONN_TIMEOUT, CONN_ABORT or CONN_ERR
 * (after anything but CONN_OK, part of buf may have been sent). */
int conn_write_all(struct conn *c, const void *buf, size_t len, int64_t deadline_ms, char *err,
                   size_t errlen);

/* Read some bytes (> 0 returned) before the deadline, else CONN_TIMEOUT, CONN_EOF,
 * CONN_ABORT or CONN_ERR. */
ssize_t conn_read(struct conn *c, void *buf, size_t cap, int64_t deadline_ms, char *err,
                  size_t errlen);

/* Close and free; NULL is fine. Does not block (no TLS close_notify wait). */
void conn_close(struct conn *c);

/* Load the TLS module and set up OpenSSL, before threads start; safe to call more
 * than once. -1 with why: a module refused as untrusted (tlsload.h); -2 with why: none
 * that loads (missing, or not rlock's), which conn_open() of a TLS endpoint reports too
 * ("TLS support is not available: ..."); -3 with why: RLOCK_TLS_MODULE is not an
 * absolute path (bad input); else 0. */
int conn_tls_init(char *why, size_t n);

#endif
