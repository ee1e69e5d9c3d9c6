/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
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

void log_stamped(void)
{
	stamped = 1;
}

/* "rlock: ", or with log_stamped() "2026-11-25T03:15:02+0000 rlock[PID]: ". */
static size_t log_prefix(char *buf, size_t n)
{
	struct tm tm;
	time_t now = time(NULL);
	size_t used = 0;

	if (stamped && localtime_r(&now, &tm))
		used = strftime(buf, n, "%Y-%m-%dT%H:%M:%S%z ", &tm);
	int w = stamped ? snprintf(buf + used, n - used, "rlock[%ld]: ", (long)getpid())
	                : snprintf(buf + used, n - used, "rlock: ");
	return w < 0 ? used : used + (size_t)w;
}

void log_escape(char *dst, size_t n, const char *src, size_t srclen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (n == 0)
		return;
	for (size_t i = 0; i < srclen; i++) {
		unsigned char ch = (unsigned char)src[i];
		if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
			if (o + 1 >= n)
				break;
			dst[o++] = (char)ch;
		} else {
			if (o + 4 >= n)
				break;
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[ch >> 4];
			dst[o++] = hex[ch & 15];
		}
	}
	dst[o] = '\0';
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

void log_msg(int level, const char *fmt, ...)
{
	char raw[1024], line[2048];
	va_list ap;
	int saved = errno;

	if (level > log_verbosity && !(level == LOG_ERROR))
		return;
	va_start(ap, fmt);
	int len = vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof raw)
		len = sizeof raw - 1;
	size_t pre = log_prefix(line, 64);
	log_escape(line + pre, sizeof line - pre - 1, raw, (size_t)len);
	size_t n = strlen(line);
	line[n++] = '\n';
	/* One write, so lines from the renewal thread never interleave mid-line. */
	ssize_t w;
	do
		w = write(STDERR_FILENO, line, n);
	while (w < 0 && errno == EINTR);
	if (use_syslog)
		syslog(level == LOG_ERROR  ? LOG_ERR
		       : level == LOG_WARN ? LOG_WARNING
		                           : LOG_INFO,
		       "%.*s", (int)(n - pre - 1), line + pre);
	errno = saved;
}
