/* Sockets and TLS: the one file that talks to the network and to OpenSSL.
 *
 * Everything is non-blocking; the only waits are poll() calls bounded by an absolute
 * CLOCK_MONOTONIC deadline. SIGPIPE cannot fire from here: plain writes use
 * send(MSG_NOSIGNAL), and TLS goes through a small BIO of our own that does the same
 * (OpenSSL's socket BIO writes with write(), which would raise SIGPIPE). */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

struct conn {
	int fd;
	SSL *ssl;       /* NULL for a plain connection */
	short events;   /* what the last CONN_AGAIN waits for */
	int tls_ready;  /* handshake completed */
	int tls_broken; /* fatal TLS error: OpenSSL forbids SSL_shutdown afterwards */
	int sys_errno;  /* errno of the last failed send/recv inside our BIO */
	int heard;      /* the peer has sent us at least one byte */
	char peer[320]; /* "host:port", "[v6]:port" or the socket path */
};

static BIO_METHOD *bio_method;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

/* One cached SSL_CTX. Loading the system trust store costs 30-40 ms; without the cache
 * a Redlock over N servers and every reconnect of the renewal thread would pay it
 * again. It is rebuilt after CTX_CACHE_MS so rotated certificates are picked up. */
#define CTX_CACHE_MS 60000
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	SSL_CTX *ctx;
	int64_t born;
	int insecure;
	char *file[4]; /* cacert, cacertdir, cert, key */
} ctx_cache;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	/* Truncating a diagnostic is harmless; it stays NUL-terminated. */
	(void)vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int64_t clock_ms(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer; wall-clock jumps
	 * must never move a deadline. */
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events or the deadline passes: 1 ready, 0 timed out,
 * -1 poll failed (errno). Readiness includes POLLERR/POLLHUP: the next I/O call
 * reports the actual error. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	int64_t left;
	int rc;

	for (;;) {
		left = deadline_ms - clock_ms();
		if (left <= 0)
			return 0;
		rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (rc > 0)
			return 1;
		/* rc == 0: poll may wake a little early; the clock decides. */
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

static long long budget_ms(int64_t start, int64_t deadline_ms)
{
	return deadline_ms > start ? (long long)(deadline_ms - start) : 0;
}

/* ---- plain sockets ------------------------------------------------------------- */

/* Connect fd before the deadline: CONN_OK, CONN_TIMEOUT or CONN_ERR with errno set. */
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
		(void)poll(NULL, 0, left < 10 ? (int)left : 10);
	}
	/* After EINTR the connection carries on in the background, as with EINPROGRESS;
	 * calling connect() again would only say EALREADY. */
	if (errno != EINPROGRESS && errno != EINTR)
		return CONN_ERR;
	rc = wait_fd(fd, POLLOUT, deadline_ms);
	if (rc == 0)
		return CONN_TIMEOUT;
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
		set_err(err, errlen, "unix socket path %s: must be 1 to %zu bytes long",
		        *path ? path : "(empty)", sizeof sun.sun_path - 1);
		goto cleanup;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	n = snprintf(c->peer, sizeof c->peer, "%s", path);
	if (n < 0 || (size_t)n >= sizeof c->peer) {
		set_err(err, errlen, "unix socket path too long");
		goto cleanup;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		set_err(err, errlen, "connect to %s: socket: %s", c->peer, strerror(errno));
		goto cleanup;
	}
	rc = connect_fd(fd, (const struct sockaddr *)&sun, sizeof sun, deadline_ms);
	if (rc == CONN_TIMEOUT)
		set_err(err, errlen, "connect to %s: timed out after %lld ms", c->peer,
		        budget_ms(start, deadline_ms));
	else if (rc != CONN_OK)
		set_err(err, errlen, "connect to %s: %s", c->peer, strerror(errno));
	else {
		c->fd = fd;
		fd = -1;
	}
cleanup:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Resolve host; *numeric tells whether it was an IP literal (then no DNS was used). */
static int resolve(const char *host, int port, struct addrinfo **res, int *numeric, char *err,
                   size_t errlen)
{
	struct addrinfo hints;
	char service[8];
	int rc;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
	(void)snprintf(service, sizeof service, "%d", port);
	rc = getaddrinfo(host, service, &hints, res);
	*numeric = rc == 0;
	if (rc == EAI_NONAME) {
		/* A name: the resolver has no deadline of its own, so this lookup is the one
		 * step the caller's deadline cannot bound. No AI_ADDRCONFIG: it hides ::1 on
		 * hosts whose only IPv6 address is loopback. */
		hints.ai_flags = AI_NUMERICSERV;
		rc = getaddrinfo(host, service, &hints, res);
	}
	if (rc != 0) {
		set_err(err, errlen, "resolve %s: %s", host,
		        rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		*res = NULL;
		return CONN_ERR;
	}
	return CONN_OK;
}

static int open_tcp(struct conn *c, const char *host, int port, int64_t start, int64_t deadline_ms,
                    char *err, size_t errlen)
{
	struct addrinfo *res = NULL, *ai;
	char addr[NI_MAXHOST], what[NI_MAXHOST + 4];
	int numeric = 0, rc = CONN_ERR, one = 1, fd, saved, n;

	if (!host || !*host) {
		set_err(err, errlen, "connect: no host given");
		goto cleanup;
	}
	/* IPv6 literals get brackets so the port stays readable. */
	n = snprintf(c->peer, sizeof c->peer, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
	if (n < 0 || (size_t)n >= sizeof c->peer) {
		set_err(err, errlen, "connect: host name too long");
		goto cleanup;
	}
	if (port < 1 || port > 65535) {
		set_err(err, errlen, "connect to %s: port out of range", c->peer);
		goto cleanup;
	}
	rc = resolve(host, port, &res, &numeric, err, errlen);
	if (rc != CONN_OK)
		goto cleanup;
	rc = CONN_ERR;
	set_err(err, errlen, "connect to %s: no address", c->peer);
	for (ai = res; ai; ai = ai->ai_next) {
		/* For a name, say which of its addresses failed. */
		what[0] = '\0';
		if (!numeric && getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof addr, NULL, 0,
		                            NI_NUMERICHOST) == 0)
			(void)snprintf(what, sizeof what, " (%s)", addr);
		if (clock_ms() >= deadline_ms) {
			rc = CONN_TIMEOUT;
			set_err(err, errlen, "connect to %s%s: timed out after %lld ms", c->peer,
			        what, budget_ms(start, deadline_ms));
			goto cleanup;
		}
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		            ai->ai_protocol);
		if (fd < 0) {
			set_err(err, errlen, "connect to %s%s: socket: %s", c->peer, what,
			        strerror(errno));
			continue;
		}
		/* Commands are small and latency-bound: never hold them back for Nagle. */
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
			saved = errno;
			close(fd);
			set_err(err, errlen, "connect to %s%s: TCP_NODELAY: %s", c->peer, what,
			        strerror(saved));
			continue;
		}
		rc = connect_fd(fd, ai->ai_addr, ai->ai_addrlen, deadline_ms);
		if (rc == CONN_OK) {
			c->fd = fd;
			goto cleanup;
		}
		saved = errno;
		close(fd);
		if (rc == CONN_TIMEOUT) {
			/* The whole budget is spent; later addresses would get none of it. */
			set_err(err, errlen, "connect to %s%s: timed out after %lld ms", c->peer,
			        what, budget_ms(start, deadline_ms));
			goto cleanup;
		}
		set_err(err, errlen, "connect to %s%s: %s", c->peer, what, strerror(saved));
	}
cleanup:
	if (res)
		freeaddrinfo(res);
	return rc;
}

