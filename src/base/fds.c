/* SPDX-License-Identifier: MIT */
#include "fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* close_range(2) over [lo, hi]; 0, or -1 (ENOSYS: an older kernel or headers; EPERM: a
 * seccomp filter that does not know it). */
static int close_span(unsigned lo, unsigned hi)
{
	if (lo > hi)
		return 0;
#ifdef SYS_close_range
	return (int)syscall(SYS_close_range, lo, hi, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* A decimal descriptor number, or -1 ("." and ".."). */
static int fd_number(const char *s)
{
	long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > INT32_MAX / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v > INT32_MAX ? -1 : (int)v;
}

int fds_close_listed(int lowfd, int keep)
{
	/* getdents64 into a buffer on the stack: opendir would malloc. */
	char buf[4096] __attribute__((aligned(8)));
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dir < 0)
		return -1;
	/* Closing while reading: each pass starts over until one closes nothing, so that
	 * no entry is missed whatever the directory offsets do meanwhile. */
	for (int closed = 1; closed;) {
		closed = 0;
		if (lseek(dir, 0, SEEK_SET) < 0)
			goto fail;
		for (;;) {
			long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				goto fail;
			if (n == 0)
				break;
			for (long off = 0; off < n;) {
				const struct dirent64 *d = (const struct dirent64 *)(buf + off);
				int fd = fd_number(d->d_name);
				off += d->d_reclen;
				if (fd >= lowfd && fd != keep && fd != dir) {
					close(fd);
					closed = 1;
				}
			}
		}
	}
	close(dir);
	return 0;
fail:
	close(dir);
	return -1;
}

void fds_close_from(int lowfd, int keep)
{
	if (lowfd < 0)
		lowfd = 0;
	if (keep < lowfd) {
		if (close_span((unsigned)lowfd, ~0U) == 0)
			return;
	} else if (close_span((unsigned)lowfd, (unsigned)keep - 1) == 0 &&
	           close_span((unsigned)keep + 1, ~0U) == 0) {
		return;
	}
	if (fds_close_listed(lowfd, keep) == 0)
		return;
	/* No /proc: every number a descriptor can have under the hard limit (a limit
	 * lowered after a descriptor was opened is the one case this cannot see). */
	struct rlimit rl;
	long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	                   rl.rlim_max < (rlim_t)INT32_MAX
	               ? (long)rl.rlim_max
	               : sysconf(_SC_OPEN_MAX);
	for (long fd = lowfd; fd < top; fd++)
		if (fd != keep)
			close((int)fd);
}
