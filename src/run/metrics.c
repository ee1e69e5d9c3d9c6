/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "exitcodes.h"
#include "log.h"
#include "userfile.h"

/* What is read back: more is refused (a warning, nothing written), never cut. 64 MiB
 * is some 500,000 samples, about 40,000 lock names on one host. */
#define FILE_MAX     (64 << 20)
#define LOCK_WAIT_MS 2000 /* for the sidecar lock: other writers hold it for a moment */
#define LABELS_MAX   (LOCK_NAME_MAX * 2 + 64)

/* The families, in the order written. */
enum fam {
	F_WAIT,
	F_HOLD,
	F_EXIT,
	F_OUTCOME,
	F_RUNNING,
	F_LAST_RUN,
	F_LAST_SUCCESS,
	F_RENEWALS,
	F_FAILURES,
	F_N
};

static const struct {
	const char *name, *type, *help;
} fams[F_N] = {
    [F_WAIT] = {"rlock_wait_seconds", "gauge", "Seconds the last run waited for the lock."},
    [F_HOLD] = {"rlock_hold_seconds", "gauge", "Seconds the last run held the lock."},
    [F_EXIT] = {"rlock_exit_code", "gauge", "Exit status of the last run."},
    [F_OUTCOME] = {"rlock_outcome", "gauge",
                   "Outcome of the last run: 1 for the one it had (ran, busy, lost, "
                   "unavailable)."},
    [F_RUNNING] = {"rlock_running", "gauge", "1 while a run holds the lock."},
    [F_LAST_RUN] = {"rlock_last_run_timestamp_seconds", "gauge",
                    "When the last run ended (or acquired the lock), Unix time."},
    [F_LAST_SUCCESS] = {"rlock_last_success_timestamp_seconds", "gauge",
                        "When the last run that exited 0 ended, Unix time."},
    [F_RENEWALS] = {"rlock_renewals_total", "counter", "Lease renewals confirmed."},
    [F_FAILURES] = {"rlock_renewal_failures_total", "counter",
                    "Lease renewal attempts that failed."},
};

enum outcome { O_RAN, O_BUSY, O_LOST, O_UNAVAILABLE, O_N, O_RUNNING = O_N };
static const char *const outcome_names[O_N] = {"ran", "busy", "lost", "unavailable"};

struct sample {
	enum fam fam;
	char *labels; /* between the braces, as written */
	char value[40];
	int replaced; /* an old sample this write replaces */
};

static struct {
	int on;
	char path[4096];
	const char *const *names;
	int nnames;
	int conflict_exit;
	int64_t wait_ms;
	int wrote_end;
	int warned;
} m;

static atomic_llong renewals, failures;

int metrics_setup(const struct events_config *c, const char *abs_path, char *err, size_t errlen)
{
	if (!c->metrics_path)
		return 0;
	if (!c->metrics_path[0] || !strcmp(c->metrics_path, "-") || !abs_path ||
	    snprintf(m.path, sizeof m.path - 16, "%s", abs_path) >= (int)sizeof m.path - 16) {
		snprintf(err, errlen, "--metrics-file: '%s': not a usable path", c->metrics_path);
		return -1;
	}
	m.names = c->names;
	m.nnames = c->nnames;
	m.conflict_exit = c->conflict_exit;
	m.wait_ms = -1;
	m.on = 1;
	return 0;
}

void metrics_count_renewal(int ok)
{
	atomic_fetch_add_explicit(ok ? &renewals : &failures, 1, memory_order_relaxed);
}

static void warn_once(const char *what, const char *why)
{
	if (m.warned++)
		return;
	log_warn("cannot write the metrics file '%s' (%s: %s): the job goes on without it", m.path,
	         what, why);
}

/* A label value as the text format escapes it: \\, \" and \n. */
static void escape_label(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < n; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n')
			dst[o++] = '\\';
		dst[o++] = *s == '\n' ? 'n' : *s;
	}
	dst[o] = '\0';
}

/* ---- reading the file back ---------------------------------------------------- */

