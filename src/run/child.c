/* SPDX-License-Identifier: MIT */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cover.h"
#include "events.h"
#include "exitcodes.h"
#include "fds.h"
#include "log.h"
#include "parse.h"
#include "procstat.h"

/* Signals that reach the command exactly once. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

#define GROUP_POLL_FIRST_MS 10    /* re-check a group whose last member left silently */
#define GROUP_POLL_MAX_MS   500   /* (its parent outside the group reaped it, no SIGCHLD) */
#define KILL_REPEAT_MS      100   /* SIGKILL again while the group is not yet empty */
#define KILL_GIVE_UP_MS     10000 /* after SIGKILL, stop waiting for an unkillable process */

/* What rlock inherited from its caller and changes for itself (child_inherit), handed
 * back to the command as it was given (child_exec). */
static struct {
	struct sigaction chld, pipe; /* SIG_DFL or SIG_IGN: exec keeps nothing else */
	sigset_t ignored;            /* forwarded signals the caller ignores */
	struct rlimit core, nofile;
	int core_saved, nofile_saved;
	int closed[3]; /* fds 0-2 the caller closed (rlock puts /dev/null there) */
} given;

/* The descriptors rlock may need at once (sockets of a quorum, signalfds, the
 * watchdog's and the command's pipes, eventfds): a lower soft limit is raised to this
 * (the hard limit allowing) for rlock alone. */
#define NOFILE_NEED 256

void child_inherit(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
	struct rlimit no_core;

	sigemptyset(&dfl.sa_mask);
	sigemptyset(&ign.sa_mask);
	for (int fd = 0; fd < 3; fd++)
		given.closed[fd] = fcntl(fd, F_GETFD) < 0 && errno == EBADF;
	/* SIGCHLD ignored: the kernel would reap the command itself and send no SIGCHLD,
	 * and rlock would never learn that it ended (timeout(1) resets it too). */
	sigaction(SIGCHLD, &dfl, &given.chld);
	/* SIGPIPE: a diagnostic to a pipe whose reader left must fail (EPIPE), never kill
	 * rlock before its command runs. */
	sigaction(SIGPIPE, &ign, &given.pipe);
	/* A forwarded signal the caller ignores (nohup's SIGHUP, a background job's SIGINT)
	 * is not rlock's either: neither forwarded nor the end of a wait (timeout(1)). */
	sigemptyset(&given.ignored);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
		struct sigaction sa;
		if (sigaction(forwarded[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			sigaddset(&given.ignored, forwarded[i]);
	}
	/* No core file of a process that holds a password or a token. */
	if (getrlimit(RLIMIT_CORE, &given.core) == 0) {
		given.core_saved = 1;
		no_core = given.core;
		no_core.rlim_cur = 0;
		setrlimit(RLIMIT_CORE, &no_core);
	}
	if (getrlimit(RLIMIT_NOFILE, &given.nofile) == 0 && given.nofile.rlim_cur < NOFILE_NEED &&
	    given.nofile.rlim_cur < given.nofile.rlim_max) {
		struct rlimit more = given.nofile;
		more.rlim_cur = more.rlim_max < NOFILE_NEED ? more.rlim_max : NOFILE_NEED;
		given.nofile_saved = setrlimit(RLIMIT_NOFILE, &more) == 0;
	}
}

int child_std_closed(void)
{
	return given.closed[0] || given.closed[1] || given.closed[2];
}

void child_inherit_listen_all(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	sigemptyset(&dfl.sa_mask);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		if (sigismember(&given.ignored, forwarded[i]))
			sigaction(forwarded[i], &dfl, NULL);
	sigemptyset(&given.ignored);
}

int child_ignored(int sig)
{
	return sigismember(&given.ignored, sig) == 1;
}

/* The forwarded signals rlock listens to: those its caller does not ignore. */
static void forwarded_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		if (!sigismember(&given.ignored, forwarded[i]))
			sigaddset(set, forwarded[i]);
}

int child_signals_block(sigset_t *orig)
{
	sigset_t set;

	forwarded_set(&set);
	sigaddset(&set, SIGCHLD);
	sigset_t fdset = set;
	/* Never die of a write to a closed socket (hiredis 0.14 trap; OpenSSL writes too),
	 * and take the terminal back from the command's group without being stopped. */
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGTTOU);
	/* A sink (--events, --metrics-file, the keeper's log, stderr) past the caller's
	 * RLIMIT_FSIZE fails (EFBIG: one line, the job goes on), never kills rlock with its
	 * lock held: SIGXFSZ blocked (pending, never delivered; in the same call, no system
	 * call of its own), and the command gets the caller's mask back (child_exec). */
	sigaddset(&set, SIGXFSZ);
	if (sigprocmask(SIG_BLOCK, &set, orig) < 0)
		return -1;
	return signalfd(-1, &fdset, SFD_CLOEXEC | SFD_NONBLOCK);
}

int child_term_fd(void)
{
	sigset_t set;

	forwarded_set(&set);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

void child_die_of(int sig)
{
	sigset_t s;
	/* As timeout(1): the shell must see the signal, not a core file. */
	struct rlimit no_core = {0, 0};

	log_flush(); /* what stderr could not take while the command ran (log_defer) */
	setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	raise(sig);
	_exit(128 + sig);
}

void child_exec(char *const *argv, const char *shell_command, const sigset_t *orig)
{
	/* What the caller gave rlock, as it gave it (child_inherit): the dispositions
	 * rlock changed for itself, the limits, fds 0-2 it closed, then the mask (rlock blocks and
	 * reads a signalfd for the rest). System calls only: this runs in a vfork child. */
	sigaction(SIGCHLD, &given.chld, NULL);
	sigaction(SIGPIPE, &given.pipe, NULL);
	if (given.core_saved)
		setrlimit(RLIMIT_CORE, &given.core);
	if (given.nofile_saved)
		setrlimit(RLIMIT_NOFILE, &given.nofile);
	for (int fd = 0; fd < 3; fd++)
		if (given.closed[fd])
			close(fd);
	sigprocmask(SIG_SETMASK, orig, NULL);
	if (shell_command)
		execl("/bin/sh", "sh", "-c", shell_command, (char *)NULL);
	else
		execvp(argv[0], argv);
}

/* Messages to the watchdog: 8-byte monotonic deadlines (one write each, atomic on a
 * pipe), WATCHDOG_DISARM, or an orphan of the command's: minus its pid, then its start
 * time (/proc/PID/stat's ticks), in one 16-byte write. */
#define WATCHDOG_DISARM         INT64_MIN
#define WATCHDOG_NONE           INT64_MAX /* no deadline (--on-lost ignore) */
#define WATCHDOG_READY_MS       10000     /* the watchdog says it is up within this, or none */
#define WATCHDOG_RETRY_MS       1000 /* a dead watchdog replaced within this, or the command stops */
#define WATCHDOG_RETRY_EVERY_MS 100  /* (tried again this often meanwhile) */
#define ORPHANS_MAX             COVER_MAX /* orphans told to the watchdog at once */
#define ORPHAN_POLL_MS          200       /* look for new orphans at least this often */

/* The watchdog's roots besides the command: the orphans rlock told it of (a pid and
 * the start time that proves it the same process later). */
static struct {
	pid_t pid[ORPHANS_MAX];
	unsigned long long start[ORPHANS_MAX];
	int n;
} roots;

/* The roots that are still the processes told of, into live[]. Their number. */
static int roots_live(pid_t *live)
{
	int n = 0;

	for (int i = 0; i < roots.n; i++) {
		struct proc_stat st;
		if (proc_stat_read(roots.pid[i], &st) == 0 && st.start_ticks == roots.start[i] &&
		    proc_stat_live(&st))
			live[n++] = roots.pid[i];
		else
			roots.pid[i] = 0; /* gone: its place is free */
	}
	int k = 0;
	for (int i = 0; i < roots.n; i++)
		if (roots.pid[i]) {
			roots.pid[k] = roots.pid[i];
			roots.start[k++] = roots.start[i];
		}
	roots.n = k;
	return n;
}

/* The watchdog's kill at its deadline or at rlock's end: the cover, below the command
 * and below the orphans it was told of. */
static void watchdog_kill(pid_t pgid, pid_t sid, pid_t rlock_pgrp)
{
	pid_t live[ORPHANS_MAX];
	int n = roots_live(live);

	cover_freeze_kill(pgid, sid, rlock_pgrp, live, n);
}

/* The first message a watchdog reads: the group it guards (the command writes it, just
 * before its exec), or the end of its pipe: nothing was started, nothing to kill. */
static pid_t watchdog_group(int fd)
{
	for (;;) {
		int64_t v;
		ssize_t n = read(fd, &v, sizeof v);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof v || v <= 0 || v > INT32_MAX)
			_exit(0);
		return (pid_t)v;
	}
}

