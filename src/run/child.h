/* SPDX-License-Identifier: MIT */
/* All process and signal logic: the supervisor pattern of timeout(1) and tini.
 *
 * child_signals_block() runs first, before any thread exists: the terminating signals
 * rlock forwards, SIGCHLD and SIGPIPE are blocked in every thread and read from one
 * signalfd. The command runs in its own process group (owning the terminal when rlock
 * did), so a terminal's Ctrl-C reaches it once, and lock loss can signal the whole group.
 * rlock is a child subreaper: what the command leaves behind in its group is reparented
 * to rlock, reaped, and waited for; the lock covers the group until it is empty. */
#ifndef RLOCK_CHILD_H
#define RLOCK_CHILD_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* First thing in main: normalise what rlock relies on and its caller may have set
 * otherwise, remembering what the caller gave (child_exec hands it to the command as
 * given): SIGCHLD to SIG_DFL (ignored, the kernel reaps the command unseen), SIGPIPE
 * ignored (a diagnostic to a reader gone fails with EPIPE instead of killing rlock),
 * the soft RLIMIT_CORE to 0 (rlock holds secrets), a soft RLIMIT_NOFILE below what
 * rlock may need raised (within the hard limit); note fds 0-2 the caller closed
 * (closed again for the command: cli_open_std_fds puts /dev/null there for rlock); and note the
 * forwarded signals the caller ignores: rlock neither forwards them nor ends a wait on them. */
void child_inherit(void);

/* Whether the caller closed any of fds 0-2 (child_inherit): else cli_open_std_fds has
 * nothing to do. */
int child_std_closed(void);

/* The keeper (no command to hand signals to; its control is SIGTERM, SIGUSR1...):
 * listen to every forwarded signal, ignored by the caller or not. Before
 * child_signals_block(). */
void child_inherit_listen_all(void);

/* Whether the caller ignored forwarded signal sig (child_inherit). */
int child_ignored(int sig);

/* Block the supervised signals (the forwarded ones the caller does not ignore), and
 * SIGPIPE, SIGTTOU and SIGXFSZ (a write fails instead); returns a close-on-exec
 * signalfd, or -1. *orig gets the original mask, restored in the child before exec. */
int child_signals_block(sigset_t *orig);

/* A close-on-exec, non-blocking signalfd of the terminating signals alone (those of
 * child_signals_block() without SIGCHLD), for the waits before the command starts:
 * readable means "stop now". Call after child_signals_block(); -1 on error. */
int child_term_fd(void);

/* Die of signal sig (after cleanup), as the shell expects of an interrupted program;
 * no core dump. Falls back to exit(128 + sig) for a signal that cannot kill. */
void child_die_of(int sig) __attribute__((noreturn));

/* Exec argv (or /bin/sh -c shell_command) in this process with the original signal
 * mask restored: used by the forked child and by a re-entered (nested) rlock. Returns
 * only on failure, with errno set. Async-signal-safe apart from execvp's PATH search. */
void child_exec(char *const *argv, const char *shell_command, const sigset_t *orig);

struct child {
	pid_t pid;           /* the command; also its process group id */
	int reaped;          /* the command itself has been waited for */
	int term_sig;        /* the signal it died of, or 0 */
	int late_sig;        /* a signal of the forwarded ones that came once it had exited
	                      * (passed on to the rest of its group): rlock dies of it once
	                      * the lock is given back, as of one that comes then; or 0 */
	int lost;            /* the lease was found lost while it ran (--on-lost ignore too),
	                      * or the watchdog killed the group at its deadline */
	int timed_out;       /* stopped for --max-hold */
	int timeout_status;  /* 124 or 137 once stopped for --max-hold (also under a loss's
	                      * 79 or a --preempt's stop), else 0 */
	int status;          /* the command's own status (128+N: signal N), for the history */
	pid_t watchdog;      /* kills the group if rlock itself dies; 0 if none */
	int watch_fd;        /* write end kept by rlock */
	int watch_report;    /* the watchdog's report: it killed the group at a deadline */
	int watchdog_killed; /* it said so (before its SIGKILL): the exit is 79 */
	int64_t watch_by;    /* the group's SIGKILL deadline the watchdog holds (last told) */
	int tty;             /* rlock's controlling terminal (one of fds 0-2, else /dev/tty
	                      * opened: tty_opened), or -1; the command's group takes it at
	                      * once when it is stdin, else when it asks (follow_stop) */
	int tty_opened;      /* tty is /dev/tty opened here, closed by child_finish */
	int tty_given;       /* the command's group was given the terminal (a job of it) */
	int tstp_fd;         /* signalfd of a SIGTSTP sent to rlock (Ctrl-Z to its group), or -1 */
	int suspend;         /* SIGTSTP passed on to the command: rlock stops when it does */
	int stop_told;       /* its cover's groups told to the watchdog for this stop */
	pid_t stop_pgrp;     /* the group whose stop is followed (follow_stop): the command's,
	                      * or once it exited, the cover's group that has the terminal */
	int64_t unguarded;   /* when the watchdog died and none could replace it, or 0 */
	int unguarded_errno; /* why none could */
	int unguarded_stop;  /* stopped for that (no replacement in time): the exit is 71 */
};