/* One sample line "name{labels} value" (or "name value") into *s, in place. */
static int parse_line(char *line, struct sample *s)
{
	size_t len = strcspn(line, "{ ");
	char *rest = line + len;

	s->fam = F_N;
	for (int f = 0; f < F_N; f++)
		if (strlen(fams[f].name) == len && !strncmp(line, fams[f].name, len))
			s->fam = (enum fam)f;
	if (s->fam == F_N)
		return -1; /* not ours (or from a later version): dropped */
	s->labels = rest;
	if (*rest == '{') {
		int quoted = 0;
		for (rest++; *rest && (quoted || *rest != '}'); rest++) {
			if (*rest == '\\' && quoted && rest[1])
				rest++;
			else if (*rest == '"')
				quoted = !quoted;
		}
		if (*rest != '}')
			return -1;
		*rest++ = '\0';
		s->labels++;
	} else {
		*rest = '\0';
		rest++;
	}
	rest += strspn(rest, " ");
	char *end;
	strtod(rest, &end);
	if (end == rest || (*end && *end != ' ') || strlen(rest) >= sizeof s->value)
		return -1; /* not a value: dropped, not passed on */
	snprintf(s->value, sizeof s->value, "%s", rest);
	s->replaced = 0;
	return 0;
}

/* A line rlock writes, or may have written: a comment of one of its families' HELP or
 * TYPE, or nothing. */
static int own_comment(const char *line)
{
	return !line[0] || !strncmp(line, "# HELP rlock_", 13) ||
	       !strncmp(line, "# TYPE rlock_", 13);
}

/* The samples of the file as it is (none when it does not exist yet), every one of
 * them: a file that is not all rlock's (a line of another kind, a family of another
 * version) or larger than FILE_MAX is not rewritten (-1, errno and *why say why), so
 * that nothing in it is dropped. buf is kept for their labels; the caller frees both.
 * -1 on an error reading it. */
static int read_old(int fd, char **buf, struct sample **out, int *n, const char **why)
{
	struct stat st;
	char owner[120];

	*buf = NULL;
	*out = NULL;
	*n = 0;
	*why = NULL;
	if (fd < 0 && errno == ELOOP)
		*why = "it is a symbolic link (rlock replaces only the file named)";
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		return errno = EINVAL, -1;
	}
	if (userfile_owned(&st, owner, sizeof owner) < 0) {
		*why = "it belongs to another user";
		return -1;
	}
	if (st.st_size > FILE_MAX) {
		*why = "larger than 64 MiB: not read back, so not rewritten";
		return errno = EFBIG, -1;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf)
		return -1;
	ssize_t got = 0, r = 1;
	while (got < st.st_size && (r = read(fd, *buf + got, (size_t)(st.st_size - got))) > 0)
		got += r;
	if (r < 0)
		return -1;
	(*buf)[got] = '\0';
	size_t cap = 0;
	for (char *line = *buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (line[0] == '#' || !line[0]) {
			if (own_comment(line))
				continue;
		} else {
			if ((size_t)*n == cap) {
				size_t more = cap ? cap * 2 : 256;
				struct sample *grown = realloc(*out, more * sizeof **out);
				if (!grown)
					return -1;
				*out = grown;
				cap = more;
			}
			if (parse_line(line, &(*out)[*n]) == 0) {
				(*n)++;
				continue;
			}
		}
		*why = "it holds lines that are not rlock's metrics (or are another version's): "
		       "not rewritten";
		return errno = EINVAL, -1;
	}
	return 0;
}

/* ---- this run's samples --------------------------------------------------------- */

struct run_state {
	enum outcome outcome; /* O_RUNNING: written at the acquire */
	int exit_code;
	double wait_s, hold_s, now_s; /* wait_s, hold_s < 0: unknown, the file's kept */
	long long renewals, failures;
};

struct new_sample {
	enum fam fam;
	char labels[LABELS_MAX];
	char value[40];
};

