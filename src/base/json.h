/* SPDX-License-Identifier: MIT */
/* The one JSON string escaper: --status/--list/--held/--history/--check (a FILE) and
 * --events (one buffer, one write) hand it their own sink. */
#ifndef RLOCK_JSON_H
#define RLOCK_JSON_H

#include <stddef.h>
#include <stdio.h>

/* s as a JSON string, quotes included, handed to put(arg, bytes, len) in pieces of at
 * most 6 bytes or one run of valid UTF-8: '"' and '\' escaped, control characters and
 * DEL as \u00XX, a byte that is not UTF-8 as \ufffd (JSON could not carry it); what a
 * terminal or a log viewer would obey (C1 controls, U+2028/U+2029, bidi controls, the
 * BOM) and a CI runner's command marks (log_ci_command_at) as \uXXXX: the same text,
 * to a JSON reader. */
void json_escape(const char *s, void (*put)(void *arg, const char *p, size_t len), void *arg);

/* json_escape() onto f. */
void json_str(FILE *f, const char *s);

#endif
