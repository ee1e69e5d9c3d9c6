/* SPDX-License-Identifier: MIT */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "clock.h"
#include "events.h"
#include "exitcodes.h"
#include "fds.h"
#include "holder.h"
#include "inherit.h"
#include "log.h"
#include "parse.h"
#include "procstat.h"
#include "renew.h"
#include "userfile.h"

/* The keeper's end of the report socket (the parent waits on the other end, and says
 * there that it printed the token: PRINTED). */
static int report_fd = -1;
static int log_fd = -1; /* --log-file, opened by the keeper before it takes the lock */

/* Signals the parent passes on to the keeper while it waits. */
static const int passed_on[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

#define PRINTED 'p'

/* The report's cap, the parent's buffer: the job's three lists as the keeper read them
 * from its environment (each at most the kernel's MAX_ARG_STRLEN, 128 KiB), this lock
 * added to each, its key, token and fence: all of it fits, none is ever cut (a list
 * dropped here would be unset by eval: the job's locks forgotten). */
#define REPORT_MAX (512u << 10)
#define ENV_MAX    (128u << 10) /* MAX_ARG_STRLEN: one "NAME=value" of the environment */

/* A variable eval exports that no command could then be started with (execve: E2BIG):
 * said, once per variable; the text is printed all the same, never cut. */
static void warn_env_size(const char *name, const char *v)
{
	size_t len = strlen(name) + 1 + strlen(v) + 1;

	if (len > ENV_MAX)
		log_warn("%s is %zu bytes, more than one environment variable can hold (128 KiB): "
		         "a command started after eval fails (Argument list too long); --release "
		         "some of the job's locks",
		         name, len);
}

/* Single-quoted for sh: ' becomes '\''. */
static void print_sh(const char *name, const char *v)
{
	warn_env_size(name, v);
	printf("%s='", name);
	for (; *v; v++)
		if (*v == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*v);
	printf("'; export %s\n", name);
}

static int inherited_lists(const struct lock *l, struct store *s, int64_t io_ms, char *list[3]);

/* The failure's sh output; checked: the job's holds as the keeper found them on the
 * server (keeper_report_failure: lines[3], or NULL for none), else (nobody asked the
 * server: a usage error before any traffic, a keeper that could not say) as the
 * variables name them. */
static void print_failure(int status, int checked, char *const lines[3])
{
	/* A reader gone: the status stays the one documented, not a death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* Inside a job that holds locks, RLOCK_KEY and RLOCK_TOKEN may be its own lock's:
	 * they go (a step tests RLOCK_TOKEN to know whether this lock is held), so the job's
	 * locks are kept listed in RLOCK_KEYS/RLOCK_TOKENS/RLOCK_FENCES (a nested run of
	 * their names is still re-entered, not a wait for its own ancestor). */
	char *list[3] = {NULL, NULL, NULL};
	if (checked && lines) {
		print_sh("RLOCK_KEYS", lines[0]);
		print_sh("RLOCK_TOKENS", lines[1]);
		print_sh("RLOCK_FENCES", lines[2]);
	} else if (checked && getenv("RLOCK_KEYS")) {
		/* none held: the lists of the past (a released lock's) would outlive it */
		printf("unset RLOCK_KEYS RLOCK_TOKENS RLOCK_FENCES\n");
	} else if (!checked && inherited_lists(NULL, NULL, 0, list) > 0) {
		print_sh("RLOCK_KEYS", list[0]);
		print_sh("RLOCK_TOKENS", list[1]);
		print_sh("RLOCK_FENCES", list[2]);
	}
	for (int v = 0; v < 3; v++)
		free(list[v]);
	/* A subshell's exit gives eval the status without leaving an interactive shell. */
	printf("unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE; (exit %d)\n", status);
	fflush(stdout);
}

void keeper_print_failure(int status)
{
	print_failure(status, 0, NULL);
}

/* The parent, when the lock is not held: the failure line (sh output), the status. */
static void __attribute__((noreturn)) parent_fail(int status, int github)
{
	if (!github)
		keeper_print_failure(status);
	exit(status);
}

void keeper_report_failure(struct store *s, int rc, int64_t io_ms)
{
	char *list[3];

	if (report_fd < 0)
		return;
	/* asked of the server when it answered: not after a signal or an outage (no wait
	 * on a server that is away) */
	if (rc != WAIT_BUSY && rc != WAIT_DONE && rc != WAIT_SUPERSEDED && rc != WAIT_MISMATCH)
		s = NULL;
	/* "\n" (no key: not held), then the job's holds the server did not say are gone */
	int n = inherited_lists(NULL, s, io_ms, list);
	char *msg = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&msg, &len);
	if (f) {
		fputs("\n", f);
		if (n > 0)
			fprintf(f, "%s\n%s\n%s\n", list[0], list[1], list[2]);
		if (fclose(f) == 0 && len < REPORT_MAX &&
		    write(report_fd, msg, len) == (ssize_t)len)
			shutdown(report_fd, SHUT_WR);
	}
	free(msg);
	for (int v = 0; v < 3; v++)
		free(list[v]);
}

/* Pass the signals waiting on sfd on to the keeper; the first one's number (or sig,
 * the one seen before). SIGUSR1 goes as SIGTERM: to a keeper that holds the lock,
 * SIGUSR1 is --release's "stop renewing, release nothing", and a keeper that already
 * reported (our read of it still to come) would leave the lock to its TTL. */
static int pass_on(pid_t keeper, int sfd, int sig)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
		int s = (int)si.ssi_signo;
		kill(keeper, s == SIGUSR1 ? SIGTERM : s);
		if (!sig)
			sig = s;
	}
	return sig;
}

/* A signal reached us before we printed: the keeper has it (a waiting keeper ends, one
 * that took the lock meanwhile gives it back); wait for it, so that the lock is free
 * when eval returns, then hand eval 128+N and die of the signal, as on a signal while
 * waiting. Never the variables: the steps would run under a lock given back. */
static void __attribute__((noreturn))
interrupted(pid_t keeper, int sig, const struct keeper_args *k)
{
	int st;

	while (waitpid(keeper, &st, 0) < 0 && errno == EINTR)
		;
	if (!k->github)
		keeper_print_failure(128 + sig);
	child_die_of(sig);
}

