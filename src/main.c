/* SPDX-License-Identifier: MIT */
/* rlock: run a command while holding a lock in Redis.
 * The story: options → connect → acquire (or wait) → run → release → exit. */
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "cli.h"
#include "exitcodes.h"
#include "keeper.h"
#include "lock.h"
#include "log.h"
#include "multi.h"
#include "reenter.h"
#include "renew.h"
#include "report.h"
#include "store.h"
#include "wait.h"

static void describe_command(char *buf, size_t n, const struct opts *o)
{
	size_t used = 0;

	buf[0] = '\0';
	if (o->mode == MODE_ACQUIRE) {
		snprintf(buf, n, "%s", KEEPER_CMD);
		return;
	}
	if (o->shell_command) {
		snprintf(buf, n, "%s", o->shell_command);
		return;
	}
	for (char **a = o->argv; *a && used + 1 < n; a++) {
		int w = snprintf(buf + used, n - used, "%s%s", used ? " " : "", *a);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* Environment of the command: the user's own, untouched (as flock and timeout pass
 * it), plus the lock's details (reenter_environment: the locks it runs under, inherited
 * or taken here) and the lease length of those taken here. A secret rlock read from a
 * file or the config is never added. */
static void child_environment(const struct reenter *r, const struct lock *l,
                              const struct multi *more)
{
	char v[32];

	reenter_environment(r, l, more);
	snprintf(v, sizeof v, "%lld", (long long)l->ttl_ms);
	setenv("RLOCK_TTL_MS", v, 1);
}

/* A nested rlock whose process tree already holds every name it asks for (in a mode at
 * least as strong) runs the command directly instead of deadlocking against its
 * ancestor; with only some of them, o keeps the names left to take (reenter.h). */
static void reenter_if_holder(struct reenter *r, struct store *s, struct opts *o,
                              const sigset_t *orig)
{
	if (reenter_plan(r, s, o) > 0)
		return;
	log_info("every lock asked for is already held by this process tree: running the "
	         "command directly");
	store_close(s);
	reenter_environment(r, NULL, NULL);
	child_exec(o->argv, o->shell_command, orig);
	log_error("%s: %s", o->shell_command ? "/bin/sh" : o->argv[0],
	          errno == ENOENT ? "command not found" : strerror(errno));
	exit(errno == ENOENT ? RL_EX_NOTFOUND : RL_EX_NOEXEC);
}

static int init_lock(struct lock *l, const struct opts *o)
{
	if (lock_init(l, o->prefix, o->name ? o->name : "", o->ttl_ms) < 0) {
		log_error("no randomness for the lock token: %s", strerror(errno));
		return -1;
	}
	lock_set_mode(l,
	              o->kind == KIND_SHARED  ? LOCK_SHARED
	              : o->kind == KIND_LIMIT ? LOCK_LIMIT
	                                      : LOCK_EXCLUSIVE,
	              o->limit, o->fair, o->wait_ms == 0);
	return 0;
}

static int busy(const struct opts *o, const struct holder *h)
{
	/* -E 0 skips silently; -v still says so. */
	char pid[32] = "";

	if (h->pid >= 0)
		snprintf(pid, sizeof pid, " pid %lld", h->pid);
	log_msg(o->conflict_exit != 0 ? LOG_WARN : LOG_INFO, "lock '%s' is busy%s%s%s%s%s%s%s%s",
	        o->name, h->host[0] ? ": held by " : "", h->host, pid, h->label[0] ? " [" : "",
	        h->label, h->label[0] ? "]" : "", o->wait_ms > 0 ? " (gave up waiting)" : "",
	        o->conflict_exit == 0 ? "; skipped (-E 0)" : "");
	return o->conflict_exit;
}

/* The holder's user name, for --status: $USER, as login, su, sudo and cron set it,
 * when rlock runs with its real uid (not set-uid), so that the common case needs no
 * look-up in NSS (nscd, nsswitch.conf, /etc/passwd: 9 system calls and a tenth of
 * rlock's own instructions); else, or when it is not a plain name, the account name of
 * the effective uid. Informational, as the host and pid are: not a credential. */
