/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcodes.h"
#include "inherit.h"
#include "keeper.h"
#include "lease.h"
#include "lock.h"
#include "log.h"
#include "secret.h"
#include "store.h"
#include "userfile.h"
#include "version.h"

/* ---- the option table -------------------------------------------------------------
 * One row per option, as tmux's options-table.c: its name (long option = config-file
 * key) and short letter, its type, range and default, and where it goes in struct opts.
 * getopt_long's tables, the config-file keys, --help and the defaults are all built
 * from it, and apply() sets a plain option from its row alone; the few options with a
 * meaning of their own (a list, a rank, a mode) name a setter. docs.bats holds the man
 * page (scripts/man-options), docs/options.md and the completions against --help. A new
 * option is one row here. */

struct state;
struct optdef;

/* A special option's setter: `val` from src ("--url", "FILE:LINE", "RLOCK_PREFIX",
 * "default"); `cli` tells the command line from the other layers (for secrets). */
typedef void setter_fn(struct state *s, const struct optdef *d, const char *val, const char *src,
                       int cli);

enum {
	F_ARG = 1,       /* takes a value */
	F_RUN = 2,       /* names one run (or is about this invocation): not in a config file */
	F_CONFIG = 4,    /* config file only: never on the command line, not in --help */
	F_DEF = 8,       /* .def is the default of the target */
	F_SECRET = 16,   /* its value is (or names) a password: consumed at once, never kept */
	F_PATH = 32,     /* its value is a file's path: not empty; absolute in a config file */
	F_NAME = 64,     /* its value names something: not empty */
	F_REDLOCK = 128, /* Redlock only: on the command line of a run on one server, 64 */
	F_EMPTY = 256,   /* an empty value is one on the command line (--prefix '': none);
	                  * set and empty in the environment or a config file, 64: a
	                  * template that expanded to nothing must not move the key */
};

/* The modes whose run reads an option (struct optdef's .modes; none: every mode). Given
 * on the command line of another mode it would be ignored: 64 (validate_mode_reads); a config
 * file's setting serves the modes that read it and is quietly not read by the others. */
#define IN(m)   (1u << (m))
#define IN_RUNS (IN(MODE_RUN) | IN(MODE_ACQUIRE))
/* --release also takes what its --acquire was given (-t, -s, -l N, --fair), so a script
 * may pass both the same options: the token says the holder's kind (keeper.c). */
#define IN_RELEASES (IN_RUNS | IN(MODE_RELEASE))
/* -w DUR: the modes that wait (a run, --acquire; --list for a complete answer), and
 * --release, which takes its --acquire's options; the others ask once (-n, which they
 * do, is read everywhere: --history's -n N is its count) */
#define IN_WAITS (IN_RELEASES | IN(MODE_LIST))
/* -k: every mode but the two that span every lock (--list, --check) */
#define IN_NAMED (~0u & ~(IN(MODE_LIST) | IN(MODE_CHECK)))
/* .not_read: what the refusal says (validate_mode_reads) */
enum { NOT_APPLY, ACTS, RECORDS };

enum otype {
	T_NONE,     /* read by cli_parse itself (--config, --help, --version) */
	T_SWITCH,   /* int target := .value */
	T_SET_MS,   /* int64_t target := .value (-n: wait 0) */
	T_COUNT,    /* int target counts up (-v); a negative (-q) restarts at 1 */
	T_STRING,   /* const char * target; at most .max bytes (0: any); .check */
	T_DURATION, /* int64_t target, in ms, at least .min */
	T_INT,      /* int target, in [.min, .max] */
	T_SPECIAL,  /* .set does it */
};

struct optdef {
	const char *heading; /* a --help section heading instead of an option */
	const char *name;    /* long option = config-file key */
	int letter;          /* short option, or 0 */
	int flags;
	const char *arg;  /* the value's name in --help */
	const char *help; /* --help text; '\n' starts a continuation line */
	enum otype type;
	size_t off;           /* the target: offsetof(struct opts, ...) */
	long long min, max;   /* range (T_INT), least (T_DURATION), length (T_STRING) */
	long long def;        /* the default, with F_DEF */
	long long value;      /* what a switch sets (T_SWITCH, T_SET_MS; a setter's choice) */
	const char *def_text; /* a default given as a value (through the setter) */
	const char *aliases;  /* other long names on the command line (flock's), ' '-separated */
	int alias_letter;     /* another short option (flock's), not shown by --help */
	const char *env;      /* an environment variable above the config file */
	int (*check)(const char *, char *, size_t); /* T_STRING: a parser that says why not */
	setter_fn *set;                             /* T_SPECIAL */
	unsigned modes;                             /* the modes that read it (IN), 0: all */
	int not_read; /* why another mode does not: NOT_APPLY, ACTS, RECORDS */
};

static setter_fn opt_key, opt_kind, opt_on_lost, opt_warn, opt_url, opt_user, opt_sentinel_user,
    opt_password_file, opt_password, opt_eviction_warning, opt_mode, opt_format, opt_wait_aof;

#define AT(field)              .off = offsetof(struct opts, field)
#define SWITCH(field, v)       .type = T_SWITCH, AT(field), .value = (v)
#define STRING(field, maxlen)  .type = T_STRING, AT(field), .max = (maxlen)
#define DURATION(field, least) .type = T_DURATION, AT(field), .min = (least)
#define INT(field, lo, hi)     .type = T_INT, AT(field), .min = (lo), .max = (hi)
#define SPECIAL(fn)            .type = T_SPECIAL, .set = (fn)

#define HEADING(h)                                                                                 \
	{                                                                                          \
		.heading = (h)                                                                     \
	}
#define OPT(name_, letter_, flags_, arg_, help_, ...)                                              \
	{                                                                                          \
		.name = (name_), .letter = (letter_), .arg = (arg_), .help = (help_), __VA_ARGS__, \
		.flags = (flags_)                                                                  \
	}
#define OPT_HIDDEN(name_, flags_, ...)                                                             \
	{                                                                                          \
		.name = (name_), __VA_ARGS__, .flags = (flags_)                                    \
	}

/* A row whose target starts at def_ (a number: ms for a duration). */
#define OPT_DEF(name_, letter_, flags_, arg_, help_, def_, ...)                                    \
	{                                                                                          \
		.name = (name_), .letter = (letter_), .arg = (arg_), .help = (help_), __VA_ARGS__, \
		.def = (def_), .flags = (flags_) | F_DEF                                           \
	}

/* --sni: a host name or IP address to send and verify. An empty one (or a space, a
 * control character) is no name: OpenSSL refuses it at the first connect, which
 * said 69 as for a server that cannot be reached. So is one that no certificate can
 * name ("host:6379", "[::1]", "*.example.com", "a..b", "host."): it was sent as SNI
 * and met "certificate verify failed (hostname mismatch)", the server's fault in
 * appearance (69). A host name: labels of letters, digits, '-' and '_', 1 to 63 each,
 * between dots; or an IPv4 or IPv6 address as written in a certificate. */
static int check_sni(const char *s, char *err, size_t errlen)
{
	unsigned char a[sizeof(struct in6_addr)];
	size_t label = 0;

	if (!*s) {
		snprintf(err, errlen, "empty server name");
		return -1;
	}
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == 0x7f) {
			snprintf(err, errlen, "a server name has no space or control character");
			return -1;
		}
	if (inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1)
		return 0;
	for (const char *p = s;; p++) {
		if (*p && *p != '.' && (isalnum((unsigned char)*p) || *p == '-' || *p == '_')) {
			label++;
			continue;
		}
		if (label == 0 || label > 63 || (*p && *p != '.') || (*p == '.' && !p[1])) {
			snprintf(err, errlen,
			         "'%s' is not a host name or an IP address (no port, brackets, "
			         "wildcard or final dot)",
			         s);
			return -1;
		}
		if (!*p)
			return 0;
		label = 0;
	}
}

/* --token: what --acquire printed (32 lowercase hex digits), judged when read as every
 * other value (RLOCK_TOKEN, read by the mode that uses it, is judged there). */
static int check_token(const char *s, char *err, size_t errlen)
{
	size_t n = strspn(s, "0123456789abcdef");

	if (n != 32 || s[n]) {
		snprintf(err, errlen, "not an rlock token (32 hex digits)");
		return -1;
	}
	return 0;
}

/* --if-fence: a fence is a 64-bit integer (validate_break keeps it in the counter's form). */
static int check_fence(const char *s, char *err, size_t errlen)
{
	long long v;

	if (parse_int(s, LLONG_MIN, LLONG_MAX, &v, NULL, 0) < 0) {
		snprintf(err, errlen, "'%.30s' is not a fence (a 64-bit integer)", s);
		return -1;
	}
	return 0;
}