/* The watchdog's life: learn the group, then kill it at the deadline it holds, or when
 * rlock is gone (the end of its pipe); exit on WATCHDOG_DISARM. Its orders come on fd
 * 0; a deadline it acted on is reported on fd 1 (watchdog_heard) before the group's
 * SIGKILL: rlock, which reaps the command only after that kill, finds the report then,
 * whatever deadline it has told since (issue: a renewal after SIGCONT moved it on).
 * It kills the command's cover as far as it can see it: what is below the command (sid:
 * rlock's session; never rlock's own group) and below the orphans rlock told it of
 * (tell_orphans): once rlock is gone, or while it is stopped, they are out of reach of
 * a walk from the command (reparented to rlock, then to another reaper). */
static void __attribute__((noreturn)) watchdog_run(pid_t sid, pid_t rlock_pgrp)
{
	pid_t pgid = watchdog_group(0);
	int64_t kill_by = WATCHDOG_NONE; /* the next message, written with the group */

	for (;;) {
		int timeout = -1;
		if (kill_by != WATCHDOG_NONE) {
			int64_t left = kill_by - clock_ms();
			struct pollfd told = {.fd = 0, .events = POLLIN};
			if (left <= 0 && poll(&told, 1, 0) == 1) {
				/* A message came with the deadline: a later deadline (from a
				 * renewal confirmed in time), the disarm or rlock's end. Read it
				 * first: its deadline is as sure as the one it replaces. */
				left = 0;
			} else if (left <= 0) {
				if (kill(-pgid, 0) == 0) /* something to kill: say so first */
					(void)!write(1, &kill_by, sizeof kill_by);
				/* rlock stopped or stuck past the deadline */
				watchdog_kill(pgid, sid, rlock_pgrp);
				kill_by = WATCHDOG_NONE;
				continue;
			}
			timeout = left > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS : (int)left;
		}
		struct pollfd pf = {.fd = 0, .events = POLLIN};
		if (poll(&pf, 1, timeout) <= 0)
			continue;
		int64_t v;
		ssize_t n = read(0, &v, sizeof v);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == (ssize_t)sizeof v && v == WATCHDOG_DISARM)
			_exit(0);
		if (n == (ssize_t)sizeof v && v < 0) { /* an orphan: its start time follows */
			int64_t start;
			if (read(0, &start, sizeof start) != (ssize_t)sizeof start)
				continue;
			pid_t scratch[ORPHANS_MAX];
			if (roots.n == ORPHANS_MAX)
				roots_live(scratch); /* drop the gone */
			if (roots.n < ORPHANS_MAX) {
				roots.pid[roots.n] = (pid_t)-v;
				roots.start[roots.n++] = (unsigned long long)start;
			}
			continue;
		}
		if (n == (ssize_t)sizeof v) {
			kill_by = v;
			continue;
		}
		/* rlock is gone (end of the pipe): the command's top process is stopped
		 * (PR_SET_PDEATHSIG), not dead, so what it started is still below it; again
		 * while anything of the cover can run (bounded: a process in D state takes
		 * its SIGKILL when it leaves that state) */
		for (int i = 0; i < 50; i++) {
			pid_t g[COVER_MAX], r[ORPHANS_MAX];
			int live;
			watchdog_kill(pgid, sid, rlock_pgrp);
			cover_groups(pgid, sid, 0, 0, rlock_pgrp, r, roots_live(r), g, &live);
			if (!live && !cover_group_live(pgid))
				break;
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		_exit(0);
	}
}

/* A tiny process that outlives rlock and runs while rlock cannot: if rlock dies without
 * saying goodbye (even by SIGKILL), it kills the command's whole process group
 * (PR_SET_PDEATHSIG covers only the direct child, not what a shell command started);
 * and if rlock is stopped or stuck past the last deadline it was told (the moment the
 * group must be dead before the lease can end), it kills the group then. The
 * supervisor moves that deadline on after every confirmed renewal.
 *
 * It lives in a session of its own: no single kill may reach both rlock and its
 * guard. `timeout -s KILL`, `kill -9 %job`, `kill -KILL -- -PGID` and supervisors
 * signal rlock's whole process group; a session-wide kill or a terminal's hang-up
 * reaches rlock's session; neither holds the watchdog. It is forked before the command
 * and writes one byte on ready_fd once it is out of rlock's session: the command reads
 * it before its exec (no hop through rlock), or rlock does (watchdog_await). One that
 * cannot get there exits with its errno, the byte unwritten. Its first message is the
 * group to guard and the group's deadline (watchdog_run). Returns its pid (*write_fd:
 * its pipe; *report_fd: the non-blocking read end of its report that it killed the
 * group at a deadline), or 0 with errno set. */