/* ---- TLS ----------------------------------------------------------------------- */

/* Our BIO: the socket BIO's job, but with send(MSG_NOSIGNAL), EINTR retried, and the
 * errno kept in the conn (OpenSSL may clobber errno before the caller looks). */
static int bio_write(BIO *b, const char *buf, int len)
{
	struct conn *c = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = send(c->fd, buf, (size_t)len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		c->sys_errno = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->sys_errno = 0;
			BIO_set_retry_write(b);
		}
		return -1;
	}
	return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
	struct conn *c = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = recv(c->fd, buf, (size_t)len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		c->sys_errno = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->sys_errno = 0;
			BIO_set_retry_read(b);
		}
		return -1;
	}
	if (n > 0)
		c->heard = 1;
	return (int)n; /* 0: end of stream */
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct conn *c = BIO_get_data(b);

	(void)num;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		/* Nothing is buffered here; OpenSSL treats a 0 from flush as failure. */
		return 1;
	case BIO_C_GET_FD:
		if (!c)
			return -1;
		if (ptr)
			*(int *)ptr = c->fd;
		return c->fd;
	default:
		return 0;
	}
}

static void tls_init_once(void)
{
	BIO_METHOD *m = NULL;
	int idx;

	(void)OPENSSL_init_ssl(0, NULL);
	idx = BIO_get_new_index();
	if (idx == -1)
		goto cleanup;
	m = BIO_meth_new(idx | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "rlock socket");
	if (!m)
		goto cleanup;
	if (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
	    !BIO_meth_set_ctrl(m, bio_ctrl))
		goto cleanup;
	bio_method = m;
	m = NULL;
cleanup:
	if (m)
		BIO_meth_free(m);
}

