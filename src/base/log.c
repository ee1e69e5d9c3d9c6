/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h> /* after log.h: in this file LOG_INFO is syslog's priority */
#include <time.h>
#include <unistd.h>

int log_verbosity = 0;
static int use_syslog;

void log_to_syslog(void)
{
	openlog("rlock-keeper", LOG_PID | LOG_NDELAY, LOG_USER);
	use_syslog = 1;
}

static _Atomic int stamped; /* set by the keeper while its renewal thread runs */

static void file_lost_note(void);

void log_stamped(void)
{
	static int registered;

	if (!registered && atexit(log_flush) == 0)
		registered = 1; /* the count of lines lost to a full disk, a last try */
	stamped = 1;
}

static _Atomic int tee_fd = -1; /* log_tee */

void log_tee(int fd)
{
	tee_fd = fd;
}

/* "rlock: ", or stamped "2026-11-25T03:15:02+0000 rlock[PID]: ". */
static size_t prefix_of(char *buf, size_t n, int stamp)
{
	struct tm tm;
	time_t now = time(NULL);
	size_t used = 0;

	if (stamp && localtime_r(&now, &tm))
		used = strftime(buf, n, "%Y-%m-%dT%H:%M:%S%z ", &tm);
	int w = stamp ? snprintf(buf + used, n - used, "rlock[%ld]: ", (long)getpid())
	              : snprintf(buf + used, n - used, "rlock: ");
	return w < 0 ? used : used + (size_t)w;
}

/* The prefix of a line on stderr: stamped once log_stamped() was called. */
static size_t log_prefix(char *buf, size_t n)
{
	return prefix_of(buf, n, stamped);
}

/* log.h */
int log_ci_command_at(const char *s, size_t i, size_t len)
{
	if (s[i] == '#') /* "##[" (GitHub, anywhere in a line), "##vso[" (Azure) */
		return i > 0 && s[i - 1] == '#';
	if (s[i] != ':' || i + 1 >= len || s[i + 1] != ':')
		return 0;
	while (i > 0 && s[i - 1] == ' ') /* "::" (GitHub) where a line may start */
		i--;
	return i == 0;
}

/* The escaped width of src[i]: 1, or 4 for \xNN. */
static size_t escaped_width(const char *src, size_t i, size_t srclen)
{
	unsigned char ch = (unsigned char)src[i];

	return ch >= 0x20 && ch < 0x7f && ch != '\\' && !log_ci_command_at(src, i, srclen) ? 1 : 4;
}

/* src[from..to) escaped at dst + o. */
static size_t escape_run(char *dst, size_t o, const char *src, size_t from, size_t to,
                         size_t srclen)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = from; i < to; i++) {
		unsigned char ch = (unsigned char)src[i];
		if (escaped_width(src, i, srclen) == 1) {
			dst[o++] = (char)ch;
		} else {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[ch >> 4];
			dst[o++] = hex[ch & 15];
		}
	}
	return o;
}

void log_escape(char *dst, size_t n, const char *src, size_t srclen)
{
	static const char cut[] = "...";
	size_t need = 0, head = 0, tail = srclen, used = 0;

	if (n == 0)
		return;
	for (size_t i = 0; i < srclen; i++)
		need += escaped_width(src, i, srclen);
	if (need < n) {
		dst[escape_run(dst, 0, src, 0, srclen, srclen)] = '\0';
		return;
	}
	/* Too long: its start and its end (where a message says why), "..." between, so
	 * that the cut shows; a piece never splits an escape. */
	size_t room = n - 1 > sizeof cut - 1 ? n - 1 - (sizeof cut - 1) : 0;
	while (head < srclen && used + escaped_width(src, head, srclen) <= room / 2)
		used += escaped_width(src, head++, srclen);
	while (tail > head && used + escaped_width(src, tail - 1, srclen) <= room)
		used += escaped_width(src, --tail, srclen);
	size_t o = escape_run(dst, 0, src, 0, head, srclen);
	if (o + sizeof cut <= n) {
		memcpy(dst + o, cut, sizeof cut - 1);
		o += sizeof cut - 1;
	}
	dst[escape_run(dst, o, src, tail, srclen, srclen)] = '\0';
}

