/* SPDX-License-Identifier: MIT */
/* dlopen() of the TLS module, once per process.
 *
 * Only TLS connections need OpenSSL, and linking it costs every start of rlock more
 * than the rest of rlock does (see tls.h), so it is loaded here on demand. */
#include "tlsload.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tls.h"
#include "userfile.h"

#ifndef RLOCK_TLS_MODULE_DIR
#define RLOCK_TLS_MODULE_DIR "/usr/local/lib/rlock"
#endif
#define MODULE_NAME "rlock-tls.so"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const struct tls_ops *loaded;
static char load_error[PATH_MAX + 640];
static int load_refused; /* TLSLOAD_* (tlsload.h): why the module was not even tried */

/* rlock-tls.so in the directory of the running executable, if it exists there. */
static int beside_exe(char *buf, size_t len)
{
	char exe[PATH_MAX];
	char *slash;
	ssize_t n;
	int w;

	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	w = snprintf(buf, len, "%s/%s", exe, MODULE_NAME);
	if (w < 0 || (size_t)w >= len)
		return -1;
	return access(buf, F_OK) == 0 ? 0 : -1;
}

static void load(void)
{
	char path[PATH_MAX + sizeof MODULE_NAME + 1];
	const char *env = secure_getenv("RLOCK_TLS_MODULE");
	const char *why;
	size_t plen;
	tls_ops_fn get;
	const struct tls_ops *ops;
	void *h;

	if (env && *env)
		(void)snprintf(path, sizeof path, "%s", env);
	else if (beside_exe(path, sizeof path) < 0)
		(void)snprintf(path, sizeof path, "%s/%s", RLOCK_TLS_MODULE_DIR, MODULE_NAME);

	/* The module checks every certificate: trusted as the TLS files are (ssh's rule,
	 * userfile.h). With it and every directory above it the user's or root's and
	 * writable by nobody else, nobody else can change it before the dlopen either. */
	struct stat st;
	char untrusted[300];
	if (path[0] != '/') {
		/* dlopen() would search the library path for a bare name, and a relative
		 * one names another file in each directory a nested rlock runs in. */
		(void)snprintf(load_error, sizeof load_error,
		               "RLOCK_TLS_MODULE: '%s' is not an absolute path (dlopen would "
		               "search for it); give an absolute one",
		               path);
		load_refused = TLSLOAD_NOT_ABSOLUTE;
		return;
	}
	/* dlopen() opens it blocking: a FIFO would hold rlock there for ever. */
	int found = stat(path, &st) == 0;
	if (found && !S_ISREG(st.st_mode)) {
		(void)snprintf(load_error, sizeof load_error, "TLS module '%s' %s: refused", path,
		               S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
		load_refused = TLSLOAD_UNTRUSTED;
		return;
	}
	if (found && userfile_trusted(path, &st, untrusted, sizeof untrusted) < 0) {
		(void)snprintf(load_error, sizeof load_error,
		               "TLS module '%s' %s: refused (it must be root's or yours, and "
		               "writable by nobody else)",
		               path, untrusted);
		load_refused = TLSLOAD_UNTRUSTED;
		return;
	}
	/* RTLD_LOCAL: OpenSSL's symbols stay out of the global namespace, so they cannot
	 * collide with anything else in the process. */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		why = dlerror();
		why = why ? why : "unknown error";
		/* glibc starts the text with the path, which the message already names. */
		plen = strlen(path);
		if (strncmp(why, path, plen) == 0 && strncmp(why + plen, ": ", 2) == 0)
			why += plen + 2;
		(void)snprintf(load_error, sizeof load_error, "cannot load %s: %s", path, why);
		return;
	}
	/* POSIX guarantees that dlsym's result converts to a function pointer. */
	get = (tls_ops_fn)dlsym(h, RLOCK_TLS_SYMBOL);
	ops = get ? get(RLOCK_TLS_ABI) : NULL;
	if (!ops || ops->abi != RLOCK_TLS_ABI) {
		/* A module left over from another version of rlock: refuse it rather than
		 * call through a table of another shape. */
		(void)snprintf(load_error, sizeof load_error,
		               "cannot load %s: not rlock's TLS module, or one from another "
		               "version (interface %d needed)",
		               path, RLOCK_TLS_ABI);
		(void)dlclose(h);
		return;
	}
	if (ops->init(load_error, sizeof load_error) != CONN_OK)
		return; /* OpenSSL may have registered exit handlers: keep it loaded */
	loaded = ops;
}

const struct tls_ops *tlsload(char *err, size_t errlen)
{
	(void)pthread_once(&load_once, load);
	if (!loaded && err && errlen > 0)
		(void)snprintf(err, errlen, "%s", load_error);
	return loaded;
}

int tlsload_refused(void)
{
	(void)pthread_once(&load_once, load);
	return load_refused;
}
