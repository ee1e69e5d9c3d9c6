/* SPDX-License-Identifier: MIT */
/* Sockets: the one file that talks to the network. TLS sessions come from the TLS
 * module (tls.c, loaded by tlsload.c only when a connection asks for TLS).
 *
 * Everything is non-blocking; the only waits are poll() calls bounded by an absolute
 * clock_ms() deadline (clock.h). SIGPIPE cannot fire from here: plain writes use
 * send(MSG_NOSIGNAL), and the TLS module writes the same way. */
#include "conn.h"
#include "exitcodes.h" /* rl_ex_host_short */
#include "log.h"       /* log_reason */
#include "thread.h"    /* rl_thread_create */

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tls.h"
#include "tlsload.h"

struct conn {
	int fd;
	const struct tls_ops *tls_ops; /* the module's table when tls is set */
	struct tls_session *tls;       /* NULL for a plain connection */
	short events;                  /* what the last CONN_AGAIN waits for */
	char peer[320];                /* "host:port", "[v6]:port" or the socket path */
	/* conn_start()/conn_continue() only: */
	const struct endpoint *ep; /* while connecting */
	struct conn_addrs addrs;   /* the addresses to try, in order */
	int addr;                  /* the one being tried */
	int connecting;            /* 1: TCP connect in progress; 2: TLS handshake; 3: the
	                            * plaintext probe of a silent handshake (conn_probe) */
	size_t probe_sent;         /* the probe's filler sent so far */
	int64_t deadline;          /* conn_start's deadline */
	int64_t addr_until;        /* when the address being tried gives way to the next */
	int plaintext;             /* the probe's verdict: a plaintext Redis answered */
	const char *plain_hint;    /* how a message about that ends (struct endpoint) */
};

/* The calling thread's abort fd (conn_set_abort_fd), or -1. */
static _Thread_local int abort_fd = -1;

void conn_set_abort_fd(int fd)
{
	abort_fd = fd;
}

/* The calling thread's work for its next wait on a reply (conn_set_idle), or NULL. */
static _Thread_local void (*idle_fn)(void);

void conn_set_idle(void (*fn)(void))
{
	idle_fn = fn;
}

void conn_idle_now(void)
{
	void (*fn)(void) = idle_fn;

	idle_fn = NULL;
	if (fn)
		fn();
}

int conn_abort_pending(void)
{
	struct pollfd p = {.fd = abort_fd, .events = POLLIN};

	return abort_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* What the calling thread's failures since conn_fault_clear() were (conn.h). */
static _Thread_local int fault;

void conn_fault_note(int what)
{
	fault |= what;
}

/* A failure for want of a descriptor or of memory is this host's (CONN_FAULT_LOCAL). */
static void note_host_short(int e)
{
	if (rl_ex_host_short(e))
		conn_fault_note(CONN_FAULT_LOCAL);
}

void conn_fault_clear(void)
{
	fault = 0;
}

int conn_fault(void)
{
	return fault;
}

int conn_fault_push(void)
{
	int saved = fault;

	fault = 0;
	return saved;
}

int conn_fault_pop(int saved, int keep)
{
	int mine = fault;

	fault = saved | (keep ? mine : 0);
	return mine;
}

void conn_pause_until(int64_t until_ms)
{
	/* fd -1 (no abort fd): poll ignores the entry and only sleeps */
	struct pollfd p = {.fd = abort_fd, .events = POLLIN};
	int64_t left;

	while ((left = until_ms - clock_ms()) > 0) {
		int rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (rc > 0 || (rc < 0 && errno != EINTR))
			return;
	}
}

enum { WAIT_READY = 1, WAIT_TIMEOUT = 0, WAIT_FAILED = -1, WAIT_ABORT = -2 };

/* Wait until fd is ready for events or the deadline passes, watching the thread's
 * abort fd too: WAIT_READY, WAIT_TIMEOUT, WAIT_ABORT, or WAIT_FAILED (poll failed,
 * errno). Readiness includes POLLERR/POLLHUP: the next I/O call reports the actual
 * error. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
	struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = abort_fd, .events = POLLIN}};
	nfds_t n = abort_fd >= 0 ? 2 : 1;
	int64_t left;
	int rc;

	for (;;) {
		left = deadline_ms - clock_ms();
		/* An abort wins even over a deadline already passed. */
		rc = poll(p, n, left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left);
		if (rc > 0 && n == 2 && p[1].revents)
			return WAIT_ABORT;
		if (rc > 0 && p[0].revents)
			return WAIT_READY;
		if (left <= 0)
			return WAIT_TIMEOUT;
		/* rc == 0: poll may wake a little early; the clock decides. */
		if (rc < 0 && errno != EINTR)
			return WAIT_FAILED;
	}
}