static const struct optdef options[] = {
    HEADING("Lock:"),
    OPT("key", 'k', F_ARG | F_RUN, "NAME",
        "lock name (printable ASCII, no space or braces);\n"
        "the Redis key is PREFIX{NAME}; repeat it to hold\n"
        "several locks, all or nothing",
        SPECIAL(opt_key), .modes = IN_NAMED),
    OPT("prefix", 0, F_ARG | F_EMPTY, "STR",
        "key prefix (env RLOCK_PREFIX; default \"rlock:\";\n--prefix '': none, the key is {NAME})",
        STRING(prefix, 0), .check = parse_prefix, .def_text = "rlock:", .env = "RLOCK_PREFIX"),
    OPT("exclusive", 'x', 0, NULL, "exclusive lock (the default; as flock -x or -e)",
        SPECIAL(opt_kind), .value = KIND_EXCLUSIVE, .alias_letter = 'e', .modes = IN_RELEASES),
    OPT("shared", 's', F_RUN, NULL, "shared lock: many shared holders, no exclusive one",
        SPECIAL(opt_kind), .value = KIND_SHARED, .modes = IN_RELEASES),
    OPT("limit", 'l', F_ARG | F_RUN, "N", "at most N holders at once (a semaphore)",
        SPECIAL(opt_kind), .value = KIND_LIMIT, AT(lock.limit), .min = 1, .max = LOCK_LIMIT_MAX,
        .modes = IN_RELEASES),
    OPT("fair", 0, F_RUN, NULL, "waiters acquire in arrival order (a FIFO queue)",
        SWITCH(lock.fair, 1), .modes = IN_RELEASES),
    OPT("no-wait", 'n', 0, NULL,
        "fail at once when the lock is busy (flock's\n"
        "--nb, --nonblock, --nonblocking also work)",
        .type = T_SET_MS, AT(wait_ms), .value = 0, .aliases = "nb nonblock nonblocking"),
    OPT_DEF("wait", 'w', F_ARG, "DUR",
            "wait at most DUR for the lock, and for a server\n"
            "that cannot serve yet (default: forever)",
            -1, DURATION(wait_ms, 0), .modes = IN_WAITS),
    OPT("timeout", 0, F_ARG, "DUR", "same as --wait", DURATION(wait_ms, 0), .modes = IN_WAITS),
    OPT_DEF("conflict-exit-code", 'E', F_ARG, "N",
            "exit status when the lock is not acquired\n(default 75; 0: skip silently)",
            RL_EX_CONFLICT, INT(conflict_exit, 0, 255), .modes = IN_RUNS | IN(MODE_STATUS)),
    OPT_DEF("ttl", 't', F_ARG, "DUR", "lease length, renewed every ttl/3 (default 30s)", 30000,
            DURATION(lock.ttl_ms, 100), .modes = IN_RELEASES),
    OPT("on-lost", 0, F_ARG, "ACTION",
        "when the lease can no longer be guaranteed: term,\n"
        "kill, a signal name, or ignore (default term)",
        SPECIAL(opt_on_lost), .def_text = "term", .modes = IN(MODE_RUN), .not_read = ACTS),
    OPT("warn", 0, F_ARG, "SIGNAL",
        "send SIGNAL once to the command's group when a\n"
        "renewal is a third of the ttl late, before\n"
        "--on-lost acts; a renewal re-arms it (env\n"
        "RLOCK_WARN_SIGNAL tells the command)",
        SPECIAL(opt_warn), .modes = IN_RUNS, .not_read = ACTS),
    OPT_DEF("kill-after", 0, F_ARG, "DUR",
            "grace between the first signal and SIGKILL\n(default 10s)", 10000,
            DURATION(kill_after_ms, 0), .modes = IN(MODE_RUN), .not_read = ACTS),
    OPT("min-hold", 0, F_ARG, "DUR", "keep the lock at least DUR after the command\nstarted",
        DURATION(min_hold_ms, 0), .modes = IN(MODE_RUN), .not_read = ACTS),
    OPT("once-per", 0, F_ARG, "DUR",
        "after the command succeeds, skip later runs\n"
        "for DUR (exit as -E, say when it ends); a\n"
        "failed run marks nothing (exclusive, one -k);\n"
        "--release --once-per DUR marks an --acquire's",
        DURATION(lock.once_per_ms, 0), .modes = IN_RELEASES),
    OPT("lock-delay", 0, F_ARG, "DUR",
        "if the lease ends without a release (a crash,\n"
        "a lost lease, --break), keep the name closed\n"
        "DUR more: a stalled holder cannot race the next",
        DURATION(lock.delay_ms, 0), .modes = IN_RUNS),
    OPT("max-hold", 0, F_ARG, "DUR",
        "stop the command after DUR as timeout(1) does,\n"
        "release, exit 124 (137 if it took SIGKILL;\n0: no limit)",
        DURATION(max_hold_ms, 0), .modes = IN_RUNS, .not_read = ACTS),
    OPT("supersede", 0, F_RUN, NULL,
        "wait as the newest request only: a newer\n"
        "--supersede takes this one's place, which then\n"
        "exits 80 (exclusive, not --fair; one server,\n"
        "not Redlock)",
        SWITCH(lock.supersede, 1), .modes = IN_RUNS),
    OPT_DEF("superseded-exit-code", 0, F_ARG, "N",
            "exit status when superseded (default 80;\n0: a skipped job passes)", RL_EX_SUPERSEDED,
            INT(superseded_exit, 0, 255), .modes = IN_RUNS),
    OPT("preempt", 0, F_RUN, NULL,
        "ask a --preemptible holder to stop its command\n"
        "and release; then take the lock",
        SWITCH(lock.preempt, 1), .modes = IN_RUNS),
    OPT("preemptible", 0, F_RUN, NULL,
        "let a --preempt request stop the command (as\n"
        "on a lost lease: --warn, then --on-lost), exit 81",
        SWITCH(lock.preemptible, 1), .modes = IN(MODE_RUN)),
    OPT_HIDDEN("history", F_ARG | F_CONFIG | F_DEF, INT(lock.history_len, 0, 1000000), .def = 100),
    OPT_HIDDEN("history-retention", F_ARG | F_CONFIG | F_DEF, DURATION(lock.history_ms, 1000),
               .def = 7 * 86400000LL),
    OPT("label", 0, F_ARG | F_RUN, "TEXT",
        "why the lock is held (e.g. a CI job URL), shown\nby --status, --list and waiters",
        STRING(label, LOCK_LABEL_MAX), .modes = IN_RELEASES | IN(MODE_BREAK) | IN(MODE_RESET)),
    OPT("command", 'c', F_ARG | F_RUN, "STR", "run STR with /bin/sh -c", STRING(shell_command, 0),
        .modes = IN(MODE_RUN)),
    HEADING("Server:"),
    OPT("url", 'u', F_ARG, "URL",
        "redis://[[user]:password@]host[:port][/db],\n"
        "rediss://..., unix:///path[?db=N],\n"
        "redis-sentinel://[[user]:password@]host:port\n"
        "[,host:port...]/MASTER[/db] (Sentinel; the\n"
        "user and password are the sentinels'); default:\n"
        "env RLOCK_URL, the config file, env REDIS_URL,\n"
        "then redis://127.0.0.1:6379; several (repeated\n"
        "or comma-separated): Redlock on those masters",
        SPECIAL(opt_url)),
    OPT("user", 0, F_ARG | F_NAME, "NAME", "ACL user name", SPECIAL(opt_user)),
    OPT("password-file", 0, F_ARG | F_SECRET | F_PATH, "FILE",
        "read the password from FILE (must not be\n"
        "accessible by others); cred:NAME: the systemd\n"
        "credential NAME; env REDISCLI_AUTH or\n"
        "RLOCK_PASSWORD also work; else, under systemd,\n"
        "$CREDENTIALS_DIRECTORY/rlock-password",
        SPECIAL(opt_password_file), .value = SECRET_DATA),
    OPT("sentinel-user", 0, F_ARG | F_NAME, "NAME", "the sentinels' ACL user name",
        SPECIAL(opt_sentinel_user)),
    OPT("sentinel-password-file", 0, F_ARG | F_SECRET | F_PATH, "FILE",
        "read the sentinels' password from FILE; env\n"
        "RLOCK_SENTINEL_PASSWORD also works",
        SPECIAL(opt_password_file), .value = SECRET_SENTINEL),
    OPT("tls", 0, 0, NULL, "connect with TLS (as rediss://)", SWITCH(tls.enabled, 1)),
    OPT("cacert", 0, F_ARG | F_PATH, "FILE", "CA certificates that verify the server",
        STRING(tls.cacert, 0)),
    OPT("cacertdir", 0, F_ARG | F_PATH, "DIR", "directory of CA certificates",
        STRING(tls.cacertdir, 0)),
    OPT("cert", 0, F_ARG | F_PATH, "FILE", "client certificate", STRING(tls.cert, 0)),
    OPT("tls-key", 0, F_ARG | F_PATH, "FILE", "client certificate's private key",
        STRING(tls.key, 0)),
    OPT("sni", 0, F_ARG, "NAME", "server name to send and verify", STRING(tls.sni, 255),
        .check = check_sni),
    OPT("insecure", 0, 0, NULL, "do not verify the server's certificate (unsafe)",
        SWITCH(tls.insecure, 1)),
    OPT_DEF("connect-timeout", 0, F_ARG, "DUR", "deadline to connect (default 2s)", 2000,
            DURATION(connect_timeout_ms, 1)),
    OPT_DEF("io-timeout", 0, F_ARG, "DUR", "deadline for each request (default 2s)", 2000,
            DURATION(io_timeout_ms, 1)),
    OPT_DEF("node-timeout", 0, F_ARG | F_REDLOCK, "DUR",
            "Redlock: deadline of each node's reply\n(default 200ms; a -t under about 2.8\n"
            "times it is refused: 600ms by default)",
            200, DURATION(node_timeout_ms, 1)),
    OPT("wait-replicas", 0, F_ARG, "N",
        "after acquiring, wait (up to --io-timeout) until\n"
        "N replicas have the lock; else release, exit 69;\n"
        "the release too (else a warning: not confirmed)",
        INT(wait_replicas, 0, 1000), .modes = IN_RELEASES | IN(MODE_CHECK)),
    OPT("wait-aof", 0, F_ARG, "L[,R]",
        "after acquiring, WAITAOF (up to --io-timeout)\n"
        "until the lock is in the AOF of the master (L=1)\n"
        "and of R replicas; else (or no WAITAOF, AOF\n"
        "off) release, exit 69; a release that writes a\n"
        "--once-per mark or --min-hold keep too (else a\n"
        "warning: not confirmed)",
        SPECIAL(opt_wait_aof), .modes = IN_RELEASES | IN(MODE_CHECK)),
    OPT("config", 0, F_ARG | F_RUN, "FILE",
        "config file instead of the layers (default:\n"
        "$RLOCK_CONFIG; '' or /dev/null: none); the layers,\n"
        "merged key by key, later wins: /etc/rlock.conf,\n"
        "$XDG_CONFIG_DIRS/rlock/config,\n"
        "$XDG_CONFIG_HOME/rlock/config",
        .type = T_NONE),
    OPT_HIDDEN("password", F_ARG | F_CONFIG | F_SECRET, SPECIAL(opt_password),
               .value = SECRET_DATA),
    OPT_HIDDEN("eviction-warning", F_ARG | F_CONFIG, SPECIAL(opt_eviction_warning),
               AT(eviction_warning), .def_text = "on"),
    OPT_HIDDEN("sentinel-password", F_ARG | F_CONFIG | F_SECRET, SPECIAL(opt_password),
               .value = SECRET_SENTINEL),
    HEADING("Across steps (a detached keeper holds the lock):"),
    OPT("acquire", 0, F_RUN, NULL,
        "take NAME, leave a keeper renewing it, print\nRLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE for "
        "eval\n(not held: a line that gives eval the status)",
        SPECIAL(opt_mode), .value = MODE_ACQUIRE),
    OPT("format", 0, F_ARG | F_RUN, "FMT",
        "--acquire output: sh (default) or github\n(KEY=VALUE lines for $GITHUB_ENV)",
        SPECIAL(opt_format), AT(format_github), .modes = IN(MODE_ACQUIRE)),
    OPT("log-file", 0, F_ARG | F_PATH, "FILE", "the keeper's log (default: syslog)",
        STRING(log_file, 0), .modes = IN(MODE_ACQUIRE)),
    OPT("release", 0, F_RUN, NULL,
        "stop the keeper and release NAME (in the\nholder's mode); 79 if the lock was lost "
        "(or\nthe token is not the holder)",
        SPECIAL(opt_mode), .value = MODE_RELEASE),
    OPT("token", 0, F_ARG | F_RUN, "TOKEN",
        "--release, --held: the holder's token (default:\n$RLOCK_TOKEN); --break: break only "
        "that holder\n(else nothing, exit 79)",
        STRING(token, 0), .check = check_token,
        .modes = IN(MODE_RELEASE) | IN(MODE_HELD) | IN(MODE_BREAK)),
    OPT("held", 0, F_RUN, NULL,
        "inside the job: exit 0 if its token still holds\n"
        "the lock ($RLOCK_KEY, every lock of $RLOCK_KEYS;\n"
        "-k NAME: that one, with --token TOKEN or the\n"
        "job's token of it), 79 if not, 69 if Redis\n"
        "cannot say; one read, no change",
        SPECIAL(opt_mode), .value = MODE_HELD),
    HEADING("Events and metrics:"),
    OPT("events", 0, F_ARG | F_PATH, "FILE",
        "append one JSON line per event (waiting,\n"
        "acquired, busy, renew-failed, warned, lost,\n"
        "preempted, released, superseded, failed,\n"
        "keeper-*) to FILE; - for stderr",
        STRING(events_file, 0), .modes = IN_RELEASES, .not_read = RECORDS),
    OPT("metrics-file", 0, F_ARG | F_PATH, "PATH",
        "write the run's metrics to PATH (Prometheus\n"
        "textfile format), atomically, when acquired\n"
        "and at exit; other keys' series are kept",
        STRING(metrics_file, 0), .modes = IN_RELEASES, .not_read = RECORDS),
    HEADING("Operator:"),
    OPT("status", 0, F_RUN, NULL,
        "show who holds NAME; exit 0 if free, 75 (or the\n"
        "non-zero -E) if held (or closed, reserved, or\n"
        "--fair waiters go first)",
        SPECIAL(opt_mode), .value = MODE_STATUS),
    OPT("break", 0, F_RUN, NULL,
        "force-release NAME and wake its waiters; also\n"
        "removes a --preempt reservation (recorded)",
        SPECIAL(opt_mode), .value = MODE_BREAK),
    OPT("reset", 0, F_RUN, NULL,
        "clear NAME's marks: a --lock-delay that keeps\n"
        "it closed, the --once-per window; never a\n"
        "live holder or a --preempt reservation\n"
        "(--break); recorded in --history",
        SPECIAL(opt_mode), .value = MODE_RESET),
    OPT("history", 0, F_RUN, NULL,
        "show NAME's runs and supersessions, newest\n"
        "first (-n N: the last N, default 20; config\n"
        "history = N keeps N, 0 none; default 100)",
        SPECIAL(opt_mode), .value = MODE_HISTORY),
    OPT("if-fence", 0, F_ARG | F_RUN, "N",
        "--break: only the holder of fence N (with\n"
        "--token: only that token); else nothing, exit 79",
        STRING(if_fence, 24), .check = check_fence, .modes = IN(MODE_BREAK)),
    OPT("list", 0, F_RUN, NULL,
        "list the locks held under the prefix, and the\n"
        "free names an acquire is refused on (closed,\n"
        "reserved, --fair waiters go first)",
        SPECIAL(opt_mode), .value = MODE_LIST),
    OPT("check", 0, F_RUN, NULL,
        "check the deployment (every node): ok/warn/unsafe\n"
        "findings and a verdict (--json: one object);\n"
        "exit 0 ok, 1 warnings, 2 unsafe, 69 unreachable,\n"
        "66 a --cacert, --cert or --tls-key not PEM,\n"
        "64 URLs a run refuses (a database the server\n"
        "does not have, Redlock nodes that are one server),\n"
        "71 no TLS module that loads",
        SPECIAL(opt_mode), .value = MODE_CHECK),
    OPT("json", 0, F_RUN, NULL, "machine-readable --status, --list, --held,\n--check and --history",
        SWITCH(json, 1),
        .modes =
            IN(MODE_STATUS) | IN(MODE_LIST) | IN(MODE_HELD) | IN(MODE_CHECK) | IN(MODE_HISTORY)),
    OPT("verbose", 'v', F_RUN, NULL,
        "say what happens on stderr: server, wait,\n"
        "release (-vv: renewals too)",
        .type = T_COUNT, AT(verbose)),
    OPT("quiet", 'q', F_RUN, NULL, "only errors on stderr", SWITCH(verbose, -1)),
    OPT("help", 'h', F_RUN, NULL,
        "show this help (with --status or another\nmode: the options that mode reads)",
        .type = T_NONE),
    OPT("version", 'V', F_RUN, NULL,
        "show the version of rlock, hiredis and OpenSSL,\nand the license (MIT)", .type = T_NONE),
};
#define NOPTIONS (sizeof options / sizeof options[0])

static const char usage_head[] =
    "Usage: rlock [OPTIONS] -k NAME [--] COMMAND [ARG...]\n"
    "       rlock [OPTIONS] -k NAME -c 'SHELL COMMAND'\n"
    "       rlock [OPTIONS] -k NAME --status [--json]\n"
    "       rlock [OPTIONS] -k NAME --break [--token TOKEN] [--if-fence N]\n"
    "       rlock [OPTIONS] -k NAME --reset\n"
    "       rlock [OPTIONS] -k NAME --history [-n N] [--json]\n"
    "       rlock [OPTIONS] --list [--json]\n"
    "       rlock [OPTIONS] --check [--json]\n"
    "       rlock [OPTIONS] -k NAME --acquire [--format sh|github]\n"
    "       rlock [OPTIONS] -k NAME --release [--token TOKEN]\n"
    "       rlock [OPTIONS] [-k NAME --token TOKEN] --held [--json]\n"
    "\n"
    "Run COMMAND while holding the lock NAME in Redis, so that it runs in one place\n"
    "at a time across machines. The lease is renewed while COMMAND runs and released\n"
    "when it exits; rlock exits with COMMAND's status.\n";

static const char usage_tail[] =
    "\n"
    "Durations: 500ms, 30s, 5m, 2h, 1d, or a bare number of seconds (1.5 allowed).\n"
    "\n"
    "The command gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS (with\n"
    "several locks also RLOCK_KEYS, RLOCK_TOKENS, RLOCK_FENCES). A nested rlock is\n"
    "granted the names its process tree holds already (in a mode at least as strong)\n"
    "and takes the others; one that would wait for its own ancestor exits 64.\n"
    "\n"
    "Exit status:\n"
    "  N        the command's own status; if it died of signal N, rlock dies of\n"
    "           it too (the shell shows 128+N)\n";

#define HELP_COLUMN 30
#define EXIT_COLUMN 11

/* A help text from its table, each '\n' starting a line indented to `column`. */
static void print_text(FILE *f, const char *text, int column)
{
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, "\n");
		fprintf(f, "%.*s\n", (int)len, p);
		p += len;
		if (*p == '\n' && *++p)
			fprintf(f, "%*s", column, "");
	}
}

/* exitcodes.h's table: "  64       usage error: ...", continuation lines indented. */
static void print_exit_table(FILE *f)
{
#define RL_EX_ROW(code, name, shown, meaning) {shown, meaning},
	static const struct {
		const char *shown, *meaning;
	} rows[] = {RL_EXIT_TABLE(RL_EX_ROW)};
#undef RL_EX_ROW

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		if (!rows[i].shown)
			continue;
		fprintf(f, "  %-*s", EXIT_COLUMN - 2, rows[i].shown);
		print_text(f, rows[i].meaning, EXIT_COLUMN);
	}
}

/* Whether --help for `mode` (a mode's row; NULL: every mode) shows row d: the options
 * the mode reads (the table's .modes), not the other modes' switches. */
static int help_shows(const struct optdef *d, const struct optdef *mode)
{
	if (!d->help)
		return 0;
	if (!mode)
		return 1;
	if (d->set == opt_mode)
		return d == mode;
	return !d->modes || (d->modes & IN(mode->value));
}

/* --help; after (or before) a mode's option, only the options that mode reads (the
 * others are refused there, 64): `rlock --status --help`. The completions are drawn
 * from it (scripts/completion-modes). */
