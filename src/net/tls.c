/* SPDX-License-Identifier: MIT */
/* TLS over rlock's sockets: the one file that includes OpenSSL. It is built as the
 * module rlock-tls.so, which tlsload.c loads only when a connection wants TLS, so
 * plain connections never pay for relocating libssl and libcrypto (see tls.h).
 *
 * Nothing here blocks or waits: conn.c owns the socket, the deadlines and poll().
 * SIGPIPE cannot fire from here: TLS goes through a small BIO of our own that writes
 * with send(MSG_NOSIGNAL) (OpenSSL's socket BIO writes with write()). */
#include "tls.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "clock.h"
#include "exitcodes.h" /* rl_ex_host_short */
#include "log.h"       /* log_reason */

struct tls_session {
	int fd; /* owned by the caller */
	SSL *ssl;
	short events;   /* what the last CONN_AGAIN waits for */
	int verify;     /* check the chain and the name */
	int own_ca;     /* the chain is checked against --cacert (1) or only --cacertdir (2) */
	int tls_ready;  /* handshake completed */
	int tls_broken; /* fatal TLS error: OpenSSL forbids SSL_shutdown afterwards */
	int asked_cert; /* the server asked for a client certificate and we had none */
	char *cert;     /* --cert, the client certificate we present, or NULL */
	int sys_errno;  /* errno of the last failed send/recv inside our BIO */
	int heard;      /* the peer has sent us at least one byte */
	char *name;     /* the name the certificate must match, or NULL */
	char peer[320]; /* for messages */
};

/* A chain that ends at a CA nobody named: the server's CA is a private one, which the
 * system's trust store does not hold (--cacert names it), or not the one --cacert
 * names; or a CRL missing where --cacert's CRLs asked for one (load_ca_bundle). Empty
 * for any other verify result. */
static const char *ca_hint(const struct tls_session *s, long vr)
{
	switch (vr) {
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
		/* A --cacertdir is searched by hash name only: a CA copied in without
		 * `openssl rehash` is not found. */
		return s->own_ca == 1 ? "; is --cacert the CA that signed the server's certificate?"
		       : s->own_ca    ? "; does --cacertdir hold the CA that signed the server's "
		                        "certificate, under its hash name (openssl rehash DIR)?"
		                      : "; a private CA? name its certificate with --cacert FILE";
	case X509_V_ERR_UNABLE_TO_GET_CRL:
		return s->own_ca == 1 ? "; --cacert holds revocation lists, so the server "
		                        "certificate's issuer needs one there"
		                      : "; --cacertdir holds revocation lists (HASH.rN), so the "
		                        "server certificate's issuer needs one there";
	default:
		return "";
	}
}

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

/* Our BIO: the socket BIO's job, but with send(MSG_NOSIGNAL), EINTR retried, and the
 * errno kept in the session (OpenSSL may clobber errno before the caller looks). */
static int bio_write(BIO *b, const char *buf, int len)
{
	struct tls_session *s = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = send(s->fd, buf, (size_t)len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		s->sys_errno = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			s->sys_errno = 0;
			BIO_set_retry_write(b);
		}
		return -1;
	}
	return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
	struct tls_session *s = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = recv(s->fd, buf, (size_t)len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		s->sys_errno = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			s->sys_errno = 0;
			BIO_set_retry_read(b);
		}
		return -1;
	}
	if (n > 0)
		s->heard = 1;
	return (int)n; /* 0: end of stream */
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_session *s = BIO_get_data(b);

	(void)num;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		/* Nothing is buffered here; OpenSSL treats a 0 from flush as failure. */
		return 1;
	case BIO_C_GET_FD:
		if (!s)
			return -1;
		if (ptr)
			*(int *)ptr = s->fd;
		return s->fd;
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

/* A file the user named (--cacert, --cacert-dir, --cert, --tls-key) that cannot be read
 * or is not of its type: set by the loaders below, for this thread's wrap() to tell its
 * caller (TLS_FAULT_FILE, tls.h: exit 66 as any such file, not a server's fault). */