/* The parent: wait for the keeper's report (or its exit), print, exit. */
static void __attribute__((noreturn))
parent_wait(pid_t keeper, int rfd, int sfd, const struct keeper_args *k)
{
	static char buf[REPORT_MAX];
	size_t got = 0;
	int sig = 0; /* the first signal that reached us: the run is interrupted */

	for (;;) {
		struct pollfd p[2] = {{.fd = rfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents & POLLIN)
			sig = pass_on(keeper, sfd, sig);
		if (p[0].revents & (POLLIN | POLLHUP)) {
			ssize_t n = read(rfd, buf + got, sizeof buf - 1 - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || (got += (size_t)n) >= sizeof buf - 1)
				break;
		}
	}
	/* One arriving while the report came in counts as before it: we print nothing yet. */
	sig = pass_on(keeper, sfd, sig);
	if (sig)
		interrupted(keeper, sig, k);
	buf[got] = '\0';
	/* "\n", then the job's holds, checked (keeper_report_failure): not held */
	char *held[3] = {NULL, NULL, NULL};
	int checked = got > 0 && buf[0] == '\n';
	for (int i = 0, at = 1; checked && i < 3; i++) {
		char *end = strchr(buf + at, '\n');
		if (!end)
			break;
		*end = '\0';
		held[i] = buf + at;
		at = (int)(end - buf) + 1;
	}
	/* "KEY\nTOKEN\nFENCE\n": the keeper holds the lock. */
	char *key = buf, *token = strchr(key, '\n'),
	     *fence = token ? strchr(token + 1, '\n') : NULL;
	if (!checked && fence && strchr(fence + 1, '\n')) {
		*token++ = '\0';
		*fence++ = '\0';
		*strchr(fence, '\n') = '\0';
		if (k->github) {
			/* A GitHub runner hides the token in its log: before it is printed (not
			 * elsewhere: a GitLab log, say, would show it). */
			const char *gha = getenv("GITHUB_ACTIONS");
			if (gha && !strcmp(gha, "true")) {
				fprintf(stderr, "::add-mask::%s\n", token);
				fflush(stderr);
			}
			printf("RLOCK_KEY=%s\nRLOCK_TOKEN=%s\nRLOCK_FENCE=%s\n", key, token, fence);
		} else {
			print_sh("RLOCK_KEY", key);
			print_sh("RLOCK_TOKEN", token);
			print_sh("RLOCK_FENCE", fence);
		}
		/* then, inside a job that holds locks, the lists the keeper reported */
		static const char *const var[] = {"RLOCK_KEYS", "RLOCK_TOKENS", "RLOCK_FENCES"};
		char *line[3], *at = strchr(fence, '\0') + 1;
		int lines = 0;
		for (; lines < 3 && at < buf + got; lines++) {
			char *end = strchr(at, '\n');
			if (!end)
				break;
			*end = '\0';
			line[lines] = at;
			at = end + 1;
		}
		for (int i = 0; lines == 3 && i < 3; i++)
			if (k->github) {
				warn_env_size(var[i], line[i]);
				printf("%s=%s\n", var[i], line[i]);
			} else {
				print_sh(var[i], line[i]);
			}
		/* none held besides: lists of the past (a released lock's) would outlive it */
		if (lines != 3 && getenv("RLOCK_KEYS")) {
			if (k->github)
				printf("RLOCK_KEYS=\nRLOCK_TOKENS=\nRLOCK_FENCES=\n");
			else
				printf("unset RLOCK_KEYS RLOCK_TOKENS RLOCK_FENCES\n");
		}
		int rc = k->close_stdout();
		if (rc != 0)
			kill(keeper, SIGTERM); /* nobody learns the token: give the lock back */
		else if (write(rfd, &(char){PRINTED}, 1) != 1)
			log_debug("cannot tell the keeper that the token is printed: %s",
			          strerror(errno));
		exit(rc);
	}
	/* No report: the keeper failed (busy, unavailable, a signal) and said why on our
	 * stderr; its status is ours, and eval's (its death by a signal: 128+N, as a
	 * shell shows it, before the parent dies of the same signal). */
	int st;
	while (waitpid(keeper, &st, 0) < 0)
		if (errno != EINTR)
			parent_fail(RL_EX_SOFTWARE, k->github);
	char *const *lists = held[2] ? held : NULL;
	if (WIFSIGNALED(st)) {
		if (!k->github)
			print_failure(128 + WTERMSIG(st), checked, lists);
		child_die_of(WTERMSIG(st));
	}
	int status = WIFEXITED(st) ? WEXITSTATUS(st) : RL_EX_SOFTWARE;
	if (!k->github)
		print_failure(status, checked, lists);
	exit(status);
}

void keeper_detach(const struct keeper_args *k)
{
	sigset_t set, orig;
	int p[2];

	/* Not a signal its caller ignores (nohup's SIGHUP): that would end the hold. */
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof passed_on / sizeof passed_on[0]; i++)
		if (!child_ignored(passed_on[i]))
			sigaddset(&set, passed_on[i]);
	if (sigprocmask(SIG_BLOCK, &set, &orig) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0) {
		log_error("cannot start the keeper: %s", strerror(errno));
		parent_fail(RL_EX_OSERR, k->github);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		log_error("cannot start the keeper: %s", strerror(errno));
		parent_fail(RL_EX_OSERR, k->github);
	}
	if (pid > 0) {
		/* A write to a pipe nobody reads fails (EPIPE): the keeper is then told to give
		 * the lock back; killed by SIGPIPE, the parent would leave it held under a token
		 * nobody learnt. */
		signal(SIGPIPE, SIG_IGN);
		close(p[1]);
		int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
		if (sfd < 0) {
			kill(pid, SIGTERM);
			log_error("cannot set up signal handling: %s", strerror(errno));
			parent_fail(RL_EX_OSERR, k->github);
		}
		parent_wait(pid, p[0], sfd, k);
	}
	/* The keeper: its own session (no controlling terminal, no job control signals),
	 * nothing of the caller's but stderr, which it keeps until the lock is held so that
	 * a busy lock or an unreachable server is reported where the caller looks. */
	sigprocmask(SIG_SETMASK, &orig, NULL);
	child_inherit_listen_all(); /* SIGTERM and SIGUSR1 (--release) are its controls */
	close(p[0]);
	report_fd = p[1];
	setsid();
	prctl(PR_SET_NAME, KEEPER_COMM);
	if (chdir("/") < 0)
		log_debug("keeper: cannot chdir to /: %s", strerror(errno));
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		/* stdout too: a caller's $(...) ends when the parent exits, not the keeper. */
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		close(nul);
	}
	/* Every other inherited descriptor, whatever its number: a pipe the caller reads
	 * to its end (a CI runner's log, a `$(...)`) must see it when the parent exits. */
	fds_close_from(STDERR_FILENO + 1, report_fd);
	/* The log file now, before the lock is taken: a FIFO nobody reads, a link planted
	 * at its name, a file of another user are refused here (66), not found blocking in
	 * open() once the lock is held (userfile.h). */
	if (k->log_file) {
		char why[300];
		log_fd =
		    userfile_append(k->log_file, UF_REG | UF_CHR | UF_FIFO, 0600, why, sizeof why);
		if (log_fd < 0) {
			int e = errno;
			log_error("cannot open the keeper's log file '%s': %s", k->log_file, why);
			exit(rl_ex_file(e));
		}
	}
}

/* Put stderr on the log file or /dev/null: the caller's stderr (a terminal, a CI
 * log pipe) must not be held open by a process that outlives the step. */
static int detach_stderr(const struct keeper_args *k)
{
	int fd = k->log_file ? log_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		log_error("cannot open the keeper's log file '%s': %s",
		          k->log_file ? k->log_file : "/dev/null", strerror(errno));
		return -1;
	}
	dup2(fd, STDERR_FILENO);
	close(fd);
	return 0;
}

/* Inside a job that holds locks (an rlock's command, an earlier --acquire's variables):
 * the lists a nested run would get (list[0] keys, list[1] tokens, list[2] fences, each
 * malloc'd or NULL, for the caller to free): l first when given, then those of the
 * job's holds that s, when given, does not say are gone (a released lock's stale
 * variables are dropped, when s's history knows the token: store_knew_token; a live hold of l's own
 * name stays: the job's shared hold or permit beside which l was taken, which l's --release does
 * not give back, and which a nested run or a later --acquire must still know), then those past what
 * one run reads, as they came. eval replaces RLOCK_KEY and RLOCK_TOKEN, and the job's lock, known
 * by them alone, would be no longer (a nested run of its name would wait for its own ancestor,
 * --held would not check it). The number of the job's holds listed: 0, nothing to print. */
