/* SPDX-License-Identifier: MIT */
/* Descriptors a process that rlock leaves behind (the --acquire keeper, the watchdog)
 * must not keep: whatever it inherited beyond 0-2, whatever its number. A pipe that a
 * caller reads to its end (a CI runner's log, the pipe of a `$(...)`) would otherwise
 * stay open in it, and its reader would hang for as long as the process lives. */
#ifndef RLOCK_FDS_H
#define RLOCK_FDS_H

/* Close every descriptor >= lowfd but keep (-1: none). close_range(2) where the kernel
 * has it (Linux 5.9), else every descriptor /proc/self/fd lists, else (no /proc) every
 * number below the RLIMIT_NOFILE hard limit. Async-signal-safe (no malloc, no stdio):
 * usable in the child of a fork in a threaded process. */
void fds_close_from(int lowfd, int keep);

/* The /proc/self/fd walk alone (fds_close_from's fallback, exposed for the unit test):
 * 0 when every listed descriptor >= lowfd but keep is closed, -1 when /proc cannot be
 * read (nothing or only part closed). Async-signal-safe. */
int fds_close_listed(int lowfd, int keep);

#endif