static pid_t fork_watchdog(int ready_fd, int *write_fd, int *report_fd)
{
	int p[2], r[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return 0;
	if (pipe2(r, O_CLOEXEC | O_NONBLOCK) < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		errno = e;
		return 0;
	}
	pid_t w = fork();
	if (w < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		close(r[0]);
		close(r[1]);
		errno = e;
		return 0;
	}
	if (w == 0) {
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		pid_t sid = getsid(0), rlock_pgrp = getpgrp();
		if (setsid() < 0)
			_exit(errno & 0xff); /* never ready: the command does not run */
		(void)!write(ready_fd, "", 1);
		/* Its orders on 0, its report on 1 (rlock's fds 0-2 are always open, so
		 * neither pipe is one of them), nothing else. */
		dup2(p[0], 0);
		dup2(r[1], 1);
		fds_close_from(2, -1);
		prctl(PR_SET_NAME, "rlock-watchdog");
		watchdog_run(sid, rlock_pgrp);
	}
	close(p[0]);
	close(r[1]);
	*write_fd = p[1];
	*report_fd = r[0];
	return w;
}

/* The errno a watchdog that never said ready died with (its exit status). */
static int watchdog_errno(pid_t w)
{
	int st = 0;

	kill(w, SIGKILL);
	while (waitpid(w, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : ESRCH;
}

/* A watchdog started while the command runs: wait until it is ready. Bounded: a fresh
 * process that does two system calls; one that cannot in WATCHDOG_READY_MS is as good
 * as none, and the wait never outlasts the lease's deadline (ready_by, WATCHDOG_NONE:
 * none): the supervisor, not this wait, must act on it. Its pid (*write_fd: its pipe,
 * *report_fd: its report), or 0 with errno set. */
static pid_t watchdog_await(pid_t pgid, int64_t kill_by, int64_t ready_by, int *write_fd,
                            int *report_fd)
{
	int ready[2], fd, rfd, rc;
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return 0;
	pid_t w = fork_watchdog(ready[1], &fd, &rfd);
	int e = errno;
	close(ready[1]);
	if (!w) {
		close(ready[0]);
		errno = e;
		return 0;
	}
	struct pollfd pf = {.fd = ready[0], .events = POLLIN};
	int64_t until = clock_ms() + WATCHDOG_READY_MS;
	if (ready_by != WATCHDOG_NONE && ready_by < until)
		until = ready_by;
	do {
		int64_t left = until - clock_ms();
		rc = poll(&pf, 1, left > 0 ? (int)left : 0);
	} while (rc < 0 && errno == EINTR);
	if (rc <= 0 || read(ready[0], &c, 1) != 1) {
		close(ready[0]);
		close(fd);
		close(rfd);
		e = watchdog_errno(w);
		errno = rc == 0 ? ETIMEDOUT : e;
		return 0;
	}
	close(ready[0]);
	int64_t first[2] = {pgid, kill_by}; /* one write: atomic on a pipe */
	(void)!write(fd, first, sizeof first);
	*write_fd = fd;
	*report_fd = rfd;
	return w;
}

/* Forget the watchdog: close its pipe (one that knows no group just exits; one that
 * does kills it) and its report. */
static void watchdog_drop(struct child *ch)
{
	if (ch->watch_fd >= 0)
		close(ch->watch_fd);
	if (ch->watch_report >= 0)
		close(ch->watch_report);
	ch->watch_fd = ch->watch_report = -1;
	ch->watchdog = 0;
}

/* Read the watchdog's report (fork_watchdog): ch->watchdog_killed once it said that it
 * killed the group at a deadline. Non-blocking. */
static void watchdog_heard(struct child *ch)
{
	int64_t v;

	while (ch->watch_report >= 0 && read(ch->watch_report, &v, sizeof v) == (ssize_t)sizeof v)
		ch->watchdog_killed = 1;
}

static void tell_watchdog(struct child *ch, int64_t v)
{
	if (ch->watch_fd >= 0 && v != ch->watch_by) {
		(void)!write(ch->watch_fd, &v, sizeof v);
		ch->watch_by = v;
	}
}

/* The orphans told to the current watchdog (rlock's side of roots). */
static struct {
	pid_t pid[ORPHANS_MAX];
	int n;
} told;

/* Tell the watchdog of the command's orphans that rlock has now (reparented to it, a
 * subreaper, when their parent died): a walk from the command no longer finds them,
 * and once rlock is gone (or stopped) only the watchdog can stop what is below them
 * (timeout(1)'s group of `rlock -c 'timeout 1h job &'` after the shell exited). */
static void tell_orphans(struct child *ch)
{
	pid_t o[ORPHANS_MAX];
	int n = ch->watch_fd >= 0 ? cover_orphans(ch->pid, ch->watchdog, o, ORPHANS_MAX) : 0;
	int k = 0;

	for (int i = 0; i < told.n; i++) /* forget the reaped */
		for (int j = 0; j < n; j++)
			if (told.pid[i] == o[j]) {
				told.pid[k++] = told.pid[i];
				break;
			}
	told.n = k;
	for (int j = 0; j < n && told.n < ORPHANS_MAX; j++) {
		int known = 0;
		for (int i = 0; i < told.n && !known; i++)
			known = told.pid[i] == o[j];
		struct proc_stat st;
		if (known || proc_stat_read(o[j], &st) < 0 || !proc_stat_live(&st))
			continue; /* a zombie is reaped, never a root */
		int64_t m[2] = {-(int64_t)o[j], (int64_t)st.start_ticks}; /* one write */
		(void)!write(ch->watch_fd, m, sizeof m);
		told.pid[told.n++] = o[j];
		log_debug("the command's orphan pid %ld (now rlock's child) is in the watchdog's "
		          "care too",
		          (long)o[j]);
	}
}

/* The leaders of the command's cover groups told to the current watchdog as roots. */
static struct {
	pid_t pid[ORPHANS_MAX];
	int n;
} told_groups;

/* The command's top process is stopped (a job's Ctrl-Z, kill -STOP): were rlock to die
 * now, the kernel would send its group, orphaned with a stopped member, SIGHUP and
 * SIGCONT, and the shell that dies of it would leave the groups below it (timeout(1)'s)
 * out of a walk's sight, running on. Tell the watchdog their leaders as roots (pid and
 * start time), once per stop. */
static void tell_cover_groups(struct child *ch)
{
	pid_t g[COVER_MAX];
	int live;

	if (ch->watch_fd < 0 || ch->reaped || ch->stop_told)
		return;
	ch->stop_told = 1;
	int n = cover_groups(ch->pid, getsid(0), 0, ch->watchdog, getpgrp(), NULL, 0, g, &live);
	for (int i = 1; i < n && told_groups.n < ORPHANS_MAX; i++) {
		int known = 0;
		for (int k = 0; k < told_groups.n && !known; k++)
			known = told_groups.pid[k] == g[i];
		struct proc_stat st;
		if (known || proc_stat_read(g[i], &st) < 0 || st.pgrp != g[i] ||
		    !proc_stat_live(&st))
			continue; /* told, or its leader gone: below the command still */
		int64_t m[2] = {-(int64_t)g[i], (int64_t)st.start_ticks}; /* one write */
		(void)!write(ch->watch_fd, m, sizeof m);
		told_groups.pid[told_groups.n++] = g[i];
		log_debug("the command is stopped: its process group %ld is in the watchdog's care "
		          "too",
		          (long)g[i]);
	}
}

/* Is the command's top process stopped now? (A stop rlock is not told of: no WUNTRACED
 * without a terminal.) A new stop is told anew. */
static void watch_stopped(struct child *ch)
{
	struct proc_stat st;

	if (ch->reaped || proc_stat_read(ch->pid, &st) < 0)
		return;
	if (st.state == 'T')
		tell_cover_groups(ch);
	else
		ch->stop_told = 0;
}

/* The command is done: say which of its orphans left rlock's session (setsid: a
 * daemon), out of the lock's cover, to run on after the release (-v). */
static void say_left(void)
{
	for (int i = 0; i < told.n; i++) {
		struct proc_stat st;
		if (proc_stat_read(told.pid[i], &st) == 0 && proc_stat_live(&st) &&
		    st.sid != getsid(0))
			log_info(
			    "the command's process %ld (%s) left rlock's session (setsid: a "
			    "daemon): the lock does not cover it; it runs on after the release",
			    (long)told.pid[i], st.comm);
	}
}

/* Give the terminal to group `to` only if `from` has it: a job continued in the
 * background (bg) must not take the terminal from the shell. */
static void hand_terminal(int tty, pid_t from, pid_t to)
{
	if (tty >= 0 && tcgetpgrp(tty) == from)
		tcsetpgrp(tty, to);
}

/* rlock's controlling terminal: whichever of fds 0-2 is it, else /dev/tty (a command
 * run with `</dev/null >log 2>&1` may still prompt there, as sudo and ssh do: under
 * flock it can, being in the terminal's foreground group), *opened then set. -1: none
 * (cron, a daemon, setsid). */
static int controlling_tty(int *opened)
{
	*opened = 0;
	for (int fd = 0; fd < 3; fd++)
		if (isatty(fd) && tcgetpgrp(fd) >= 0) /* ENOTTY: not our controlling one */
			return fd;
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (tcgetpgrp(fd) < 0) {
		close(fd);
		return -1;
	}
	*opened = 1;
	return fd;
}

static void tty_drop(struct child *ch)
{
	if (ch->tty_opened)
		close(ch->tty);
	ch->tty = -1;
	ch->tty_opened = 0;
}

/* What the child reports on its exec pipe when it cannot run the command: the step
 * that failed and its errno (one 8-byte write, atomic on a pipe). End of file instead:
 * it exec'd (or died of SIGKILL: rlock was gone). */
enum setup_step { STEP_EXEC, STEP_GROUP, STEP_PDEATHSIG, STEP_WATCHDOG, STEP_LATE };

static void __attribute__((noreturn)) setup_failed(int fd, enum setup_step step, int e)
{
	int msg[2] = {(int)step, e};

	(void)!write(fd, msg, sizeof msg);
	_exit(step == STEP_LATE   ? RL_EX_LOST
	      : step != STEP_EXEC ? RL_EX_OSERR
	      : e == ENOENT       ? RL_EX_NOTFOUND
	                          : RL_EX_NOEXEC);
}

/* What the command's child needs up to its exec (on rlock's stack: vfork). */
struct setup {
	int ep;           /* its report: the step that failed and the errno */
	int ready;        /* the watchdog's ready byte (end of file: none) */
	int watch;        /* the watchdog's pipe: the group and its deadline, written here */
	int tty;          /* the terminal to take for the group, or -1 */
	pid_t parent;     /* rlock */
	int64_t kill_by;  /* the group's deadline, the watchdog's first */
	int64_t start_by; /* the lease's loss: no start from then on (-1: none) */
	char *const *argv;
	const char *shell_command;
	const sigset_t *orig;
};

/* The command's child, up to exec: a vfork child, on rlock's stack while rlock waits
 * for its exec, so only async-signal-safe calls and no writes to memory but its own
 * locals. Every guarantee is in place before the command runs, or it does not run: its
 * own process group (what a loss signals), PR_SET_PDEATHSIG, and a watchdog in its own
 * session that knows the group (its ready byte read here, end of file instead: it
 * could not start, or it died). */
static void __attribute__((noreturn)) command_child(const struct setup *u)
{
	char c;
	ssize_t r;

	if (setpgid(0, 0) < 0)
		setup_failed(u->ep, STEP_GROUP, errno);
	if (u->tty >= 0)
		tcsetpgrp(u->tty, getpid());
	/* Stopped, not killed, when rlock dies: frozen, it runs no more than a dead one
	 * would, and it keeps its children, so that the watchdog finds through it the
	 * groups they moved to (the cover) and kills them all; killed at once, it would
	 * orphan them out of the watchdog's sight first. */
	if (prctl(PR_SET_PDEATHSIG, SIGSTOP) < 0)
		setup_failed(u->ep, STEP_PDEATHSIG, errno);
	if (getppid() != u->parent)
		kill(getpid(), SIGKILL); /* rlock is already gone: never run unprotected */
	do
		r = read(u->ready, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1) /* no watchdog: never run unprotected */
		setup_failed(u->ep, STEP_WATCHDOG, 0);
	/* rlock stopped (Ctrl-Z, SIGSTOP) or stalled since the acquire, past the lease:
	 * another may hold the lock now. Before the watchdog knows the group (it would kill
	 * it at once, a race with this report); from then on it guards the rest. */
	if (u->start_by >= 0 && clock_ms() >= u->start_by)
		setup_failed(u->ep, STEP_LATE, 0);
	int64_t first[2] = {getpid(), u->kill_by}; /* one write: atomic on a pipe */
	if (write(u->watch, first, sizeof first) != (ssize_t)sizeof first)
		setup_failed(u->ep, STEP_WATCHDOG, 0); /* it died since */
	child_exec(u->argv, u->shell_command, u->orig);
	setup_failed(u->ep, STEP_EXEC, errno);
}

/* The file an exec of name tried (execvp: name itself when it has a '/', else the first
 * regular file of that name on PATH, the default path when PATH is unset) into buf; 0,
 * or -1 when there is none. */
static int exec_file(const char *name, char *buf, size_t n)
{
	struct stat st;

	if (strchr(name, '/'))
		return snprintf(buf, n, "%s", name) < (int)n && stat(buf, &st) == 0 ? 0 : -1;
	const char *path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		/* an empty entry is the current directory */
		int w = snprintf(buf, n, "%.*s%s%s", (int)len, p, len ? "/" : "", name);
		if (w > 0 && (size_t)w < n && stat(buf, &st) == 0 && S_ISREG(st.st_mode))
			return 0;
		if (!end)
			return -1;
		p = end;
	}
}

/* An exec that failed, said as bash says it. ENOENT of a name that is nowhere on PATH
 * is "command not found", of a path to nothing "No such file or directory"; a
 * directory is "Is a directory". But when the file is there, executable, and starts
 * with #!, an ENOENT, EACCES, ENOEXEC or ELOOP is its interpreter's: named as the
 * kernel read it (up to a space, a tab or the line's end; the log shows a DOS line
 * end's carriage return as \x0d, as bash shows ^M), never blamed on a file the user
 * can see and run. */
static void say_exec_failed(const char *what, int e)
{
	char file[4096], head[256] = "";
	struct stat st;

	if (exec_file(what, file, sizeof file) < 0 || stat(file, &st) < 0) {
		log_error("%s: %s", what,
		          e == ENOENT && !strchr(what, '/') ? "command not found" : strerror(e));
		return;
	}
	if (S_ISDIR(st.st_mode) && e == EACCES) {
		log_error("%s: %s", what, strerror(EISDIR));
		return;
	}
	int script = e == ENOENT || e == ENOEXEC || e == ELOOP ||
	             (e == EACCES && S_ISREG(st.st_mode) && access(file, X_OK) == 0);
	int fd = script ? open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) : -1;
	if (fd >= 0) {
		ssize_t r = read(fd, head, sizeof head - 1);
		head[r > 0 ? r : 0] = '\0';
		close(fd);
	}
	if (head[0] == '#' && head[1] == '!') {
		char *interp = head + 2 + strspn(head + 2, " \t");
		size_t len = strcspn(interp, " \t\n");
		int cr = len > 0 && interp[len - 1] == '\r';
		interp[len] = '\0';
		log_error("%s: bad interpreter %s: %s%s", what, *interp ? interp : "(none)",
		          strerror(e),
		          cr ? " (its #! line ends in a carriage return: DOS line ends)" : "");
	} else if (e == ENOENT) {
		log_error("%s: %s (the file is there: a program loader it needs is missing)", what,
		          strerror(ENOENT));
	} else {
		log_error("%s: %s", what, strerror(e));
	}
}

/* The child could not be set up (the watchdog, or a step of command_child): wait for
 * it, take the terminal back and say why. Returns the exit status to use. */
static int spawn_failed(struct child *ch, const char *what, int step, int e)
{
	int st;

	kill(ch->pid, SIGKILL); /* it has not exec'd: nothing of the user's is lost */
	while (waitpid(ch->pid, &st, 0) < 0 && errno == EINTR)
		;
	hand_terminal(ch->tty, ch->pid, getpgrp());
	tty_drop(ch);
	if (step == STEP_LATE) {
		log_error("lock lost before the command could start: rlock was stopped or stalled "
		          "since the acquire until the lease ran out; the command does not run");
		return RL_EX_LOST;
	}
	if (step == STEP_WATCHDOG) {
		log_error("cannot start the watchdog (%s): the command does not run (nothing "
		          "would stop it if rlock were killed)",
		          strerror(e));
		return RL_EX_OSERR;
	}
	if (step != STEP_EXEC) {
		log_error("cannot set up the command's process (%s: %s): the command does not run",
		          step == STEP_GROUP ? "its own process group" : "PR_SET_PDEATHSIG",
		          strerror(e));
		return RL_EX_OSERR;
	}
	/* what is escaped by the log, once, and cut in the middle when long (the reason stays) */
	say_exec_failed(what, e);
	return e == ENOENT ? RL_EX_NOTFOUND : RL_EX_NOEXEC;
}

/* Start the command's child with vfork: no copy of rlock's address space (page tables,
 * copy-on-write faults in rlock afterwards, a larger exec); rlock resumes once it has
 * exec'd or exited. The pid, or -1. */
static pid_t start_command(const struct setup *u)
{
	pid_t pid = vfork();

	if (pid == 0)
		command_child(u);
	return pid;
}

/* A watchdog started ahead of the command (child_watchdog_ahead), for child_spawn. */
static struct {
	pid_t pid;  /* 0: none */
	int fd;     /* its pipe */
	int report; /* its report's read end */
	int ready;  /* the read end of its ready byte */
	int err;    /* why none: the errno of what failed */
} ahead;

int child_watchdog_ahead(void)
{
	int ready[2];

	cover_note_inherited(); /* off the path: the acquire's reply is on its way */

	if (pipe2(ready, O_CLOEXEC) < 0) {
		ahead.err = errno;
		return -1;
	}
	ahead.pid = fork_watchdog(ready[1], &ahead.fd, &ahead.report);
	ahead.err = errno;
	close(ready[1]);
	if (!ahead.pid) {
		close(ready[0]);
		return -1;
	}
	ahead.ready = ready[0];
	return 0;
}

/* The watchdog for a spawn: the one started ahead if it still runs (one that died
 * meanwhile, killed by someone, is reaped and replaced), else a new one. 0 with
 * ch->watchdog, ch->watch_fd and *ready (its byte's read end), or -1 (logged). */
static int take_watchdog(struct child *ch, int *ready)
{
	if (ahead.pid && waitpid(ahead.pid, NULL, WNOHANG) != 0) {
		close(ahead.fd);
		close(ahead.report);
		close(ahead.ready);
		ahead.pid = 0;
	}
	if (!ahead.pid && child_watchdog_ahead() < 0) {
		log_error("cannot start the watchdog (%s): the command does not run (nothing "
		          "would stop it if rlock were killed)",
		          strerror(ahead.err));
		return -1;
	}
	ch->watchdog = ahead.pid;
	ch->watch_fd = ahead.fd;
	ch->watch_report = ahead.report;
	*ready = ahead.ready;
	ahead.pid = 0;
	return 0;
}

/* A SIGTSTP sent to rlock (Ctrl-Z on a terminal whose foreground group is rlock's, as
 * when the command's stdin is not the terminal; or kill -TSTP) is the whole job's: rlock
 * hears it on a signalfd while the command runs and passes it on, then stops once the
 * command did (follow_stop), instead of stopping alone while the command runs on
 * unrenewed. Not a SIGTSTP the caller ignores or blocks (the command gets it as given).
 * The signalfd, or -1 (SIGTSTP then left as it was). */
static int stop_listen(const sigset_t *orig)
{
	struct sigaction sa;
	sigset_t t;

	if (sigaction(SIGTSTP, NULL, &sa) < 0 || sa.sa_handler == SIG_IGN ||
	    sigismember(orig, SIGTSTP))
		return -1;
	sigemptyset(&t);
	sigaddset(&t, SIGTSTP);
	if (sigprocmask(SIG_BLOCK, &t, NULL) < 0)
		return -1;
	int fd = signalfd(-1, &t, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		sigprocmask(SIG_UNBLOCK, &t, NULL);
	return fd;
}

/* The command is done (and its locks given back: child_unlisten_stop): a SIGTSTP stops
 * rlock again (one pending now does at once). */
static void stop_unlisten(struct child *ch)
{
	sigset_t t;

	if (ch->tstp_fd < 0)
		return;
	close(ch->tstp_fd);
	ch->tstp_fd = -1;
	sigemptyset(&t);
	sigaddset(&t, SIGTSTP);
	sigprocmask(SIG_UNBLOCK, &t, NULL);
}

int child_spawn(struct child *ch, char *const *argv, const char *shell_command,
                const sigset_t *orig, int64_t kill_by, int64_t start_by)
{
	int ep[2], ready;

	memset(ch, 0, sizeof *ch);
	told.n = told_groups.n = 0;
	ch->watch_fd = -1;
	ch->watch_report = -1;
	ch->tty = -1;
	ch->tstp_fd = -1;
	/* What the command leaves behind when it exits (`job &`) is reparented to rlock,
	 * so rlock can wait for its group and reap it. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		log_debug("cannot become a child subreaper: %s", strerror(errno));
	cover_note_inherited(); /* which children are not the command's (once) */
	/* The watchdog first (started ahead, while the lock was asked for): it is in its
	 * own session, or gets there while rlock starts the command, which execs once it
	 * has read the watchdog's ready byte. */
	if (take_watchdog(ch, &ready) < 0)
		return RL_EX_OSERR;
	/* ep: the child's set-up or exec errno (end of file: exec'd). */
	if (pipe2(ep, O_CLOEXEC) < 0) {
		log_error("cannot create a pipe: %s", strerror(errno));
		close(ready);
		watchdog_drop(ch); /* the watchdog learns of no group: it just exits */
		return RL_EX_OSERR;
	}
	ch->watch_by = kill_by < 0 ? WATCHDOG_NONE : kill_by;
	/* The command's group takes the terminal at once if it is its stdin and rlock's
	 * group has it (a foreground job); else when it asks for it (follow_stop). */
	ch->tty = controlling_tty(&ch->tty_opened);
	int take = ch->tty == STDIN_FILENO && tcgetpgrp(ch->tty) == getpgrp() ? ch->tty : -1;
	ch->tty_given = take >= 0;
	struct setup u = {ep[1],        ready,    ch->watch_fd, take,          getpid(),
	                  ch->watch_by, start_by, argv,         shell_command, orig};
	ch->tstp_fd = stop_listen(orig); /* before the fork: a Ctrl-Z from then on is heard */
	pid_t pid = start_command(&u);
	int fork_errno = errno;
	close(ep[1]);
	close(ready);
	if (pid < 0) {
		stop_unlisten(ch);
		tty_drop(ch);
		close(ep[0]);
		watchdog_drop(ch); /* the watchdog learns of no group: it just exits */
		log_error("cannot fork: %s", strerror(fork_errno));
		return RL_EX_OSERR;
	}
	ch->pid = pid;

	int msg[2] = {0, 0};
	ssize_t n;
	do
		n = read(ep[0], msg, sizeof msg);
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n != (ssize_t)sizeof msg)
		return 0; /* exec'd */
	if (msg[0] == STEP_WATCHDOG)
		msg[1] = watchdog_errno(ch->watchdog);
	else
		tell_watchdog(ch, WATCHDOG_DISARM); /* it exits on its own, not waited for */
	watchdog_drop(ch);
	stop_unlisten(ch);
	return spawn_failed(ch, shell_command ? "/bin/sh" : argv[0], msg[0], msg[1]);
}

/* Is rlock's process group a job of a shell, not orphaned (POSIX): rlock, or the
 * ancestor in its group that started it (a script: `sh deploy.sh`), has its parent
 * in the same session, in another group. A stop signal sent to an orphaned group is
 * discarded. */
static int group_is_job(void)
{
	pid_t sid = getsid(0), pgrp = getpgrp();
	pid_t pid = getppid();

	for (int i = 0; i < 64 && pid > 0; i++) { /* bounded: a chain of the group's own */
		struct proc_stat st;
		if (proc_stat_read(pid, &st) < 0 || st.sid != sid)
			return 0;
		if (st.pgrp != pgrp)
			return 1;
		pid = st.ppid;
	}
	return 0;
}

/* The command was stopped on rlock's terminal (Ctrl-Z; or, in the background, to read
 * or write it: SIGTTIN): do what a shell expects of its job and stop too, after taking
 * the terminal back, so that the shell regains control. When the shell continues us:
 * on `fg` (our group has the terminal) hand it to the command; on `bg` leave it with
 * the shell. The caller then continues the command (1), unless the lease ran out
 * meanwhile: while rlock is stopped its lease is not renewed, and a suspension longer
 * than the lease loses the lock (exit 79 when continued). 0: not followed, the
 * command left stopped. */
static int follow_stop(struct child *ch, int stopsig)
{
	struct sigaction sa;
	int sig = stopsig;
	/* the group that stopped: the command's, or the cover's group with the terminal */
	pid_t g = ch->stop_pgrp > 0 ? ch->stop_pgrp : ch->pid;

	/* Stopped to read or write the terminal that rlock's group has and did not hand
	 * over (stdin is not the terminal: a prompt on /dev/tty, as sudo and ssh do): hand
	 * it over now, as a shell's fg would, and let it go on. */
	if ((stopsig == SIGTTIN || stopsig == SIGTTOU) && tcgetpgrp(ch->tty) == getpgrp()) {
		tcsetpgrp(ch->tty, g);
		ch->tty_given = 1;
		return 1;
	}
	/* Stopped in the background (rlock started with `&`, or continued with bg). A stop
	 * someone sent (kill -STOP) to a command that never had the terminal is no job's:
	 * left as it is, rlock renews on. A terminal's stop only a shell can resolve (fg),
	 * and only if rlock's group is a job of it: a stop signal sent to an orphaned group
	 * is discarded (POSIX), so rlock would not stop and the command, continued, would
	 * stop again at once. Left stopped then, as it stopped itself. */
	int tty_stop = stopsig == SIGTTIN || stopsig == SIGTTOU;
	/* A SIGTSTP rlock was sent and passed on (stop_listen): the job's stop, followed
	 * whoever has the terminal; not where no shell's job control can continue rlock's
	 * group any more (orphaned: the kernel discards a SIGTSTP there). */
	int asked = ch->suspend && stopsig == SIGTSTP;
	ch->suspend = 0;
	int job = group_is_job();
	if (asked && !job)
		return 1; /* orphaned since: the kernel would discard the stop (on_events) */
	if (!asked && tcgetpgrp(ch->tty) != g && ((!ch->tty_given && !tty_stop) || !job))
		return 0;
	tell_cover_groups(ch); /* the command is stopped, and rlock about to be */
	hand_terminal(ch->tty, g, getpgrp());
	/* Stop as the command did, so the shell says why; SIGTTOU is blocked here, and an
	 * ignored stop signal would not stop us at all. */
	sigset_t cur, t;
	sigemptyset(&t);
	sigaddset(&t, SIGTSTP);
	/* The command's stop is the job's: rlock's whole group stops with it (the script
	 * that runs rlock, a pipeline's other end), as the terminal would have stopped it,
	 * or the shell that waits for them never gets control back. Not for a stop rlock
	 * was sent itself (asked): its group got it too, or was not meant to. */
	pid_t to = asked ? getpid() : 0;
	if (sig == SIGTSTP && ch->tstp_fd >= 0) {
		/* blocked by rlock itself (stop_listen): this one is let through, to stop */
		kill(to, SIGTSTP);
		sigprocmask(SIG_UNBLOCK, &t, NULL);
		sigprocmask(SIG_BLOCK, &t, NULL);
	} else {
		if ((sig != SIGTSTP && sig != SIGTTIN) || sigaction(sig, NULL, &sa) < 0 ||
		    sa.sa_handler == SIG_IGN || sigprocmask(SIG_BLOCK, NULL, &cur) < 0 ||
		    sigismember(&cur, sig)) /* nor a blocked one (a mask the caller gave) */
			sig = SIGSTOP;
		kill(to, sig);
	}
	/* Continued. */
	hand_terminal(ch->tty, getpgrp(), g);
	return 1;
}

/* Why no watchdog could be started, for a line: watchdog_await's ETIMEDOUT is one that
 * never said it was ready (stopped, starved), not a connection's timeout. */
static const char *unguarded_why(const struct child *ch)
{
	return ch->unguarded_errno == ETIMEDOUT ? "none said it was ready in time"
	                                        : strerror(ch->unguarded_errno);
}

/* Start a watchdog in place of one that died: 0, or -1 with ch->unguarded_errno. */
static int rewatch_start(struct child *ch)
{
	/* not waited for past the deadline the dead one held (the lease's, last told) */
	ch->watchdog =
	    watchdog_await(ch->pid, ch->watch_by, ch->watch_by, &ch->watch_fd, &ch->watch_report);
	if (!ch->watchdog) {
		ch->unguarded_errno = errno;
		return -1;
	}
	told.n = told_groups.n = 0; /* the new one knows no orphan yet */
	ch->stop_told = 0;
	tell_orphans(ch);
	return 0;
}

/* The watchdog died while the command runs (killed by hand, by the OOM killer): the
 * command must not go on without one. One that cannot be started now (no process slot,
 * no descriptor) is tried again for WATCHDOG_RETRY_MS (retry_watchdog); then the
 * command is stopped (unguarded_stop in the supervisor). */
static void restart_watchdog(struct child *ch)
{
	watchdog_heard(ch); /* what the dead one said before it died */
	watchdog_drop(ch);
	if (rewatch_start(ch) == 0) {
		log_warn("the watchdog process died: a new one guards the command");
		return;
	}
	ch->unguarded = clock_ms();
	log_debug("the watchdog process died and no new one can be started (%s): trying again",
	          unguarded_why(ch));
}

/* Reap every exited child: the command (its status into *st), the orphans of its
 * group reparented to us, the watchdog if someone killed it. Returns the command's
 * stop signal when it was stopped on a terminal, else 0. */
static int reap(struct child *ch, int *st)
{
	int flags = WNOHANG | (ch->tty >= 0 || ch->suspend ? WUNTRACED : 0);

	for (;;) {
		int s;
		pid_t w = waitpid(-1, &s, flags);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 0;
		if (w == ch->pid && !ch->reaped) {
			if (WIFSTOPPED(s)) {
				ch->stop_pgrp = ch->pid;
				return WSTOPSIG(s);
			}
			ch->reaped = 1;
			*st = s;
		} else if (w == ch->watchdog && !WIFSTOPPED(s)) {
			restart_watchdog(ch);
		} else if (WIFSTOPPED(s) && ch->reaped && w != ch->watchdog) {
			/* The command exited, and what is left of its group (reparented to us)
			 * stopped: a Ctrl-Z to the group, which still has the terminal, is the
			 * job's stop, followed as the command's would be (else the shell never
			 * gets control back while rlock waits for a stopped group). So is one
			 * of a group of its cover that the terminal was handed to (a job
			 * control's foreground job whose shell is gone). */
			pid_t g = getpgid(w);
			if (g > 0 && g != getpgrp() &&
			    (g == ch->pid || (ch->tty >= 0 && tcgetpgrp(ch->tty) == g))) {
				ch->stop_pgrp = g;
				return WSTOPSIG(s);
			}
		}
	}
}

static int exit_status(int st, int *term_sig)
{
	*term_sig = 0;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st)) {
		*term_sig = WTERMSIG(st);
		return 128 + WTERMSIG(st);
	}
	return RL_EX_SOFTWARE;
}