static int inherited_lists(const struct lock *l, struct store *s, int64_t io_ms, char *list[3])
{
	static struct inherited_holds r; /* large */
	size_t len[3] = {0, 0, 0};
	FILE *m[3];
	int n = 0;

	list[0] = list[1] = list[2] = NULL;
	inherited_read(&r);
	if (r.n == 0)
		return 0;
	for (int v = 0; v < 3; v++)
		m[v] = open_memstream(&list[v], &len[v]);
	if (m[0] && m[1] && m[2]) {
		const char *sep = "";
		if (l) {
			fprintf(m[0], "%s", l->key);
			fprintf(m[1], "%s", l->token);
			fprintf(m[2], "%lld", l->fence);
			sep = " ";
		}
		for (int i = 0; i < r.n; i++) {
			struct inherited *h = &r.in[i];
			if (!inherited_ours(h) || (s && inherited_gone(s, h, io_ms, INT64_MAX)))
				continue; /* no pair of rlock's, or gone: stale variables */
			fprintf(m[0], "%s%s", sep, h->key);
			fprintf(m[1], "%s%s", sep, h->token);
			fprintf(m[2], "%s%s", sep, h->fence[0] ? h->fence : "0");
			sep = " ";
			n++;
		}
	}
	for (int v = 0; v < 3; v++)
		if (m[v])
			fclose(m[v]);
	if (!list[0] || !list[1] || !list[2])
		n = 0;
	return n;
}

/* The job's holds, for the parent, as three lines (keys, tokens, fences:
 * inherited_lists); nothing when none. */
static void report_inherited(FILE *f, struct store *s, const struct lock *l, int64_t io_ms)
{
	char *list[3];

	if (inherited_lists(l, s, io_ms, list) > 0)
		fprintf(f, "%s\n%s\n%s\n", list[0], list[1], list[2]);
	for (int v = 0; v < 3; v++)
		free(list[v]);
}

/* Tell the waiting parent the lock's details: it prints them and exits. */
static int report_to_parent(const struct lock *l, const char *inherited)
{
	char *msg = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&msg, &len);

	if (!f)
		return -1;
	fprintf(f, "%s\n%s\n%lld\n", l->key, l->token, l->fence);
	if (inherited && strlen(inherited) < REPORT_MAX - 4096) /* the parent's buffer */
		fputs(inherited, f);
	if (fclose(f) != 0) {
		free(msg);
		return -1;
	}
	int ok = write(report_fd, msg, len) == (ssize_t)len;
	free(msg);
	if (!ok)
		return -1;            /* the parent is gone: nobody knows the token */
	shutdown(report_fd, SHUT_WR); /* the end of the report; its answer still to come */
	return 0;
}

/* Did the parent print the token (PRINTED)? Its end without that (SIGKILLed after our
 * report and before it printed, a CI job's group killed) leaves nobody who could
 * --release the lock: -1, give it back. Waited for while the lease is sure (a signal, a
 * loss heard, or the loss deadline end the wait: watch() takes them over): 0. */
static int parent_printed(struct hold *h, int sigfd)
{
	int rc = 0;

	for (;;) {
		int64_t left = hold_lost_at(h) - clock_ms();
		if (left <= 0)
			break;
		struct pollfd p[3] = {{.fd = report_fd, .events = POLLIN},
		                      {.fd = sigfd, .events = POLLIN},
		                      {.fd = hold_lost_fd(h), .events = POLLIN}};
		int n = poll(p, 3, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (p[1].revents || p[2].revents)
			break;
		char c;
		ssize_t got = read(report_fd, &c, 1);
		if (got < 0 && errno == EINTR)
			continue;
		rc = got == 1 && c == PRINTED ? 0 : -1;
		break;
	}
	close(report_fd);
	report_fd = -1;
	return rc;
}

/* The directory of the local records (keeper.h), into dir (n bytes). */
static void record_dir(char *dir, size_t n)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (rt && rt[0] == '/' && strlen(rt) < 200)
		snprintf(dir, n, "%s/rlock", rt);
	else
		snprintf(dir, n, "/tmp/rlock-%ld", (long)getuid());
}

/* Why record_path last found no directory to use (for the line that says so). */
static char record_why[512];

/* The local records of a hold bound to its key and token (keeper.h): "ended" (why it
 * ended) or "keeper" (who keeps it, keeper_mark): its path, into path (n bytes). With
 * create, the directory is made if missing. -1 when there is no directory of the
 * user's own (another owner, a link, open to others: never trusted), why in
 * record_why. */
static int record_path(const char *kind, const char *key, const char *token, int create, char *path,
                       size_t n)
{
	char dir[300];
	struct stat st;
	uint64_t h = 14695981039346656037ULL; /* FNV-1a of key, NUL, token */

	record_dir(dir, sizeof dir);
	if ((create && mkdir(dir, 0700) < 0 && errno != EEXIST) || lstat(dir, &st) < 0) {
		snprintf(record_why, sizeof record_why, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		snprintf(record_why, sizeof record_why,
		         !S_ISDIR(st.st_mode)    ? "%s: not a directory"
		         : st.st_uid != getuid() ? "%s: another user's directory"
		                                 : "%s: open to other users (mode 0700 wanted)",
		         dir);
		return -1;
	}
	for (const char *p = key;; p++) {
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
		if (!*p)
			break;
	}
	for (const char *p = token; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	snprintf(path, n, "%s/%s-%016llx", dir, kind, (unsigned long long)h);
	return 0;
}

static int ended_path(const char *key, const char *token, int create, char *path, size_t n)
{
	return record_path("ended", key, token, create, path, n);
}

/* Who a process is beyond its pid, which a reboot or another pid namespace (a
 * container's restart) gives to another process: the boot, the pid namespace it was
 * seen from, its start time (clock ticks after boot, /proc/PID/stat field 22). */
struct proc_id {
	long pid;
	unsigned long long start;
	unsigned long long pidns;
	char boot[40];
};

/* /proc/PID/stat: its name is KEEPER_COMM, it is not a zombie, and its start time into
 * *start. 0, or -1. */
static int keeper_stat(long pid, unsigned long long *start)
{
	struct proc_stat st;

	if (proc_stat_read(pid, &st) < 0 || strcmp(st.comm, KEEPER_COMM) != 0 || st.state == 'Z' ||
	    st.state == 'X')
		return -1;
	*start = st.start_ticks;
	return 0;
}

/* This boot and this process's pid namespace into *id (not its pid or start). */
static int here(struct proc_id *id)
{
	struct stat st;

	memset(id, 0, sizeof *id);
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, id->boot, sizeof id->boot - 1);
	close(fd);
	if (n <= 0)
		return -1;
	id->boot[n] = '\0';
	id->boot[strcspn(id->boot, "\n")] = '\0';
	if (stat("/proc/self/ns/pid", &st) < 0)
		return -1;
	id->pidns = ((unsigned long long)st.st_dev << 32) ^ (unsigned long long)st.st_ino;
	return 0;
}

/* The keeper's mark (keeper_mark): who keeps the hold of key under token. 0, or -1
 * (none, or not one of ours). */
static int mark_read(const char *key, const char *token, struct proc_id *id)
{
	char path[400], buf[200];

	if (record_path("keeper", key, token, 0, path, sizeof path) < 0)
		return -1;
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid()
	                ? read(fd, buf, sizeof buf - 1)
	                : -1;
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	memset(id, 0, sizeof *id);
	return sscanf(buf, "%ld %llu %llu %39s", &id->pid, &id->start, &id->pidns, id->boot) == 4
	           ? 0
	           : -1;
}

/* Written by the keeper before it reports (so that a --release right after the eval
 * finds it), removed when it ends: its pid, start time, pid namespace and boot, under
 * the hold's key and token in the user's own directory. --release signals only the
 * process this names (stop_keeper). Best effort: without it, --release releases only. */
static void keeper_mark(const struct lock *l)
{
	char path[400], tmp[420], line[200];
	struct proc_id me;

	if (here(&me) < 0 || keeper_stat(getpid(), &me.start) < 0) {
		log_debug("keeper: cannot record who keeps the lock: --release will not stop it");
		return;
	}
	if (record_path("keeper", l->key, l->token, 1, path, sizeof path) < 0) {
		/* as a write that fails below: said, not left for --held to find out */
		log_warn("keeper: cannot record who keeps %s (%s): --release finds it by the "
		         "server's record alone, --held cannot tell its end",
		         l->key, record_why);
		return;
	}
	snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
	int len = snprintf(line, sizeof line, "%ld %llu %llu %s\n", (long)getpid(), me.start,
	                   me.pidns, me.boot);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ssize_t w = fd < 0 ? -1 : write(fd, line, (size_t)len);
	int err = fd < 0 || w < 0 ? errno : w != len ? ENOSPC : 0;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) < 0)
		err = errno;
	if (err) {
		/* said where the --acquire caller reads it (its stderr: not yet detached) and
		 * in the keeper's log: --held cannot tell the keeper's own end (ended_note
		 * goes there too), --release finds it by the server's record alone */
		if (fd >= 0)
			unlink(tmp);
		log_warn("keeper: cannot record who keeps %s in %.*s (%s): --release finds it "
		         "by the server's record alone, --held cannot tell its end",
		         l->key, (int)(strrchr(path, '/') - path), path, strerror(err));
	}
}

