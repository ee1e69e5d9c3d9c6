/* SPDX-License-Identifier: MIT */
/* rlock: run a command while holding a lock in Redis.
 * The story: options → connect → acquire (or wait) → run → release → exit. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "child.h"
#include "cli.h"
#include "clock.h"
#include "events.h"
#include "exitcodes.h"
#include "frontend.h"
#include "hold.h"
#include "holder.h"
#include "keeper.h"
#include "lock.h"
#include "log.h"
#include "parse.h"
#include "reenter.h"
#include "report.h"
#include "rewatch.h"
#include "store.h"
#include "wait.h"

/* The command line for the owner record (n > 4 bytes): one that does not fit ends in
 * "..." where it was cut (never mid-character), so --status never shows a part as the
 * whole. */
static void describe_command(char *buf, size_t n, const struct opts *o)
{
	size_t used = 0;

	buf[0] = '\0';
	if (o->mode == MODE_ACQUIRE) {
		snprintf(buf, n, "%s", KEEPER_CMD);
		return;
	}
	if (o->shell_command) {
		used = (size_t)snprintf(buf, n, "%s", o->shell_command);
	} else {
		for (char **a = o->argv; *a && used < n; a++)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? " " : "", *a);
	}
	if (used < n)
		return;
	size_t end = n - 4;
	while (end > 0 && ((unsigned char)buf[end] & 0xc0) == 0x80)
		end--; /* a UTF-8 continuation byte: cut before its character */
	memcpy(buf + end, "...", 4);
}

/* RLOCK_WARN_SIGNAL: this run's --warn, or, without it, an ancestor rlock's that the
 * server says still holds a lock inherited here (its warning reaches the command: this
 * rlock passes the signal on); else it is removed (a CI runner's, a finished step's,
 * beside a keeper's lock: no signal of that name is coming). */
static void warn_environment(const struct reenter *r, int warn_signal)
{
	int ancestor = 0;

	for (int j = 0; j < r->ih.n && !ancestor; j++)
		ancestor = r->ih.in[j].live && !r->ih.in[j].keeper;
	if (warn_signal)
		setenv("RLOCK_WARN_SIGNAL", signal_name(warn_signal), 1);
	else if (!ancestor)
		unsetenv("RLOCK_WARN_SIGNAL");
}

/* Environment of the command: the user's own, untouched (as flock and timeout pass
 * it), plus the lock's details (reenter_environment: the locks it runs under, inherited
 * or taken here), the lease length of those taken here and RLOCK_WARN_SIGNAL
 * (warn_environment). A secret rlock read from a file or the config is never added. */
static void child_environment(const struct reenter *r, const struct hold *h, int warn_signal)
{
	char v[32];

	warn_environment(r, warn_signal);
	reenter_environment(r, h->l, h->n);
	snprintf(v, sizeof v, "%lld", (long long)h->l[0].ask.ttl_ms);
	setenv("RLOCK_TTL_MS", v, 1);
}

static struct rewatch rewatch; /* large */

static int64_t never(const void *ctx)
{
	(void)ctx;
	return INT64_MAX;
}

/* The first terminating signal waiting in sigfd (SIGCHLD skipped), or 0. */
static int late_signal(int sigfd)
{
	struct signalfd_siginfo si;

	while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si)
		if (si.ssi_signo != SIGCHLD)
			return (int)si.ssi_signo;
	return 0;
}

/* A run re-entered whole holds no lock of its own: the ancestor's lease, renewal, loss
 * action, --min-hold, --lock-delay, label, events and metrics are the ancestor's (its
 * --on-lost signals its group, this rlock with it, which forwards the signal). What is
 * this run's own is its command's time: --max-hold stops it as timeout(1) does (SIGTERM
 * to its group, SIGKILL after --kill-after: 124, or 137); and its command's cover: the
 * inherited leases are watched (rewatch), and one that ends under it stops the command
 * (SIGTERM, SIGKILL after --kill-after: 79), as does one found ended when the command
 * is done (79). The command runs in a group of its own under a watchdog (child_spawn,
 * no lease deadline). --preemptible is refused (64): this run has no lock a --preempt
 * request could take from it. Never returns. */