static __thread int file_fault;

/* What a TLS file may weigh: a CA bundle of the whole web is some 200 KiB. More is
 * refused, never cut. */
#define TLS_FILE_MAX (16 << 20)

/* The contents of a PEM file the user named, read by rlock itself rather than by
 * OpenSSL from its path: opened without blocking (a FIFO put there would hang every
 * later renewal that reloads it), checked to be a regular file, read from the one
 * descriptor it was checked on. A memory BIO over them, or NULL with the reason. */
static BIO *read_pem(const char *what, const char *path, char *err, size_t errlen)
{
	struct stat st = {0};
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	BIO *b = NULL;
	char *data = NULL;

	if (fd < 0) {
		int e = errno;
		log_reason(err, errlen, "TLS: cannot read %s %s: %s", what, path, strerror(e));
		file_fault = !rl_ex_host_short(e); /* short of descriptors: the host's (71) */
		errno = e;
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > TLS_FILE_MAX) {
		log_reason(err, errlen, "TLS: %s %s: %s", what, path,
		           S_ISDIR(st.st_mode)    ? "is a directory"
		           : !S_ISREG(st.st_mode) ? "is not a regular file"
		                                  : "larger than 16 MiB");
		file_fault = 1;
		goto done;
	}
	data = malloc((size_t)st.st_size + 1);
	if (!data) {
		log_reason(err, errlen, "TLS: %s %s: out of memory", what, path);
		goto done;
	}
	ssize_t got = 0, r = 1;
	while (got < st.st_size && (r = read(fd, data + got, (size_t)(st.st_size - got))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			log_reason(err, errlen, "TLS: cannot read %s %s: %s", what, path,
			           strerror(errno));
			file_fault = 1;
			goto done;
		}
		got += r;
	}
	/* A copy of its own (BIO_new_mem_buf would borrow data, freed below). */
	b = BIO_new(BIO_s_mem());
	if (!b || BIO_write(b, data, (int)got) != (int)got) {
		BIO_free(b);
		b = NULL;
		log_reason(err, errlen, "TLS: %s %s: out of memory", what, path);
	}
done:
	if (data) {
		OPENSSL_cleanse(data, (size_t)st.st_size); /* a private key, maybe */
		free(data);
	}
	close(fd);
	return b;
}

/* The CA certificates of a bundle into the context's store: 0, or -1 with the reason.
 * CRLs in it are checked: a revocation list the user put beside the CA is meant to
 * apply (OpenSSL would keep it in the store and consult it never). The server's
 * certificate then needs its issuer's CRL there, as curl --crlfile has it. */
static int load_ca_bundle(SSL_CTX *ctx, const char *path, char *err, size_t errlen)
{
	const char *r;
	char buf[256];
	int added = 0, crls = 0, rc = -1;
	BIO *b = read_pem("CA bundle", path, err, errlen);

	if (!b)
		return -1;
	STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(b, NULL, NULL, NULL);
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	for (int i = 0; infos && i < sk_X509_INFO_num(infos); i++) {
		X509_INFO *xi = sk_X509_INFO_value(infos, i);
		if (xi->x509 && X509_STORE_add_cert(store, xi->x509) != 1)
			goto done;
		if (xi->crl && X509_STORE_add_crl(store, xi->crl) != 1)
			goto done;
		added += xi->x509 != NULL;
		crls += xi->crl != NULL;
	}
	rc = added > 0 ? 0 : -1;
	if (rc == 0 && crls > 0 && X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK) != 1)
		rc = -1;
done:
	if (rc < 0) {
		log_reason(err, errlen, "TLS: cannot load CA certificates from %s: %s", path,
		           (r = ssl_queue_reason(buf, sizeof buf)) ? r : "no certificate in it");
		file_fault = 1; /* read, but no CA certificate in it */
	}
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(b);
	return rc;
}

/* Does a hashed CA directory hold a revocation list (HASH.rN, as openssl rehash names
 * them)? Checked then, as those of a --cacert bundle are (load_ca_bundle). */
