/* SPDX-License-Identifier: MIT */
/* Diagnostics on stderr: one write(2) per message, prefixed "rlock: ", control
 * characters escaped, never a secret (callers never pass one). Thread-safe. */
#ifndef RLOCK_LOG_H
#define RLOCK_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum log_level {
	LOG_ERROR = -1, /* shown even with -q */
	LOG_WARN = 0,   /* shown unless -q */
	LOG_INFO = 1,   /* -v */
	LOG_DEBUG = 2,  /* -vv */
	LOG_TRACE = 3,  /* -vvv */
};

/* -1 for -q, 0 by default, the -v count otherwise. Set once before threads start. */
extern int log_verbosity;

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Copy src[0..len) into dst (size n) as it is (the sink that prints it escapes it);
 * always terminates. What does not fit is cut in the middle, shown by "..." (its start
 * and its end stay: the end of a server's error says why), never inside a UTF-8
 * sequence, so that a reply's text cut to a fixed buffer shows it was cut. Inline, as
 * log_reason is. */
static inline void log_clip(char *dst, size_t n, const char *src, size_t len)
{
	static const char cut[] = "...";
	size_t head, tail;

	if (!dst || n == 0)
		return;
	if (len < n) {
		memmove(dst, src, len);
		dst[len] = '\0';
		return;
	}
	if (n - 1 < sizeof cut - 1 + 2) { /* no room for both ends: the start, the cut shown */
		head = n - 1 > sizeof cut - 1 ? n - 1 - (sizeof cut - 1) : 0;
		tail = len;
	} else {
		head = (n - 1 - (sizeof cut - 1)) / 2;
		tail = len - (n - 1 - (sizeof cut - 1) - head);
	}
	/* a continuation byte (10xxxxxx) at the cut belongs to the sequence before it */
	for (int k = 0; k < 3 && head > 0 && ((unsigned char)src[head] & 0xc0) == 0x80; k++)
		head--;
	for (int k = 0; k < 3 && tail < len && ((unsigned char)src[tail] & 0xc0) == 0x80; k++)
		tail++;
	memmove(dst, src, head);
	size_t o = head;
	for (size_t i = 0; i < sizeof cut - 1 && o < n - 1; i++)
		dst[o++] = cut[i];
	memmove(dst + o, src + tail, len - tail);
	dst[o + len - tail] = '\0';
}

/* Format a one-line reason into err[errlen] for the caller to report (nothing when err
 * is NULL or errlen 0). A reason too long for err (a server's error text in it) is cut
 * as log_clip cuts: in the middle, shown, its end kept, never inside a UTF-8 sequence.
 * log_vreason takes a va_list. Inline: the TLS module (tls.c, loaded on demand)
 * links no log.c. */
static inline void log_vreason(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static inline void log_vreason(char *err, size_t errlen, const char *fmt, va_list ap)
{
	va_list again;

	if (!err || errlen == 0)
		return;
	va_copy(again, ap);
	int len = vsnprintf(err, errlen, fmt, ap);
	if (len >= 0 && (size_t)len >= errlen) {
		char *whole = malloc((size_t)len + 1);
		int got = whole ? vsnprintf(whole, (size_t)len + 1, fmt, again) : -1;
		if (got == len) {
			log_clip(err, errlen, whole, (size_t)len);
		} else { /* no memory for all of it: cut at the end, shown, not mid-sequence */
			size_t o = errlen - 1 > 3 ? errlen - 1 - 3 : 0;
			for (int k = 0; k < 3 && o > 0 && ((unsigned char)err[o] & 0xc0) == 0x80;
			     k++)
				o--;
			for (int k = 0; k < 3 && o < errlen - 1; k++)
				err[o++] = '.';
			err[o] = '\0';
		}
		free(whole);
	}
	va_end(again);
}

static inline void log_reason(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void log_reason(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vreason(err, errlen, fmt, ap);
	va_end(ap);
}

/* The length of the valid UTF-8 sequence that starts at p (1 for ASCII, the NUL too),
 * or 0 when the byte at p starts none (a stray byte, an overlong form, a surrogate):
 * JSON must be UTF-8, and text from another holder or a server may be anything. */
size_t log_utf8_len(const unsigned char *p);

/* Also send every message to syslog(3) (facility user, ident "rlock-keeper"): for a
 * detached keeper, whose stderr is /dev/null. Call before threads start. */
void log_to_syslog(void);

/* From now on, prefix every line with the local time and the pid (a log file that
 * outlives the run: the keeper's --log-file). */
void log_stamped(void);

/* While fd >= 0, also write every line shown, stamped as log_stamped's are, to fd: the
 * keeper's --log-file while its stderr is still its caller's (the lock held, its token
 * not yet reported), so that the file has every line of the hold. Best effort (the
 * caller's stderr has the line too). -1 stops it; before fd is closed. Thread-safe. */
void log_tee(int fd);

/* While the command runs (on), a line stderr cannot take at once (a full pipe nobody
 * reads) never blocks the caller: it waits, in order, in a bounded buffer (a line that
 * does not fit is counted, and the count said), written as stderr takes it, before any
 * later line, and by log_flush (registered with atexit; child_die_of calls it), which
 * blocks as a plain write does. Thread-safe. */
void log_defer(int on);
void log_flush(void);
/* log_flush, but what stderr has not taken by the time fd is readable (a signalfd: a
 * terminating signal) is dropped, so that a pipe nobody reads never keeps rlock from
 * its Ctrl-C at the end (fd -1: the signal came already; what it takes at once).
 * Returns 1 when fd became readable while lines waited (they were dropped), else 0. */
int log_flush_until(int fd);

/* Whether the regular file open on rfd (read-only) ends inside a line: its last byte is
 * not a newline (a write cut short by a full disk). Then the next line written there
 * starts with one, so that it stands on a line of its own. */
int log_ends_cut(int rfd);
/* Write n bytes (whole lines) to stderr as log_msg writes its line: in order with it,
 * not blocking while deferring (--events -). */
void log_write(const char *line, size_t n);

/* Whether the byte at s[i] (of len) would let a CI runner read the text as one of its
 * commands: the second '#' of "##" ("##[add-mask]", "##vso[task.setvariable"), read
 * anywhere in a line, or the first ':' of a "::" that only spaces precede (a row that
 * starts with the text: "::warning::"). The text sinks escape it (log_escape: \x23,
 * \x3a; json_escape: \u0023, \u003a), so that text another client wrote is shown, never
 * obeyed, whichever sink it reaches. */
int log_ci_command_at(const char *s, size_t i, size_t len);

/* Copy src into dst (size n), replacing control and non-ASCII bytes by \xNN, and a CI
 * runner's command marks (log_ci_command_at); always terminates. What does not fit is
 * cut in the middle, shown by "..." (its start and its end stay: the end of a message
 * says why), never mid-escape. For untrusted text: server replies, holder metadata,
 * file names; log_msg passes it the whole message, however long. */
void log_escape(char *dst, size_t n, const char *src, size_t srclen);

#endif