/* v with prec decimals (0: an integer). */
static int add(struct new_sample *ns, int n, enum fam f, const char *key, const char *outcome,
               int prec, double v)
{
	ns[n].fam = f;
	if (outcome)
		snprintf(ns[n].labels, sizeof ns[n].labels, "key=\"%s\",outcome=\"%s\"", key,
		         outcome);
	else
		snprintf(ns[n].labels, sizeof ns[n].labels, "key=\"%s\"", key);
	snprintf(ns[n].value, sizeof ns[n].value, "%.*f", prec, v);
	return n + 1;
}

/* The series of one name; a counter adds to the value found in old. */
static int series_of(struct new_sample *ns, int n, const char *name, const struct run_state *r)
{
	char key[LOCK_NAME_MAX * 2 + 1];

	escape_label(key, sizeof key, name);
	if (r->wait_s >= 0)
		n = add(ns, n, F_WAIT, key, NULL, 3, r->wait_s);
	n = add(ns, n, F_RUNNING, key, NULL, 0, r->outcome == O_RUNNING);
	n = add(ns, n, F_LAST_RUN, key, NULL, 3, r->now_s);
	if (r->outcome == O_RUNNING)
		return n;
	if (r->hold_s >= 0)
		n = add(ns, n, F_HOLD, key, NULL, 3, r->hold_s);
	n = add(ns, n, F_EXIT, key, NULL, 0, r->exit_code);
	for (int o = 0; o < O_N; o++)
		n = add(ns, n, F_OUTCOME, key, outcome_names[o], 0, o == (int)r->outcome);
	if (r->outcome == O_RAN && r->exit_code == 0)
		n = add(ns, n, F_LAST_SUCCESS, key, NULL, 3, r->now_s);
	n = add(ns, n, F_RENEWALS, key, NULL, 0, (double)r->renewals);
	n = add(ns, n, F_FAILURES, key, NULL, 0, (double)r->failures);
	return n;
}

/* Mark the old samples the new ones replace; a counter's new value adds the old one. */
static void merge(struct sample *old, int nold, struct new_sample *ns, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nold; j++) {
			if (old[j].fam != ns[i].fam || strcmp(old[j].labels, ns[i].labels))
				continue;
			old[j].replaced = 1;
			if (fams[ns[i].fam].type[0] == 'c')
				snprintf(ns[i].value, sizeof ns[i].value, "%lld",
				         atoll(ns[i].value) + atoll(old[j].value));
		}
}

static int write_all(FILE *f, const struct sample *old, int nold, const struct new_sample *ns,
                     int n)
{
	for (int fam = 0; fam < F_N; fam++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fams[fam].name, fams[fam].help,
		        fams[fam].name, fams[fam].type);
		for (int j = 0; j < nold; j++)
			if (old[j].fam == (enum fam)fam && !old[j].replaced)
				fprintf(f, "%s{%s} %s\n", fams[fam].name, old[j].labels,
				        old[j].value);
		for (int i = 0; i < n; i++)
			if (ns[i].fam == (enum fam)fam)
				fprintf(f, "%s{%s} %s\n", fams[fam].name, ns[i].labels,
				        ns[i].value);
	}
	return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* Write a temporary file beside the real one and rename it over it. */
static int replace_file(const struct sample *old, int nold, const struct new_sample *ns, int n)
{
	char tmp[sizeof m.path + 32];

	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", m.path, (long)getpid());
	unlink(tmp); /* left by a process of the same pid that died mid-write */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		warn_once("create a temporary file", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = write_all(f, old, nold, ns, n);
	int e = errno;
	if (fclose(f) != 0 && rc == 0) {
		rc = -1;
		e = errno;
	}
	if (rc == 0 && rename(tmp, m.path) < 0) {
		rc = -1;
		e = errno;
	}
	if (rc < 0) {
		unlink(tmp);
		warn_once("write", strerror(e));
	}
	return rc;
}

/* The sidecar lock: several jobs writing one file do not lose each other's series.
 * Bounded: a writer holds it for the moment of one read-merge-rename. */
static int lock_sidecar(void)
{
	char path[sizeof m.path + 8];

	snprintf(path, sizeof path, "%s.lock", m.path);
	char why[300];
	int fd = userfile_append(path, UF_REG, 0644, why, sizeof why);
	if (fd < 0) {
		warn_once("open its lock file", why);
		return -1;
	}
	for (int64_t until = clock_ms() + LOCK_WAIT_MS; flock(fd, LOCK_EX | LOCK_NB) < 0;) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || clock_ms() >= until) {
			warn_once("lock it",
			          errno == EWOULDBLOCK ? "held too long" : strerror(errno));
			close(fd);
			return -1;
		}
		usleep(5000);
	}
	return fd;
}