static const char *user_name(void)
{
	const char *u = getenv("USER");
	size_t n = u ? strlen(u) : 0;
	int plain = n > 0 && n < 64 && getuid() == geteuid();

	for (size_t i = 0; plain && i < n; i++)
		plain = u[i] > ' ' && u[i] < 0x7f;
	if (plain)
		return u;
	struct passwd *pw = getpwuid(geteuid());
	return pw ? pw->pw_name : u ? u : "";
}

/* Release (the store retries once on a fresh connection); nothing after lease_end
 * (the lease cannot outlive it on the server, so a release that late is not needed: at
 * worst the lock expires by its TTL). Returns LOCK_OK, LOCK_NOTOURS (the lock was no
 * longer ours) or LOCK_ERR. */
static int release(struct store *s, const struct lock *l, int64_t keep_ms, int64_t lease_end)
{
	char err[300] = "";
	int rc;

	if (clock_ms() >= lease_end) {
		log_debug("the lease is over (lost): nothing to release");
		return LOCK_ERR;
	}
	rc = store_release(s, l, keep_ms, lease_end, err, sizeof err);
	if (rc != LOCK_OK && rc != LOCK_NOTOURS) {
		if (clock_ms() >= lease_end)
			snprintf(err, sizeof err, "the lease ended meanwhile");
		log_warn("cannot release the lock (%s); it expires by its TTL", err);
		rc = LOCK_ERR;
	} else if (rc == LOCK_OK && keep_ms > 0) {
		log_info("released %s; --min-hold keeps it %.1f s more", l->key,
		         (double)keep_ms / 1000);
	} else if (rc == LOCK_OK) {
		log_info("released %s", l->key);
	}
	return rc;
}

/* Before the command starts: a terminating signal that cut a wait short ends rlock
 * as that signal would have. */
static void die_if_signalled(int termfd)
{
	struct signalfd_siginfo si;

	if (read(termfd, &si, sizeof si) == (ssize_t)sizeof si)
		child_die_of((int)si.ssi_signo);
}

/* The lease as the supervisor sees it: the first lock's, renewed by its thread, and
 * with several -k the oldest of every lock's (the loss of one is the loss of all). */
struct lease {
	struct renew *rn;
	struct multi *more;
	int64_t loss_after_ms;
};

static int64_t lease_sent(const void *ctx)
{
	const struct lease *s = ctx;
	return multi_confirmed_sent(s->more, renew_confirmed_sent(s->rn));
}

static void lease_lost(const void *ctx, int timed_out, char *buf, size_t n)
{
	const struct lease *s = ctx;

	if (!multi_lost_reason(s->more, timed_out, s->loss_after_ms, buf, n))
		renew_reason(s->rn, timed_out, buf, n);
}

/* Before the command ran (it could not start, or not every lock was taken): stop the
 * renewals and give every lock back. */
static void give_back_all(struct store *c, const struct store_config *cfg, const struct lock *l,
                          struct lease *ls, int64_t sent)
{
	int64_t confirmed = sent;

	multi_release(ls->more, cfg, 0, c);
	struct store *live = renew_stop(ls->rn, &confirmed);
	release(live ? live : c, l, 0, confirmed + l->ttl_ms);
	store_close(live);
	store_close(c);
}