size_t log_utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	size_t len;
	unsigned min;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	unsigned cp = c & (0x3f >> (len - 1));
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80) /* the NUL too */
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* log_defer: lines stderr cannot take at once wait here, in order, for a later line or
 * log_flush (a pipe nobody reads must not hold up the supervisor or a renewal). */
static _Atomic int deferring;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static char pending[32768];
static size_t npending;
static unsigned long dropped;   /* lines that did not fit in pending */
static _Atomic int any_pending; /* npending != 0, read without the lock */

/* Write what is pending, line by line; without wait, only while stderr takes it without
 * blocking (a pipe with room takes a line of up to PIPE_BUF whole). A write error (the
 * reader gone: EPIPE, SIGPIPE blocked) drops it, as it would have dropped the line.
 * Under out_lock. */
static void flush_pending(int wait)
{
	size_t off = 0;

	while (off < npending) {
		const char *nl = memchr(pending + off, '\n', npending - off);
		size_t len = nl ? (size_t)(nl - (pending + off)) + 1 : npending - off;
		struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
		if (!wait && (poll(&p, 1, 0) != 1 || !(p.revents & (POLLOUT | POLLERR | POLLHUP))))
			break;
		ssize_t w = write(STDERR_FILENO, pending + off, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && !wait)
			break;
		off = w <= 0 ? npending : off + (size_t)w;
	}
	memmove(pending, pending + off, npending - off);
	npending -= off;
	any_pending = npending != 0;
}

void log_defer(int on)
{
	static int registered;

	if (on && !registered && atexit(log_flush) == 0)
		registered = 1;
	deferring = on;
}

void log_flush(void)
{
	char note[128];

	pthread_mutex_lock(&out_lock);
	flush_pending(1);
	if (stamped)
		file_lost_note();
	if (dropped) {
		size_t pre = log_prefix(note, 64);
		int w = snprintf(note + pre, sizeof note - pre,
		                 "%lu diagnostic line(s) not written: stderr was full\n", dropped);
		dropped = 0;
		if (w > 0 && write(STDERR_FILENO, note, pre + (size_t)w) < 0)
			(void)0; /* nowhere left to say it */
	}
	pthread_mutex_unlock(&out_lock);
}

int log_flush_until(int fd)
{
	int cut = 0;
	pthread_mutex_lock(&out_lock);
	if (fd < 0) /* interrupted already: what stderr takes at once */
		flush_pending(0);
	while (npending) {
		struct pollfd p[2] = {{.fd = STDERR_FILENO, .events = POLLOUT},
		                      {.fd = fd, .events = POLLIN}};
		int rc = fd < 0 ? 0 : poll(p, 2, -1);
		if (rc < 0 && errno != EINTR)
			break; /* log_flush's blocking write then */
		if (fd < 0 || (rc > 0 && ((p[1].revents & POLLIN) || (p[0].revents & POLLNVAL)))) {
			npending = 0; /* the user's signal wins over what nobody read */
			any_pending = 0;
			dropped = 0;
			cut = fd >= 0;
			break;
		}
		if (rc > 0 && p[0].revents)
			flush_pending(0);
	}
	pthread_mutex_unlock(&out_lock);
	return cut;
}

/* A log file (log_stamped: the keeper's --log-file) that cannot take a line (a full
 * disk, a quota): the line goes to syslog instead, and the count of lines lost here is
 * written before the next line the file takes (or at exit), so that its reader sees
 * the gap. Under out_lock. */
static unsigned long file_lost; /* lines the log file did not take */
static int file_lost_errno;

