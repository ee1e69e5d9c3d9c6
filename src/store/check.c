/* SPDX-License-Identifier: MIT */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "backend.h"
#include "cluster.h"
#include "conn.h"
#include "exitcodes.h"
#include "json.h"
#include "lock.h"
#include "log.h"
#include "sentinel.h"

#define PINGS          5    /* the round trip: the median of these */
#define TIMES          3    /* the clock offset: the sample with the shortest round trip */
#define OFFSET_WARN_MS 1000 /* a server clock this far off: no common time source */
#define MOVE_WARN_MS   50   /* the offset moved this much (beyond the round trips) */
#define ARGS_MAX       12

enum level { L_OK, L_WARN, L_UNSAFE };
static const char *const level_name[] = {"ok", "warn", "unsafe"};

/* What has been printed so far. */
struct out {
	int json;
	int count[3];
	int reached, nodes;
	int bad_file; /* a TLS file named (--cacert /etc/hosts) did not load: exit 66 */
	int bad_url;  /* the URL is wrong for the server (/2 on a Cluster node): exit 64 */
};

#define BAD_DB_FIX "name a database the server has in the URL (a Redis Cluster has only database 0)"
#define NOPASS_FIX                                                                                 \
	"give the password of the server meant, or none for a server that has none "               \
	"(--password-file, "                                                                       \
	"RLOCK_PASSWORD, REDISCLI_AUTH, the URL)"

/* The fix of a URL the server says cannot be for it (store_fault_config). */
static const char *config_fix(void)
{
	return (conn_fault() & CONN_FAULT_NOPASS) ? NOPASS_FIX : BAD_DB_FIX;
}

/* The fix for a node that cannot be reached: dflt, unless a file the user named for
 * the connection cannot be read or is not of its type (store_fault_file), or the URL
 * cannot be for that server (store_fault_config: a database but 0 on a Cluster node, one
 * past its `databases`): no network fix helps those. */
static const char *reach_fix(struct out *out, const char *why, const char *dflt)
{
	if (store_fault_config()) {
		out->bad_url = 1;
		return config_fix();
	}
	if (store_fault_file()) {
		out->bad_file = 1;
		return "give --cacert, --cert and --tls-key readable PEM files of their kind";
	}
	/* TLS that answered, but not as trusted: the network and the server are fine
	 * (tls.c's words, its hint already inside why) */
	if (strstr(why, "certificate verify failed"))
		return "make the certificate verify: --cacert naming the CA that signed it, a "
		       "certificate valid now and naming the host or IP it is reached at (or "
		       "--sni NAME)";
	if (strstr(why, "the server refused the client certificate") ||
	    strstr(why, "the server asks for a client certificate"))
		return "give --cert and --tls-key: a client certificate valid now, of a CA the "
		       "server trusts (tls-ca-cert-file)";
	return dflt;
}

/* One node being checked. */
struct node {
	struct store *s;
	const struct server *srv;
	const struct check_ask *o;
	struct out *out;
	struct resp_reply *info; /* INFO's text, or NULL (refused) */
	int waitaof_early;       /* WAITAOF can return before the fsync with everysec */
	char key[300]; /* the throwaway key of the rights tried: PREFIX{rlock-check-HEX} */
	char channel[320];
	char tag[40]; /* rlock-check-HEX: the key's tag; on a Cluster node, -N is added */
};

