/* SPDX-License-Identifier: MIT */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "userfile.h"

#define EVENTS_SCHEMA 1
#define TOKEN_SHOWN   8 /* the token's prefix in a line: enough to match, not to use */

static const char *const kind_names[] = {
    [EV_WAITING] = "waiting",
    [EV_ACQUIRED] = "acquired",
    [EV_BUSY] = "busy",
    [EV_UNAVAILABLE] = "unavailable",
    [EV_RENEWED] = "renewed",
    [EV_RENEW_FAILED] = "renew-failed",
    [EV_WARNED] = "warned",
    [EV_LOST] = "lost",
    [EV_RELEASED] = "released",
    [EV_KEEPER_STARTED] = "keeper-started",
    [EV_KEEPER_LOST] = "keeper-lost",
    [EV_KEEPER_STOPPED] = "keeper-stopped",
    [EV_KEEPER_RELEASED] = "keeper-released",
    [EV_SUPERSEDED] = "superseded",
    [EV_PREEMPTED] = "preempted",
    [EV_FAILED] = "failed",
};

/* Set once by events_setup (before threads), read by every thread. */
static struct {
	int on;          /* --events */
	int any;         /* --events or --metrics-file: else events_emit does nothing */
	char path[4096]; /* absolute, or "-" */
	const char *prefix, *name, *label;
	char host[256];
	int fd;
	int rfd; /* the same file read-only (a regular file's), for its last byte */
	pthread_once_t opened;
	atomic_flag warned;
	int conflict_exit; /* -E: a busy run's exit status */
} ev = {.fd = -1, .rfd = -1, .opened = PTHREAD_ONCE_INIT, .warned = ATOMIC_FLAG_INIT};

/* Main thread only (acquired happens before the renewal thread of that lock starts). */
static const struct lock *first_lock;
static int64_t acquired_at = -1;
static int lost;

/* The order of a renewal's failure and the loss (docs/operations.md: renew-failed, then
 * lost): the renewal thread's line and the main thread's are written under one lock, and
 * a renewal's failure learnt after the loss was said is not written (the lost line's
 * reason names the failures known before it: renew.c says its line before it records
 * the error the reason reads). */
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int lost_said; /* under order_mu */

/* The absolute form of path into dst (size n), "-" kept: a keeper changes to "/"
 * before it writes. 0, or -1 (no working directory, too long). */
static int events_absolute(char *dst, size_t n, const char *path)
{
	char cwd[4096];

	if (path[0] == '/' || !strcmp(path, "-"))
		return snprintf(dst, n, "%s", path) < (int)n ? 0 : -1;
	if (!getcwd(cwd, sizeof cwd))
		return -1;
	return snprintf(dst, n, "%s/%s", cwd, path) < (int)n ? 0 : -1;
}

int events_setup(const struct events_config *c, char *err, size_t errlen)
{
	ev.prefix = c->prefix;
	ev.name = c->nnames > 0 ? c->names[0] : "";
	ev.label = c->label;
	ev.conflict_exit = c->conflict_exit;
	gethostname(ev.host, sizeof ev.host - 1);
	if (c->events_path) {
		if (!c->events_path[0] ||
		    events_absolute(ev.path, sizeof ev.path, c->events_path)) {
			snprintf(err, errlen, "--events: '%s': not a usable path", c->events_path);
			return -1;
		}
		ev.on = 1;
	}
	ev.any = ev.on || c->metrics_path;
	char mpath[sizeof ev.path];
	int abs_ok = c->metrics_path && events_absolute(mpath, sizeof mpath, c->metrics_path) == 0;
	return metrics_setup(c, abs_ok ? mpath : NULL, err, errlen);
}

static void warn_once(const char *why)
{
	if (!atomic_flag_test_and_set(&ev.warned))
		log_warn("cannot write the events file '%s' (%s): the job goes on without it",
		         ev.path, why);
}

static void open_file(void)
{
	if (!strcmp(ev.path, "-")) {
		ev.fd = STDERR_FILENO;
		return;
	}
	/* O_NONBLOCK: a FIFO nobody reads must not hold the job up (open or write); a link
	 * planted at the name, a file of another user, a directory: refused (userfile.h). */
	char why[300];
	ev.fd = userfile_append(ev.path, UF_REG | UF_CHR | UF_FIFO, 0644, why, sizeof why);
	if (ev.fd < 0) {
		warn_once(why);
		return;
	}
	/* The file just opened (not its name again), to read: a regular file's last byte. */
	struct stat st;
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", ev.fd);
	if (fstat(ev.fd, &st) == 0 && S_ISREG(st.st_mode))
		ev.rfd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
}