static void __attribute__((noreturn))
run_reentered(const struct opts *o, const struct reenter *r, struct store *s, int sigfd,
              const sigset_t *orig)
{
	struct rewatch *w = &rewatch;

	if (o->lock.preemptible) {
		log_error("--preemptible: every lock asked for is already held by this process "
		          "tree, so this run has none of its own to give up; give --preemptible to "
		          "the rlock that holds it");
		exit(RL_EX_USAGE);
	}
	if (o->min_hold_ms > 0 || o->warn_signal || o->lock.delay_ms > 0 || o->label ||
	    o->lock.once_per_ms > 0 || o->events_file || o->metrics_file)
		log_info("a nested run keeps the holder's lease: --min-hold, --warn, --on-lost, "
		         "--lock-delay, --label, --once-per, --events and --metrics-file are the "
		         "holder's (given here, they do nothing)");
	rewatch_start(w, r, o->prefix, o->lock.ttl_ms, o->io_timeout_ms, s, NULL);
	log_info("every lock asked for is already held by this process tree: running the "
	         "command under it%s",
	         o->max_hold_ms > 0 ? " and --max-hold" : "");
	struct child ch;
	int64_t started = clock_ms();
	log_defer(1); /* as run(): a full stderr never holds up the supervisor (log.h) */
	int rc = child_spawn(&ch, o->argv, o->shell_command, orig, -1, -1);
	if (rc != 0)
		exit(rc);
	struct supervise_args sa = {.sigfd = sigfd,
	                            .kill_at = never,
	                            .action = ACT_SIGNAL,
	                            .lost_signal = SIGTERM,
	                            .warn_at = never,
	                            .kill_after_ms = o->kill_after_ms,
	                            .stop_at = o->max_hold_ms > 0 ? started + o->max_hold_ms : -1};
	rewatch_supervise(w, &sa);
	rc = child_supervise(&ch, &sa);
	child_finish(&ch);
	child_unlisten_stop(&ch); /* nothing to give back */
	if (rewatch_end(w, !ch.lost) < 0)
		exit(RL_EX_LOST);
	if (ch.term_sig)
		child_die_of(ch.term_sig); /* as a run that holds its lock */
	/* and as it, one that came after the command exited (while the rest of its group
	 * ran, or since): not over a status of rlock's own (79, 124, 137) */
	int late =
	    rc != RL_EX_LOST && !ch.timed_out ? ch.late_sig ? ch.late_sig : late_signal(sigfd) : 0;
	if (late)
		child_die_of(late);
	exit(rc);
}

/* A nested rlock whose process tree already holds every name it asks for (in a mode at
 * least as strong) runs the command itself instead of deadlocking against its ancestor
 * (run_reentered); with only some of them, o keeps the names left to take (reenter.h).
 * With --acquire it only refuses (64) what would wait for an ancestor. */
static void reenter_plan_names(struct reenter *r, struct store *s, struct opts *o, int sigfd,
                               int termfd, const sigset_t *orig)
{
	int64_t start = clock_ms();
	/* -w: asking the server what is inherited is part of the wait (-n: its one try
	 * is not capped, as the acquire's is not) */
	struct reenter_ask q = {o->prefix,
	                        o->names,
	                        o->nnames,
	                        o->lock.ttl_ms,
	                        o->io_timeout_ms,
	                        lock_mode_of(o->kind),
	                        o->lock.limit,
	                        o->mode == MODE_ACQUIRE,
	                        o->wait_ms > 0 ? start + o->wait_ms : INT64_MAX,
	                        o->wait_ms != 0,
	                        termfd,
	                        getenv("RLOCK_WARN_SIGNAL") != NULL};

	int left = reenter_plan(r, s, &q);
	o->nnames = q.nnames;
	if (o->wait_ms > 0) { /* what is left of the wait (at least a try) */
		int64_t rest = o->wait_ms - (clock_ms() - start);
		o->wait_ms = rest > 0 ? rest : 1;
	}
	if (left > 0 || o->mode == MODE_ACQUIRE) {
		o->name = o->names[0]; /* only the names left to take */
		return;
	}
	reenter_environment(r, NULL, 0);
	warn_environment(r, 0); /* its own --warn does nothing: the lease is the holder's */
	/* The lease its command runs under: the first name's holder's, as its record says
	 * (never an RLOCK_TTL_MS the environment gave: a keeper's eval sets none) */
	long long ttl = r->held[0] >= 0 ? r->ih.in[r->held[0]].ttl_ms : 0;
	if (ttl > 0) {
		char v[32];
		snprintf(v, sizeof v, "%lld", ttl);
		setenv("RLOCK_TTL_MS", v, 1);
	} else {
		unsetenv("RLOCK_TTL_MS");
	}
	run_reentered(o, r, s, sigfd, orig);
}

static int busy(const struct opts *o, const char *name, const struct holder *h)
{
	/* -E 0 skips silently; -v still says so. */
	char who[1200] = "";

	if (h->host[0] || holder_nobody(h))
		holder_format(h, HOLDER_LABEL | HOLDER_RAW, who, sizeof who);
	log_msg(o->conflict_exit != 0 ? LOG_WARN : LOG_INFO, "lock '%s' is busy%s%s%s%s", name,
	        !who[0]            ? ""
	        : holder_nobody(h) ? ": "
	                           : ": held by ",
	        who, o->wait_ms > 0 ? " (gave up waiting)" : "",
	        o->conflict_exit == 0 ? "; skipped (-E 0)" : "");
	return o->conflict_exit;
}