static void finding(struct out *out, enum level lv, const char *node, const char *check,
                    const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void finding(struct out *out, enum level lv, const char *node, const char *check,
                    const char *fix, const char *fmt, ...)
{
	char fact[1024];
	va_list ap;

	va_start(ap, fmt);
	log_vreason(fact, sizeof fact, fmt, ap); /* a server's long text: cut, shown */
	va_end(ap);
	if (out->json) {
		fputs(out->count[0] + out->count[1] + out->count[2] ? ",{" : "{", stdout);
		printf("\"level\":\"%s\",\"node\":", level_name[lv]);
		json_str(stdout, node);
		fputs(",\"check\":", stdout);
		json_str(stdout, check);
		fputs(",\"fact\":", stdout);
		json_str(stdout, fact);
		fputs(",\"fix\":", stdout);
		if (fix)
			json_str(stdout, fix);
		else
			fputs("null", stdout);
		fputs("}", stdout);
	} else {
		/* A terminal: what a server said (an error, an INFO field) may hold escapes. */
		char n[1024], f[4 * sizeof fact], x[1024];
		log_escape(n, sizeof n, node, strlen(node));
		log_escape(f, sizeof f, fact, strlen(fact));
		log_escape(x, sizeof x, fix ? fix : "", fix ? strlen(fix) : 0);
		printf("%-6s %s %s: %s%s%s\n", level_name[lv], n, check, f, fix ? "; fix: " : "",
		       x);
	}
	out->count[lv]++;
}

/* One command on the node: LOCK_OK with *r (an ERROR reply too), else the failure. */
static int cmdv(struct node *n, struct resp_reply **r, char *err, size_t errlen, int argc,
                const char **argv)
{
	size_t lens[ARGS_MAX];

	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	int64_t cap = clock_ms() + n->srv->connect_timeout_ms + n->srv->io_timeout_ms;
	return store_node_call(n->s, n->srv, argc, argv, lens, cap, r, err, errlen);
}

/* cmd(n, &r, err, errlen, "ARG", ..., NULL) */
static int cmd(struct node *n, struct resp_reply **r, char *err, size_t errlen, ...)
{
	const char *argv[ARGS_MAX];
	int argc = 0;
	va_list ap;

	va_start(ap, errlen);
	for (const char *a; argc < ARGS_MAX && (a = va_arg(ap, const char *));)
		argv[argc++] = a;
	va_end(ap);
	return cmdv(n, r, err, errlen, argc, argv);
}

static int64_t clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int by_value(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Reachable? The first PING connects; the median of PINGS more is the round trip.
 * 0, or -1 (the finding said why). */
static int check_reach(struct node *n)
{
	struct resp_reply *r = NULL;
	char err[512];
	int64_t rtt[PINGS];
	const char *name = n->srv->name;
	enum level down = n->o->redlock ? L_WARN : L_UNSAFE; /* Redlock: the topology says */

	int rc = cmd(n, &r, err, sizeof err, "PING", NULL);
	if (rc == LOCK_OK && resp_is_error(r, "NOPERM")) {
		/* logged in (a wrong password fails before): only PING is refused */
		char fix[160];
		snprintf(fix, sizeof fix, "ACL SETUSER %s +ping",
		         n->srv->user ? n->srv->user : "default");
		finding(n->out, L_WARN, name, "reach", fix,
		        "answers, but user '%s' may not run PING (%s): no round trip measured",
		        n->srv->user ? n->srv->user : "default", r->str);
		resp_free(r);
		n->out->reached++;
		return 0;
	}
	/* an error to PING: a login it wants (NOAUTH) is the credentials' to fix; a state
	 * (a script that runs, a dataset that loads) is not */
	const char *said = NULL;
	if (rc == LOCK_OK && r->type == RESP_ERROR) {
		log_reason(err, sizeof err, "PING: %s", r->str);
		rc = LOCK_DENIED;
		if (resp_is_error(r, "BUSY"))
			said = "a script runs on the server: check again once it ends (or SCRIPT "
			       "KILL)";
		else if (resp_is_error(r, "LOADING"))
			said = "the server loads its dataset: check again once it is loaded";
		else if (!resp_is_noauth(r) && !resp_is_error(r, "WRONGPASS"))
			said = "see the server's error";
	}
	resp_free(r);
	if (rc != LOCK_OK) {
		const char *fix = said ? said
		                  : rc == LOCK_DENIED
		                      ? "check the user and password (--user, --password-file)"
		                      : reach_fix(n->out, err,
		                                  "check the URL, the network and that the server "
		                                  "runs");
		/* a URL the run refuses (64) is not a node down, whatever the topology */
		finding(n->out, store_fault_config() ? L_UNSAFE : down, name, "reach", fix, "%s",
		        err);
		return -1;
	}
	for (int i = 0; i < PINGS; i++) {
		int64_t t0 = clock_us(CLOCK_MONOTONIC);
		if (cmd(n, &r, err, sizeof err, "PING", NULL) != LOCK_OK) {
			finding(n->out, down, name, "reach",
			        "check the network between this host and the server",
			        "answered once, then: %s", err);
			return -1;
		}
		rtt[i] = clock_us(CLOCK_MONOTONIC) - t0;
		resp_free(r);
	}
	qsort(rtt, PINGS, sizeof rtt[0], by_value);
	n->out->reached++;
	finding(n->out, L_OK, name, "reach", NULL,
	        "answers; round trip %.3f ms (median of %d PINGs)", rtt[PINGS / 2] / 1000.0, PINGS);
	return 0;
}

/* The server's clock minus ours, from TIME, at the midpoint of the round trip of the
 * sample with the shortest one: 0 with *off_us and *rtt_us, or -1 (*why). */
static int clock_offset(struct node *n, int64_t *off_us, int64_t *rtt_us, char *why, size_t len)
{
	*rtt_us = -1;
	for (int i = 0; i < TIMES; i++) {
		struct resp_reply *r = NULL;
		int64_t m0 = clock_us(CLOCK_MONOTONIC), t0 = clock_us(CLOCK_REALTIME);
		if (cmd(n, &r, why, len, "TIME", NULL) != LOCK_OK)
			return -1;
		int64_t t1 = clock_us(CLOCK_REALTIME), m1 = clock_us(CLOCK_MONOTONIC);
		if (r->type != RESP_ARRAY || r->elements != 2 ||
		    r->element[0]->type != RESP_STRING || r->element[1]->type != RESP_STRING) {
			log_reason(why, len, "TIME: %s",
			           r->type == RESP_ERROR ? r->str : "unexpected reply");
			resp_free(r);
			return -1;
		}
		int64_t srv = strtoll(r->element[0]->str, NULL, 10) * 1000000 +
		              strtoll(r->element[1]->str, NULL, 10);
		resp_free(r);
		if (*rtt_us < 0 || m1 - m0 < *rtt_us) {
			*rtt_us = m1 - m0;
			*off_us = srv - (t0 + t1) / 2;
		}
	}
	return 0;
}

static void check_clock(struct node *n, int64_t off0, int64_t rtt0)
{
	int64_t off1, rtt1;
	char why[512];
	const char *name = n->srv->name;

	if (clock_offset(n, &off1, &rtt1, why, sizeof why) < 0) {
		finding(n->out, L_WARN, name, "clock", "allow TIME for the user (+time)",
		        "cannot tell the server's clock: %s", why);
		return;
	}
	double moved = (off1 - off0) / 1000.0, bound = (rtt0 + rtt1) / 1000.0 + MOVE_WARN_MS;
	if (moved > bound || -moved > bound)
		finding(n->out, L_WARN, name, "clock",
		        "run NTP (chrony, systemd-timesyncd) on both hosts; no manual clock steps",
		        "the offset moved by %.1f ms during the check (%.1f ms, then %.1f ms): a "
		        "clock stepped; a server clock jump changes when a lock expires",
		        moved, off0 / 1000.0, off1 / 1000.0);
	else if (off1 / 1000 > OFFSET_WARN_MS || -off1 / 1000 > OFFSET_WARN_MS)
		finding(
		    n->out, L_WARN, name, "clock",
		    "run NTP (chrony, systemd-timesyncd) on both hosts",
		    "the server's clock is %.1f s %s this host's (steady during the check): the "
		    "clocks share no time source, and a correction will be a jump",
		    (off1 < 0 ? -off1 : off1) / 1e6, off1 < 0 ? "behind" : "ahead of");
	else
		finding(
		    n->out, L_OK, name, "clock", NULL,
		    "offset %.1f ms from this host's clock (+/-%.2f ms), steady during the check",
		    off1 / 1000.0, rtt1 / 2000.0);
}

/* INFO's field name ("role"), copied into val: 1, or 0 when absent or INFO refused. */
static int info_field(const struct node *n, const char *name, char *val, size_t len)
{
	size_t nl = strlen(name);

	val[0] = '\0';
	if (!n->info)
		return 0;
	for (const char *p = n->info->str; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, name, nl) == 0 && p[nl] == ':') {
			size_t vl = strcspn(p + nl + 1, "\r\n");
			log_clip(val, len, p + nl + 1, vl); /* a long one: cut, shown */
			return 1;
		}
	}
	return 0;
}

static int info_int(const struct node *n, const char *name, long long dflt)
{
	char v[32];

	return info_field(n, name, v, sizeof v) ? (int)strtoll(v, NULL, 10) : (int)dflt;
}

/* "7.2.4" as 70204 (0: not a version). */
static long version_number(const char *v)
{
	long major = 0, minor = 0, patch = 0;

	if (sscanf(v, "%ld.%ld.%ld", &major, &minor, &patch) < 2)
		return 0;
	return major * 10000 + minor * 100 + patch;
}

/* What the server's version means for rlock: the commands of its features that came
 * after the 5.0 every script needs (TIME before writes: effects replication). Valkey
 * speaks as Redis 7.2.4 (redis_version) and has everything Redis 7.2 has. */
static void check_features(struct node *n, long compat, const char *product)
{
	const char *name = n->srv->name;
	int aof = n->o->wait_aof_local || n->o->wait_aof_replicas;

	if (!compat)
		return;
	if (compat < 50000) {
		finding(n->out, L_UNSAFE, name, "features", "Redis 6.2 or later, or Valkey",
		        "%s is older than Redis 5.0: rlock's scripts read TIME before they write "
		        "(effects replication, 5.0+)",
		        product);
		return;
	}
	if (compat < 70200 && aof) {
		finding(n->out, L_UNSAFE, name, "features",
		        "Redis 7.2 or later, or Valkey; or drop --wait-aof",
		        "%s has no WAITAOF: with --wait-aof every run exits 69 before its command",
		        product);
		return;
	}
	char missing[300] = "";
	if (compat < 60000)
		snprintf(missing, sizeof missing,
		         "no KEEPTTL or ACL users (6.0): -s/--limit and a user in the URL fail; ");
	if (compat < 60200)
		snprintf(missing + strlen(missing), sizeof missing - strlen(missing),
		         "no SET ... GET (6.2): --history records no run's end; ");
	if (compat < 70000)
		snprintf(missing + strlen(missing), sizeof missing - strlen(missing),
		         "no ACL DRYRUN (7.0): --check tries the rights on a throwaway key; ");
	finding(n->out, compat < 60200 ? L_WARN : L_OK, name, "features",
	        compat < 60200 ? "Redis 6.2 or later, or Valkey" : NULL, "%s%s", missing,
	        compat < 70200     ? "no WAITAOF (7.2): --wait-aof is refused (exit 69)"
	        : n->waitaof_early ? "WAITAOF, but with appendfsync everysec it can answer before "
	                             "the fsync (redis/redis#13793): --wait-aof needs appendfsync "
	                             "always here"
	                           : "WAITAOF: --wait-aof can make a grant survive a restart");
}