struct sup {
	struct child *ch;
	const struct supervise_args *a;
	int watching;      /* the loss deadline is still being enforced */
	int lost;          /* lost, and the group was signalled for it */
	int64_t signalled; /* when the group got its first signal (loss, --max-hold) */
	int64_t kill_at;   /* pending SIGKILL escalation, or -1 */
	int64_t killed;    /* when SIGKILL was first sent, or -1 */
	int first_sig;     /* the signal the escalation follows */
	sigset_t stopsigs; /* the stops' signals the cover got (stop_with): each once */
	sigset_t fromrl;   /* signals another rlock sent that were forwarded (on_events) */
	int stopping;      /* the --max-hold deadline is still ahead */
	int lost_fd;       /* the hold's lost fd until it fired, then -1 */
	int announced;     /* said that the rest of the group is waited for */
	int64_t warned;    /* the warn_at the group was warned for, or -1 */
	int64_t group_wait, group_check; /* polling the group once the command exited */
	int64_t rewatch_at; /* the next try to replace a dead watchdog (retry_watchdog) */
};

/* The watchdog's deadline: the lease's (while it is watched) or the one it holds, or a
 * pending SIGKILL escalation (--kill-after after a loss or --max-hold) if earlier: a
 * supervisor stuck meanwhile (a log line to a stderr nobody reads, a stop) delays
 * neither. */
