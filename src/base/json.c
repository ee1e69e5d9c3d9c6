/* SPDX-License-Identifier: MIT */
#include "json.h"

#include "log.h"

#include <stdio.h>
#include <string.h>

/* The code point of the valid UTF-8 sequence of u bytes at p. */
static unsigned code_point(const unsigned char *p, size_t u)
{
	unsigned cp = u == 1 ? p[0] : p[0] & (0x3f >> (u - 1));

	for (size_t i = 1; i < u; i++)
		cp = cp << 6 | (p[i] & 0x3f);
	return cp;
}

/* Valid in JSON, but what a terminal or a log viewer obeys rather than shows: the C1
 * controls (U+009B is a CSI), the line and paragraph separators, the bidi controls that
 * turn text around, the byte-order mark (the set the action's plain() shows escaped). */
static int json_unsafe(unsigned cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
	       (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

void json_escape(const char *s, void (*put)(void *arg, const char *p, size_t len), void *arg)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);

	put(arg, "\"", 1);
	while (*p) {
		size_t u = log_utf8_len(p);
		unsigned cp = u ? code_point(p, u) : 0;
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			put(arg, e, 2);
			p++;
		} else if (*p < 0x20 || *p == 0x7f || (u && json_unsafe(cp)) ||
		           log_ci_command_at(s, (size_t)((const char *)p - s), len)) {
			char e[7];
			snprintf(e, sizeof e, "\\u%04x", cp);
			put(arg, e, 6);
			p += u;
		} else if (u == 0) {
			put(arg, "\\ufffd", 6);
			p++;
		} else {
			put(arg, (const char *)p, u);
			p += u;
		}
	}
	put(arg, "\"", 1);
}

static void put_file(void *arg, const char *p, size_t len)
{
	fwrite(p, 1, len, arg);
}

void json_str(FILE *f, const char *s)
{
	json_escape(s, put_file, f);
}