static void check_version(struct node *n)
{
	struct resp_reply *r = NULL;
	char err[512], v[64], mode[32], server[32], own[64], key[48], product[128];

	n->waitaof_early = 0;
	if (cmd(n, &r, err, sizeof err, "INFO", NULL) == LOCK_OK && r->type == RESP_STRING) {
		n->info = r;
	} else {
		finding(n->out, L_WARN, n->srv->name, "version", "allow INFO for the user (+info)",
		        "INFO refused (%s): version, memory, persistence and role cannot be "
		        "told",
		        r && r->type == RESP_ERROR ? r->str : err);
		resp_free(r);
		return;
	}
	info_field(n, "redis_version", v, sizeof v);
	/* Valkey renamed redis_mode to server_mode (8.0) */
	if (!info_field(n, "redis_mode", mode, sizeof mode))
		info_field(n, "server_mode", mode, sizeof mode);
	/* Valkey (and its kin) names itself in server_name and gives its own version in
	 * NAME_version; redis_version is then the Redis it is compatible with. */
	info_field(n, "server_name", server, sizeof server);
	snprintf(key, sizeof key, "%.30s_version", server);
	if (server[0] && strcmp(server, "redis") != 0 && info_field(n, key, own, sizeof own)) {
		log_reason(product, sizeof product, "%s %s",
		           strcmp(server, "valkey") == 0 ? "Valkey" : server, own);
		/* Valkey 8.0 has the WAITAOF bug of Redis 7.4.0-7.4.2 (below) */
		long ov = version_number(own);
		n->waitaof_early = strcmp(server, "valkey") == 0 && ov >= 80000 && ov < 80100;
		finding(n->out, L_OK, n->srv->name, "version", NULL, "%s (%s; speaks as Redis %s)",
		        product, mode[0] ? mode : "standalone", v[0] ? v : "?");
	} else {
		log_reason(product, sizeof product, "Redis %s", v[0] ? v : "?");
		/* With appendfsync everysec, WAITAOF could count writes as fsynced that were
		 * written less than a second after the last fsync (redis/redis#13793: 7.4.0
		 * to 7.4.2); seen on Valkey 8.0.1 by test/faults/run's aof-crash rows. */
		long rv = version_number(v);
		n->waitaof_early = rv >= 70400 && rv < 70403;
		finding(n->out, L_OK, n->srv->name, "version", NULL, "%s (%s)", product,
		        mode[0] ? mode : "standalone");
	}
	check_features(n, version_number(v), product);
}

static int unknown_commands(struct node *n, char *out, size_t len, int *needed);

/* SCRIPT LOAD of each script: cached, not run. NOPERM: EVAL of a no-op instead. Then
 * whether the server knows every command rlock sends and its scripts call
 * (rename-command). */
static void check_scripts(struct node *n)
{
	const char *text, *sha, *name = n->srv->name;
	size_t len;
	char err[512];
	int i;

	for (i = 0; lock_script(i, &text, &len, &sha) == 0; i++) {
		struct resp_reply *r = NULL;
		if (cmd(n, &r, err, sizeof err, "SCRIPT", "LOAD", text, NULL) != LOCK_OK) {
			finding(n->out, L_UNSAFE, name, "scripts", NULL, "SCRIPT LOAD: %s", err);
			return;
		}
		int same = r->type == RESP_STRING && strcmp(r->str, sha) == 0;
		if (!same)
			log_reason(err, sizeof err, "%s",
			           r->type == RESP_ERROR ? r->str
			                                 : "a SHA-1 that is not the script's");
		resp_free(r);
		if (!same && strstr(err, "NOPERM")) {
			r = NULL;
			int ran =
			    cmd(n, &r, err, sizeof err, "EVAL", "return 0", "0", NULL) == LOCK_OK &&
			    r->type == RESP_INTEGER;
			resp_free(r);
			finding(n->out, ran ? L_OK : L_UNSAFE, name, "scripts",
			        ran ? NULL : "allow EVAL and EVALSHA for the user (+eval +evalsha)",
			        ran ? "SCRIPT LOAD refused, EVAL runs: the scripts go by EVAL"
			            : "neither SCRIPT LOAD nor EVAL runs: no lock can be taken");
			return;
		}
		if (!same) {
			finding(n->out, L_UNSAFE, name, "scripts",
			        "enable Lua scripting (Redis 2.6+; not disabled by the provider)",
			        "SCRIPT LOAD: %s", err);
			return;
		}
	}
	char unknown[300];
	int needed = 0;
	if (unknown_commands(n, unknown, sizeof unknown, &needed) > 0) {
		finding(n->out, needed ? L_UNSAFE : L_WARN, name, "scripts",
		        "give these commands their names back (rename-command in the server's "
		        "configuration)",
		        "the server does not know %s, which rlock %s (renamed or disabled with "
		        "rename-command)%s",
		        unknown, needed ? "needs" : "uses",
		        needed ? ": no lock can be taken" : ": rlock runs without them, less well");
		return;
	}
	finding(n->out, L_OK, name, "scripts", NULL, "the %d scripts of rlock load (SHA-1s match)",
	        i);
}

static void check_memory(struct node *n)
{
	char policy[64];

	if (!info_field(n, "maxmemory_policy", policy, sizeof policy))
		return; /* INFO refused: said once by check_version */
	if (strcmp(policy, "noeviction") == 0)
		finding(n->out, L_OK, n->srv->name, "maxmemory-policy", NULL, "noeviction");
	else
		finding(n->out, L_UNSAFE, n->srv->name, "maxmemory-policy",
		        "CONFIG SET maxmemory-policy noeviction (and in redis.conf)",
		        "%s: under memory pressure a lock key can be evicted and taken by another "
		        "holder while the first still runs",
		        policy);
}

/* CONFIG GET name into val: 1, 0 refused (why in val), -1 the connection failed. */
static int config_get(struct node *n, const char *name, char *val, size_t len)
{
	struct resp_reply *r = NULL;
	char err[512];

	if (cmd(n, &r, err, sizeof err, "CONFIG", "GET", name, NULL) != LOCK_OK) {
		log_reason(val, len, "%s", err);
		return -1;
	}
	int ok = r->type == RESP_ARRAY && r->elements == 2 && r->element[1]->type == RESP_STRING;
	log_reason(val, len, "%s",
	           ok                      ? r->element[1]->str
	           : r->type == RESP_ERROR ? r->str
	           : r->type == RESP_ARRAY ? "no such setting"
	                                   : "unexpected reply");
	resp_free(r);
	return ok;
}

/* The longest interval of a `save` setting ("3600 1 300 100"): how old the last
 * snapshot can be while writes come in. */
static long save_window(const char *save)
{
	long most = 0;
	char *end;

	for (int i = 0; *save; i++) {
		long v = strtol(save, &end, 10);
		if (end == save)
			break;
		if (i % 2 == 0 && v > most)
			most = v;
		save = end;
	}
	return most;
}

static void check_rdb_only(struct node *n, const char *save)
{
	const char *name = n->srv->name;
	const char *fix = "CONFIG SET appendonly yes; CONFIG SET appendfsync always (and in "
	                  "redis.conf)";

	if (save[0])
		finding(
		    n->out, L_WARN, name, "persistence", fix,
		    "RDB snapshots only (save %s): a crash or restart loses the writes since the "
		    "last snapshot, up to %ld s (locks taken and fences counted in that window)",
		    save, save_window(save));
	else if (n->o->redlock)
		finding(n->out, L_WARN, name, "persistence",
		        "keep a restarted node out for one TTL (Redlock's delayed restart), or AOF",
		        "none: a restart empties the node, and its vote for a lock still held "
		        "can go to another holder");
	else
		finding(n->out, L_UNSAFE, name, "persistence", fix,
		        "none (appendonly no, save \"\"): a restart empties the keyspace: the lock "
		        "is gone while its holder runs, and fence values start again");
}

