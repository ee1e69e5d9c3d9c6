/* SPDX-License-Identifier: MIT */
/* The holds a process inherits from its environment, which an ancestor rlock (or
 * `eval "$(rlock --acquire)"`) exported: RLOCK_KEY + RLOCK_TOKEN (+ RLOCK_FENCE), and
 * RLOCK_KEYS + RLOCK_TOKENS (+ RLOCK_FENCES), the same words in the same order. Read by
 * a nested run (reenter.h) and by --acquire inside a job (keeper.h), which lists them on. */
#ifndef RLOCK_INHERIT_H
#define RLOCK_INHERIT_H

#include "hold.h"
#include "lock.h"
#include "store.h"
#include <stddef.h>
#include <stdint.h>

struct inherited {
	char key[LOCK_KEY_MAX];
	char token[LOCK_TOKEN_LEN + 1];
	char fence[24];
	/* reenter_plan: this server's once (store_knew_token), and held here no more, or by
	 * a holder gone: stale variables, not passed on */
	int stale;
	/* this server said its token holds the key now (a live ancestor: reenter_plan,
	 * inherited_gone) */
	int live;
	/* reenter_plan, a granted hold: the lease length its holder's record gives, 0
	 * unknown (the command's RLOCK_TTL_MS), */
	long long ttl_ms;
	int keeper; /* and its holder is an --acquire keeper (which sends no --warn signal) */
	int asked;  /* reenter_plan: its key is a name asked for */
};

struct inherited_holds {
	int n;                /* inherited holds read from the environment, */
	struct inherited *in; /* each of them (NULL when none) */
};

/* Read the inherited holds (ih->n, ih->in): RLOCK_KEY + RLOCK_TOKEN first, then the
 * other pairs of RLOCK_KEYS + RLOCK_TOKENS, once each, every one of them (no cap: a
 * pair left unread would be passed on unchecked, or its name waited for by a nested
 * run of the tree that holds it); a pair that is no token of ours is skipped. ih is
 * zeroed or read before (what it held is freed). Out of memory: exits 71 with a line. */
void inherited_read(struct inherited_holds *ih);

/* The next space-separated word of *p (RLOCK_KEYS' and the others' form): its start
 * and length (0 at the end); *p moves past it. */
size_t inherit_word(const char **p, const char **start);

/* Is h a pair rlock writes: a token of 32 lowercase hex digits, a key PREFIX{NAME} of a
 * valid prefix and name? 1 yes, 0 no (another tool's or a hand-made variable's: it
 * names no hold of rlock's, and a --held inside the command would refuse it, 64). */
int inherited_ours(const struct inherited *h);

/* Into *l (only its key names are set) the lock h's key names: 0, or -1 when h's key
 * is not of rlock's form PREFIX{NAME} (or no randomness). */
int inherited_lock(const struct inherited *h, struct lock *l);

/* Are h's variables stale: not a pair of rlock's (inherited_ours), or does this server
 * say (each request within io_ms, and by deadline_ms) that h's token holds its key no
 * more and that it held it once (store_knew_token)? 1 stale; 0 not (held; never this
 * server's: another database, server or Redlock set may hold it; cannot say). h->live
 * set when it holds, and h->fence to the server's fence for it. Read by --acquire (the
 * job's holds it lists on) and by a run (the inherited holds its command is told of
 * besides the names it asks for). */
int inherited_gone(struct store *s, struct inherited *h, int64_t io_ms, int64_t deadline_ms);

#endif
