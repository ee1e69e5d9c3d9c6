#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "exitcodes.h"
#include "log.h"
#include "parse.h"

/* Signals that reach the command exactly once. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

int child_signals_block(sigset_t *orig)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaddset(&set, forwarded[i]);
	sigaddset(&set, SIGCHLD);
	sigset_t fdset = set;
	/* Never die of a write to a closed socket (hiredis 0.14 trap; OpenSSL writes too),
	 * and take the terminal back from the command's group without being stopped. */
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGTTOU);
	if (sigprocmask(SIG_BLOCK, &set, orig) < 0)
		return -1;
	return signalfd(-1, &fdset, SFD_CLOEXEC | SFD_NONBLOCK);
}

int child_term_fd(void)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaddset(&set, forwarded[i]);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

void child_die_of(int sig)
{
	sigset_t s;

	signal(sig, SIG_DFL);
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	raise(sig);
	_exit(128 + sig);
}

static void close_from(int lowfd, int keep)
{
	/* close_range(2) where the kernel has it; a loop otherwise. */
	if (keep > lowfd) {
		if (syscall(SYS_close_range, lowfd, keep - 1, 0) < 0)
			for (int fd = lowfd; fd < keep; fd++)
				close(fd);
	}
	if (syscall(SYS_close_range, keep + 1, ~0U, 0) < 0)
		for (int fd = keep + 1; fd < 1024; fd++)
			close(fd);
}

/* A tiny process that outlives rlock: if rlock dies without saying goodbye (even by
 * SIGKILL), it kills the command's whole process group. PR_SET_PDEATHSIG covers only
 * the direct child, not what a shell command started. */
static pid_t start_watchdog(pid_t pgid, int *write_fd)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return 0;
	pid_t w = fork();
	if (w < 0) {
		close(p[0]);
		close(p[1]);
		return 0;
	}
	if (w == 0) {
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		close_from(0, p[0]);
		prctl(PR_SET_NAME, "rlock-watchdog");
		char b;
		ssize_t n;
		do
			n = read(p[0], &b, 1);
		while (n < 0 && errno == EINTR);
		if (n == 0)
			kill(-pgid, SIGKILL);
		_exit(0);
	}
	close(p[0]);
	*write_fd = p[1];
	return w;
}

int child_spawn(struct child *ch, char *const *argv, const char *shell_command,
                const sigset_t *orig)
{
	int ep[2];
	pid_t parent = getpid();
	const char *what = shell_command ? "/bin/sh" : argv[0];

	memset(ch, 0, sizeof *ch);
	ch->watch_fd = -1;
	ch->tty = -1;
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp())
		ch->tty = STDIN_FILENO;
	if (pipe2(ep, O_CLOEXEC) < 0) {
		log_error("cannot create a pipe: %s", strerror(errno));
		return RL_EX_OSERR;
	}
	pid_t pid = fork();
	if (pid < 0) {
		log_error("cannot fork: %s", strerror(errno));
		close(ep[0]);
		close(ep[1]);
		return RL_EX_OSERR;
	}
	if (pid == 0) {
		/* Only async-signal-safe calls from here to exec. */
		int e;
		close(ep[0]);
		setpgid(0, 0);
		if (ch->tty >= 0)
			tcsetpgrp(ch->tty, getpid());
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			raise(SIGKILL); /* rlock is already gone: never run unprotected */
		sigprocmask(SIG_SETMASK, orig, NULL);
		if (shell_command)
			execl("/bin/sh", "sh", "-c", shell_command, (char *)NULL);
		else
			execvp(argv[0], argv);
		e = errno;
		(void)!write(ep[1], &e, sizeof e);
		_exit(e == ENOENT ? RL_EX_NOTFOUND : RL_EX_NOEXEC);
	}
	close(ep[1]);
	/* Both sides set the group and the terminal: whichever runs first wins the race. */
	setpgid(pid, pid);
	if (ch->tty >= 0)
		tcsetpgrp(ch->tty, pid);
	ch->pid = pid;

	int e = 0;
	ssize_t n;
	do
		n = read(ep[0], &e, sizeof e);
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == (ssize_t)sizeof e) {
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (ch->tty >= 0)
			tcsetpgrp(ch->tty, getpgrp());
		char name[300];
		log_escape(name, sizeof name, what, strlen(what));
		log_error("%s: %s", name, e == ENOENT ? "command not found" : strerror(e));
		return e == ENOENT ? RL_EX_NOTFOUND : RL_EX_NOEXEC;
	}
	ch->watchdog = start_watchdog(pid, &ch->watch_fd);
	if (!ch->watchdog)
		log_warn("cannot start the watchdog (%s): if rlock is killed, only the command "
		         "itself is stopped",
		         strerror(errno));
	return 0;
}