static void check_persistence(struct node *n)
{
	char aof[320], fsync[320], save[320];
	const char *name = n->srv->name;
	const char *fix = "CONFIG SET appendfsync always (and in redis.conf)";

	if (config_get(n, "appendonly", aof, sizeof aof) != 1 ||
	    config_get(n, "appendfsync", fsync, sizeof fsync) != 1 ||
	    config_get(n, "save", save, sizeof save) != 1) {
		char on[8];
		info_field(n, "aof_enabled", on, sizeof on);
		finding(n->out, L_WARN, name, "persistence",
		        "allow CONFIG GET for the user, or check appendonly/appendfsync by hand",
		        "cannot tell: CONFIG GET refused (%s)%s", aof,
		        !on[0]         ? ""
		        : on[0] == '1' ? "; AOF is on, appendfsync unknown"
		                       : "; AOF is off");
		return;
	}
	if (strcmp(aof, "yes") != 0 && n->o->wait_aof_local)
		finding(n->out, L_UNSAFE, name, "persistence",
		        "CONFIG SET appendonly yes (and in "
		        "redis.conf), or drop --wait-aof",
		        "appendonly no: with --wait-aof every run exits 69 before its command");
	else if (strcmp(aof, "yes") != 0)
		check_rdb_only(n, save);
	else if (strcmp(fsync, "always") == 0)
		finding(n->out, L_OK, name, "persistence", NULL,
		        "appendonly yes, appendfsync always");
	else if (strcmp(fsync, "everysec") == 0 && n->waitaof_early &&
	         (n->o->wait_aof_local || n->o->wait_aof_replicas))
		finding(n->out, L_UNSAFE, name, "persistence", fix,
		        "appendonly yes, appendfsync everysec, and this version's WAITAOF can "
		        "answer before the fsync (redis/redis#13793): --wait-aof does not make "
		        "the grant survive a crash here");
	else if (strcmp(fsync, "everysec") == 0)
		finding(
		    n->out, L_WARN, name, "persistence", fix,
		    "appendonly yes, appendfsync everysec: a crash of the host loses up to 1 s "
		    "(2 s when the disk is slow) of writes: a lock just taken, a fence counted");
	else
		finding(n->out, L_WARN, name, "persistence", fix,
		        "appendonly yes, appendfsync %s: a crash of the host loses what the kernel "
		        "has not written yet (typically up to 30 s)",
		        fsync);
}

/* Role and replicas. A replica is unsafe, except a Cluster's (followed by MOVED). */
static void check_role(struct node *n, int cluster)
{
	char role[32], mhost[300], mport[16];
	const char *name = n->srv->name;

	if (!info_field(n, "role", role, sizeof role))
		return;
	if (strcmp(role, "master") != 0) {
		info_field(n, "master_host", mhost, sizeof mhost);
		info_field(n, "master_port", mport, sizeof mport);
		finding(n->out, cluster ? L_WARN : L_UNSAFE, name, "role",
		        "give the master's URL, or a redis-sentinel:// URL that follows failovers",
		        "a replica (of %s:%s): writes are refused or lost at its next sync", mhost,
		        mport);
		return;
	}
	int replicas = info_int(n, "connected_slaves", 0);
	int min = info_int(n, "min_slaves_good_slaves", -1) >= 0;
	if (replicas == 0)
		finding(n->out, L_OK, name, "replicas", NULL, "master, no replicas");
	else if (min || n->o->wait_replicas > 0)
		finding(n->out, L_OK, name, "replicas", NULL, "master, %d replica(s); %s", replicas,
		        min ? "min-replicas-to-write is set" : "--wait-replicas is given");
	else
		finding(n->out, L_WARN, name, "replicas",
		        "--wait-replicas 1 (or min-replicas-to-write 1 on the master)",
		        "master, %d replica(s), min-replicas-to-write 0 and no --wait-replicas: a "
		        "failover can promote a replica that never saw a lock just taken",
		        replicas);
}

/* The slot map as the Cluster node n gives it (CLUSTER SLOTS, the right rlock itself
 * uses; an empty host in it is n's). 0, or -1 with why (refused, unreadable). */
static int node_map(struct node *n, struct cluster_map *m, char *why, size_t len)
{
	struct resp_reply *r = NULL;
	struct cluster_addr at = {.port = n->srv->ep.port};

	snprintf(at.host, sizeof at.host, "%s", n->srv->ep.host ? n->srv->ep.host : "");
	cluster_map_init(m);
	if (cmd(n, &r, why, len, "CLUSTER", "SLOTS", NULL) != LOCK_OK || r->type == RESP_ERROR) {
		if (r && r->type == RESP_ERROR)
			log_reason(why, len, "%s", r->str);
		resp_free(r);
		return -1;
	}
	int rc = cluster_map_parse(m, r, &at, why, len);
	resp_free(r);
	return rc;
}

/* CLUSTER INFO's cluster_state; a user that may not run it (the least-privilege line of
 * docs/production.md allows only CLUSTER SLOTS, all rlock uses) is told from the slot
 * map: every slot served, or how many are not. */
static void check_cluster(struct node *n)
{
	struct resp_reply *r = NULL;
	char err[512], state[32] = "", size[16] = "";

	if (cmd(n, &r, err, sizeof err, "CLUSTER", "INFO", NULL) == LOCK_OK &&
	    r->type == RESP_STRING) {
		struct resp_reply *keep = n->info;
		n->info = r;
		info_field(n, "cluster_state", state, sizeof state);
		info_field(n, "cluster_size", size, sizeof size);
		n->info = keep;
	} else if (r && resp_is_error(r, "NOPERM")) {
		char why[512];
		struct cluster_map *m = calloc(1, sizeof *m);
		int unserved = 0, masters = 0;
		if (m && node_map(n, m, why, sizeof why) == 0) {
			for (int s = 0; s < CLUSTER_SLOTS; s++)
				unserved += m->owner[s] < 0;
			while (cluster_map_master(m, masters) >= 0)
				masters++;
			if (unserved == 0)
				finding(
				    n->out, L_OK, n->srv->name, "cluster", NULL,
				    "every slot served, %d master(s) (CLUSTER SLOTS; CLUSTER INFO "
				    "refused to the user)",
				    masters);
			else
				finding(
				    n->out, L_UNSAFE, n->srv->name, "cluster",
				    "bring every slot's master up (CLUSTER SLOTS)",
				    "%d slot(s) no master serves, %d master(s) serving the rest "
				    "(CLUSTER SLOTS; CLUSTER INFO refused to the user)",
				    unserved, masters);
		} else {
			finding(n->out, L_WARN, n->srv->name, "cluster",
			        "allow CLUSTER SLOTS for the user (+cluster|slots)",
			        "cannot tell whether every slot is served: CLUSTER INFO refused "
			        "(%s); "
			        "CLUSTER SLOTS: %s",
			        r->str, m ? why : "out of memory");
		}
		free(m);
		resp_free(r);
		return;
	} else {
		snprintf(state, sizeof state, "unknown");
	}
	resp_free(r);
	finding(n->out, strcmp(state, "ok") == 0 ? L_OK : L_UNSAFE, n->srv->name, "cluster",
	        strcmp(state, "ok") == 0 ? NULL : "bring every slot's master up (CLUSTER INFO)",
	        "cluster_state %s, %s master(s) serving slots", state, size[0] ? size : "?");
}

/* The throwaway key's name, PREFIX{TAG} or PREFIX{TAG-N}. */
static void set_key(struct node *n, int suffix)
{
	if (suffix < 0)
		snprintf(n->key, sizeof n->key, "%s{%s}", n->o->prefix, n->tag);
	else
		snprintf(n->key, sizeof n->key, "%s{%s-%d}", n->o->prefix, n->tag, suffix);
	snprintf(n->channel, sizeof n->channel, "%s:released", n->key);
}