/* Does the file end inside a line: one cut short by a write that failed midway (a full
 * disk), here or in an earlier run? The next line then starts on a line of its own,
 * not glued to that piece and lost with it. */
static int ends_cut(void)
{
	return log_ends_cut(ev.rfd);
}

/* A string field escaped is at most FIELD_MAX bytes (what is cut shows as "..." at its
 * end); the six of a line (name, key, host, token, label, reason) and the rest fit in
 * LINE_MAX: a line is always whole, valid JSON, however long what another wrote. */
#define FIELD_MAX 4096
#define LINE_MAX  (8 * FIELD_MAX)

/* printf at buf + *at (of n bytes), moving *at on; nothing unless all of it fits. */
__attribute__((format(printf, 4, 5))) static void put(char *buf, size_t n, size_t *at,
                                                      const char *fmt, ...)
{
	va_list ap;

	if (*at >= n)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(buf + *at, n - *at, fmt, ap);
	va_end(ap);
	if (w > 0 && (size_t)w < n - *at)
		*at += (size_t)w;
	else
		buf[*at] = '\0';
}

/* Escaped pieces into buf (json_escape), up to limit; the quotes always. */
struct sink {
	char *buf;
	size_t n, *at, limit;
	int opened, full;
};

static void add(struct sink *k, const char *p, size_t len)
{
	if (*k->at + len < k->n) {
		memcpy(k->buf + *k->at, p, len);
		*k->at += len;
	}
}

static void put_piece(void *arg, const char *p, size_t len)
{
	struct sink *k = arg;

	if (len == 1 && *p == '"') { /* the opening or the closing quote (one inside: \") */
		if (k->opened && k->full)
			add(k, "...", 3);
		k->opened = 1;
		add(k, p, len);
		return;
	}
	if (k->full || *k->at + len > k->limit) {
		k->full = 1;
		return;
	}
	add(k, p, len);
}

/* JSON string s (NULL: null) at buf + *at, escaped, at most FIELD_MAX bytes. */
static void put_str(char *buf, size_t n, size_t *at, const char *s)
{
	if (!s) {
		put(buf, n, at, "null");
		return;
	}
	struct sink k = {buf, n, at, *at + FIELD_MAX - 4, 0, 0};

	json_escape(s, put_piece, &k);
	buf[*at < n ? *at : n - 1] = '\0';
}

/* Now as "2026-11-25T13:30:01.123Z" into out; returns it in Unix ms. */
static long long rfc3339_now(char *out, size_t n)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t w = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + w, n - w, ".%03ldZ", ts.tv_nsec / 1000000);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The name in key (PREFIX{NAME}), into name. */
static void name_of(char *name, size_t n, const char *key)
{
	size_t p = strlen(ev.prefix), k = strlen(key);

	if (k >= p + 2 && !strncmp(key, ev.prefix, p) && key[p] == '{' && key[k - 1] == '}')
		snprintf(name, n, "%.*s", (int)(k - p - 2), key + p + 1);
	else
		snprintf(name, n, "%s", key);
}

/* The fields every line has: the schema, the time, the kind, the lock, who. */
static void put_head(char *buf, size_t n, size_t *at, enum ev_kind kind, const struct lock *l)
{
	char when[40], key[LOCK_KEY_MAX], name[LOCK_KEY_MAX], token[TOKEN_SHOWN + 1];

	long long ms = rfc3339_now(when, sizeof when);
	if (l)
		snprintf(key, sizeof key, "%s", l->key);
	else
		snprintf(key, sizeof key, "%s{%s}", ev.prefix, ev.name);
	name_of(name, sizeof name, key);
	if (l)
		snprintf(token, sizeof token, "%.*s", TOKEN_SHOWN, l->token);
	put(buf, n, at,
	    "{\"schema\":%d,\"time\":\"%s\",\"time_ms\":%lld,\"event\":\"%s\",\"name\":",
	    EVENTS_SCHEMA, when, ms, kind_names[kind]);
	put_str(buf, n, at, name);
	put(buf, n, at, ",\"key\":");
	put_str(buf, n, at, key);
	put(buf, n, at, ",\"host\":");
	put_str(buf, n, at, ev.host);
	put(buf, n, at, ",\"pid\":%ld,\"token\":", (long)getpid());
	put_str(buf, n, at, l ? token : NULL);
	put(buf, n, at, ",\"label\":");
	put_str(buf, n, at, ev.label && ev.label[0] ? ev.label : NULL);
}