static void print_help(FILE *f, const struct optdef *mode)
{
	fputs(usage_head, f);
	if (mode)
		fprintf(f, "\nThe options --%s reads (any other is refused, 64):\n", mode->name);
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct optdef *d = &options[i];
		char left[64];
		if (d->heading) {
			size_t j = i + 1;
			while (j < NOPTIONS && !options[j].heading &&
			       !help_shows(&options[j], mode))
				j++;
			if (j < NOPTIONS && !options[j].heading)
				fprintf(f, "\n%s\n", d->heading);
			continue;
		}
		if (!help_shows(d, mode))
			continue;
		int n = snprintf(left, sizeof left, "  %c%c%c --%s%s%s", d->letter ? '-' : ' ',
		                 d->letter ? d->letter : ' ', d->letter ? ',' : ' ', d->name,
		                 d->arg ? " " : "", d->arg ? d->arg : "");
		fprintf(f, "%-*s", HELP_COLUMN, left);
		if (n >= HELP_COLUMN - 1)
			fprintf(f, "\n%*s", HELP_COLUMN, "");
		/* --history's -n N is its count, not "fail at once" (count_word) */
		print_text(f,
		           mode && mode->value == MODE_HISTORY && d->letter == 'n'
		               ? "with --history, -n N: the last N records\n(default 20)"
		               : d->help,
		           HELP_COLUMN);
	}
	fputs(usage_tail, f);
	print_exit_table(f);
}

/* getopt_long's value for a row: its short letter, else OPT_VAL_LONG + its index. */
#define OPT_VAL_LONG 256 /* past every char */

static int getopt_val(const struct optdef *d)
{
	return d->letter ? d->letter : OPT_VAL_LONG + (int)(d - options);
}

static const struct optdef *option_by_val(int val)
{
	size_t i = (size_t)(val - OPT_VAL_LONG);

	if (val >= OPT_VAL_LONG)
		return i < NOPTIONS && options[i].name ? &options[i] : NULL;
	for (i = 0; i < NOPTIONS; i++)
		if (options[i].name && (options[i].letter == val || options[i].alias_letter == val))
			return &options[i];
	return NULL;
}

static const struct optdef *option_by_name(const char *name)
{
	for (size_t i = 0; i < NOPTIONS; i++)
		if (options[i].name && !strcmp(options[i].name, name))
			return &options[i];
	return NULL;
}

/* A config file's key: its config-only row first (`history = N` is not --history). */
static const struct optdef *config_option(const char *name)
{
	for (size_t i = 0; i < NOPTIONS; i++)
		if (options[i].name && (options[i].flags & F_CONFIG) &&
		    !strcmp(options[i].name, name))
			return &options[i];
	return option_by_name(name);
}

/* getopt_long's tables, from the option table (an alias is one more entry for its row). */
#define NALIASES 8
static struct option long_opts[NOPTIONS + NALIASES + 1];
static char short_opts[2 * NOPTIONS + NALIASES + 2];
static char alias_names[NALIASES][16];

static void build_getopt_tables(void)
{
	size_t nl = 0, ns = 0, na = 0;

	short_opts[ns++] = '+'; /* stop at the command: its options are its own */
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct optdef *d = &options[i];
		if (!d->name || (d->flags & F_CONFIG))
			continue;
		long_opts[nl++] =
		    (struct option){d->name, d->flags & F_ARG ? required_argument : no_argument,
		                    NULL, getopt_val(d)};
		if (d->letter) {
			short_opts[ns++] = (char)d->letter;
			if (d->flags & F_ARG)
				short_opts[ns++] = ':';
		}
		if (d->alias_letter) {
			short_opts[ns++] = (char)d->alias_letter;
			if (d->flags & F_ARG)
				short_opts[ns++] = ':';
		}
		for (const char *a = d->aliases; a && *a;) {
			size_t len = strcspn(a, " ");
			if (na >= NALIASES || len >= sizeof alias_names[0])
				abort(); /* the table above is wrong */
			memcpy(alias_names[na], a, len);
			alias_names[na][len] = '\0';
			long_opts[nl++] = (struct option){
			    alias_names[na++], d->flags & F_ARG ? required_argument : no_argument,
			    NULL, getopt_val(d)};
			a += len + (a[len] == ' ');
		}
	}
	long_opts[nl] = (struct option){NULL, 0, NULL, 0};
	short_opts[ns] = '\0';
}

/* Where a password or user name came from; a stronger source replaces a weaker one.
 * The order is rlock.conf(5)'s: REDIS_URL (usually the application's own
 * Redis) is below the config file. */
enum rank {
	R_NONE,
	R_REDIS_URL,
	R_CONFIG_URL,
	R_CONFIG,
	R_ENV_URL,
	R_ENV,
	R_CLI_URL,
	R_CLI,
};

struct state {
	struct opts *o;
	const char *url_cli[CLI_URLS_MAX], *url_config;
	char url_config_src[600];
	int url_cli_count;
	int url_pw_seen;           /* a URL of the list had a password (the vault has it) */
	const char *url_user;      /* the first user a URL of the list named */
	int url_tls;               /* the list's first URL: -1 none yet, 1 TLS, 0 not */
	int url_unix;              /* a URL of the list is a Unix socket */
	char url_pw[URL_PASS_MAX]; /* ... this one, while the list is read */
	enum rank pw_rank, user_rank, spw_rank, suser_rank;
	char pw_from[600];    /* where the servers' password came from, for -v (never the secret) */
	const char *mode_opt; /* the long option that chose o->mode ("status"), or NULL */
	int format_given;     /* --format sh|github (the check: no option lookup on a run) */
	const struct optdef *redlock_opt; /* an F_REDLOCK row the command line gave */
	int kind_opt; /* x, s or l: the command line's option that chose the kind of lock, or 0 */
	int config_has_secret;
	unsigned char on_cli[NOPTIONS]; /* the rows the command line gave (not a layer) */
	char url_from[700];             /* where the URL came from, for -v */
	enum rank url_rank;             /* and from which layer */
	int tls_set_aside; /* the config file's TLS (for its own server) gave way to a URL above */
	char user_from[600];   /* where the user came from */
	const char *history_n; /* --history -n N: the command line's N (count_word), or NULL */
	const struct optdef *empty_env; /* an F_EMPTY row's variable, set and empty */
};

static int on_cli(const struct state *s, const char *name);

/* --acquire was asked for with the sh output (seen by the first pass over argv, before
 * any error): a failure here is printed for eval as the keeper's are. */
static int acquire_sh;

static void __attribute__((noreturn)) fail(int status)
{
	if (acquire_sh)
		keeper_print_failure(status);
	exit(status);
}

/* One line on stderr, then exit status. A usage error (64) points to --help; a file
 * named on the command line or in the config that cannot be read (missing,
 * unreadable, not a regular file, a secret others may read: 66) is one class of
 * mistake, one status, and no pointer to --help (the options were right). */