/* A tag of master idx's in m for n's key (about 1 in its share of the slots): 0, or
 * -1 when none was found. */
static int key_of(struct node *n, const struct cluster_map *m, int idx)
{
	for (int j = 0; j < CLUSTER_SLOTS * 64; j++) {
		set_key(n, j);
		if (m->owner[cluster_keyslot(n->key, strlen(n->key))] == idx)
			return 0;
	}
	return -1;
}

/* On a Cluster node, a throwaway key in a slot that node serves: the rights tried on
 * another slot's key would be answered MOVED (not tried: a refusal missed, and the
 * script trial given up). The slot map names the masters by the addresses the
 * cluster gives, which need not be the one n was reached at: the master named so
 * first, then each other in turn, until n runs a no-op script on the key without a
 * redirect. Unchanged when the map cannot be read (the trial then says why). */
static void cluster_key(struct node *n)
{
	struct cluster_map *m = calloc(1, sizeof *m);
	char why[512];
	int self = -1;

	set_key(n, -1);
	if (!m || node_map(n, m, why, sizeof why) < 0) {
		free(m);
		return;
	}
	for (int i = 0; i < m->n; i++)
		if (m->node[i].port == n->srv->ep.port && n->srv->ep.host &&
		    !strcmp(m->node[i].host, n->srv->ep.host))
			self = i;
	for (int i = -1, idx; i < 0 || (idx = cluster_map_master(m, i)) >= 0; i++) {
		if (i < 0 && self < 0)
			continue;
		if (i < 0)
			idx = self;
		else if (idx == self)
			continue;
		if (key_of(n, m, idx) < 0)
			continue;
		struct resp_reply *r = NULL;
		int moved =
		    cmd(n, &r, why, sizeof why, "EVAL", "return 0", "1", n->key, NULL) == LOCK_OK &&
		    (resp_is_error(r, "MOVED") || resp_is_error(r, "ASK"));
		resp_free(r);
		if (!moved)
			break; /* served here (or EVAL refused: the trial says so) */
	}
	free(m);
}

/* The rights rlock uses: on the node (top) or inside its scripts. K: the lock's key,
 * C: its release channel. Optional ones have a fallback or serve one option. */
struct right {
	const char *name;
	int needed, top;
	const char *argv[5];
};
static const struct right rights[] = {
    {"evalsha", 1, 1, {"EVALSHA", "06d3d9b2060dd51343d5f19f0e531f15c507e3d1", "1", "K"}},
    {"eval", 1, 1, {"EVAL", "return 0", "1", "K"}},
    {"get", 1, 0, {"GET", "K"}},
    {"set", 1, 0, {"SET", "K", "v"}},
    {"del", 1, 0, {"DEL", "K"}},
    {"exists", 1, 0, {"EXISTS", "K"}},
    {"pexpire", 1, 0, {"PEXPIRE", "K", "1"}},
    {"pttl", 1, 0, {"PTTL", "K"}},
    {"incr", 1, 0, {"INCR", "K"}},
    {"hset", 1, 0, {"HSET", "K", "f", "v"}},
    {"hget", 1, 0, {"HGET", "K", "f"}},
    {"hmget", 1, 0, {"HMGET", "K", "f"}},
    {"hdel", 1, 0, {"HDEL", "K", "f"}},
    {"zadd", 1, 0, {"ZADD", "K", "1", "m"}},
    {"zcard", 1, 0, {"ZCARD", "K"}},
    {"zcount", 1, 0, {"ZCOUNT", "K", "0", "1"}},
    {"zrange", 1, 0, {"ZRANGE", "K", "0", "1"}},
    {"zrangebyscore", 1, 0, {"ZRANGEBYSCORE", "K", "0", "1"}},
    {"zrem", 1, 0, {"ZREM", "K", "m"}},
    {"zscore", 1, 0, {"ZSCORE", "K", "m"}},
    {"zremrangebyscore", 0, 0, {"ZREMRANGEBYSCORE", "K", "0", "1"}},
    {"zrevrangebyscore", 0, 0, {"ZREVRANGEBYSCORE", "K", "1", "0"}},
    {"type", 0, 0, {"TYPE", "K"}},
    {"xadd", 0, 0, {"XADD", "K", "*", "f", "v"}},
    {"xrevrange", 0, 0, {"XREVRANGE", "K", "+", "-"}},
    {"xdel", 0, 0, {"XDEL", "K", "0-1"}}, /* a Redlock attempt's record taken back */
    {"time", 1, 0, {"TIME"}},
    {"publish", 0, 0, {"PUBLISH", "C", "m"}}, /* wake-ups: best effort (here.lua) */
    {"rpush", 0, 0, {"RPUSH", "K", "v"}},
    {"zpopmin", 0, 0, {"ZPOPMIN", "K"}},
    {"blpop", 0, 1, {"BLPOP", "K", "0.01"}},
    {"subscribe", 0, 1, {"SUBSCRIBE", "C"}},
    {"info", 0, 1, {"INFO", "server"}},
    {"scan", 0, 1, {"SCAN", "0", "MATCH", "K", "COUNT"}},
    {"wait", 0, 1, {"WAIT", "0", "0"}},
    {"ping", 0, 1, {"PING"}},
};
#define NRIGHTS (sizeof rights / sizeof rights[0])

/* Without ACL DRYRUN: the rights inside the scripts, tried by one script with pcall on
 * a throwaway key (deleted after each write; never written without the right to
 * delete it). Returns the names refused. A refusal inside a script has no NOPERM code
 * on every server: Redis 7.0 says "ERR The user executing the script can't run this
 * command or subcommand", 7.2 "ERR ACL failure in script: ... no permissions to run". */
static const char trial_script[] =
    "local k, ch, miss = KEYS[1], ARGV[1], {}\n"
    "local function try(...)\n"
    "  local r = redis.pcall(...)\n"
    "  local e = type(r) == 'table' and r.err\n"
    "  if e and (string.find(e, 'NOPERM', 1, true) or string.find(e, \"can't run\", 1, true)\n"
    "            or string.find(e, 'no permissions', 1, true)) then\n"
    "    table.insert(miss, string.lower((...)))\n"
    "    return false\n"
    "  end\n"
    "  return true\n"
    "end\n"
    "for _, c in ipairs({'GET', 'EXISTS', 'PTTL', 'ZCARD', 'ZPOPMIN'}) do try(c, k) end\n"
    "try('PEXPIRE', k, '1') try('HGET', k, 'f') try('HMGET', k, 'f') try('HDEL', k, 'f')\n"
    "try('ZCOUNT', k, '0', '1') try('ZRANGE', k, '0', '1') try('ZRANGEBYSCORE', k, '0', '1')\n"
    "try('ZREM', k, 'm') try('ZSCORE', k, 'm') try('TIME') try('PUBLISH', ch, 'check')\n"
    "try('XREVRANGE', k, '+', '-', 'COUNT', '1') try('XDEL', k, '0-1') try('TYPE', k)\n"
    "try('ZREMRANGEBYSCORE', k, '0', '1') try('ZREVRANGEBYSCORE', k, '1', '0')\n"
    "if try('DEL', k) then\n"
    "  for _, c in ipairs({{'SET', k, '1', 'NX', 'PX', '10000'}, {'INCR', k}, {'HSET', k, 'f', "
    "'1'},\n"
    "                      {'ZADD', k, '1', 'm'}, {'RPUSH', k, 'v'}, {'XADD', k, '*', 'f', "
    "'v'}}) do\n"
    "    try(unpack(c)) redis.pcall('DEL', k)\n"
    "  end\n"
    "end\n"
    "return miss\n";