static long long budget_ms(int64_t start, int64_t deadline_ms)
{
	return deadline_ms > start ? (long long)(deadline_ms - start) : 0;
}

/* ---- plain sockets ------------------------------------------------------------- */

/* Connect fd before the deadline: CONN_OK, CONN_TIMEOUT, CONN_ABORT or CONN_ERR with
 * errno set. */
static int connect_fd(int fd, const struct sockaddr *sa, socklen_t salen, int64_t deadline_ms)
{
	int soerr = 0;
	socklen_t len = sizeof soerr;
	int64_t left;
	int rc;

	for (;;) {
		rc = connect(fd, sa, salen);
		if (rc == 0)
			return CONN_OK;
		/* A Unix listener with a full backlog answers EAGAIN and forgets us; only
		 * trying again helps. (For TCP, EAGAIN means no local port: a real error.) */
		if (errno != EAGAIN || sa->sa_family != AF_UNIX)
			break;
		left = deadline_ms - clock_ms();
		if (left <= 0)
			return CONN_TIMEOUT;
		if (wait_fd(-1, 0, clock_ms() + (left < 10 ? left : 10)) == WAIT_ABORT)
			return CONN_ABORT;
	}
	/* After EINTR the connection carries on in the background, as with EINPROGRESS;
	 * calling connect() again would only say EALREADY. */
	if (errno != EINPROGRESS && errno != EINTR)
		return CONN_ERR;
	rc = wait_fd(fd, POLLOUT, deadline_ms);
	if (rc == WAIT_TIMEOUT)
		return CONN_TIMEOUT;
	if (rc == WAIT_ABORT)
		return CONN_ABORT;
	if (rc < 0)
		return CONN_ERR;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return CONN_ERR;
	if (soerr != 0) {
		errno = soerr;
		return CONN_ERR;
	}
	return CONN_OK;
}

