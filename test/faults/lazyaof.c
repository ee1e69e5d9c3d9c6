/* lazyaof: an LD_PRELOAD shim for redis-server (and valkey-server) that keeps what the
 * server writes to its append-only files in memory until it fsyncs them, so that a
 * SIGKILL of the server loses exactly what a crash of the host would lose: the writes
 * not yet fsynced (with appendfsync everysec, up to about a second). Without it, a
 * killed process loses nothing: its write()s are in the kernel's page cache.
 *
 * A file is tracked when the server opens it for writing under a name ending in ".aof"
 * (Redis 7's appendonly.aof.N.incr.aof; the manifest and the rewrite's temporary files
 * go through other names or stdio and are left alone). write() to a tracked fd is
 * buffered; fsync()/fdatasync() writes the buffer out first, then syncs; close() writes
 * it out (a close is not a crash). The buffer is shared with the background fsync
 * thread under a mutex. For the fault suite's aof-crash rows (test/faults/run).
 * Built by test/faults/run with: cc -shared -fPIC -o lazyaof.so lazyaof.c -ldl -pthread */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define FDS 4096

static struct pending {
	char *buf;
	size_t len, cap;
	int on;
} pend[FDS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *real(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void track(int fd, const char *path, int flags)
{
	size_t n = path ? strlen(path) : 0;

	if (fd < 0 || fd >= FDS || (flags & O_ACCMODE) == O_RDONLY || n < 5 ||
	    strcmp(path + n - 4, ".aof") != 0)
		return;
	pthread_mutex_lock(&mu);
	pend[fd].on = 1;
	pend[fd].len = 0;
	pthread_mutex_unlock(&mu);
}

/* Write out fd's buffer (mu held). 0, or -1 with errno. */
static int drain(int fd)
{
	static ssize_t (*w)(int, const void *, size_t);
	size_t off = 0;

	if (!w)
		w = real("write");
	while (off < pend[fd].len) {
		ssize_t k = w(fd, pend[fd].buf + off, pend[fd].len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		off += (size_t)k;
	}
	pend[fd].len = 0;
	return 0;
}

static int tracked(int fd)
{
	return fd >= 0 && fd < FDS && pend[fd].on;
}

int open(const char *path, int flags, ...)
{
	static int (*o)(const char *, int, ...);
	mode_t mode = 0;
	va_list ap;

	if (!o)
		o = real("open");
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	int fd = o(path, flags, mode);
	track(fd, path, flags);
	return fd;
}

int open64(const char *path, int flags, ...)
{
	static int (*o)(const char *, int, ...);
	mode_t mode = 0;
	va_list ap;

	if (!o)
		o = real("open64");
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	int fd = o(path, flags, mode);
	track(fd, path, flags);
	return fd;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*w)(int, const void *, size_t);

	if (!w)
		w = real("write");
	if (!tracked(fd))
		return w(fd, buf, n);
	pthread_mutex_lock(&mu);
	struct pending *p = &pend[fd];
	if (p->len + n > p->cap) {
		size_t cap = (p->len + n) * 2;
		char *b = realloc(p->buf, cap);
		if (!b) {
			pthread_mutex_unlock(&mu);
			errno = ENOSPC;
			return -1;
		}
		p->buf = b;
		p->cap = cap;
	}
	memcpy(p->buf + p->len, buf, n);
	p->len += n;
	pthread_mutex_unlock(&mu);
	return (ssize_t)n;
}

static int sync_with(int fd, const char *name)
{
	int (*s)(int) = real(name);

	if (tracked(fd)) {
		pthread_mutex_lock(&mu);
		int rc = pend[fd].on ? drain(fd) : 0;
		pthread_mutex_unlock(&mu);
		if (rc < 0)
			return -1;
	}
	return s(fd);
}

int fsync(int fd)
{
	return sync_with(fd, "fsync");
}

int fdatasync(int fd)
{
	return sync_with(fd, "fdatasync");
}

int close(int fd)
{
	static int (*c)(int);

	if (!c)
		c = real("close");
	if (tracked(fd)) {
		pthread_mutex_lock(&mu);
		drain(fd);
		pend[fd].on = 0;
		pthread_mutex_unlock(&mu);
	}
	return c(fd);
}