void conn_tls_init(void)
{
	/* pthread_once: conn_open() calls this too, so a forgotten early call is harmless. */
	(void)pthread_once(&tls_once, tls_init_once);
}

/* The most useful OpenSSL error text for the queue's oldest entry, or NULL. */
static const char *ssl_queue_reason(char *buf, size_t len)
{
	unsigned long e = ERR_peek_error();
	const char *r;

	if (e == 0)
		return NULL;
	/* Missing or unreadable files come as system errors: say what errno says. */
	if (ERR_GET_LIB(e) == ERR_LIB_SYS && ERR_GET_REASON(e) != 0)
		return strerror(ERR_GET_REASON(e));
	r = ERR_reason_error_string(e);
	if (r)
		return r;
	ERR_error_string_n(e, buf, len);
	return buf;
}

/* A passphrase-protected key must fail, not prompt: rlock runs from cron and CI.
 * Noting the request lets the error say why the key did not load. */
static int no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(int *)userdata = 1;
	return 0;
}

static SSL_CTX *tls_ctx_new(const struct tls_opts *t, char *err, size_t errlen)
{
	SSL_CTX *ctx = NULL, *ret = NULL;
	const char *key = t->key ? t->key : t->cert; /* one PEM may hold both */
	const char *r;
	struct stat st;
	char buf[256];
	int asked = 0;

	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		set_err(err, errlen, "TLS: cannot create context: %s",
		        (r = ssl_queue_reason(buf, sizeof buf)) ? r : "out of memory");
		goto cleanup;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		set_err(err, errlen, "TLS: cannot require TLS 1.2");
		goto cleanup;
	}
	/* Partial writes suit write_some(); a moving buffer lets callers retry from a
	 * reallocated buffer holding the same bytes. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	/* Redis often closes without close_notify. RESP frames itself, so a truncated
	 * reply is caught by the parser: report plain EOF, as OpenSSL 1.1.1 does. */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);
	if (t->insecure) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		/* OpenSSL reads a CA directory lazily and would report a missing one only
		 * as "unable to get local issuer certificate" later. */
		if (t->cacertdir && stat(t->cacertdir, &st) < 0) {
			set_err(err, errlen, "TLS: CA directory %s: %s", t->cacertdir,
			        strerror(errno));
			goto cleanup;
		}
		if (t->cacertdir && !S_ISDIR(st.st_mode)) {
			set_err(err, errlen, "TLS: CA directory %s: not a directory", t->cacertdir);
			goto cleanup;
		}
		if (t->cacert || t->cacertdir) {
			if (SSL_CTX_load_verify_locations(ctx, t->cacert, t->cacertdir) != 1) {
				set_err(err, errlen, "TLS: cannot load CA certificates from %s: %s",
				        t->cacert ? t->cacert : t->cacertdir,
				        (r = ssl_queue_reason(buf, sizeof buf)) ? r
				                                                : "unknown error");
				goto cleanup;
			}
		} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			set_err(err, errlen, "TLS: cannot load the system trust store: %s",
			        (r = ssl_queue_reason(buf, sizeof buf)) ? r : "unknown error");
			goto cleanup;
		}
	}
	if (t->key && !t->cert) {
		set_err(err, errlen, "TLS: a client key (%s) needs a client certificate", t->key);
		goto cleanup;
	}
	if (t->cert) {
		if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
			set_err(err, errlen, "TLS: cannot load client certificate %s: %s", t->cert,
			        (r = ssl_queue_reason(buf, sizeof buf)) ? r : "unknown error");
			goto cleanup;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
			set_err(
			    err, errlen, "TLS: cannot load client key %s: %s", key,
			    asked ? "it is encrypted (passphrase-protected keys are not supported)"
			    : (r = ssl_queue_reason(buf, sizeof buf)) ? r
			                                              : "unknown error");
			goto cleanup;
		}
		if (SSL_CTX_check_private_key(ctx) != 1) {
			set_err(err, errlen, "TLS: client key %s does not match certificate %s",
			        key, t->cert);
			goto cleanup;
		}
	}
	/* The callback's userdata points at this stack frame: unhook it. */
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	ret = ctx;
	ctx = NULL;