static int open_unix(struct conn *c, const char *path, int64_t start, int64_t deadline_ms,
                     char *err, size_t errlen)
{
	struct sockaddr_un sun;
	int fd = -1, rc = CONN_ERR, n;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (!*path || strlen(path) >= sizeof sun.sun_path) {
		log_reason(err, errlen, "unix socket path %s: must be 1 to %zu bytes long",
		           *path ? path : "(empty)", sizeof sun.sun_path - 1);
		goto cleanup;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	n = snprintf(c->peer, sizeof c->peer, "%s", path);
	if (n < 0 || (size_t)n >= sizeof c->peer) {
		log_reason(err, errlen, "unix socket path too long");
		goto cleanup;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		note_host_short(errno);
		log_reason(err, errlen, "connect to %s: socket: %s", c->peer, strerror(errno));
		goto cleanup;
	}
	rc = connect_fd(fd, (const struct sockaddr *)&sun, sizeof sun, deadline_ms);
	if (rc != CONN_OK && rc != CONN_ABORT)
		conn_fault_note(CONN_FAULT_PASSING); /* no server there yet: may come */
	if (rc == CONN_TIMEOUT)
		log_reason(err, errlen, "connect to %s: timed out after %lld ms", c->peer,
		           budget_ms(start, deadline_ms));
	else if (rc == CONN_ABORT)
		log_reason(err, errlen, "connect to %s: interrupted", c->peer);
	else if (rc != CONN_OK)
		log_reason(err, errlen, "connect to %s: %s", c->peer, strerror(errno));
	else {
		c->fd = fd;
		fd = -1;
	}
cleanup:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- name lookup with a deadline ------------------------------------------------ */

/* getaddrinfo() has no deadline of its own, so a name is looked up in a detached helper
 * thread that the caller waits for no longer than its deadline. Whichever of the two
 * lets go last frees the lookup: an abandoned thread finishes (or hangs) harmlessly. */
struct lookup {
	pthread_mutex_t mu;
	int refs; /* the caller and the thread */
	int fd;   /* eventfd, written by the thread when done */
	int rc;   /* getaddrinfo's result */
	int errnum;
	char host[NI_MAXHOST];
	char service[8];
	struct conn_addrs out;
};

static void lookup_put(struct lookup *lk)
{
	pthread_mutex_lock(&lk->mu);
	int last = --lk->refs == 0;
	pthread_mutex_unlock(&lk->mu);
	if (!last)
		return;
	close(lk->fd);
	pthread_mutex_destroy(&lk->mu);
	free(lk);
}

/* Copy up to CONN_ADDRS_MAX addresses of res into out. */
static void copy_addrs(struct conn_addrs *out, const struct addrinfo *res)
{
	out->n = 0;
	for (const struct addrinfo *ai = res; ai && out->n < CONN_ADDRS_MAX; ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof out->a[0].sa)
			continue;
		memcpy(&out->a[out->n].sa, ai->ai_addr, ai->ai_addrlen);
		out->a[out->n].len = ai->ai_addrlen;
		out->n++;
	}
}

static struct addrinfo name_hints(int numeric)
{
	struct addrinfo hints;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* No AI_ADDRCONFIG: it hides ::1 on hosts whose only IPv6 address is loopback. */
	hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
	return hints;
}

static void *lookup_main(void *arg)
{
	struct lookup *lk = arg;
	struct addrinfo hints = name_hints(0), *res = NULL;
	uint64_t one = 1;

	int rc = getaddrinfo(lk->host, lk->service, &hints, &res);
	int saved = errno;
	pthread_mutex_lock(&lk->mu);
	lk->rc = rc;
	lk->errnum = saved;
	if (rc == 0)
		copy_addrs(&lk->out, res);
	pthread_mutex_unlock(&lk->mu);
	if (res)
		freeaddrinfo(res);
	(void)!write(lk->fd, &one, sizeof one);
	lookup_put(lk);
	return NULL;
}

/* Look a host name up in a helper thread, waiting for it until the deadline. */
static int lookup_name(const char *host, const char *service, struct conn_addrs *out, int64_t start,
                       int64_t deadline_ms, char *err, size_t errlen)
{
	struct lookup *lk = calloc(1, sizeof *lk);
	pthread_t t;
	sigset_t all, old;
	int rc;

	if (!lk) {
		log_reason(err, errlen, "resolve %s: out of memory", host);
		return CONN_ERR;
	}
	(void)snprintf(lk->host, sizeof lk->host, "%s", host);
	(void)snprintf(lk->service, sizeof lk->service, "%s", service);
	lk->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (lk->fd < 0) {
		note_host_short(errno);
		log_reason(err, errlen, "resolve %s: eventfd: %s", host, strerror(errno));
		free(lk);
		return CONN_ERR;
	}
	pthread_mutex_init(&lk->mu, NULL);
	lk->refs = 2;
	/* The helper takes no signals (they are read from rlock's signalfd) and is never
	 * joined: the caller may stop waiting for it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = rl_thread_create(&t, 1, lookup_main, lk);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		conn_fault_note(CONN_FAULT_LOCAL); /* EAGAIN: no thread (a process limit) */
		log_reason(err, errlen, "resolve %s: cannot start the lookup thread: %s", host,
		           strerror(rc));
		lk->refs = 1;
		lookup_put(lk);
		return CONN_ERR;
	}
	int w = wait_fd(lk->fd, POLLIN, deadline_ms);
	pthread_mutex_lock(&lk->mu);
	int done = w == WAIT_READY;
	int grc = lk->rc, gerr = lk->errnum;
	if (done && grc == 0)
		*out = lk->out;
	pthread_mutex_unlock(&lk->mu);
	lookup_put(lk);
	if (w == WAIT_ABORT) {
		log_reason(err, errlen, "resolve %s: interrupted", host);
		return CONN_ABORT;
	}
	/* A resolver that did not answer, or answered "try again" (EAI_AGAIN), may answer
	 * later; a name that does not exist (EAI_NONAME) stays a fault waiting cannot fix. */
	if ((!done && w == WAIT_TIMEOUT) || (done && grc == EAI_AGAIN))
		conn_fault_note(CONN_FAULT_PASSING);
	if (!done) {
		log_reason(err, errlen, "resolve %s: no answer from the resolver within %lld ms",
		           host, budget_ms(start, deadline_ms));
		return w == WAIT_TIMEOUT ? CONN_TIMEOUT : CONN_ERR;
	}
	if (grc != 0) {
		log_reason(err, errlen, "resolve %s: %s", host,
		           grc == EAI_SYSTEM ? strerror(gerr) : gai_strerror(grc));
		return CONN_ERR;
	}
	if (out->n == 0) {
		log_reason(err, errlen, "resolve %s: no usable address", host);
		return CONN_ERR;
	}
	return CONN_OK;
}

/* Fill *out for host: an IP literal at once, a name by lookup_name(). */
static int resolve(const char *host, int port, struct conn_addrs *out, int64_t start,
                   int64_t deadline_ms, char *err, size_t errlen)
{
	struct addrinfo hints = name_hints(1), *res = NULL;
	char service[8];

	memset(out, 0, sizeof *out);
	if (!host || !*host) {
		log_reason(err, errlen, "connect: no host given");
		return CONN_ERR;
	}
	if (port < 1 || port > 65535) {
		log_reason(err, errlen, "connect to %s: port out of range", host);
		return CONN_ERR;
	}
	(void)snprintf(service, sizeof service, "%d", port);
	/* An IP literal: getaddrinfo answers without asking anyone. */
	if (getaddrinfo(host, service, &hints, &res) == 0) {
		copy_addrs(out, res);
		freeaddrinfo(res);
		out->numeric = 1;
		if (out->n > 0)
			return CONN_OK;
	}
	return lookup_name(host, service, out, start, deadline_ms, err, errlen);
}

