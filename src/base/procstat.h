/* SPDX-License-Identifier: MIT */
/* /proc/PID/stat, read once and parsed in one place: the facts rlock judges a process by
 * (its name, whether it can still run, its group and session, its start time). The
 * command's name may hold anything, ')' and spaces too: the fields are read after the
 * last ')'. */
#ifndef RLOCK_PROCSTAT_H
#define RLOCK_PROCSTAT_H

#include <sys/types.h>

struct proc_stat {
	char comm[17];                  /* the name ("" when longer than a user process's) */
	char state;                     /* 'R', 'S', ..., 'Z' (zombie), 'X' (dead) */
	pid_t ppid, pgrp, sid;          /* parent, process group, session */
	int threads;                    /* a zombie leader with live threads still runs */
	unsigned long long start_ticks; /* since boot, in clock ticks (sysconf _SC_CLK_TCK) */
};

/* 0, or -1 (no such process, or a line that does not parse). One open, one read, no
 * stdio and no allocation: usable in a child forked from a threaded process. */
int proc_stat_read(long long pid, struct proc_stat *st);

/* Can it still run: not a zombie (or a zombie leader whose other threads run). */
static inline int proc_stat_live(const struct proc_stat *st)
{
	return (st->state != 'Z' && st->state != 'X') || st->threads > 1;
}

#endif
