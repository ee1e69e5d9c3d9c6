/* SPDX-License-Identifier: MIT */
/* Pure parsers: no I/O, no allocation, never exit. Each returns 0 on success or -1
 * with a one-line reason (no trailing newline, no secrets) in err[errlen]. */
#ifndef RLOCK_PARSE_H
#define RLOCK_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define URL_HOST_MAX      256
#define URL_USER_MAX      256
#define URL_PASS_MAX      512
#define URL_PATH_MAX      108 /* sizeof(sockaddr_un.sun_path) */
#define LOCK_NAME_MAX     512
#define URL_SENTINELS_MAX 16  /* sentinels in one redis-sentinel:// URL */
#define URL_MASTER_MAX    256 /* Sentinel master name */

enum url_scheme {
	URL_REDIS,     /* redis://  plain TCP */
	URL_REDISS,    /* rediss:// TLS */
	URL_UNIX,      /* unix:///path/to.sock[?db=N] */
	URL_SENTINEL,  /* redis-sentinel://  master found through Sentinel */
	URL_SENTINELS, /* rediss-sentinel:// same, TLS to sentinels and master */
};

struct url_hostport {
	char host[URL_HOST_MAX]; /* as url.host */
	int port;                /* 1..65535; 26379 when absent */
};

struct url {
	enum url_scheme scheme;
	char host[URL_HOST_MAX]; /* hostname or IP literal, brackets removed; "" for unix */
	int port;                /* 1..65535; 6379 when absent; 0 for unix */
	char path[URL_PATH_MAX]; /* unix socket path; "" otherwise */
	int db;                  /* 0 when absent */
	int has_user, has_password;
	char user[URL_USER_MAX];     /* percent-decoded */
	char password[URL_PASS_MAX]; /* percent-decoded; caller wipes with explicit_bzero */
	/* Sentinel URLs only (host and port above are then the first sentinel's): */
	int nsentinels; /* 1..URL_SENTINELS_MAX; 0 for other schemes */
	struct url_hostport sentinel[URL_SENTINELS_MAX];
	char master[URL_MASTER_MAX]; /* percent-decoded, printable, no blank; "" otherwise */
};

/* Parse a URL (README, "Options": --url) into *u (zeroed first). Accepts
 *   redis://[[user]:password@]host[:port][/db]   (also user@host, :password@host)
 *   rediss://...                                 (same, TLS)
 *   unix:///abs/path.sock[?db=N]                 (also unix:/abs/path)
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/MASTER[/db]
 *   rediss-sentinel://...                        (same, TLS)
 * (a sentinel's port defaults to 26379; the userinfo of a Sentinel URL is what the
 * caller uses to log in to the sentinels)
 * IPv6 literals in brackets; percent-decoding in user, password and path; a decoded
 * NUL is rejected. The reason never contains the password. */
int parse_url(const char *s, struct url *u, char *err, size_t errlen);

/* Where the password of URL s is, as parse_url reads it: 1 with the byte offset and
 * length of its raw (still percent-encoded) text, or 0 when there is none. For
 * overwriting it in place (argv is visible in /proc/PID/cmdline). */
int url_password_span(const char *s, size_t *off, size_t *len);

/* One line of a config file, split in place: 0 for a blank or comment line; 1 with
 * *key and *val for "NAME = VALUE" or a bare "NAME" (*val NULL). Blanks around both
 * are trimmed; a blank then '#' starts a trailing comment, except in the value of
 * "password" and "sentinel-password", taken as they stand. -1 with a reason for a line that is not
 * a setting ("= x", "ttl 5s"). The caller checks the name and the value. */
int parse_config_line(char *line, char **key, char **val, char *err, size_t errlen);

/* Duration: "500ms", "30s", "5m", "2h", "1d" or a bare number of seconds; fractions
 * allowed ("1.5", "0.25s"); result in milliseconds, rounded up to a whole ms when a
 * fraction of a millisecond remains. Rejects empty, negative, trailing garbage and
 * anything above 100 years. 0 is a valid result (callers decide). */
int parse_duration(const char *s, int64_t *ms, char *err, size_t errlen);

/* Whole number in [min, max], decimal, no sign unless min < 0, no trailing garbage. */
int parse_int(const char *s, long long min, long long max, long long *out, char *err,
              size_t errlen);

/* Signal name: "TERM", "SIGTERM", "term", or a number 1..64. */
int parse_signal(const char *s, int *sig, char *err, size_t errlen);

/* Name of a signal for messages: "TERM" for SIGTERM; a static string, "?" if unknown. */
const char *signal_name(int sig);

/* Lock name: 1..512 bytes, printable, no '{' or '}' (the name is the hash tag). */
int parse_lock_name(const char *s, char *err, size_t errlen);

/* Key prefix: 0..128 bytes, printable, no '{' or '}'. */
int parse_prefix(const char *s, char *err, size_t errlen);

#endif