/* The fields of one kind. */
static void put_facts(char *buf, size_t n, size_t *at, enum ev_kind kind, const struct ev_facts *f,
                      int64_t hold_ms)
{
	switch (kind) {
	case EV_ACQUIRED:
		put(buf, n, at, ",\"wait_ms\":%lld,\"fence\":%lld", (long long)f->wait_ms,
		    f->lock ? f->lock->fence : 0);
		break;
	case EV_BUSY:
		put(buf, n, at, ",\"wait_ms\":%lld", (long long)f->wait_ms);
		break;
	case EV_RELEASED:
	case EV_KEEPER_RELEASED:
		put(buf, n, at, ",\"hold_ms\":%lld,\"status\":%d", (long long)hold_ms, f->status);
		if (f->reason) { /* the release itself failed (RELEASE_FAILED_REASON) */
			put(buf, n, at, ",\"reason\":");
			put_str(buf, n, at, f->reason);
		}
		break;
	case EV_UNAVAILABLE:
	case EV_SUPERSEDED:
	case EV_FAILED:
		put(buf, n, at, ",\"status\":%d", f->status);
		/* fall through */
	case EV_RENEW_FAILED:
	case EV_PREEMPTED:
	case EV_LOST:
	case EV_KEEPER_LOST:
		put(buf, n, at, ",\"reason\":");
		put_str(buf, n, at, f->reason);
		break;
	default:
		break;
	}
}

static void write_line(enum ev_kind kind, const struct ev_facts *f, const struct lock *l,
                       int64_t hold_ms)
{
	char buf[LINE_MAX]; /* every field at its longest (FIELD_MAX) fits */
	size_t at = 0;

	pthread_once(&ev.opened, open_file);
	if (ev.fd < 0)
		return;
	if (ends_cut())
		buf[at++] = '\n';
	put_head(buf, sizeof buf - 2, &at, kind, l);
	put_facts(buf, sizeof buf - 2, &at, kind, f, hold_ms);
	if (at > sizeof buf - 3)
		at = sizeof buf - 3; /* cut short: still one line, never two */
	buf[at++] = '}';
	buf[at++] = '\n';
	if (ev.fd == STDERR_FILENO) { /* "-": in order with rlock's lines, never blocking
		                       * the supervisor on a full pipe (log_defer) */
		log_write(buf, at);
		return;
	}
	/* One write(2), O_APPEND: lines of concurrent runs never interleave. */
	ssize_t w;
	do
		w = write(ev.fd, buf, at);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)at)
		warn_once(w < 0 ? strerror(errno) : "short write");
}

/* What the run knows across events: its first lock, when it was acquired, a loss. */
static void note(enum ev_kind kind, const struct ev_facts *f)
{
	if (kind == EV_ACQUIRED && !first_lock) {
		first_lock = f->lock;
		acquired_at = clock_ms();
	}
	if (kind == EV_LOST || kind == EV_KEEPER_LOST)
		lost = 1;
}

void events_emit(enum ev_kind kind, const struct ev_facts *f)
{
	if (!ev.any)
		return; /* the common case costs a branch */
	if (kind == EV_RENEWED || kind == EV_RENEW_FAILED) {
		/* A renewal thread: it touches nothing of the main thread's. */
		metrics_count_renewal(kind == EV_RENEWED);
		if (ev.on && kind == EV_RENEW_FAILED && !f->repeat) {
			pthread_mutex_lock(&order_mu);
			if (!lost_said)
				write_line(kind, f, f->lock, 0);
			pthread_mutex_unlock(&order_mu);
		}
		return;
	}
	note(kind, f);
	int64_t hold_ms = acquired_at < 0 ? 0 : clock_ms() - acquired_at;
	if (ev.on && (kind == EV_LOST || kind == EV_KEEPER_LOST)) {
		pthread_mutex_lock(&order_mu);
		lost_said = 1;
		write_line(kind, f, f->lock ? f->lock : first_lock, hold_ms);
		pthread_mutex_unlock(&order_mu);
	} else if (ev.on) {
		write_line(kind, f, f->lock ? f->lock : first_lock, hold_ms);
	}
	metrics_note(kind, f, hold_ms, lost);
	/* Not acquired after all, a lock taken first (-k a -k b, b busy; a signal while b was
	 * waited for): that one is given back, and the run that acquired ends with released,
	 * its status the exit status, as every such run does. */
	int unheld =
	    kind == EV_BUSY || kind == EV_UNAVAILABLE || kind == EV_SUPERSEDED || kind == EV_FAILED;
	if (unheld && acquired_at >= 0)
		events_emit(
		    EV_RELEASED,
		    &(struct ev_facts){.status = kind == EV_BUSY ? ev.conflict_exit : f->status});
}