cleanup:
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return ret;
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* A context for these options, cached or new; the caller owns one reference. */
static SSL_CTX *tls_ctx_get(const struct tls_opts *t, char *err, size_t errlen)
{
	const char *want[4] = {t->cacert, t->cacertdir, t->cert, t->key};
	char *copy[4] = {NULL, NULL, NULL, NULL};
	SSL_CTX *ctx = NULL;
	int i, hit;

	(void)pthread_mutex_lock(&ctx_lock);
	hit = ctx_cache.ctx && clock_ms() - ctx_cache.born < CTX_CACHE_MS &&
	      ctx_cache.insecure == !!t->insecure;
	for (i = 0; hit && i < 4; i++)
		hit = same_str(ctx_cache.file[i], want[i]);
	if (hit && SSL_CTX_up_ref(ctx_cache.ctx) == 1) {
		ctx = ctx_cache.ctx;
		goto cleanup;
	}
	ctx = tls_ctx_new(t, err, errlen);
	if (!ctx)
		goto cleanup;
	for (i = 0; i < 4; i++)
		if (want[i] && !(copy[i] = strdup(want[i])))
			goto cleanup; /* no memory to cache: still usable */
	if (SSL_CTX_up_ref(ctx) != 1)
		goto cleanup;
	SSL_CTX_free(ctx_cache.ctx); /* conns still using it hold their own reference */
	ctx_cache.ctx = ctx;
	ctx_cache.born = clock_ms();
	ctx_cache.insecure = !!t->insecure;
	for (i = 0; i < 4; i++) {
		free(ctx_cache.file[i]);
		ctx_cache.file[i] = copy[i];
		copy[i] = NULL;
	}
cleanup:
	(void)pthread_mutex_unlock(&ctx_lock);
	for (i = 0; i < 4; i++)
		free(copy[i]);
	return ctx;
}

/* Why the last SSL_* call failed with SSL_get_error() == e, as one phrase. */
static const char *tls_reason(const struct conn *c, int e, char *buf, size_t len)
{
	const char *r;

	if (e == SSL_ERROR_ZERO_RETURN)
		return "connection closed by peer";
	if (e == SSL_ERROR_SYSCALL && c->sys_errno != 0)
		return strerror(c->sys_errno);
	r = ssl_queue_reason(buf, len);
	if (r)
		return r;
	if (e == SSL_ERROR_SYSCALL)
		return "connection closed by peer";
	(void)snprintf(buf, len, "TLS error %d", e);
	return buf;
}