static int dir_has_crl(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	while (d && !found && (e = readdir(d))) {
		const char *n = e->d_name;
		size_t hex = strspn(n, "0123456789abcdef");
		found = hex == 8 && n[8] == '.' && n[9] == 'r' && n[10] &&
		        strspn(n + 10, "0123456789") == strlen(n + 10);
	}
	if (d)
		closedir(d);
	return found;
}

/* Whom to trust: the CA bundle or directory given, else the system's store (nothing
 * with --tls-insecure). 0, or -1 with the reason. */
static int tls_load_trust(SSL_CTX *ctx, const struct tls_opts *t, char *err, size_t errlen)
{
	const char *r;
	struct stat st;
	char buf[256];

	if (t->insecure) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* OpenSSL reads a CA directory lazily and would report a missing one only as
	 * "unable to get local issuer certificate" later. */
	if (t->cacertdir && stat(t->cacertdir, &st) < 0) {
		log_reason(err, errlen, "TLS: CA directory %s: %s", t->cacertdir, strerror(errno));
		file_fault = !rl_ex_host_short(errno);
		return -1;
	}
	if (t->cacertdir && !S_ISDIR(st.st_mode)) {
		log_reason(err, errlen, "TLS: CA directory %s: not a directory", t->cacertdir);
		file_fault = 1;
		return -1;
	}
	if (t->cacert || t->cacertdir) {
		if (t->cacert && load_ca_bundle(ctx, t->cacert, err, errlen) < 0)
			return -1;
		/* A directory's files are read by OpenSSL when a name is looked up: the
		 * front end checked the directory and the names OpenSSL reads there
		 * (userfile.h), and so SSL_CERT_FILE and SSL_CERT_DIR for the default. */
		if (t->cacertdir && SSL_CTX_load_verify_locations(ctx, NULL, t->cacertdir) != 1) {
			log_reason(err, errlen, "TLS: cannot load CA certificates from %s: %s",
			           t->cacertdir,
			           (r = ssl_queue_reason(buf, sizeof buf)) ? r : "unknown error");
			file_fault = 1;
			return -1;
		}
		if (t->cacertdir && dir_has_crl(t->cacertdir) &&
		    X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx), X509_V_FLAG_CRL_CHECK) != 1) {
			log_reason(err, errlen, "TLS: cannot check the revocation lists in %s",
			           t->cacertdir);
			return -1;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		log_reason(err, errlen, "TLS: cannot load the system trust store: %s",
		           (r = ssl_queue_reason(buf, sizeof buf)) ? r : "unknown error");
		return -1;
	}
	return 0;
}

/* Who we are: the client certificate and its key, if given. 0, or -1 with the reason. */
static int tls_load_identity(SSL_CTX *ctx, const struct tls_opts *t, char *err, size_t errlen)
{
	const char *key = t->key ? t->key : t->cert; /* one PEM may hold both */
	const char *r;
	char buf[256];
	int asked = 0, rc = -1;

	if (t->key && !t->cert) {
		log_reason(err, errlen, "TLS: a client key (%s) needs a client certificate",
		           t->key);
		return -1;
	}
	if (!t->cert)
		return 0;
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);
	/* Read from descriptors rlock opened without blocking (read_pem), as OpenSSL's
	 * *_file calls would read them: the certificate, then its chain; the key. */
	BIO *cb = read_pem("client certificate", t->cert, err, errlen), *kb = NULL;
	X509 *x = cb ? PEM_read_bio_X509_AUX(cb, NULL, no_passphrase, &asked) : NULL;
	EVP_PKEY *pk = NULL;
	int chained =
	    x && SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_clear_chain_certs(ctx) == 1;
	for (X509 *ca; chained && (ca = PEM_read_bio_X509(cb, NULL, no_passphrase, &asked));)
		if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
			X509_free(ca);
			chained = 0;
		}
	if (chained) { /* the end of the file: no more PEM blocks, not an error */
		unsigned long e = ERR_peek_last_error();
		if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
			ERR_clear_error();
		else if (e)
			chained = 0;
	}
	if (chained && !(kb = read_pem("client key", key, err, errlen)))
		goto done;
	if (chained)
		pk = PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, &asked);
	if (!cb)
		; /* read_pem said why */
	else if (!chained)
		log_reason(err, errlen, "TLS: cannot load client certificate %s: %s", t->cert,
		           (r = ssl_queue_reason(buf, sizeof buf)) ? r : "unknown error");
	else if (!pk || SSL_CTX_use_PrivateKey(ctx, pk) != 1)
		log_reason(err, errlen, "TLS: cannot load client key %s: %s", key,
		           asked ? "it is encrypted (passphrase-protected keys are not supported)"
		           : (r = ssl_queue_reason(buf, sizeof buf)) ? r
		                                                     : "unknown error");
	else if (SSL_CTX_check_private_key(ctx) != 1)
		log_reason(err, errlen, "TLS: client key %s does not match certificate %s", key,
		           t->cert);
	else
		rc = 0;
	/* A file that did not load is the user's (not PEM, not a certificate or a key, a
	 * key of another certificate); read_pem judged those it could not read. */
	if (rc < 0 && cb && (!chained || kb))
		file_fault = 1;