/* --once-per: a run succeeded inside the window; say when it ends (-E 0: only -v). */
static int done_already(const struct opts *o, const char *name, const struct holder *h)
{
	char until[64] = "";

	if (h->pttl_ms >= 0) {
		time_t t = time(NULL) + (time_t)((h->pttl_ms + 999) / 1000);
		struct tm tm;
		if (localtime_r(&t, &tm))
			strftime(until, sizeof until, "%Y-%m-%d %H:%M:%S %z", &tm);
	}
	if (until[0])
		log_msg(
		    o->conflict_exit != 0 ? LOG_WARN : LOG_INFO,
		    "lock '%s' is done for this window (--once-per: a run succeeded); the window "
		    "ends at %s (in %.1f s); --reset clears the mark%s",
		    name, until, (double)h->pttl_ms / 1000,
		    o->conflict_exit == 0 ? "; skipped (-E 0)" : "");
	else
		log_msg(o->conflict_exit != 0 ? LOG_WARN : LOG_INFO,
		        "lock '%s' is done (--once-per: its mark has no expiry, set by hand?)%s",
		        name, o->conflict_exit == 0 ? "; skipped (-E 0)" : "");
	return o->conflict_exit;
}

/* The holder's user name, for --status: $USER (login, su, sudo), else $LOGNAME (POSIX's
 * name for it, the only one of the two cron(8) sets), when rlock runs with its real
 * uid (not set-uid) and the value is a plain name, so that the common cases need no
 * look-up in NSS (nscd's sockets, nsswitch.conf, /etc/passwd: 100-300 us a run, issue
 * 40); else the account name of the effective uid. Informational, as the host and pid
 * are: not a credential. */
static const char *user_name(void)
{
	const char *vars[] = {"USER", "LOGNAME"};
	const char *u = NULL;
	int real = getuid() == geteuid();

	for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
		const char *e = getenv(vars[v]);
		size_t n = e ? strlen(e) : 0;
		int plain = real && n > 0 && n < 64;
		for (size_t i = 0; plain && i < n; i++)
			plain = e[i] > ' ' && e[i] < 0x7f;
		if (plain)
			return e;
		if (!u)
			u = e;
	}
	struct passwd *pw = getpwuid(geteuid());
	return pw ? pw->pw_name : u ? u : "";
}

/* Before the command starts: a terminating signal that cut a wait short ends rlock
 * as that signal would have. */
static void die_if_signalled(int termfd)
{
	struct signalfd_siginfo si;

	if (read(termfd, &si, sizeof si) == (ssize_t)sizeof si) {
		log_flush_until(-1); /* what stderr takes at once: the user's signal wins */
		child_die_of((int)si.ssi_signo);
	}
}

/* rlock dies of signo before it held the lock (connecting, waiting): the events file's
 * last line says so (failed, 128+N), not a "waiting" left without an end. */
static void die_unheld(const struct lock *l, int signo)
{
	char why[80];

	snprintf(why, sizeof why, "killed by SIG%s before the lock was held", signal_name(signo));
	events_emit(EV_FAILED, &(struct ev_facts){.lock = l, .status = 128 + signo, .reason = why});
	log_flush_until(-1); /* what stderr takes at once: the user's signal wins (log.h) */
	child_die_of(signo);
}

static void die_unheld_if_signalled(int termfd)
{
	struct signalfd_siginfo si;

	if (read(termfd, &si, sizeof si) == (ssize_t)sizeof si)
		die_unheld(NULL, (int)si.ssi_signo);
}

static struct keeper_args keeper_args_of(const struct opts *o)
{
	struct keeper_args k = {.github = o->format_github,
	                        .close_stdout = cli_close_stdout_told,
	                        .log_file = o->log_file,
	                        .max_hold_ms = o->max_hold_ms,
	                        .warn = o->warn_signal != 0,
	                        .name = o->name,
	                        .token = o->token,
	                        .token_env = o->token_env,
	                        .connect_timeout_ms = o->connect_timeout_ms,
	                        .io_timeout_ms = o->io_timeout_ms,
	                        .wait_replicas = o->wait_replicas,
	                        .wait_aof_local = o->wait_aof_local,
	                        .wait_aof_replicas = o->wait_aof_replicas,
	                        .redlock = o->nurls > 1};
	return k;
}

/* --events and --metrics-file, for a run, a keeper or --release (which ends the keeper's
 * run): set up before the keeper's fork
 * (which changes to "/"); a bad path is a usage error. */
static void events_of(const struct opts *o)
{
	struct events_config e = {.events_path = o->events_file,
	                          .metrics_path = o->metrics_file,
	                          .prefix = o->prefix,
	                          .names = o->names,
	                          .nnames = o->nnames,
	                          .label = o->label,
	                          .conflict_exit = o->conflict_exit};
	char err[300];

	if ((o->mode == MODE_RUN || o->mode == MODE_ACQUIRE || o->mode == MODE_RELEASE) &&
	    events_setup(&e, err, sizeof err) < 0) {
		log_error("%s (try 'rlock --help')", err); /* a bad path: cli.c's usage shape */
		exit(RL_EX_USAGE);
	}
}

/* Signals: blocked, read from sigfd; until the command starts, every wait (lookup,
 * connect, reply, sleep) ends at once on a terminating signal (termfd): rlock then
 * gives back what it may hold and dies of it. */
static int setup_signals(int *sigfd, int *termfd, sigset_t *orig)
{
	*sigfd = child_signals_block(orig);
	*termfd = *sigfd < 0 ? -1 : child_term_fd();
	if (*termfd < 0) {
		log_error("cannot set up signal handling: %s", strerror(errno));
		return -1;
	}
	store_set_abort_fd(*termfd);
	return 0;
}

