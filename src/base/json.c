/* SPDX-License-Identifier: MIT */
#include "json.h"

#include "log.h"

void json_escape(const char *s, void (*put)(void *arg, const char *p, size_t len), void *arg)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;

	put(arg, "\"", 1);
	while (*p) {
		size_t u = log_utf8_len(p);
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			put(arg, e, 2);
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
			put(arg, e, 6);
			p++;
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
