/* All process and signal logic: the supervisor pattern of timeout(1) and tini.
 *
 * child_signals_block() runs first, before any thread exists: the terminating signals
 * rlock forwards, SIGCHLD and SIGPIPE are blocked in every thread and read from one
 * signalfd. The command runs in its own process group (owning the terminal when rlock
 * did), so a terminal's Ctrl-C reaches it once, and lock loss can signal the whole group. */
#ifndef RLOCK_CHILD_H
#define RLOCK_CHILD_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* Block the supervised signals; returns a close-on-exec signalfd, or -1. *orig gets
 * the original mask, restored in the child before exec. */
int child_signals_block(sigset_t *orig);

/* A close-on-exec, non-blocking signalfd of the terminating signals alone (those of
 * child_signals_block() without SIGCHLD), for the waits before the command starts:
 * readable means "stop now". Call after child_signals_block(); -1 on error. */
int child_term_fd(void);

/* Die of signal sig (after cleanup), as the shell expects of an interrupted program. */
void child_die_of(int sig) __attribute__((noreturn));

struct child {
	pid_t pid;      /* the command; also its process group id */
	pid_t watchdog; /* kills the group if rlock itself dies; 0 if none */
	int watch_fd;   /* write end kept by rlock */
	int tty;        /* terminal fd handed to the command's group, or -1 */
};

/* Fork and exec argv (or /bin/sh -c shell_command). On success returns 0 with *ch.
 * On failure prints one line and returns the exit status to use: 71 (fork/setup),
 * 126 (not executable) or 127 (not found); the child is then already reaped. */
int child_spawn(struct child *ch, char *const *argv, const char *shell_command,
                const sigset_t *orig);

enum lost_action { ACT_SIGNAL, ACT_IGNORE };

struct supervise_args {
	int sigfd;
	int lost_fd; /* readable on lock loss, or -1 */
	const char *(*lost_reason)(const void *ctx);
	const void *lost_ctx;
	enum lost_action action;
	int lost_signal; /* first signal on loss (SIGTERM, SIGKILL, ...) */
	int64_t kill_after_ms;
};

/* Forward signals, act on lock loss, reap. Returns rlock's exit status: the
 * command's status, 128+N if it died of signal N, or 79 if the lock was lost and the
 * command was signalled for it. */
int child_supervise(struct child *ch, const struct supervise_args *a);

/* Tell the watchdog all is well, give the terminal back, reap the watchdog. */
void child_finish(struct child *ch);

#endif