static void keeper_unmark(const struct lock *l)
{
	char path[400];
	struct proc_id id;

	/* Only its own: a mark of another process (a pid reused, a token copied) stays. */
	if (mark_read(l->key, l->token, &id) == 0 && id.pid == (long)getpid() &&
	    record_path("keeper", l->key, l->token, 0, path, sizeof path) == 0)
		unlink(path);
}

/* Record why the keeper's hold of l ended ("REASON at TIME"), atomically (a temporary
 * file renamed). Best effort: --held then asks Redis alone. */
static void ended_note(const struct lock *l, const char *reason)
{
	char path[400], tmp[420], when[64] = "?";
	time_t now = time(NULL);
	struct tm tm;

	if (ended_path(l->key, l->token, 1, path, sizeof path) < 0) {
		log_warn("keeper: cannot record the end of the hold of %s for --held (%s)", l->key,
		         record_why);
		return;
	}
	if (localtime_r(&now, &tm))
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);
	snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_warn("keeper: cannot record the end of the hold of %s for --held (%s)", l->key,
		         strerror(errno));
		return;
	}
	char line[600], said[501];
	log_clip(said, sizeof said, reason, strlen(reason)); /* a long one: cut, shown */
	int len = snprintf(line, sizeof line, "%s at %s\n", said, when);
	int ok = len > 0 && write(fd, line, (size_t)len) == len;
	if (close(fd) < 0 || !ok || rename(tmp, path) < 0) {
		unlink(tmp);
		log_warn("keeper: cannot record the end of the hold of %s for --held (%s)", l->key,
		         strerror(errno));
	}
}

