/* SPDX-License-Identifier: MIT */
/* Fuzz the config-file line parser (parse_config_line) with arbitrary lines. Properties:
 * no crash; for a setting, the name and the value (if any) point into the line and
 * have no blank at either end, and the name is not empty; an error always comes with a
 * reason; nothing is reported but -1, 0 or 1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int inside(const char *p, const char *line, size_t len)
{
	return p >= line && p <= line + len;
}

static int blank_ends(const char *s)
{
	size_t n = strlen(s);

	return n && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[4096], err[300];
	char *key = NULL, *val = NULL;

	/* load_config hands over at most one fgets() line: < 4096 bytes, NUL-terminated. */
	if (size >= sizeof line)
		size = sizeof line - 1;
	memcpy(line, data, size);
	line[size] = '\0';
	size_t len = strlen(line);
	err[0] = '\0';
	int got = parse_config_line(line, &key, &val, err, sizeof err);
	if (got == 1) {
		if (!key || !inside(key, line, len) || !*key || blank_ends(key))
			abort();
		if (val && (!inside(val, line, len) || blank_ends(val)))
			abort();
	} else if (got == -1) {
		if (!err[0] || !memchr(err, '\0', sizeof err))
			abort();
	} else if (got != 0) {
		abort();
	}
	return 0;
}
