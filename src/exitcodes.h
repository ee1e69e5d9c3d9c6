/* SPDX-License-Identifier: MIT */
/* The exit-status table of SPEC §3, once. --help and the man page print it. */
#ifndef RLOCK_EXITCODES_H
#define RLOCK_EXITCODES_H

enum rlock_exit {
	RL_EX_USAGE = 64,       /* bad option, URL, duration, config */
	RL_EX_UNAVAILABLE = 69, /* Redis unavailable before the command started */
	RL_EX_SOFTWARE = 70,    /* internal error (a bug) */
	RL_EX_OSERR = 71,       /* cannot fork or set up the child */
	RL_EX_IOERR = 74,       /* cannot write the output (--status, --list, --acquire, --help) */
	RL_EX_CONFLICT = 75,    /* lock not acquired (default; -E changes it) */
	RL_EX_LOST = 79,        /* lock lost while the command ran; command terminated */
	RL_EX_TIMEOUT = 124,    /* --max-hold expired: the command was stopped (timeout(1)) */
	RL_EX_NOEXEC = 126,     /* command not executable */
	RL_EX_NOTFOUND = 127,   /* command not found */
};

#endif