done:
	EVP_PKEY_free(pk);
	X509_free(x);
	BIO_free(kb);
	BIO_free(cb);
	/* The callback's userdata points at this stack frame: unhook it. */
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	return rc;
}

/* Called when the server asks for a client certificate and none was given (--cert):
 * noted, so that the alert that follows says what to do; the handshake goes on
 * without one (a server may only ask). */
static int no_client_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
	struct tls_session *s = SSL_get_app_data(ssl);

	(void)x509;
	(void)pkey;
	if (s)
		s->asked_cert = 1;
	return 0;
}

static SSL_CTX *tls_ctx_new(const struct tls_opts *t, char *err, size_t errlen)
{
	SSL_CTX *ctx = NULL, *ret = NULL;
	const char *r;
	char buf[256];

	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		log_reason(err, errlen, "TLS: cannot create context: %s",
		           (r = ssl_queue_reason(buf, sizeof buf)) ? r : "out of memory");
		goto cleanup;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		log_reason(err, errlen, "TLS: cannot require TLS 1.2");
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
	if (tls_load_trust(ctx, t, err, errlen) < 0 || tls_load_identity(ctx, t, err, errlen) < 0)
		goto cleanup;
	SSL_CTX_set_client_cert_cb(ctx, no_client_cert);
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
static const char *tls_reason(const struct tls_session *s, int e, char *buf, size_t len)
{
	const char *r;

	if (e == SSL_ERROR_ZERO_RETURN)
		return "connection closed by peer";
	if (e == SSL_ERROR_SYSCALL && s->sys_errno != 0)
		return strerror(s->sys_errno);
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

/* An alert a server sends about the certificate it was shown: with ours given (--cert),
 * it judged ours, never its own ("certificate expired" read as the server's). */
static int about_cert(int alert)
{
	switch (alert) {
	case SSL_AD_BAD_CERTIFICATE:
	case SSL_AD_UNSUPPORTED_CERTIFICATE:
	case SSL_AD_CERTIFICATE_REVOKED:
	case SSL_AD_CERTIFICATE_EXPIRED:
	case SSL_AD_CERTIFICATE_UNKNOWN:
	case SSL_AD_UNKNOWN_CA:
		return 1;
	default:
		return 0;
	}
}

/* What an alert from the server means when it asked for a client certificate that we
 * did not have (tls-auth-clients yes), or refused the one we gave: empty otherwise.
 * alert: the peer's alert code (queued_alert, peer_alert), 0 for none. The text lives
 * in buf when it names the file. */
static const char *cert_hint(const struct tls_session *s, int alert, char *buf, size_t len)
{
	if (s->asked_cert && alert)
		return "; the server asks for a client certificate: give --cert and --tls-key";
	if (s->cert && about_cert(alert)) {
		(void)snprintf(buf, len, "; the server refused the client certificate (--cert %s)",
		               s->cert);
		return buf;
	}
	return "";
}

/* The alert the peer sent, when the queued error is one: its code (1 for close_notify,
 * whose code is 0), else 0. */
static int queued_alert(void)
{
	unsigned long e = ERR_peek_error();

	if (ERR_GET_LIB(e) != ERR_LIB_SSL || ERR_GET_REASON(e) < SSL_AD_REASON_OFFSET)
		return 0;
	int code = ERR_GET_REASON(e) - SSL_AD_REASON_OFFSET;
	return code ? code : 1;
}

static int is_ip_literal(const char *s)
{
	unsigned char a[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static int tls_init(char *err, size_t errlen)
{
	(void)pthread_once(&tls_once, tls_init_once);
	if (!bio_method) {
		log_reason(err, errlen, "TLS: cannot initialise OpenSSL");
		return CONN_ERR;
	}
	return CONN_OK;
}

static const char *tls_version(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}

static int tls_handshake(struct tls_session *s, char *err, size_t errlen)
{
	X509 *cert = NULL;
	long vr;
	char buf[256];
	int rc = CONN_ERR, r, e, mismatch;

	if (s->tls_ready)
		return CONN_OK;
	if (s->tls_broken) {
		log_reason(err, errlen, "TLS handshake with %s: failed earlier", s->peer);
		return CONN_ERR;
	}
	ERR_clear_error();
	s->sys_errno = 0;
	r = SSL_connect(s->ssl);
	if (r != 1) {
		e = SSL_get_error(s->ssl, r);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			s->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
			rc = CONN_AGAIN;
			goto cleanup;
		}
		s->tls_broken = 1;
		vr = SSL_get_verify_result(s->ssl);
		/* The verify result names the cause; the error queue only says "certificate
		 * verify failed". For a name mismatch, also say which name was expected. */
		mismatch =
		    vr == X509_V_ERR_HOSTNAME_MISMATCH || vr == X509_V_ERR_IP_ADDRESS_MISMATCH;
		if (s->verify && vr != X509_V_OK)
			log_reason(err, errlen,
			           "TLS handshake with %s: certificate verify failed (%s%s%s)%s",
			           s->peer, X509_verify_cert_error_string(vr),
			           mismatch ? ": certificate not valid for " : "",
			           mismatch && s->name ? s->name : "", ca_hint(s, vr));
		else {
			char hint[PATH_MAX + 64];
			int alert = queued_alert();
			log_reason(err, errlen, "TLS handshake with %s: %s%s%s", s->peer,
			           tls_reason(s, e, buf, sizeof buf),
			           plaintext_reply() ? " (is it a TLS port?)" : "",
			           cert_hint(s, alert, hint, sizeof hint));
		}
		goto cleanup;
	}
	if (s->verify) {
		/* Belt and braces: X509_V_OK is also what a peer without a certificate
		 * leaves behind. */
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
		cert = SSL_get1_peer_certificate(s->ssl);
#else
		cert = SSL_get_peer_certificate(s->ssl);
#endif
		vr = SSL_get_verify_result(s->ssl);
		if (!cert || vr != X509_V_OK) {
			s->tls_broken = 1;
			log_reason(err, errlen,
			           "TLS handshake with %s: certificate verify failed (%s)", s->peer,
			           cert ? X509_verify_cert_error_string(vr) : "no certificate");
			goto cleanup;
		}
	}
	s->tls_ready = 1;
	rc = CONN_OK;
cleanup:
	X509_free(cert);
	ERR_clear_error();
	return rc;
}

static int tls_heard(const struct tls_session *s)
{
	return s->heard;
}

static void tls_close(struct tls_session *s)
{
	if (!s)
		return;
	if (s->ssl) {
		/* One non-blocking close_notify, so the server logs a clean close; never
		 * wait for the peer's. */
		if (s->tls_ready && !s->tls_broken) {
			ERR_clear_error();
			(void)SSL_shutdown(s->ssl);
		}
		SSL_free(s->ssl);
		ERR_clear_error();
	}
	free(s->name);
	free(s->cert);
	free(s);
}

static struct tls_session *tls_wrap(int fd, const char *peer, const char *host,
                                    const struct tls_opts *t, int *fault, char *err, size_t errlen)
{
	const char *name = t->sni ? t->sni : host;
	struct tls_session *s = NULL, *ret = NULL;
	SSL_CTX *ctx = NULL;
	BIO *bio = NULL;
	int ip;

	*fault = 0;
	if (tls_init(err, errlen) != CONN_OK)
		goto cleanup;
	if (!name && !t->insecure) {
		/* No name, nothing to check the certificate against: refuse rather than
		 * accept any certificate from a trusted CA. */
		log_reason(err, errlen, "TLS over %s: a server name to verify (--sni) is required",
		           peer);
		goto cleanup;
	}
	s = calloc(1, sizeof *s);
	if (!s || (name && !(s->name = strdup(name))) ||
	    (t->cert && !(s->cert = strdup(t->cert)))) {
		log_reason(err, errlen, "TLS: out of memory");
		goto cleanup;
	}
	s->fd = fd;
	s->events = POLLOUT;
	s->verify = !t->insecure;
	s->own_ca = t->cacert ? 1 : t->cacertdir ? 2 : 0;
	/* A longer peer name is cut short in messages only. */
	(void)snprintf(s->peer, sizeof s->peer, "%s", peer);
	file_fault = 0;
	ctx = tls_ctx_get(t, err, errlen);
	if (!ctx) {
		*fault = file_fault ? TLS_FAULT_FILE : 0;
		goto cleanup;
	}
	s->ssl = SSL_new(ctx);
	bio = BIO_new(bio_method);
	if (!s->ssl || !bio) {
		log_reason(err, errlen, "TLS: out of memory");
		goto cleanup;
	}
	SSL_set_app_data(s->ssl, s);
	BIO_set_data(bio, s);
	BIO_set_init(bio, 1);
	SSL_set_bio(s->ssl, bio, bio); /* one reference, now owned by the SSL */
	bio = NULL;
	ip = name && is_ip_literal(name);
	/* SNI carries host names only (RFC 6066); an IP literal there is a protocol
	 * error some servers reject. */
	if (name && !ip && SSL_set_tlsext_host_name(s->ssl, name) != 1) {
		log_reason(err, errlen, "TLS: invalid server name %s", name);
		goto cleanup;
	}
	if (s->verify) {
		if (ip) {
			if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), name) != 1) {
				log_reason(err, errlen, "TLS: cannot verify IP address %s", name);
				goto cleanup;
			}
		} else {
			SSL_set_hostflags(s->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			if (SSL_set1_host(s->ssl, name) != 1) {
				log_reason(err, errlen, "TLS: cannot verify host name %s", name);
				goto cleanup;
			}
		}
	}
	SSL_set_connect_state(s->ssl);
	ret = s;
	s = NULL;
cleanup:
	BIO_free(bio);
	SSL_CTX_free(ctx); /* the SSL keeps its own reference */
	tls_close(s);
	ERR_clear_error();
	return ret;
}

/* With TLS 1.3 the server judges our client certificate only after the handshake; it
 * sends an alert and closes, and our next write meets a reset. The alert is usually
 * still queued on our side and says far more ("certificate required", "unknown ca")
 * than "Connection reset by peer": fetch it into buf. Its alert code, or 0 (none). */
static int peer_alert(struct tls_session *s, char *buf, size_t len)
{
	char byte;
	unsigned long e;
	int found = 0;

	if (s->sys_errno != ECONNRESET && s->sys_errno != EPIPE)
		return 0;
	ERR_clear_error();
	if (SSL_peek(s->ssl, &byte, 1) > 0)
		goto cleanup;
	e = ERR_peek_error();
	if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET &&
	    ERR_reason_error_string(e)) {
		(void)snprintf(buf, len, "%s", ERR_reason_error_string(e));
		found = ERR_GET_REASON(e) - SSL_AD_REASON_OFFSET;
		found += !found; /* close_notify's code is 0: 1, as queued_alert says */
	}
cleanup:
	ERR_clear_error();
	return found;
}