/* Does the queued error say the bytes we got were not TLS records? */
static int plaintext_reply(void)
{
	unsigned long e = ERR_peek_error();
	int r = ERR_GET_REASON(e);

	return ERR_GET_LIB(e) == ERR_LIB_SSL &&
	       (r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_PACKET_LENGTH_TOO_LONG);
}

static int is_ip_literal(const char *s)
{
	unsigned char a[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static int tls_handshake(struct conn *c, const char *name, int verify, int64_t start,
                         int64_t deadline_ms, char *err, size_t errlen)
{
	X509 *cert = NULL;
	long vr;
	char buf[256];
	int rc = CONN_ERR, r, e, w, mismatch;

	for (;;) {
		ERR_clear_error();
		c->sys_errno = 0;
		r = SSL_connect(c->ssl);
		if (r == 1)
			break;
		e = SSL_get_error(c->ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
			c->tls_broken = 1;
			vr = SSL_get_verify_result(c->ssl);
			/* The verify result names the cause; the error queue only says "certificate
			 * verify failed". For a name mismatch, also say which name was expected. */
			mismatch = vr == X509_V_ERR_HOSTNAME_MISMATCH ||
			           vr == X509_V_ERR_IP_ADDRESS_MISMATCH;
			if (verify && vr != X509_V_OK)
				set_err(err, errlen,
				        "TLS handshake with %s: certificate verify failed (%s%s%s)",
				        c->peer, X509_verify_cert_error_string(vr),
				        mismatch ? ": certificate not valid for " : "",
				        mismatch ? name : "");
			else
				set_err(err, errlen, "TLS handshake with %s: %s%s", c->peer,
				        tls_reason(c, e, buf, sizeof buf),
				        plaintext_reply() ? " (is it a TLS port?)" : "");
			goto cleanup;
		}
		w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms);
		if (w == 0) {
			rc = CONN_TIMEOUT;
			/* A plaintext Redis swallows a ClientHello silently, waiting for a
			 * newline: silence is the usual sign of a non-TLS port. */
			set_err(err, errlen, "TLS handshake with %s: timed out after %lld ms%s",
			        c->peer, budget_ms(start, deadline_ms),
			        c->heard ? "" : " (no reply; is it a TLS port?)");
			goto cleanup;
		}
		if (w < 0) {
			set_err(err, errlen, "TLS handshake with %s: poll: %s", c->peer,
			        strerror(errno));
			goto cleanup;
		}
	}
	if (verify) {
		/* Belt and braces: X509_V_OK is also what a peer without a certificate
		 * leaves behind. */
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
		cert = SSL_get1_peer_certificate(c->ssl);
#else
		cert = SSL_get_peer_certificate(c->ssl);
#endif
		vr = SSL_get_verify_result(c->ssl);
		if (!cert || vr != X509_V_OK) {
			set_err(err, errlen,
			        "TLS handshake with %s: certificate verify failed (%s)", c->peer,
			        cert ? X509_verify_cert_error_string(vr) : "no certificate");
			goto cleanup;
		}
	}
	c->tls_ready = 1;
	rc = CONN_OK;
cleanup:
	X509_free(cert);
	ERR_clear_error();
	return rc;
}

static int tls_start(struct conn *c, const struct endpoint *ep, int64_t start, int64_t deadline_ms,
                     char *err, size_t errlen)
{
	const struct tls_opts *t = ep->tls;
	const char *name = t->sni ? t->sni : ep->host;
	SSL_CTX *ctx = NULL;
	BIO *bio = NULL;
	int rc = CONN_ERR, ip;

	conn_tls_init();
	if (!bio_method) {
		set_err(err, errlen, "TLS: cannot initialise OpenSSL");
		goto cleanup;
	}
	if (!name && !t->insecure) {
		/* No name, nothing to check the certificate against: refuse rather than
		 * accept any certificate from a trusted CA. */
		set_err(err, errlen, "TLS over %s: a server name to verify (--sni) is required",
		        c->peer);
		goto cleanup;
	}
	ctx = tls_ctx_get(t, err, errlen);
	if (!ctx)
		goto cleanup;
	c->ssl = SSL_new(ctx);
	bio = BIO_new(bio_method);
	if (!c->ssl || !bio) {
		set_err(err, errlen, "TLS: out of memory");
		goto cleanup;
	}
	BIO_set_data(bio, c);
	BIO_set_init(bio, 1);
	SSL_set_bio(c->ssl, bio, bio); /* one reference, now owned by the SSL */
	bio = NULL;
	ip = name && is_ip_literal(name);
	/* SNI carries host names only (RFC 6066); an IP literal there is a protocol
	 * error some servers reject. */
	if (name && !ip && SSL_set_tlsext_host_name(c->ssl, name) != 1) {
		set_err(err, errlen, "TLS: invalid server name %s", name);
		goto cleanup;
	}
	if (!t->insecure) {
		if (ip) {
			if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), name) != 1) {
				set_err(err, errlen, "TLS: cannot verify IP address %s", name);
				goto cleanup;
			}
		} else {
			SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			if (SSL_set1_host(c->ssl, name) != 1) {
				set_err(err, errlen, "TLS: cannot verify host name %s", name);
				goto cleanup;
			}
		}
	}
	SSL_set_connect_state(c->ssl);
	rc = tls_handshake(c, name, !t->insecure, start, deadline_ms, err, errlen);
