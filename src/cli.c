#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcodes.h"
#include "log.h"
#include "resp.h"
#include "secret.h"
#include "tls.h"
#include "tlsload.h"
#include "version.h"

static const char usage_text[] =
    "Usage: rlock [OPTIONS] -k NAME [--] COMMAND [ARG...]\n"
    "       rlock [OPTIONS] -k NAME -c 'SHELL COMMAND'\n"
    "       rlock [OPTIONS] -k NAME --status [--json]\n"
    "       rlock [OPTIONS] -k NAME --break\n"
    "       rlock [OPTIONS] --list [--json]\n"
    "\n"
    "Run COMMAND while holding the lock NAME in Redis, so that it runs in one place at\n"
    "a time across machines. The lease is renewed while COMMAND runs and released when\n"
    "it exits; rlock exits with COMMAND's status.\n"
    "\n"
    "Lock:\n"
    "  -k, --key NAME              lock name; the Redis key is PREFIX{NAME}\n"
    "      --prefix STR            key prefix (env RLOCK_PREFIX; default \"rlock:\")\n"
    "  -n, --no-wait               fail at once when the lock is busy\n"
    "  -w, --wait DUR              wait at most DUR for the lock (default: forever)\n"
    "      --timeout DUR           same as --wait\n"
    "  -E, --conflict-exit-code N  exit status when the lock is not acquired (default 75)\n"
    "  -t, --ttl DUR               lease length, renewed every ttl/3 (default 30s)\n"
    "      --on-lost ACTION        when the lease can no longer be guaranteed: term, kill,\n"
    "                              a signal name, or ignore (default term)\n"
    "      --kill-after DUR        grace between the first signal and SIGKILL (default 10s)\n"
    "      --min-hold DUR          keep the lock at least DUR after the command started\n"
    "  -c, --command STR           run STR with /bin/sh -c\n"
    "\n"
    "Server:\n"
    "  -u, --url URL               redis://[[user]:password@]host[:port][/db], rediss://...,\n"
    "                              unix:///path[?db=N] (env RLOCK_URL, then REDIS_URL;\n"
    "                              default redis://127.0.0.1:6379)\n"
    "      --user NAME             ACL user name\n"
    "      --password-file FILE    read the password from FILE (must not be readable by\n"
    "                              others); env REDISCLI_AUTH or RLOCK_PASSWORD also work\n"
    "      --tls                   connect with TLS (as rediss://)\n"
    "      --cacert FILE           CA certificates that verify the server\n"
    "      --cacertdir DIR         directory of CA certificates\n"
    "      --cert FILE             client certificate\n"
    "      --tls-key FILE          client certificate's private key\n"
    "      --sni NAME              server name to send and verify\n"
    "      --insecure              do not verify the server's certificate (unsafe)\n"
    "      --connect-timeout DUR   deadline to connect (default 2s)\n"
    "      --io-timeout DUR        deadline for each request (default 2s)\n"
    "      --wait-replicas N       after acquiring, wait (up to --io-timeout) until N\n"
    "                              replicas have the lock; otherwise release, exit 69\n"
    "      --config FILE           config file (default: $RLOCK_CONFIG,\n"
    "                              $XDG_CONFIG_HOME/rlock/config, /etc/rlock.conf)\n"
    "\n"
    "Operator:\n"
    "      --status                show who holds NAME; exit 0 if free, else the\n"
    "                              conflict status\n"
    "      --break                 force-release NAME and wake its waiters\n"
    "      --list                  list the locks held under the prefix\n"
    "      --json                  machine-readable --status and --list\n"
    "  -v, --verbose               more diagnostics on stderr (repeat for more)\n"
    "  -q, --quiet                 only errors on stderr\n"
    "  -h, --help                  show this help\n"
    "  -V, --version               show the version of rlock, hiredis and OpenSSL\n"
    "\n"
    "Durations: 500ms, 30s, 5m, 2h, 1d, or a bare number of seconds (1.5 allowed).\n"
    "\n"
    "The command gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS.\n"
    "\n"
    "Exit status:\n"
    "  N        the command's own status; 128+N if it died of signal N\n"
    "  64       usage error: bad option, URL, duration, config\n"
    "  69       Redis unavailable before the command started (connect, TLS, auth)\n"
    "  70       internal error\n"
    "  71       cannot fork or set up the command\n"
    "  75       lock not acquired: busy with -n, or --wait expired (see -E)\n"
    "  79       the lock was lost while the command ran, and it was terminated\n"
    "  126/127  command not executable / not found\n";

