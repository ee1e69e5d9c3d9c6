/* SPDX-License-Identifier: MIT */
/* --check: is the deployment set up so that a lock can be trusted? Every node behind
 * the seam (the one server, the Sentinel master, each Cluster master, each Redlock
 * node) is asked, read-only: reachability and round trip, version and the scripts,
 * maxmemory-policy, persistence, role and replicas, topology (and a Sentinel URL's
 * sentinels: answered, master known, CKQUORUM), the clock offset, the
 * ACL rights rlock needs. One line per finding (ok, warn, unsafe: the fact and the
 * fix), then a verdict; or one JSON object. Nothing is changed; a right tried without
 * ACL DRYRUN uses a throwaway key under the prefix, deleted at once. */
#ifndef RLOCK_CHECK_H
#define RLOCK_CHECK_H

#include "store.h"

/* What --check needs of the options, built by the front end (main.c). */
struct check_ask {
	const char *server; /* the server's URL without a password, for messages */
	const char *prefix; /* key prefix (the throwaway key's) */
	int json;
	int redlock;        /* several URLs: a Redlock quorum */
	int sentinels;      /* a Sentinel URL: how many sentinels it names; else 0 */
	const char *master; /* a Sentinel URL: the master's name */
	int wait_replicas;  /* --wait-replicas N */
	int wait_aof_local; /* --wait-aof LOCAL[,REPLICAS] */
	int wait_aof_replicas;
	int tls;          /* TLS to the servers (--tls or rediss://) */
	int tls_insecure; /* --insecure: the servers' certificates are not verified */
	int64_t connect_timeout_ms, io_timeout_ms;
};

/* Resolve, open, check every node, print. 0 all ok, 1 warnings only, 2 unsafe, 69 no
 * node reachable (the caller flushes stdout: 74 when it cannot be written). */
int check_run(struct store_config *cfg, const struct check_ask *o);

#endif
