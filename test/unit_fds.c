/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/fds.c: descriptors far above 1024 are closed, by close_range and
 * by the /proc/self/fd walk that stands in for it on older kernels; the one kept and
 * 0-2 stay. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fds.h"

#include "unit.h"

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

/* Open descriptors at 5, 1500 and 3000 (and keep), run close, check what is left. */
static void check(const char *what, void (*close_fn)(int lowfd, int keep))
{
	int fds[] = {5, 1500, 3000}, keep = 2000;
	int nul = open("/dev/null", O_RDONLY);

	CHECK(nul >= 0);
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		CHECK(dup2(nul, fds[i]) == fds[i]);
	CHECK(dup2(nul, keep) == keep);
	close(nul);
	close_fn(3, keep);
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (is_open(fds[i])) {
			fprintf(stderr, "  %s: fd %d is still open\n", what, fds[i]);
			CHECK(!is_open(fds[i]));
		}
	CHECK(is_open(keep));
	CHECK(is_open(0) && is_open(1) && is_open(2));
	close(keep);
}

static void walk(int lowfd, int keep)
{
	CHECK(fds_close_listed(lowfd, keep) == 0);
}

int main(void)
{
	struct rlimit rl;

	/* Room for fd 3000 (soft limits of 1024 are common). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
		rl.rlim_cur = 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < 4096) {
		printf("fd limit below 4096: skipped\n");
		return 77;
	}
	check("fds_close_from", fds_close_from);
	check("fds_close_listed", walk);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