int conn_resolve(struct endpoint *ep, int64_t deadline_ms, char *err, size_t errlen)
{
	struct conn_addrs found;

	if (ep->path || ep->addrs.n > 0)
		return CONN_OK;
	int rc = resolve(ep->host, ep->port, &found, clock_ms(), deadline_ms, err, errlen);
	if (rc == CONN_OK)
		ep->addrs = found;
	return rc;
}

/* A non-blocking, close-on-exec TCP socket with rlock's options, or -1 (errno). */
static int tcp_socket(int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
	int one = 1, idle = 60;

	if (fd < 0)
		return -1;
	/* Commands are small and latency-bound: never hold them back for Nagle. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	/* A flow dropped silently (NAT, firewall) while a connection idles is noticed:
	 * probes after 60 s idle (the kernel default is 2 h). Best effort. */
	(void)!setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	(void)!setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	return fd;
}

/* c->peer for a TCP endpoint: IPv6 literals get brackets so the port stays readable. */
static int tcp_peer(struct conn *c, const struct endpoint *ep, char *err, size_t errlen)
{
	int n = snprintf(c->peer, sizeof c->peer, strchr(ep->host, ':') ? "[%s]:%d" : "%s:%d",
	                 ep->host, ep->port);

	if (n < 0 || (size_t)n >= sizeof c->peer) {
		log_reason(err, errlen, "connect: host name too long");
		return -1;
	}
	return 0;
}

static int open_tcp(struct conn *c, const struct endpoint *ep, int64_t start, int64_t deadline_ms,
                    char *err, size_t errlen)
{
	struct conn_addrs looked_up;
	const struct conn_addrs *addrs = &ep->addrs;
	char addr[NI_MAXHOST], what[NI_MAXHOST + 4];
	const char *host = ep->host;
	int rc = CONN_ERR, fd, saved;

	if (!host || !*host) {
		log_reason(err, errlen, "connect: no host given");
		return CONN_ERR;
	}
	if (tcp_peer(c, ep, err, errlen) < 0)
		return CONN_ERR;
	if (addrs->n == 0) {
		rc = resolve(host, ep->port, &looked_up, start, deadline_ms, err, errlen);
		if (rc != CONN_OK)
			return rc;
		addrs = &looked_up;
	}
	rc = CONN_ERR;
	log_reason(err, errlen, "connect to %s: no address", c->peer);
	for (int i = 0; i < addrs->n; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&addrs->a[i].sa;
		socklen_t salen = addrs->a[i].len;
		/* For a name, say which of its addresses failed. */
		what[0] = '\0';
		if (!addrs->numeric &&
		    getnameinfo(sa, salen, addr, sizeof addr, NULL, 0, NI_NUMERICHOST) == 0)
			(void)snprintf(what, sizeof what, " (%s)", addr);
		if (clock_ms() >= deadline_ms) {
			if (budget_ms(start, deadline_ms) > 0)
				log_reason(err, errlen, "connect to %s%s: timed out after %lld ms",
				           c->peer, what, budget_ms(start, deadline_ms));
			else
				log_reason(err, errlen, "connect to %s%s: not tried: no time left",
				           c->peer, what);
			return CONN_TIMEOUT;
		}
		fd = tcp_socket(sa->sa_family);
		if (fd < 0) {
			note_host_short(errno);
			log_reason(err, errlen, "connect to %s%s: socket: %s", c->peer, what,
			           strerror(errno));
			continue;
		}
		/* A name's addresses share what is left: one that never answers (a SYN
		 * black-holed) leaves the next its turn. The last one gets all the rest. */
		int64_t until = deadline_ms, now = clock_ms();
		if (i < addrs->n - 1)
			until = now + (deadline_ms - now) / (addrs->n - i);
		rc = connect_fd(fd, sa, salen, until);
		if (rc != CONN_OK && rc != CONN_ABORT)
			conn_fault_note(CONN_FAULT_PASSING);
		if (rc == CONN_OK) {
			c->fd = fd;
			return CONN_OK;
		}
		saved = errno;
		close(fd);
		if (rc == CONN_TIMEOUT && until < deadline_ms) {
			log_reason(err, errlen, "connect to %s%s: timed out after %lld ms", c->peer,
			           what, budget_ms(now, until));
			continue;
		}
		if (rc == CONN_TIMEOUT) {
			log_reason(err, errlen, "connect to %s%s: timed out after %lld ms", c->peer,
			           what, budget_ms(start, deadline_ms));
			return rc;
		}
		if (rc == CONN_ABORT) {
			log_reason(err, errlen, "connect to %s: interrupted", c->peer);
			return rc;
		}
		log_reason(err, errlen, "connect to %s%s: %s", c->peer, what, strerror(saved));
	}
	return rc;
}