enum {
	O_PREFIX = 256,
	O_TIMEOUT,
	O_ON_LOST,
	O_KILL_AFTER,
	O_MIN_HOLD,
	O_USER,
	O_PASSWORD_FILE,
	O_TLS,
	O_CACERT,
	O_CACERTDIR,
	O_CERT,
	O_TLS_KEY,
	O_SNI,
	O_INSECURE,
	O_CONNECT_TIMEOUT,
	O_IO_TIMEOUT,
	O_WAIT_REPLICAS,
	O_CONFIG,
	O_STATUS,
	O_BREAK,
	O_LIST,
	O_JSON,
	O_PASSWORD, /* config file only: never on the command line */
};

static const struct option long_opts[] = {
    {"key", required_argument, NULL, 'k'},
    {"prefix", required_argument, NULL, O_PREFIX},
    {"no-wait", no_argument, NULL, 'n'},
    {"wait", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"ttl", required_argument, NULL, 't'},
    {"on-lost", required_argument, NULL, O_ON_LOST},
    {"kill-after", required_argument, NULL, O_KILL_AFTER},
    {"min-hold", required_argument, NULL, O_MIN_HOLD},
    {"command", required_argument, NULL, 'c'},
    {"url", required_argument, NULL, 'u'},
    {"user", required_argument, NULL, O_USER},
    {"password-file", required_argument, NULL, O_PASSWORD_FILE},
    {"tls", no_argument, NULL, O_TLS},
    {"cacert", required_argument, NULL, O_CACERT},
    {"cacertdir", required_argument, NULL, O_CACERTDIR},
    {"cert", required_argument, NULL, O_CERT},
    {"tls-key", required_argument, NULL, O_TLS_KEY},
    {"sni", required_argument, NULL, O_SNI},
    {"insecure", no_argument, NULL, O_INSECURE},
    {"connect-timeout", required_argument, NULL, O_CONNECT_TIMEOUT},
    {"io-timeout", required_argument, NULL, O_IO_TIMEOUT},
    {"wait-replicas", required_argument, NULL, O_WAIT_REPLICAS},
    {"config", required_argument, NULL, O_CONFIG},
    {"status", no_argument, NULL, O_STATUS},
    {"break", no_argument, NULL, O_BREAK},
    {"list", no_argument, NULL, O_LIST},
    {"json", no_argument, NULL, O_JSON},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};
static const char short_opts[] = "+k:nw:E:t:c:u:vqhV";

/* Options that make no sense in a config file (they name one run). */
static int config_forbidden(int id)
{
	return id == 'k' || id == 'c' || id == O_CONFIG || id == O_STATUS || id == O_BREAK ||
	       id == O_LIST || id == 'h' || id == 'V' || id == 'v' || id == 'q' || id == O_JSON;
}

/* Where a password came from; a later, stronger source replaces an earlier one. */
enum pw_rank { PW_NONE, PW_CONFIG_URL, PW_CONFIG, PW_ENV_URL, PW_ENV, PW_CLI_URL, PW_CLI };

struct state {
	struct opts *o;
	const char *url_cli, *url_config;
	char url_config_src[600];
	int url_cli_count;
	enum pw_rank pw_rank;
	int user_set;
	int has_command;
	const char *config_path;
	int config_has_secret;
};

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
	char buf[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	log_error("%s (try 'rlock --help')", buf);
	exit(RL_EX_USAGE);
}

static void set_password(struct state *s, const char *pw, size_t len, enum pw_rank rank)
{
	static int registered;

	if (rank < s->pw_rank)
		return;
	if (secret_set(pw, len) < 0) {
		log_error("cannot store the password (at most %d bytes)", SECRET_MAX);
		exit(RL_EX_USAGE);
	}
	s->o->has_password = 1;
	s->pw_rank = rank;
	if (!registered) {
		registered = 1;
		atexit(secret_wipe);
	}
}