static void cli_error(int status, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
static void cli_error(int status, const char *fmt, ...)
{
	char buf[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	log_error("%s%s", buf, status == RL_EX_USAGE ? " (try 'rlock --help')" : "");
	fail(status);
}
#define usage_error(...) cli_error(RL_EX_USAGE, __VA_ARGS__)
#define input_error(...) cli_error(RL_EX_NOINPUT, __VA_ARGS__)
/* A file that cannot be opened or read (errno e): 66, or 71 when the host is short. */
#define read_error(e, ...) cli_error(rl_ex_file(e), __VA_ARGS__)

static int stdout_closed;

void cli_open_std_fds(void)
{
	/* With fd 0, 1 or 2 closed, the next open() (a Redis socket) would take its number
	 * and our messages would be written into the protocol. */
	for (;;) {
		int fd = open("/dev/null", O_RDWR | O_NOCTTY);
		if (fd < 0) {
			/* Said where stderr is open (stdout or stdin was the closed one; write(2)
			 * to a closed fd 2 is nothing): no /dev/null (a bare chroot, a container).
			 */
			log_error("cannot open /dev/null for a closed standard descriptor: %s",
			          strerror(errno));
			_exit(RL_EX_OSERR);
		}
		if (fd > 2) {
			close(fd);
			return;
		}
		if (fd == STDOUT_FILENO)
			stdout_closed = 1;
	}
}

int cli_stdout_closed(void)
{
	return stdout_closed;
}

static void set_secret(struct state *s, enum secret_slot slot, const char *pw, size_t len,
                       enum rank rank, const char *src)
{
	static int registered;
	enum rank *have = slot == SECRET_SENTINEL ? &s->spw_rank : &s->pw_rank;

	if (rank < *have)
		return;
	if (secret_set_slot(slot, pw, len) < 0) {
		log_error("cannot store the password (at most %d bytes)", SECRET_MAX);
		fail(RL_EX_USAGE);
	}
	if (slot == SECRET_SENTINEL) {
		s->o->has_sentinel_password = 1;
	} else {
		s->o->has_password = 1;
		snprintf(s->pw_from, sizeof s->pw_from, "%s", src);
	}
	*have = rank;
	if (!registered) {
		registered = 1;
		atexit(secret_wipe);
	}
}

static void set_password(struct state *s, const char *pw, size_t len, enum rank rank,
                         const char *src)
{
	set_secret(s, SECRET_DATA, pw, len, rank, src);
}

static void set_sentinel_user(struct state *s, const char *user, enum rank rank)
{
	if (rank < s->suser_rank)
		return;
	s->o->sentinel_user = user;
	s->suser_rank = rank;
}

static void set_user(struct state *s, const char *user, enum rank rank, const char *src)
{
	if (rank < s->user_rank)
		return;
	s->o->user = user;
	s->user_rank = rank;
	snprintf(s->user_from, sizeof s->user_from, "%s", src);
}

/* Open a config or password file without blocking (a FIFO would hang us forever),
 * refuse anything but a regular file, and one that another user can change (ssh's rule,
 * userfile.h: a layer that can name the server, a password file, the files rlock
 * writes, must come from root or the user). Returns the fd, or -1 with errno ENOENT
 * when missing_ok and the file does not exist; exits 66 otherwise. */
static int open_regular(const char *what, const char *path, const char *src, struct stat *st,
                        int missing_ok)
{
	char why[300];
	int fd = userfile_read(path, UF_REG, st, why, sizeof why);

	if (fd < 0 && missing_ok && errno == ENOENT)
		return -1;
	if (fd < 0 && errno == EINVAL)
		input_error("%s%s%s '%s' %s", src ? src : "", src ? ": " : "", what, path, why);
	if (fd < 0)
		read_error(errno, "%s%scannot read %s '%s': %s", src ? src : "", src ? ": " : "",
		           what, path, why);
	if (userfile_trusted(path, st, why, sizeof why) < 0) {
		close(fd);
		input_error("%s%s%s '%s' %s: refused (it must be root's or yours, and writable by "
		            "nobody else)",
		            src ? src : "", src ? ": " : "", what, path, why);
	}
	return fd;
}

/* A file holding a secret: others must have no access at all; its group may read it
 * (a shared /etc/rlock.conf, 0640 root:rlock) but not change it. */
static void check_secret_mode(const char *what, const char *path, const char *src,
                              const struct stat *st)
{
	unsigned mode = (unsigned)(st->st_mode & 0777);

	if (mode & S_IRWXO)
		input_error("%s%s%s '%s' holds a password and is accessible by others (mode "
		            "%03o); chmod o-rwx it",
		            src ? src : "", src ? ": " : "", what, path, mode);
	if (mode & S_IWGRP)
		input_error("%s%s%s '%s' holds a password and is writable by its group (mode "
		            "%03o); chmod g-w it",
		            src ? src : "", src ? ": " : "", what, path, mode);
}

/* $CREDENTIALS_DIRECTORY names a directory for every run under it (systemd's is
 * absolute): a relative one would name another in each directory a command changes
 * to, as a relative RLOCK_CONFIG would. 64, one line. */
static void credentials_absolute(const char *dir)
{
	if (dir[0] != '/')
		usage_error("CREDENTIALS_DIRECTORY: '%.200s' is not an absolute path (systemd "
		            "sets an absolute one)",
		            dir);
}

/* A systemd credential (LoadCredential=, SetCredential=): the file NAME in
 * $CREDENTIALS_DIRECTORY, into path. NAME is one file name, never a path. */
static void credential_path(char *path, size_t n, const char *name, const char *src)
{
	const char *dir = getenv("CREDENTIALS_DIRECTORY");

	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		usage_error("%s: cred:NAME takes the name of a systemd credential, not '%.100s'",
		            src, name);
	if (!dir || !*dir)
		usage_error("%s: cred:%.100s needs $CREDENTIALS_DIRECTORY (systemd's "
		            "LoadCredential=), which is not set",
		            src, name);
	credentials_absolute(dir);
	if ((size_t)snprintf(path, n, "%s/%s", dir, name) >= n)
		usage_error("%s: $CREDENTIALS_DIRECTORY is too long", src);
}

/* The password in the file path (cred:NAME: a systemd credential); with missing_ok, a
 * file that does not exist is 0 (nothing read), else 1. */
static int read_password_file(struct state *s, const char *path, const char *src, enum rank rank,
                              enum secret_slot slot, int missing_ok)
{
	char buf[URL_PASS_MAX + 2], cred[PATH_MAX], from[600];
	struct stat st;

	snprintf(from, sizeof from, "%s", src);
	if (!strncmp(path, "cred:", 5)) {
		credential_path(cred, sizeof cred, path + 5, src);
		snprintf(from, sizeof from, "%.100s (systemd credential %.400s)", src, cred);
		path = cred;
	}
	int fd = open_regular("password file", path, src, &st, missing_ok);
	if (fd < 0)
		return 0;
	check_secret_mode("password file", path, src, &st);
	/* The whole file, and one byte more when it fills the buffer (then it is too long). */
	size_t got = 0;
	char more = 0;
	for (;;) {
		ssize_t n = got < sizeof buf - 1 ? read(fd, buf + got, sizeof buf - 1 - got)
		                                 : read(fd, &more, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			explicit_bzero(buf, sizeof buf);
			read_error(e, "%s: cannot read '%s': %s", src, path, strerror(e));
		}
		if (n == 0)
			break;
		if (got == sizeof buf - 1) {
			got = sizeof buf; /* more than fits */
			break;
		}
		got += (size_t)n;
	}
	explicit_bzero(&more, sizeof more);
	close(fd);
	/* One line: the password, then at most line ends (LF, CR LF, a blank line after).
	 * A NUL byte or a second line means the file is not what its author thinks (a
	 * binary, a user name and a password): never log in with a part of it. */
	if (got < sizeof buf)
		buf[got] = '\0';
	size_t len = got < sizeof buf ? strcspn(buf, "\r\n") : 0;
	size_t end = len;
	while (end < got && (buf[end] == '\r' || buf[end] == '\n'))
		end++;
	if (len == 0 || len > URL_PASS_MAX - 1 || end != got) {
		explicit_bzero(buf, sizeof buf);
		usage_error(
		    "%s: password file '%s' must hold one line of 1..%d bytes (no NUL byte, "
		    "nothing after it)",
		    src, path, URL_PASS_MAX - 1);
	}
	set_secret(s, slot, buf, len, rank, from);
	explicit_bzero(buf, sizeof buf);
	return 1;
}

/* Under systemd with LoadCredential=rlock-password:..., and no password given anywhere
 * else (the command line, the environment, the config file, a URL): the credential. */
static void credential_password(struct state *s)
{
	const char *dir = getenv("CREDENTIALS_DIRECTORY");
	char path[PATH_MAX];

	if (s->o->has_password || !dir || !*dir)
		return;
	credentials_absolute(dir);
	if ((size_t)snprintf(path, sizeof path, "%s/rlock-password", dir) >= sizeof path)
		return;
	read_password_file(s, path, "$CREDENTIALS_DIRECTORY/rlock-password", R_NONE, SECRET_DATA,
	                   1);
}

/* ---- applying an option ------------------------------------------------------------ */

static void *target(struct state *s, const struct optdef *d)
{
	return (char *)s->o + d->off;
}

static int64_t duration_arg(const struct optdef *d, const char *src, const char *val)
{
	int64_t ms;
	char err[200];

	if (parse_duration(val, &ms, err, sizeof err) < 0)
		usage_error("%s: %s", src, err);
	if (ms < d->min && d->min == 1)
		usage_error("%s: must be more than 0", src);
	if (ms < d->min)
		usage_error("%s: the %s must be at least %lldms, not '%s'", src, d->name, d->min,
		            val);
	return ms;
}

static int int_arg(const struct optdef *d, const char *src, const char *val)
{
	long long n;
	char err[200];

	if (parse_int(val, d->min, d->max, &n, err, sizeof err) < 0)
		usage_error("%s: %s", src, err);
	return (int)n;
}

static const char *string_arg(const struct optdef *d, const char *src, const char *val)
{
	char err[200];

	if (d->check && d->check(val, err, sizeof err) < 0)
		usage_error("%s: %s", src, err);
	if (d->max && strlen(val) > (size_t)d->max)
		usage_error("%s: at most %lld bytes", src, d->max);
	return val;
}

/* Apply one option from the command line (src "--ttl"), the environment (src
 * "RLOCK_PREFIX"), the config file (src "FILE:LINE") or its default (src "default").
 * `cli` tells the command line from the rest, for the precedence of secrets. */
static void apply(struct state *s, const struct optdef *d, const char *val, const char *src,
                  int cli)
{
	void *t = target(s, d);

	if (cli)
		s->on_cli[d - options] = 1;
	if (cli && (d->flags & F_REDLOCK))
		s->redlock_opt = d;
	/* An empty path or name names nothing: said here, as every other bad value, not
	 * found later as a file that cannot be read or a server that refuses the login.
	 * (A config file's empty value and an empty variable never get here.) */
	if ((d->flags & (F_PATH | F_NAME)) && val && !*val)
		usage_error("%s: empty %s", src, d->flags & F_PATH ? "path" : "name");
	switch (d->type) {
	case T_NONE:
		break;
	case T_SWITCH:
		*(int *)t = (int)d->value;
		break;
	case T_SET_MS:
		*(int64_t *)t = d->value;
		break;
	case T_COUNT:
		*(int *)t = *(int *)t < 0 ? 1 : *(int *)t + 1;
		break;
	case T_STRING:
		*(const char **)t = string_arg(d, src, val);
		break;
	case T_DURATION:
		*(int64_t *)t = duration_arg(d, src, val);
		break;
	case T_INT:
		*(int *)t = int_arg(d, src, val);
		break;
	case T_SPECIAL:
		d->set(s, d, val, src, cli);
		break;
	}
}

/* Every target starts at its row's default (*o is zero on entry). */
static void apply_defaults(struct state *s)
{
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct optdef *d = &options[i];
		if (d->def_text)
			apply(s, d, d->def_text, "default", 0);
		else if ((d->flags & F_DEF) && d->type == T_DURATION)
			*(int64_t *)target(s, d) = d->def;
		else if (d->flags & F_DEF)
			*(int *)target(s, d) = (int)d->def;
	}
}

/* The environment layer: the rows that name a variable (besides the URL and the
 * passwords, which have precedences of their own). */
static void apply_env(struct state *s)
{
	for (size_t i = 0; i < NOPTIONS; i++) {
		const char *e = options[i].env ? getenv(options[i].env) : NULL;
		if (e && !*e && (options[i].flags & F_EMPTY))
			s->empty_env = &options[i]; /* 64 unless the command line gives it */
		else if (e && *e)
			apply(s, &options[i], e, options[i].env, 0);
	}
}

/* ---- the special options ------------------------------------------------------------ */

static void opt_key(struct state *s, const struct optdef *d, const char *val, const char *src,
                    int cli)
{
	struct opts *o = s->o;
	char err[200];

	(void)d, (void)cli;
	if (parse_lock_name(val, err, sizeof err) < 0)
		usage_error("%s: %s", src, err);
	for (int i = 0; i < o->nnames; i++)
		if (!strcmp(o->names[i], val))
			usage_error("%s: lock '%s' is given twice", src, val);
	if (o->nnames == OPTS_NAMES_MAX)
		usage_error("%s: at most %d locks at once", src, OPTS_NAMES_MAX);
	o->names[o->nnames++] = val;
	o->name = val;
}

/* -x, -s, -l N: one kind of lock on the command line; it beats a config file's
 * `exclusive` (the only kind a config file may name), as every option does. */
static void opt_kind(struct state *s, const struct optdef *d, const char *val, const char *src,
                     int cli)
{
	if (cli && s->kind_opt && s->kind_opt != d->letter)
		usage_error("-%c and -%c do not go together", s->kind_opt, d->letter);
	if (cli)
		s->kind_opt = d->letter;
	s->o->kind = (int)d->value;
	if (d->flags & F_ARG)
		s->o->lock.limit = int_arg(d, src, val);
}

static void opt_warn(struct state *s, const struct optdef *d, const char *val, const char *src,
                     int cli)
{
	char err[200];

	(void)d, (void)cli;
	if (!strcasecmp(val, "none")) {
		s->o->warn_signal = 0;
		return;
	}
	if (parse_signal(val, &s->o->warn_signal, err, sizeof err) < 0)
		usage_error("%s: '%s' is not a signal name (or none)", src, val);
	if (s->o->warn_signal == SIGKILL || s->o->warn_signal == SIGSTOP)
		usage_error("%s: the warning must be a signal the command can catch, not %s", src,
		            val);
}

/* --wait-aof LOCAL[,REPLICAS]: LOCAL 0 or 1 (WAITAOF's numlocal), REPLICAS 0..1000;
 * "0" (or "0,0"): not asked. */
static void opt_wait_aof(struct state *s, const struct optdef *d, const char *val, const char *src,
                         int cli)
{
	char *end;
	long rep = 0;

	(void)d, (void)cli;
	if ((val[0] != '0' && val[0] != '1') || (val[1] && val[1] != ','))
		usage_error("%s: '%s' is not LOCAL[,REPLICAS] (LOCAL 0 or 1, REPLICAS 0..1000)",
		            src, val);
	if (val[1] == ',') {
		errno = 0;
		rep = strtol(val + 2, &end, 10);
		if (val[2] < '0' || val[2] > '9' || *end || errno || rep > 1000)
			usage_error(
			    "%s: '%s' is not LOCAL[,REPLICAS] (LOCAL 0 or 1, REPLICAS 0..1000)",
			    src, val);
	}
	s->o->wait_aof_local = val[0] - '0';
	s->o->wait_aof_replicas = (int)rep;
}

static void opt_on_lost(struct state *s, const struct optdef *d, const char *val, const char *src,
                        int cli)
{
	struct opts *o = s->o;
	char err[200];

	(void)d, (void)cli;
	if (!strcasecmp(val, "term")) {
		o->on_lost = LOST_TERM;
		o->lost_signal = SIGTERM;
	} else if (!strcasecmp(val, "kill")) {
		o->on_lost = LOST_KILL;
		o->lost_signal = SIGKILL;
	} else if (!strcasecmp(val, "ignore")) {
		o->on_lost = LOST_IGNORE;
	} else {
		int sig;
		if (parse_signal(val, &sig, err, sizeof err) < 0)
			usage_error("%s: '%s' is not term, kill, ignore or a signal name", src,
			            val);
		o->on_lost = LOST_SIGNAL;
		o->lost_signal = sig;
	}
}

#define URL_MAX_TEXT 2048
static int url_list_has_password(const char *list);
static int sentinel_url(const char *s);

/* --url: the command line's are kept for choose_url(); the config file's is checked at
 * once, even when the environment overrides it: a broken config file is reported, not
 * silently carried around. */
static void opt_url(struct state *s, const struct optdef *d, const char *val, const char *src,
                    int cli)
{
	(void)d;
	if (cli) {
		if (s->url_cli_count >= CLI_URLS_MAX)
			usage_error("--url: at most %d servers", CLI_URLS_MAX);
		s->url_cli[s->url_cli_count++] = val;
		return;
	}
	/* each URL of a list (a Redlock's masters), as add_url_list() reads it */
	char err[300], one[URL_MAX_TEXT];
	struct url probe;
	size_t n;
	for (const char *p = val;; p += n + 1) {
		n = sentinel_url(val) ? strlen(p) : strcspn(p, ",");
		if (n == 0)
			usage_error("%s: empty URL in the list", src);
		if (n >= sizeof one)
			usage_error("%s: URL too long", src);
		memcpy(one, p, n);
		one[n] = '\0';
		int rc = parse_url(one, &probe, err, sizeof err);
		explicit_bzero(one, sizeof one);
		explicit_bzero(&probe, sizeof probe);
		if (rc < 0)
			usage_error("%s: %s", src, err);
		if (!p[n])
			break;
	}
	s->url_config = val;
	snprintf(s->url_config_src, sizeof s->url_config_src, "%s", src);
}

static void opt_user(struct state *s, const struct optdef *d, const char *val, const char *src,
                     int cli)
{
	(void)d, (void)src;
	set_user(s, val, cli ? R_CLI : R_CONFIG, src);
}

static void opt_sentinel_user(struct state *s, const struct optdef *d, const char *val,
                              const char *src, int cli)
{
	(void)d, (void)src;
	set_sentinel_user(s, val, cli ? R_CLI : R_CONFIG);
}

static void opt_password_file(struct state *s, const struct optdef *d, const char *val,
                              const char *src, int cli)
{
	read_password_file(s, val, src, cli ? R_CLI : R_CONFIG, (enum secret_slot)d->value, 0);
}

/* password = / sentinel-password = in a config file (F_CONFIG: never on the command
 * line, where ps would show it). */
static void opt_password(struct state *s, const struct optdef *d, const char *val, const char *src,
                         int cli)
{
	(void)src, (void)cli;
	set_secret(s, (enum secret_slot)d->value, val, strlen(val), R_CONFIG, src);
	s->config_has_secret = 1;
}

/* eviction-warning = off: the operator acknowledged the server's eviction policy. */
static void opt_eviction_warning(struct state *s, const struct optdef *d, const char *val,
                                 const char *src, int cli)
{
	(void)cli;
	if (!strcmp(val, "off") || !strcmp(val, "no") || !strcmp(val, "false"))
		*(int *)target(s, d) = 0;
	else if (!strcmp(val, "on") || !strcmp(val, "yes") || !strcmp(val, "true"))
		*(int *)target(s, d) = 1;
	else
		usage_error("%s: eviction-warning is 'on' or 'off', not '%.100s'", src, val);
}

/* --status, --break, --list, --acquire, --release: one mode. */
static void opt_mode(struct state *s, const struct optdef *d, const char *val, const char *src,
                     int cli)
{
	(void)val, (void)src, (void)cli;
	if (s->mode_opt && s->o->mode != (enum mode)d->value)
		usage_error("--%s and --%s do not go together", s->mode_opt, d->name);
	s->o->mode = (enum mode)d->value;
	s->mode_opt = d->name;
}

static void opt_format(struct state *s, const struct optdef *d, const char *val, const char *src,
                       int cli)
{
	(void)cli;
	if (strcmp(val, "sh") != 0 && strcmp(val, "github") != 0)
		usage_error("%s: '%.100s' is not sh or github", src, val);
	s->format_given = 1; /* F_RUN: the command line's */
	*(int *)target(s, d) = !strcmp(val, "github");
}

/* ---- config file ------------------------------------------------------------------ */

/* The config files, lowest layer first, into paths (at most CONFIG_LAYERS_MAX): --config
 * or $RLOCK_CONFIG names one file instead of the layers (*explicit: it must exist;
 * $RLOCK_CONFIG's must be absolute, else 64), and an empty $RLOCK_CONFIG or /dev/null
 * none at all; else /etc/rlock.conf, then rlock/config in each $XDG_CONFIG_DIRS
 * directory (default /etc/xdg; the first named is the most important, so read last),
 * then $XDG_CONFIG_HOME/rlock/config (default ~/.config): merged key by key, the later
 * wins (as git and systemd do). */
#define CONFIG_LAYERS_MAX 10
#define CONFIG_PATH_MAX   4096

/* paths[*n++] = a path made from fmt, packed after the last one in pool (the pages a run
 * writes are each a page fault), unless it is CONFIG_PATH_MAX bytes or longer. */
static void __attribute__((format(printf, 5, 6)))
add_layer(const char **paths, int *n, char *pool, size_t *used, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int len = vsnprintf(pool + *used, CONFIG_PATH_MAX, fmt, ap);
	va_end(ap);
	if (len < 0 || len >= CONFIG_PATH_MAX)
		return;
	paths[(*n)++] = pool + *used;
	*used += (size_t)len + 1;
}

static int config_layers(const char *cli_path, const char **paths, int *explicit)
{
	static char pool[CONFIG_LAYERS_MAX * CONFIG_PATH_MAX];
	size_t used = 0;
	const char *env = getenv("RLOCK_CONFIG"), *one = cli_path ? cli_path : env;
	int n = 0;

	/* The variable reaches every run under it, the command's nested ones too: a
	 * relative path would name another file in a command that changes directory (as
	 * a path in a config file would, which must be absolute too). */
	if (!cli_path && env && *env && env[0] != '/')
		usage_error("RLOCK_CONFIG: '%.200s' is not an absolute path (it reaches runs in "
		            "other directories: a nested rlock would read another file); give "
		            "an absolute one, or --config",
		            env);
	*explicit = one != NULL;
	if (one) {
		if (*one && strcmp(one, "/dev/null") != 0)
			paths[n++] = one;
		return n;
	}
	paths[n++] = "/etc/rlock.conf";
	const char *dirs = getenv("XDG_CONFIG_DIRS");
	if (!dirs || !*dirs)
		dirs = "/etc/xdg";
	/* Room for the first directories named, the most important: those past it are
	 * said, never dropped unseen (the last ones read instead, with a lower rank). */
	const int room = CONFIG_LAYERS_MAX - 2; /* /etc/rlock.conf and the user's */
	const char *cut = NULL;                 /* the first directory not read */
	int total = 0;
	for (const char *p = dirs; *p;) {
		size_t len = strcspn(p, ":");
		if (p[0] == '/' && total++ == room)
			cut = p;
		p += len + (p[len] == ':');
	}
	if (cut)
		log_warn("XDG_CONFIG_DIRS names %d directories: the config files of the first %d "
		         "are read, not from %.*s on",
		         total, room, (int)strcspn(cut, ":"), cut);
	for (const char *end = cut ? cut - 1 : dirs + strlen(dirs);
	     end > dirs && n < CONFIG_LAYERS_MAX - 1;) {
		const char *start = end;
		while (start > dirs && start[-1] != ':')
			start--;
		if (start[0] == '/') /* relative entries are ignored (XDG) */
			add_layer(paths, &n, pool, &used, "%.*s/rlock/config", (int)(end - start),
			          start);
		end = start > dirs ? start - 1 : start;
	}
	const char *xdg = getenv("XDG_CONFIG_HOME");
	if (xdg && xdg[0] == '/') { /* a relative one is ignored (XDG), as in XDG_CONFIG_DIRS */
		add_layer(paths, &n, pool, &used, "%s/rlock/config", xdg);
		return n;
	}
	/* ~ from $HOME; the account's home (an NSS look-up) only when it is unset or
	 * relative (a relative XDG_CONFIG_HOME is ignored too) */
	const char *home = getenv("HOME");
	if (!home || home[0] != '/') {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (home)
		add_layer(paths, &n, pool, &used, "%s/.config/rlock/config", home);
	return n;
}

/* Config values live as long as the process; kept reachable here (a value set twice
 * is not a leak). */
static char **kept;
static size_t nkept;

static const char *keep_string(const char *v)
{
	char **grown = realloc(kept, (nkept + 1) * sizeof *kept);
	char *copy = strdup(v);

	if (!grown || !copy) {
		log_error("out of memory");
		fail(RL_EX_SOFTWARE);
	}
	kept = grown;
	kept[nkept++] = copy;
	return copy;
}

/* A flag's value in a config file: 1 on, 0 off, -1 neither. */
static int flag_value(const char *v)
{
	static const char *const on[] = {"true", "yes", "on", "1"};
	static const char *const off[] = {"false", "no", "off", "0"};

	if (!v)
		return 1;
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, on[i]))
			return 1;
		if (!strcasecmp(v, off[i]))
			return 0;
	}
	return -1;
}