/* Look the name up once (later connects, for renewal, waiting and release, reuse its
 * addresses and never wait on a resolver) and open the main handle, within the wait
 * when running a command (wait_open; o->wait_ms then keeps what is left of it). The
 * password stays in memory while connections may need reopening; it is wiped at exit.
 * 0, or the exit status. */
static int open_store(struct store **c, struct store_config *cfg, struct opts *o, int termfd,
                      char *err, size_t errlen)
{
	int64_t start = clock_ms();
	o->wait_given_ms = o->wait_ms;
	int waits = o->mode == MODE_RUN || o->mode == MODE_ACQUIRE;
	int64_t wait = waits ? o->wait_ms : 0;
	/* The lookup is part of the wait too: it ends by the -w deadline. */
	int64_t cap = start + o->connect_timeout_ms;
	if (wait > 0 && start + wait < cap)
		cap = start + wait;
	int rc = store_resolve(cfg, cap, err, errlen);

	/* A resolver that may answer later (EAI_AGAIN, silent): each connect of the wait
	 * looks the name up again; once one succeeded, the addresses are kept. A lookup
	 * that took the whole wait is the answer (its error said). */
	if (rc == STORE_ERR && wait != 0 && store_fault_passing() &&
	    (wait < 0 || clock_ms() - start < wait))
		rc = STORE_OK;
	if (wait > 0) /* what the lookup left of the wait (at least a try) */
		wait = clock_ms() - start < wait ? wait - (clock_ms() - start) : 1;
	/* One look (README: -n fails at once; so does an operator's command): each source
	 * of the route asked once, not its rounds. --release is owed them: a lock given
	 * back after a failover frees the name for the next holder now, not at its TTL. */
	store_look_once(wait == 0 && o->mode != MODE_RELEASE);
	if (rc == STORE_OK)
		rc = wait_open(c, cfg, o->name, wait, termfd, err, errlen);
	if (waits) /* the run's own calls follow the route (-n's first try: wait.c) */
		store_look_once(0);
	if (rc == STORE_OK)
		store_resolve(cfg, clock_ms() + o->connect_timeout_ms, err, errlen);
	if (rc == STORE_OK && o->wait_ms > 0) {
		/* The connect was part of the wait: what is left of it (at least a try). */
		int64_t left = o->wait_ms - (clock_ms() - start);
		o->wait_ms = left > 0 ? left : 1;
	}
	if (rc == STORE_OK)
		return 0;
	die_unheld_if_signalled(termfd);
	if (o->mode != MODE_RELEASE) /* --release says it in its own line (keeper.c) */
		log_error("%s", err);
	rc = store_refused_url(rc) ? RL_EX_USAGE   /* a /2 on a Cluster node: --check's too */
	     : store_fault_local() ? RL_EX_OSERR   /* the host, not the server */
	     : store_fault_file()  ? RL_EX_NOINPUT /* --cacert not PEM: the user's file */
	                           : RL_EX_UNAVAILABLE;
	/* a usage error found at the servers (Redlock nodes that are one server, a
	 * Cluster or Sentinel given as nodes): failed, not unavailable */
	events_emit(rc == RL_EX_USAGE ? EV_FAILED : EV_UNAVAILABLE,
	            &(struct ev_facts){.status = rc, .reason = err});
	return rc;
}

/* --status, --break, --release, --list, --held. */
static int command(struct store *c, const struct opts *o, const struct lock_ask *ask,
                   const struct keeper_args *k, int termfd)
{
	int rc;

	if (o->mode == MODE_RELEASE) {
		static struct lock l; /* large */
		if (lock_init_ask(&l, ask, o->name) < 0) {
			log_error("no randomness for the lock token: %s", strerror(errno));
			store_close(c);
			return RL_EX_OSERR;
		}
		/* --release --once-per DUR: the --acquire's steps succeeded, the name is done */
		l.mark_done = l.ask.once_per_ms > 0;
		rc = keeper_release(c, &l, k, termfd);
		/* a terminating signal not yet read (died of below): the line's status is the
		 * exit status, 128+N, as a run's released line's is */
		struct signalfd_siginfo si;
		int sig =
		    read(termfd, &si, sizeof si) == (ssize_t)sizeof si ? (int)si.ssi_signo : 0;
		keeper_release_record(&l, k, rc, sig);
		if (sig && rc == 0) /* 128+N alone would read as "not released" */
			log_warn("released '%s'; then interrupted by SIG%s (rlock --release dies "
			         "of it: %d)",
			         o->name, signal_name(sig), 128 + sig);
		if (sig)
			child_die_of(sig);
	} else {
		struct report_ask ra;
		report_ask_from_opts(&ra, o);
		rc = o->mode == MODE_STATUS    ? report_status(c, &ra)
		     : o->mode == MODE_BREAK   ? report_break(c, &ra)
		     : o->mode == MODE_RESET   ? report_reset(c, &ra)
		     : o->mode == MODE_HELD    ? report_held(c, &ra)
		     : o->mode == MODE_HISTORY ? report_history(c, &ra)
		                               : report_list(c, &ra);
	}
	die_if_signalled(termfd);
	return rc;
}