int keeper_ended(const char *key, const char *token, char *buf, size_t n)
{
	char path[400];

	if (n == 0 || ended_path(key, token, 0, path, sizeof path) < 0)
		return 0;
	/* The user's own 0700 directory (ended_path), yet opened as every file is: a FIFO
	 * there is refused, not waited on. */
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	ssize_t got = read(fd, buf, n - 1);
	close(fd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 1;
}

/* hold_watch, and with --warn (k->warn) a warning in the keeper's log once a renewal
 * is a third of the ttl late (hold_warn_at), once per danger: a confirmed renewal moves
 * that point on, which re-arms it (looked for every tenth of the ttl once warned).
 * What hold_watch returns. */
static int watch(struct hold *h, int sigfd, int64_t stop_at, const struct keeper_args *k,
                 int *signo, char *err, size_t errlen)
{
	int64_t warned = -1;

	for (;;) {
		int64_t warn_at = hold_warn_at(h), until = stop_at;
		int64_t next = warn_at != warned ? warn_at : clock_ms() + h->l[0].ask.ttl_ms / 10;
		if (k->warn && (until < 0 || next < until))
			until = next;
		int rc = hold_watch(h, sigfd, until, signo, err, errlen);
		if (rc != 1 || until == stop_at)
			return rc;
		if (warn_at == warned || hold_warn_at(h) != warn_at)
			continue; /* still warned, or a renewal was confirmed meanwhile */
		warned = warn_at;
		log_warn(
		    "no renewal of %s confirmed for %lld ms (--warn): the lease counts as lost "
		    "in %lld ms",
		    h->l[0].key, (long long)(clock_ms() - hold_confirmed_sent(h)),
		    (long long)(hold_lost_at(h) - clock_ms()));
	}
}

/* A lock that nobody learnt the token of (the keeper could not report it) is given back
 * as a run's lock that no command ran under is (hold.c): no --wait-replicas or
 * --wait-aof of its own, no line beside the failure's, no more --io-timeout. Its
 * acquired event gets its end all the same: keeper-released, rc and why. */
static int give_back(struct hold *h, int rc, const char *why)
{
	h->wait_replicas = h->wait_aof_local = h->wait_aof_replicas = 0;
	hold_set_status(h, rc); /* the history's end record says it, as the events line does */
	int released = hold_release(h, 0);
	events_emit(
	    EV_KEEPER_RELEASED,
	    &(struct ev_facts){.lock = &h->l[0],
	                       .status = rc,
	                       .reason = released == HOLD_ERR ? HOLD_RELEASE_FAILED_REASON : why,
	                       .given_back = 1});
	return rc;
}

static int token_run_end(struct store *s, const struct lock *l, const char *token, int64_t io_ms,
                         char *ev, size_t evn, char *when, size_t n);

/* The server said the lock is no longer the keeper's (not a renewal unconfirmed in
 * time): did its run end by a release of its token (the history: "released" after its
 * grant)? 1 with the time into when. One read, on a handle of its own: only on a loss. */
static int released_by_token(struct hold *h, const struct keeper_args *k, char *when, size_t n)
{
	struct pollfd p = {.fd = hold_lost_fd(h), .events = POLLIN};
	struct store *s = NULL;
	char ev[16] = "", err[300];

	if (h->l[0].ask.history_len <= 0 || p.fd < 0 || poll(&p, 1, 0) != 1)
		return 0;
	if (store_open(&s, h->cfg, 0, clock_ms() + k->connect_timeout_ms + k->io_timeout_ms, err,
	               sizeof err) != STORE_OK)
		return 0;
	int ended =
	    token_run_end(s, &h->l[0], h->l[0].token, k->io_timeout_ms, ev, sizeof ev, when, n);
	store_close(s);
	return ended && !strcmp(ev, "released");
}

static int hold_kept(struct hold *h, int sigfd, const struct keeper_args *k)
{
	const struct lock *l = &h->l[0];
	char err[400];
	int64_t stop_at = k->max_hold_ms > 0 ? clock_ms() + k->max_hold_ms : -1;
	int signo, rc;

	/* Every line of the hold in its --log-file, those said to the caller before stderr
	 * is detached too (keeper_mark's, a renewal's meanwhile): they reached the caller's
	 * stderr alone, and the log of the keeper had none of them. */
	if (k->log_file)
		log_tee(log_fd);
	/* the job's locks its variables name, asked about on the main handle first */
	char *inherited = NULL;
	size_t ilen = 0;
	FILE *f = open_memstream(&inherited, &ilen);
	if (f) {
		report_inherited(f, h->s, l, k->io_timeout_ms);
		fclose(f);
	}
	hold_drop_main(h); /* the renewal thread has its own handle */
	if (!k->log_file)
		log_to_syslog();
	keeper_mark(l); /* before stderr is detached: a failure is said to the caller too */
	log_tee(-1);    /* stderr is the log file from here on */
	if (detach_stderr(k) < 0)
		return give_back(h, RL_EX_USAGE,
		                 "given back: the keeper cannot detach its standard error");
	if (k->log_file)
		log_stamped();
	int reported = report_to_parent(l, inherited);
	free(inherited);
	if (reported < 0)
		return give_back(h, RL_EX_OSERR,
		                 "given back: rlock --acquire ended before the "
		                 "token was reported (nobody could release it)");
	if (parent_printed(h, sigfd) < 0) {
		log_error("rlock --acquire ended before it printed the token: nobody could "
		          "release %s; the keeper gives it back",
		          l->key);
		return give_back(h, RL_EX_OSERR,
		                 "given back: rlock --acquire ended before it "
		                 "printed the token (nobody could release it)");
	}
	log_info("keeper pid %ld holds %s (fence %lld, ttl %lld ms)", (long)getpid(), l->key,
	         l->fence, (long long)l->ask.ttl_ms);
	events_emit(EV_KEEPER_STARTED, &(struct ev_facts){.lock = l});
	char why[500], when[64];
	if (watch(h, sigfd, stop_at, k, &signo, err, sizeof err) == 1) {
		log_error("--max-hold is over: the keeper releases %s", l->key);
		snprintf(why, sizeof why, "given up by its keeper at --max-hold");
		rc = RL_EX_TIMEOUT;
	} else if (signo) {
		log_info("keeper: SIG%s: %s", signal_name(signo),
		         signo == SIGUSR1 ? "stopping (rlock --release releases)" : "releasing");
		snprintf(why, sizeof why, "released by its keeper on SIG%s", signal_name(signo));
		rc = 0;
	} else if (released_by_token(h, k, when, sizeof when)) {
		/* Not lost: given back with its token by an rlock --release that could not
		 * stop this keeper (run on another host, or by another user: EPERM), as the
		 * docs say it then finds the lock gone at its next renewal. Its log said "lock
		 * lost: taken away ... (deleted, evicted or flushed ...)" and --held "lost". */
		log_warn("keeper: %s was released with its token by an rlock --release at %s "
		         "that could not stop this keeper (another host or user): the keeper "
		         "exits",
		         l->key, when);
		events_emit(EV_KEEPER_STOPPED, &(struct ev_facts){.lock = l});
		hold_abandon(h); /* the run's end is that release's */
		ended_note(l, "released with its token by an rlock --release that could not "
		              "stop its keeper");
		return 0;
	} else {
		hold_abandon_lost(h); /* the history's end record of the run: lost */
		log_error("lock lost: %s; the keeper exits", err);
		events_emit(EV_KEEPER_LOST, &(struct ev_facts){.lock = l, .reason = err});
		log_reason(why, sizeof why, "lost by its keeper (%s)", err);
		ended_note(l, why);
		return RL_EX_LOST;
	}
	if (signo == SIGUSR1) {
		events_emit(EV_KEEPER_STOPPED, &(struct ev_facts){.lock = l});
		hold_abandon(h);
		return rc;
	}
	hold_set_status(h, rc); /* the history's released record says it, as the events line */
	int released = hold_release(h, 0);
	if (released == HOLD_LOST) {
		/* as a run's (main.c): found so before the lease's end, taken away */
		const char *by = h->gone_why[0] ? h->gone_why : HOLD_TAKEN_AWAY, *sep = ": ";
		char reason[sizeof h->gone_why + 200];
		snprintf(reason, sizeof reason, "no longer held at the release: %s", by);
		log_error("lock lost: %s was no longer held when the keeper released it%s%s",
		          l->key, sep, by);
		events_emit(EV_KEEPER_LOST, &(struct ev_facts){.lock = l, .reason = reason});
		log_reason(why, sizeof why, "lost: no longer held when its keeper released it%s%s",
		           sep, by);
		rc = RL_EX_LOST;
	} else {
		events_emit(EV_KEEPER_RELEASED,
		            &(struct ev_facts){.lock = l,
		                               .status = rc,
		                               .reason = released == HOLD_ERR
		                                             ? HOLD_RELEASE_FAILED_REASON
		                                             : NULL});
		/* --held reads it: not "released" when its release failed (Redis down) */
		if (released == HOLD_ERR && rc != RL_EX_TIMEOUT)
			snprintf(why, sizeof why,
			         "given up by its keeper on SIG%s (its release "
			         "failed: " HOLD_RELEASE_FAILED ")",
			         signal_name(signo));
		else if (released == HOLD_ERR)
			snprintf(why, sizeof why,
			         "given up by its keeper at --max-hold (its release "
			         "failed: " HOLD_RELEASE_FAILED ")");
	}
	ended_note(l, why);
	return rc;
}

int keeper_hold(struct hold *h, int sigfd, const struct keeper_args *k)
{
	int rc = hold_kept(h, sigfd, k);

	keeper_unmark(&h->l[0]);
	return rc;
}

/* Is the keeper *id still running: a live rlock keeper (not a zombie waiting for init
 * to reap it) with the pid and the start time it recorded? */
static int is_keeper(const struct proc_id *id)
{
	unsigned long long start;

	return keeper_stat(id->pid, &start) == 0 && start == id->start;
}

int keeper_judge(const char *key, const char *token, long long pid)
{
	struct proc_id id, now;

	if (mark_read(key, token, &id) < 0 || id.pid != pid)
		return -2;
	if (here(&now) < 0)
		return -1;
	if (strcmp(now.boot, id.boot) != 0)
		return 0; /* no process outlives its boot */
	if (now.pidns != id.pidns)
		return -1; /* its pid means nothing here */
	return is_keeper(&id);
}

int keeper_gone(const char *key, const char *token, char *buf, size_t n)
{
	struct proc_id id;

	if (mark_read(key, token, &id) < 0 || keeper_judge(key, token, id.pid) != 0)
		return 0;
	snprintf(buf, n, "its keeper (pid %ld) is gone and nobody renews its lease", id.pid);
	return 1;
}

/* Without its mark (keeper_mark could not write it: a full disk), the keeper the
 * server's holder record h names, proven as a plain holder is (holder_process: this
 * boot and pid namespace, started no later than it took the lock) and still a keeper:
 * 0 with *id, or -1. */
static int keeper_by_record(const struct holder *h, struct proc_id *id)
{
	memset(id, 0, sizeof *id);
	id->pid = (long)h->pid;
	return holder_process(h) == HOLDER_ALIVE && keeper_stat(id->pid, &id->start) == 0 ? 0 : -1;
}

static char keeper_why[400]; /* why find_keeper (or stop_keeper) found none to stop */
static int keeper_dead;      /* and the one recorded is gone: nothing renews the lock */

/* The keeper that holds h (NULL: the server did not say; the mark alone names it),
 * proven to be the process its mark (keeper_mark) names on this boot, seen from this
 * pid namespace: 0 with *id, or -1 (why: a debug line, keeper_why; keeper_dead when
 * the one its mark names is gone: killed unheard, or before this boot). */
static int find_keeper(const struct holder *h, const char *key, const char *token,
                       struct proc_id *id)
{
	char host[256] = "", dir[300];
	struct proc_id now;
	const char *why = NULL;
	int dead = 0;

	gethostname(host, sizeof host - 1);
	if (h && (strcmp(h->cmd, KEEPER_CMD) != 0 || strcmp(h->host, host) != 0 || h->pid <= 1))
		why = "the lock's holder is no keeper on this host";
	else if (h && mark_read(key, token, id) < 0 && keeper_by_record(h, id) == 0)
		return 0; /* no mark (a full disk, a runtime directory gone): the record's */
	else if (mark_read(key, token, id) < 0 || (h && id->pid != (long)h->pid))
		why = "no record of its keeper here";
	else if (here(&now) < 0 || strcmp(now.boot, id->boot) != 0)
		why = "its keeper ran before this boot", dead = 1;
	else if (now.pidns != id->pidns)
		why = "its keeper runs in another pid namespace";
	else if (!is_keeper(id))
		why = "its keeper is gone (its pid names another process, or none)", dead = 1;
	keeper_dead = dead;
	if (why && !strcmp(why, "no record of its keeper here")) {
		record_dir(dir, sizeof dir);
		snprintf(keeper_why, sizeof keeper_why, "no record of its keeper in %s", dir);
	} else if (why) {
		snprintf(keeper_why, sizeof keeper_why, "%s", why);
	}
	if (why)
		log_debug("%s: not signalled", why);
	return why ? -1 : 0;
}

/* SIGUSR1 to the keeper *id, and only to it: through a pidfd, opened and then proven to
 * name it (its start time), when the kernel has them. A pidfd (POLLIN once it exited)
 * into *pidfd, or -1. 0, or -1 (not signalled). */
static int signal_keeper(const struct proc_id *id, int *pidfd)
{
	*pidfd = -1;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)id->pid, 0);
	if (fd >= 0) {
		if (!is_keeper(id) || syscall(SYS_pidfd_send_signal, fd, SIGUSR1, NULL, 0) < 0) {
			close(fd);
			return -1;
		}
		*pidfd = fd;
		return 0;
	}
	if (errno != ENOSYS)
		return -1;