static void read_password_file(struct state *s, const char *path, const char *src,
                               enum pw_rank rank)
{
	char buf[URL_PASS_MAX + 2];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		usage_error("%s: cannot read password file '%s': %s", src, path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		usage_error("%s: '%s' is not a regular file", src, path);
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		close(fd);
		usage_error(
		    "%s: password file '%s' is accessible by others (mode %03o); chmod 600 it", src,
		    path, (unsigned)(st.st_mode & 0777));
	}
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		usage_error("%s: cannot read '%s': %s", src, path, strerror(errno));
	buf[n] = '\0';
	size_t len = strcspn(buf, "\r\n");
	if (len == 0 || len > URL_PASS_MAX - 1) {
		explicit_bzero(buf, sizeof buf);
		usage_error("%s: password file '%s' must hold one line of 1..%d bytes", src, path,
		            URL_PASS_MAX - 1);
	}
	set_password(s, buf, len, rank);
	explicit_bzero(buf, sizeof buf);
}

static int64_t duration_arg(const char *src, const char *val)
{
	int64_t ms;
	char err[200];

	if (parse_duration(val, &ms, err, sizeof err) < 0)
		usage_error("%s: %s", src, err);
	return ms;
}

/* Apply one option from the command line (src "--ttl") or the config file
 * (src "FILE:LINE"). `cli` tells which, for password ranking. */
static void apply(struct state *s, int id, const char *val, const char *src, int cli)
{
	struct opts *o = s->o;
	char err[200];
	long long n;

	switch (id) {
	case 'k':
		if (parse_lock_name(val, err, sizeof err) < 0)
			usage_error("%s: %s", src, err);
		o->name = val;
		break;
	case O_PREFIX:
		if (parse_prefix(val, err, sizeof err) < 0)
			usage_error("%s: %s", src, err);
		o->prefix = val;
		break;
	case 'n':
		o->wait_ms = 0;
		break;
	case 'w':
	case O_TIMEOUT:
		o->wait_ms = duration_arg(src, val);
		break;
	case 'E':
		if (parse_int(val, 0, 255, &n, err, sizeof err) < 0)
			usage_error("%s: %s", src, err);
		o->conflict_exit = (int)n;
		break;
	case 't':
		o->ttl_ms = duration_arg(src, val);
		if (o->ttl_ms < 100)
			usage_error("%s: the ttl must be at least 100ms, not '%s'", src, val);
		break;
	case O_ON_LOST:
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
				usage_error("%s: '%s' is not term, kill, ignore or a signal name",
				            src, val);
			o->on_lost = LOST_SIGNAL;
			o->lost_signal = sig;
		}
		break;
	case O_KILL_AFTER:
		o->kill_after_ms = duration_arg(src, val);
		break;
	case O_MIN_HOLD:
		o->min_hold_ms = duration_arg(src, val);
		break;
	case 'c':
		o->shell_command = val;
		break;
	case 'u':
		if (cli) {
			s->url_cli = val;
			s->url_cli_count++;
		} else {
			char err2[300];
			struct url probe;
			/* Checked even when the environment overrides it: a broken config file
			 * is reported, not silently carried around. */
			if (parse_url(val, &probe, err2, sizeof err2) < 0)
				usage_error("%s: %s", src, err2);
			explicit_bzero(&probe, sizeof probe);
			s->url_config = val;
			snprintf(s->url_config_src, sizeof s->url_config_src, "%s", src);
		}
		break;
	case O_USER:
		o->user = val;
		break;
	case O_PASSWORD_FILE:
		read_password_file(s, val, src, cli ? PW_CLI : PW_CONFIG);
		break;
	case O_PASSWORD:
		set_password(s, val, strlen(val), PW_CONFIG);
		s->config_has_secret = 1;
		break;
	case O_TLS:
		o->tls.enabled = 1;
		break;
	case O_CACERT:
		o->tls.cacert = val;
		break;
	case O_CACERTDIR:
		o->tls.cacertdir = val;
		break;
	case O_CERT:
		o->tls.cert = val;
		break;
	case O_TLS_KEY:
		o->tls.key = val;
		break;
	case O_SNI:
		o->tls.sni = val;
		break;
	case O_INSECURE:
		o->tls.insecure = 1;
		break;
	case O_CONNECT_TIMEOUT:
		o->connect_timeout_ms = duration_arg(src, val);
		if (o->connect_timeout_ms == 0)
			usage_error("%s: must be more than 0", src);
		break;
	case O_IO_TIMEOUT:
		o->io_timeout_ms = duration_arg(src, val);
		if (o->io_timeout_ms == 0)
			usage_error("%s: must be more than 0", src);
		break;
	case O_WAIT_REPLICAS:
		if (parse_int(val, 0, 1000, &n, err, sizeof err) < 0)
			usage_error("%s: %s", src, err);
		o->wait_replicas = (int)n;
		break;
	case O_STATUS:
		o->mode = MODE_STATUS;
		break;
	case O_BREAK:
		o->mode = MODE_BREAK;
		break;
	case O_LIST:
		o->mode = MODE_LIST;
		break;
	case O_JSON:
		o->json = 1;
		break;
	case 'v':
		o->verbose = o->verbose < 0 ? 1 : o->verbose + 1;
		break;
	case 'q':
		o->verbose = -1;
		break;
	}
}