/* ---- TLS ----------------------------------------------------------------------- */

int conn_tls_init(char *why, size_t n)
{
	/* Load the module (and initialise OpenSSL) before threads start; the first TLS
	 * connection gets the same answer. */
	if (tlsload(why, n))
		return 0;
	switch (tlsload_refused()) {
	case TLSLOAD_NOT_ABSOLUTE:
		return -3;
	case TLSLOAD_UNTRUSTED:
		return -1;
	default:
		return -2;
	}
}

/* A handshake that ended: a certificate that does not verify, or a peer that is no
 * TLS server, is a fault waiting cannot fix (the module's own words say which). */
static int handshake_verdict(const struct endpoint *ep, int rc, char *err, size_t errlen)
{
	if (rc == CONN_ERR &&
	    (strstr(err, "certificate verify failed") || strstr(err, "is it a TLS port?")))
		conn_fault_note(CONN_FAULT_FINAL);
	/* The address verified was one a server announced, an IP the user never typed:
	 * say where it came from and how to verify a name instead (tls.c's words). */
	if (rc == CONN_ERR && ep->hint_announced && !ep->tls->sni &&
	    strstr(err, "(IP address mismatch: certificate not valid for ")) {
		size_t n = strlen(err);
		if (n + 1 < errlen)
			(void)snprintf(err + n, errlen - n, "%s", ep->hint_announced);
	}
	return rc;
}

/* Wrap the connected socket in a TLS session, ready for its handshake. */
static int tls_wrap(struct conn *c, const struct endpoint *ep, char *err, size_t errlen)
{
	const struct tls_ops *ops;
	char why[PATH_MAX + 256];

	ops = tlsload(why, sizeof why);
	if (!ops) {
		/* An installation fault of this host (no module beside the binary nor in the
		 * install dir, or one that does not load): 71, as a missing /dev/null; the
		 * server was never asked. */
		log_reason(err, errlen, "TLS support is not available: %s", why);
		conn_fault_note(CONN_FAULT_FINAL | CONN_FAULT_LOCAL);
		return CONN_ERR;
	}
	c->plain_hint = ep->hint_wants_plain ? ep->hint_wants_plain : CONN_HINT_WANTS_PLAIN;
	int why_not = 0;
	c->tls = ops->wrap(c->fd, c->peer, ep->host, ep->tls, &why_not, err, errlen);
	if (!c->tls) {
		note_host_short(errno); /* its files unread for want of a descriptor */
		/* the TLS settings themselves; a file of them unreadable or not of its type
		 * is the user's (66), as a password file that is */
		conn_fault_note(CONN_FAULT_FINAL |
		                (why_not & TLS_FAULT_FILE ? CONN_FAULT_FILE : 0));
		return CONN_ERR;
	}
	c->tls_ops = ops;
	return CONN_OK;
}

/* A TLS handshake met silence: a plaintext Redis keeps a ClientHello as the start of
 * an inline command (its NUL bytes hide any newline) until the line passes 64 KiB
 * (PROTO_INLINE_MAX_SIZE), then answers "-ERR Protocol error: too big inline request";
 * a TLS server paused or busy says nothing either. The session is given up, so the
 * socket may take that much filler: a Redis answers with a RESP error, a TLS server
 * with an alert record or not at all. Bounded by CONN_PROBE_MS (conn.h). */
#define PLAINTEXT_PROBE_BYTES (64 * 1024 + 4096)

/* One step of the probe, never waiting: 1 a plaintext Redis answered, 0 something else
 * answered (an alert) or the peer hung up, CONN_AGAIN not yet (poll c->events). */