int main(int argc, char **argv)
{
	static struct opts o; /* zero, as cli_parse wants it */
	struct store_config cfg;
	struct store *c = NULL;
	struct lock l;
	struct holder h;
	sigset_t orig;
	char err[512], cmdline[512], host[256] = "";
	int signo = 0, rc;

	cli_open_std_fds();
	cli_parse(argc, argv, &o);
	if (o.mode == MODE_ACQUIRE)
		keeper_detach(&o); /* from here on, this process is the keeper */
	int sigfd = child_signals_block(&orig);
	if (sigfd < 0) {
		log_error("cannot set up signal handling: %s", strerror(errno));
		return RL_EX_OSERR;
	}
	/* Until the command starts, every wait (lookup, connect, reply, sleep) ends at once
	 * on a terminating signal: rlock then gives back what it may hold and dies of it. */
	int termfd = child_term_fd();
	if (termfd < 0) {
		log_error("cannot set up signal handling: %s", strerror(errno));
		return RL_EX_OSERR;
	}
	conn_set_abort_fd(termfd);
	if (o.tls.enabled)
		conn_tls_init();
	store_config_from_opts(&cfg, &o);
	if (init_lock(&l, &o) < 0)
		return RL_EX_OSERR;
	/* The password stays in memory while connections may need reopening (renewal,
	 * waiting, release); it is wiped at exit. */
	/* The name is looked up once, here: later connects (renewal, waiting, release)
	 * reuse its addresses and never wait on a resolver. */
	rc = store_resolve(&cfg, clock_ms() + o.connect_timeout_ms, err, sizeof err);
	if (rc == STORE_OK)
		rc = store_open(&c, &cfg, 1, STORE_NO_CAP, err, sizeof err);
	if (rc != STORE_OK) {
		die_if_signalled(termfd);
		log_error("%s", err);
		return rc == STORE_USAGE ? RL_EX_USAGE : RL_EX_UNAVAILABLE;
	}
	if (o.mode != MODE_RUN && o.mode != MODE_ACQUIRE) {
		rc = o.mode == MODE_STATUS    ? report_status(c, &o)
		     : o.mode == MODE_BREAK   ? report_break(c, &o)
		     : o.mode == MODE_RELEASE ? keeper_release(c, &l, &o)
		                              : report_list(c, &o);
		die_if_signalled(termfd);
		return rc;
	}

	static struct reenter re;
	if (o.mode == MODE_ACQUIRE)
		reenter_plan(&re, c, &o); /* refuses (64) what would wait for an ancestor */
	if (o.mode == MODE_RUN) {
		reenter_if_holder(&re, c, &o, &orig);
		/* Only the names left to take: the first may be another one now. */
		if (strcmp(o.name, re.names[0]) != 0 && init_lock(&l, &o) < 0) {
			store_close(c);
			return RL_EX_OSERR;
		}
	}
	gethostname(host, sizeof host - 1);
	describe_command(cmdline, sizeof cmdline, &o);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct lock_meta meta = {host,
	                         user_name(),
	                         cmdline,
	                         (long)getpid(),
	                         (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000,
	                         o.label};
	struct wait_args wa = {&l,
	                       &meta,
	                       o.name,
	                       o.wait_ms,
	                       o.io_timeout_ms,
	                       termfd,
	                       isatty(STDERR_FILENO) && o.verbose >= 0};
	int64_t sent, asked = clock_ms();
	switch (wait_acquire(c, &wa, &sent, &h, &signo, err, sizeof err)) {
	case WAIT_ACQUIRED:
		break;
	case WAIT_BUSY:
		store_close(c);
		return busy(&o, &h);
	case WAIT_SIGNAL:
		store_close(c);
		child_die_of(signo);
	case WAIT_MISMATCH:
		/* Holders that disagree on the kind of lock or on N: a usage error. */
		log_error("lock '%s': %s", o.name, err);
		store_close(c);
		return RL_EX_USAGE;
	default:
		log_error("%s", err);
		store_close(c);
		return RL_EX_UNAVAILABLE;
	}
	/* As flock -v: how long getting the lock took. */
	log_info("got the lock %s after %.1f s (fence %lld, ttl %lld ms)", l.key,
	         (double)(clock_ms() - asked) / 1000, l.fence, (long long)l.ttl_ms);
	rc = wait_ready(c, &wa, sent, o.wait_replicas, &signo, err, sizeof err);
	if (rc != WAIT_ACQUIRED) {
		store_close(c);
		if (rc == WAIT_SIGNAL)
			child_die_of(signo);
		log_error("%s", err);
		return RL_EX_UNAVAILABLE;
	}
	if (o.mode == MODE_ACQUIRE) {
		conn_set_abort_fd(-1);
		close(termfd);
		return keeper_hold(c, &cfg, &l, sent, sigfd, &o);
	}
	char warn_key[300];
	snprintf(warn_key, sizeof warn_key, "%.200seviction-warned", o.prefix);
	struct multi more;
	struct lease ls = {NULL, &more, l.ttl_ms * RENEW_LOSS_NUM / RENEW_LOSS_DEN};
	/* -v looks at the eviction policy at once; otherwise at the first renewal, so a
	 * short command costs no second connection and no INFO. */
	if (renew_start(&ls.rn, &cfg, &l, sent, o.eviction_warning ? warn_key : NULL, o.verbose > 0,
	                err, sizeof err) < 0) {
		log_error("%s", err);
		release(c, &l, 0, sent + l.ttl_ms);
		store_close(c);
		return RL_EX_OSERR;
	}
	/* Several -k: the others, in order, each renewed from the moment it is taken. */
	rc = multi_acquire(&more, c, &cfg, &o, &meta, termfd, asked, &h, &signo, err, sizeof err);
	int lost_fd = rc == WAIT_ACQUIRED ? multi_lost_fd(&more, renew_fd(ls.rn)) : -1;
	struct pollfd lp = {.fd = lost_fd, .events = POLLIN};
	if (rc == WAIT_ACQUIRED && lost_fd < 0) {
		/* No way to hear of a loss: the command would run unwatched. */
		snprintf(err, sizeof err, "cannot watch the locks for a loss: %s", strerror(errno));
		rc = WAIT_OSERR;
	} else if (rc == WAIT_ACQUIRED &&
	           (poll(&lp, 1, 0) != 0 || clock_ms() >= lease_sent(&ls) + ls.loss_after_ms)) {
		snprintf(err, sizeof err, "a lock was lost while waiting for the others");
		rc = WAIT_ERR;
	}
	if (rc != WAIT_ACQUIRED) {
		give_back_all(c, &cfg, &l, &ls, sent);
		if (rc == WAIT_SIGNAL)
			child_die_of(signo);
		if (rc == WAIT_BUSY)
			return busy(&o, &h);
		log_error("%s", err);
		return rc == WAIT_OSERR ? RL_EX_OSERR : RL_EX_UNAVAILABLE;
	}
	/* From here on, signals are the supervisor's to forward. */
	conn_set_abort_fd(-1);
	close(termfd);

	child_environment(&re, &l, &more);
	struct child ch;
	int64_t started = clock_ms();
	int64_t kill_by_ms = l.ttl_ms * RENEW_KILL_NUM / RENEW_KILL_DEN;
	rc = child_spawn(&ch, o.argv, o.shell_command, &orig,
	                 o.on_lost == LOST_IGNORE ? -1 : lease_sent(&ls) + kill_by_ms);
	if (rc != 0) {
		give_back_all(c, &cfg, &l, &ls, sent);
		return rc;
	}
	struct supervise_args sa = {
	    .sigfd = sigfd,
	    .lost_fd = lost_fd,
	    .confirmed_sent = lease_sent,
	    .lost_reason = lease_lost,
	    .ctx = &ls,
	    .loss_after_ms = ls.loss_after_ms,
	    .kill_by_ms = kill_by_ms,
	    .action = o.on_lost == LOST_IGNORE ? ACT_IGNORE : ACT_SIGNAL,
	    .lost_signal = o.lost_signal,
	    .kill_after_ms = o.kill_after_ms,
	    .stop_at = o.max_hold_ms > 0 ? started + o.max_hold_ms : -1,
	};
	rc = child_supervise(&ch, &sa);
	int more_lost = multi_release(&more, &cfg, o.min_hold_ms - (clock_ms() - started), c);
	/* Release on the renewal thread's store if it renewed: the main one then sat idle
	 * for longer than ttl/3, and a NAT or firewall may have dropped it silently. */
	int64_t confirmed = sent;
	struct store *live = NULL;
	/* A command shorter than ttl/3: the thread never touched the network; it is not
	 * waited for (its wake-up stays off the release path) and ends with rlock. */
	if (!renew_quiet(ls.rn))
		live = renew_stop(ls.rn, &confirmed);
	if (live) {
		store_close(c);
		c = live;
	}
	if ((release(c, &l, o.min_hold_ms - (clock_ms() - started), confirmed + l.ttl_ms) ==
	         LOCK_NOTOURS ||
	     more_lost) &&
	    !ch.lost) {
		/* Broken, deleted, expired or flushed while the command ran, and not seen by
		 * a renewal before it ended: mutual exclusion did not hold. */
		if (o.on_lost == LOST_IGNORE) {
			log_warn(
			    "lock lost: it was no longer held when the command ended (expired, "
			    "broken or taken over while it ran); --on-lost ignore");
		} else {
			log_error("lock lost: it was no longer held when the command ended "
			          "(expired, broken or taken over while it ran)");
			rc = RL_EX_LOST;
		}
	}
	child_finish(&ch);
	store_close(c);
	if (rc != RL_EX_LOST && ch.term_sig)
		child_die_of(ch.term_sig); /* so a calling shell or loop sees the interrupt */
	return rc;
}