/* ---- config file ------------------------------------------------------------------ */

static const char *find_config(const char *cli_path, int *explicit)
{
	static char buf[4096];
	const char *p;

	*explicit = 1;
	if (cli_path)
		return cli_path;
	if ((p = getenv("RLOCK_CONFIG")) && *p)
		return p;
	*explicit = 0;
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (xdg && *xdg && snprintf(buf, sizeof buf, "%s/rlock/config", xdg) < (int)sizeof buf &&
	    access(buf, F_OK) == 0)
		return buf;
	if ((!xdg || !*xdg) && home &&
	    snprintf(buf, sizeof buf, "%s/.config/rlock/config", home) < (int)sizeof buf &&
	    access(buf, F_OK) == 0)
		return buf;
	if (access("/etc/rlock.conf", F_OK) == 0)
		return "/etc/rlock.conf";
	return NULL;
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
		exit(RL_EX_SOFTWARE);
	}
	kept = grown;
	kept[nkept++] = copy;
	return copy;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

int cli_config_line(char *line, int *id, const char **val, char *err, size_t errlen)
{
	char *key = trim(line), *eq, *v = NULL;
	int has_arg = 0;

	*id = -1;
	*val = NULL;
	if (*key == '#' || *key == '\0')
		return 0;
	eq = strchr(key, '=');
	if (eq) {
		*eq = '\0';
		v = trim(eq + 1);
		key = trim(key);
	}
	if (!strcmp(key, "password")) {
		*id = O_PASSWORD;
		has_arg = 1;
	}
	for (const struct option *op = long_opts; *id < 0 && op->name; op++)
		if (!strcmp(op->name, key)) {
			*id = op->val;
			has_arg = op->has_arg == required_argument;
		}
	if (*id < 0 || config_forbidden(*id)) {
		snprintf(err, errlen, "unknown setting '%.100s'", key);
		return -1;
	}
	if (has_arg && (!v || !*v)) {
		snprintf(err, errlen, "'%.100s' needs a value ('%.100s = VALUE')", key, key);
		return -1;
	}
	if (!has_arg && v && strcmp(v, "true") && strcmp(v, "yes") && strcmp(v, "1")) {
		snprintf(err, errlen, "'%.100s' takes no value (or 'true')", key);
		return -1;
	}
	*val = v;
	return 1;
}

static void load_config(struct state *s, const char *path, int explicit_path)
{
	FILE *f = fopen(path, "re");
	struct stat st = {0};
	char line[4096], iobuf[8192];
	int lineno = 0;

	if (!f) {
		if (!explicit_path && errno == ENOENT)
			return;
		usage_error("cannot read config file '%s': %s", path, strerror(errno));
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = errno;
		fclose(f);
		usage_error("cannot read config file '%s': %s", path,
		            e && !S_ISDIR(st.st_mode) ? strerror(e) : "not a regular file");
	}
	s->config_path = path;
	/* Our own stdio buffer, so the file's bytes (maybe a password) can be wiped. */
	setvbuf(f, iobuf, _IOFBF, sizeof iobuf);
	while (fgets(line, sizeof line, f)) {
		char src[600];
		lineno++;
		snprintf(src, sizeof src, "%s:%d", path, lineno);
		if (!strchr(line, '\n') && !feof(f))
			usage_error("%s: line too long", src);
		int id;
		const char *val;
		char why[300];
		int kind = cli_config_line(line, &id, &val, why, sizeof why);
		if (kind < 0)
			usage_error("%s: %s", src, why);
		if (kind == 0)
			continue;
		if (id == 'u' && strchr(val, '@'))
			s->config_has_secret = 1;
		if (id == O_PASSWORD || id == O_PASSWORD_FILE) {
			/* Consumed at once (copied or read): no copy of a secret lingers. */
			apply(s, id, val, src, 0);
			explicit_bzero(line, sizeof line);
			continue;
		}
		apply(s, id, val ? keep_string(val) : NULL, src, 0);
	}
	explicit_bzero(line, sizeof line);
	fclose(f);
	explicit_bzero(iobuf, sizeof iobuf);
	if (s->config_has_secret && (st.st_mode & (S_IRWXG | S_IRWXO)))
		usage_error("config file '%s' holds a password and is accessible by others (mode "
		            "%03o); chmod 600 it",
		            path, (unsigned)(st.st_mode & 0777));
}