static int probe_step(struct conn *c)
{
	static const char filler[4096] = {0};
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	char b;

	if (poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
		return recv(c->fd, &b, 1, 0) == 1 && b == '-';
	while (c->probe_sent < PLAINTEXT_PROBE_BYTES) {
		ssize_t n = send(c->fd, filler, sizeof filler, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			return 0;
		c->probe_sent += (size_t)n;
	}
	c->events = c->probe_sent < PLAINTEXT_PROBE_BYTES ? POLLIN | POLLOUT : POLLIN;
	return CONN_AGAIN;
}

/* The probe's verdict on a silent handshake: a plaintext port is a fault waiting cannot
 * fix (CONN_ERR); anything else may be a TLS server that answers later (CONN_TIMEOUT). */
static int probe_verdict(struct conn *c, int plaintext, const char *waited, char *err,
                         size_t errlen)
{
	c->plaintext = plaintext;
	if (plaintext) {
		conn_fault_note(CONN_FAULT_FINAL);
		log_reason(err, errlen,
		           "TLS handshake with %s: the server answered in plaintext (a Redis "
		           "without TLS on this port?%s",
		           c->peer, c->plain_hint);
		return CONN_ERR;
	}
	conn_fault_note(CONN_FAULT_PASSING);
	log_reason(err, errlen, "TLS handshake with %s: %s (no reply; is it a TLS port?)", c->peer,
	           waited);
	return CONN_TIMEOUT;
}

/* The handshake timed out: probe (blocking, CONN_PROBE_MS at most, and never past
 * cap_ms: none when the caller's deadline is what ended the handshake) whether a
 * plaintext Redis listens there. CONN_TIMEOUT or CONN_ERR. */
static int tls_silence(struct conn *c, int heard, int64_t start, int64_t deadline_ms,
                       int64_t cap_ms, char *err, size_t errlen)
{
	char waited[64];
	int plaintext = 0;

	snprintf(waited, sizeof waited, "timed out after %lld ms", budget_ms(start, deadline_ms));
	if (heard) { /* a TLS server, slow: no probe */
		conn_fault_note(CONN_FAULT_PASSING);
		log_reason(err, errlen, "TLS handshake with %s: %s", c->peer, waited);
		return CONN_TIMEOUT;
	}
	c->probe_sent = 0;
	int64_t end = clock_ms() + CONN_PROBE_MS;
	if (end > cap_ms)
		end = cap_ms;
	for (int64_t left; (left = end - clock_ms()) > 0;) {
		int rc = probe_step(c);
		if (rc != CONN_AGAIN) {
			plaintext = rc;
			break;
		}
		struct pollfd p = {.fd = c->fd, .events = c->events};
		(void)poll(&p, 1, (int)left); /* EINTR, or the time is up: the loop says */
	}
	return probe_verdict(c, plaintext, waited, err, errlen);
}

/* Wrap the connected socket in TLS and drive the handshake until the deadline. */
static int tls_start(struct conn *c, const struct endpoint *ep, int64_t start, int64_t deadline_ms,
                     int64_t cap_ms, char *err, size_t errlen)
{
	const struct tls_ops *ops;
	int rc, w;

	rc = tls_wrap(c, ep, err, errlen);
	if (rc != CONN_OK)
		return rc;
	ops = c->tls_ops;
	for (;;) {
		rc = ops->handshake(c->tls, err, errlen);
		if (rc != CONN_AGAIN)
			return handshake_verdict(ep, rc, err, errlen);
		w = wait_fd(c->fd, ops->events(c->tls), deadline_ms);
		if (w == WAIT_ABORT) {
			log_reason(err, errlen, "TLS handshake with %s: interrupted", c->peer);
			return CONN_ABORT;
		}
		if (w == WAIT_TIMEOUT)
			return tls_silence(c, ops->heard(c->tls), start, deadline_ms, cap_ms, err,
			                   errlen);
		if (w < 0) {
			log_reason(err, errlen, "TLS handshake with %s: poll: %s", c->peer,
			           strerror(errno));
			return CONN_ERR;
		}
	}
}

/* ---- the contract -------------------------------------------------------------- */

int conn_open(struct conn **out, const struct endpoint *ep, int64_t deadline_ms, int64_t cap_ms,
              char *err, size_t errlen)
{
	struct conn *c = NULL;
	int64_t start = clock_ms();
	int rc = CONN_ERR;

	*out = NULL;
	c = calloc(1, sizeof *c);
	if (!c) {
		log_reason(err, errlen, "connect: out of memory");
		goto cleanup;
	}
	c->fd = -1;
	c->events = POLLIN;
	if (ep->path)
		rc = open_unix(c, ep->path, start, deadline_ms, err, errlen);
	else
		rc = open_tcp(c, ep, start, deadline_ms, err, errlen);
	if (rc != CONN_OK)
		goto cleanup;
	if (ep->tls && ep->tls->enabled) {
		rc = tls_start(c, ep, start, deadline_ms, cap_ms, err, errlen);
		if (rc != CONN_OK)
			goto cleanup;
	}
	*out = c;
	c = NULL;
cleanup:
	conn_close(c);
	return rc;
}

/* Start a TCP connect to c->addrs from c->addr on, without waiting: CONN_OK (connected
 * at once), CONN_AGAIN (in progress: POLLOUT) or CONN_ERR (every address refused). */
static int tcp_try(struct conn *c, char *err, size_t errlen)
{
	for (; c->addr < c->addrs.n; c->addr++) {
		const struct sockaddr *sa = (const struct sockaddr *)&c->addrs.a[c->addr].sa;
		int fd = tcp_socket(sa->sa_family);
		if (fd < 0) {
			note_host_short(errno);
			log_reason(err, errlen, "connect to %s: socket: %s", c->peer,
			           strerror(errno));
			continue;
		}
		int now = connect(fd, sa, c->addrs.a[c->addr].len) == 0;
		/* After EINTR the connect carries on in the background, as with EINPROGRESS. */
		if (now || errno == EINPROGRESS || errno == EINTR) {
			/* The addresses share the time left, as in open_tcp(). */
			int64_t t = clock_ms();
			c->addr_until = c->deadline;
			if (c->addr < c->addrs.n - 1 && c->deadline > t)
				c->addr_until = t + (c->deadline - t) / (c->addrs.n - c->addr);
			c->fd = fd;
			c->events = POLLOUT;
			return now ? CONN_OK : CONN_AGAIN;
		}
		log_reason(err, errlen, "connect to %s: %s", c->peer, strerror(errno));
		conn_fault_note(CONN_FAULT_PASSING);
		close(fd);
	}
	return CONN_ERR;
}

int conn_start(struct conn **out, const struct endpoint *ep, int64_t deadline_ms, char *err,
               size_t errlen)
{
	struct conn *c = calloc(1, sizeof *c);
	int rc = CONN_ERR;

	*out = NULL;
	if (!c) {
		log_reason(err, errlen, "connect: out of memory");
		return CONN_ERR;
	}
	c->fd = -1;
	c->events = POLLIN;
	c->ep = ep;
	c->deadline = deadline_ms;
	if (ep->path) {
		/* A Unix connect does not wait (a full backlog is an error here). */
		rc = open_unix(c, ep->path, clock_ms(), clock_ms(), err, errlen);
	} else if (ep->host && *ep->host && tcp_peer(c, ep, err, errlen) == 0) {
		c->addrs = ep->addrs;
		rc = c->addrs.n > 0 ? CONN_OK
		                    : resolve(ep->host, ep->port, &c->addrs, clock_ms(),
		                              deadline_ms, err, errlen);
		if (rc == CONN_OK)
			rc = tcp_try(c, err, errlen);
		c->connecting = 1;
	} else if (!ep->host || !*ep->host) {
		log_reason(err, errlen, "connect: no host given");
	}
	if (rc == CONN_OK || rc == CONN_AGAIN) {
		*out = c;
		return rc == CONN_OK ? conn_continue(c, err, errlen) : rc;
	}
	conn_close(c);
	return rc == CONN_TIMEOUT || rc == CONN_ABORT ? rc : CONN_ERR;
}

int conn_continue(struct conn *c, char *err, size_t errlen)
{
	int soerr = 0, rc;
	socklen_t len = sizeof soerr;

	/* Done already (conn_start finishes a connect that completed at once, as a Unix
	 * socket's does, and the caller goes on as for one in progress): ep is forgotten. */
	if (c->connecting == 0 && !c->ep)
		return CONN_OK;
	while (c->connecting == 1) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		int waiting = poll(&p, 1, 0) == 0;
		if (waiting && (c->addr >= c->addrs.n - 1 || clock_ms() < c->addr_until))
			return CONN_AGAIN;
		if (waiting)
			soerr = ETIMEDOUT; /* its share is spent: the next address */
		else if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr == 0) {
			c->connecting = 0;
			break;
		}
		/* Refused: the host's next address, if any. */
		log_reason(err, errlen, "connect to %s: %s", c->peer, strerror(soerr));
		conn_fault_note(CONN_FAULT_PASSING);
		close(c->fd);
		c->fd = -1;
		c->addr++;
		rc = tcp_try(c, err, errlen);
		if (rc == CONN_ERR)
			return CONN_ERR;
	}
	if (c->connecting == 0 && !c->tls && c->ep->tls && c->ep->tls->enabled) {
		rc = tls_wrap(c, c->ep, err, errlen);
		if (rc != CONN_OK)
			return rc;
		c->connecting = 2;
	}
	if (c->connecting == 3) {
		rc = probe_step(c);
		if (rc == CONN_AGAIN)
			return CONN_AGAIN;
		return probe_verdict(c, rc, "silent", err, errlen);
	}
	if (c->connecting == 2) {
		rc = c->tls_ops->handshake(c->tls, err, errlen);
		if (rc == CONN_AGAIN) {
			c->events = c->tls_ops->events(c->tls);
			return CONN_AGAIN;
		}
		if (rc != CONN_OK)
			return handshake_verdict(c->ep, rc, err, errlen);
	}
	c->connecting = 0;
	c->ep = NULL;
	c->events = POLLIN;
	return CONN_OK;
}