/* Start the command's watchdog ahead of child_spawn, which takes it (or, if this failed
 * or it died meanwhile, starts one itself): call it while the lock is being asked for,
 * so that the watchdog is in its own session by the time the command is started. A
 * watchdog never handed a group exits when rlock does. 0, or -1 (child_spawn then
 * retries and reports). */
int child_watchdog_ahead(void);

/* Fork and exec argv (or /bin/sh -c shell_command). kill_by: the monotonic time by
 * which the watchdog kills the group unless the supervisor moves it on (the lease's
 * SIGKILL deadline; -1 for none, with --on-lost ignore). start_by: the lease's loss,
 * past which the command never starts (rlock stopped or stalled since the acquire), or
 * -1. On success returns 0 with *ch. On failure prints one line and returns the exit
 * status to use: 71 (fork/setup), 79 (too late: the lease ran out before the start),
 * 126 (not executable) or 127 (not found); the child is then already reaped. */
int child_spawn(struct child *ch, char *const *argv, const char *shell_command,
                const sigset_t *orig, int64_t kill_by, int64_t start_by);

enum lost_action { ACT_SIGNAL, ACT_IGNORE };

struct lock; /* lock.h: only pointed to */

/* The lease, as the supervisor sees it. The main thread decides loss on its own clock
 * (nothing it waits on can delay that): the lease counts as lost at lost_at(), and the
 * group's SIGKILL lands by kill_at() at the latest, whatever kill_after_ms says (the
 * lease rule: lease.h). */
struct supervise_args {
	int sigfd;
	int lost_fd; /* readable when the lock is known not to be ours, or -1 */
	/* When the lease counts as lost, and by when the group must be dead (monotonic
	 * ms, from the last confirmed renewal: hold.h); thread-safe. */
	int64_t (*lost_at)(const void *ctx);
	int64_t (*kill_at)(const void *ctx);
	/* Why the lease is lost (copied into buf); the lock said lost (the events line's:
	 * with several -k, the one whose lease it was), or NULL (the run's first). */
	const struct lock *(*lost_reason)(const void *ctx, int timed_out, char *buf, size_t n);
	const void *ctx;
	/* Is the loss a --preempt request's (NULL: never)? Its events line is written once
	 * the release tells whether the lock went to it (preempted), not a lost one. */
	int (*preempted)(const void *preempt_ctx);
	const void *preempt_ctx;
	enum lost_action action;
	int lost_signal; /* first signal on loss (SIGTERM, SIGKILL, ...) */
	/* --warn: warn_signal (0: none) once to the group when warn_at(ctx) passes; a later
	 * warn_at (a confirmed renewal) re-arms it. Thread-safe. */
	int warn_signal;
	int64_t (*warn_at)(const void *ctx);
	/* With several locks, the one whose renewal is the latest (the warning names it),
	 * else NULL; may be NULL itself. Thread-safe. */
	const char *(*late)(const void *ctx);
	int64_t kill_after_ms;
	/* --max-hold: at this monotonic time the group gets SIGTERM (SIGKILL kill_after_ms
	 * later), as timeout(1) does; -1 for none. */
	int64_t stop_at;
	/* The renewals start when one is due, not before (a short command needs none):
	 * renew_due(ctx) says when (monotonic ms, INT64_MAX: nothing to start), and
	 * renew_launch(renew_ctx) starts them, from this loop. Either may be NULL. */
	int64_t (*renew_due)(const void *ctx);
	void (*renew_launch)(void *renew_ctx);
	void *renew_ctx;
};

/* Forward signals (SIGCONT after each, so a stopped group hears them), act on lock
 * loss and on stop_at, reap, and return once the command has exited and its process
 * group is empty (after a loss: once SIGKILL has emptied it). Returns rlock's exit
 * status: the command's status, 128+N if it died of signal N (ch->term_sig = N), 79 if
 * the lock was lost and the group was signalled for it, or the watchdog reported that
 * it killed the group at its deadline and the command died of that SIGKILL (ch->lost
 * either way, the history's record of the run says lost), else 124 if stop_at passed and
 * the group was stopped for it (ch->timed_out), 137 if the command itself then died of
 * SIGKILL (ch->timeout_status: that status, also when 79 says more). */
int child_supervise(struct child *ch, const struct supervise_args *a);

/* Give the terminal back if the command's group has it, tell the watchdog all is well
 * (or, if the group still runs, close its pipe so that it kills the group), and do not
 * wait for it: it exits on its own. */
void child_finish(struct child *ch);

/* After child_finish and the release (once the last release is sent: its --wait-replicas
 * WAIT may take up to --io-timeout, and the lock is no longer rlock's to keep from a
 * stop; continued, rlock waits on): from here on a SIGTSTP (Ctrl-Z to rlock's group)
 * stops rlock at once, as before the command, and one that came since the command ended
 * (kept blocked meanwhile, so that rlock never stops with a lock to give back) stops it
 * now: the shell gets its job's stop, `fg` the exit. */
void child_unlisten_stop(struct child *ch);

#endif