/* ---- validation ------------------------------------------------------------------- */

/* Overwrite the password inside a URL string in place (argv lives in /proc/PID/cmdline,
 * the environment in /proc/PID/environ): this only narrows the window in which another
 * user could read it there. */
static void scrub_url_password(char *url)
{
	char *p = strstr(url, "://");
	char *slash, *at, *colon;

	if (!p)
		return;
	p += 3;
	slash = strchr(p, '/');
	at = NULL;
	for (char *q = p; *q && (!slash || q < slash); q++)
		if (*q == '@')
			at = q; /* the last '@' ends user:password */
	if (!at)
		return;
	colon = memchr(p, ':', (size_t)(at - p));
	if (colon)
		memset(colon + 1, '*', (size_t)(at - colon - 1));
}

static void choose_url(struct state *s)
{
	struct opts *o = s->o;
	const char *url = NULL, *src = NULL;
	enum pw_rank rank = PW_NONE;
	char err[300];
	const char *e;

	if (s->url_cli_count > 1)
		usage_error("--url: several servers (Redlock) are not supported by this version");
	if (s->url_cli) {
		url = s->url_cli;
		src = "--url";
		rank = PW_CLI_URL;
	} else if ((e = getenv("RLOCK_URL")) && *e) {
		url = e;
		src = "RLOCK_URL";
		rank = PW_ENV_URL;
	} else if ((e = getenv("REDIS_URL")) && *e) {
		url = e;
		src = "REDIS_URL";
		rank = PW_ENV_URL;
	} else if (s->url_config) {
		url = s->url_config;
		src = s->url_config_src;
		rank = PW_CONFIG_URL;
	} else {
		url = "redis://127.0.0.1:6379";
		src = "default URL";
	}
	if (strchr(url, ','))
		usage_error("%s: several servers (Redlock) are not supported by this version", src);
	if (parse_url(url, &o->url, err, sizeof err) < 0)
		usage_error("%s: %s", src, err);
	if (o->url.has_password) {
		if (rank == PW_CLI_URL) {
			log_warn("a password on the command line is visible to other users in ps; "
			         "use --password-file or REDISCLI_AUTH");
		}
		set_password(s, o->url.password, strlen(o->url.password), rank);
	}
	explicit_bzero(o->url.password, sizeof o->url.password);
	/* Every URL string we were given (argv, environment, config copy) keeps no plain
	 * password once parsed: argv and environ are visible in /proc/PID. */
	if (s->url_cli)
		scrub_url_password((char *)s->url_cli);
	if (s->url_config)
		scrub_url_password((char *)s->url_config);
	if ((e = getenv("RLOCK_URL")))
		scrub_url_password((char *)e);
	if ((e = getenv("REDIS_URL")))
		scrub_url_password((char *)e);
	if (!o->user && o->url.has_user)
		o->user = o->url.user;
	if (o->url.scheme == URL_REDISS)
		o->tls.enabled = 1;
	if (o->url.scheme == URL_UNIX && o->tls.enabled)
		usage_error("%s: TLS over a Unix socket is not supported", src);
}

static void env_passwords(struct state *s)
{
	char *p;

	/* Stored masked, then wiped in place: no plain copy stays in our environment (nor
	 * in /proc/PID/environ); the variables are removed from the command's. */
	if ((p = getenv("REDISCLI_AUTH")) && *p) {
		set_password(s, p, strlen(p), PW_ENV);
		explicit_bzero(p, strlen(p));
	}
	if ((p = getenv("RLOCK_PASSWORD")) && *p) {
		set_password(s, p, strlen(p), PW_ENV);
		explicit_bzero(p, strlen(p));
	}
}

static void print_version(void)
{
	const struct tls_ops *tls;
	char why[512];

	/* OpenSSL lives in the TLS module: loading it here also shows it works. */
	tls = tlsload(why, sizeof why);
	if (tls)
		printf("rlock %s (hiredis %s, %s)\n", RLOCK_VERSION, resp_hiredis_version(),
		       tls->version());
	else
		printf("rlock %s (hiredis %s, TLS: unavailable (%s))\n", RLOCK_VERSION,
		       resp_hiredis_version(), why);
}