static void load_config(struct state *s, const char *path, int explicit_path)
{
	struct stat st = {0};
	char line[4096], iobuf[8192];
	int lineno = 0;
	int fd = open_regular("config file", path, NULL, &st, !explicit_path);

	s->config_has_secret = 0; /* this file's own */
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		read_error(errno, "cannot read config file '%s': %s", path, strerror(errno));
	}
	/* Our own stdio buffer, so the file's bytes (maybe a password) can be wiped. */
	setvbuf(f, iobuf, _IOFBF, sizeof iobuf);
	for (long at = ftell(f); fgets(line, sizeof line, f); at = ftell(f)) {
		char src[600], err[300], *key, *val;
		lineno++;
		snprintf(src, sizeof src, "%.500s:%d", path, lineno);
		/* fgets reads on past a NUL byte, which would end the line unseen */
		if (at >= 0 && ftell(f) - at > (long)strlen(line))
			usage_error("%s: a NUL byte in the line (not a text file?)", src);
		if (!strchr(line, '\n') && !feof(f))
			usage_error("%s: line too long", src);
		/* A UTF-8 byte order mark (a Windows editor's) starts the text, as git config
		 * and systemd read it. */
		char *text = lineno == 1 && !strncmp(line, "\xef\xbb\xbf", 3) ? line + 3 : line;
		int got = parse_config_line(text, &key, &val, err, sizeof err);
		if (got < 0)
			usage_error("%s: %s", src, err);
		if (got == 0)
			continue;
		const struct optdef *d = config_option(key);
		if (!d) {
			/* The name as far as it is one, then its first other byte: the rest may
			 * be a secret ("password:s3cret"). Escaped by the log, once. */
			size_t n =
			    strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                "0123456789-_.");
			usage_error("%s: unknown setting '%.*s%s'", src,
			            (int)(n < 100 ? n + !!key[n] : 100), key, key[n] ? "..." : "");
		}
		if (d->flags & F_RUN)
			usage_error("%s: '%s' is not allowed in a config file (give it on the "
			            "command line)",
			            src, key);
		if ((d->flags & F_ARG) && (!val || !*val) && (d->flags & F_EMPTY))
			usage_error("%s: '%s' needs a value ('%s = VALUE'; for none, give --%s '' "
			            "on the command line)",
			            src, key, key, d->name);
		if ((d->flags & F_ARG) && (!val || !*val))
			usage_error("%s: '%s' needs a value ('%s = VALUE')", src, key, key);
		/* Values stand as written (git config would strip the quotes): a quoted one
		 * keeps them, and a quoted prefix would move this host's keys away from its
		 * fleet's, untold. A secret stands as written whatever it holds; a URL's
		 * parser says it its own way (parse_url). */
		size_t vn = val ? strlen(val) : 0;
		if (vn >= 2 && !(d->flags & F_SECRET) && d->set != opt_url &&
		    (val[0] == '"' || val[0] == '\'') && val[vn - 1] == val[0])
			usage_error(
			    "%s: %s = %.200s: the value is in quotes, which are not removed: "
			    "write it without them",
			    src, key, val);
		if (!(d->flags & F_ARG)) {
			int on = flag_value(val);
			if (on < 0)
				usage_error(
				    "%s: '%s' is a switch: its value is true, yes, on or 1 (on), "
				    "or false, no, off or 0 (off)",
				    src, key);
			if (!on)
				continue;
		}
		if (val && val[0] != '/' && (d->flags & F_PATH) &&
		    !(d->set == opt_password_file && !strncmp(val, "cred:", 5)) &&
		    !(!strcmp(d->name, "events") && !strcmp(val, "-")))
			usage_error(
			    "%s: %s = '%.200s': a path in a config file must be absolute (a "
			    "run may start in any directory)",
			    src, key, (d->flags & F_SECRET) ? "..." : val); /* a password, maybe */
		if (d->set == opt_url && url_list_has_password(val))
			s->config_has_secret = 1;
		if (d->flags & F_SECRET) {
			/* Consumed at once (copied or read): no copy of a secret lingers. */
			apply(s, d, val, src, 0);
			explicit_bzero(line, sizeof line);
			continue;
		}
		/* A plain value's error names the setting, as the command line's names the
		 * option ("FILE:LINE: ttl: bad duration ..."); a setter keeps FILE:LINE, which
		 * it may record as where a URL, a user or a password came from. */
		char vsrc[sizeof src + 64];
		snprintf(vsrc, sizeof vsrc, "%s: %.60s", src, key);
		apply(s, d, val ? keep_string(val) : NULL, d->type == T_SPECIAL ? src : vsrc, 0);
	}
	explicit_bzero(line, sizeof line);
	fclose(f);
	explicit_bzero(iobuf, sizeof iobuf);
	if (s->config_has_secret)
		check_secret_mode("config file", path, NULL, &st);
}

/* ---- validation ------------------------------------------------------------------- */

/* The server, for -v: the URL without its password. */
static void describe_server(char *buf, size_t n, const struct url *u)
{
	char db[24] = "";

	if (u->scheme == URL_UNIX) {
		if (u->db)
			snprintf(db, sizeof db, "?db=%d", u->db);
		snprintf(buf, n, "unix://%s%s", u->path, db);
		return;
	}
	if (u->db)
		snprintf(db, sizeof db, "/%d", u->db);
	if (u->nsentinels) {
		size_t used = (size_t)snprintf(buf, n, "%s://",
		                               u->scheme == URL_SENTINELS ? "rediss-sentinel"
		                                                          : "redis-sentinel");
		for (int i = 0; i < u->nsentinels && used < n; i++)
			used += (size_t)snprintf(
			    buf + used, n - used,
			    strchr(u->sentinel[i].host, ':') ? "%s[%s]:%d" : "%s%s:%d",
			    i ? "," : "", u->sentinel[i].host, u->sentinel[i].port);
		if (used < n)
			snprintf(buf + used, n - used, "/%s%s", u->master, db);
		return;
	}
	snprintf(buf, n, strchr(u->host, ':') ? "%s://[%s]:%d%s" : "%s://%s:%d%s",
	         u->scheme == URL_REDISS ? "rediss" : "redis", u->host, u->port, db);
}

/* A Sentinel URL's commas separate its sentinels, not Redlock servers. */
static int sentinel_url(const char *s)
{
	return strncasecmp(s, "redis-sentinel:", 15) == 0 ||
	       strncasecmp(s, "rediss-sentinel:", 16) == 0;
}

/* Does a URL (or a comma list of them) hold a password? As the URL parser reads one: an
 * '@' alone is not one (a user name, a Unix socket's path). Too long to tell: yes. */
static int url_list_has_password(const char *list)
{
	char one[URL_MAX_TEXT];
	size_t off, len, n;
	int has = 0;

	if (sentinel_url(list))
		return url_password_span(list, &off, &len) && len > 0;
	for (const char *p = list; !has && *p; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		if (n >= sizeof one)
			return 1;
		memcpy(one, p, n);
		one[n] = '\0';
		has = url_password_span(one, &off, &len) && len > 0;
		explicit_bzero(one, n);
	}
	return has;
}

/* Overwrite the password inside each URL of a comma list in place (argv lives in
 * /proc/PID/cmdline): this only narrows the window in which another user could read it
 * there. */
static void scrub_url_list(char *list)
{
	char one[URL_MAX_TEXT];
	size_t off, len;

	if (sentinel_url(list)) {
		if (url_password_span(list, &off, &len))
			memset(list + off, '*', len);
		return;
	}

	for (char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n < sizeof one) {
			memcpy(one, p, n);
			one[n] = '\0';
			if (url_password_span(one, &off, &len))
				memset(p + off, '*', len);
			explicit_bzero(one, n);
		}
		p += n;
		if (*p)
			p++;
	}
}

/* Parse one URL of the list into o->urls[o->nurls]; its password goes to the vault (all
 * of a Redlock's nodes share one password). */
static void add_url(struct state *s, const char *text, size_t n, const char *src, enum rank rank)
{
	struct opts *o = s->o;
	char one[URL_MAX_TEXT], err[300];

	if (o->nurls >= CLI_URLS_MAX)
		usage_error("%s: at most %d servers", src, CLI_URLS_MAX);
	if (n >= sizeof one)
		usage_error("%s: URL too long", src);
	memcpy(one, text, n);
	one[n] = '\0';
	struct url *u = &o->urls[o->nurls];
	int rc = parse_url(one, u, err, sizeof err);
	explicit_bzero(one, sizeof one);
	if (rc < 0)
		usage_error("%s: %s", src, err);
	if (u->nsentinels > 0) {
		/* Sentinels name one master: its own secrets, and never one of a list. */
		if (o->nurls > 0)
			usage_error("%s: a Sentinel URL cannot be one of several servers", src);
		if (u->has_password && rank == R_CLI_URL)
			log_warn("a password on the command line is visible to other users in ps; "
			         "use --sentinel-password-file or RLOCK_SENTINEL_PASSWORD");
		if (u->has_password)
			set_secret(s, SECRET_SENTINEL, u->password, strlen(u->password), rank, src);
		if (u->has_user)
			set_sentinel_user(s, u->user, rank);
		u->has_password = u->has_user = 0;
	}
	if (o->nurls > 0 && o->urls[0].nsentinels > 0)
		usage_error("%s: a Sentinel URL cannot be one of several servers", src);
	if (u->has_password) {
		if (s->url_pw_seen && strcmp(u->password, s->url_pw) != 0) {
			explicit_bzero(u->password, sizeof u->password);
			explicit_bzero(s->url_pw, sizeof s->url_pw);
			usage_error("%s: the Redlock nodes must share one password", src);
		}
		if (rank == R_CLI_URL && !s->url_pw_seen) {
			log_warn("a password on the command line is visible to other users in ps; "
			         "use --password-file or REDISCLI_AUTH");
		}
		if (!s->url_pw_seen)
			set_password(s, u->password, strlen(u->password), rank, src);
		s->url_pw_seen = 1;
		snprintf(s->url_pw, sizeof s->url_pw, "%s", u->password);
	}
	explicit_bzero(u->password, sizeof u->password);
	if (u->has_user) {
		if (s->url_user && strcmp(u->user, s->url_user) != 0)
			usage_error("%s: the Redlock nodes must share one user", src);
		s->url_user = u->user;
		set_user(s, u->user, rank, src);
	}
	/* One TLS setting serves every node: a list that mixes rediss:// with redis:// or
	 * unix:// would speak TLS to a plain server (or plain to a TLS one). */
	int tls = u->scheme == URL_REDISS || u->scheme == URL_SENTINELS;
	s->url_unix |= u->scheme == URL_UNIX;
	if (tls)
		o->tls.enabled = 1;
	if (s->url_unix && o->tls.enabled)
		usage_error("%s: TLS over a Unix socket is not supported", src);
	if (s->url_tls >= 0 && tls != s->url_tls)
		usage_error("%s: the Redlock nodes must all use TLS (rediss://) or none", src);
	s->url_tls = tls;
	o->nurls++;
}

static void add_url_list(struct state *s, const char *list, const char *src, enum rank rank)
{
	if (sentinel_url(list)) {
		add_url(s, list, strlen(list), src, rank);
		return;
	}
	for (const char *p = list;;) {
		size_t n = strcspn(p, ",");
		if (n == 0)
			usage_error("%s: empty URL in the list", src);
		add_url(s, p, n, src, rank);
		p += n;
		if (!*p)
			break;
		p++;
	}
}

/* Redlock counts its nodes as independent masters: two URLs that name one server by
 * the same text (its database aside: one restart empties both) are a usage error. The
 * same server under two names (an alias, an address, its Unix socket) is found by
 * asking each server who it is in the handshake (client.c, quorum.c). */
static void distinct_nodes(const struct opts *o)
{
	for (int i = 1; i < o->nurls; i++)
		for (int j = 0; j < i; j++) {
			const struct url *a = &o->urls[j], *b = &o->urls[i];
			int unix_a = a->scheme == URL_UNIX, unix_b = b->scheme == URL_UNIX;
			if (unix_a != unix_b ||
			    (unix_a ? strcmp(a->path, b->path) != 0
			            : strcasecmp(a->host, b->host) != 0 || a->port != b->port))
				continue;
			char x[URL_MAX_TEXT], y[URL_MAX_TEXT];
			describe_server(x, sizeof x, a);
			describe_server(y, sizeof y, b);
			usage_error(
			    "Redlock nodes must be distinct servers: %s and %s are the same "
			    "server",
			    x, y);
		}
}