static void tell_deadline(struct sup *s)
{
	int64_t by = s->ch->watch_by;

	if (s->watching && s->a->action == ACT_SIGNAL)
		by = s->a->kill_at(s->a->ctx);
	if (s->kill_at >= 0 && s->kill_at < by)
		by = s->kill_at;
	tell_watchdog(s->ch, by);
}

/* SIGKILL by `at`, unless an earlier escalation is already due. */
static void escalate_by(struct sup *s, int64_t at)
{
	if (s->killed < 0 && (s->kill_at < 0 || at < s->kill_at))
		s->kill_at = at;
}

/* A stop (a loss, --max-hold, SIGKILL): to the command's whole cover, not its group
 * alone: what it moved to another group stops with it; but a signal that a nested
 * rlock of the cover forwards reaches its command through it alone (cover_kill). */
static void stop_cover(const struct sup *s, int sig, unsigned how)
{
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		if (forwarded[i] == sig)
			how |= COVER_LEAVE_NESTED;
	cover_kill(s->ch->pid, getsid(0), 1, getpgrp(), sig, how);
}

/* A stop's signal (a loss's, --max-hold's, a lost watchdog's) to the cover, then SIGCONT
 * (a stopped group must hear it), unless an earlier stop sent that signal already: one
 * SIGTERM, as timeout(1) sends one, for a command that traps it to clean up (a second
 * would cut its cleanup short); the later stop only brings SIGKILL forward. Nor to the
 * command's group when another rlock sent it that signal (forwarded: a nested run's
 * holder stopping its cover for the same loss). 1 when the command's group got it now,
 * 0 when it had it. */