void cli_parse(int argc, char **argv, struct opts *o)
{
	struct state s = {.o = o};
	const char *config_cli = NULL;
	int c, idx;

	memset(o, 0, sizeof *o);
	o->prefix = "rlock:";
	o->wait_ms = -1;
	o->conflict_exit = RL_EX_CONFLICT;
	o->ttl_ms = 30000;
	o->on_lost = LOST_TERM;
	o->lost_signal = SIGTERM;
	o->kill_after_ms = 10000;
	o->connect_timeout_ms = 2000;
	o->io_timeout_ms = 2000;

	/* Pass 1: --help, --version, --config, -v/-q (so config errors are reported in the
	 * right voice). Errors are left to pass 2. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, short_opts, long_opts, &idx)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			exit(fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1);
		}
		if (c == 'V') {
			print_version();
			exit(fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1);
		}
		if (c == O_CONFIG)
			config_cli = optarg;
	}

	/* Lowest precedence first: config file, then environment, then command line. */
	int explicit_path;
	const char *cfg = find_config(config_cli, &explicit_path);
	if (cfg)
		load_config(&s, cfg, explicit_path);
	const char *e = getenv("RLOCK_PREFIX");
	if (e && *e) {
		char err[200];
		if (parse_prefix(e, err, sizeof err) < 0)
			usage_error("RLOCK_PREFIX: %s", err);
		o->prefix = e;
	}
	env_passwords(&s);

	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, short_opts, long_opts, &idx)) != -1) {
		char src[64];
		if (c == '?' || c == ':') {
			const char *bad = argv[optind - 1];
			if (optopt && optopt < 256 && strchr("kwEtcu", optopt) && bad[0] == '-' &&
			    bad[1] == optopt)
				usage_error("option -%c needs a value", optopt);
			if (bad && strchr(bad, '=') == NULL && bad[0] == '-' && bad[1] == '-') {
				for (const struct option *op = long_opts; op->name; op++)
					if (!strcmp(bad + 2, op->name) && op->has_arg)
						usage_error("option --%s needs a value", op->name);
			}
			if (optopt && optopt < 256)
				usage_error("unknown option -%c", optopt);
			usage_error("unknown option '%.100s'", bad ? bad : "?");
		}
		if (c >= 256 || c == 'k' || c == 'n' || c == 'w' || c == 'E' || c == 't' ||
		    c == 'c' || c == 'u' || c == 'v' || c == 'q') {
			const char *lname = "?";
			for (const struct option *op = long_opts; op->name; op++)
				if (op->val == c) {
					lname = op->name;
					break;
				}
			snprintf(src, sizeof src, "--%s", lname);
			if (c == O_CONFIG)
				continue;
			apply(&s, c, optarg, src, 1);
		}
	}
	log_verbosity = o->verbose;

	choose_url(&s);
	if (o->tls.enabled && o->url.scheme == URL_UNIX)
		usage_error("--tls: TLS over a Unix socket is not supported");
	if (!o->tls.enabled && (o->tls.cacert || o->tls.cacertdir || o->tls.cert || o->tls.key ||
	                        o->tls.sni || o->tls.insecure))
		usage_error("TLS options need --tls or a rediss:// URL");
	if (!!o->tls.cert != !!o->tls.key)
		usage_error("--cert and --tls-key go together");

	int nargs = argc - optind;
	switch (o->mode) {
	case MODE_RUN:
		if (!o->name)
			usage_error("no lock name: give -k NAME");
		if (o->shell_command && nargs > 0)
			usage_error(
			    "give either -c 'COMMAND' or a command after the options, not both");
		if (!o->shell_command && nargs == 0)
			usage_error("no command to run");
		o->argv = argv + optind;
		break;
	case MODE_STATUS:
	case MODE_BREAK:
		if (!o->name)
			usage_error("%s needs -k NAME",
			            o->mode == MODE_STATUS ? "--status" : "--break");
		/* fall through */
	case MODE_LIST:
		if (nargs > 0 || o->shell_command)
			usage_error("no command is run with --status, --break or --list");
		break;
	}
	if (o->json && o->mode != MODE_STATUS && o->mode != MODE_LIST)
		usage_error("--json goes with --status or --list");
}
