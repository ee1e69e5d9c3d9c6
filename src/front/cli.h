/* SPDX-License-Identifier: MIT */
/* Command line, environment and config file → one validated struct opts.
 * cli_parse() exits 64 with one line on stderr for bad input (before any network). */
#ifndef RLOCK_CLI_H
#define RLOCK_CLI_H

#include <stdint.h>

#include "conncodes.h" /* struct tls_opts */
#include "lock.h"      /* struct lock_ask */
#include "parse.h"

#define CLI_URLS_MAX   16 /* Redlock nodes */
#define OPTS_NAMES_MAX 16 /* -k given several times */

enum mode {
	MODE_RUN,
	MODE_STATUS,
	MODE_BREAK,
	MODE_LIST,
	MODE_ACQUIRE,
	MODE_RELEASE,
	MODE_HELD,
	MODE_HISTORY, /* --history */
	MODE_CHECK,
	MODE_RESET, /* --reset */
};

enum on_lost {
	LOST_TERM,   /* SIGTERM to the command's group, SIGKILL after kill_after */
	LOST_KILL,   /* SIGKILL at once */
	LOST_SIGNAL, /* lost_signal, SIGKILL after kill_after */
	LOST_IGNORE, /* warn only */
};

struct opts {
	enum mode mode;
	const char *name; /* lock name (-k): the first of names */
	/* Several -k: all of them, all or nothing, in this (sorted, canonical) order, so
	 * that `-k A -k B` and `-k B -k A` never deadlock. */
	const char *names[OPTS_NAMES_MAX];
	int nnames;
	const char *prefix; /* key prefix */

	int64_t wait_ms;       /* -1: forever; 0: -n; once connected, what the connect left */
	int64_t wait_given_ms; /* -w as given, for the lines that name it */
	int conflict_exit;     /* -E */
	/* The lock request (lock.h), written by the option table itself: -t, -l N, --fair,
	 * --once-per, --lock-delay, --supersede, --preempt, --preemptible, the history.
	 * Its prefix, mode and nowait are the front end's (frontend.c), from prefix, kind
	 * and wait_ms. */
	struct lock_ask lock;
	enum on_lost on_lost;
	int lost_signal;
	int warn_signal; /* --warn SIGNAL; 0: none */
	int64_t kill_after_ms;
	int64_t min_hold_ms;
	int64_t max_hold_ms;                                   /* --max-hold; 0: no limit */
	enum { KIND_EXCLUSIVE, KIND_SHARED, KIND_LIMIT } kind; /* -x (default), -s, -l N */
	/* --supersede's status when replaced; --history's count (-n N) */
	int superseded_exit;
	int history_count;

	const struct url *url;     /* the server: the first of urls */
	int nurls;                 /* > 1: Redlock over these independent masters */
	char server[400];          /* the server's URL without a password, for messages */
	const char *user;          /* overrides the URL's user */
	char creds_from[520];      /* "user from FILE:LINE, password from ENV": for messages */
	int has_password;          /* the password itself is in secret.h's vault */
	const char *sentinel_user; /* Sentinel URLs: the sentinels' ACL user, or NULL */
	int has_sentinel_password; /* in the vault's SECRET_SENTINEL slot */
	struct tls_opts tls;
	int64_t connect_timeout_ms;
	int64_t io_timeout_ms;
	int64_t node_timeout_ms; /* Redlock: deadline of one round of requests */
	int wait_replicas;       /* WAIT for this many replicas after acquiring */
	int wait_aof_local;      /* --wait-aof LOCAL[,REPLICAS]: WAITAOF after acquiring */
	int wait_aof_replicas;   /* (both 0: not asked) */
	int eviction_warning;    /* config `eviction-warning = off`: 0 (acknowledged) */

	int json;
	const char *token;    /* --release: --token, else $RLOCK_TOKEN (32 hex digits) */
	int token_env;        /* --release: the token read from the environment by its key */
	const char *if_fence; /* --break --if-fence N: that fence only (canonical text), or NULL */
	int format_github;    /* --acquire --format github: KEY=VALUE lines */
	const char *log_file; /* --acquire: the keeper's log (default: syslog) */
	const char *label;    /* --label: stored with the holder */
	int verbose;          /* -1 quiet, 0 default, 1.. -v count */

	const char *events_file;  /* --events: JSON lines (events.h); "-" stderr */
	const char *metrics_file; /* --metrics-file: Prometheus text format (metrics.h) */

	char **argv;               /* command to run (NULL-terminated), MODE_RUN */
	const char *shell_command; /* -c STRING, or NULL */

	/* Last, the large one: a run writes the fields above and the first server, and
	 * each page of this struct written is a page fault (a zero page) at start. */
	struct url urls[CLI_URLS_MAX];
};

/* First thing in main: make sure fds 0, 1 and 2 are open (on /dev/null if they were
 * closed), so no socket or file of ours takes their numbers. No /dev/null to open:
 * exits 71, with one line where stderr is open. */
void cli_open_std_fds(void);

/* Whether stdout was closed when rlock started (cli_open_std_fds): what rlock writes
 * there reaches nobody. */
int cli_stdout_closed(void);

/* Flush stdout: 0, or RL_EX_IOERR after one line on stderr (a full disk, a stdout
 * closed at start), or without one for a pipe whose reader left (EPIPE: `| head -1`).
 * For --status, --list, --history, --check, --help and --version. */
int cli_close_stdout(void);

/* As cli_close_stdout, with the line for a reader gone too: --acquire's token, which
 * then nobody learns (its keeper gives the lock back). */
int cli_close_stdout_told(void);

/* Parse everything (command line, RLOCK_* environment, config file, REDIS_URL, in the
 * README's precedence, "Config file"), then check the combinations once; on bad input
 * print one line "rlock: ..." and exit(64). --help and --version print and exit (0, or
 * 74 when stdout cannot be written). Then warns about a user name without a password
 * (a password on the command line is warned about as it is read); with -v, says which
 * server is used and where its URL came from. *o must be zero on entry (a static: the
 * pages of unused URL slots are then never touched). */
void cli_parse(int argc, char **argv, struct opts *o);

#endif
