/* SPDX-License-Identifier: MIT */
/* A lock across steps (CI jobs, ExecStartPre/ExecStopPost, a maintenance session):
 * `rlock -k NAME --acquire` leaves a detached keeper process renewing the lock and
 * prints RLOCK_KEY, RLOCK_TOKEN and RLOCK_FENCE for the caller to eval; `rlock -k NAME
 * --release` stops the keeper and releases.
 *
 * The keeper is the rlock process itself, forked at the start (keeper_detach) in its
 * own session: it connects, waits and acquires as any rlock does (its errors go to the
 * caller's stderr until then), then (keeper_hold) sends the lock's details to the
 * waiting parent, which prints them and exits 0, puts its stdin, stdout and stderr on
 * /dev/null (stderr on --log-file if given; messages also go to syslog) and renews
 * until told to stop. Its owner record (--status) names it: pid = the keeper's pid,
 * cmd = KEEPER_CMD. A keeper that dies lets the lock expire by its TTL.
 *
 * Signals to the keeper: SIGUSR1 (sent by --release) = stop renewing and exit without
 * releasing (--release does that, and so learns whether the lock was still held);
 * SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR2 = release and exit. */
#ifndef RLOCK_KEEPER_H
#define RLOCK_KEEPER_H

#include <stdint.h>

#include "hold.h"
#include "lock.h"
#include "store.h"

#define KEEPER_CMD  "(rlock --acquire keeper)" /* the owner record's cmd */
#define KEEPER_COMM "rlock-keeper"             /* its process name (/proc/PID/comm) */

/* Whether the keeper of key under token, recorded with pid, still runs, judged by the
 * mark it left in the user's runtime directory (its pid, start time, pid namespace and
 * boot): 1 it runs, 0 it is gone (its boot is over, or its pid names another process or
 * none), -1 unknown (it runs in another pid namespace), -2 no mark of it here. */
int keeper_judge(const char *key, const char *token, long long pid);

/* What the keeper needs of the options (the front end builds it). */
struct keeper_args {
	int github;                /* --format github: KEY=VALUE lines */
	int (*close_stdout)(void); /* flush the variables: 0, or the status after a line */
	const char *log_file;      /* the keeper's log (NULL: syslog) */
	int64_t max_hold_ms;       /* 0: no limit */
	int warn;                  /* --warn: a late renewal is logged (no command to signal) */
	const char *name;          /* --release: the lock's name, */
	const char *token;         /* the token that holds it, */
	int token_env; /* read from the environment by its key: another of the key's may be meant */
	int64_t connect_timeout_ms, io_timeout_ms;
	int wait_replicas; /* --release --wait-replicas N: the release is WAITed for too */
	int wait_aof_local, wait_aof_replicas; /* --release --wait-aof L,R: WAITAOFed too */
	int redlock; /* several URLs: --release gives back even what status cannot tell */
};

/* Fork the keeper. Returns in the keeper only; the caller (the parent) waits for it to
 * report the lock acquired, prints the variables (k->github: KEY=VALUE lines)
 * and exits 0, or, when the keeper exits first, prints keeper_print_failure's line
 * (sh output) and exits with its status (dies of its signal). A terminating signal to
 * the parent is passed on to the keeper. Call right after cli_parse(), before any
 * other fd or thread exists (the keeper closes every descriptor but 0-2, whatever its
 * number: fds.h); on fork failure exits 71 (that line too). */
void keeper_detach(const struct keeper_args *k);

/* --acquire's sh output when the lock is not held (busy, -E, unavailable, a usage
 * error, a death by signal N: 128+N): "unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE;
 * (exit STATUS)" on stdout, flushed, so that `eval "$(rlock ... --acquire)"` returns
 * rlock's status (a subshell's exit: an interactive shell stays) and, with -E 0 (status
 * 0), leaves no RLOCK_TOKEN that claims the lock. Not for --format github. */
void keeper_print_failure(int status);

/* In the keeper, the lock not taken (hold_spec's not_taken; rc a wait_rc): the job's
 * holds that s does not say are gone (the lists a nested run would get), sent to the
 * parent, which prints them with the failure line instead of the variables' unchecked
 * lists. Asked only when the server answered (busy, -E, superseded, a mode mismatch);
 * else (a signal, an outage) the variables' lists, unchecked. */
void keeper_report_failure(struct store *s, int rc, int64_t io_ms);

/* In the keeper, once the hold is acquired (hold_acquire: one lock, renewed): report it
 * to the parent, detach from the caller's stderr, watch the hold (hold_watch) until a
 * signal on sigfd (child_signals_block), --max-hold or a loss, then release (or not:
 * SIGUSR1). Ends the hold. Returns the keeper's exit status (0, 79 lost, 124
 * --max-hold). */
int keeper_hold(struct hold *h, int sigfd, const struct keeper_args *k);

/* --release: if k->token holds the lock, stop its keeper (when it runs on this host) and
 * release by compare-token-then-delete, in the mode of the holder that the status read
 * finds (o's -s or -l do not matter; a token beyond the holders a status lists: in the
 * lock's mode, its keeper not stopped first). Closes s (as report.h's commands do).
 * Returns 0 (released), 79 (the token does not hold the lock: lost — expired, broken,
 * taken over — or a wrong token; nothing is touched, no keeper stopped) or 69 (Redis
 * unavailable). A terminating signal readable on abort_fd (a signalfd; -1: none) ends
 * its waits at once (the status read: nothing released, the keeper left holding; the
 * keeper's stop; the --wait-replicas WAIT / --wait-aof WAITAOF, said not confirmed on
 * the release's line), never the release itself; rlock then dies of it. */
int keeper_release(struct store *s, const struct lock *l, const struct keeper_args *k,
                   int abort_fd);

/* --release's outcome (its status rc) in the events file, the line naming k's token:
 * keeper-released, keeper-lost (79), unavailable, or failed. The keeper, told to stop,
 * wrote keeper-stopped: this run ends its run. sig: the terminating signal rlock dies of
 * next (0: none), whose 128+N is then the line's status, the exit status. */
void keeper_release_record(const struct lock *l, const struct keeper_args *k, int rc, int sig);

/* --release that could not reach Redis at all (its connection failed before any
 * request): the keeper on this host is stopped all the same (found by its mark), so
 * that the lock does expire by its TTL, and a line says so. */
void keeper_release_unreached(const struct lock *l, const struct keeper_args *k, const char *why);

/* How a keeper's hold ended without --release (lost, given up at --max-hold, released on
 * a signal), for --held in the steps, even with Redis down: the keeper records it in
 * $XDG_RUNTIME_DIR/rlock/ (else /tmp/rlock-UID/; a directory of the user's own, mode
 * 0700), one file per key and token named by a hash of both (the token is not written),
 * mode 0600, written atomically; --release removes it. keeper_ended: 1 with "REASON at
 * TIME" in buf when the keeper of key and token recorded its end on this host, else 0. */
int keeper_ended(const char *key, const char *token, char *buf, size_t n);

/* For --held with Redis down: 1 with why in buf when the keeper that marked itself the
 * keeper of key under token on this host is gone (killed unheard: kill -9, the OOM
 * killer; or it ran before this boot), so that nothing renews the lease; else 0 (it
 * runs, it cannot be judged from here, or no mark). */
int keeper_gone(const char *key, const char *token, char *buf, size_t n);

#endif