static void choose_url(struct state *s)
{
	struct opts *o = s->o;
	const char *url = NULL, *src = NULL;
	enum rank rank = R_NONE;
	const char *e;

	/* A config file's `tls` is its server's (the file names one): a URL from above it
	 * (the command line, RLOCK_URL) says by its scheme whether it is TLS, unless --tls
	 * says so too. A file that names no server sets TLS for whichever the run names. */
	if ((s->url_cli_count > 0 || ((e = getenv("RLOCK_URL")) && *e)) && s->url_config &&
	    !on_cli(s, "tls")) {
		s->tls_set_aside = o->tls.enabled || o->tls.cacert || o->tls.cacertdir ||
		                   o->tls.cert || o->tls.key || o->tls.sni || o->tls.insecure ||
		                   !strncasecmp(s->url_config, "rediss://", 9) ||
		                   !strncasecmp(s->url_config, "rediss-sentinel://", 18);
		o->tls.enabled = 0;
	}
	if (s->url_cli_count > 0) {
		src = "--url";
		rank = R_CLI_URL;
		for (int i = 0; i < s->url_cli_count; i++)
			add_url_list(s, s->url_cli[i], src, rank);
	} else {
		if ((e = getenv("RLOCK_URL")) && *e) {
			url = e;
			src = "RLOCK_URL";
			rank = R_ENV_URL;
		} else if (s->url_config) {
			url = s->url_config;
			src = s->url_config_src;
			rank = R_CONFIG_URL;
		} else if ((e = getenv("REDIS_URL")) && *e) {
			url = e;
			src = "REDIS_URL";
			rank = R_REDIS_URL;
		} else {
			url = "redis://127.0.0.1:6379";
			src = "default URL";
		}
		add_url_list(s, url, src, rank);
	}
	s->url_rank = rank;
	explicit_bzero(s->url_pw, sizeof s->url_pw);
	o->url = &o->urls[0];
	/* The URL strings that are ours keep no plain password once parsed: argv is visible
	 * in /proc/PID/cmdline. The environment is the user's and passes to the command
	 * untouched (docs/usage.md, "The running command"). */
	for (int i = 0; i < s->url_cli_count; i++)
		scrub_url_list((char *)s->url_cli[i]);
	if (s->url_config)
		scrub_url_list((char *)s->url_config);
	if (rank == R_CONFIG_URL)
		snprintf(s->url_from, sizeof s->url_from, "config %s", src);
	else
		snprintf(s->url_from, sizeof s->url_from, "%s", rank == R_NONE ? "default" : src);
}

/* With -v: which server, and where its URL came from. */
static void say_server(struct state *s)
{
	struct opts *o = s->o;

	describe_server(o->server, sizeof o->server, o->url);
	if (o->nurls > 1) {
		size_t used = strlen(o->server);
		snprintf(o->server + used, sizeof o->server - used, " and %d more (Redlock)",
		         o->nurls - 1);
	}
	log_info("server %s%s (URL from %s)", o->server, o->tls.enabled ? " with TLS" : "",
	         s->url_from);
}

/* With -v, and in an authentication failure: where the user and the password came
 * from (never the password). */
static void say_credentials(struct state *s)
{
	struct opts *o = s->o;
	int n = 0;

	o->creds_from[0] = '\0';
	if (o->user)
		n = snprintf(o->creds_from, sizeof o->creds_from, "user from %.250s", s->user_from);
	if (o->has_password && n >= 0 && (size_t)n < sizeof o->creds_from)
		snprintf(o->creds_from + n, sizeof o->creds_from - (size_t)n,
		         "%spassword from %.250s", n ? ", " : "", s->pw_from);
	if (o->creds_from[0])
		log_info("%s", o->creds_from);
}

static void env_passwords(struct state *s)
{
	char *p;

	/* Copied (masked) into the vault; the variables themselves are the user's and stay
	 * as they are, for the command (docs/usage.md, "The running command"). */
	if ((p = getenv("REDISCLI_AUTH")) && *p)
		set_password(s, p, strlen(p), R_ENV, "REDISCLI_AUTH");
	if ((p = getenv("RLOCK_PASSWORD")) && *p)
		set_password(s, p, strlen(p), R_ENV, "RLOCK_PASSWORD");
	if ((p = getenv("RLOCK_SENTINEL_PASSWORD")) && *p)
		set_secret(s, SECRET_SENTINEL, p, strlen(p), R_ENV, "RLOCK_SENTINEL_PASSWORD");
}

static void print_version(void)
{
	char libs[600];

	store_libraries(libs, sizeof libs);
	printf("rlock %s (%s)\n", RLOCK_VERSION, libs);
	printf("License MIT: free to use, copy, modify and distribute; no warranty.\n");
}

/* Is stdout a pipe or socket whose reader has left? errno is EPIPE when the flush
 * itself met it; an earlier write (a large --list) may have, its errno since lost: the
 * write end of such a pipe polls POLLERR. */
static int stdout_reader_gone(int e)
{
	struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};

	return e == EPIPE || (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)));
}

static int close_stdout(int quiet_epipe)
{
	if (stdout_closed) {
		log_error("cannot write to standard output: it is closed");
		return RL_EX_IOERR;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		/* `rlock --list | head -1`: the reader took what it wanted and left; a line
		 * about it is noise (git, coreutils and util-linux say nothing either). */
		int e = errno;
		if (!(quiet_epipe && stdout_reader_gone(e)))
			log_error("cannot write to standard output: %s",
			          e ? strerror(e) : "write error");
		return RL_EX_IOERR;
	}
	return 0;
}

int cli_close_stdout(void)
{
	return close_stdout(1);
}

