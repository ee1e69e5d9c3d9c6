/* SPDX-License-Identifier: MIT */
/* Re-entrance: a nested rlock under locks its process tree already holds. The holds it
 * inherits come from the environment (inherit.h). An inherited hold grants a name asked
 * for only when the server says its token is the live holder now, in a mode at least as
 * strong as the one asked for (exclusive grants everything; shared grants -s; a permit
 * of --limit N grants -l N); the other names are taken as a normal run takes them. A
 * request that could only wait for its own ancestor (exclusive, or another kind, on a
 * name held shared or as a permit) is a usage error (64). */
#ifndef RLOCK_REENTER_H
#define RLOCK_REENTER_H

#include "hold.h"
#include "inherit.h"
#include "lock.h"
#include "store.h"

struct reenter {
	int nnames; /* the names asked for (o->names before the plan) */
	const char *names[HOLD_LOCKS_MAX];
	int held[HOLD_LOCKS_MAX];  /* per name: index in ih.in[] that grants it, or -1 */
	struct inherited_holds ih; /* none allocated without inherited holds */
};

/* What a nested rlock asks for (the front end builds it). */
struct reenter_ask {
	const char *prefix;
	const char **names; /* the names asked for (sorted); then only those left to take */
	int nnames;
	int64_t ttl_ms, io_timeout_ms;
	enum lock_mode mode; /* and limit: how they are asked for */
	int limit;
	int keeper; /* --acquire */
	/* monotonic ms by which the plan's requests end too (-w: they are part of the
	 * wait), INT64_MAX: one io-timeout each */
	int64_t deadline_ms;
	/* waiting (not -n): a server that cannot say now is asked again until deadline_ms,
	 * pausing on sigfd (a terminating signal ends the pause) */
	int waits;
	int sigfd;
	/* the caller's RLOCK_WARN_SIGNAL is set: the holder of each live inherited hold not
	 * asked for is asked too whether it is a keeper or gone (neither sends a --warn
	 * signal: that variable is then not passed on, main.c) */
	int warn_inherited;
};

/* Read the inherited holds and ask the store (within io_timeout_ms) which names of
 * o->names they grant. Then o->names / o->nnames keep only the names still to take
 * (sorted as before). Returns the number of names left (0: the inherited holds
 * grant everything: run the command directly). A name the server cannot speak for (an
 * error, no reply) is left to take, as a normal run would. Exits 64 with one line on a
 * request that would wait for its own ancestor. With --acquire (o->keeper) nothing is
 * granted (the keeper holds a lock of its own): a name the tree holds exclusive exits
 * 64, and one it holds shared or as a permit is taken. */
int reenter_plan(struct reenter *r, struct store *s, struct reenter_ask *o);

/* Is the process that holds token on l gone (the status's record of it: a keeper or an
 * rlock on this host, in this boot and pid namespace), so that nothing renews the lease
 * that token names, which then ends by its TTL? Its pid into *pid. 0 when that cannot
 * be told (another host or pid namespace, no record, no reply within io_timeout_ms or
 * by deadline_ms): trusted. */
int reenter_holder_gone(struct store *s, const struct lock *l, const char *token,
                        int64_t io_timeout_ms, int64_t deadline_ms, long long *pid);

/* The command's environment: RLOCK_KEY/RLOCK_TOKEN/RLOCK_FENCE name the first name
 * asked for (inherited, or the first of the ntaken locks taken now, in order); RLOCK_KEYS,
 * RLOCK_TOKENS and RLOCK_FENCES list every lock the command runs under (the names asked for in
 * sorted order, then the inherited holds not asked for), or are unset when that is one lock. */
void reenter_environment(const struct reenter *r, const struct lock *taken, int ntaken);

#endif