cleanup:
	BIO_free(bio);
	SSL_CTX_free(ctx); /* the SSL keeps its own reference */
	ERR_clear_error();
	return rc;
}

/* ---- the contract -------------------------------------------------------------- */

int conn_open(struct conn **out, const struct endpoint *ep, int64_t deadline_ms, char *err,
              size_t errlen)
{
	struct conn *c = NULL;
	int64_t start = clock_ms();
	int rc = CONN_ERR;

	*out = NULL;
	c = calloc(1, sizeof *c);
	if (!c) {
		set_err(err, errlen, "connect: out of memory");
		goto cleanup;
	}
	c->fd = -1;
	c->events = POLLIN;
	if (ep->path)
		rc = open_unix(c, ep->path, start, deadline_ms, err, errlen);
	else
		rc = open_tcp(c, ep->host, ep->port, start, deadline_ms, err, errlen);
	if (rc != CONN_OK)
		goto cleanup;
	if (ep->tls && ep->tls->enabled) {
		rc = tls_start(c, ep, start, deadline_ms, err, errlen);
		if (rc != CONN_OK)
			goto cleanup;
	}
	*out = c;
	c = NULL;
cleanup:
	conn_close(c);
	return rc;
}

/* With TLS 1.3 the server judges our client certificate only after the handshake; it
 * sends an alert and closes, and our next write meets a reset. The alert is usually
 * still queued on our side and says far more ("certificate required", "unknown ca")
 * than "Connection reset by peer": fetch it into buf. */
static int peer_alert(struct conn *c, char *buf, size_t len)
{
	char byte;
	unsigned long e;
	int found = 0;

	if (c->sys_errno != ECONNRESET && c->sys_errno != EPIPE)
		return 0;
	ERR_clear_error();
	if (SSL_peek(c->ssl, &byte, 1) > 0)
		goto cleanup;
	e = ERR_peek_error();
	if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET &&
	    ERR_reason_error_string(e)) {
		(void)snprintf(buf, len, "%s", ERR_reason_error_string(e));
		found = 1;
	}
cleanup:
	ERR_clear_error();
	return found;
}