#endif
	return is_keeper(id) && kill((pid_t)id->pid, SIGUSR1) == 0 ? 0 : -1;
}

/* --release: the signalfd of the terminating signals (-1: none), which ends its waits
 * (the keeper's stop, the release's --wait-replicas WAIT / --wait-aof WAITAOF) at once,
 * never the release itself (store_set_abort_fd is off around it); the signal read off
 * it (release_signal), the caller's to die of. */
static int release_abort_fd = -1, release_sig;

static int release_signal_pending(void)
{
	struct pollfd p = {.fd = release_abort_fd, .events = POLLIN};
	return release_sig || (release_abort_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN));
}

/* The terminating signal that ended a wait of --release (read off its fd), or 0. */
static int release_signal(void)
{
	struct signalfd_siginfo si;

	if (!release_sig && release_abort_fd >= 0 &&
	    read(release_abort_fd, &si, sizeof si) == (ssize_t)sizeof si)
		release_sig = (int)si.ssi_signo;
	return release_sig;
}

/* store_release, never cut short by a terminating signal (its reply is waited for as
 * long as --io-timeout says: the lock is never left held by a Ctrl-C). */
static int release_whole(struct store *s, struct lock *l, int flags, char *err, size_t n)
{
	store_set_abort_fd(-1);
	int rc = store_release(s, l, flags, STORE_NO_CAP, err, n);
	store_set_abort_fd(release_abort_fd);
	return rc;
}

/* Stop the keeper of the lock (SIGUSR1: it stops renewing and exits without releasing)
 * when it runs on this host; wait for it, bounded (a renewal in flight ends within
 * connect + io timeouts). A keeper elsewhere finds the lock gone at its next renewal.
 * h NULL: the server could not be asked (the release fails too, and the lock is left
 * to its TTL, which is true only once its keeper no longer renews it). 0: stopped (or
 * signalled), -1: none found. */
