/* SPDX-License-Identifier: MIT */
#include "procstat.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int proc_stat_read(long long pid, struct proc_stat *st)
{
	char path[64], buf[1024];

	snprintf(path, sizeof path, "/proc/%lld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	/* pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
	 * utime stime cutime cstime priority nice num_threads itrealvalue starttime */
	const char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren || close_paren[1] != ' ')
		return -1;
	size_t n = (size_t)(close_paren - open_paren - 1);
	if (n >= sizeof st->comm)
		n = 0; /* not a user process's name (a kernel thread's may be longer) */
	memcpy(st->comm, open_paren + 1, n);
	st->comm[n] = '\0';
	int ppid, pgrp, sid;
	if (sscanf(close_paren + 1,
	           " %c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %d %*d %llu",
	           &st->state, &ppid, &pgrp, &sid, &st->threads, &st->start_ticks) != 6)
		return -1;
	st->ppid = ppid;
	st->pgrp = pgrp;
	st->sid = sid;
	return 0;
}