ssize_t conn_write_some(struct conn *c, const void *buf, size_t len, char *err, size_t errlen)
{
	char ebuf[256];
	ssize_t n;
	int e;

	if (len == 0)
		return 0;
	if (!c->ssl) {
		do
			n = send(c->fd, buf, len, MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		if (n >= 0)
			return n;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->events = POLLOUT;
			return CONN_AGAIN;
		}
		set_err(err, errlen, "write to %s: %s", c->peer, strerror(errno));
		return CONN_ERR;
	}
	if (c->tls_broken) {
		set_err(err, errlen, "write to %s: TLS session failed earlier", c->peer);
		return CONN_ERR;
	}
	ERR_clear_error();
	c->sys_errno = 0;
	n = SSL_write(c->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (n > 0)
		return n;
	e = SSL_get_error(c->ssl, (int)n);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		c->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return CONN_AGAIN;
	}
	if (e == SSL_ERROR_SYSCALL && peer_alert(c, ebuf, sizeof ebuf)) {
		c->tls_broken = 1;
		set_err(err, errlen, "write to %s: %s", c->peer, ebuf);
		return CONN_ERR;
	}
	if (e != SSL_ERROR_ZERO_RETURN)
		c->tls_broken = 1;
	set_err(err, errlen, "write to %s: %s", c->peer, tls_reason(c, e, ebuf, sizeof ebuf));
	ERR_clear_error();
	return CONN_ERR;
}

ssize_t conn_read_some(struct conn *c, void *buf, size_t cap, char *err, size_t errlen)
{
	char ebuf[256];
	ssize_t n;
	int e;

	if (cap == 0)
		return 0;
	if (!c->ssl) {
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
		set_err(err, errlen, "read from %s: %s", c->peer, strerror(errno));
		return CONN_ERR;
	}
	if (c->tls_broken) {
		set_err(err, errlen, "read from %s: TLS session failed earlier", c->peer);
		return CONN_ERR;
	}
	ERR_clear_error();
	c->sys_errno = 0;
	n = SSL_read(c->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
	if (n > 0)
		return n;
	e = SSL_get_error(c->ssl, (int)n);
	switch (e) {
	case SSL_ERROR_WANT_READ:
		c->events = POLLIN;
		return CONN_AGAIN;
	case SSL_ERROR_WANT_WRITE:
		c->events = POLLOUT;
		return CONN_AGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return CONN_EOF;
	case SSL_ERROR_SYSCALL:
		/* OpenSSL 1.1.1's way of saying the peer closed without close_notify. */
		if (c->sys_errno == 0 && ERR_peek_error() == 0) {
			c->tls_broken = 1;
			return CONN_EOF;
		}
		break;
	default:
		break;
	}
	c->tls_broken = 1;
	set_err(err, errlen, "read from %s: %s", c->peer, tls_reason(c, e, ebuf, sizeof ebuf));
	ERR_clear_error();
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
	return c->ssl && SSL_pending(c->ssl) > 0;
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
		if (w == 0) {
			set_err(err, errlen, "write to %s: timed out after %lld ms", c->peer,
			        budget_ms(start, deadline_ms));
			return CONN_TIMEOUT;
		}
		if (w < 0) {
			set_err(err, errlen, "write to %s: poll: %s", c->peer, strerror(errno));
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
		w = wait_fd(c->fd, c->events, deadline_ms);
		if (w == 0) {
			set_err(err, errlen, "read from %s: timed out after %lld ms", c->peer,
			        budget_ms(start, deadline_ms));
			return CONN_TIMEOUT;
		}
		if (w < 0) {
			set_err(err, errlen, "read from %s: poll: %s", c->peer, strerror(errno));
			return CONN_ERR;
		}
	}
}

void conn_close(struct conn *c)
{
	if (!c)
		return;
	if (c->ssl) {
		/* One non-blocking close_notify, so the server logs a clean close; never
		 * wait for the peer's. */
		if (c->tls_ready && !c->tls_broken) {
			ERR_clear_error();
			(void)SSL_shutdown(c->ssl);
		}
		SSL_free(c->ssl);
		ERR_clear_error();
	}
	/* Linux frees the descriptor even when close() says EINTR: never retry. */
	if (c->fd >= 0)
		(void)close(c->fd);
	free(c);
}

const char *conn_peer(const struct conn *c)
{
	return c->peer;
}