int64_t conn_wake_ms(const struct conn *c)
{
	return c->connecting == 1 && c->addr < c->addrs.n - 1 ? c->addr_until : INT64_MAX;
}

int conn_probe(struct conn *c)
{
	if (c->connecting != 2 || c->tls_ops->heard(c->tls))
		return 0;
	c->connecting = 3;
	c->probe_sent = 0;
	c->events = POLLIN | POLLOUT;
	return 1;
}

int conn_in_tls_handshake(const struct conn *c)
{
	return c->connecting == 2 || c->connecting == 3;
}

int conn_plaintext(const struct conn *c)
{
	return c->plaintext;
}

ssize_t conn_write_some(struct conn *c, const void *buf, size_t len, char *err, size_t errlen)
{
	ssize_t n;

	if (len == 0)
		return 0;
	if (c->tls) {
		n = c->tls_ops->write_some(c->tls, buf, len, err, errlen);
		if (n == CONN_AGAIN)
			c->events = c->tls_ops->events(c->tls);
		return n;
	}
	do
		n = send(c->fd, buf, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		c->events = POLLOUT;
		return CONN_AGAIN;
	}
	log_reason(err, errlen, "write to %s: %s", c->peer, strerror(errno));
	return CONN_ERR;
}

ssize_t conn_read_some(struct conn *c, void *buf, size_t cap, char *err, size_t errlen)
{
	ssize_t n;

	if (cap == 0)
		return 0;
	if (c->tls) {
		n = c->tls_ops->read_some(c->tls, buf, cap, err, errlen);
		if (n == CONN_AGAIN)
			c->events = c->tls_ops->events(c->tls);
		return n;
	}
	do
		n = recv(c->fd, buf, cap, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	if (n == 0)
		return CONN_EOF;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		c->events = POLLIN;
		return CONN_AGAIN;
	}
	log_reason(err, errlen, "read from %s: %s", c->peer, strerror(errno));
	return CONN_ERR;
}