static int exit_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return RL_EX_SOFTWARE;
}

/* The command, which owns the terminal, was stopped (Ctrl-Z): do what a shell expects
 * of its foreground job and stop too, after taking the terminal back, so that the
 * shell regains control. On `fg` the shell continues us: hand the terminal back and
 * continue the command. While rlock is stopped its lease is not renewed: a suspension
 * longer than the lease loses the lock (exit 79 after `fg`). */
static void follow_stop(struct child *ch)
{
	tcsetpgrp(ch->tty, getpgrp());
	kill(getpid(), SIGTSTP);
	/* Continued. */
	tcsetpgrp(ch->tty, ch->pid);
	kill(-ch->pid, SIGCONT);
}

int child_supervise(struct child *ch, const struct supervise_args *a)
{
	int lost = 0, st = 0;
	int64_t kill_at = -1;
	int lost_fd = a->lost_fd;

	for (;;) {
		struct pollfd p[2] = {{.fd = a->sigfd, .events = POLLIN},
		                      {.fd = lost_fd, .events = POLLIN}};
		int timeout = -1;
		if (kill_at >= 0) {
			int64_t left = kill_at - clock_ms();
			timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
		}
		int rc = poll(p, lost_fd >= 0 ? 2 : 1, timeout);
		if (rc < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			return RL_EX_SOFTWARE; /* the group is killed by the watchdog on exit */
		}
		if (kill_at >= 0 && clock_ms() >= kill_at) {
			log_warn("command still running %lld ms after SIG%s: sending SIGKILL",
			         (long long)a->kill_after_ms, signal_name(a->lost_signal));
			kill(-ch->pid, SIGKILL);
			kill_at = -1;
		}
		if (rc <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
				int sig = (int)si.ssi_signo;
				if (sig == SIGCHLD)
					continue;
				log_debug("forwarding SIG%s to the command", signal_name(sig));
				kill(-ch->pid, sig);
			}
			pid_t w;
			/* On a terminal, also hear about the command being stopped (Ctrl-Z). */
			int flags = WNOHANG | (ch->tty >= 0 ? WUNTRACED : 0);
			while ((w = waitpid(ch->pid, &st, flags)) < 0 && errno == EINTR)
				;
			if (w == ch->pid && WIFSTOPPED(st)) {
				follow_stop(ch);
				continue;
			}
			if (w == ch->pid)
				break;
		}
		if (lost_fd >= 0 && (p[1].revents & POLLIN)) {
			uint64_t v;
			(void)!read(lost_fd, &v, sizeof v);
			lost_fd = -1;
			const char *why = a->lost_reason(a->lost_ctx);
			if (a->action == ACT_IGNORE) {
				log_warn("lock lost: %s; the command goes on (--on-lost ignore)",
				         why);
				continue;
			}
			log_error("lock lost: %s; sending SIG%s to the command", why,
			          signal_name(a->lost_signal));
			lost = 1;
			kill(-ch->pid, a->lost_signal);
			if (a->lost_signal != SIGKILL)
				kill_at = clock_ms() + a->kill_after_ms;
		}
	}
	ch->pid = -ch->pid; /* reaped: never signal that id again */
	if (lost)
		return RL_EX_LOST;
	return exit_status(st);
}

void child_finish(struct child *ch)
{
	if (ch->tty >= 0)
		tcsetpgrp(ch->tty, getpgrp());
	if (ch->watch_fd >= 0) {
		(void)!write(ch->watch_fd, "k", 1);
		close(ch->watch_fd);
		ch->watch_fd = -1;
	}
	if (ch->watchdog > 0) {
		while (waitpid(ch->watchdog, NULL, 0) < 0 && errno == EINTR)
			;
		ch->watchdog = 0;
	}
}