static void write_metrics(const struct run_state *r)
{
	static struct new_sample ns[16 * (F_N + O_N)];
	struct sample *old;
	char *buf;
	int nold, n = 0;

	int lk = lock_sidecar();
	if (lk < 0)
		return;
	/* O_NONBLOCK: a FIFO is refused, not waited on; O_NOFOLLOW: a link is refused. */
	int fd = open(m.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
	const char *why;
	if (read_old(fd, &buf, &old, &nold, &why) < 0) {
		warn_once("read it back", why ? why : strerror(errno));
	} else {
		for (int i = 0; i < m.nnames && i < 16; i++)
			n = series_of(ns, n, m.names[i], r);
		merge(old, nold, ns, n);
		replace_file(old, nold, ns, n);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	free(old);
	close(lk); /* unlocks */
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000000) / 1000;
}

/* The outcome an event ends the run with, or -1 when it does not end it. */
static int ending(enum ev_kind kind, const struct ev_facts *f, int lost, int *code)
{
	switch (kind) {
	case EV_BUSY:
		*code = m.conflict_exit;
		return O_BUSY;
	case EV_SUPERSEDED:
		*code = f->status;
		return O_BUSY;
	case EV_UNAVAILABLE:
	case EV_FAILED: /* not acquired, not busy: as a usage error at connect always was */
		*code = f->status;
		return O_UNAVAILABLE;
	case EV_KEEPER_RELEASED:
		*code = f->status;
		if (f->given_back)
			return O_UNAVAILABLE; /* as failed: nothing ran under the lock */
		return lost || f->status == RL_EX_LOST ? O_LOST : O_RAN;
	case EV_KEEPER_LOST:
		*code = RL_EX_LOST;
		return O_LOST;
	case EV_KEEPER_STOPPED:
		*code = 0;
		return O_RAN;
	case EV_RELEASED:
		*code = f->status;
		return lost || f->status == RL_EX_LOST ? O_LOST : O_RAN;
	default:
		return -1;
	}
}

void metrics_note(enum ev_kind kind, const struct ev_facts *f, int64_t hold_ms, int lost)
{
	if (!m.on || m.wrote_end)
		return;
	/* a --release killed before its release (failed, 128+N): the keeper holds on, its
	 * run's series (running 1) stay as the keeper wrote them */
	if (f->elsewhere && kind == EV_FAILED && f->status > 128)
		return;
	struct run_state r = {.outcome = O_RUNNING, .now_s = now_s()};
	int first = kind == EV_ACQUIRED && m.wait_ms < 0;

	if (kind == EV_ACQUIRED || kind == EV_BUSY)
		m.wait_ms = f->wait_ms;
	int o = ending(kind, f, lost, &r.exit_code);
	if (o < 0 && !first)
		return;
	if (o >= 0) {
		r.outcome = (enum outcome)o;
		m.wrote_end = 1;
		r.hold_s = kind == EV_BUSY || kind == EV_UNAVAILABLE || kind == EV_SUPERSEDED ||
		                   kind == EV_FAILED || f->given_back
		               ? 0
		               : (double)hold_ms / 1000;
	}
	r.wait_s = m.wait_ms < 0 ? 0 : (double)m.wait_ms / 1000;
	/* --release ending a keeper's run (keeper-released, keeper-lost: elsewhere): the
	 * keeper wrote the run's wait and hold, which it alone knows; they stay (they read 0
	 * after every --release) */
	if (f->elsewhere)
		r.wait_s = r.hold_s = -1;
	r.renewals = atomic_load(&renewals);
	r.failures = atomic_load(&failures);
	write_metrics(&r);
}