/* Each command the scripts call, called with no arguments by one script: a command the
 * server does not know (renamed or disabled with rename-command) is refused as unknown
 * before its arguments are counted, so nothing runs (TIME, which takes none, reads the
 * clock). */
static const char unknown_script[] =
    "local miss = {}\n"
    "for c in string.gmatch(ARGV[1], '%S+') do\n"
    "  local r = redis.pcall(c)\n"
    "  local e = type(r) == 'table' and r.err\n"
    "  if e and string.find(e, 'Unknown ', 1, true)\n"
    "       and string.find(e, 'command called from script', 1, true) then\n"
    "    table.insert(miss, c)\n"
    "  end\n"
    "end\n"
    "return miss\n";

static int is_unknown(const struct resp_reply *r)
{
	return r->type == RESP_ERROR && strncmp(r->str, "ERR unknown command", 19) == 0;
}

/* unknown: right i's command is not known: named in out, *needed set if it is needed. */
static void unknown_add(size_t i, char *out, size_t len, size_t *used, int *count, int *needed)
{
	int w = snprintf(out + *used, len - *used, "%s%s", *count ? ", " : "", rights[i].argv[0]);
	*used = w < 0 || (size_t)w >= len - *used ? *used : *used + (size_t)w;
	*needed |= rights[i].needed;
	(*count)++;
}

/* The commands rlock sends or its scripts call that the server does not know, named in
 * out ("EVALSHA, INCR"), *needed set when one is needed: how many (0 when it knows them
 * all, or when it cannot be told: EVAL refused, which the acl check reports). */
static int unknown_commands(struct node *n, char *out, size_t len, int *needed)
{
	struct resp_reply *r = NULL;
	char err[512], names[NRIGHTS * 20] = "";
	size_t used = 0, nused = 0;
	int count = 0;

	out[0] = '\0';
	for (size_t i = 0; i < NRIGHTS; i++) {
		if (!rights[i].top) {
			int w =
			    snprintf(names + nused, sizeof names - nused, "%s ", rights[i].argv[0]);
			nused =
			    w < 0 || (size_t)w >= sizeof names - nused ? nused : nused + (size_t)w;
		} else if (!strcmp(rights[i].name, "evalsha") || !strcmp(rights[i].name, "eval")) {
			/* sent as they are (EVAL of a no-op, EVALSHA of a SHA-1 no script has) */
			const char *a[] = {rights[i].argv[0], rights[i].argv[1], "0"};
			if (cmdv(n, &r, err, sizeof err, 3, a) == LOCK_OK && is_unknown(r))
				unknown_add(i, out, len, &used, &count, needed);
			resp_free(r);
			r = NULL;
		}
	}
	if (cmd(n, &r, err, sizeof err, "EVAL", unknown_script, "0", names, NULL) == LOCK_OK &&
	    r->type == RESP_ARRAY)
		for (size_t e = 0; e < r->elements; e++)
			for (size_t i = 0; i < NRIGHTS; i++)
				if (!rights[i].top && r->element[e]->type == RESP_STRING &&
				    !strcmp(r->element[e]->str, rights[i].argv[0]))
					unknown_add(i, out, len, &used, &count, needed);
	resp_free(r);
	return count;
}

/* The argv of right i, K and C filled in. */
static int right_argv(const struct node *n, size_t i, const char **argv)
{
	int argc = 0;

	for (int j = 0; j < 5 && rights[i].argv[j]; j++) {
		const char *a = rights[i].argv[j];
		argv[argc++] = !strcmp(a, "K") ? n->key : !strcmp(a, "C") ? n->channel : a;
	}
	if (!strcmp(rights[i].name, "scan"))
		argv[argc++] = "1";
	return argc;
}

/* What ACL refuses a right for: its command, its key, its channel (missing[i]). */
enum { DENY_NONE, DENY_COMMAND, DENY_KEY, DENY_CHANNEL };

/* DRYRUN's refusal, a text with no code ("This user has no permissions to run the 'x'
 * command", "... to access the 'k' key", "... the 'c' channel"; Redis 7.2 and Valkey
 * say "User u has" instead): told by its last word. A command otherwise. */
static int denied_for(const struct resp_reply *r)
{
	static const char key[] = "' key", channel[] = "' channel";

	if (r->len >= sizeof key - 1 && !strcmp(r->str + r->len - (sizeof key - 1), key))
		return DENY_KEY;
	if (r->len >= sizeof channel - 1 &&
	    !strcmp(r->str + r->len - (sizeof channel - 1), channel))
		return DENY_CHANNEL;
	return DENY_COMMAND;
}

/* ACL DRYRUN user, for each right: 1 done (missing[i] set), 0 not available. */
static int acl_dryrun(struct node *n, const char *user, int *missing)
{
	for (size_t i = 0; i < NRIGHTS; i++) {
		const char *argv[ARGS_MAX] = {"ACL", "DRYRUN", user};
		struct resp_reply *r = NULL;
		char err[512];
		int argc = 3 + right_argv(n, i, argv + 3);
		if (cmdv(n, &r, err, sizeof err, argc, argv) != LOCK_OK || r->type == RESP_ERROR) {
			resp_free(r);
			return 0; /* Redis < 7, or the user may not run ACL */
		}
		/* "This user has no permissions...", or OK */
		missing[i] = r->type == RESP_STRING ? denied_for(r) : DENY_NONE;
		resp_free(r);
	}
	return 1;
}

/* Without ACL DRYRUN: the top-level commands run as they are (none changes anything;
 * SUBSCRIBE is not tried), the rest by trial_script. 0, or -1 when the rights inside
 * the scripts could not be tried (why). */
static int acl_trial(struct node *n, int *missing, char *why, size_t len)
{
	for (size_t i = 0; i < NRIGHTS; i++) {
		const char *argv[ARGS_MAX];
		struct resp_reply *r = NULL;
		char err[512];
		if (!rights[i].top || !strcmp(rights[i].name, "subscribe"))
			continue;
		int argc = right_argv(n, i, argv);
		if (cmdv(n, &r, err, sizeof err, argc, argv) == LOCK_OK)
			missing[i] = resp_is_error(r, "NOPERM") ? DENY_COMMAND : DENY_NONE;
		resp_free(r);
	}
	struct resp_reply *r = NULL;
	if (missing[1]) {
		snprintf(why, len, "EVAL is refused");
		return -1;
	}
	if (cmd(n, &r, why, len, "EVAL", trial_script, "1", n->key, n->channel, NULL) != LOCK_OK ||
	    r->type != RESP_ARRAY) {
		if (r)
			log_reason(why, len, "%s",
			           r->type == RESP_ERROR ? r->str : "unexpected reply");
		resp_free(r);
		return -1;
	}
	for (size_t e = 0; e < r->elements; e++)
		for (size_t i = 0; i < NRIGHTS; i++)
			if (r->element[e]->type == RESP_STRING &&
			    !strcmp(r->element[e]->str, rights[i].name))
				missing[i] = DENY_COMMAND;
	resp_free(r);
	return 0;
}

/* The ACL pattern of every name under prefix: prefix, its glob characters taken
 * literally ("[*]"; a backslash, which the output escapes, as '?'), then '*'. */
static void prefix_pattern(const char *prefix, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = prefix; *p && o + 5 < len; p++) {
		if (*p == '*' || *p == '?' || *p == '[') {
			out[o++] = '[';
			out[o++] = *p;
			out[o++] = ']';
		} else {
			out[o++] = *p == '\\' ? '?' : *p;
		}
	}
	out[o++] = '*';
	out[o] = '\0';
}