/* log.h */
int log_ends_cut(int rfd)
{
	struct stat st;
	char last;

	return rfd >= 0 && fstat(rfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	       pread(rfd, &last, 1, st.st_size - 1) == 1 && last != '\n';
}

static int write_whole(const char *buf, size_t n)
{
	ssize_t w;

	do
		w = write(STDERR_FILENO, buf, n);
	while (w < 0 && errno == EINTR);
	if (w >= 0 && (size_t)w < n)
		errno = ENOSPC; /* a short write to a file: no room for the rest */
	return w >= 0 && (size_t)w == n ? 0 : -1;
}

/* The count of lost lines, once the file takes it, on a line of its own (a line cut
 * short by the full disk, ours or another writer's, left the file without its end).
 * Under out_lock. */
static void file_lost_note(void)
{
	char note[300];
	struct stat st;
	int cut = 0;

	if (!file_lost)
		return;
	/* its last byte, read on a descriptor of its own (ours is write-only) */
	if (fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		int fd = open("/proc/self/fd/2", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat same;
		cut = fd >= 0 && fstat(fd, &same) == 0 && same.st_ino == st.st_ino &&
		      same.st_dev == st.st_dev && log_ends_cut(fd);
		if (fd >= 0)
			close(fd);
	}
	size_t pre = (size_t)cut;
	note[0] = '\n';
	pre += log_prefix(note + pre, 64);
	int w = snprintf(note + pre, sizeof note - pre,
	                 "%lu line(s) not written to this log file (%s): sent to syslog\n",
	                 file_lost, strerror(file_lost_errno));
	if (w > 0 && write_whole(note, pre + (size_t)w) == 0)
		file_lost = 0;
}

static void write_file_line(const char *line, size_t n)
{
	static int opened;

	file_lost_note();
	/* a note still owed: the line after it, never before (it would hide the gap) */
	if (!file_lost && write_whole(line, n) == 0)
		return;
	if (!file_lost)
		file_lost_errno = errno;
	file_lost++;
	if (!opened && !use_syslog)
		openlog("rlock-keeper", LOG_PID, LOG_USER);
	opened = 1;
	const char *text = strstr(line, "]: "); /* without the file's stamp */
	text = text ? text + 3 : line;
	syslog(LOG_WARNING, "(not written to the log file) %.*s",
	       (int)(n - (size_t)(text - line) - 1), text);
}

/* A line while deferring, or with lines pending: in order after them. */
static void write_in_order(const char *line, size_t n)
{
	pthread_mutex_lock(&out_lock);
	if (stamped) { /* a log file takes a line at once, or fails (syslog then): first */
		write_file_line(line, n);
	} else if (deferring) {
		if (npending + n <= sizeof pending) {
			memcpy(pending + npending, line, n);
			npending += n;
		} else {
			dropped++;
		}
		flush_pending(0);
	} else {
		flush_pending(1);
		ssize_t w;
		do
			w = write(STDERR_FILENO, line, n);
		while (w < 0 && errno == EINTR);
	}
	pthread_mutex_unlock(&out_lock);
}

void log_write(const char *line, size_t n)
{
	if (deferring || any_pending || stamped) {
		write_in_order(line, n);
		return;
	}
	ssize_t w;
	do
		w = write(STDERR_FILENO, line, n);
	while (w < 0 && errno == EINTR);
}

void log_msg(int level, const char *fmt, ...)
{
	char raw[1024], line[2048], *text = raw, *whole = NULL;
	va_list ap, again;
	int saved = errno;

	if (level > log_verbosity && !(level == LOG_ERROR))
		return;
	va_start(ap, fmt);
	va_copy(again, ap);
	int len = vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	if (len >= 0 && (size_t)len >= sizeof raw) {
		/* A long text (a path, a command, what a server said): all of it, for
		 * log_escape to cut in the middle, keeping the end that says why. */
		whole = malloc((size_t)len + 1);
		if (whole && vsnprintf(whole, (size_t)len + 1, fmt, again) == len) {
			text = whole;
		} else {
			len = sizeof raw - 1;
			memcpy(raw + len - 3, "...", 3); /* no memory: cut at the end, shown */
		}
	}
	va_end(again);
	if (len < 0) {
		free(whole);
		return;
	}
	size_t pre = log_prefix(line, 64);
	log_escape(line + pre, sizeof line - pre - 1, text, (size_t)len);
	free(whole);
	size_t n = strlen(line);
	line[n++] = '\n';
	/* One write, so lines from the renewal thread never interleave mid-line. */
	log_write(line, n);
	int tee = tee_fd;
	if (tee >= 0) {
		char t[64 + sizeof line];
		size_t tp = prefix_of(t, 64, 1);
		memcpy(t + tp, line + pre, n - pre);
		ssize_t w;
		do
			w = write(tee, t, tp + n - pre);
		while (w < 0 && errno == EINTR);
	}
	if (use_syslog)
		syslog(level == LOG_ERROR  ? LOG_ERR
		       : level == LOG_WARN ? LOG_WARNING
		                           : LOG_INFO,
		       "%.*s", (int)(n - pre - 1), line + pre);
	errno = saved;
}