static ssize_t tls_write_some(struct tls_session *s, const void *buf, size_t len, char *err,
                              size_t errlen)
{
	char ebuf[256], hint[PATH_MAX + 64];
	ssize_t n;
	int e;

	if (len == 0)
		return 0;
	if (s->tls_broken) {
		log_reason(err, errlen, "write to %s: TLS session failed earlier", s->peer);
		return CONN_ERR;
	}
	ERR_clear_error();
	s->sys_errno = 0;
	n = SSL_write(s->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (n > 0)
		return n;
	e = SSL_get_error(s->ssl, (int)n);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		s->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return CONN_AGAIN;
	}
	int alert = e == SSL_ERROR_SYSCALL ? peer_alert(s, ebuf, sizeof ebuf) : 0;
	if (alert) {
		s->tls_broken = 1;
		log_reason(err, errlen, "write to %s: %s%s", s->peer, ebuf,
		           cert_hint(s, alert, hint, sizeof hint));
		return CONN_ERR;
	}
	if (e != SSL_ERROR_ZERO_RETURN)
		s->tls_broken = 1;
	alert = queued_alert();
	log_reason(err, errlen, "write to %s: %s%s", s->peer, tls_reason(s, e, ebuf, sizeof ebuf),
	           cert_hint(s, alert, hint, sizeof hint));
	ERR_clear_error();
	return CONN_ERR;
}