/* The owner record: who holds the lock, for --status and the wait line. */
static struct lock_meta owner_record(const struct opts *o, char *cmd, size_t cmdlen, char *host,
                                     size_t hostlen)
{
	struct timespec now;

	gethostname(host, hostlen - 1);
	describe_command(cmd, cmdlen, o);
	clock_gettime(CLOCK_REALTIME, &now);
	struct lock_meta m = {host,
	                      user_name(),
	                      cmd,
	                      (long)getpid(),
	                      (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000,
	                      o->label,
	                      holder_proc_self()};
	return m;
}

/* --supersede: a newer request took this one's place; it leaves, saying which. */
static int superseded(const struct opts *o, const char *name, const struct lock *l,
                      const struct holder *newer)
{
	char who[800];

	log_warn("lock '%s': superseded by a newer --supersede request (%s); exiting %d", name,
	         holder_format(newer, HOLDER_LABEL | HOLDER_RAW, who, sizeof who),
	         o->superseded_exit);
	events_emit(EV_SUPERSEDED,
	            &(struct ev_facts){.lock = l, .status = o->superseded_exit, .reason = who});
	return o->superseded_exit;
}

/* Take every name of o into h (h owns c from here on), or exit as the failure says. */
static void acquire(struct hold *h, struct store *c, const struct store_config *cfg,
                    const struct opts *o, const struct lock_ask *ask, int termfd)
{
	char cmd[512], host[256] = "", err[512], warn_key[300];
	struct holder who;
	int signo = 0;
	int keeper = o->mode == MODE_ACQUIRE;

	snprintf(warn_key, sizeof warn_key, "%.200seviction-warned", o->prefix);
	struct lock_meta meta = owner_record(o, cmd, sizeof cmd, host, sizeof host);
	struct hold_spec sp = {.ask = ask,
	                       .names = o->names,
	                       .nnames = o->nnames,
	                       .wait_ms = o->wait_ms,
	                       .io_timeout_ms = o->io_timeout_ms,
	                       .wait_replicas = o->wait_replicas,
	                       .wait_aof_local = o->wait_aof_local,
	                       .wait_aof_replicas = o->wait_aof_replicas,
	                       .status_line = isatty(STDERR_FILENO) && o->verbose >= 0,
	                       .warn_key = o->eviction_warning && !keeper ? warn_key : NULL,
	                       .check_now = !keeper && o->verbose > 0,
	                       .not_taken = keeper ? keeper_report_failure : NULL};
	int rc = hold_acquire(h, c, cfg, &sp, &meta, termfd, &who, &signo, err, sizeof err);
	if (rc == WAIT_ACQUIRED)
		return;
	/* the request that failed (its token in the events line), if any: the name's */
	const struct lock *req = NULL;
	for (int i = 0; i < o->nnames && !req; i++)
		if (o->names[i] == h->failed)
			req = &h->l[i];
	if (rc == WAIT_SIGNAL)
		die_unheld(req, signo);
	if (rc == WAIT_BUSY)
		exit(busy(o, h->failed, &who));
	if (rc == WAIT_DONE)
		exit(done_already(o, h->failed, &who));
	if (rc == WAIT_SUPERSEDED)
		exit(superseded(o, h->failed, req, &who));
	if (rc == WAIT_MISMATCH) {
		/* Holders that disagree on the kind of lock or on N: a usage error. */
		log_error("lock '%s': %s", h->failed, err);
		events_emit(EV_FAILED,
		            &(struct ev_facts){.lock = req, .status = RL_EX_USAGE, .reason = err});
		exit(RL_EX_USAGE);
	}
	log_error("%s", err);
	/* the host short of a descriptor, of memory: not the server's fault */
	int st = rc == WAIT_OSERR || store_fault_local() ? RL_EX_OSERR
	         : store_fault_config()                  ? RL_EX_USAGE   /* /2 on a Cluster */
	         : store_fault_file()                    ? RL_EX_NOINPUT /* a TLS file */
	                                                 : RL_EX_UNAVAILABLE;
	events_emit(st == RL_EX_USAGE ? EV_FAILED : EV_UNAVAILABLE,
	            &(struct ev_facts){.status = st, .reason = err});
	exit(st);
}

static const struct lock *lease_lost(const void *ctx, int timed_out, char *buf, size_t n)
{
	return hold_lost_reason(ctx, timed_out, buf, n);
}

static int64_t lease_lost_at(const void *ctx)
{
	return hold_lost_at(ctx);
}

static int64_t lease_warn_at(const void *ctx)
{
	return hold_warn_at(ctx);
}

static const char *lease_late(const void *ctx)
{
	return hold_late_key(ctx);
}

static int64_t lease_kill_at(const void *ctx)
{
	return hold_kill_at(ctx);
}

/* --preemptible: a --preempt request stopped the command (as on a loss), and the
 * release (released: hold_release's) said whether the lock went to it. Handed over and
 * taken by that request: 81 and a line naming who asked. Not (the request gave up or
 * died before the release or before taking the reservation, or the release failed): a line that
 * says so, and the command's own status (own, 128+N for a signal: rlock sent it, as --max-hold's
 * 124 is not rlock's death), or --max-hold's 124 (137) when it expired too (timeout: a
 * command stopped by it never exits 0); the lock found lost: the caller says it (79). */
static int preempted(const struct hold *h, const struct opts *o, const char *who, int released,
                     int own, int timeout)
{
	if (h->handed_to[0]) /* who the release kept it for: another may have asked since */
		who = h->handed_to;
	if (h->handed_over) {
		log_error("lock '%s': %s: the command was stopped, the lock is released to that "
		          "request; exiting %d",
		          o->name, who, RL_EX_PREEMPTED);
		return RL_EX_PREEMPTED;
	}
	if (released == HOLD_LOST)
		return own; /* the caller says lost: 79 */
	log_error("lock '%s': %s: the command was stopped, but %s; exiting %d (%s)", o->name, who,
	          released == HOLD_ERR    ? "the release failed: the lock was not handed to that "
	                                    "request"
	          : released == HOLD_OVER ? "its lease ended before rlock could release it (rlock "
	                                    "stopped or starved): the lock was not handed to that "
	                                    "request"
	          : h->handover_untaken   ? "that request never took the lock (it gave up or died)"
	                                  : "that request gave up before the lock was released",
	          timeout ? timeout : own,
	          timeout ? "--max-hold expired: the command was stopped for it too"
	                  : "the command's status");
	return timeout ? timeout : own;
}

static int lease_preempted(const void *ctx)
{
	char who[300];

	return hold_preempted(ctx, who, sizeof who);
}

static int64_t lease_renew_due(const void *ctx)
{
	return hold_renew_due(ctx);
}

static void lease_renew_launch(void *ctx)
{
	hold_renew_launch(ctx); /* a failure is logged, then tried again (renew_due) */
}

/* hold_on_sent's: every release is sent, a Ctrl-Z may stop rlock (child_unlisten_stop). */
static void unlisten_stop(void *ch)
{
	child_unlisten_stop(ch);
}

/* Run the command under the hold, supervise it, give the locks back. The status. */
static int run(struct hold *h, const struct opts *o, const struct reenter *re, int sigfd,
               int termfd, const sigset_t *orig)
{
	struct child ch;
	int64_t started = clock_ms();

	child_environment(re, h, o->warn_signal);
	/* From here to the exit, a full stderr (a pipe nobody reads, shared with the
	 * command) never holds up the supervisor, a renewal or the release: lines wait
	 * (log.h), written as it takes them and at the exit. */
	log_defer(1);
	int ignore = o->on_lost == LOST_IGNORE;
	int rc = child_spawn(&ch, o->argv, o->shell_command, orig, ignore ? -1 : hold_kill_at(h),
	                     ignore ? -1 : hold_lost_at(h));
	if (rc != 0) {
		if (rc == RL_EX_LOST) { /* the lease ran out before the start */
			if (hold_set_lost(h, 1) == 0)
				hold_set_all_lost(h, 1);
			events_emit(EV_LOST, &(struct ev_facts){
			                         .reason = "ran out before the command started"});
		} else {
			/* not run (126, 127 as a shell says; 71): the history's released
			 * record carries that status, as the events line and the exit do */
			hold_set_status(h, rc);
		}
		int released = hold_release(h, 0);
		events_emit(EV_RELEASED,
		            &(struct ev_facts){.status = rc,
		                               .reason = released == HOLD_ERR
		                                             ? HOLD_RELEASE_FAILED_REASON
		                                             : NULL});
		return rc;
	}
	struct supervise_args sa = {
	    .sigfd = sigfd,
	    .lost_fd = hold_lost_fd(h),
	    .lost_at = lease_lost_at,
	    .kill_at = lease_kill_at,
	    .lost_reason = lease_lost,
	    .ctx = h,
	    .action = o->on_lost == LOST_IGNORE ? ACT_IGNORE : ACT_SIGNAL,
	    .lost_signal = o->lost_signal,
	    .warn_signal = o->warn_signal,
	    .warn_at = lease_warn_at,
	    .late = lease_late,
	    .kill_after_ms = o->kill_after_ms,
	    .stop_at = o->max_hold_ms > 0 ? started + o->max_hold_ms : -1,
	    .renew_due = lease_renew_due,
	    .renew_launch = lease_renew_launch,
	    .renew_ctx = h,
	    .preempted = lease_preempted,
	    .preempt_ctx = h,
	};
	/* names granted by re-entrance: their holder's leases are watched too */
	struct rewatch *w = &rewatch;
	int watched =
	    rewatch_start(w, re, o->prefix, o->lock.ttl_ms, o->io_timeout_ms, NULL, h->cfg) > 0;
	if (watched)
		rewatch_supervise_beside(w, h, &sa);
	rc = child_supervise(&ch, &sa);
	/* The group is done (or, after a failed supervision, left to the watchdog, which
	 * kills it as its pipe ends): the watchdog goes now, its exit overlapping the
	 * release's round trip rather than trailing rlock's own (issue 40), and it is told
	 * to kill what is left of a group before the release is sent, not after. */
	child_finish(&ch);
	int inherited_gone = rewatch_end(w, !ch.lost) < 0;
	hold_set_status(h, ch.status); /* the command's own, not 79, 81 or 124 */
	/* exit 79: the history's end record says lost too, for each name whose lease was
	 * (the others were held to the end, and released); a loss declared by rlock's clock
	 * that a late renewal then saw through is one all the same, unless it was an
	 * inherited name's (watched) */
	if (ch.lost && hold_set_lost(h, o->on_lost != LOST_IGNORE) == 0 && !watched)
		hold_set_all_lost(h, o->on_lost != LOST_IGNORE);
	/* Stopped for a --preempt request: the release hands the lock to it (its end record
	 * preempted) while the request lives, which only the release can tell. */
	char who[300];
	int asked = ch.lost && hold_preempted(h, who, sizeof who);
	if (asked)
		hold_set_preempted(h);
	if (rc == 0 && !asked && o->lock.once_per_ms > 0)
		hold_mark_done(h); /* success only: a failed run leaves the next one to retry */
	/* The command is gone: a terminating signal now ends the release's WAITs at once
	 * (never the release), said on its line; rlock dies of it below. */
	hold_release_interruptible(h, termfd);
	/* released: a Ctrl-Z since then stops rlock now, not after the release's WAIT
	 * (continued, it waits on) */
	hold_on_sent(h, unlisten_stop, &ch);
	int released = hold_release(h, o->min_hold_ms - (clock_ms() - started));
	child_unlisten_stop(&ch); /* done already by hold_on_sent's call: a no-op then */
	if (asked) {
		rc = preempted(h, o, who, released, ch.status, ch.timeout_status);
		if (rc == RL_EX_PREEMPTED) /* handed over: else released (or lost) says it */
			events_emit(
			    EV_PREEMPTED,
			    &(struct ev_facts){.reason = h->handed_to[0] ? h->handed_to : who});
	}
	if (released == HOLD_LOST && (!ch.lost || asked)) {
		/* Broken, deleted, expired or flushed while the command ran, and not seen by
		 * a renewal before it ended: mutual exclusion did not hold. */
		/* found so before the lease's end by rlock's clock (the reply came by then),
		 * the server's expiry no sooner: taken away, not expired (the history: lost) */
		char why[sizeof h->gone_why + 8] = ": " HOLD_TAKEN_AWAY;
		if (h->gone_why[0])
			snprintf(why, sizeof why, ": %s", h->gone_why);
		if (o->on_lost == LOST_IGNORE) { /* shown even with -q: the status cannot say it */
			log_error(
			    "lock lost: it was no longer held when the command ended%s; --on-lost "
			    "ignore",
			    why);
		} else {
			log_error("lock lost: it was no longer held when the command ended%s", why);
			rc = RL_EX_LOST;
		}
		char reason[sizeof why + 40];
		log_reason(reason, sizeof reason, "no longer held at the release%s", why);
		events_emit(EV_LOST, &(struct ev_facts){.lock = h->gone, .reason = reason});
	}
	if (inherited_gone && o->on_lost != LOST_IGNORE)
		rc = RL_EX_LOST; /* said by rewatch_end */
	/* A terminating signal that came while rlock released (the command gone: nothing
	 * to forward it to) is not lost: released, rlock dies of it, as before the command
	 * started, so that a calling shell or loop sees the interrupt. Not over a status
	 * of rlock's own (79, 81, 124, 137), nor over the signal the command died of (its
	 * 128+N already). Known before the released line, whose status is the exit status
	 * (128+N), not the command's. */
	int late = rc != RL_EX_LOST && rc != RL_EX_PREEMPTED && !ch.timed_out && !ch.term_sig
	               ? ch.late_sig           ? ch.late_sig
	                 : hold_interrupted(h) ? hold_interrupted(h)
	                                       : late_signal(sigfd)
	               : 0;
	events_emit(
	    EV_RELEASED,
	    &(struct ev_facts){.status = late ? 128 + late : rc,
	                       .reason = released == HOLD_ERR ? HOLD_RELEASE_FAILED_REASON : NULL});
	/* What stderr could not take (log_defer), written now; a terminating signal ends
	 * that wait (dropping what nobody read) and is died of below. */
	int cut = log_flush_until(hold_interrupted(h) || late ? -1 : termfd);
	if (rc != RL_EX_LOST && rc != RL_EX_PREEMPTED && ch.term_sig)
		child_die_of(ch.term_sig); /* so a calling shell or loop sees the interrupt */
	/* one that ended the flush's wait, past the line (no read else: issue 40) */
	if (cut && !late && rc != RL_EX_LOST && rc != RL_EX_PREEMPTED && !ch.timed_out)
		late = late_signal(sigfd);
	if (late)
		child_die_of(late);
	return rc;
}

/* The command's watchdog, started during the acquire's round trip (store_while_waiting): a
 * failure is child_spawn's to retry and report. */
static void watchdog_ahead(void)
{
	(void)child_watchdog_ahead();
}

static void held_plan_of(const struct opts *o)
{
	struct report_ask ra;

	report_ask_from_opts(&ra, o);
	held_plan(&ra);
}

static struct store_config *store_configure_from_opts(const struct opts *o)
{
	struct store_ask ask;

	store_ask_from_opts(&ask, o);
	return store_configure(&ask);
}

/* --check: every node behind the seam, read-only; then stdout flushed (74 if not). */
static int check(struct store_config *cfg, const struct opts *o, int termfd)
{
	struct check_ask ca;

	check_ask_from_opts(&ca, o);
	store_look_once(1); /* one look, as every operator's command (open_store) */
	int rc = check_run(cfg, &ca);
	int wrc = cli_close_stdout();
	die_if_signalled(termfd);
	return wrc ? wrc : rc;
}

_Static_assert(OPTS_NAMES_MAX <= HOLD_LOCKS_MAX, "a hold holds every name -k may give");

int main(int argc, char **argv)
{
	static struct opts o; /* zero, as cli_parse wants it */
	static struct hold hold;
	static struct reenter re;
	struct store_config *cfg;
	struct lock_ask req; /* every lock's request, built once here */
	struct store *c = NULL;
	sigset_t orig;
	int sigfd, termfd, rc;

	child_inherit(); /* before anything can write a diagnostic or fork */
	if (child_std_closed())
		cli_open_std_fds(); /* an open and a close of /dev/null spared otherwise */
	/* A run's lines never wait on a full stderr (a pipe nobody reads): from its first
	 * (-v's, while the options are read) a write would keep a waiter from its lock, and
	 * from its SIGTERM once signals are read from a signalfd. They wait (log_defer), as
	 * once a lock is held; a death by a signal drops what stderr does not take at once.
	 * The other modes write as a plain write does. */
	log_defer(1);
	cli_parse(argc, argv, &o);
	if (o.mode != MODE_RUN)
		log_defer(0);
	struct keeper_args k = keeper_args_of(&o);
	events_of(&o);
	if (o.mode == MODE_HELD)
		held_plan_of(&o); /* checked before any traffic */
	if (o.mode == MODE_ACQUIRE && cli_stdout_closed()) {
		/* Nobody would learn the token: a keeper nobody can release. */
		log_error("--acquire: standard output is closed: nobody would learn the token");
		return RL_EX_IOERR;
	}
	if (o.mode == MODE_ACQUIRE)
		keeper_detach(&k); /* from here on, this process is the keeper */
	if (setup_signals(&sigfd, &termfd, &orig) < 0)
		return RL_EX_OSERR;
	char why[4096 + 700];
	int tls = o.tls.enabled ? store_tls_init(why, sizeof why) : 0;
	if (tls == -1 || tls == -3) {
		log_error("%s", why);
		return tls == -3 ? RL_EX_USAGE : RL_EX_NOINPUT;
	}
	/* No TLS module that loads: this host's installation fault, in every mode (--check
	 * too, which would call the servers unreachable). --release goes on: its connect
	 * fails the same way, but the keeper it asked to stop is stopped all the same. */
	if (tls == -2 && o.mode != MODE_RELEASE) {
		log_error("TLS support is not available: %s", why);
		return RL_EX_OSERR;
	}
	cfg = store_configure_from_opts(&o);
	if (o.mode == MODE_CHECK)
		return check(cfg, &o, termfd);
	rc = open_store(&c, cfg, &o, termfd, why, sizeof why);
	lock_ask_from_opts(&req, &o);
	if (rc != 0 && o.mode == MODE_RELEASE) {
		/* the user asked to release: its keeper stops even so (keeper.c); one line */
		static struct lock l; /* large */
		if (lock_init_ask(&l, &req, o.name) == 0)
			keeper_release_unreached(&l, &k, why);
		else
			log_error("%s", why);
	}
	if (rc == RL_EX_UNAVAILABLE && o.mode == MODE_HELD) {
		/* a keeper's record of its end answers without Redis (report.h) */
		struct report_ask ra;
		report_ask_from_opts(&ra, &o);
		return report_held(NULL, &ra);
	}
	if (rc != 0)
		return rc;
	if (o.mode != MODE_RUN && o.mode != MODE_ACQUIRE)
		return command(c, &o, &req, &k, termfd);
	reenter_plan_names(&re, c, &o, sigfd, termfd, &orig);
	if (o.mode == MODE_RUN)
		store_while_waiting(watchdog_ahead); /* while the acquire's reply is on its way */
	acquire(&hold, c, cfg, &o, &req, termfd);
	store_while_waiting(NULL);
	/* From here on, signals are the supervisor's to forward. */
	store_set_abort_fd(-1);
	if (o.mode == MODE_ACQUIRE) {
		close(termfd);
		return keeper_hold(&hold, sigfd, &k);
	}
	/* termfd stays open (close-on-exec): it ends the release's waits (run) */
	return run(&hold, &o, &re, sigfd, termfd, &orig);
}