static void check_acl(struct node *n)
{
	const char *user = n->srv->user ? n->srv->user : "default";
	int missing[NRIGHTS] = {0}, needed = 0, published = 0, keys = 0, channels = 0;
	char names[700] = "", fix[900], pat[300];

	char why[512];
	int dry = acl_dryrun(n, user, missing);
	if (!dry && acl_trial(n, missing, why, sizeof why) < 0)
		finding(n->out, L_WARN, n->srv->name, "acl", "check the user's rights by hand",
		        "cannot try the rights inside rlock's scripts without ACL DRYRUN (%s)",
		        why);
	snprintf(fix, sizeof fix, "ACL SETUSER %s", user);
	for (size_t i = 0; i < NRIGHTS; i++) {
		if (!missing[i])
			continue;
		needed |= rights[i].needed && missing[i] != DENY_CHANNEL;
		published |= missing[i] == DENY_CHANNEL || !strcmp(rights[i].name, "publish");
		/* refused for its key or channel: the command itself is allowed */
		keys |= missing[i] == DENY_KEY;
		channels |= missing[i] == DENY_CHANNEL;
		if (missing[i] != DENY_COMMAND)
			continue;
		snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
		         names[0] ? ", " : "lacks ", rights[i].name);
		snprintf(fix + strlen(fix), sizeof fix - strlen(fix), " +%s", rights[i].name);
	}
	/* The patterns that take in rlock's names: keys and channels all under the prefix. */
	prefix_pattern(n->o->prefix, pat, sizeof pat);
	if (keys) {
		snprintf(names + strlen(names), sizeof names - strlen(names),
		         "%smay not access the keys %s", names[0] ? ", " : "", pat);
		snprintf(fix + strlen(fix), sizeof fix - strlen(fix), " ~%s", pat);
	}
	if (channels) {
		snprintf(names + strlen(names), sizeof names - strlen(names),
		         "%smay not use the channels %s", names[0] ? ", " : "", pat);
		snprintf(fix + strlen(fix), sizeof fix - strlen(fix), " &%s", pat);
	}
	const char *how = dry ? "ACL DRYRUN" : "tried on a throwaway key";
	if (!names[0])
		finding(n->out, L_OK, n->srv->name, "acl", NULL,
		        "user '%s' has the rights rlock uses (%s)", user, how);
	else
		finding(n->out, needed ? L_UNSAFE : L_WARN, n->srv->name, "acl", fix,
		        "user '%s' %s (%s)%s", user, names, how,
		        needed ? ": locks cannot be taken, renewed or released"
		        : published
		            ? ": a release, a --fair grant or a --supersede request cannot "
		              "publish its wake-up (the scripts go on without it): waiters find "
		              "the lock free on their own timer, a slower hand-off"
		            : ": waiting, --list, --history, --lock-delay or --wait-replicas "
		              "fall short");
}

/* Every check of one node; 0, or -1 when it is unreachable. */
static int check_node(struct node *n)
{
	int64_t off0 = 0, rtt0 = 0;
	char why[512];

	if (check_reach(n) < 0)
		return -1;
	if (clock_offset(n, &off0, &rtt0, why, sizeof why) < 0)
		rtt0 = -1;
	check_version(n);
	check_scripts(n);
	check_memory(n);
	check_persistence(n);
	int cluster = info_int(n, "cluster_enabled", 0) == 1;
	check_role(n, cluster);
	if (cluster) {
		check_cluster(n);
		cluster_key(n);
	}
	check_acl(n);
	if (rtt0 >= 0)
		check_clock(n, off0, rtt0);
	else
		finding(n->out, L_WARN, n->srv->name, "clock", "allow TIME for the user (+time)",
		        "cannot tell the server's clock: %s", why);
	return 0;
}

/* What the nodes say together: the Sentinel master found, every Cluster master
 * reachable, a Redlock majority of distinct servers. */
struct seen {
	int cluster, unreachable;
	char run_id[STORE_NODES_MAX][48];
};