static ssize_t tls_read_some(struct tls_session *s, void *buf, size_t cap, char *err, size_t errlen)
{
	char ebuf[256], hint[PATH_MAX + 64];
	ssize_t n;
	int e;

	if (cap == 0)
		return 0;
	if (s->tls_broken) {
		log_reason(err, errlen, "read from %s: TLS session failed earlier", s->peer);
		return CONN_ERR;
	}
	ERR_clear_error();
	s->sys_errno = 0;
	n = SSL_read(s->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
	if (n > 0)
		return n;
	e = SSL_get_error(s->ssl, (int)n);
	switch (e) {
	case SSL_ERROR_WANT_READ:
		s->events = POLLIN;
		return CONN_AGAIN;
	case SSL_ERROR_WANT_WRITE:
		s->events = POLLOUT;
		return CONN_AGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return CONN_EOF;
	case SSL_ERROR_SYSCALL:
		/* OpenSSL 1.1.1's way of saying the peer closed without close_notify. */
		if (s->sys_errno == 0 && ERR_peek_error() == 0) {
			s->tls_broken = 1;
			return CONN_EOF;
		}
		break;
	default:
		break;
	}
	s->tls_broken = 1;
	int alert = queued_alert();
	log_reason(err, errlen, "read from %s: %s%s", s->peer, tls_reason(s, e, ebuf, sizeof ebuf),
	           cert_hint(s, alert, hint, sizeof hint));
	ERR_clear_error();
	return CONN_ERR;
}

static int tls_pending(const struct tls_session *s)
{
	return SSL_pending(s->ssl) > 0;
}

static short tls_events(const struct tls_session *s)
{
	return s->events;
}

static const struct tls_ops ops = {
    .abi = RLOCK_TLS_ABI,
    .version = tls_version,
    .init = tls_init,
    .wrap = tls_wrap,
    .handshake = tls_handshake,
    .heard = tls_heard,
    .read_some = tls_read_some,
    .write_some = tls_write_some,
    .pending = tls_pending,
    .events = tls_events,
    .close = tls_close,
};

/* The module's only exported symbol (everything else is hidden by -fvisibility). */
__attribute__((visibility("default"))) const struct tls_ops *rlock_tls_ops(int abi_version)
{
	return abi_version == RLOCK_TLS_ABI ? &ops : NULL;
}