int cli_close_stdout_told(void)
{
	return close_stdout(0);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* --release's token: --token, else the token the environment gives for -k NAME's key
 * (RLOCK_TOKEN when RLOCK_KEY names it, or is unset; else its word of RLOCK_TOKENS: what
 * --acquire printed, or a job's inherited locks), checked for the shape rlock gives its
 * tokens. RLOCK_TOKEN of another lock (a later --acquire of another name in the same
 * shell) is no token of this one: released with it, the lock would be called lost (79)
 * and its keeper left to hold it. */
static void release_token(struct opts *o)
{
	const char *src = o->token ? "--token" : "RLOCK_TOKEN";
	static struct lock l;             /* large; only its key is used */
	static struct inherited_holds ih; /* large */
	const char *env_key = getenv("RLOCK_KEY");

	if (!o->token && env_key &&
	    lock_init(&l, o->prefix ? o->prefix : "rlock:", o->name, 0) == 0 &&
	    strcmp(env_key, l.key) != 0) {
		inherited_read(&ih);
		for (int i = 0; i < ih.n && !o->token; i++)
			if (strcmp(ih.in[i].key, l.key) == 0)
				o->token = ih.in[i].token;
		if (!o->token && getenv("RLOCK_TOKEN"))
			usage_error(
			    "--release -k %s: RLOCK_TOKEN is the token of %s (RLOCK_KEY), not "
			    "of '%s', and RLOCK_KEYS does not list %s: give --token TOKEN "
			    "(what --acquire -k %s printed)",
			    o->name, env_key, o->name, l.key, o->name);
		src = "RLOCK_TOKENS";
	}
	o->token_env = src[0] != '-'; /* not --token */
	if (!o->token)
		o->token = getenv("RLOCK_TOKEN");
	if (!o->token || !*o->token)
		usage_error("--release needs the holder's token: --token TOKEN or RLOCK_TOKEN (as "
		            "printed by --acquire)");
	size_t n = strspn(o->token, "0123456789abcdef");
	if (n != 32 || o->token[n])
		usage_error("%s: not an rlock token (32 hex digits)", src);
}

/* typed (after "--", up to any '=') abbreviates more than one option (aliases of one
 * option count once): say which, as getopt_long's own message would, in one line. */
static void ambiguous_option(const char *typed)
{
	size_t len = strcspn(typed, "="), n = 0;
	const struct option *fit[16];
	char list[700] = "";

	if (len == 0)
		return;
	for (const struct option *lo = long_opts; lo->name && n < 16; lo++) {
		int again = 0;
		for (size_t i = 0; i < n; i++)
			again |= fit[i]->val == lo->val;
		if (!again && !strncmp(lo->name, typed, len))
			fit[n++] = lo;
	}
	if (n < 2)
		return;
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(list);
		snprintf(list + used, sizeof list - used, "%s--%s",
		         i == 0       ? ""
		         : i + 1 == n ? " or "
		                      : ", ",
		         fit[i]->name);
	}
	usage_error("option '--%.*s' is ambiguous: %s?", (int)(len < 60 ? len : 60), typed, list);
}

/* The option given as argv[optind - 1] needed a value, or was unknown: say which. */
static void bad_option(char **argv)
{
	const char *bad = argv[optind - 1];
	const struct optdef *d;

	if (optopt && optopt < OPT_VAL_LONG && (d = option_by_val(optopt)) && (d->flags & F_ARG) &&
	    bad && bad[0] == '-' && bad[1] != '-')
		usage_error("option -%c needs a value", optopt);
	if (bad && bad[0] == '-' && bad[1] == '-' && !strchr(bad, '=') &&
	    (d = option_by_name(bad + 2)) && (d->flags & F_ARG) && !(d->flags & F_CONFIG))
		usage_error("option --%s needs a value", d->name);
	if (optopt && optopt < OPT_VAL_LONG)
		usage_error("unknown option -%c", optopt);
	if (bad && bad[0] == '-' && bad[1] == '-')
		ambiguous_option(bad + 2);
	usage_error("unknown option '%.100s'", bad ? bad : "?");
}

/* ---- validation: the combinations, once every layer is applied ------------------- */

/* The TLS files, before any traffic: one that cannot be read, is not of its type, or
 * that another user can change (a CA bundle others can write lets them vouch for any
 * server), is the same mistake as such a password file (66), not a server that cannot
 * be reached. Opened as every user-named file is: without blocking (userfile.h). */
/* A file OpenSSL will read for the trust store (type UF_REG or UF_DIR), named by opt:
 * opened without blocking, of that type, and changeable by no other user; else exit 66
 * with one line. One that does not exist, or that rlock cannot read either, is
 * OpenSSL's to skip. */
static void trusted_or_exit(const char *opt, const char *path, unsigned type)
{
	char why[300];
	struct stat st;
	int fd = userfile_read(path, type, &st, why, sizeof why);

	if (fd < 0 && (errno == ENOENT || errno == EACCES))
		return;
	if (fd < 0 && errno == EINVAL)
		input_error("%s: '%s' %s", opt, path, type == UF_DIR ? "is not a directory" : why);
	if (fd < 0)
		read_error(errno, "%s: cannot read '%s': %s", opt, path, why);
	close(fd);
	if (userfile_trusted(path, &st, why, sizeof why) < 0)
		input_error("%s: '%s' %s: refused (it must be root's or yours, and writable by "
		            "nobody else)",
		            opt, path, why);
}

/* A name OpenSSL reads from a hashed CA directory: HASH.N (a certificate) or HASH.rN
 * (a CRL), HASH being 8 lowercase hex digits (X509_LOOKUP_hash_dir). */
static int hashed_name(const char *n)
{
	if (strspn(n, "0123456789abcdef") != 8 || n[8] != '.')
		return 0;
	n += 9 + (n[9] == 'r');
	return *n && strspn(n, "0123456789") == strlen(n);
}

/* --cacertdir: what OpenSSL will read there is held to --cacert's rule: each file it may
 * load opened without blocking (a FIFO by a hash name held rlock in open() for ever), a
 * regular file, and one no other user can change (whoever can write a CA certificate
 * vouches for any server). A name that leads nowhere, or that rlock cannot read either,
 * is one OpenSSL skips. */
static void cacertdir_files(const char *opt, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		read_error(errno, "%s: cannot read '%s': %s", opt, dir, strerror(errno));
	while ((e = readdir(d))) {
		if (!hashed_name(e->d_name) ||
		    (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
			continue;
		trusted_or_exit(opt, path, UF_REG);
	}
	closedir(d);
}

/* Without --cacert or --cacertdir, OpenSSL's system trust store, which SSL_CERT_FILE and
 * SSL_CERT_DIR (a list, ':') replace: whoever could set them (a CI image, a parent's
 * environment) names files read as --cacert's and --cacertdir's are, and held to the
 * same rule (a FIFO there held rlock in open() for ever). One that does not exist is
 * OpenSSL's to skip. A directory is held to it, not each certificate in it, as
 * --cacertdir's are: it is the system's store as often as not (/etc/ssl/certs, 290
 * names: 3600 stat calls, ~10 ms on every TLS run), and no one else can add a name
 * to a directory that passes. */
static void trust_store_env(void)
{
	const char *file = getenv("SSL_CERT_FILE"), *dirs = getenv("SSL_CERT_DIR");
	char path[PATH_MAX];

	for (int i = 0; i < 2; i++) {
		const char *var = i ? "SSL_CERT_DIR" : "SSL_CERT_FILE";
		for (const char *p = i ? dirs : file; p && *p;) {
			size_t len = i ? strcspn(p, ":") : strlen(p);
			int fit = len > 0 && len < sizeof path;
			if (fit)
				snprintf(path, sizeof path, "%.*s", (int)len, p);
			p += len + (p[len] == ':');
			if (!fit)
				continue;
			trusted_or_exit(var, path, i ? UF_DIR : UF_REG);
		}
	}
}

static void tls_files_readable(const struct tls_opts *t)
{
	const char *file[] = {t->cacert, t->cert, t->key, t->cacertdir};
	static const char *const opt[] = {"--cacert", "--cert", "--tls-key", "--cacertdir"};
	char why[300];
	struct stat st;

	for (int i = 0; i < 4; i++) {
		if (!file[i])
			continue;
		int fd = userfile_read(file[i], i == 3 ? UF_DIR : UF_REG, &st, why, sizeof why);
		/* a directory of CA certificates is --cacertdir's, as in redis-cli */
		if (fd < 0 && errno == EINVAL)
			input_error("%s: '%s' %s%s", opt[i], file[i],
			            i == 3 ? "is not a directory" : why,
			            i == 0 && strcmp(why, "is a directory") == 0
			                ? " (a directory of CA certificates: --cacertdir)"
			                : "");
		if (fd < 0)
			read_error(errno, "%s: cannot read '%s': %s", opt[i], file[i], why);
		close(fd);
		if (i == 3 && access(file[i], R_OK | X_OK) != 0)
			input_error("%s: cannot read '%s': %s", opt[i], file[i], strerror(errno));
		if (userfile_trusted(file[i], &st, why, sizeof why) < 0)
			input_error(
			    "%s: '%s' %s: refused (it must be root's or yours, and writable "
			    "by nobody else)",
			    opt[i], file[i], why);
		if (i == 3)
			cacertdir_files(opt[i], file[i]);
		/* the client's private key is a secret as a password file is (ssh's rule) */
		if (i == 2 && (st.st_mode & S_IRWXO))
			input_error("%s: '%s' is a private key accessible by others (mode %03o); "
			            "chmod o-rwx it",
			            opt[i], file[i], (unsigned)(st.st_mode & 0777));
	}
	if (!t->cacert && !t->cacertdir && !t->insecure)
		trust_store_env();
}

/* A config file's setting that this run's command line leaves no room for (--once-per
 * with -s, --wait-replicas with Redlock, ...) is not read by this run, as a mode that
 * does not take a setting does not read it (on_cli): 1 when it was the config's (the
 * caller then clears it), 0 when the command line gave it (a usage error). */
static int not_read_here(const struct state *s, const char *name)
{
	if (on_cli(s, name))
		return 0;
	log_debug("the config file's %s does not apply to this run: not read", name);
	return 1;
}

/* Redlock: a renewal waits for a slow node (paused, overloaded: a minority that Redlock
 * is to ride out) up to --node-timeout, and its lease is counted from before its round
 * less the drift (quorum.c): a lease whose renewal window cannot hold that round, with a
 * quarter of it to spare (the round's own work, a thread woken late), is lost whenever
 * one node is slow (-t 500ms, --node-timeout 200ms: 79), or never acquired (-t 150ms:
 * "too long for a 150 ms lease"). Refused, naming the shortest -t that holds. */
static int64_t redlock_slack(int64_t ttl_ms, int64_t node_timeout_ms)
{
	return lease_renew_window(ttl_ms) - store_drift_ms(ttl_ms) - node_timeout_ms * 5 / 4;
}

static void redlock_ttl(const struct opts *o)
{
	if (o->nurls <= 1 || (o->mode != MODE_RUN && o->mode != MODE_ACQUIRE) ||
	    redlock_slack(o->lock.ttl_ms, o->node_timeout_ms) > 0)
		return;
	/* 4/5 - 1/3 - 1/100 of the ttl is 137/300 of it: from there, the integer steps */
	int64_t least = (o->node_timeout_ms * 5 / 4 + 2) * 300 / 137;
	while (redlock_slack(least, o->node_timeout_ms) <= 0)
		least++;
	least = (least + 99) / 100 * 100;
	usage_error("-t %lldms is too short for Redlock with --node-timeout %lldms: a renewal "
	            "that waits out one slow node must be confirmed before the lease counts as "
	            "lost; give -t %lldms or more, or a shorter --node-timeout",
	            (long long)o->lock.ttl_ms, (long long)o->node_timeout_ms, (long long)least);
}

static void validate_server(struct state *s)
{
	struct opts *o = s->o;

	if (o->nurls > 1 && o->wait_replicas > 0 && not_read_here(s, "wait-replicas"))
		o->wait_replicas = 0;
	if (o->nurls > 1 && (o->wait_aof_local || o->wait_aof_replicas) &&
	    not_read_here(s, "wait-aof"))
		o->wait_aof_local = o->wait_aof_replicas = 0;
	if (o->nurls > 1 && o->wait_replicas > 0)
		usage_error("--wait-replicas does not apply to Redlock (several --url)");
	if (o->nurls > 1 && (o->wait_aof_local || o->wait_aof_replicas))
		usage_error("--wait-aof does not apply to Redlock (several --url)");
	if (o->nurls > 1 && (o->kind != KIND_EXCLUSIVE || o->lock.fair))
		usage_error("-s, --limit and --fair use one server, not Redlock (several --url)");
	redlock_ttl(o);
	distinct_nodes(o);
	if (o->tls.enabled && o->url->scheme == URL_UNIX)
		usage_error("--tls: TLS over a Unix socket is not supported");
	/* TLS files without TLS: a mistake on the command line, or in a config file that
	 * names its own plain server; a config file's TLS files for its TLS server do not
	 * apply to a plain one named above it (--url, RLOCK_URL). */
	int tls_cli = 0;
	for (const char *const *n = (const char *const[]){"cacert", "cacertdir", "cert", "tls-key",
	                                                  "sni", "insecure", NULL};
	     *n; n++)
		tls_cli |= on_cli(s, *n);
	if (!o->tls.enabled &&
	    (o->tls.cacert || o->tls.cacertdir || o->tls.cert || o->tls.key || o->tls.sni ||
	     o->tls.insecure) &&
	    (tls_cli || s->url_rank < R_ENV_URL || !s->tls_set_aside))
		usage_error("TLS options need --tls or a rediss:// URL");
	/* The config file's password went with its TLS server: set aside for a plain one,
	 * it would cross the network in the clear to a server the file does not name. */
	if (s->tls_set_aside && !o->tls.enabled && o->has_password &&
	    (s->pw_rank == R_CONFIG || s->pw_rank == R_CONFIG_URL))
		usage_error("%s: the config file's password is for its TLS server, not sent in the "
		            "clear to the plain %s server; give --tls, a rediss:// URL, or the "
		            "password with --password-file, REDISCLI_AUTH or RLOCK_PASSWORD",
		            s->pw_from, s->url_rank == R_CLI_URL ? "--url" : "RLOCK_URL");
	if (s->tls_set_aside && !o->tls.enabled && o->has_sentinel_password &&
	    o->url->nsentinels > 0 && (s->spw_rank == R_CONFIG || s->spw_rank == R_CONFIG_URL))
		usage_error(
		    "the config file's sentinel password is for its TLS server, not sent in "
		    "the clear to the plain sentinels of %s; give --tls, a rediss-sentinel:// "
		    "URL, or --sentinel-password-file or RLOCK_SENTINEL_PASSWORD",
		    s->url_rank == R_CLI_URL ? "--url" : "RLOCK_URL");
	if (!!o->tls.cert != !!o->tls.key)
		usage_error("--cert and --tls-key go together");
	if (o->tls.enabled)
		tls_files_readable(&o->tls);
	if (o->tls.enabled && o->tls.insecure)
		log_warn("--insecure: the server's certificate is not verified (anyone on the "
		         "path can pose as the server)");
	if (!o->url->nsentinels && (s->suser_rank == R_CLI || s->spw_rank == R_CLI))
		usage_error("--sentinel-user and --sentinel-password-file go with a "
		            "redis-sentinel:// URL");
}

/* What the mode needs: a name, a command or none, a token. */
static void validate_mode(struct state *s, int nargs)
{
	struct opts *o = s->o;

	if (o->nnames > 1 && o->mode != MODE_RUN)
		usage_error("several -k go with a command, not with --%s", s->mode_opt);
	if (o->mode == MODE_RUN) {
		if (!o->name)
			usage_error("no lock name: give -k NAME");
		if (o->shell_command && nargs > 0)
			usage_error(
			    "give either -c 'COMMAND' or a command after the options, not both");
		if (!o->shell_command && nargs == 0)
			usage_error("no command to run");
		return;
	}
	if (o->mode == MODE_HELD) {
		/* The lock(s) and token(s) are found (and checked) by held_plan() (report.h). */
		if (nargs > 0 || o->shell_command)
			usage_error("no command is run with --held");
		if (o->token && !o->name)
			usage_error("--token goes with -k NAME (which lock the token should hold)");
		return;
	}
	if (o->mode == MODE_CHECK) {
		if (nargs > 0 || o->shell_command || o->name)
			usage_error(
			    "--check checks the servers: it takes no -k NAME and no command");
		return;
	}
	if (o->mode != MODE_LIST && !o->name)
		usage_error("--%s needs -k NAME", s->mode_opt);
	if (o->mode == MODE_LIST && o->name)
		usage_error("--list shows every lock under the prefix: it takes no -k NAME");
	if ((o->mode == MODE_ACQUIRE || o->mode == MODE_RELEASE) && (nargs > 0 || o->shell_command))
		usage_error("--%s runs no command (the next steps of your script run under the "
		            "lock)",
		            s->mode_opt);
	if (nargs > 0 || o->shell_command)
		usage_error("no command is run with --%s", s->mode_opt);
	if (o->mode == MODE_RELEASE)
		release_token(o);
}

/* --once-per marks a name done after its command succeeded; --acquire with it is refused
 * while the mark lives (its steps are not seen to end: the mark is written by the
 * --release --once-per DUR that says they succeeded). One exclusive lock (not a shared
 * hold or a permit, not several names) on one server (the mark is not a quorum's). */
static void validate_once_per(const struct state *s)
{
	struct opts *o = s->o;

	if (o->lock.once_per_ms == 0 ||
	    (o->mode != MODE_RUN && o->mode != MODE_ACQUIRE && o->mode != MODE_RELEASE))
		return;
	if ((o->kind != KIND_EXCLUSIVE || o->nnames > 1 || o->nurls > 1) &&
	    not_read_here(s, "once-per"))
		o->lock.once_per_ms = 0;
	if (o->lock.once_per_ms == 0)
		return;
	if (o->kind != KIND_EXCLUSIVE)
		usage_error("--once-per goes with an exclusive lock, not with -s or --limit");
	if (o->nnames > 1)
		usage_error("--once-per goes with one -k NAME");
	if (o->nurls > 1)
		usage_error("--once-per uses one server, not Redlock (several --url)");
}

/* --history -n N: getopt reads -n as --no-wait and stops at N (count_word), the count;
 * only the command line's -n is one (a config file's no-wait or wait = 0 is not: the
 * default count). The arguments left for validate_mode. */
static int history_count(struct state *s, int nargs, char **args)
{
	struct opts *o = s->o;
	const char *count = s->history_n;
	long long n;

	if (o->mode != MODE_HISTORY)
		return nargs;
	o->history_count = 20;
	if (!on_cli(s, "no-wait"))
		return nargs;
	if (!count && nargs == 1) /* -n --history N */
		count = args[0], nargs = 0;
	if (!count || parse_int(count, 1, HISTORY_MAX, &n, NULL, 0) < 0)
		usage_error("--history: -n takes a count, 1 to %d", HISTORY_MAX);
	o->history_count = (int)n;
	return nargs;
}

/* Deploy queues: --supersede and --preempt wait for an exclusive lock (not in a fair
 * queue: the scripts refuse a mix on one name); --preemptible needs a command to stop. */
static void validate_queue(const struct state *s)
{
	struct opts *o = s->o;
	int run = o->mode == MODE_RUN || o->mode == MODE_ACQUIRE;

	/* a config file's no-wait (or wait = 0) and on-lost = ignore give way to them */
	if (run && (o->lock.supersede || o->lock.preempt) && o->wait_ms == 0 &&
	    !on_cli(s, "no-wait") && !on_cli(s, "wait") && !on_cli(s, "timeout") &&
	    not_read_here(s, "no-wait"))
		o->wait_ms = -1;
	if (run && o->lock.preemptible && o->on_lost == LOST_IGNORE &&
	    not_read_here(s, "on-lost")) {
		o->on_lost = LOST_TERM;
		o->lost_signal = SIGTERM;
	}

	if ((o->lock.supersede || o->lock.preempt || o->lock.preemptible) && !run)
		usage_error(
		    "--supersede, --preempt and --preemptible go with a command or --acquire");
	if ((o->lock.supersede || o->lock.preempt || o->lock.preemptible) &&
	    (o->kind != KIND_EXCLUSIVE || o->lock.fair || o->nnames > 1))
		usage_error(
		    "--supersede, --preempt and --preemptible go with one exclusive -k NAME, "
		    "not with -s, --limit or --fair");
	if ((o->lock.supersede || o->lock.preempt) && o->wait_ms == 0)
		usage_error("--supersede and --preempt wait for the lock: not with -n (or -w 0)");
	/* Each master orders the requests as they reach it: two that cross (one slower to
	 * a node) each replace the other somewhere, and both exit 80, neither runs. */
	if (o->lock.supersede && o->nurls > 1)
		usage_error("--supersede uses one server, not Redlock (several --url): independent "
		            "masters cannot agree which request is the newer");
	if (o->lock.preemptible && o->mode == MODE_ACQUIRE)
		usage_error("--preemptible goes with a command, not with --acquire");
	/* A preempted holder stops its command and gives the lock to the request at once:
	 * with --on-lost ignore its command would run on past the lease (a second holder). */
	if (o->lock.preemptible && o->on_lost == LOST_IGNORE)
		usage_error("--preemptible stops the command for the request: not with --on-lost "
		            "ignore");
}

/* Given on the command line (a config file's setting serves every mode that reads it,
 * and is quietly not read by the others). */
static int on_cli(const struct state *s, const char *name)
{
	const struct optdef *d = option_by_name(name);

	return d && s->on_cli[d - options];
}

/* --acquire and --release run no command: the options that act on one are refused
 * when the command line gives them, not silently dropped. */
static void validate_keeper(const struct state *s)
{
	const struct opts *o = s->o;

	if (o->mode != MODE_ACQUIRE && o->mode != MODE_RELEASE)
		return;
	if (on_cli(s, "min-hold"))
		usage_error("--min-hold goes with a command, not with --%s (the lock is held until "
		            "--release: run the steps that long)",
		            s->mode_opt);
	for (const char *const *n = (const char *const[]){"on-lost", "kill-after", NULL}; *n; n++)
		if (o->mode == MODE_ACQUIRE && on_cli(s, *n))
			usage_error("--%s acts on a command: --acquire runs none (a lost lock is "
			            "logged by its keeper; --held and --release exit 79)",
			            *n);
}

/* What a mode does not read (the table's .modes), given on its command line: it would
 * be ignored, so it is refused, as --json or --format outside their modes: what acts on
 * the running command (its deadline, its keep, what a lost lease does to it, its
 * warning) with a mode that runs none and leaves no keeper; --events and --metrics-file
 * with one that makes no run (--release's release is an event); the lock's kind, lease
 * and queue (-s, -l, --fair, -t, --lock-delay, --supersede, ...) with a mode that takes
 * no lock. A config file's settings serve the runs that read them. */
static void validate_mode_reads(const struct state *s)
{
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct optdef *d = &options[i];
		if (!d->name || !d->modes || (d->modes & IN(s->o->mode)) || !s->on_cli[i])
			continue;
		if (d->not_read == ACTS)
			usage_error("--%s acts on a command: --%s runs none", d->name, s->mode_opt);
		if (d->not_read == RECORDS)
			usage_error("--%s records a run: --%s makes none", d->name, s->mode_opt);
		usage_error("--%s does not apply to --%s", d->name, s->mode_opt);
	}
}

/* --preemptible with a --min-hold on the command line contradict each other (a preempted
 * holder gives the lock to the request at once, the release hands it over whatever a
 * keep says); a configuration file's min-hold gives way to the hand-over quietly, and
 * the command line's --min-hold 0 (no keep: the default) asks for none. */
static void validate_preemptible(const struct state *s)
{
	if (s->o->lock.preemptible && s->o->min_hold_ms > 0 && on_cli(s, "min-hold"))
		usage_error("--preemptible gives the lock to the request at once: not with "
		            "--min-hold");
}

/* --break --token T / --if-fence N: break only that holder (both judged when read:
 * check_token, check_fence). The fence is kept in the form the counter stores (the
 * scripts compare the text). */
static void validate_break(struct opts *o)
{
	static char fence[24];
	long long v;

	if (o->if_fence && o->mode != MODE_BREAK)
		usage_error("--if-fence goes with --break");
	if (o->mode != MODE_BREAK || !o->if_fence)
		return;
	if (parse_int(o->if_fence, LLONG_MIN, LLONG_MAX, &v, NULL, 0) < 0)
		usage_error("--if-fence: '%s' is not a fence (a 64-bit integer)", o->if_fence);
	snprintf(fence, sizeof fence, "%lld", v);
	o->if_fence = fence;
}

/* --acquire: the keeper changes to "/" before it opens its log or loads the TLS files
 * (its renewals reload them), so a relative path is made absolute here, against the
 * caller's directory (--events and --metrics-file: events_setup); so are those of the
 * trust store OpenSSL reads without --cacert (SSL_CERT_FILE, each of SSL_CERT_DIR's),
 * in this process's environment: the keeper runs no command. */
static void keeper_paths(struct opts *o)
{
	const char **path[] = {&o->log_file, &o->tls.cacert, &o->tls.cacertdir, &o->tls.cert,
	                       &o->tls.key};
	char cwd[4096];

	for (size_t i = 0; o->mode == MODE_ACQUIRE && i < sizeof path / sizeof path[0]; i++) {
		const char *p = *path[i];
		if (!p || p[0] == '/')
			continue;
		char *abs = NULL;
		if (!getcwd(cwd, sizeof cwd) || asprintf(&abs, "%s/%s", cwd, p) < 0)
			usage_error("--acquire: cannot make '%s' absolute: %s", p, strerror(errno));
		*path[i] = abs; /* lives as long as the options */
	}
	for (int i = 0; o->mode == MODE_ACQUIRE && i < 2; i++) {
		const char *var = i ? "SSL_CERT_DIR" : "SSL_CERT_FILE", *v = getenv(var);
		char *abs = NULL;
		size_t len = 0;
		FILE *m = NULL;
		int relative = 0;
		for (const char *p = v; p && *p;) {
			size_t n = i ? strcspn(p, ":") : strlen(p);
			relative |= n > 0 && p[0] != '/';
			p += n + (p[n] == ':');
		}
		if (!relative)
			continue;
		if (!getcwd(cwd, sizeof cwd) || !(m = open_memstream(&abs, &len)))
			usage_error("--acquire: cannot make %s absolute: %s", var, strerror(errno));
		for (const char *p = v; *p;) {
			size_t n = i ? strcspn(p, ":") : strlen(p);
			fprintf(m, "%s%s%s%.*s", p == v ? "" : ":", n > 0 && p[0] != '/' ? cwd : "",
			        n > 0 && p[0] != '/' ? "/" : "", (int)n, p);
			p += n + (p[n] == ':');
		}
		if (fclose(m) != 0 || setenv(var, abs, 1) < 0)
			usage_error("--acquire: cannot make %s absolute: %s", var, strerror(errno));
		free(abs);
	}
}

/* The one validate step: combinations of options, after the command line, the
 * environment and the config file are all applied (a lone value was checked by its
 * row). Exits 64 with one line on stderr. */
static void validate(struct state *s, int nargs)
{
	struct opts *o = s->o;

	validate_server(s);
	validate_mode(s, nargs);
	if (o->json && o->mode != MODE_STATUS && o->mode != MODE_LIST && o->mode != MODE_HELD &&
	    o->mode != MODE_CHECK && o->mode != MODE_HISTORY)
		usage_error("--json goes with --status, --list, --held, --check or --history");
	if (o->token && o->mode != MODE_RELEASE && o->mode != MODE_HELD && o->mode != MODE_BREAK)
		usage_error("--token goes with --release, --held or --break");
	validate_break(o);
	/* What only --acquire reads, given on the command line of another mode (where the
	 * keeper's log would be ignored): refused as --token and --json are. A config
	 * file's log-file serves the --acquire runs that read it. */
	if (s->format_given && o->mode != MODE_ACQUIRE)
		usage_error("--format goes with --acquire");
	if (o->log_file && o->mode != MODE_ACQUIRE && on_cli(s, "log-file"))
		usage_error("--log-file goes with --acquire");
	/* The keeper outlives --acquire: its stderr is its --log-file, else /dev/null, where
	 * its events (keeper-started, keeper-lost) would be lost unsaid. */
	if (o->mode == MODE_ACQUIRE && o->events_file && !strcmp(o->events_file, "-") &&
	    !o->log_file)
		usage_error("--events -: the keeper of --acquire outlives this stderr (its own is "
		            "/dev/null): give --events a file, or --log-file for its lines");
	validate_once_per(s);
	validate_queue(s);
	validate_keeper(s);
	validate_mode_reads(s);
	validate_preemptible(s);
	/* the pair of --wait-replicas with Redlock (validate_server): a round of requests
	 * to several masters is all --node-timeout bounds; one server has none */
	if (s->redlock_opt && o->nurls <= 1)
		usage_error("--%s applies to Redlock (several --url), not to one server",
		            s->redlock_opt->name);
	keeper_paths(o);
}

static int url_rank(enum rank r)
{
	return r == R_REDIS_URL || r == R_CONFIG_URL || r == R_ENV_URL || r == R_CLI_URL;
}

/* Warnings about settings that are valid but probably not what was meant. A URL's user
 * name without a password is not shown: redis-cli reads redis://WORD@HOST as the
 * password WORD. */
static void warn_logins(const struct state *s)
{
	const struct opts *o = s->o;
	static const char not_shown[] =
	    "(redis://NAME@HOST; NAME not shown: redis-cli reads it as the password)";
	static const char fix[] = "for a password write redis://:PASSWORD@HOST or "
	                          "redis://USER:PASSWORD@HOST, or give a password file";

	if (o->sentinel_user && !o->has_sentinel_password && url_rank(s->suser_rank))
		log_warn("the Sentinel URL names a user but no password %s, so rlock does not log "
		         "in to the sentinels as that user; %s",
		         not_shown, fix);
	else if (o->sentinel_user && !o->has_sentinel_password)
		log_warn("sentinel user '%s' has no password, so rlock does not log in to the "
		         "sentinels as that user; give its password or drop the user name",
		         o->sentinel_user);
	if (o->user && !o->has_password && url_rank(s->user_rank))
		log_warn("the URL names a user but no password %s, so rlock does not log in as "
		         "that user (it connects as the default user); %s",
		         not_shown, fix);
	else if (o->user && !o->has_password)
		log_warn("user '%s' has no password, so rlock does not log in as that user (it "
		         "connects as the default user); give its password or drop the user name",
		         o->user);
}

/* ---- cli_parse ------------------------------------------------------------------- */

/* --history -n N: getopt, which stops at the command, takes -n for --no-wait (flock's)
 * and stops at N, no option. After --history (history) and right after -n (last), N is
 * the count: *count keeps it, and getopt goes on after it (--history -n 5 --json, as
 * --help writes it). 1 when it does. */
static int count_word(int argc, char **argv, int history, const struct optdef *last,
                      const char **count)
{
	if (!history || !last || strcmp(last->name, "no-wait") != 0 || *count || optind < 1 ||
	    optind >= argc || strcmp(argv[optind], "--") == 0)
		return 0;
	*count = argv[optind++];
	return 1;
}

static void value_not_option(const struct optdef *d, int argc, char **argv);

/* Pass 1 over argv: --help and --version (print and exit), --config, and whether
 * --acquire's sh output is asked for. Errors are left to pass 2. */
static const char *first_pass(int argc, char **argv)
{
	const char *config_cli = NULL, *count = NULL;
	const struct optdef *last = NULL, *mode = NULL;
	int acquire = 0, github = 0, history = 0, help = 0, c, idx;

	opterr = 0;
	while ((c = getopt_long(argc, argv, short_opts, long_opts, &idx)) != -1 ||
	       count_word(argc, argv, history, last, &count)) {
		if (c == -1)
			continue;
		const struct optdef *d = option_by_val(c);
		const char *name = d ? d->name : "";
		last = d;
		history = history || !strcmp(name, "history");
		if (!strcmp(name, "acquire"))
			acquire = 1;
		if (!strcmp(name, "format"))
			github = optarg && !strcmp(optarg, "github");
		if (d && d->set == opt_mode)
			mode = d;
		help = help || !strcmp(name, "help");
		if (!help && !strcmp(name, "version")) {
			print_version();
			exit(cli_close_stdout());
		}
		if (!strcmp(name, "config")) {
			if (!help) /* read before pass 2 */
				value_not_option(d, argc, argv);
			config_cli = optarg;
		}
	}
	if (help) {
		print_help(stdout, mode);
		exit(cli_close_stdout());
	}
	acquire_sh = acquire && !github;
	return config_cli;
}

/* -n and -w (or --timeout) on one command line contradict each other: a usage error,
 * not the last one silently winning. *seen: the first of them. */
static void wait_once(struct state *s, const struct optdef *d, const struct optdef **seen)
{
	if (target(s, d) != (void *)&s->o->wait_ms)
		return;
	if (*seen && (*seen)->type != d->type)
		usage_error("--%s and --%s do not go together", (*seen)->name, d->name);
	*seen = d;
}

/* A password file's option (an F_SECRET row) is taken only spelled in full:
 * getopt_long would take redis-cli's --pass PASSWORD, or --password, as an
 * abbreviation of --password-file, read a file named as the password and print that
 * name in its error. The value is not shown. */
static void secret_spelled_out(int argc, char **argv, const struct option *lo)
{
	int i = optarg && optind >= 2 && optind <= argc && optarg == argv[optind - 1] ? optind - 2
	                                                                              : optind - 1;
	const char *typed = i >= 0 && i < argc ? argv[i] : NULL;

	if (!typed || strncmp(typed, "--", 2) != 0)
		return;
	typed += 2;
	size_t len = strcspn(typed, "=");
	if (len != strlen(lo->name))
		usage_error("'--%.*s' is not an option (its value is not shown): a password is "
		            "given with --%s FILE or the environment",
		            (int)(len < 40 ? len : 40), typed, lo->name);
}

/* A value given as a word of its own that spells one of rlock's options: getopt takes
 * the next word whatever it is, so `-k --wait 5s -- true` (the name forgotten) locked a
 * name "--wait" and ran "5s". Refused (64) for every option that takes a value; the
 * rare value that is so is given attached (--key=--wait, -k--wait). "--" too, and a
 * long option's abbreviation as getopt_long would take it; "-" (stdin/stderr) and a
 * negative number are values. */
static void value_not_option(const struct optdef *d, int argc, char **argv)
{
	const char *v = optarg;
	int ours = 0;

	if (!v || optind < 2 || optind > argc || v != argv[optind - 1] || v[0] != '-' || !v[1])
		return;
	if (!strcmp(v, "--")) {
		ours = 1;
	} else if (v[1] == '-') {
		size_t n = strcspn(v + 2, "=");
		for (size_t i = 0; n > 0 && long_opts[i].name; i++)
			ours |= !strncmp(long_opts[i].name, v + 2, n);
	} else {
		ours = v[1] != ':' && v[1] != '+' && strchr(short_opts, v[1]) != NULL;
	}
	if (!ours)
		return;
	if (d->flags & F_SECRET)
		usage_error("--%s: its value is one of rlock's options: a value is missing "
		            "(one so spelled: --%s=VALUE)",
		            d->name, d->name);
	usage_error("--%s: '%.40s' %s, not a value: was the %s forgotten? (one so spelled: "
	            "--%s=%.40s)",
	            d->name, v,
	            v[1] == '-' && !v[2] ? "ends the options" : "is one of rlock's options",
	            d->arg ? d->arg : "value", d->name, v);
}

/* -n N --history: flock's -n takes no value, so getopt stops at N, the command, and
 * --history would be that command's argument: a command named by a number whose words
 * include --history is this mistake, not a command to run under the lock (a usage
 * error, 64, before anything is taken; --history -n N gives the count). A "--" before
 * N keeps it a command, as it keeps any. last: the option right before the command. */
static void no_wait_count(int argc, char **argv, const struct optdef *last)
{
	if (!last || strcmp(last->name, "no-wait") != 0 || optind < 1 || optind >= argc ||
	    strcmp(argv[optind - 1], "--") == 0)
		return;
	const char *n = argv[optind];
	if (!*n || strspn(n, "0123456789") != strlen(n) || strlen(n) > 9)
		return;
	for (int i = optind + 1; i < argc; i++)
		if (!strcmp(argv[i], "--history"))
			usage_error(
			    "-n takes no value (as flock's): -n %s before --history would run a "
			    "command named '%s'; the last %s runs: --history -n %s",
			    n, n, n, n);
}

/* Pass 2: the command line, above every other layer. */
static void apply_argv(struct state *s, int argc, char **argv)
{
	const struct optdef *wait_seen = NULL, *last = NULL;
	int c, idx;

	opterr = 0;
	optind = 0;
	while ((idx = -1, c = getopt_long(argc, argv, short_opts, long_opts, &idx)) != -1 ||
	       count_word(argc, argv, s->o->mode == MODE_HISTORY, last, &s->history_n)) {
		if (c == -1)
			continue;
		const struct optdef *d = option_by_val(c);
		char src[64];
		if (c == '?' || c == ':' || !d)
			bad_option(argv);
		last = d;
		if (idx >= 0 && (d->flags & F_SECRET))
			secret_spelled_out(argc, argv, &long_opts[idx]);
		snprintf(src, sizeof src, "--%s", d->name);
		value_not_option(d, argc, argv);
		wait_once(s, d, &wait_seen);
		apply(s, d, optarg, src, 1);
	}
	if (s->o->mode != MODE_HISTORY)
		no_wait_count(argc, argv, last);
}

void cli_parse(int argc, char **argv, struct opts *o)
{
	struct state s = {.o = o, .url_tls = -1};
	int explicit_path;

	/* *o is zero already (a static: its 95 KiB of URLs are not touched unless used) */
	build_getopt_tables();
	apply_defaults(&s);
	const char *cfg[CONFIG_LAYERS_MAX];
	int ncfg = config_layers(first_pass(argc, argv), cfg, &explicit_path);

	/* Lowest precedence first: config files, then environment, then command line. */
	for (int i = 0; i < ncfg; i++)
		load_config(&s, cfg[i], explicit_path);
	apply_env(&s);
	env_passwords(&s);
	apply_argv(&s, argc, argv);
	log_verbosity = o->verbose;
	if (s.empty_env && !s.on_cli[s.empty_env - options])
		usage_error(
		    "%s is set but empty: unset it for the default (\"%s\"), or give --%s '' "
		    "for none",
		    s.empty_env->env, s.empty_env->def_text, s.empty_env->name);

	choose_url(&s);
	credential_password(&s);
	validate(&s, history_count(&s, argc - optind, argv + optind));
	say_server(&s);
	say_credentials(&s);
	warn_logins(&s);
	if (o->nnames > 1) {
		qsort(o->names, (size_t)o->nnames, sizeof o->names[0], cmp_names);
		o->name = o->names[0];
	}
	if (o->mode == MODE_RUN)
		o->argv = argv + optind;
}