static void check_topology(struct out *out, const struct check_ask *o, const struct seen *w,
                           const char *master)
{
	const char *name = o->sentinels ? "sentinel" : o->redlock ? "redlock" : "cluster";
	int n = out->nodes, bad = w->unreachable;

	if (o->sentinels)
		finding(out, L_OK, name, "topology", NULL,
		        "Sentinel '%s' names %s as master (ROLE confirmed)", o->master, master);
	/* What the run refuses (quorum.c, issue 41) is bad-url, as store_refused_url says
	 * when the nodes that answered were a quorum (check_run). */
	out->bad_url |= w->cluster && o->redlock;
	if (w->cluster && o->redlock)
		finding(out, L_UNSAFE, name, "topology",
		        "give one node's URL: rlock finds the Cluster's other nodes",
		        "several URLs are Redlock nodes, and these are a Redis Cluster's nodes: "
		        "rlock refuses them (exit 64)");
	else if (w->cluster)
		finding(out, bad ? L_UNSAFE : L_OK, name, "topology",
		        bad ? "bring every master up, or let its replica take over" : NULL,
		        "Cluster: %d of %d masters reachable", n - bad, n);
	if (o->redlock)
		finding(out,
		        bad == 0          ? L_OK
		        : n - bad > n / 2 ? L_WARN
		                          : L_UNSAFE,
		        name, "topology", bad ? "bring every Redlock node up" : NULL,
		        "Redlock: %d of %d nodes reachable", n - bad, n);
	for (int i = 0; o->redlock && i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (w->run_id[i][0] && !strcmp(w->run_id[i], w->run_id[j])) {
				out->bad_url = 1;
				finding(out, L_UNSAFE, name, "topology",
				        "give independent servers: one vote each",
				        "Redlock nodes %d and %d are one server (run_id %.12s...)",
				        i + 1, j + 1, w->run_id[i]);
			}
}

/* Every node in turn. */
static void check_nodes(struct store *s, const struct check_ask *o, struct out *out, struct seen *w,
                        char *master, size_t mlen)
{
	struct node n = {.s = s, .o = o, .out = out};
	char err[512];

	unsigned char rnd[8] = {0};
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		memcpy(rnd, &(int64_t){clock_us(CLOCK_REALTIME)}, sizeof rnd); /* a name only */
	snprintf(n.tag, sizeof n.tag, "rlock-check-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
	         rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	set_key(&n, -1);
	for (int k = 0; k < STORE_NODES_MAX; k++) {
		int64_t cap = clock_ms() + 4 * (o->connect_timeout_ms + o->io_timeout_ms);
		n.srv = store_node(s, k, cap, err, sizeof err);
		if (!n.srv) {
			if (err[0])
				finding(out, L_UNSAFE, o->server, "reach",
				        reach_fix(
				            out, err,
				            "check the URL, the network and that the servers run"),
				        "%s", err);
			return;
		}
		if (k == 0)
			snprintf(master, mlen, "%s", n.srv->name);
		out->nodes++;
		w->unreachable += check_node(&n) < 0;
		w->cluster |= info_int(&n, "cluster_enabled", 0) == 1;
		info_field(&n, "run_id", w->run_id[k], sizeof w->run_id[k]);
		resp_free(n.info);
		n.info = NULL;
	}
}

/* What one sentinel said (sentinel_view), asked before the nodes (the master is then
 * found through one that answered, not after the deadlines of those that do not), and
 * printed after them. */
struct sentinel_said {
	int rc; /* sentinel_view's: 0, -1 no answer, -2 refused */
	struct sentinel_view v;
	const char *fix; /* rc < 0 */
	char err[512];
};

/* Ask every sentinel of st once: the index of the first that knows the master (-1:
 * none), *answered how many answered. */
static int ask_sentinels(struct out *out, const struct sentinel *st, const struct check_ask *o,
                         struct sentinel_said *said, int *answered)
{
	int first = -1;

	*answered = 0;
	for (int i = 0; i < st->n; i++) {
		struct sentinel_said *s = &said[i];
		int64_t cap = clock_ms() + 2 * (o->connect_timeout_ms + o->io_timeout_ms);
		s->rc = sentinel_view(st, i, cap, &s->v, s->err, sizeof s->err);
		/* One that refuses our login is up: the fix is the sentinels' credentials. */
		s->fix = s->rc == -2 ? "give the sentinels' user and password (the URL's "
		                       "user:password@, --sentinel-user, --sentinel-password-file "
		                       "or RLOCK_SENTINEL_PASSWORD)"
		         : s->rc < 0
		             ? reach_fix(out, s->err, "bring it up, or drop it from the URL")
		             : NULL;
		*answered += s->rc == 0;
		if (s->rc == 0 && s->v.knows && first < 0)
			first = i;
	}
	return first;
}

/* One sentinel's finding: 1 when it answered, with *known set. */
static int check_sentinel(struct out *out, const struct sentinel *st, int i,
                          const struct sentinel_said *s, int *known, char *addr, size_t alen)
{
	const char *name = st->sent[i].name;

	if (s->rc < 0) {
		finding(out, L_WARN, name, "sentinel", s->fix, "%s", s->err);
		return 0;
	}
	*known = s->v.knows;
	snprintf(addr, alen, "%s", s->v.addr);
	if (!s->v.knows)
		finding(out, L_WARN, name, "sentinel",
		        "SENTINEL MONITOR the master on it, or drop it from the URL",
		        "does not know master '%s': it takes no part in its failovers", st->master);
	else
		finding(out, s->v.quorum == 1 ? L_OK : L_WARN, name, "sentinel",
		        s->v.quorum == 1 ? NULL
		                         : "bring the sentinels up: a majority of those that know "
		                           "the master must answer for a failover",
		        "knows master '%s' at %s; CKQUORUM: %s%s", st->master, s->v.addr,
		        s->v.words, s->v.quorum == 0 ? " (a failover cannot be authorized)" : "");
	return 1;
}

/* The sentinels themselves (a redis-sentinel:// URL): each one's answer, then how many
 * answered and know the master, and whether they name the same address. */
static void check_sentinels(struct out *out, const struct sentinel *st,
                            const struct sentinel_said *said)
{
	int answered = 0, known = 0, differ = 0;
	char first[URL_HOST_MAX + 8] = "";

	for (int i = 0; i < st->n; i++) {
		char addr[URL_HOST_MAX + 8];
		int k = 0;
		answered += check_sentinel(out, st, i, &said[i], &k, addr, sizeof addr);
		known += k;
		if (k && first[0] && strcmp(first, addr) != 0)
			differ = 1;
		if (k && !first[0])
			snprintf(first, sizeof first, "%s", addr);
	}
	int all = answered == st->n && known == st->n && !differ;
	finding(out, all ? L_OK : L_WARN, "sentinel", "sentinels",
	        all ? NULL : "bring every sentinel of the URL up, monitoring the master",
	        "%d of %d sentinels answered, %d know master '%s'%s", answered, st->n, known,
	        st->master,
	        differ ? "; they name different addresses (a failover under way?)" : "");
}

/* None of st's sentinels answered: the run's line (sentinel_discover's), from what
 * each said. */
static void no_sentinel(char *err, size_t errlen, const struct sentinel *st,
                        const struct sentinel_said *said)
{
	size_t used = (size_t)snprintf(
	    err, errlen, "no master found for '%s' (each sentinel asked once)", st->master);

	for (int i = 0; i < st->n && used < errlen; i++)
		used += (size_t)snprintf(err + used, errlen - used, "%s %.200s", i ? ";" : ":",
		                         said[i].err);
}

int check_run(struct store_config *cfg, const struct check_ask *o)
{
	struct out out = {.json = o->json};
	struct seen w = {0};
	struct store *s = NULL;
	char err[512], master[300] = "";

	if (o->json)
		fputs("{\"schema\":1,\"findings\":[", stdout);
	/* Connected as a run connects, so that the URLs are judged by the run's rule
	 * (store_refused_url): what it refuses (64) is the verdict bad-url, whatever the
	 * other nodes say. A Redlock quorum short of nodes is checked node by node. */
	int opened = store_resolve(cfg, clock_ms() + o->connect_timeout_ms, err, sizeof err);
	/* A Sentinel URL: its sentinels first, each once; the master is found through one
	 * that knows it, and not at all when none answered (each costs its deadline once). */
	const struct sentinel *st = opened == STORE_OK ? sentinel_of(cfg) : NULL;
	static struct sentinel_said said[URL_SENTINELS_MAX];
	int answered = 0;
	if (st) {
		int k = ask_sentinels(&out, st, o, said, &answered);
		if (k >= 0)
			sentinel_ask_first(cfg, k);
		if (answered == 0) {
			no_sentinel(err, sizeof err, st, said);
			opened = STORE_ERR;
		}
	}
	if (opened == STORE_OK)
		opened = store_open(&s, cfg, 1, STORE_NO_CAP, err, sizeof err);
	if (store_refused_url(opened)) {
		out.bad_url = 1;
		finding(&out, L_UNSAFE, o->server, "reach",
		        store_fault_config() ? config_fix()
		                             : "give independent masters as Redlock nodes (a "
		                               "Cluster: one node's URL; Sentinel: "
		                               "redis-sentinel://)",
		        "%s", err);
	} else if (opened == STORE_ERR && o->redlock &&
	           store_open(&s, cfg, 0, STORE_NO_CAP, err, sizeof err) == STORE_OK)
		opened = STORE_OK;
	if (opened == STORE_OK)
		check_nodes(s, o, &out, &w, master, sizeof master);
	else if (!out.bad_url)
		finding(&out, L_UNSAFE, o->server, "reach",
		        reach_fix(&out, err, "check the URL, the network and that the servers run"),
		        "%s", err);
	store_close(s);
	if (out.reached > 0)
		check_topology(&out, o, &w, master);
	if (o->tls_insecure) /* the connection worked; who answered it is not known */
		finding(
		    &out, L_WARN, o->server, "tls",
		    "give --cacert (the CA that signed the servers' certificates) and drop "
		    "--insecure",
		    "the servers' certificates are not verified (--insecure): anyone on the path "
		    "can pose as a server and grant any lock");
	else if (o->tls && out.reached > 0)
		finding(&out, L_OK, o->server, "tls", NULL,
		        "the servers' certificate chains and host names are verified");
	if (st)
		check_sentinels(&out, st, said);
	int rc = out.bad_url                        ? RL_EX_USAGE
	         : out.reached == 0 && out.bad_file ? RL_EX_NOINPUT
	         : out.reached == 0                 ? RL_EX_UNAVAILABLE
	         : out.count[L_UNSAFE]              ? 2
	         : out.count[L_WARN]                ? 1
	                                            : 0;
	const char *verdict = rc == RL_EX_USAGE         ? "bad-url"
	                      : rc == RL_EX_NOINPUT     ? "bad-file"
	                      : rc == RL_EX_UNAVAILABLE ? "unreachable"
	                                                : level_name[rc];
	if (o->json)
		printf("],\"verdict\":\"%s\",\"ok\":%d,\"warn\":%d,\"unsafe\":%d,\"exit\":%d}\n",
		       verdict, out.count[L_OK], out.count[L_WARN], out.count[L_UNSAFE], rc);
	else
		printf("verdict: %s (%d ok, %d warn, %d unsafe)\n", verdict, out.count[L_OK],
		       out.count[L_WARN], out.count[L_UNSAFE]);
	return rc;
}