static int stop_with(struct sup *s, int sig)
{
	if (sigismember(&s->stopsigs, sig) == 1)
		return 0;
	sigaddset(&s->stopsigs, sig);
	int had = sigismember(&s->fromrl, sig) == 1;
	stop_cover(s, sig, had ? COVER_NOT_CMD : 0);
	stop_cover(s, SIGCONT, 0);
	return !had;
}

/* Can a process of the command's cover still run? */
static int cover_live(const struct sup *s)
{
	pid_t pid = s->ch->pid, g[COVER_MAX];
	int live;

	if (cover_group_live(pid))
		return 1;
	cover_groups(pid, getsid(0), 1, s->ch->watchdog, getpgrp(), NULL, 0, g, &live);
	return live;
}

/* The loss's events line: lost, but for a --preempt request's stop (the release says
 * whether the lock went to it: the caller's line, preempted, or none). */
static void loss_event(const struct supervise_args *a, const char *why, const struct lock *l)
{
	if (!a->preempted || !a->preempted(a->preempt_ctx))
		events_emit(EV_LOST, &(struct ev_facts){.lock = l, .reason = why});
}

/* The lease is lost: signal the group first (nothing may delay that, not even a log
 * line to a stderr that blocks), then say so. */
static void on_loss(struct sup *s, int timed_out)
{
	const struct supervise_args *a = s->a;
	char why[400];
	int64_t now = clock_ms(), by = a->kill_at(a->ctx);

	s->watching = 0;
	s->ch->lost = 1;
	if (a->action == ACT_IGNORE) {
		tell_watchdog(s->ch, WATCHDOG_NONE);
		const struct lock *l = a->lost_reason(a->ctx, timed_out, why, sizeof why);
		/* shown even with -q: with ignore, the exit status cannot say it */
		log_error("lock lost: %s; the command goes on (--on-lost ignore)", why);
		loss_event(a, why, l);
		return;
	}
	s->lost = 1;
	/* rlock was stopped past the watchdog's deadline and learnt of the loss (a renewal
	 * refused, its own clock) before it reaped the group: the watchdog's SIGKILL came
	 * first. What rlock sees of the cover gets SIGKILL too, and nothing is escalated. */
	watchdog_heard(s->ch);
	int killed_already = s->ch->watchdog_killed;
	/* A loss the server told of (a --preempt request's among them) had no late renewal
	 * to warn of: the --warn signal first, so the command hears it before the stop. */
	if (!timed_out && a->warn_signal && s->warned < 0 && !killed_already)
		kill(-s->ch->pid, a->warn_signal);
	int sent = 1; /* 0: a stop under way (--max-hold), or another rlock, sent it already */
	if (killed_already || a->lost_signal == SIGKILL)
		stop_cover(s, SIGKILL, 0);
	else
		sent = stop_with(s, a->lost_signal);
	if (sent || s->signalled < 0) {
		s->signalled = now;
		s->first_sig = a->lost_signal;
	}
	char when[160] = "";
	if (killed_already || a->lost_signal == SIGKILL) {
		s->killed = now;
		s->kill_at = -1;
	} else {
		/* SIGKILL lands before the lease can end, whatever --kill-after says. */
		escalate_by(s, now + a->kill_after_ms < by ? now + a->kill_after_ms : by);
		tell_deadline(s);
		if (s->kill_at <= now)
			/* rlock itself was stopped past it (the watchdog acted meanwhile) */
			snprintf(
			    when, sizeof when,
			    ", SIGKILL at once (its deadline, before the lease can end, passed "
			    "%lld ms ago while rlock was not running)",
			    (long long)(now - s->kill_at));
		else if (s->kill_at < now + a->kill_after_ms)
			snprintf(when, sizeof when,
			         ", SIGKILL in %lld ms (before the lease can end; not after "
			         "--kill-after %lld ms)",
			         (long long)(s->kill_at - now), (long long)a->kill_after_ms);
	}
	const struct lock *l = a->lost_reason(a->ctx, timed_out, why, sizeof why);
	if (killed_already)
		log_error("lock lost: %s; the watchdog killed the command's process group "
		          "before the lease could end (rlock could not renew in time: stopped?)",
		          why);
	else if (!sent)
		log_error("lock lost: %s; the command's process group had SIG%s already (not "
		          "sent again)%s",
		          why, signal_name(a->lost_signal), when);
	else
		log_error("lock lost: %s; sending SIG%s to the command's process group%s", why,
		          signal_name(a->lost_signal), when);
	loss_event(a, why, l);
}