short conn_events(const struct conn *c)
{
	return c->events;
}

int conn_fd(const struct conn *c)
{
	return c->fd;
}

int conn_pending(const struct conn *c)
{
	return c->tls && c->tls_ops->pending(c->tls);
}

int conn_write_all(struct conn *c, const void *buf, size_t len, int64_t deadline_ms, char *err,
                   size_t errlen)
{
	const char *p = buf;
	int64_t start = clock_ms();
	ssize_t n;
	int w;

	while (len > 0) {
		n = conn_write_some(c, p, len, err, errlen);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n != CONN_AGAIN)
			return CONN_ERR;
		w = wait_fd(c->fd, c->events, deadline_ms);
		if (w == WAIT_ABORT) {
			log_reason(err, errlen, "write to %s: interrupted", c->peer);
			return CONN_ABORT;
		}
		if (w == WAIT_TIMEOUT) {
			log_reason(err, errlen, "write to %s: timed out after %lld ms", c->peer,
			           budget_ms(start, deadline_ms));
			return CONN_TIMEOUT;
		}
		if (w < 0) {
			log_reason(err, errlen, "write to %s: poll: %s", c->peer, strerror(errno));
			return CONN_ERR;
		}
	}
	return CONN_OK;
}

ssize_t conn_read(struct conn *c, void *buf, size_t cap, int64_t deadline_ms, char *err,
                  size_t errlen)
{
	int64_t start = clock_ms();
	ssize_t n;
	int w;

	for (;;) {
		/* Try first: TLS may hold decrypted bytes that poll() cannot see. */
		n = conn_read_some(c, buf, cap, err, errlen);
		if (n != CONN_AGAIN)
			return n;
		conn_idle_now();
		w = wait_fd(c->fd, c->events, deadline_ms);
		if (w == WAIT_ABORT) {
			log_reason(err, errlen, "read from %s: interrupted", c->peer);
			return CONN_ABORT;
		}
		if (w == WAIT_TIMEOUT) {
			log_reason(err, errlen, "read from %s: timed out after %lld ms", c->peer,
			           budget_ms(start, deadline_ms));
			return CONN_TIMEOUT;
		}
		if (w < 0) {
			log_reason(err, errlen, "read from %s: poll: %s", c->peer, strerror(errno));
			return CONN_ERR;
		}
	}
}

void conn_close(struct conn *c)
{
	if (!c)
		return;
	/* One non-blocking close_notify at most; never waits for the peer's. */
	if (c->tls)
		c->tls_ops->close(c->tls);
	/* Linux frees the descriptor even when close() says EINTR: never retry. */
	if (c->fd >= 0)
		(void)close(c->fd);
	free(c);
}