static int stop_keeper(const struct holder *h, const char *key, const struct keeper_args *k)
{
	struct proc_id id;
	int pidfd;

	if (find_keeper(h, key, k->token, &id) < 0) {
		if (h)
			log_info("no keeper of this lock runs on this host: releasing only");
		return -1;
	}
	if (signal_keeper(&id, &pidfd) < 0) {
		/* found, yet not ours to signal (another user's: EPERM), or gone meanwhile */
		int e = errno;
		keeper_dead = !is_keeper(&id);
		snprintf(keeper_why, sizeof keeper_why, "keeper pid %ld: %s", id.pid,
		         keeper_dead ? "gone" : strerror(e));
		if (!keeper_dead)
			log_warn("keeper pid %ld of '%s' cannot be stopped (%s)%s", id.pid, k->name,
			         strerror(e),
			         h ? ": releasing; it finds the lock released at its next renewal"
			           : "");
		return -1;
	}
	long pid = id.pid;
	/* Not so long that the lease (no longer renewed) runs out before the release. */
	int64_t wait = k->connect_timeout_ms + k->io_timeout_ms + 1000;
	if (h && h->pttl_ms > 0 && wait > h->pttl_ms / 2)
		wait = h->pttl_ms / 2;
	int64_t until = clock_ms() + wait;
	/* A terminating signal (release_abort_fd, left pending) ends the wait, not the
	 * release that follows: the keeper no longer renews, the lock is given back now. */
	while (is_keeper(&id) && clock_ms() < until && !release_signal_pending()) {
		struct pollfd pf[2] = {{.fd = pidfd, .events = POLLIN},
		                       {.fd = release_abort_fd, .events = POLLIN}};
		poll(pidfd >= 0 ? pf : pf + 1, (pidfd >= 0) + (release_abort_fd >= 0), 10);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (is_keeper(&id) && release_signal_pending())
		log_warn("keeper pid %ld not waited for (a terminating signal)%s", pid,
		         h ? "; releasing anyway" : "");
	else if (is_keeper(&id))
		log_warn("keeper pid %ld did not stop in time%s", pid,
		         h ? "; releasing anyway" : "");
	else
		log_info("keeper pid %ld stopped", pid);
	return 0;
}

/* How the token's run ended, by the name's history (best effort: nothing when the
 * history is off, refused or has no entry of the token): 1 with the text in buf. Only
 * an end newer than the token's last grant is its run's: one token can open two runs (a
 * grant whose reply came too late is given back, released, and the next attempt of the
 * same --acquire takes the lock again), and the end of the first is not the second's. */
#define RELEASE_HISTORY 100
static int token_run_end(struct store *s, const struct lock *l, const char *token, int64_t io_ms,
                         char *ev, size_t evn, char *when, size_t n)
{
	struct history_entry *e = calloc(RELEASE_HISTORY, sizeof *e);
	char err[300];
	int count = RELEASE_HISTORY, found = 0;

	if (!e || store_history(s, l, clock_ms() + io_ms, e, &count, err, sizeof err) != LOCK_OK)
		count = 0;
	for (int i = 0; i < count && !found; i++) { /* newest first */
		if (strcmp(e[i].token, token) != 0 || e[i].seen[0])
			continue; /* seen: an end not recorded (a lease over), no record of it */
		if (!strcmp(e[i].ev, "acquired"))
			break; /* the run is still open in the history: no end recorded */
		time_t t = (time_t)(e[i].at_ms / 1000);
		struct tm tm;
		snprintf(when, n, "?");
		if (localtime_r(&t, &tm))
			strftime(when, n, "%Y-%m-%d %H:%M:%S", &tm);
		snprintf(ev, evn, "%s", e[i].ev);
		found = 1;
	}
	free(e);
	return found;
}

static int run_end(struct store *s, const struct lock *l, const struct keeper_args *k, char *buf,
                   size_t n)
{
	char ev[16], when[64];
	int found =
	    token_run_end(s, l, k->token, k->io_timeout_ms, ev, sizeof ev, when, sizeof when);

	if (found) {
		if (!strcmp(ev, "released"))
			snprintf(buf, n,
			         "it was already released at %s (a --release before this one)",
			         when);
		else if (!strcmp(ev, "expired"))
			snprintf(buf, n,
			         "its lease expired unrenewed (recorded at %s): the keeper was "
			         "gone",
			         when);
		else
			snprintf(buf, n, "its run ended %.16s at %s (--history -k %s)", ev, when,
			         k->name);
	}
	return found;
}

/* The token does not hold the lock: say so, and who broke it when the last --break's
 * record (in hs, NULL: not read) names the token, or how the history says it ended. */
static int not_held(struct store *s, const struct lock *l, const struct keeper_args *k,
                    const struct holders *hs)
{
	char why[600], by[300];

	/* One line: the keeper's own account (it names a --break), else the server's. */
	if (keeper_ended(l->key, k->token, why, sizeof why))
		log_error("lock '%s' is not held by this token: %s; nothing released", k->name,
		          why);
	else if (hs && holder_broken(&hs->broken, k->token, by, sizeof by))
		log_error("lock '%s' is not held by this token: %s; nothing released", k->name, by);
	else if (run_end(s, l, k, by, sizeof by))
		log_error("lock '%s' is not held by this token: %s; nothing released", k->name, by);
	else
		log_error("lock '%s' is not held by this token: it was lost (expired, broken or "
		          "taken over) since --acquire, or the token is wrong; nothing released",
		          k->name);
	return RL_EX_LOST;
}

/* --release exits 79 for a token that holds nothing: its run, while the history still
 * has it open (its keeper died unheard, or was stopped past its lease), ends lost, as a
 * 79 says (docs/options.md --history). Nothing is released (LOCK_KEEP_LOST); a run that
 * ended already (its keeper recorded the loss, a later grant found it expired) is not
 * touched: the scripts end only the token's open run. Best effort. */
static void record_run_lost(struct store *s, struct lock *mine)
{
	char err[300];

	if (mine->ask.history_len <= 0)
		return;
	mine->lost_seen = mine->lost_declared = 1;
	if (store_release(s, mine, LOCK_KEEP_LOST, STORE_NO_CAP, err, sizeof err) == LOCK_ERR)
		log_debug("cannot record the loss of %s in its history (%s)", mine->key, err);
}

/* The ended note --release leaves when it stopped the keeper but could not release: not
 * a loss of the steps' guard (a later --release that finds the lock still held frees it
 * and exits 0), yet no keeper renews the lock any more (--held: 79, even with Redis
 * down). */
#define STOPPED_UNRELEASED                                                                         \
	"left to its TTL by rlock --release (its keeper stopped), which could not release it"

/* --release could not release (cause: why; what: what the lease does then, e.g. "it
 * expires by its TTL"): one line, true of the keeper. Stopped here (stopped): the lock
 * is left to its TTL, and a note (ended_note) tells --held and a later --release so.
 * Not stopped: its keeper ended already (its note says how), or none was found on this
 * host to stop (one that runs, on another host or recorded under another runtime
 * directory, renews the lock on once Redis answers: the line must not say it expires). */
static void unreleased(const struct lock *l, const struct keeper_args *k, int stopped,
                       const char *why, const char *what)
{
	static struct lock mine; /* large */
	char ended[600], note[800];

	mine = *l;
	snprintf(mine.token, sizeof mine.token, "%s", k->token);
	if (stopped) {
		log_error("cannot release '%s' (%s): %s; the keeper is stopped", k->name, why,
		          what);
		log_reason(note, sizeof note, STOPPED_UNRELEASED " (%s)", why);
		ended_note(&mine, note);
	} else if (keeper_ended(l->key, k->token, ended, sizeof ended)) {
		log_error("cannot release '%s' (%s): %s; its keeper ended already: %s", k->name,
		          why, what, ended);
	} else if (keeper_dead) { /* killed unheard (kill -9, a reboot): nothing renews it */
		log_error("cannot release '%s' (%s): %s; %s", k->name, why, what, keeper_why);
	} else {
		log_error("cannot release '%s' (%s): no keeper of it stopped on this host (%s): "
		          "one that runs renews it; run --release again once Redis answers",
		          k->name, why, keeper_why);
	}
}

void keeper_release_unreached(const struct lock *l, const struct keeper_args *k, const char *why)
{
	unreleased(l, k, stop_keeper(NULL, l->key, k) == 0, why, "it expires by its TTL");
}

void keeper_release_record(const struct lock *l, const struct keeper_args *k, int rc, int sig)
{
	static struct lock named; /* large */
	named = *l;
	int status = sig ? 128 + sig : rc; /* the exit status */
	if (k->token)                      /* the token released, not this run's own */
		snprintf(named.token, sizeof named.token, "%s", k->token);
	if (rc == 0) /* released: the hold's end, 0, as its history record and a keeper's own
	              * SIGTERM say; a signal that came after it is --release's exit alone */
		events_emit(EV_KEEPER_RELEASED,
		            &(struct ev_facts){.elsewhere = 1, .lock = &named, .status = 0});
	else if (rc == RL_EX_LOST)
		events_emit(EV_KEEPER_LOST,
		            &(struct ev_facts){.elsewhere = 1,
		                               .lock = &named,
		                               .reason = "no longer held at the release"});
	else if (rc == RL_EX_UNAVAILABLE || rc == RL_EX_OSERR)
		events_emit(EV_UNAVAILABLE, &(struct ev_facts){.elsewhere = 1,
		                                               .lock = &named,
		                                               .status = status,
		                                               .reason = "the release failed"});
	else if (rc > 128) /* interrupted before the release */
		events_emit(EV_FAILED,
		            &(struct ev_facts){
		                .elsewhere = 1,
		                .lock = &named,
		                .status = status,
		                .reason = "interrupted before the release: nothing released"});
	else
		events_emit(EV_FAILED, &(struct ev_facts){.elsewhere = 1,
		                                          .lock = &named,
		                                          .status = status,
		                                          .reason = "not released"});
}

int keeper_release(struct store *s, const struct lock *l, const struct keeper_args *k, int abort_fd)
{
	static struct holders hs; /* large */
	const struct holder *h = NULL;
	struct lock mine = *l;
	char err[400], ended[600];
	int rc;

	/* Its keeper (on this host) said the hold ended, e.g. lost by its own clock while the
	 * lease still ran on the server: the job was no longer guarded, as --held says. The
	 * token may still hold the lock: given back all the same, and 79. */
	release_abort_fd = abort_fd;
	rc = store_status(s, l, clock_ms() + k->io_timeout_ms, &hs, err, sizeof err);
	if (rc != LOCK_OK && release_signal()) {
		/* nothing sent yet: the keeper is left holding the lock, as before the call */
		log_error("rlock --release interrupted by SIG%s before the release: nothing "
		          "released, the keeper of '%s' (if any) still holds it",
		          signal_name(release_sig), k->name);
		store_close(s);
		keeper_release_record(l, k, 128 + release_sig, release_sig);
		child_die_of(release_sig);
	}
	for (int i = 0; rc == LOCK_OK && i < hs.n; i++)
		if (hs.h[i].held && !strcmp(hs.h[i].token, k->token))
			h = &hs.h[i];
	/* A token the environment gave for the key (no --token) may be the hold of that key
	 * on another database or server (two --acquire of one name, a job's lock): when it
	 * holds nothing here, the environment's other token of the key that does is the one
	 * meant, not a release called lost with the wrong one and its keeper left holding. */
	struct keeper_args alt;
	if (rc == LOCK_OK && !h && k->token_env) {
		static struct inherited_holds ih; /* large */
		inherited_read(&ih);
		for (int j = 0; j < ih.n && !h; j++)
			for (int i = 0; i < hs.n && !h && !strcmp(ih.in[j].key, l->key); i++)
				if (hs.h[i].held && !strcmp(hs.h[i].token, ih.in[j].token))
					h = &hs.h[i];
		if (h) {
			alt = *k;
			alt.token = h->token;
			k = &alt;
		}
	}
	/* (an earlier --release that stopped the keeper but could not release is no loss) */
	int gone = keeper_ended(l->key, k->token, ended, sizeof ended) &&
	           strncmp(ended, STOPPED_UNRELEASED, strlen(STOPPED_UNRELEASED)) != 0;
	snprintf(mine.token, sizeof mine.token, "%s", k->token);
	/* A status read lists HOLDERS_MAX holders: past that, a token not listed may
	 * still be a shared holder or a permit. */
	int unlisted = rc == LOCK_OK && !h && hs.total > hs.n && hs.limit[0];
	if (rc != LOCK_OK && !k->redlock) {
		/* The user asked to release: the keeper on this host is stopped all the same
		 * (found by its mark alone), so that the lock does expire by its TTL. */
		unreleased(l, k, stop_keeper(NULL, l->key, k) == 0, err, "it expires by its TTL");
		rc = RL_EX_UNAVAILABLE;
	} else if (rc != LOCK_OK) {
		/* Redlock (exclusive only): the status could not tell (a node silent) or had
		 * no quorum. The keeper is stopped as above, and the token given back all the
		 * same on every node that answers (it names this holder alone): released
		 * when the nodes that did not answer are fewer than a majority (quorum.c). */
		int stopped = stop_keeper(NULL, l->key, k) == 0;
		mine.lost_declared = gone != 0;
		mine.run_status = gone ? -1 : 0; /* released: status 0, as keeper-released says */
		int r = release_whole(s, &mine, 0, err, sizeof err);
		if (r == LOCK_OK && gone) {
			log_error("lock '%s': %s; released what was left of its lease", k->name,
			          ended);
			rc = RL_EX_LOST;
		} else if (r == LOCK_OK || r == LOCK_HANDED_OVER) {
			log_info("released %s", l->key);
			rc = 0;
		} else if (r == LOCK_NOTOURS) {
			rc = not_held(s, l, k, NULL);
		} else {
			unreleased(l, k, stopped, err, HOLD_RELEASE_FAILED);
			rc = RL_EX_UNAVAILABLE;
		}
	} else if (!h && !unlisted) {
		rc = not_held(s, l, k, &hs); /* first: it reads how the history says it ended */
		record_run_lost(s, &mine);
	} else if (h && h->cmd[0] && strcmp(h->cmd, KEEPER_CMD) != 0) {
		/* The token of a running rlock (its command's RLOCK_TOKEN), not a keeper's: that
		 * rlock releases it when its command ends, and would take a release of its token
		 * done meanwhile for its own, retried (the server cannot tell them apart), and
		 * exit 0 as if it had held the lock all along. */
		log_error("lock '%s' is held by a running rlock (pid %lld: %s), not by an "
		          "--acquire keeper: it releases the lock itself when its command ends; "
		          "nothing released",
		          k->name, h->pid, h->cmd);
		rc = RL_EX_USAGE;
	} else {
		/* In the mode of the holder: the token alone names it (--acquire -s or -l N
		 * left a shared holder or a permit), whatever -s or -l is given here. An
		 * unlisted token: in the lock's mode, which touches nothing when the token
		 * holds nothing; its keeper, not known here, is not stopped first and finds
		 * the lock gone at its next renewal. */
		char mode = h ? h->mode : strcmp(hs.limit, "shared") != 0 ? 'l' : 's';
		lock_set_mode(&mine,
		              mode == 's'   ? LOCK_SHARED
		              : mode == 'l' ? LOCK_LIMIT
		                            : LOCK_EXCLUSIVE,
		              mode == 'l' ? atoi(hs.limit) : 0, l->ask.fair, l->ask.nowait);
		int stopped = h && stop_keeper(h, l->key, k) == 0;
		/* its keeper gave the lease up as lost: the run's end record says lost, as the
		 * exit status (79) does, not released */
		mine.lost_declared = gone != 0;
		mine.run_status = gone ? -1 : 0; /* released: status 0, as keeper-released says */
		rc = release_whole(s, &mine, 0, err, sizeof err);
		int unconfirmed = 0;
		if (rc == LOCK_OK && !gone) {
			/* --wait-replicas, --wait-aof: the release confirmed as the acquire was
			 * (hold.c's release_one; --wait-aof: for the --once-per mark); a
			 * terminating signal ends the wait, said on the line */
			unconfirmed =
			    release_signal_pending()
			        ? -1
			        : release_unconfirmed(k->wait_replicas,
			                              mine.mark_done ? k->wait_aof_local : 0,
			                              mine.mark_done ? k->wait_aof_replicas : 0, s,
			                              err, sizeof err);
			int aof =
			    mine.mark_done && (k->wait_aof_local > 0 || k->wait_aof_replicas > 0);
			if (unconfirmed != 0 && (k->wait_replicas > 0 || aof) && release_signal()) {
				char sig[64];
				snprintf(sig, sizeof sig, "interrupted by SIG%s",
				         signal_name(release_sig));
				release_unconfirmed_why(unconfirmed == 2 || k->wait_replicas <= 0,
				                        k->wait_replicas, sig, err, sizeof err);
				unconfirmed = 1;
			} else if (unconfirmed < 0) {
				unconfirmed =
				    0; /* nothing to wait for: the signal is died of below */
			}
		}
		if (rc == LOCK_OK && gone) {
			log_error("lock '%s': %s; released what was left of its lease", k->name,
			          ended);
			rc = RL_EX_LOST;
		} else if (rc == LOCK_OK && unconfirmed) {
			log_warn(
			    "released %s on the master, %s%s", l->key, err,
			    mine.mark_done && mode == 'x'
			        ? ", and lose the mark: not confirmed done (--once-per), a later "
			          "run may run again"
			        : "");
			rc = 0;
		} else if (rc == LOCK_OK) {
			log_info("released %s%s", l->key,
			         h ? ""
			           : " (one of more holders than a status lists: its keeper "
			             "ends at its next renewal)");
			/* --once-per: release.lua writes the mark, an exclusive lock's only */
			if (mine.mark_done && mode == 'x')
				log_info("lock '%s' is done for %.0f s (--once-per)", k->name,
				         (double)mine.ask.once_per_ms / 1000);
			else if (mine.mark_done)
				log_warn("lock '%s' is not marked done: --once-per is an exclusive "
				         "lock's, this token held a shared hold or a permit",
				         k->name);
			rc = 0;
		} else if (rc == LOCK_NOTOURS && !h) {
			rc = not_held(s, l, k, NULL);
		} else if (rc == LOCK_NOTOURS) {
			char by[300] = "";
			renew_broken_why(s, NULL, &mine, STORE_NO_CAP, by, sizeof by);
			log_error(
			    "lock lost: '%s' was no longer held by this token at the release%s%s",
			    k->name, by[0] ? ": " : "", by);
			rc = RL_EX_LOST;
		} else {
			/* an unlisted token's keeper too: else it renews on (found by its mark) */
			if (!h)
				stopped = stop_keeper(NULL, l->key, k) == 0;
			unreleased(l, k, stopped, err, HOLD_RELEASE_FAILED);
			rc = RL_EX_UNAVAILABLE;
		}
	}
	char path[400];
	if (rc != RL_EX_UNAVAILABLE && ended_path(l->key, k->token, 0, path, sizeof path) == 0)
		unlink(path); /* the last step: --held is over */
	/* and the keeper's mark, which one killed (kill -9, a reboot) leaves behind */
	if (rc != RL_EX_UNAVAILABLE &&
	    record_path("keeper", l->key, k->token, 0, path, sizeof path) == 0)
		unlink(path);
	store_close(s);
	if (release_sig) { /* read off its fd: the caller's die_if_signalled cannot see it */
		keeper_release_record(l, k, rc, release_sig); /* what it did, as it exits */
		child_die_of(release_sig);
	}
	return rc;
}