/* --max-hold is over: stop the group as timeout(1) does (SIGTERM, SIGCONT, SIGKILL
 * after --kill-after). */
static void on_max_hold(struct sup *s)
{
	const struct supervise_args *a = s->a;
	int64_t now = clock_ms();

	s->ch->timed_out = 1;
	if (s->killed >= 0)
		return; /* already being killed for a loss */
	if (s->signalled < 0) {
		s->signalled = now;
		s->first_sig = SIGTERM;
	}
	int sent = stop_with(s, SIGTERM);
	escalate_by(s, now + a->kill_after_ms);
	tell_deadline(s); /* before the line, which may block */
	if (sent)
		log_error("--max-hold is over: sending SIGTERM to the command's process group "
		          "(SIGKILL in %lld ms if it still runs)",
		          (long long)(s->kill_at - now));
	else
		log_error("--max-hold is over: the command's process group had SIGTERM already "
		          "(not sent again; SIGKILL in %lld ms if it still runs)",
		          (long long)(s->kill_at - now));
}

/* The watchdog died and none could replace it (restart_watchdog): try again, every
 * WATCHDOG_RETRY_EVERY_MS; after WATCHDOG_RETRY_MS without one, stop the command as
 * --max-hold does (SIGTERM, SIGKILL after --kill-after): killed meanwhile, rlock would
 * leave it running with nothing to stop it, past the lease. The exit is then 71. */
static void retry_watchdog(struct sup *s, int64_t now)
{
	struct child *ch = s->ch;

	if (!ch->unguarded || ch->unguarded_stop || (ch->reaped && !cover_live(s)))
		return;
	if (now < s->rewatch_at)
		return;
	if (rewatch_start(ch) == 0) {
		ch->unguarded = 0;
		log_warn("the watchdog process died: a new one guards the command");
		tell_deadline(s);
		return;
	}
	s->rewatch_at = now + WATCHDOG_RETRY_EVERY_MS;
	if (now - ch->unguarded < WATCHDOG_RETRY_MS)
		return;
	ch->unguarded_stop = 1;
	if (s->killed >= 0)
		return; /* already being killed */
	if (s->signalled < 0) {
		s->signalled = now;
		s->first_sig = SIGTERM;
	}
	stop_with(s, SIGTERM);
	escalate_by(s, now + s->a->kill_after_ms);
	log_error("the watchdog process died and no new one can be started (%s): the command "
	          "is stopped (SIGTERM, SIGKILL in %lld ms), as nothing would stop it if rlock "
	          "were killed",
	          unguarded_why(ch), (long long)(s->kill_at - now));
}

static int64_t min_left(int64_t cur, int64_t at, int64_t now)
{
	int64_t left = at - now;
	if (left < 0)
		left = 0;
	return cur < 0 || left < cur ? left : cur;
}

/* The timers: the watchdog's deadline, the loss, --max-hold, the SIGKILL escalation. */
static void on_timers(struct sup *s, int64_t now)
{
	const struct supervise_args *a = s->a;

	if (a->renew_due && now >= a->renew_due(a->ctx))
		a->renew_launch(a->renew_ctx);
	retry_watchdog(s, now);
	tell_deadline(s);
	if (s->watching && a->warn_signal && now >= a->warn_at(a->ctx) &&
	    a->warn_at(a->ctx) != s->warned && now < a->lost_at(a->ctx)) {
		/* Before the loss action, once per late renewal: the command may checkpoint. */
		s->warned = a->warn_at(a->ctx);
		kill(-s->ch->pid, a->warn_signal);
		const char *late = a->late ? a->late(a->ctx) : NULL;
		log_warn("a renewal%s%s is a third of the ttl late: sending SIG%s to the command's "
		         "process group (--warn); the lease counts as lost in %lld ms",
		         late ? " of " : "", late ? late : "", signal_name(a->warn_signal),
		         (long long)(a->lost_at(a->ctx) - now));
		events_emit(EV_WARNED, &(struct ev_facts){0});
	}
	if (s->watching && now >= a->lost_at(a->ctx))
		on_loss(s, 1);
	if (s->stopping && now >= a->stop_at) {
		s->stopping = 0;
		on_max_hold(s);
	}
	if (s->kill_at >= 0 && now >= s->kill_at) {
		int live = cover_live(s);
		stop_cover(s, SIGKILL, 0);
		s->kill_at = -1;
		s->killed = now;
		/* Said when true: the group still ran, or the watchdog's SIGKILL at the same
		 * deadline came first; not for a group that ended by itself meanwhile. */
		watchdog_heard(s->ch);
		if (live || s->ch->watchdog_killed)
			log_warn("the command's group still runs %lld ms after SIG%s: sending "
			         "SIGKILL",
			         (long long)(now - s->signalled), signal_name(s->first_sig));
	}
}

/* Once the command exited: is its group empty (or beyond SIGKILL's reach)? */
static int group_done(struct sup *s, int64_t now)
{
	if (s->ch->reaped && (s->group_check < 0 || now >= s->group_check || s->killed >= 0)) {
		if (!cover_live(s))
			return 1;
		if (!s->announced++)
			log_debug("the command exited; waiting for the rest of its process group "
			          "(and the groups its processes moved to)");
		s->group_check = now + s->group_wait;
		s->group_wait =
		    s->group_wait * 2 > GROUP_POLL_MAX_MS ? GROUP_POLL_MAX_MS : s->group_wait * 2;
	}
	if (s->killed >= 0) {
		if (now - s->killed >= KILL_GIVE_UP_MS) {
			log_warn("processes of the command's group survive SIGKILL: not waiting "
			         "for them");
			return 1;
		}
		stop_cover(s, SIGKILL, 0); /* anything forked meanwhile */
	}
	return 0;
}

/* Until the next timer (poll's milliseconds, -1 none). */
static int next_timeout(const struct sup *s, int64_t now)
{
	int64_t t = -1;

	if (s->watching)
		t = min_left(t, s->a->lost_at(s->a->ctx), now);
	/* The watchdog's deadline moves on only when told (on_timers): tell it a renewal's
	 * by half-way to the one it holds, not at the loss, a tenth of the ttl before it
	 * (10 ms at -t 100ms: a late wake-up and it killed a group whose lease held). */
	if (s->watching && s->a->action == ACT_SIGNAL && s->ch->watch_by != WATCHDOG_NONE &&
	    s->ch->watch_by - now > 4)
		t = min_left(t, now + (s->ch->watch_by - now) / 2, now);
	if (s->a->renew_due && s->a->renew_due(s->a->ctx) != INT64_MAX)
		t = min_left(t, s->a->renew_due(s->a->ctx), now);
	if (s->watching && s->a->warn_signal && s->a->warn_at(s->a->ctx) != s->warned)
		t = min_left(t, s->a->warn_at(s->a->ctx), now);
	if (s->kill_at >= 0)
		t = min_left(t, s->kill_at, now);
	if (s->stopping)
		t = min_left(t, s->a->stop_at, now);
	if (s->ch->reaped)
		t = min_left(t, s->group_check, now);
	if (s->ch->unguarded && !s->ch->unguarded_stop)
		t = min_left(t, s->rewatch_at, now);
	if (s->killed >= 0)
		t = min_left(t, now + KILL_REPEAT_MS, now);
	/* orphans come silently (no SIGCHLD when a process is reparented to rlock) */
	t = min_left(t, now + ORPHAN_POLL_MS, now);
	return t < 0 ? -1 : t > CLOCK_NAP_MAX_MS ? CLOCK_NAP_MAX_MS : (int)t;
}

/* The group of the command's cover (not its own) that has the terminal: one the command
 * handed it to (a job-control program's foreground job), or 0. Walks the cover: not
 * for a hot path. */
static pid_t tty_cover_group(const struct sup *s)
{
	pid_t fg, g[COVER_MAX];
	int live;

	if (s->ch->tty < 0 || (fg = tcgetpgrp(s->ch->tty)) <= 0 || fg == getpgrp() ||
	    fg == s->ch->pid)
		return 0;
	int n =
	    cover_groups(s->ch->pid, getsid(0), 1, s->ch->watchdog, getpgrp(), NULL, 0, g, &live);
	for (int i = 0; i < n; i++)
		if (g[i] == fg)
			return fg;
	return 0;
}

/* Has the command exited, not yet reaped? (Left to reap: WNOWAIT.) */
static int command_exited(const struct child *ch)
{
	siginfo_t si = {0};

	return waitid(P_PID, (id_t)ch->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	       si.si_pid == ch->pid;
}

/* Forward the signals read (SIGCONT after each: as timeout(1), a stopped group would
 * never see them otherwise); hear the hold's loss. */
static void on_events(struct sup *s, const struct pollfd *p)
{
	if (p[0].revents & POLLIN) {
		struct signalfd_siginfo si;
		while (read(s->a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
			int sig = (int)si.ssi_signo;
			if (sig == SIGCHLD)
				continue;
			/* From another rlock (a nested run's holder stopping its cover, or
			 * forwarding): a stop of ours that sent it already was for the same
			 * loss; the command hears it once (stop_with, the other way round). */
			int rl = si.ssi_code == SI_USER && cover_is_rlock((pid_t)si.ssi_pid);
			if (rl && sigismember(&s->stopsigs, sig) == 1) {
				log_debug(
				    "SIG%s from rlock %ld: the command's group had it already",
				    signal_name(sig), (long)si.ssi_pid);
				continue;
			}
			if (rl)
				sigaddset(&s->fromrl, sig);
			if (!s->ch->reaped && !command_exited(s->ch)) {
				kill(-s->ch->pid, sig);
				kill(-s->ch->pid, SIGCONT);
				log_debug("forwarded SIG%s to the command", signal_name(sig));
				continue;
			}
			/* The command exited before it (its group runs on, or it is a zombie
			 * not yet reaped: the signal came with its SIGCHLD). What rlock waits
			 * for is the rest of the cover, whose groups no command of theirs
			 * passes it on to now: all of them hear it (else rlock waits on, the
			 * lock held, for a job nobody can stop through it: `rlock -c 'timeout
			 * 1h job &'`). The command's status says nothing of this stop, which
			 * the caller must still see (main.c). */
			stop_cover(s, sig, 0);
			stop_cover(s, SIGCONT, 0);
			log_debug("forwarded SIG%s to what is left of the command's group and the "
			          "groups its processes moved to",
			          signal_name(sig));
			if (!s->ch->late_sig)
				s->ch->late_sig = sig;
		}
	}
	if (s->ch->tstp_fd >= 0 && (p[2].revents & POLLIN)) {
		struct signalfd_siginfo si;
		while (read(s->ch->tstp_fd, &si, sizeof si) == (ssize_t)sizeof si)
			;
		/* No shell's job control can continue rlock's group (orphaned: setsid, a
		 * service, a cron job): the kernel discards a SIGTSTP there, and so does rlock,
		 * or it would stop for good and the lease run out under its command. */
		if (!group_is_job()) {
			log_debug("SIGTSTP ignored: no job-control shell could continue rlock");
		} else {
			/* Ctrl-Z to rlock's group (or kill -TSTP): the command's group stops
			 * first, rlock once it has (reap, follow_stop); one that ignores it
			 * runs on, and rlock with it. */
			kill(-s->ch->pid, SIGTSTP);
			log_debug("passed SIGTSTP on to the command's group");
			s->ch->suspend = 1;
			/* the command gone: also the group of its cover the terminal went to */
			pid_t fg = s->ch->reaped ? tty_cover_group(s) : 0;
			if (fg > 0) {
				kill(-fg, SIGTSTP);
				s->ch->stop_pgrp = fg;
			}
			if (s->ch->reaped &&
			    follow_stop(s->ch, SIGTSTP)) { /* the rest of its group */
				if (s->watching && clock_ms() >= s->a->lost_at(s->a->ctx))
					on_loss(s, 1);
				kill(-s->ch->pid, SIGCONT);
				if (fg > 0)
					kill(-fg, SIGCONT);
			}
			s->ch->stop_pgrp = 0;
		}
	}
	if (s->lost_fd >= 0 && (p[1].revents & POLLIN)) {
		uint64_t v;
		(void)!read(s->lost_fd, &v, sizeof v);
		s->lost_fd = -1;
		if (s->watching)
			on_loss(s, 0);
	}
}

/* rlock's status once the group is gone. */
static int supervised_status(struct child *ch, const struct sup *s, int st)
{
	int rc = exit_status(st, &ch->term_sig);

	ch->status = rc;
	/* Stopped by us, as timeout(1) says it: 124, or 137 (128+9) when it took SIGKILL to
	 * stop the command; an exit status, not a signal of rlock's own. Kept under a loss
	 * too: a --preempt stop whose request gave up leaves this one to say (main.c). */
	ch->timeout_status = !ch->timed_out            ? 0
	                     : ch->term_sig == SIGKILL ? RL_EX_TIMEOUT_KILLED
	                                               : RL_EX_TIMEOUT;
	/* The watchdog died and none could be started: the host's fault (71), also when the
	 * lease ended meanwhile (the same shortage often stops the renewals, or the loss
	 * came while the command was being stopped for it); the history still records the
	 * run lost (ch->lost). */
	if (ch->unguarded_stop || (s->lost && ch->unguarded)) {
		if (!ch->unguarded_stop)
			log_error("the watchdog process died and no new one can be started (%s): "
			          "the host's fault (71), the lease lost meanwhile",
			          unguarded_why(ch));
		ch->term_sig = 0;
		return RL_EX_OSERR;
	}
	if (s->lost) {
		ch->term_sig = 0;
		return RL_EX_LOST;
	}
	if (ch->timed_out) {
		ch->term_sig = 0;
		return ch->timeout_status;
	}
	watchdog_heard(ch);
	if (ch->term_sig == SIGKILL && ch->watchdog_killed) {
		/* rlock was stopped (or starved) past the lease: the watchdog did its job, and
		 * said so before its SIGKILL (a clock read here would not know: a renewal
		 * confirmed since SIGCONT moves the deadline on). The run is lost. */
		log_error("lock lost: rlock could not renew in time (stopped?); the watchdog "
		          "killed the command's process group before the lease could end");
		ch->term_sig = 0;
		ch->lost = 1;
		return RL_EX_LOST;
	}
	return rc;
}

int child_supervise(struct child *ch, const struct supervise_args *a)
{
	struct sup s = {.ch = ch,
	                .a = a,
	                .watching = 1,
	                .signalled = -1,
	                .kill_at = -1,
	                .killed = -1,
	                .stopping = a->stop_at >= 0,
	                .lost_fd = a->lost_fd,
	                .group_wait = GROUP_POLL_FIRST_MS,
	                .group_check = -1,
	                .warned = -1};
	int st = 0;

	sigemptyset(&s.stopsigs);
	sigemptyset(&s.fromrl);

	ch->status = -1; /* until it has exited */
	for (;;) {
		int64_t now = clock_ms();
		on_timers(&s, now);
		int stopped = reap(ch, &st);
		tell_orphans(ch); /* one read of rlock's child list */
		watch_stopped(ch);
		if (stopped) {
			if (!follow_stop(ch, stopped))
				continue;
			/* Not one instruction of the command after the lease ran out. */
			if (s.watching && clock_ms() >= a->lost_at(a->ctx))
				on_loss(&s, 1);
			kill(-ch->pid, SIGCONT);
			if (ch->stop_pgrp > 0 && ch->stop_pgrp != ch->pid)
				kill(-ch->stop_pgrp, SIGCONT);
			ch->stop_pgrp = 0;
			continue;
		}
		if (group_done(&s, now)) {
			tell_orphans(ch); /* the last ones, to be said */
			say_left();
			break;
		}
		struct pollfd p[3] = {{.fd = a->sigfd, .events = POLLIN},
		                      {.fd = s.lost_fd, .events = POLLIN},
		                      {.fd = ch->tstp_fd, .events = POLLIN}};
		int rc = poll(p, 3, next_timeout(&s, clock_ms()));
		if (rc < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			return RL_EX_SOFTWARE; /* the group is killed by the watchdog on exit */
		}
		if (rc > 0)
			on_events(&s, p);
	}
	return supervised_status(ch, &s, st);
}

void child_unlisten_stop(struct child *ch)
{
	stop_unlisten(ch);
}

void child_finish(struct child *ch)
{
	hand_terminal(ch->tty, ch->pid, getpgrp());
	tty_drop(ch);
	/* SIGTSTP stays blocked (child_unlisten_stop): a Ctrl-Z now must not stop rlock
	 * before the release, past which the lease may end with the lock never given back */
	if (ch->watch_fd >= 0) {
		/* Disarm it only when nothing is left to kill (not after a supervision that
		 * failed): otherwise the end of its pipe makes it kill the group. */
		if (!cover_group_live(ch->pid))
			tell_watchdog(ch, WATCHDOG_DISARM);
		close(ch->watch_fd);
		ch->watch_fd = -1;
	}
	if (ch->watch_report >= 0)
		close(ch->watch_report);
	ch->watch_report = -1;
	/* Not waited for: it ends on its own as it reads the disarm or the end of its
	 * pipe (then killing what is left of the group), and its zombie is reaped after
	 * rlock exits. One that is stopped must still get there. */
	if (ch->watchdog > 0) {
		kill(ch->watchdog, SIGCONT);
		ch->watchdog = 0;
	}
}
